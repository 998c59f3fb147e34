"""TensorFlow's lookups, tf.gather and tf.nn.embedding_lookup, eagerly and under XLA, Keras's
Embedding on the TensorFlow backend (KERAS_BACKEND=tensorflow), and the gradient
tf.GradientTape gives."""

import keras
import tensorflow as tf


def _positions(start, token_ids):
    return tf.range(start, start + token_ids.shape[-1])


def gather(token_table, position_table, token_ids, start):
    rows = tf.gather(token_table, token_ids)
    return rows + tf.gather(position_table, _positions(start, token_ids))


def embedding_lookup(token_table, position_table, token_ids, start):
    rows = tf.nn.embedding_lookup(token_table, token_ids)
    return rows + tf.nn.embedding_lookup(position_table, _positions(start, token_ids))


# the same lookup compiled by XLA (traced again for each start, shape and dtype)
gather_xla = tf.function(gather, jit_compile=True)


def keras_embedding(token_table, position_table, token_ids, start):
    token, position = _embedding(token_table), _embedding(position_table)
    return token(token_ids) + position(_positions(start, token_ids))


def _embedding(table):
    (rows, dim), dtype = table.shape, table.dtype.name
    return keras.layers.Embedding(rows, dim, dtype=dtype, weights=[table])


def gather_gradient(token_table, token_ids, upstream):
    with tf.GradientTape() as tape:
        tape.watch(token_table)
        rows = tf.gather(token_table, token_ids)
    grad = tape.gradient(rows, token_table, output_gradients=upstream)
    return tf.convert_to_tensor(grad)  # tf.gather's gradient is IndexedSlices: summed dense
