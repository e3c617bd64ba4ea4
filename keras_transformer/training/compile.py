"""Compiling a `Transformer` for training the paper's way."""

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimizers import transformer_optimizer


def compile_model(
    model,
    warmup_steps=4000,
    learning_rate_scale=1.0,
    label_smoothing=0.1,
    micro_batches=1,
    r_drop=0.0,
    jit_compile="auto",
    cooldown=None,
):
    """Compiles `model` with the paper's optimizer, the masked loss and accuracy.

    Args:
        model: a `keras_transformer.Transformer` (its `d_model` sets the
            schedule's peak).
        warmup_steps: updates of linear warm-up. Defaults to 4000.
        learning_rate_scale: a factor on the whole schedule. Defaults to 1.
        label_smoothing: epsilon of the label-smoothed loss. Defaults to 0.1.
        micro_batches: the slices each training batch is cut into for one
            update (`Transformer.compile`). Defaults to 1.
        r_drop: R-Drop's alpha (`Transformer.compile`); 0 is off. Defaults to 0.
        jit_compile: XLA for the training step: True, False, or "auto"
            (Keras' choice: on with an accelerator and no `tf.distribute`
            strategy). Defaults to "auto".
        cooldown: `(total_steps, cooldown_steps)`, a linear fall of the rate
            to 0 over the run's last updates (`transformer_optimizer`).
            Defaults to None.

    Under a `mixed_float16` dtype policy, Keras wraps the optimizer in a
    `LossScaleOptimizer`, which the training step uses: the loss is scaled
    before the gradient, and an update whose gradients are not finite is
    skipped while the scale halves.

    Examples:
        ```python
        compile_model(model, warmup_steps=800, label_smoothing=0.1)
        ```
    """
    model.compile(
        optimizer=transformer_optimizer(
            model.d_model, warmup_steps, learning_rate_scale, cooldown=cooldown
        ),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=label_smoothing),
        metrics=[MaskedAccuracy()],
        micro_batches=micro_batches,
        r_drop=r_drop,
        jit_compile=jit_compile,
    )
