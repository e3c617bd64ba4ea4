"""The paper's optimizer: Adam on the warm-up schedule (Vaswani et al., 2017, §5.3)."""

import keras

from keras_transformer.training.schedules import ScaledSchedule, TransformerSchedule


def transformer_optimizer(d_model, warmup_steps=4000, scale=1.0, **kwargs):
    """Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 on `TransformerSchedule`.

    Args:
        d_model: model width D, which sets the schedule's peak.
        warmup_steps: steps of linear warm-up. Defaults to 4000 (the paper's).
        scale: a factor on the whole schedule (`ScaledSchedule`). Defaults to 1.
        **kwargs: further `keras.optimizers.Adam` arguments (`clipnorm`,
            `gradient_accumulation_steps`, ...).

    Returns:
        A `keras.optimizers.Adam`; it serializes with the model.

    Example:
    ```python
    model.compile(optimizer=transformer_optimizer(512, warmup_steps=4000), ...)
    ```
    """
    schedule = TransformerSchedule(d_model, warmup_steps)
    if scale != 1.0:
        schedule = ScaledSchedule(schedule, scale)
    return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs)
