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

import hashlib
import json
import os
import shutil

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.config import read_saved_config, save_config
from keras_transformer.datasets import ParallelCorpus, load_corpus
from keras_transformer.export import export_translator
from keras_transformer.inference import Ensemble, Translator, translate_lines
from keras_transformer.inference.scoring import score_outputs
from keras_transformer.layers.masks import PAD_ID
from keras_transformer.text import load_tokenizer, make_batches, train_tokenizer
from keras_transformer.training import (
    PruneCheckpoints,
    all_workers,
    best_val_loss,
    compile_model,
    distribution_strategy,
    epoch_checkpoints,
    fit_under_multi_worker,
    worker_directory,
    worker_role,
)
from keras_transformer.training.backup import StopOnNaN, TrainingBackup

CONFIG_FILE = "config.json"
DONE_FILE = "trained.json"
CHECKPOINTS = {"best": "model.keras", "averaged": "averaged.keras"}


class RunError(RuntimeError):
    """A run directory that cannot do what was asked (missing, unfinished, mismatched)."""


def prepare_tokenizers(run_dir, config, corpus):
    """Loads the run's tokenizers, or trains them on `corpus` and saves them."""
    source_dir = os.path.join(run_dir, "tokenizers", "source")
    target_dir = os.path.join(run_dir, "tokenizers", "target")
    if os.path.isdir(source_dir):
        return load_tokenizers(run_dir, config)
    kind, size = config["tokenizer"]["type"], config["tokenizer"]["vocab_size"]
    sample = config["tokenizer"]["sample_size"]
    if config["tokenizer"]["shared"]:
        source = target = train_tokenizer(kind, corpus.sample_sentences(sample), size)
    else:
        source = train_tokenizer(kind, corpus.sample_sentences(sample, ["source"]), size)
        target = train_tokenizer(kind, corpus.sample_sentences(sample, ["target"]), size)
        target.save(target_dir)
    source.save(source_dir)
    return source, target


