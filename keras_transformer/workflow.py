"""Runs: train, evaluate, average, export and translate from a run directory.

A run directory holds everything one training run makes:

    config.json            the full configuration
    tokenizers/source/     tokenizer files (and tokenizers/target/ unless shared)
    model.keras            the model with the best validation loss
    checkpoints/           weights of the last epochs (epoch-NNN.weights.h5)
    backup/                the last two training states while training is unfinished
    logs/                  TensorBoard logs
    metrics.csv            loss and accuracy per epoch
    trained.json           written when training has finished
    averaged.keras         after `average_checkpoints`

Running `train` again on an unfinished run resumes it from its last epoch.

Example:
```python
config = load_config(overrides=["train.epochs=2"])
train("runs/numbers", config)
print(evaluate("runs/numbers")["bleu"])
```
"""

import csv
import glob
import json
import os

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

import keras_transformer as kt
from keras_transformer import datasets
from keras_transformer.config import ConfigError, read_saved_config, save_config
from keras_transformer.export import export_translator
from keras_transformer.inference import Translator
from keras_transformer.text import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    load_tokenizer,
    make_batches,
)
from keras_transformer.training.backup import StopOnNaN, TrainingBackup
from keras_transformer.training.schedules import ScaledSchedule

CONFIG_FILE = "config.json"
DONE_FILE = "trained.json"
CHECKPOINTS = {"best": "model.keras", "averaged": "averaged.keras"}


class RunError(RuntimeError):
    """A run directory that cannot do what was asked (missing, unfinished, mismatched)."""


def load_corpus(data, split):
    """The `split` of the corpus the `data` section names, as a `ParallelCorpus`."""
    corpus, src, tgt = data["corpus"], data["source_lang"], data["target_lang"]
    if corpus == "numbers":
        return datasets.numbers_corpus(split, src, tgt)
    if corpus == "files":
        directory = os.path.expandvars(data["directory"] or "")
        if not directory or "$" in directory:
            raise ConfigError(
                "data.corpus=files needs data.directory (environment variables in it "
                f"must be set). Received: {data['directory']!r}"
            )
        return datasets.load_split(directory, split, src, tgt)
    if corpus == "tsv":
        if not data["path"]:
            raise ConfigError("data.corpus=tsv needs data.path")
        return _tsv_split(datasets.load_tsv(data["path"]), split, data)
    if corpus == "tfds":
        if not data["name"]:
            raise ConfigError("data.corpus=tfds needs data.name")
        return datasets.load_tfds(data["name"], split)
    raise ConfigError(f"data.corpus must be numbers, files, tsv or tfds. Received: {corpus!r}")


def _tsv_split(corpus, split, data):
    """A fixed shuffle of a TSV file: the last 2% is test, the 2% before it val."""
    order = np.random.default_rng(0).permutation(len(corpus))
    held = max(1, len(corpus) // 50)
    parts = {
        data["train_split"]: order[: -2 * held],
        data["val_split"]: order[-2 * held : -held],
        data["test_split"]: order[-held:],
    }
    if split not in parts:
        raise ConfigError(f"A TSV corpus has the splits {sorted(parts)}. Received: {split!r}")
    chosen = parts[split]
    return datasets.ParallelCorpus(
        [corpus.sources[i] for i in chosen], [corpus.targets[i] for i in chosen]
    )


def train_tokenizer(settings, texts):
    kind = {"sentencepiece": SentencePieceTokenizer, "wordpiece": WordPieceTokenizer}
    if settings["type"] not in kind:
        raise ConfigError(
            f"tokenizer.type must be sentencepiece or wordpiece. Received: {settings['type']!r}"
        )
    return kind[settings["type"]].train(texts, vocab_size=settings["vocab_size"])


def prepare_tokenizers(run_dir, config, corpus):
    """Loads the run's tokenizers, or trains them on `corpus` and saves them."""
    source_dir = os.path.join(run_dir, "tokenizers", "source")
    target_dir = os.path.join(run_dir, "tokenizers", "target")
    if os.path.isdir(source_dir):
        return load_tokenizers(run_dir, config)
    settings = config["tokenizer"]
    if settings["shared"]:
        source = target = train_tokenizer(settings, corpus.sources + corpus.targets)
    else:
        source = train_tokenizer(settings, corpus.sources)
        target = train_tokenizer(settings, corpus.targets)
        target.save(target_dir)
    source.save(source_dir)
    return source, target


def build_model(config, source_vocab, target_vocab):
    m = config["model"]
    return kt.Transformer(
        num_layers=m["num_layers"],
        d_model=m["d_model"],
        num_heads=m["num_heads"],
        dff=m["dff"],
        input_vocab_size=source_vocab,
        target_vocab_size=target_vocab,
        dropout_rate=m["dropout_rate"],
        attention_dropout_rate=m["attention_dropout_rate"],
        norm_first=m["norm_first"],
        shared_embeddings=m["shared_embeddings"],
    )


def compile_model(model, config):
    t = config["train"]
    schedule = kt.TransformerSchedule(config["model"]["d_model"], t["warmup_steps"])
    if t["learning_rate_scale"] != 1.0:
        schedule = ScaledSchedule(schedule, t["learning_rate_scale"])
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=t["label_smoothing"]),
        metrics=[kt.MaskedAccuracy()],
    )


