"""Training objects: the optimizer and its warm-up schedule, the masked loss and accuracy,
compiling from a config, the distribution strategy, checkpoints and backups."""

from keras_transformer.training.checkpoints import (
    PruneCheckpoints,
    best_val_loss,
    epoch_checkpoints,
)
from keras_transformer.training.compile import compile_model
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimizers import SummedSlicesAdam, transformer_optimizer
from keras_transformer.training.schedules import (
    PerUpdateSchedule,
    ScaledSchedule,
    TransformerSchedule,
)
from keras_transformer.training.strategy import (
    STRATEGIES,
    WorkerRole,
    all_workers,
    distribution_strategy,
    fit_under_multi_worker,
    localhost_tf_configs,
    worker_directory,
    worker_role,
)

__all__ = [
    "STRATEGIES",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "PruneCheckpoints",
    "PerUpdateSchedule",
    "ScaledSchedule",
    "SummedSlicesAdam",
    "TransformerSchedule",
    "WorkerRole",
    "all_workers",
    "best_val_loss",
    "compile_model",
    "distribution_strategy",
    "epoch_checkpoints",
    "fit_under_multi_worker",
    "localhost_tf_configs",
    "transformer_optimizer",
    "worker_directory",
    "worker_role",
]
