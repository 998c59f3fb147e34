"""What the jobs return: one module per job's result, the dataclasses a job fills and a picture
draws.

A result sits below both: it imports no job and no picture, and runs nothing; it only reads
its own numbers (a verdict, a tolerance). A job computes one and draws it with its picture; a
picture reads it and imports no job.

- ``parity``: each backend's output held to one reference (``Result``), and a run's (``Run``);
- ``bias``: ALiBi's and T5's bias and attention per backend (``BiasRun``), T5's settings;
- ``demos``: the two demonstrations (``Similarity``, ``Order``);
- ``train``: the training curves and their drift (``Training``);
- ``extrapolate``: train short, test long (``Extrapolation``);
- ``shard``: every sharded strategy of every backend against one device (``Sharded``).
"""