class PruneCheckpoints(keras.callbacks.Callback):
    """Keeps only the newest `keep` epoch checkpoints in `directory`."""

    def __init__(self, directory, keep):
        super().__init__()
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        for path in epoch_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)


def epoch_checkpoints(directory):
    return sorted(glob.glob(os.path.join(directory, "epoch-*.weights.h5")))


def resolve_config(run_dir, config):
    """The run's config: saved in `run_dir`, which `config` may not contradict."""
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        os.makedirs(run_dir, exist_ok=True)
        save_config(config, path)
        return config
    saved = read_saved_config(path)
    if config is not None and config != saved:
        changed = [
            f"{s}.{k}: {saved[s][k]!r} -> {config[s][k]!r}"
            for s in saved
            for k in saved[s]
            if saved[s][k] != config[s][k]
        ]
        raise RunError(
            f"{run_dir} was started with another configuration ({'; '.join(changed)}). "
            "Use a new --run-dir, or run train without changes to resume."
        )
    return saved


def train(run_dir, config, verbose="auto", callbacks=()):
    """Trains (or resumes) the run in `run_dir` with `model.fit`.

    Args:
        run_dir: the run directory; created if missing.
        config: the full configuration; must equal the saved one when the
            run exists.
        verbose: Keras `fit` verbosity (progress bars by default).
        callbacks: more Keras callbacks, called after the run's own.

    Returns:
        The Keras `History`, or None if the run had already finished.
    """
    config = resolve_config(run_dir, config)
    if os.path.isfile(os.path.join(run_dir, DONE_FILE)):
        print(f"{run_dir} has finished training; nothing to do.")
        return None
    t, data = config["train"], config["data"]
    if t["backup_every_steps"] < 0:
        raise ConfigError(
            "train.backup_every_steps must be 0 (epoch ends only) or a positive integer. "
            f"Received: {t['backup_every_steps']}"
        )
    keras.utils.set_random_seed(t["seed"])
    if t["mixed_precision"]:
        keras.config.set_dtype_policy("mixed_bfloat16")
    strategy = distribution_strategy(t["devices"])

    train_corpus = load_corpus(data, data["train_split"])
    if data["train_limit"] is not None:
        if not isinstance(data["train_limit"], int) or data["train_limit"] <= 0:
            raise ConfigError(
                f"data.train_limit must be a positive integer. Received: {data['train_limit']!r}"
            )
        train_corpus = train_corpus[: data["train_limit"]]
    val_corpus = load_corpus(data, data["val_split"])
    source_tokenizer, target_tokenizer = prepare_tokenizers(run_dir, config, train_corpus)
    batch_args = dict(
        max_length=data["max_length"],
        tokens_per_batch=data["tokens_per_batch"],
        overflow=data["overflow"],
    )
    train_batches = make_batches(
        train_corpus, source_tokenizer, target_tokenizer, seed=t["seed"], **batch_args
    )
    val_batches = make_batches(
        val_corpus, source_tokenizer, target_tokenizer, shuffle=False, **batch_args
    )
    print(f"train: {train_batches}\nval:   {val_batches}")

    with strategy.scope():
        model = build_model(config, source_tokenizer.vocab_size, target_tokenizer.vocab_size)
        compile_model(model, config)
        one = np.ones((1, 2), "int32")
        model((one, one))  # build the weights, which a backup restores into
    checkpoints = os.path.join(run_dir, "checkpoints")
    os.makedirs(checkpoints, exist_ok=True)
    backup = TrainingBackup(os.path.join(run_dir, "backup"), t["backup_every_steps"] or None)
    initial_epoch = backup.restore(model)
    callbacks = [
        StopOnNaN(
            f"The last good training state is the newest backup in {backup.directory} "
            "(train resumes from it), the best model so far "
            f"{os.path.join(run_dir, 'model.keras')}."
        ),
        backup,
        keras.callbacks.ModelCheckpoint(
            os.path.join(run_dir, "model.keras"),
            monitor="val_loss",
            save_best_only=True,
            initial_value_threshold=best_val_loss(run_dir) if initial_epoch else None,
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(checkpoints, "epoch-{epoch:03d}.weights.h5"), save_weights_only=True
        ),
        PruneCheckpoints(checkpoints, t["keep_checkpoints"]),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=t["patience"]),
        keras.callbacks.TensorBoard(os.path.join(run_dir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(run_dir, "metrics.csv"), append=True),
        *callbacks,
    ]
    history = model.fit(
        train_batches.dataset,
        validation_data=val_batches.dataset,
        epochs=t["epochs"],
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        shuffle=False,  # the pipeline shuffles
        verbose=verbose,
    )
    with open(os.path.join(run_dir, DONE_FILE), "w", encoding="utf-8") as f:
        json.dump({"epochs": len(history.epoch), "history": history.history}, f)
    return history


