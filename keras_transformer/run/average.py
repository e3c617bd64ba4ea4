"""Averaging the weights of a run's last epoch checkpoints."""

import logging
import os

import numpy as np

from keras_transformer.errors import RunError
from keras_transformer.run.directory import RunDirectory
from keras_transformer.validation import check_positive_int

log = logging.getLogger(__name__)


def average_checkpoints(run_dir: str, last: int = 5) -> str:
    """Averages the weights of the last `last` epoch checkpoints into `averaged.keras`.

    Args:
        run_dir: a trained run directory.
        last: how many of the newest epoch checkpoints to average, > 0.

    Returns:
        The path of the averaged model.

    Examples:
        ```python
        average_checkpoints("runs/numbers", last=5)  # runs/numbers/averaged.keras
        ```
    """
    check_positive_int("last", last)
    run = RunDirectory(run_dir)
    paths = run.epoch_checkpoints()[-last:]
    if not paths:
        raise RunError(f"{run_dir} has no epoch checkpoints to average; train it first.")
    model = run.load_model("best")
    total = [np.zeros_like(w) for w in model.get_weights()]
    for path in paths:
        model.load_weights(path)
        total = [t + w for t, w in zip(total, model.get_weights(), strict=True)]
    model.set_weights([t / len(paths) for t in total])
    out = run.model_path("averaged")
    model.save(out)
    log.info("averaged %d checkpoints: %s", len(paths), ", ".join(map(os.path.basename, paths)))
    return out
