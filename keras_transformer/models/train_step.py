"""The Transformer's own training step: logits at real target tokens only, and micro-batches.

A batch of translation targets is ~15-50% padding, and the pre-softmax
projection to the vocabulary is the largest matrix product of the model.
`train_step` projects only the decoder outputs at real target tokens and
computes the loss and metrics on those, which gives the same loss, gradient
and metrics as the full `(B, T, V)` logits with padding masked out. It can
also run a batch in slices for one update (gradient accumulation that
works under any `tf.distribute` strategy), and train with R-Drop's
consistency term between two dropout passes of each batch.

`PackedTraining` gives a model this step and `compile(micro_batches=N,
r_drop=alpha)`.
The step is written for the TensorFlow backend; on the others (JAX,
PyTorch) the model trains with Keras' own step, on the full `(B, T, V)`
logits with padding masked out, which gives the same loss.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import compat
from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.memory import keep_freed_memory_for_jax
from keras_transformer.validation import check_non_negative, check_positive_int


class PackedTraining:
    """Mixin of a `keras.Model` that trains with `train_step` below.

    The model needs `hidden_states(inputs, training)` (the decoder outputs
    `(B, T, D)`) and `output_logits(x)` (the pre-softmax projection), as
    `Transformer` has. Put it before `keras.Model` among the bases.

    Examples:
        ```python
        model.compile(optimizer=transformer_optimizer(256), loss=..., micro_batches=4)
        ```
    """

    micro_batches = 1
    r_drop = 0.0

    def compile(self, *args, micro_batches=1, r_drop=0.0, **kwargs):
        """`keras.Model.compile`, how many micro-batches make one update, and R-Drop.

        Args:
            *args: those of `keras.Model.compile`.
            micro_batches: N > 1 cuts every training batch into N slices of
                its rows, runs forward and backward on one slice at a time
                and updates the weights once with the whole batch's gradient
                (`accumulated_train_step`): the update of a large batch on
                the activation memory of a slice, under any `tf.distribute`
                strategy. Defaults to 1.
            r_drop: alpha >= 0 of R-Drop (Liang et al., 2021): each batch
                runs twice through the model, with different dropout, and
                the loss is the mean of the two passes' losses plus
                `alpha / 2` times the mean symmetric KL divergence between
                their predictions at each real target token (`r_drop_loss`);
                the paper's per-sentence objective halved, so its alphas
                apply (5 for its translation tasks). A step then costs about
                2.5 times as much. Defaults to 0 (off).
            **kwargs: those of `keras.Model.compile`.
        """
        check_positive_int("micro_batches", micro_batches)
        check_non_negative("r_drop", r_drop)
        tensorflow_only = {"micro_batches": micro_batches > 1, "r_drop": r_drop > 0}
        for name, used in tensorflow_only.items():
            if used and keras.backend.backend() != "tensorflow":
                value = micro_batches if name == "micro_batches" else r_drop
                raise ArgumentError(
                    f"`{name}` needs the TensorFlow backend, whose training step the model "
                    f"uses. Received: {name}={value} with the {keras.backend.backend()!r} backend"
                )
        super().compile(*args, **kwargs)
        self.micro_batches = micro_batches
        self.r_drop = float(r_drop)

    def get_compile_config(self):
        config = super().get_compile_config()
        if not config:  # not compiled: Keras' `{}` loads the model uncompiled
            return config
        return {**config, "micro_batches": self.micro_batches, "r_drop": self.r_drop}

    def compile_from_config(self, config):
        # Keras does not compile a loaded model whose `compile` is overridden.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def fit(self, *args, **kwargs):
        """`keras.Model.fit`; under the TensorFlow backend it first creates the weights
        and the optimizer's variables (`build_before_tracing`), under JAX it first keeps
        glibc's malloc from handing freed memory back to the system
        (`keras_transformer.memory`)."""
        keep_freed_memory_for_jax(keras.backend.backend())
        if keras.backend.backend() == "tensorflow":
            build_before_tracing(self)
        return super().fit(*args, **kwargs)

    def train_step(self, *args):
        if keras.backend.backend() != "tensorflow":  # JAX's step also takes the state
            return super().train_step(*args)
        (data,) = args
        return train_step(self, data, self.micro_batches)


def build_before_tracing(model):
    """Creates a compiled model's weights and its optimizer's variables, as its first
    training step would.

    Without a `tf.distribute` strategy, Keras' `fit` leaves them to the first trace of
    the training step, and a `tf.function` that creates variables is traced twice,
    with every initializer lifted out of its graph: the first step of a small
    Transformer then takes twice as long as the rest of a short run. The values are
    those the step would give them (the same initializers, called in the same order).
    Under a strategy, Keras builds them itself before the step.

    Args:
        model: a compiled model whose inputs are `(source_ids, target_ids)`.

    Examples:
        ```python
        build_before_tracing(model)  # then model.fit(...) traces its step once
        ```
    """
    if tf.distribute.has_strategy() or compat.distribute_strategy(model) is not None:
        return
    if not model.built:
        model.build(((None, None), (None, None)))
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)


def train_step(model, data, micro_batches=1):
    """`keras.Model.train_step` of a `Transformer`, with its logits at real tokens only.

    Args:
        model: a compiled `keras_transformer.Transformer` (or any Keras
            model that is not `PackedTraining`, which then computes its full
            logits).
        data: a batch `((source_ids, target_in_ids), target_out_ids)`,
            optionally with sample weights as a third element.
        micro_batches: N > 1 runs the batch in N slices for one update
            (`accumulated_train_step`).

    Returns:
        The model's metrics after the update.

    Examples:
        ```python
        class MyModel(keras.Model):  # Keras' own step, with micro-batches
            def train_step(self, data):
                return train_step(self, data, micro_batches=4)
        ```
    """
    if micro_batches > 1:
        return accumulated_train_step(model, data, micro_batches)
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    if not model.built:  # the weights must exist before the step reads them
        model.build(tf.nest.map_structure(lambda t: tuple(t.shape), x))
    with tf.GradientTape() as tape:
        y, y_pred, sample_weight, loss = forward(model, x, y, sample_weight)
        scaled = model.optimizer.scale_loss(loss)
    weights = model.trainable_weights
    model.optimizer.apply_gradients(zip(tape.gradient(scaled, weights), weights, strict=True))
    track_loss(model, loss, rows=tf.shape(x[0])[0])
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def track_loss(model, loss, rows):
    """Adds a step's loss to the logged mean, per replica as `keras.Model.train_step` logs it."""
    # `compute_loss` divides by the replicas in sync; the logged loss is per replica.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    compat.loss_tracker(model).update_state(loss * replicas, sample_weight=rows)


