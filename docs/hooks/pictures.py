"""Draws the site's pictures when it is built, with the package's own code, so that they
show what the code does: the learning-rate schedule (`transformer_schedule`), the masks
(`padding_mask`, `look_ahead_mask`), the model's structure, and the README's speed table as
a chart of the figures it holds. `mkdocs build` runs it (a hook in mkdocs.yml); the pictures
are not kept in the repository."""

import io
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from mkdocs.structure.files import File  # noqa: E402


def svg(figure):
    """The figure as SVG bytes whose text stays text."""
    buffer = io.BytesIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "keras_transformer"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def schedule_picture():
    from keras_transformer.training import transformer_schedule

    steps = np.arange(1, 100_001)
    figure, axis = plt.subplots(figsize=(7, 3.4))
    curves = {
        "d_model 512, warm-up 4,000 (the paper's base model)": transformer_schedule(512, 4000),
        "d_model 512, warm-up 8,000": transformer_schedule(512, 8000),
        "warm-up 4,000, the last 20,000 of 100,000 steps cooled down": transformer_schedule(
            512, 4000, cooldown=(100_000, 20_000)
        ),
    }
    for (label, schedule), style in zip(curves.items(), ("-", "-", "--"), strict=True):
        axis.plot(steps, np.asarray(schedule(steps)), style, label=label)
    axis.set(xlabel="optimizer step", ylabel="learning rate")
    axis.legend(fontsize=8)
    figure.tight_layout()
    return svg(figure)


def masks_picture():
    from keras_transformer.layers.masks import look_ahead_mask, padding_mask

    target = np.array([[7, 12, 5, 9, 0, 0]])  # four tokens, two of padding
    source = np.array([[4, 8, 15, 16, 23, 0, 0]])
    pictures = {
        "padding mask of the source\n(keys a query may read)": np.asarray(
            padding_mask(source)[0, 0]
        ).repeat(6, axis=0),
        "look-ahead mask (T, T)": np.asarray(look_ahead_mask(6)),
        "decoder self-attention:\nlook-ahead AND target padding": np.asarray(look_ahead_mask(6))
        & np.asarray(padding_mask(target)[0, 0]),
    }
    figure, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    for axis, (title, mask) in zip(axes, pictures.items(), strict=True):
        axis.imshow(mask, cmap="Greens", vmin=0, vmax=1.4)
        axis.set(title=title, xlabel="key position", ylabel="query position")
        axis.set_xticks(range(mask.shape[1]))
        axis.set_yticks(range(mask.shape[0]))
        axis.title.set_fontsize(9)
    figure.suptitle("True (green) = may be attended to", fontsize=9)
    figure.tight_layout()
    return svg(figure)


def box(axis, x, y, text, color, width=2.6, height=0.42):
    axis.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.04",
            facecolor=color,
            edgecolor="#555555",
        )
    )
    axis.text(x, y, text, ha="center", va="center", fontsize=8)


def arrow(axis, start, end):
    axis.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": "#555555"})


def structure_picture():
    from keras_transformer.layers import (
        Decoder,
        DecoderLayer,
        Encoder,
        EncoderLayer,
        FeedForward,
        MultiHeadAttention,
        PositionalEmbedding,
    )
    from keras_transformer.models import Transformer

    attention, feed_forward = MultiHeadAttention.__name__, FeedForward.__name__
    figure, axis = plt.subplots(figsize=(8, 6.2))
    encoder = [
        (f"{PositionalEmbedding.__name__}: embedding × √D + sinusoids", "#dde8f7"),
        (f"self-attention ({attention}), add & LayerNorm", "#f7e3c9"),
        (f"{feed_forward}, add & LayerNorm", "#d9f0d9"),
    ]
    decoder = [
        (f"{PositionalEmbedding.__name__}: embedding × √D + sinusoids", "#dde8f7"),
        (f"masked self-attention ({attention}),\nadd & LayerNorm", "#f7e3c9"),
        (f"cross-attention ({attention}) over\nthe encoder's output, add & LayerNorm", "#f7e3c9"),
        (f"{feed_forward}, add & LayerNorm", "#d9f0d9"),
        ("linear projection to the target vocabulary", "#eeeeee"),
    ]
    for x, side, rows, label in (
        (1.8, "source ids (B, S)", encoder, f"{Encoder.__name__}: N × {EncoderLayer.__name__}"),
        (5.6, "target ids (B, T)", decoder, f"{Decoder.__name__}: N × {DecoderLayer.__name__}"),
    ):
        axis.text(x, 0.2, side, ha="center", fontsize=8)
        y = 0.9
        arrow(axis, (x, 0.35), (x, y - 0.25))
        for index, (text, color) in enumerate(rows):
            box(axis, x, y, text, color, width=3.2, height=0.6)
            if index < len(rows) - 1:
                arrow(axis, (x, y + 0.32), (x, y + 0.78))
            y += 1.1
        layers = rows[1:-1] if side.startswith("target") else rows[1:]
        top = 0.9 + 1.1 * len(layers) + 0.35
        axis.add_patch(
            FancyBboxPatch(
                (x - 1.75, 1.55),
                3.5,
                top - 1.55 - 0.05,
                boxstyle="round,pad=0.05",
                fill=False,
                linestyle="--",
                edgecolor="#888888",
            )
        )
        axis.text(x - 1.7, top - 0.05, label, fontsize=8, va="bottom")
    arrow(axis, (3.4, 3.1), (4.0, 3.1))
    axis.text(3.7, 2.9, "(B, S, D)", fontsize=7, ha="center")
    axis.text(5.6, 6.25, "logits (B, T, V)", ha="center", fontsize=8)
    arrow(axis, (5.6, 5.72), (5.6, 6.18))
    axis.set_title(f"{Transformer.__name__} (Vaswani et al., 2017, figure 1)", fontsize=10)
    axis.set_xlim(0, 7.5)
    axis.set_ylim(0, 6.6)
    axis.axis("off")
    figure.tight_layout()
    return svg(figure)


def readme_table(name):
    """`(header, rows)` of the first table between the README's snippet markers `name`."""
    with open("README.md", encoding="utf-8") as f:
        text = f.read()
    section = text.split(f"--8<-- [start:{name}]")[1].split(f"--8<-- [end:{name}]")[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def latency_picture():
    header, rows = readme_table("latency")
    column = header.index("p50")
    engines = [row[0].replace("`", "") for row in rows]
    p50 = [float(re.match(r"[\d.]+", row[column]).group()) for row in rows]
    figure, axis = plt.subplots(figsize=(8, 0.8 + 0.45 * len(rows)))
    axis.barh(engines[::-1], p50[::-1], color="#5b8bd0")
    for y, value in enumerate(p50[::-1]):
        axis.text(value, y, f" {value:g} ms", va="center", fontsize=8)
    axis.set(xlabel="median milliseconds a sentence (beam 4)")
    axis.set_xlim(0, max(p50) * 1.2)
    figure.tight_layout()
    return svg(figure)


PICTURES = {
    "images/schedule.svg": schedule_picture,
    "images/masks.svg": masks_picture,
    "images/transformer.svg": structure_picture,
    "images/latency.svg": latency_picture,
}


def on_files(files, config):
    for path, draw in PICTURES.items():
        files.append(File.generated(config, path, content=draw()))
    return files
