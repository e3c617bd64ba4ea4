"""The paper's optimizer: Adam on the warm-up schedule (Vaswani et al., 2017, §5.3)."""

import warnings

import keras
import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.training.schedules import (
    LinearCooldown,
    PerUpdateSchedule,
    ScaledSchedule,
    TransformerSchedule,
)
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class SummedSlicesAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose second moment of an embedding is Adam's.

    An embedding's gradient is a `tf.IndexedSlices` with one slice per token
    of the batch, so a token that occurs k times has k slices. Keras' Adam
    squares the slices one by one, and its second moment of that row grows
    by the sum of their squares instead of the square of their sum, the
    row's gradient. This optimizer first sums the slices into the dense
    gradient (its moments are dense already), so every row gets Adam's
    update, and one batch gives the same update as the same rows split
    into accumulated micro-batches. It takes the arguments of
    `keras.optimizers.Adam`.

    Examples:
        ```python
        optimizer = SummedSlicesAdam(1e-3, beta_2=0.98)
        ```
    """

    def apply(self, grads, trainable_variables=None):
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        return super().apply(grads, trainable_variables)


def transformer_optimizer(
    d_model,
    warmup_steps=4000,
    scale=1.0,
    gradient_accumulation_steps=1,
    cooldown=None,
    **kwargs,
):
    """Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 on `TransformerSchedule`.

    Args:
        d_model: model width D, which sets the schedule's peak.
        warmup_steps: updates of linear warm-up. Defaults to 4000 (the paper's).
        scale: a factor on the whole schedule (`ScaledSchedule`). Defaults to 1.
        gradient_accumulation_steps: deprecated; use
            `Transformer.compile(micro_batches=N)`, which accumulates under
            any strategy. N > 1 still updates the weights once every N
            batches with the mean of their gradients (Keras' own gradient
            accumulation, one device only), the schedule counting updates
            (`PerUpdateSchedule`), and warns. Defaults to 1.
        cooldown: `(total_steps, cooldown_steps)`: the rate falls linearly to
            0 over the last `cooldown_steps` of the run's `total_steps`
            updates (`LinearCooldown`). Defaults to None, the paper's schedule
            to the end.
        **kwargs: further `keras.optimizers.Adam` arguments (`clipnorm`, ...).

    Returns:
        A `SummedSlicesAdam` (Keras' Adam with the embeddings' second moment
        corrected); it serializes with the model.

    Raises:
        ValueError: if `gradient_accumulation_steps` > 1 inside the scope of
            a `tf.distribute` strategy.

    Examples:
        ```python
        model.compile(optimizer=transformer_optimizer(512, warmup_steps=4000), ...)
        ```
    """
    check_positive_int("gradient_accumulation_steps", gradient_accumulation_steps)
    if gradient_accumulation_steps > 1:
        warnings.warn(
            "`transformer_optimizer(gradient_accumulation_steps=N)` is deprecated: use "
            "`Transformer.compile(micro_batches=N)`, which accumulates under any strategy.",
            DeprecationWarning,
            stacklevel=2,
        )
    if gradient_accumulation_steps > 1 and tf.distribute.has_strategy():
        raise ArgumentError(
            "`gradient_accumulation_steps` > 1 works on one device only: under a "
            "tf.distribute strategy, Keras' accumulating optimizer puts its all-reduce "
            "inside a tf.cond, which TensorFlow refuses (keras-team/keras#17429); "
            "`Transformer.compile(micro_batches=N)` accumulates under any strategy. Received: "
            f"gradient_accumulation_steps={gradient_accumulation_steps} under "
            f"{type(tf.distribute.get_strategy()).__name__}"
        )
    schedule = transformer_schedule(d_model, warmup_steps, scale, cooldown)
    if gradient_accumulation_steps > 1:
        schedule = PerUpdateSchedule(schedule, gradient_accumulation_steps)
        kwargs["gradient_accumulation_steps"] = gradient_accumulation_steps
    return SummedSlicesAdam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs)


def transformer_schedule(d_model, warmup_steps=4000, scale=1.0, cooldown=None):
    """The learning rate of `transformer_optimizer`: `TransformerSchedule`, times
    `scale`, cooled down linearly over the last steps of `cooldown`.

    Args:
        d_model: model width D, which sets the schedule's peak.
        warmup_steps: updates of linear warm-up.
        scale: a factor on the whole schedule (`ScaledSchedule`).
        cooldown: None, or `(total_steps, cooldown_steps)` (`LinearCooldown`).

    Examples:
        ```python
        schedule = transformer_schedule(512, 4000, cooldown=(100_000, 10_000))
        schedule(100_000)  # 0.0
        ```
    """
    schedule = TransformerSchedule(d_model, warmup_steps)
    if scale != 1.0:
        schedule = ScaledSchedule(schedule, scale)
    if cooldown is not None:
        schedule = LinearCooldown(schedule, *cooldown)
    return schedule
