"""Training objects: the optimizer and its warm-up schedule, the masked loss and accuracy,
compiling from a config, the distribution strategy and the multi-worker protocol,
checkpoints and backups. The model's own training step is `models.train_step`."""

from keras_transformer.training.backup import StopOnNaN, TrainingBackup, TrainingDiverged
from keras_transformer.training.checkpoints import (
    PruneCheckpoints,
    best_val_loss,
    checkpoint_epoch,
    epoch_checkpoints,
)
from keras_transformer.training.compile import compile_model
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.multi_worker import (
    all_workers,
    check_same_on_every_worker,
    fit_under_multi_worker,
    per_worker_batches,
    restore_on_every_worker,
    weights_digest,
)
from keras_transformer.training.optimizers import (
    SummedSlicesAdam,
    transformer_optimizer,
    transformer_schedule,
)
from keras_transformer.training.precision import cpu_flags, slow_bfloat16_warning
from keras_transformer.training.schedules import (
    LinearCooldown,
    PerUpdateSchedule,
    ScaledSchedule,
    TransformerSchedule,
)
from keras_transformer.training.strategy import (
    STRATEGIES,
    WorkerRole,
    distribution_strategy,
    localhost_tf_configs,
    worker_directory,
    worker_role,
)

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
    "WorkerRole",
    "all_workers",
    "best_val_loss",
    "check_same_on_every_worker",
    "checkpoint_epoch",
    "compile_model",
    "cpu_flags",
    "distribution_strategy",
    "epoch_checkpoints",
    "fit_under_multi_worker",
    "localhost_tf_configs",
    "per_worker_batches",
    "restore_on_every_worker",
    "slow_bfloat16_warning",
    "transformer_optimizer",
    "transformer_schedule",
    "weights_digest",
    "worker_directory",
    "worker_role",
]
