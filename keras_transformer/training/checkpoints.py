"""The epoch checkpoints of a run directory: pruning them and reading the best loss."""

import csv
import glob
import os

import keras


def epoch_checkpoints(directory):
    """The `epoch-NNN.weights.h5` files in `directory`, oldest first."""
    return sorted(glob.glob(os.path.join(directory, "epoch-*.weights.h5")))


def checkpoint_epoch(path):
    """The epoch in an `epoch-NNN.weights.h5` file's name: the epochs trained before it."""
    return int(os.path.basename(path)[len("epoch-") : -len(".weights.h5")])


class PruneCheckpoints(keras.callbacks.Callback):
    """Keeps only the newest `keep` epoch checkpoints in `directory`.

    Args:
        directory: where `ModelCheckpoint` writes `epoch-NNN.weights.h5`.
        keep: how many to keep.
    """

    def __init__(self, directory, keep):
        super().__init__()
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        for path in epoch_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)


def best_val_loss(metrics_csv):
    """The lowest `val_loss` in a `CSVLogger` file, or None if there is none yet.

    A resumed run gives it to `ModelCheckpoint(initial_value_threshold=...)`,
    so that its best model is replaced only by a better one.
    """
    if not os.path.isfile(metrics_csv):
        return None
    with open(metrics_csv, encoding="utf-8") as f:
        losses = [float(row["val_loss"]) for row in csv.DictReader(f) if row.get("val_loss")]
    return min(losses, default=None)
