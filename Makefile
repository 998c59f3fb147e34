# Two commands for a fresh clone: `make compare` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Backends whose absence fails the test run instead of shrinking it (see tests/test_registry.py).
REQUIRED_BACKENDS ?= numpy,torch,jax

.PHONY: install compare test clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,test]'
	touch $@

compare: install
	MPLBACKEND=Agg $(PY) compare.py

test: install
	REQUIRED_BACKENDS=$(REQUIRED_BACKENDS) MPLBACKEND=Agg $(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis compare.png
