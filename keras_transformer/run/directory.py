"""The run directory: every file one training run makes, and loading what is in it.

    config.json            the full configuration
    tokenizers/source/     tokenizer files (and tokenizers/target/ unless shared)
    model.keras            the model with the best validation loss
    checkpoints/           weights of the last epochs (epoch-NNN.weights.h5)
    backup/                the last two training states while training is unfinished
    logs/                  TensorBoard logs
    metrics.csv            loss and accuracy per epoch
    trained.json           written when training has finished
    averaged.keras         after `average_checkpoints`
    {split}.{checkpoint}.beam{k}.hyp.txt, eval.{split}.{checkpoint}.beam{k}.json
                           after `evaluate`
    shortlist.k{K}.f{F}.npz the lexical shortlist (`decode.shortlist`), counted on first use
    imported.json, imported.weights.h5
                           a model imported from another toolkit (`run.opus_mt`), and the
                           weights that training it fine-tunes from

`RunDirectory` is the only code that spells these names. What it loads is
checked: a missing file says what to run first, a damaged one says which
file it is.
"""

import json
import logging
import os
import zipfile

import keras

from keras_transformer.config import read_saved_config, save_config
from keras_transformer.errors import ArgumentError, ConfigError, DamagedFileError, RunError
from keras_transformer.files import tree_digest
from keras_transformer.models import Transformer
from keras_transformer.text import Tokenizer, load_tokenizer, train_tokenizer
from keras_transformer.training.checkpoints import (
    best_val_loss,
    checkpoint_epoch,
    epoch_checkpoints,
)

log = logging.getLogger(__name__)

CHECKPOINTS = {"best": "model.keras", "averaged": "averaged.keras"}


