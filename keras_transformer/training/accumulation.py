"""Gradient accumulation inside one training step: a large batch on the memory of a slice."""

import keras
import tensorflow as tf

from keras_transformer.layers.masks import PAD_ID


def accumulated_train_step(model, data, micro_batches):
    """One optimizer update from a batch that runs through the model in slices.

    The batch's rows are cut into `micro_batches` consecutive slices (fewer
    if it has fewer rows). Each slice runs forward and backward on its own,
    so only one slice's activations are alive at a time, and its loss is
    weighted by its share of the batch's target tokens: the summed gradient
    is the gradient of the whole batch's mean token loss. The optimizer
    then updates the weights once, outside any conditional, which is why
    this also works under `tf.distribute` strategies, where Keras'
    optimizer-level accumulation fails (keras-team/keras#17429).

    Args:
        model: a compiled Keras model whose loss is the mean over the target
            tokens that are not `PAD_ID` (`MaskedSparseCategoricalCrossentropy`).
        data: a batch `((source_ids, target_in_ids), target_out_ids)`,
            optionally with sample weights `(B, T)` as a third element.
        micro_batches: N, the number of slices.

    Returns:
        The model's metrics after the update, as `keras.Model.train_step`
        returns them.

    Example:
    ```python
    class AccumulatingModel(keras.Model):
        def train_step(self, data):
            return accumulated_train_step(self, data, micro_batches=4)
    ```
    """
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    if not model.built:  # the weights must exist before the loop that reads them
        model.build(tf.nest.map_structure(lambda t: tuple(t.shape), x))
    weights = model.trainable_weights
    rows = tf.shape(y)[0]
    slices = tf.minimum(micro_batches, rows)
    tokens = tf.maximum(tf.math.count_nonzero(y != PAD_ID, dtype="float32"), 1.0)

    def run_slice(i, gradients, loss):
        start, stop = i * rows // slices, (i + 1) * rows // slices
        x_i, y_i = tf.nest.map_structure(lambda t: t[start:stop], (x, y))  # (b, ...) each
        w_i = None if sample_weight is None else sample_weight[start:stop]
        share = tf.math.count_nonzero(y_i != PAD_ID, dtype="float32") / tokens
        with tf.GradientTape() as tape:
            y_pred = model(x_i, training=True)  # (b, T, V)
            loss_i = model.compute_loss(x_i, y_i, y_pred, w_i, training=True) * share
            scaled = model.optimizer.scale_loss(loss_i)
        model.compute_metrics(x_i, y_i, y_pred, sample_weight=w_i)
        gradients_i = tape.gradient(scaled, weights)
        gradients = [
            total if g is None else total + tf.convert_to_tensor(g)  # embedding slices: dense
            for total, g in zip(gradients, gradients_i, strict=True)
        ]
        return i + 1, gradients, loss + loss_i

    _, gradients, loss = tf.while_loop(
        lambda i, *_: i < slices,
        run_slice,
        (tf.constant(0), [tf.zeros(w.shape, w.dtype) for w in weights], tf.constant(0.0)),
    )
    model.optimizer.apply_gradients(zip(gradients, weights, strict=True))
    # `compute_loss` divides by the replicas in sync; the logged loss is per replica.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    model._loss_tracker.update_state(loss * replicas, sample_weight=rows)
    return model.get_metrics_result()