def build_model(config, source_vocab, target_vocab):
    """The `Transformer` of the config's `model` section for the given vocabularies."""
    return kt.Transformer(
        **config["model"], input_vocab_size=source_vocab, target_vocab_size=target_vocab
    )


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

    Under `train.strategy=multi_worker` (or `auto` with a `TF_CONFIG` of
    several tasks) every worker runs this with the same arguments. The chief
    writes `run_dir`; each other worker writes the same files into a
    directory of its own (`training.worker_directory`), which it deletes when
    training ends, and keeps until then so that a restarted cluster resumes
    from every worker's backup. Each worker trains on a disjoint share of the
    batches (`Batches.shard`).

    Args:
        run_dir: the run directory; created if missing.
        config: the full configuration; must equal the saved one when the
            run exists.
        verbose: Keras `fit` verbosity (progress bars by default).
        callbacks: more Keras callbacks, called after the run's own.

    Returns:
        The Keras `History`, or None if the run had already finished.
    """
    t, data = config["train"], config["data"]
    strategy = distribution_strategy(t["devices"], t["strategy"])  # before anything else
    role = worker_role(strategy)
    own_dir = run_dir if role.is_chief else worker_directory(run_dir, role)
    config = resolve_config(own_dir, config)
    if os.path.isfile(os.path.join(own_dir, DONE_FILE)):
        print(f"{run_dir} has finished training; nothing to do.")
        return None
    keras.utils.set_random_seed(t["seed"])
    if t["mixed_precision"]:
        keras.config.set_dtype_policy("mixed_bfloat16")

    train_corpus = load_corpus(data, data["train_split"], stream=True)
    if data["train_limit"] is not None:
        train_corpus = train_corpus[: data["train_limit"]]
    val_corpus = load_corpus(data, data["val_split"])
    source_tokenizer, target_tokenizer = prepare_tokenizers(own_dir, config, train_corpus)
    if role.count > 1:
        tokenizers = int(tree_digest(os.path.join(own_dir, "tokenizers"))[:15], 16)  # 60 bits
        check_same_on_every_worker(strategy, "tokenizers", tokenizers)
    batch_args = dict(
        max_length=data["max_length"],
        tokens_per_batch=data["tokens_per_batch"],
        overflow=data["overflow"],
    )
    micro_batches = t["gradient_accumulation_steps"]  # slices of one training batch
    train_batches = make_batches(
        train_corpus,
        source_tokenizer,
        target_tokenizer,
        seed=t["seed"],
        cache=isinstance(train_corpus, ParallelCorpus),  # a stream is read again each epoch
        **{**batch_args, "tokens_per_batch": data["tokens_per_batch"] * micro_batches},
    )
    val_batches = make_batches(
        val_corpus, source_tokenizer, target_tokenizer, shuffle=False, **batch_args
    )
    print(f"train: {train_batches}\nval:   {val_batches}")
    if micro_batches > 1:
        print(f"each training batch: {micro_batches} micro-batches, one update")
    train_data, val_data = train_batches.dataset, val_batches.dataset
    if role.count > 1:
        train_data = per_worker_batches(strategy, train_batches, shard=True)
        val_data = per_worker_batches(strategy, val_batches, shard=False)
        share = train_batches.shard(role.count, role.index).num_batches
        print(
            f"worker {role.index} of {role.count}: {share} of the "
            f"{train_batches.num_batches} training batches an epoch"
        )

    with strategy.scope():
        model = build_model(config, source_tokenizer.vocab_size, target_tokenizer.vocab_size)
        compile_model(model, t)
        one = np.ones((1, 2), "int32")
        model((one, one))  # build the weights, which a backup restores into
        backup = TrainingBackup(os.path.join(own_dir, "backup"), t["backup_every_steps"] or None)
        initial_epoch = restore_on_every_worker(backup, model, strategy)
    checkpoints = os.path.join(own_dir, "checkpoints")
    os.makedirs(checkpoints, exist_ok=True)
    callbacks = [
        StopOnNaN(
            f"The last good training state is the newest backup in {backup.directory} "
            "(train resumes from it), the best model so far "
            f"{os.path.join(run_dir, 'model.keras')}."
        ),
        backup,
        keras.callbacks.ModelCheckpoint(
            os.path.join(own_dir, "model.keras"),
            monitor="val_loss",
            save_best_only=True,
            initial_value_threshold=(
                best_val_loss(os.path.join(own_dir, "metrics.csv")) if initial_epoch else None
            ),
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(checkpoints, "epoch-{epoch:03d}.weights.h5"), save_weights_only=True
        ),
        PruneCheckpoints(checkpoints, t["keep_checkpoints"]),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=t["patience"]),
        keras.callbacks.TensorBoard(os.path.join(own_dir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(own_dir, "metrics.csv"), append=True),
        *callbacks,
    ]
    if role.count > 1:
        fit_under_multi_worker(model, strategy)
    history = model.fit(
        train_data,
        validation_data=val_data,
        epochs=t["epochs"],
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        shuffle=False,  # the pipeline shuffles
        verbose=verbose,
    )
    with open(os.path.join(own_dir, DONE_FILE), "w", encoding="utf-8") as f:
        json.dump({"epochs": len(history.epoch), "history": history.history}, f)
    if role.count > 1:
        print(f"worker {role.index} of {role.count}: weights sha256 {weights_digest(model)}")
    if not role.is_chief:
        shutil.rmtree(own_dir, ignore_errors=True)
    return history


def per_worker_batches(strategy, batches, shard):
    """`batches` fed to a multi-worker `strategy` as they are, one batch per replica and step.

    Keras' own path (`experimental_distribute_dataset`) would cut each
    token-budget batch into one piece per replica, some of them empty when a
    batch has fewer rows than there are replicas. Here every worker builds
    its own dataset instead (`distribute_datasets_from_function`): its share
    of the training batches (`shard=True`, `Batches.shard`), or all of the
    validation batches (`shard=False`), so that every worker computes the same
    `val_loss` for checkpoints and early stopping to compare.
    """

    def dataset_fn(context):
        replicas = context.num_replicas_in_sync // context.num_input_pipelines
        if shard:
            count, index = context.num_input_pipelines, context.input_pipeline_id
        else:
            count, index = 1, 0
        return batches.shard(count, index, replicas).dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


def tree_digest(directory):
    """SHA-256 (hex) of the relative names and the bytes of the files under `directory`."""
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def check_same_on_every_worker(strategy, what, value):
    """Raises `RunError` unless every worker of `strategy` holds the same int `value`."""
    values = all_workers(strategy, value)
    if len(set(values)) > 1:
        raise RunError(
            f"The workers' {what} differ (one value per replica: {values}); every worker "
            "must run the same command on the same data."
        )


def restore_on_every_worker(backup, model, strategy):
    """`backup.restore`, on every worker from a backup of the same step; the epoch to start at.

    Workers back up independently, so a cluster stopped between two workers'
    backups holds a newer one on some workers: they restore the newest step
    that every worker has (each keeps its last two backups). With one worker
    this is `backup.restore(model)`.
    """
    at_most = min(all_workers(strategy, backup.newest_step()))
    for _ in range(3):  # again only if a worker's backup of that step was unreadable
        initial_epoch = backup.restore(model, at_most)
        steps = all_workers(strategy, backup.restored_step)
        if len(set(steps)) == 1:
            return initial_epoch
        at_most = min(steps)
        if at_most == 0:
            break  # a worker has nothing to restore, and the others have loaded a backup
    raise RunError(
        f"The workers have no readable backup of one step in common (they restored steps "
        f"{steps}). Delete every worker's backup directory to start the run over."
    )


def weights_digest(model):
    """SHA-256 of the model's weights: equal on workers that trained in step."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


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


