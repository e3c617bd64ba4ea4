"""Compiling a `Transformer` for training from a run's `train` configuration section."""

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimizers import transformer_optimizer


def compile_model(model, train):
    """Compiles `model` with the paper's optimizer, the masked loss and accuracy.

    Args:
        model: a `keras_transformer.Transformer` (its `d_model` sets the
            schedule's peak).
        train: the `train` section of a run configuration (`warmup_steps`,
            `learning_rate_scale`, `label_smoothing`, and
            `gradient_accumulation_steps`, the model's `micro_batches`: the
            slices each training batch is cut into for one update).

    Example:
    ```python
    compile_model(model, load_config()["train"])
    ```
    """
    model.compile(
        optimizer=transformer_optimizer(
            model.d_model,
            train["warmup_steps"],
            train["learning_rate_scale"],
        ),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=train["label_smoothing"]),
        metrics=[MaskedAccuracy()],
        micro_batches=train["gradient_accumulation_steps"],
    )
