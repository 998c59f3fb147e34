"""embedding-parity: the transformer input layer in NumPy, PyTorch and JAX, bit for bit.

``backends`` (beside this package) is the library: one interface, one module per framework.
This package holds everything built on it, one subpackage per area:

- ``jobs``: what the command line runs, one module per command (each owns its flags);
- ``results``: what the jobs return, one module per job's result, below both the job that
  computes it and the picture that draws it;
- ``drawing``: pictures and text tables of those results (no picture imports a job);
- ``training``: the tiny model the train job trains, once per framework;
- ``sharding``: the token table split across devices and processes;
- ``page``: the explorer page.

``python -m embedding_parity``, the ``embedding-parity`` script and ``python compare.py`` are
one command line (``embedding_parity.cli``).
"""
