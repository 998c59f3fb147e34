"""The jobs, one module each; the command-line jobs also own their command.

A command module defines ``COMMAND``, ``add_arguments(parser)`` (its flags, and
``parser.set_defaults(run=main)``) and ``main(args) -> int`` (its checks, its run, what it
prints and draws, its exit status); ``embedding_parity.cli`` only builds the subparsers from
the list of jobs and dispatches. The computing part of every job takes plain values and returns
data, so tests and other jobs call it without a command line.

- ``command``: what the commands share: common flags, their checks, the parity report.
- ``parity``: every backend on the same weights, held to one reference (the core of all jobs).
- ``seed``: command ``seed`` (the default), the seed demo and its variations on random tables.
- ``bias``: ALiBi and T5, position as a bias on the attention scores (``seed --scheme``).
- ``text``: command ``text``, real text on real tables (packaged models or your own file).
- ``demos``: command ``demo``, the similarity and word-order demonstrations.
- ``arrays``: saving every backend's arrays as one .npz.
- ``train``: command ``train``, the tiny model (``embedding_parity.training``) in lockstep.
- ``extrapolate``: train short, test long (``train --extrapolate``).
- ``shard``: command ``shard``, a table split across devices and processes.
- ``vision``: command ``vision``, positions on a grid of patches: resized, sin-cos and 2-D
  RoPE tables on every backend, and their pictures.
- ``page``: command ``page``, everything the explorer page shows.
- ``check``: command ``check``, anyone's implementation against a contract; the matrix.
"""
