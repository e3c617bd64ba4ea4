"""Training state that survives a crash: atomic backups, and a stop when the loss turns NaN.

`TrainingBackup` plays the part of `keras.callbacks.BackupAndRestore` for a
run that may be killed at any moment (`kill -9`, a lost machine): every
backup is written into a temporary directory and renamed into place, so a
backup directory is either complete or absent; the previous backup is kept,
and a backup that cannot be read (a disk that filled, a truncated copy) makes
the restore fall back to the one before it, saying so.
"""

import json
import logging
import math
import os
import re
import shutil
import tempfile

import keras

from keras_transformer.errors import ArgumentError, RunError

log = logging.getLogger(__name__)

WEIGHTS = "state.weights.h5"  # model and optimizer variables
METADATA = "training.json"


class TrainingBackup(keras.callbacks.Callback):
    """Backs up the model and optimizer state at each epoch's end and every N steps.

    Backups are directories `step-{iterations:09d}` in `directory`; the two
    newest are kept. `restore` loads the newest readable one before `fit`,
    which then starts at the epoch it returns (an epoch interrupted in its
    middle is run again from its first batch, from the weights of the last
    backup: at most `every_steps` updates are lost). The directory is
    removed when training ends normally.

    Args:
        directory: where the backups go; used by nothing else.
        every_steps: also back up every this many optimizer steps; None for
            epoch ends only.

    Examples:
        ```python
        backup = TrainingBackup("runs/x/backup", every_steps=100)
        initial_epoch = backup.restore(model)
        model.fit(data, epochs=10, initial_epoch=initial_epoch, callbacks=[backup])
        ```
    """

    def __init__(self, directory, every_steps=None):
        super().__init__()
        if every_steps is not None and (not isinstance(every_steps, int) or every_steps <= 0):
            raise ArgumentError(
                f"`every_steps` must be a positive integer or None. Received: {every_steps!r}"
            )
        self.directory = directory
        self.every_steps = every_steps
        self.restored_step = 0
        self._epoch = 0

    def restore(self, model, at_most=None):
        """Loads the newest readable backup into `model` (built and compiled).

        Args:
            model: the model to restore into.
            at_most: only backups of this optimizer step or earlier (None:
                any); the workers of a cluster agree on a step this way.

        Returns:
            The epoch `fit` should start at: 0 without a backup.
            `restored_step` is then the step restored (0 without one).
        """
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)  # its variables are restored too
        self.restored_step = 0
        for path in reversed(self.backups()):
            if at_most is not None and backup_step(path) > at_most:
                continue
            try:
                with open(os.path.join(path, METADATA), encoding="utf-8") as f:
                    metadata = json.load(f)
                model.load_weights(os.path.join(path, WEIGHTS))
            except (OSError, ValueError, KeyError) as error:
                log.warning(
                    "backup %s is unreadable (%s: %s); trying the one before it.",
                    path,
                    type(error).__name__,
                    error,
                )
                continue
            log.info(
                "resuming from the backup at step %d (epoch %d): %s",
                metadata["step"],
                metadata["epoch"] + 1,
                path,
            )
            self.restored_step = metadata["step"]
            return metadata["epoch"]
        return 0

    def newest_step(self):
        """The optimizer step of the newest backup, by its name (0 without one)."""
        backups = self.backups()
        return backup_step(backups[-1]) if backups else 0

    def backups(self):
        """The backup directories, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        names = sorted(d for d in os.listdir(self.directory) if re.fullmatch(r"step-\d+", d))
        return [os.path.join(self.directory, name) for name in names]

    def seed(self, model, epoch):
        """Backs up `model`'s state now as the end of `epoch`, before `fit`: a run that
        goes on from a checkpoint then resumes from there if it is stopped early on."""
        self.set_model(model)
        self._save(epoch)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.every_steps and self._step() % self.every_steps == 0:
            self._save(self._epoch)  # this epoch is not over: it runs again on resume

    def on_epoch_end(self, epoch, logs=None):
        self._save(epoch + 1)

    def on_train_end(self, logs=None):
        shutil.rmtree(self.directory, ignore_errors=True)  # finished (or stopped early)

    def _step(self):
        return int(self.model.optimizer.iterations.numpy())

    def _save(self, epoch):
        step = self._step()
        final = os.path.join(self.directory, f"step-{step:09d}")
        if os.path.isdir(final):  # this state, saved mid-epoch, now also ends the epoch
            write_metadata(final, epoch, step)
            return
        os.makedirs(self.directory, exist_ok=True)
        partial = tempfile.mkdtemp(prefix=".partial-", dir=self.directory)
        self.model.save_weights(os.path.join(partial, WEIGHTS))
        write_metadata(partial, epoch, step)
        os.rename(partial, final)  # atomic: a backup is complete or absent
        for old in self.backups()[:-2]:
            shutil.rmtree(old, ignore_errors=True)


def backup_step(path):
    """The optimizer step in a backup directory's name `step-NNNNNNNNN`."""
    return int(os.path.basename(path)[len("step-") :])


def write_metadata(directory, epoch, step):
    """Writes a backup's `training.json` atomically: the epoch to resume at and the step."""
    partial = os.path.join(directory, f".{METADATA}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        json.dump({"epoch": epoch, "step": step}, f)
    os.replace(partial, os.path.join(directory, METADATA))


class TrainingDiverged(RunError):
    """The loss became NaN or infinite."""


class StopOnNaN(keras.callbacks.Callback):
    """Stops training with an error naming the step once the loss is NaN or infinite.

    Keras' `TerminateOnNaN` ends `fit` as if training had finished; this
    raises instead, before callbacks later in the list (checkpoints, backups)
    can save the broken weights, so the run stays resumable from its last
    good state.

    Args:
        last_good: a sentence naming what the user can go back to, added to
            the error message.
    """

    def __init__(self, last_good=""):
        super().__init__()
        self.last_good = last_good

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            step = int(self.model.optimizer.iterations.numpy())
            raise TrainingDiverged(
                f"the training loss became {float(loss)} at step {step} (batch {batch + 1} of "
                f"this epoch); stopped without saving it. {self.last_good}".strip()
            )
