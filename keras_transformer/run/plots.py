"""Pictures of a run: its loss and accuracy per epoch, the learning rate it trained with,
and where its model looks in the source while it translates a sentence.

Drawn with matplotlib (`pip install matplotlib`, or the `notebooks` extra), from the
run directory's `metrics.csv`, `config.json` and `trained.json`.

Examples:
    ```python
    plot_run("runs/numbers_de_en", "training.svg")
    plot_attention("runs/numbers_de_en", "dreihunderteinundzwanzig", "attention.svg")
    ```
"""

import csv
import json
import os

import numpy as np

from keras_transformer.errors import ArgumentError, MissingDependencyError, RunError
from keras_transformer.files import text_items
from keras_transformer.inference import greedy_search
from keras_transformer.run.directory import RunDirectory
from keras_transformer.run.train import cooldown_steps
from keras_transformer.run.translators import make_translator
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


def plot_run(run_dir: str, path: str | None = None) -> str:
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


def attention_map(
    run_dir: str, sentence: str, checkpoint: str = "best"
) -> tuple[list[str], list[str], np.ndarray]:
    """`(source_pieces, output_pieces, weights)`: the greedy translation of `sentence` by
    a run's model and the cross-attention of its last decoder layer, averaged over heads,
    `weights[t, s]` for output piece t (EOS included) and source piece s (EOS included)."""
    (sentence,) = text_items([sentence], "sentence")
    if not sentence.strip():
        raise ArgumentError("The sentence is empty: there is no attention to draw.")
    translator = make_translator(run_dir, checkpoint, beam_size=1)
    source, target = translator.source_tokenizer, translator.target_tokenizer
    source_ids = translator.source_ids([sentence])  # (1, S), EOS last
    token_ids, _, attention = greedy_search(
        translator.model,
        source_ids,
        target.bos_id,
        target.eos_id,
        translator.options.max_length,
        attention_layer=-1,
    )
    output = [int(i) for i in token_ids[0] if int(i) != target.pad_id]
    source_pieces = [source.pieces[int(i)] for i in source_ids[0]]
    return source_pieces, [target.pieces[i] for i in output], attention[0, : len(output)].numpy()


def plot_attention(
    run_dir: str, sentence: str, path: str | None = None, checkpoint: str = "best"
) -> str:
    """Draws where a run's model looks while it translates `sentence` greedily: the
    cross-attention of the last decoder layer, averaged over heads, of each output piece
    over the source pieces.

    Args:
        run_dir: the run directory.
        sentence: the source sentence, a non-empty string.
        path: the picture's file (`.png`, `.svg`, `.pdf`). Defaults to
            `attention.png` in the run directory.
        checkpoint: `"best"` or `"averaged"`.

    Returns:
        The path written.
    """
    plt = pyplot()
    source_pieces, output_pieces, weights = attention_map(run_dir, sentence, checkpoint)
    figure, axis = plt.subplots(
        figsize=(2 + 0.45 * len(source_pieces), 1.5 + 0.35 * len(output_pieces))
    )
    axis.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    axis.set_xticks(range(len(source_pieces)), source_pieces, rotation=90)
    axis.set_yticks(range(len(output_pieces)), output_pieces)
    axis.set(xlabel="source piece", ylabel="output piece")
    figure.tight_layout()
    path = path or os.path.join(run_dir, "attention.png")
    with plt.rc_context({"svg.fonttype": "none"}):
        figure.savefig(path)
    plt.close(figure)
    return path