def make_translator(
    run_dir, checkpoint="best", beam_size=None, alpha=None, max_length=None, **options
):
    """A `Translator` of a trained run; unset decoding options come from its config.

    Args:
        run_dir: a run directory, or a list of them for an ensemble (their
            models decode as one `Ensemble`; they must share tokenizers).
        checkpoint: `"best"` or `"averaged"`.
        beam_size, alpha, max_length: decoding options; None takes the
            config's (the first run's, for an ensemble).
        **options: further `Translator` arguments (`n_best`, `sample`,
            `temperature`, `top_k`, `top_p`, `seed`).
    """
    return translators(run_dir, checkpoint, [beam_size], alpha, max_length, **options)[0][0]


def translators(
    run_dir, checkpoint="best", beam_sizes=(None,), alpha=None, max_length=None, **options
):
    """`([Translator per beam size], config)` of a trained run (or runs), loaded once."""
    config, model, source, target = load_models(run_dir, checkpoint)
    d = config["decode"]
    made = [
        Translator(
            model,
            source,
            target,
            max_length=d["max_length"] if max_length is None else max_length,
            beam_size=d["beam_size"] if beam_size is None else beam_size,
            alpha=d["alpha"] if alpha is None else alpha,
            **options,
        )
        for beam_size in beam_sizes
    ]
    return made, config


def load_models(run_dirs, checkpoint="best"):
    """`load_run` of one run directory, or of several as an `Ensemble`.

    The runs of an ensemble must have identical tokenizer files; the config
    returned is the first run's.
    """
    if isinstance(run_dirs, (str, os.PathLike)):
        return load_run(run_dirs, checkpoint)
    first = os.path.join(run_dirs[0], "tokenizers")
    for run_dir in run_dirs[1:]:
        if not same_files(first, os.path.join(run_dir, "tokenizers")):
            raise RunError(
                f"{run_dirs[0]} and {run_dir} have different tokenizers; an ensemble's "
                "models must share one vocabulary."
            )
    runs = [load_run(run_dir, checkpoint) for run_dir in run_dirs]
    config, _, source, target = runs[0]
    if len(runs) == 1:
        return runs[0]
    return config, Ensemble([model for _, model, _, _ in runs]), source, target


def same_files(directory_a, directory_b):
    """Whether two directory trees hold the same files with the same bytes."""
    return tree_digest(directory_a) == tree_digest(directory_b)


