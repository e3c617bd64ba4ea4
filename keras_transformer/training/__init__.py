"""Training objects: the optimizer and its warm-up schedule, the masked loss and accuracy,
compiling from a config, the distribution strategy and the multi-worker protocol,
checkpoints and backups. The model's own training step is `models.train_step`.

`__all__` is what a user trains with; the multi-worker protocol's helpers, the checkpoint
bookkeeping and the CPU's flags are the package's own and are imported from here by it."""

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
    "compile_model",
    "distribution_strategy",
    "fit_under_multi_worker",
    "transformer_optimizer",
    "transformer_schedule",
]
