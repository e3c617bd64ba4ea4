"""`train`: a run from its configuration to a trained model, resumable at any point.

Training reads as its steps: the strategy and this process's place in it,
the data, the model (restored from a backup when resuming), the callbacks,
and `model.fit`.
"""

import logging
import os
import shutil
from collections.abc import Sequence
from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import MIXED_PRECISION_POLICIES
from keras_transformer.errors import ArgumentError, RunError
from keras_transformer.model_section import model_arguments
from keras_transformer.models import Transformer
from keras_transformer.run.data import (
    corpus_split,
    training_and_validation_batches,
    training_corpus,
)
from keras_transformer.run.directory import RunDirectory
from keras_transformer.training import (
    PruneCheckpoints,
    StopOnNaN,
    TrainingBackup,
    compile_model,
    distribution_strategy,
    fit_under_multi_worker,
)
from keras_transformer.training.multi_worker import (
    check_same_on_every_worker,
    per_worker_batches,
    restore_on_every_worker,
    weights_digest,
)
from keras_transformer.training.precision import cpu_flags, slow_bfloat16_warning
from keras_transformer.training.strategy import worker_directory, worker_role

log = logging.getLogger(__name__)


def build_model(config, source_vocab, target_vocab):
    """The `Transformer` of the config's `model` section for the given vocabularies."""
    return Transformer(
        **model_arguments(config["model"]),
        input_vocab_size=source_vocab,
        target_vocab_size=target_vocab,
    )


def compile_from_config(model, t, steps_per_epoch=None):
    """`training.compile_model` with the options of the `train` configuration section `t`.

    `steps_per_epoch`, the optimizer updates of an epoch (`Batches.num_batches`),
    places the cool-down of `train.cooldown_epochs` at the end of `train.epochs`;
    it is needed only if that is above 0.
    """
    compile_model(
        model,
        warmup_steps=t["warmup_steps"],
        learning_rate_scale=t["learning_rate_scale"],
        label_smoothing=t["label_smoothing"],
        micro_batches=t["micro_batches"],
        r_drop=t["r_drop"],
        jit_compile=t["jit_compile"],
        cooldown=cooldown_steps(t, steps_per_epoch),
    )


def set_precision(t):
    """Sets the Keras dtype policy of `train.mixed_precision` in the `train` section `t`.

    Returns:
        `slow_bfloat16_warning`'s sentence for this machine, or None (also for
        a float32 run, which leaves the policy as it is).
    """
    if not t["mixed_precision"]:
        return None
    policy = MIXED_PRECISION_POLICIES[t["mixed_precision"]]
    keras.config.set_dtype_policy(policy)
    return slow_bfloat16_warning(policy, tf.config.list_physical_devices("GPU"), cpu_flags())


def long_warmup_warning(t, steps_per_epoch):
    """A line saying that the warm-up of the `train` section `t` outlasts the run's
    `t["epochs"] * steps_per_epoch` optimizer steps, so the learning rate only rises;
    None if it does not.

    Examples:
        ```python
        long_warmup_warning({"warmup_steps": 500, "epochs": 2}, 111)  # "train.warmup_steps=500 ..."
        ```
    """
    steps = t["epochs"] * steps_per_epoch
    if t["warmup_steps"] <= steps:
        return None
    return (
        f"train.warmup_steps={t['warmup_steps']} is more than the run's {steps} optimizer "
        f"steps ({t['epochs']} epochs of {steps_per_epoch}): the learning rate only rises. "
        f"A small corpus wants about a tenth: --set train.warmup_steps={max(1, steps // 10)}"
    )


def cooldown_steps(t, steps_per_epoch):
    """`(total_steps, cooldown_steps)` of the `train` section `t`, or None for no cool-down."""
    if not t["cooldown_epochs"]:
        return None
    if steps_per_epoch is None:
        raise ArgumentError(
            "train.cooldown_epochs needs the optimizer steps of an epoch: pass "
            "`steps_per_epoch` (the training `Batches.num_batches`)."
        )
    return t["epochs"] * steps_per_epoch, t["cooldown_epochs"] * steps_per_epoch


class Place(NamedTuple):
    """Where this process trains: its strategy, its role, and the directory it writes."""

    strategy: object
    role: object
    own: RunDirectory