def score_pairs(run_dir, sources, targets, checkpoint="best", batch_size=64):
    """log P(target | source) of given translations under a run's model (force decoding).

    One teacher-forced pass per batch (`inference.scoring.score_outputs`);
    each target is scored with its EOS, and padding and BOS get probability
    zero, as in the searches.

    Args:
        run_dir: a trained run directory.
        sources: source sentences, a list of strings.
        targets: their translations, a list of strings of the same length.
        checkpoint: `"best"` or `"averaged"`.
        batch_size: pairs per forward pass.

    Returns:
        A list of dicts, one per pair: `log_prob` (the total), `tokens`
        (target tokens with EOS) and `log_prob_per_token`.
    """
    if len(sources) != len(targets):
        raise ValueError(
            f"Scoring needs one target per source. Received: {len(sources)} sources, "
            f"{len(targets)} targets"
        )
    config, model, source_tokenizer, target_tokenizer = load_run(run_dir, checkpoint)
    reader = Translator(model, source_tokenizer, target_tokenizer, jit_compile=False)
    eos = target_tokenizer.eos_id
    scored = []
    for start in range(0, len(sources), batch_size):
        source_ids = reader.source_ids(tf.constant(sources[start : start + batch_size]))
        pieces = target_tokenizer.tokenize(tf.constant(targets[start : start + batch_size]))
        with_eos = tf.concat([pieces, tf.fill([pieces.nrows(), 1], eos)], axis=1)
        result = score_outputs(
            model,
            source_ids.numpy(),
            with_eos.to_tensor(PAD_ID).numpy(),
            target_tokenizer.bos_id,
            eos,
            batch_size=batch_size,
        )
        for log_prob, length in zip(result["log_prob"], result["length"], strict=True):
            scored.append(
                {
                    "log_prob": float(log_prob),
                    "tokens": int(length),
                    "log_prob_per_token": float(log_prob / length),
                }
            )
    return scored


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
        tokenization), `bleu_lowercase`, `bleu_intl`, `bleu_intl_lowercase`
        (see `score_translations`), `chrf`, `signature`,
        `signature_intl_lowercase`, `exact_match`,
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
    """sacreBLEU cased and lowercased, with its standard 13a and its `intl` tokenization,
    chrF, the BLEU signatures and the exact-match share.

    The `intl` figures split punctuation and symbols of every script, the
    closest sacreBLEU comes to the tokenized, lowercased BLEU of many
    published Multi30k results.
    """

    def bleu(**options):
        metric = sacrebleu.metrics.BLEU(**options)
        return metric.corpus_score(hypotheses, [references]), str(metric.get_signature())

    (cased, signature), (lowercase, _) = bleu(), bleu(lowercase=True)
    (intl, _), (intl_lowercase, intl_signature) = (
        bleu(tokenize="intl"),
        bleu(tokenize="intl", lowercase=True),
    )
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references])
    exact = np.mean([h == r for h, r in zip(hypotheses, references, strict=True)])
    return {
        "bleu": round(cased.score, 2),
        "bleu_lowercase": round(lowercase.score, 2),
        "bleu_intl": round(intl.score, 2),
        "bleu_intl_lowercase": round(intl_lowercase.score, 2),
        "chrf": round(chrf.score, 2),
        "exact_match": round(float(exact), 4),
        "signature": signature,
        "signature_intl_lowercase": intl_signature,
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


def export_ctranslate2_run(
    run_dir, directory=None, base_dir="saved_models", checkpoint="best", quantization=None, **kw
):
    """Exports a run as a CTranslate2 model directory (see `export_ctranslate2`).

    `directory` defaults to `{base_dir}/{run name}-ctranslate2-{quantization}`
    (`float32` without quantization); other keyword arguments go to the
    `Translator` whose options are saved with it (`beam_size`, `alpha`).
    """
    from keras_transformer.export.ctranslate2 import export_ctranslate2

    translator = make_translator(run_dir, checkpoint, **kw)
    if directory is None:
        name = os.path.basename(os.path.normpath(run_dir))
        directory = os.path.join(base_dir, f"{name}-ctranslate2-{quantization or 'float32'}")
    return export_ctranslate2(translator, directory, quantization=quantization)