def forward(model, x, y, sample_weight):
    """The forward pass and loss of a training batch: `(y, y_pred, sample_weight, loss)`.

    A `PackedTraining` model (a `Transformer`) projects its decoder
    outputs to the vocabulary only where `y` is not `PAD_ID`: `y_pred` is
    then `(N, V)` for the N real tokens, and `y` `(N,)` and `sample_weight`
    `(N,)` are those tokens' labels and weights. The loss of the packed
    tokens is the masked loss of the whole batch. Under XLA
    (`jit_compile=True`), which needs static shapes, and for other models,
    `y_pred` is the full `(B, T, V)`. With R-Drop (`model.r_drop > 0`) the
    batch runs twice, stacked on the first axis, and `y`, `y_pred` and
    `sample_weight` are those of the doubled batch.
    """
    r_drop = getattr(model, "r_drop", 0.0)
    if r_drop:  # (2B, ...): the same rows twice, with different dropout
        x, y, sample_weight = tf.nest.map_structure(
            lambda t: None if t is None else tf.concat([t, t], axis=0), (x, y, sample_weight)
        )
    if not isinstance(model, PackedTraining) or model.jit_compile:
        y_pred = model(x, training=True)  # (B, T, V)
    else:
        real = tf.not_equal(y, PAD_ID)  # (B, T)
        hidden = tf.boolean_mask(model.hidden_states(x, training=True), real)  # (N, D)
        y_pred = tf.cast(model.output_logits(hidden), tf.float32)  # (N, V)
        if sample_weight is not None:
            sample_weight = tf.cast(sample_weight, tf.float32)
            while sample_weight.shape.rank < y.shape.rank:  # per-row weights: one per token
                sample_weight = sample_weight[..., None]
            sample_weight = tf.boolean_mask(tf.broadcast_to(sample_weight, tf.shape(y)), real)
        y = tf.boolean_mask(y, real)  # (N,)
    loss = model.compute_loss(x, y, y_pred, sample_weight, training=True)
    if r_drop:
        replicas = tf.distribute.get_strategy().num_replicas_in_sync  # as `compute_loss`
        loss += r_drop_loss(y, y_pred, sample_weight, r_drop) / replicas
    return y, y_pred, sample_weight, loss


def r_drop_loss(y, y_pred, sample_weight, alpha):
    """R-Drop's consistency term of a doubled batch: `alpha / 2` times the mean
    symmetric KL divergence between its two halves' predictions at real tokens.

    Args:
        y: labels of the doubled batch, `(2N,)` packed or `(2B, T)`.
        y_pred: its logits, `(2N, V)` or `(2B, T, V)`; the first half is
            one dropout pass, the second half the other.
        sample_weight: None, or weights shaped as `y`.
        alpha: the R-Drop weight.

    Returns:
        A float32 scalar.
    """
    first, second = tf.split(y_pred, 2, axis=0)  # (N, V) or (B, T, V) each
    labels = tf.split(y, 2, axis=0)[0]
    weights = tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)  # (N,) or (B, T)
    if sample_weight is not None:
        sample_weight = tf.cast(tf.split(sample_weight, 2, axis=0)[0], tf.float32)
        while sample_weight.shape.rank < labels.shape.rank:  # per-row weights
            sample_weight = sample_weight[..., None]
        weights *= sample_weight
    divergence = tf.reduce_sum(weights * symmetric_kl(first, second))
    return 0.5 * alpha * divergence / tf.maximum(tf.reduce_sum(weights), 1e-9)


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

    Examples:
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
            y_i, y_pred, w_i, loss_i = forward(model, x_i, y_i, w_i)
            loss_i = loss_i * share
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
    track_loss(model, loss, rows)
    return model.get_metrics_result()


def symmetric_kl(logits_a, logits_b):
    """Per-token symmetric KL divergence of two predictions, from their logits.

        ½ (KL(P_a || P_b) + KL(P_b || P_a)) = ½ Σ_v (p_a - p_b) (log p_a - log p_b)

    the consistency term of R-Drop (Liang et al., 2021) between two dropout
    passes of the same batch.

    Args:
        logits_a: float `(..., V)`.
        logits_b: float `(..., V)`, the same shape.

    Returns:
        float32 `(...)`, >= 0.

    Examples:
        ```python
        symmetric_kl(logits, logits)  # zeros
        ```
    """
    log_p = ops.log_softmax(ops.cast(logits_a, "float32"), axis=-1)  # (..., V)
    log_q = ops.log_softmax(ops.cast(logits_b, "float32"), axis=-1)  # (..., V)
    return 0.5 * ops.sum((ops.exp(log_p) - ops.exp(log_q)) * (log_p - log_q), axis=-1)
