"""The token table split across devices and processes (docs/sharding.md).

``reference``: the two strategies, row-parallel and column-parallel, in NumPy over a list of
shards, the readable reference; ``jax_shards``: the same over a JAX ``Mesh`` with
``NamedSharding`` and ``shard_map`` (or the compiler's own gather); ``jax_processes``: that
mesh spread over N processes with ``jax.distributed``; ``torch_shards``: N
processes with ``torch.distributed`` (gloo, loopback), by hand and with DTensor's
``RowwiseParallel``.
"""