class RunDirectory:
    """The files of one training run.

    Args:
        path: the run directory (it need not exist yet).

    Examples:
        ```python
        run = RunDirectory("runs/numbers")
        config, model, source, target = run.load("averaged")
        ```
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def __repr__(self):
        return f"RunDirectory({self.path!r})"

    @property
    def name(self):
        """The directory's own name, e.g. `numbers` for `runs/numbers/`."""
        return os.path.basename(os.path.normpath(self.path))

    def file(self, *parts):
        """A path inside the run directory."""
        return os.path.join(self.path, *parts)

    config_path = property(lambda self: self.file("config.json"))
    done_path = property(lambda self: self.file("trained.json"))
    metrics_path = property(lambda self: self.file("metrics.csv"))
    checkpoints_dir = property(lambda self: self.file("checkpoints"))
    backup_dir = property(lambda self: self.file("backup"))
    logs_dir = property(lambda self: self.file("logs"))
    tokenizers_dir = property(lambda self: self.file("tokenizers"))
    imported_path = property(lambda self: self.file("imported.json"))
    imported_weights_path = property(lambda self: self.file("imported.weights.h5"))

    def is_imported(self):
        """Whether the run holds a model imported from another toolkit."""
        return os.path.isfile(self.imported_path)

    def model_path(self, checkpoint: str = "best") -> str:
        """The `.keras` file of `checkpoint`, `"best"` or `"averaged"`."""
        if checkpoint not in CHECKPOINTS:
            raise ArgumentError(
                f"`checkpoint` must be one of {sorted(CHECKPOINTS)}. Received: {checkpoint!r}"
            )
        return self.file(CHECKPOINTS[checkpoint])

    def epoch_checkpoint_pattern(self):
        """The `ModelCheckpoint` file pattern of the per-epoch weights."""
        return os.path.join(self.checkpoints_dir, "epoch-{epoch:03d}.weights.h5")

    def epoch_checkpoints(self):
        """The per-epoch weight files, oldest first."""
        return epoch_checkpoints(self.checkpoints_dir)

    def shortlist_path(self, per_source, frequent):
        return self.file(f"shortlist.k{per_source}.f{frequent}.npz")

    def hypotheses_path(self, split, checkpoint, beam_size):
        return self.file(f"{split}.{checkpoint}.beam{beam_size}.hyp.txt")

    def evaluation_path(self, split, checkpoint, beam_size):
        return self.file(f"eval.{split}.{checkpoint}.beam{beam_size}.json")

    # The configuration.

    def read_config(self) -> dict:
        """The saved configuration, checked against the current schema."""
        if not self.has_config():
            raise RunError(
                f"{self.path!r} is not a run directory: {os.path.basename(self.config_path)} "
                "is missing."
            )
        try:
            return read_saved_config(self.config_path)
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
            raise DamagedFileError(
                f"{self.config_path} is damaged ({error}); it holds the run's configuration. "
                "Restore it, or train again in a new run directory."
            ) from None
        except ConfigError as error:
            raise DamagedFileError(f"{self.config_path} holds a bad value: {error}") from None

    def resolve_config(self, config):
        """`(the run's config, whether it asks for more epochs)`: `config`, saved here
        if the run is new or holds nothing but a config (its start failed before anything
        else was written), else the saved one, which `config` must equal, except that it
        may ask for more epochs (`train.epochs`): `config` is then returned unsaved, with
        True, for `save_config` once the run can go on from it."""
        saved = self.read_config() if self.has_config() else None
        if config is not None and saved is not None and self.is_imported():
            # the imported model and its vocabulary, whatever `config` says of them
            config = {**config, "model": saved["model"], "tokenizer": saved["tokenizer"]}
        if config is None or config == saved:
            return saved, False
        if saved is None or not self.has_started():  # new, or its start failed early
            self.save_config(config)
            return config, False
        changed = [
            (s, k, saved[s][k], config[s][k])
            for s in saved
            for k in saved[s]
            if saved[s][k] != config[s][k]
        ]
        if [c[:2] for c in changed] == [("train", "epochs")] and changed[0][3] > changed[0][2]:
            return config, True
        described = "; ".join(f"{s}.{k}: {old!r} -> {new!r}" for s, k, old, new in changed)
        fresh = (
            "import the model again into a new --run-dir"
            if self.is_imported()
            else "use a new --run-dir"
        )
        raise RunError(
            f"{self.path} was started with another configuration ({described}). To train "
            f"with it, {fresh}; to resume, run train without changes (only a larger "
            "train.epochs may be given, to train the run for longer)."
        )

    def has_config(self):
        return os.path.isfile(self.config_path)

    def has_started(self):
        """Whether training has written anything here: tokenizers, a model, checkpoints,
        a backup, metrics or logs. What `evaluate`, `translate`, `score`, `export` and
        `plot` write does not count, nor do an imported run's tokenizers and model:
        training starts from them."""
        state = {
            self.done_path,
            self.metrics_path,
            self.checkpoints_dir,
            self.backup_dir,
            self.logs_dir,
            self.model_path("averaged"),
        }
        if not self.is_imported():
            state |= {self.tokenizers_dir, self.model_path("best")}
        return any(os.path.exists(path) for path in state)

    def save_config(self, config):
        os.makedirs(self.path, exist_ok=True)
        save_config(config, self.config_path)

    # Training state.

    def is_finished(self) -> bool:
        """Whether training finished (`trained.json` exists)."""
        return os.path.isfile(self.done_path)

    def mark_finished(self, history, initial_epoch=0, steps_per_epoch=None):
        """Writes `trained.json`: the epochs the run has trained (`initial_epoch`, those
        before a resume, and the last `fit`'s), the optimizer steps of an epoch, and
        that `fit`'s `history.history` (`metrics.csv` holds every epoch's)."""
        epochs = initial_epoch + len(history.epoch)
        done = {"epochs": epochs, "steps_per_epoch": steps_per_epoch, "history": history.history}
        with open(self.done_path, "w", encoding="utf-8") as f:
            json.dump(done, f)

    def mark_unfinished(self):
        os.remove(self.done_path)

    def load_last_epoch(self, model):
        """Loads the newest epoch checkpoint, model and optimizer state, into `model`
        (built and compiled) and returns its epoch: where a finished run goes on from."""
        checkpoints = self.epoch_checkpoints()
        if not checkpoints:
            raise RunError(
                f"{self.checkpoints_dir} holds no epoch checkpoint, so {self.path} cannot "
                "train for longer; train more epochs in a new --run-dir."
            )
        newest = checkpoints[-1]
        try:
            model.load_weights(newest)
        except (OSError, ValueError, KeyError) as error:
            raise DamagedFileError(f"{newest} is damaged or not this run's ({error}).") from None
        return checkpoint_epoch(newest)

    def best_val_loss(self) -> float | None:
        """The lowest validation loss in `metrics.csv`, or None."""
        return best_val_loss(self.metrics_path)

    # Tokenizers and models.

    def tokenizer_dir(self, side):
        return os.path.join(self.tokenizers_dir, side)

    def has_tokenizers(self):
        return os.path.isdir(self.tokenizer_dir("source"))

    def tokenizers_digest(self):
        """SHA-256 of the tokenizer files: equal for runs that share a vocabulary."""
        return tree_digest(self.tokenizers_dir)

    def prepare_tokenizers(self, tokenizer_config, corpus):
        """The run's `(source, target)` tokenizers: loaded, or trained on `corpus` and saved.

        Args:
            tokenizer_config: the `tokenizer` section of the configuration.
            corpus: the training corpus (`sample_sentences`).
        """
        if self.has_tokenizers():
            return self.load_tokenizers(tokenizer_config["shared"])
        kind, size = tokenizer_config["type"], tokenizer_config["vocab_size"]
        sample = tokenizer_config["sample_size"]
        if tokenizer_config["shared"]:
            source = target = train_tokenizer(kind, corpus.sample_sentences(sample), size)
        else:
            source = train_tokenizer(kind, corpus.sample_sentences(sample, ["source"]), size)
            target = train_tokenizer(kind, corpus.sample_sentences(sample, ["target"]), size)
            target.save(self.tokenizer_dir("target"))
        source.save(self.tokenizer_dir("source"))
        return source, target

    def load_tokenizers(self, shared: bool) -> tuple[Tokenizer, Tokenizer]:
        """The saved `(source, target)` tokenizers (one object if `shared`)."""
        if not self.has_tokenizers():
            raise RunError(f"{self.path} has no tokenizers; train it first.")
        source = load_tokenizer(self.tokenizer_dir("source"))
        if shared:
            return source, source
        return source, load_tokenizer(self.tokenizer_dir("target"))

    def load_model(self, checkpoint: str = "best", compile: bool = True) -> Transformer:
        """The `Transformer` of `checkpoint`, `"best"` or `"averaged"`, in float32.

        A run trained under `train.mixed_precision` saves its models with that
        dtype policy; they load in float32 (`Transformer.float32_copy`), so
        averaging, evaluation, translation and every export compute as a
        float32 run's do. With `compile=False` the model comes without its
        loss, metrics and optimizer, which decoding does not use, about a
        second sooner."""
        path = self.model_path(checkpoint)
        if not os.path.isfile(path):
            hint = "run average first" if checkpoint == "averaged" else "train it first"
            raise RunError(f"{path} does not exist; {hint}.")
        if not zipfile.is_zipfile(path):
            raise DamagedFileError(
                f"{path} is damaged: it is not a complete .keras archive. "
                + (
                    "Run average again."
                    if checkpoint == "averaged"
                    else "Average the epoch checkpoints (average) or train again."
                )
            )
        return keras.models.load_model(path, compile=compile).float32_copy()

    def load(self, checkpoint: str = "best") -> tuple[dict, Transformer, Tokenizer, Tokenizer]:
        """`(config, model, source_tokenizer, target_tokenizer)` of a trained run, for
        decoding: the model comes uncompiled (`load_model(compile=False)`).

        Raises:
            RunError: if the run is missing something or its tokenizers are
                not its model's.
            DamagedFileError: if a file cannot be read.
        """
        config = self.read_config()
        self.model_path(checkpoint)  # an unknown checkpoint fails before anything loads
        source, target = self.load_tokenizers(config["tokenizer"]["shared"])
        model = self.load_model(checkpoint, compile=False)
        for side, tokenizer, size in [
            ("source", source, model.input_vocab_size),
            ("target", target, model.target_vocab_size),
        ]:
            if tokenizer.vocab_size != size:
                raise RunError(
                    f"The {side} tokenizer of {self.path} has {tokenizer.vocab_size} ids but "
                    f"the model's {side} vocabulary has {size}: they are from different runs."
                )
        return config, model, source, target
