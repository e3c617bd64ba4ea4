"""Pictures of a run: its loss and accuracy per epoch, and the learning rate it trained with.

Drawn with matplotlib (`pip install matplotlib`, or the `notebooks` extra), from the
run directory's `metrics.csv`, `config.json` and `trained.json`.

Examples:
    ```python
    plot_run("runs/numbers_de_en", "training.svg")
    ```
"""

import csv
import json
import os

from keras_transformer.errors import MissingDependencyError, RunError
from keras_transformer.run.directory import RunDirectory
from keras_transformer.run.train import cooldown_steps
from keras_transformer.training import transformer_schedule


def pyplot():
    """matplotlib's pyplot, drawing to files only."""
    try:
        import matplotlib
    except ImportError as error:
        raise MissingDependencyError(
            "Plots need matplotlib: pip install matplotlib (or the notebooks extra)."
        ) from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def read_metrics(path):
    """`{column: [value per epoch]}` of a run's `metrics.csv` (Keras' `CSVLogger`)."""
    if not os.path.isfile(path):
        raise RunError(f"{path} does not exist; train the run first.")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise RunError(f"{path} holds no epoch yet; plot the run after its first epoch.")
    return {column: [float(row[column]) for row in rows] for column in rows[0]}


def learning_rates(config, steps_per_epoch, epochs):
    """`(steps, rates)`: the learning rate at each optimizer step of `epochs` epochs of
    `steps_per_epoch` steps, as the run's configuration set it."""
    t = config["train"]
    schedule = transformer_schedule(
        config["model"]["d_model"],
        t["warmup_steps"],
        t["learning_rate_scale"],
        cooldown_steps(t, steps_per_epoch),
    )
    steps = list(range(1, epochs * steps_per_epoch + 1))
    return steps, [float(rate) for rate in schedule(steps)]


def plot_run(run_dir, path=None):
    """Draws a run's training and validation loss and accuracy per epoch, and the
    learning rate of each step, into one picture.

    Args:
        run_dir: the run directory.
        path: the picture's file; its extension chooses the format (`.png`,
            `.svg`, `.pdf`). Defaults to `training.png` in the run directory.

    Returns:
        The path written.

    Raises:
        RunError: if the run has no metrics yet.
        MissingDependencyError: without matplotlib.
    """
    plt = pyplot()
    run = RunDirectory(run_dir)
    metrics = read_metrics(run.metrics_path)
    epochs = [epoch + 1 for epoch in metrics["epoch"]]
    done = {}
    if run.is_finished():
        with open(run.done_path, encoding="utf-8") as f:
            done = json.load(f)
    steps_per_epoch = done.get("steps_per_epoch")
    figure, axes = plt.subplots(1, 3 if steps_per_epoch else 2, figsize=(13, 3.6))
    for axis, name in zip(axes[:2], ("loss", "masked_accuracy"), strict=True):
        axis.plot(epochs, metrics[name], marker="o", label="training")
        axis.plot(epochs, metrics[f"val_{name}"], marker="o", label="validation")
        axis.set(xlabel="epoch", title=name.replace("_", " "))
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.legend()
    if steps_per_epoch:
        steps, rates = learning_rates(run.read_config(), steps_per_epoch, len(epochs))
        axes[2].plot(steps, rates)
        axes[2].set(xlabel="optimizer step", title="learning rate")
    figure.suptitle(os.path.basename(os.path.normpath(run_dir)))
    figure.tight_layout()
    path = path or os.path.join(run.path, "training.png")
    with plt.rc_context({"svg.fonttype": "none"}):  # an SVG's text stays text
        figure.savefig(path)
    plt.close(figure)
    return path