def best_val_loss(run_dir):
    """The lowest validation loss in the run's metrics.csv, or None: a resumed run's
    best model is replaced only by a better one."""
    path = os.path.join(run_dir, "metrics.csv")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        losses = [float(row["val_loss"]) for row in csv.DictReader(f) if row.get("val_loss")]
    return min(losses, default=None)


def distribution_strategy(devices):
    """One device, or `MirroredStrategy` over `devices` GPUs or logical CPUs."""
    if devices <= 1:
        return tf.distribute.get_strategy()
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= devices:
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(devices)])
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * devices
        )
    except RuntimeError:
        raise RunError(
            "train.devices > 1 on CPU needs the logical devices set before TensorFlow "
            "starts; run it from a fresh process (the CLI does)."
        ) from None
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])


def load_run(run_dir, checkpoint="best"):
    """`(config, model, source_tokenizer, target_tokenizer)` of a trained run.

    Args:
        run_dir: the run directory.
        checkpoint: `"best"` (lowest validation loss) or `"averaged"`.
    """
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise RunError(f"{run_dir!r} is not a run directory: {CONFIG_FILE} is missing.")
    config = read_saved_config(path)
    if checkpoint not in CHECKPOINTS:
        raise RunError(f"checkpoint must be one of {sorted(CHECKPOINTS)}. Received: {checkpoint!r}")
    model_path = os.path.join(run_dir, CHECKPOINTS[checkpoint])
    if not os.path.isfile(model_path):
        hint = "run average first" if checkpoint == "averaged" else "train it first"
        raise RunError(f"{model_path} does not exist; {hint}.")
    source, target = load_tokenizers(run_dir, config)
    model = keras.models.load_model(model_path)
    for side, tokenizer, size in [
        ("source", source, model.input_vocab_size),
        ("target", target, model.target_vocab_size),
    ]:
        if tokenizer.vocab_size != size:
            raise RunError(
                f"The {side} tokenizer of {run_dir} has {tokenizer.vocab_size} ids but "
                f"the model's {side} vocabulary has {size}: they are from different runs."
            )
    return config, model, source, target


def load_tokenizers(run_dir, config):
    """The run's saved `(source, target)` tokenizers (one object if shared)."""
    source_dir = os.path.join(run_dir, "tokenizers", "source")
    if not os.path.isdir(source_dir):
        raise RunError(f"{run_dir} has no tokenizers; train it first.")
    source = load_tokenizer(source_dir)
    if config["tokenizer"]["shared"]:
        return source, source
    return source, load_tokenizer(os.path.join(run_dir, "tokenizers", "target"))


def make_translator(run_dir, checkpoint="best", beam_size=None, alpha=None, max_length=None):
    """A `Translator` of a trained run; unset decoding options come from its config."""
    return translators(run_dir, checkpoint, [beam_size], alpha, max_length)[0][0]


def translators(run_dir, checkpoint="best", beam_sizes=(None,), alpha=None, max_length=None):
    """`([Translator per beam size], config)` of a trained run, its model loaded once."""
    config, model, source, target = load_run(run_dir, checkpoint)
    d = config["decode"]
    made = [
        Translator(
            model,
            source,
            target,
            max_length=d["max_length"] if max_length is None else max_length,
            beam_size=d["beam_size"] if beam_size is None else beam_size,
            alpha=d["alpha"] if alpha is None else alpha,
        )
        for beam_size in beam_sizes
    ]
    return made, config


