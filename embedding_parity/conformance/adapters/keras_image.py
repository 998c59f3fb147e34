"""Keras 3's ``keras.ops.image.resize`` on a position table, on the backend KERAS_BACKEND names
(the row's environment): one call, whose bicubic each backend computes its own way (torch's
through F.interpolate, JAX's through jax.image.resize, NumPy's and TensorFlow's their own).

f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind): the grid's rows an image
(1, h0, w0, D), channels last as Keras's default data format, resized to new_grid."""

import keras


def _resized(interpolation: str):
    def f(table, old_grid, new_grid, prefix_tokens):
        dim = table.shape[-1]
        grid = keras.ops.reshape(table[prefix_tokens:], (1, *old_grid, dim))
        resized = keras.ops.image.resize(grid, tuple(new_grid), interpolation=interpolation)
        rows = keras.ops.reshape(resized, (-1, dim))
        return keras.ops.concatenate([table[:prefix_tokens], rows], axis=0)

    return f


bicubic = _resized("bicubic")
bilinear = _resized("bilinear")
