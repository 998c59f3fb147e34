"""A tiny model trained in lockstep in NumPy, PyTorch and JAX, to show that the tables are
learned and that position is what lets a model use word order.

- ``task``: the data ("dog bites man": the target is the subject), the shared initial
  weights and the shared batches.
- ``numpy_model``, ``torch_model``, ``jax_model``: the same model and the same Adam, each
  the way its framework says it (by hand; nn.Module and torch.optim.Adam; a pure loss
  under jax.grad and optax.adam), with the same names in the same order.
"""
