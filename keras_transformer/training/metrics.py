"""Token accuracy over real target tokens."""

import keras
from keras import ops

from keras_transformer.constants import PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Mean):
    """Share of real target tokens (id != 0) whose argmax prediction is right.

    Args:
        name: name of the metric. Defaults to `"masked_accuracy"`.
        dtype: dtype of the metric's state.

    Call arguments (`update_state`):
        y_true: integer target ids `(B, T)`, 0 = padding.
        y_pred: logits or probabilities `(B, T, V)`.
        sample_weight: optional weights broadcastable to `(B, T)`.

    Examples:
        ```python
        metric = MaskedAccuracy()
        metric.update_state(np.array([[2, 1, 0]]), np.eye(3)[None, [2, 0, 0]])
        metric.result()  # 0.5: one of the two real tokens is right
        ```
    """

    def __init__(self, name="masked_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        predicted = ops.argmax(y_pred, axis=-1)  # (B, T)
        y_true = ops.cast(y_true, predicted.dtype)
        correct = ops.cast(ops.equal(y_true, predicted), "float32")
        weights = ops.cast(ops.not_equal(y_true, PAD_ID), "float32")
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        return super().update_state(correct, sample_weight=weights)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