def train(
    run_dir: str,
    config: dict,
    verbose: str | int = "auto",
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> keras.callbacks.History | None:
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
        config: the full configuration; must equal the saved one once the
            run has begun (`RunDirectory.resolve_config`), but for a larger
            `train.epochs`, which trains the run for longer (`train_longer`).
        verbose: Keras `fit` verbosity (progress bars by default).
        callbacks: more Keras callbacks, called after the run's own.

    Returns:
        The Keras `History`, or None if the run had already finished.

    Examples:
        ```python
        history = train("runs/numbers", load_config(overrides=["train.epochs=2"]))
        ```
    """
    place = find_place(run_dir, config["train"])  # before anything else starts TensorFlow
    config, longer = place.own.resolve_config(config)
    finished = place.own.is_finished()
    if finished and not longer:
        log.info("%s has finished training; nothing to do.", run_dir)
        return None
    if finished and place.role.count > 1:
        raise RunError(
            f"{run_dir} has finished; training it for longer takes one process "
            "(train.strategy=auto without TF_CONFIG)."
        )
    t = config["train"]
    keras.utils.set_random_seed(t["seed"])
    warning = set_precision(t)
    if warning:
        log.warning(warning)
    train_data, val_data, tokenizers, steps_per_epoch = prepare_data(place, config)
    warning = long_warmup_warning(t, steps_per_epoch)
    if warning:
        log.warning(warning)
    model, backup, initial_epoch = prepare_model(place, config, tokenizers, steps_per_epoch)
    if longer:
        initial_epoch = train_longer(place, config, model, backup, initial_epoch)
    history = model.fit(
        train_data,
        validation_data=val_data,
        epochs=t["epochs"],
        initial_epoch=initial_epoch,
        callbacks=[
            *run_callbacks(RunDirectory(run_dir), place.own, t, backup, initial_epoch),
            *callbacks,
        ],
        shuffle=False,  # the pipeline shuffles
        verbose=verbose,
    )
    finish(place, model, history, initial_epoch, steps_per_epoch)
    return history


def find_place(run_dir, t):
    """The strategy of the `train` section, this worker's role and its own run directory."""
    strategy = distribution_strategy(t["devices"], t["strategy"])
    role = worker_role(strategy)
    own = run_dir if role.is_chief else worker_directory(run_dir, role)
    return Place(strategy, role, RunDirectory(own))


def prepare_data(place, config):
    """`(train dataset, val dataset, (source, target) tokenizers, steps an epoch)` of
    this worker."""
    data, micro_batches = config["data"], config["train"]["micro_batches"]
    strategy, role, own = place
    train_corpus = training_corpus(data)
    val_corpus = corpus_split(data, data["val_split"])
    tokenizers = own.prepare_tokenizers(config["tokenizer"], train_corpus)
    if role.count > 1:
        digest = int(own.tokenizers_digest()[:15], 16)  # 60 bits
        check_same_on_every_worker(strategy, "tokenizers", digest)
    train_batches, val_batches = training_and_validation_batches(
        config, train_corpus, val_corpus, tokenizers
    )
    log.info("train: %s\nval:   %s", train_batches, val_batches)
    if micro_batches > 1:
        log.info("each training batch: %d micro-batches, one update", micro_batches)
    if role.count == 1:
        return train_batches.dataset, val_batches.dataset, tokenizers, train_batches.num_batches
    share = train_batches.shard(role.count, role.index).num_batches
    log.info(
        "worker %d of %d: %d of the %d training batches an epoch",
        role.index,
        role.count,
        share,
        train_batches.num_batches,
    )
    return (
        per_worker_batches(strategy, train_batches, shard=True),
        per_worker_batches(strategy, val_batches, shard=False),
        tokenizers,
        share,
    )


def prepare_model(place, config, tokenizers, steps_per_epoch):
    """`(model, backup, initial_epoch)`: the compiled model, restored from a backup if any."""
    strategy, role, own = place
    source, target = tokenizers
    with strategy.scope():
        model = build_model(config, source.vocab_size, target.vocab_size)
        one = np.ones((1, 2), "int32")
        model((one, one))  # build the weights, which a backup restores into
        if own.is_imported():
            model.load_weights(own.imported_weights_path)  # a backup, if any, overrides them
        compile_from_config(model, config["train"], steps_per_epoch)
        backup = TrainingBackup(own.backup_dir, config["train"]["backup_every_steps"] or None)
        initial_epoch = restore_on_every_worker(backup, model, strategy)
    if role.count > 1:
        fit_under_multi_worker(model, strategy)
    return model, backup, initial_epoch


def train_longer(place, config, model, backup, initial_epoch):
    """Saves `config`, which asks for more epochs than the run was started with, once
    the run can go on from its state, and returns the epoch `fit` starts at. An
    unfinished run resumes from its backup as usual; a finished one from its newest
    epoch checkpoint, which holds the optimizer's state too (Adam's moments and the
    step the warm-up schedule reads), so the epochs after it train as if the run had
    never stopped (but for the random numbers of dropout and the data order)."""
    own = place.own
    if own.is_finished():
        initial_epoch = own.load_last_epoch(model)
        backup.seed(model, initial_epoch)
        own.mark_unfinished()
    log.info(
        "training %s for longer: from epoch %d to epoch %d",
        own.path,
        initial_epoch + 1,
        config["train"]["epochs"],
    )
    own.save_config(config)
    return initial_epoch


def run_callbacks(run, own, t, backup, initial_epoch):
    """The run's callbacks, in order: stop on NaN before anything saves the broken
    weights, back up, checkpoint, prune, stop early, log.

    Args:
        run: the chief's `RunDirectory`, named in messages.
        own: the `RunDirectory` this worker writes.
        t: the `train` configuration section.
        backup: the `TrainingBackup`, already restored.
        initial_epoch: the epoch `fit` starts at; after the first, the best
            model is replaced only by a better one than `metrics.csv` holds.
    """
    os.makedirs(own.checkpoints_dir, exist_ok=True)
    return [
        StopOnNaN(
            f"The last good training state is the newest backup in {backup.directory} "
            f"(train resumes from it), the best model so far {run.model_path('best')}."
        ),
        backup,
        keras.callbacks.ModelCheckpoint(
            own.model_path("best"),
            monitor="val_loss",
            save_best_only=True,
            initial_value_threshold=own.best_val_loss() if initial_epoch else None,
        ),
        keras.callbacks.ModelCheckpoint(own.epoch_checkpoint_pattern(), save_weights_only=True),
        PruneCheckpoints(own.checkpoints_dir, t["keep_checkpoints"]),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=t["patience"]),
        keras.callbacks.TensorBoard(own.logs_dir),
        keras.callbacks.CSVLogger(own.metrics_path, append=True),
    ]


def finish(place, model, history, initial_epoch, steps_per_epoch):
    """Marks the run finished; a worker that is not the chief reports and deletes its copy."""
    strategy, role, own = place
    own.mark_finished(history, initial_epoch, steps_per_epoch)
    if role.count > 1:
        log.info(
            "worker %d of %d: weights sha256 %s", role.index, role.count, weights_digest(model)
        )
    if not role.is_chief:
        shutil.rmtree(own.path, ignore_errors=True)
