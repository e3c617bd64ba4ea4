"""Cross-entropy over real target tokens, with label smoothing (§5.4)."""

import keras
from keras import ops

from keras_transformer.constants import PAD_ID
from keras_transformer.validation import check_rate


def smoothed_cross_entropy(logits, labels, label_smoothing):
    """Per-token cross-entropy against the label-smoothed target, from logits.

    With z the logits, V the vocabulary size and eps the smoothing:

        loss = (1 - eps) * -log p(y) + eps * mean_v(-log p(v))
             = logsumexp(z) - (1 - eps) * z_y - eps * mean(z)
        dloss/dz = softmax(z) - (1 - eps) * one_hot(y) - eps / V

    The gradient is written out rather than derived through the ops, and
    the label's term is subtracted at the label only (a scatter of one
    number per position, not a `(B, T, V)` one-hot), so a training step
    makes few passes over the logits instead of the several that automatic
    differentiation of the softmax takes.

    Args:
        logits: float32 `(..., V)`.
        labels: int32 `(...)`, values in [0, V).
        label_smoothing: eps in [0, 1).

    Returns:
        float32 `(...)`.
    """
    vocab_size = logits.shape[-1]

    @ops.custom_gradient
    def cross_entropy(z):
        shift = ops.stop_gradient(ops.max(z, axis=-1, keepdims=True))  # (..., 1)
        exp = ops.exp(z - shift)  # (..., V)
        total = ops.sum(exp, axis=-1)  # (...)
        logsumexp = shift[..., 0] + ops.log(total)  # (...)
        label_logit = ops.take_along_axis(z, labels[..., None], axis=-1)[..., 0]
        loss = (
            logsumexp
            - (1.0 - label_smoothing) * label_logit
            - label_smoothing * ops.mean(z, axis=-1)
        )

        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # (...)
            spread = upstream * (label_smoothing / vocab_size)  # (...)
            g = exp * (upstream / total)[..., None] - spread[..., None]  # (..., V)
            shape = ops.shape(g)
            g = ops.reshape(g, (-1, vocab_size))  # (N, V)
            flat_labels = ops.reshape(labels, (-1,))  # (N,)
            at_label = ops.take_along_axis(g, flat_labels[:, None], axis=-1)[:, 0]  # (N,)
            at_label = at_label - ops.reshape((1.0 - label_smoothing) * upstream, (-1,))
            rows = ops.arange(ops.shape(flat_labels)[0], dtype=flat_labels.dtype)
            g = ops.scatter_update(g, ops.stack([rows, flat_labels], axis=1), at_label)
            return ops.reshape(g, shape)  # (..., V)

        return loss, grad

    return cross_entropy(logits)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse cross-entropy from logits that ignores padding (id 0).

    With label smoothing eps the target distribution is
    (1 - eps) * one_hot(y) + eps / V, as in
    `keras.losses.CategoricalCrossentropy(label_smoothing=eps)`:

        loss = (1 - eps) * -log p(y) + eps * mean_v(-log p(v))

    computed in float32 by `smoothed_cross_entropy`. Padded positions
    (`y_true == 0`) get weight 0, and the default reduction divides the sum
    by the number of real tokens (times their sample weights), so the loss
    is the mean over real tokens whatever the padding.

    Args:
        label_smoothing: eps in [0, 1). Defaults to 0.1 (the paper).
        reduction: a Keras reduction. Defaults to
            `"mean_with_sample_weight"` (mean over real tokens); `None`
            gives per-token losses `(B, T)`, 0 at padding.
        name: name of the loss.
        dtype: dtype of the loss computation. Defaults to float32.

    Call arguments:
        y_true: integer target ids `(B, T)`, 0 = padding.
        y_pred: logits `(B, T, V)`.
        sample_weight: optional weights `(B, T)`, or `(B,)` one per row.

    Returns:
        A scalar, or `(B, T)` per-token losses with `reduction=None`.

    Raises:
        ValueError: if `label_smoothing` is outside [0, 1).

    Examples:
        ```python
        loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
        loss(np.array([[3, 1, 0]]), np.random.rand(1, 3, 8))  # mean over 2 tokens
        ```
    """

    def __init__(
        self,
        label_smoothing=0.1,
        reduction="mean_with_sample_weight",
        name="masked_sparse_categorical_crossentropy",
        dtype=None,
    ):
        check_rate("label_smoothing", label_smoothing)
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.label_smoothing = label_smoothing

    def __call__(self, y_true, y_pred, sample_weight=None):
        weights = ops.cast(ops.not_equal(y_true, PAD_ID), "float32")  # (B, T)
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            while len(sample_weight.shape) < len(weights.shape):  # per-row weights (B,)
                sample_weight = sample_weight[..., None]
            weights = weights * sample_weight
        return super().__call__(y_true, y_pred, sample_weight=weights)

    def call(self, y_true, y_pred):
        logits = ops.cast(y_pred, "float32")  # (B, T, V)
        labels = ops.cast(y_true, "int32")  # (B, T)
        return smoothed_cross_entropy(logits, labels, self.label_smoothing)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}
