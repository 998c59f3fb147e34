"""The jobs compare.py runs, one module each. A job takes plain values (never the parsed
command line), returns what it computed and raises ValueError, TypeError or IndexError for
bad input. Pictures are drawing/'s; printing and exit codes are compare.py's.

- ``parity``: every backend on the same weights, held to one reference (the core of all jobs).
- ``seed``: the seed demo and its variations, on random tables.
- ``bias``: ALiBi and T5, position as a bias on the attention scores: the bias per head and
  the attention it makes, on every backend.
- ``text``: real text on real tables (packaged models or your own file).
- ``demos``: the similarity and word-order demonstrations.
- ``arrays``: saving every backend's arrays as one .npz.
- ``train``: the same tiny model (``training/``) trained in lockstep in every backend.
"""