def translate_lines(translator, lines, batch_size=64):
    """Translates a list of strings in batches, sorted by length for speed.

    `translator` is any callable from a `tf.string` batch `(B,)` to one, such
    as a `Translator` or a loaded SavedModel's `serving_default`.
    """
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out = [None] * len(lines)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        results = translator(tf.constant([lines[i] for i in chunk])).numpy()
        for i, text in zip(chunk, results, strict=True):
            out[i] = text.decode("utf-8", errors="replace")
    return out


def evaluate(run_dir, split=None, checkpoint="best", beam_size=None, alpha=None, output=None):
    """Translates a split and scores it with sacreBLEU.

    Args:
        run_dir: a trained run directory.
        split: the split to decode; defaults to the config's `data.test_split`.
        checkpoint: `"best"` or `"averaged"`.
        beam_size: 1 for greedy search; a list (e.g. `[1, 4]`) decodes with
            each, loading the model once. Defaults to `decode.beam_size`.
        alpha: length penalty; defaults to `decode.alpha`.
        output: the hypotheses file; defaults to
            `{run_dir}/{split}.{checkpoint}.beam{k}.hyp.txt`.

    Returns:
        Dict with `bleu` (cased, detokenized, sacreBLEU's standard 13a
        tokenization), `bleu_lowercase`, `chrf`, `signature`, `exact_match`,
        `sentences`, `beam_size`, and `hypotheses` (the file written); a list
        of them, one a beam size, when `beam_size` is a list.
    """
    several = isinstance(beam_size, (list, tuple))
    made, config = translators(run_dir, checkpoint, beam_size if several else [beam_size], alpha)
    split = split or config["data"]["test_split"]
    corpus = load_corpus(config["data"], split)
    results = []
    for translator in made:
        beam = f"beam{translator.beam_size}"
        path = output or os.path.join(run_dir, f"{split}.{checkpoint}.{beam}.hyp.txt")
        if output and several:
            path = "{0}.{2}{1}".format(*os.path.splitext(output), beam)
        hypotheses = translate_lines(translator, corpus.sources, config["decode"]["batch_size"])
        result = {
            "split": split,
            "checkpoint": checkpoint,
            "sentences": len(hypotheses),
            "beam_size": translator.beam_size,
            "alpha": translator.alpha,
            **score_translations(hypotheses, corpus.targets),
            "hypotheses": path,
        }
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(hypotheses) + "\n")
        with open(os.path.join(run_dir, f"eval.{split}.{checkpoint}.{beam}.json"), "w") as f:
            json.dump(result, f, indent=2)
        results.append(result)
    return results if several else results[0]


def score_translations(hypotheses, references):
    """Cased and lowercased sacreBLEU, chrF, the BLEU signature and the exact-match share."""
    bleu = sacrebleu.metrics.BLEU()
    cased = bleu.corpus_score(hypotheses, [references])
    lowercase = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hypotheses, [references])
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references])
    exact = np.mean([h == r for h, r in zip(hypotheses, references, strict=True)])
    return {
        "bleu": round(cased.score, 2),
        "bleu_lowercase": round(lowercase.score, 2),
        "chrf": round(chrf.score, 2),
        "exact_match": round(float(exact), 4),
        "signature": str(bleu.get_signature()),
    }


def average_checkpoints(run_dir, last=5):
    """Averages the weights of the last `last` epoch checkpoints into `averaged.keras`.

    Returns:
        The path of the averaged model.
    """
    paths = epoch_checkpoints(os.path.join(run_dir, "checkpoints"))[-last:]
    if not paths:
        raise RunError(f"{run_dir} has no epoch checkpoints to average; train it first.")
    _, model, _, _ = load_run(run_dir, "best")
    total = [np.zeros_like(w) for w in model.get_weights()]
    for path in paths:
        model.load_weights(path)
        total = [t + w for t, w in zip(total, model.get_weights(), strict=True)]
    model.set_weights([t / len(paths) for t in total])
    out = os.path.join(run_dir, CHECKPOINTS["averaged"])
    model.save(out)
    print(f"averaged {len(paths)} checkpoints: {', '.join(map(os.path.basename, paths))}")
    return out


def export(
    run_dir,
    name=None,
    base_dir="saved_models",
    version=None,
    checkpoint="best",
    text=True,
    xla=False,
    **kw,
):
    """Exports a run as `{base_dir}/{name}/{version}/`; `name` defaults to the run's.

    `text=False` leaves out the tokenizers and `xla=True` keeps the XLA-compiled
    search (see `export_translator`); other keyword arguments go to the
    `Translator` (`beam_size`, `alpha`).
    """
    translator = make_translator(run_dir, checkpoint, **kw)
    name = name or os.path.basename(os.path.normpath(run_dir))
    return export_translator(
        translator, name, base_dir=base_dir, version=version, text=text, xla=xla
    )
