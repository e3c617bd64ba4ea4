"""Training objects: the optimizer and its warm-up schedule, the masked loss and accuracy,
compiling from a config, the distribution strategy and the multi-worker protocol,
checkpoints and backups. The model's own training step is `models.train_step`.

The multi-worker protocol's helpers, the checkpoint bookkeeping and the CPU's flags are
the package's own: its modules import them from their modules (`training.strategy`,
`training.multi_worker`, `training.checkpoints`, `training.precision`)."""

from keras_transformer.training.backup import StopOnNaN, TrainingBackup, TrainingDiverged
from keras_transformer.training.checkpoints import PruneCheckpoints
from keras_transformer.training.compile import compile_model
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.memory import keep_freed_memory
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.multi_worker import fit_under_multi_worker
from keras_transformer.training.optimizers import (
    SummedSlicesAdam,
    transformer_optimizer,
    transformer_schedule,
)
from keras_transformer.training.schedules import (
    LinearCooldown,
    PerUpdateSchedule,
    ScaledSchedule,
    TransformerSchedule,
)
from keras_transformer.training.strategy import STRATEGIES, distribution_strategy

__all__ = [
    "STRATEGIES",
    "LinearCooldown",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "PerUpdateSchedule",
    "PruneCheckpoints",
    "ScaledSchedule",
    "StopOnNaN",
    "SummedSlicesAdam",
    "TrainingBackup",
    "TrainingDiverged",
    "TransformerSchedule",
    "compile_model",
    "distribution_strategy",
    "fit_under_multi_worker",
    "keep_freed_memory",
    "transformer_optimizer",
    "transformer_schedule",
]
