"""Loading trained runs for decoding: one run, or an ensemble of runs, as `Translator`s."""

import os
from collections.abc import Sequence

import tensorflow as tf

from keras_transformer.config import decode_options
from keras_transformer.errors import ArgumentError, RunError
from keras_transformer.inference import DecodeOptions, Ensemble, Shortlist, Translator
from keras_transformer.inference.translator import in_compute_dtype
from keras_transformer.models import Transformer
from keras_transformer.run.data import corpus_split
from keras_transformer.run.directory import RunDirectory
from keras_transformer.text import Tokenizer


def load_run(
    run_dir: str, checkpoint: str = "best"
) -> tuple[dict, Transformer, Tokenizer, Tokenizer]:
    """`(config, model, source_tokenizer, target_tokenizer)` of a trained run.

    Args:
        run_dir: the run directory.
        checkpoint: `"best"` (lowest validation loss) or `"averaged"`.
    """
    return RunDirectory(run_dir).load(checkpoint)


def first_run_dir(run_dirs: str | Sequence[str]) -> str:
    """The run directory `run_dirs` names, or the first of an ensemble's list: the one
    whose configuration and files an ensemble's commands use."""
    return run_dirs if isinstance(run_dirs, (str, os.PathLike)) else run_dirs[0]


def load_models(
    run_dirs: str | Sequence[str], checkpoint: str = "best"
) -> tuple[dict, Transformer | Ensemble, Tokenizer, Tokenizer]:
    """`load_run` of one run directory, or of several as an `Ensemble`.

    The runs of an ensemble must have identical tokenizer files; the config
    returned is the first run's.
    """
    if isinstance(run_dirs, (str, os.PathLike)):
        return load_run(run_dirs, checkpoint)
    runs = [RunDirectory(run_dir) for run_dir in run_dirs]
    for other in runs[1:]:
        if other.tokenizers_digest() != runs[0].tokenizers_digest():
            raise RunError(
                f"{runs[0].path} and {other.path} have different tokenizers; an ensemble's "
                "models must share one vocabulary."
            )
    loaded = [run.load(checkpoint) for run in runs]
    config, _, source, target = loaded[0]
    if len(loaded) == 1:
        return loaded[0]
    return config, Ensemble([model for _, model, _, _ in loaded]), source, target


def load_shortlist(run_dir, config, source_tokenizer, target_tokenizer, size=None):
    """The run's lexical shortlist for batches of `size` target pieces.

    Counted from the training split with the config's
    `decode.shortlist_per_source` and `decode.shortlist_frequent` the first
    time, and kept in the run directory.

    Args:
        run_dir: the run directory.
        config: its configuration.
        source_tokenizer: the run's source tokenizer.
        target_tokenizer: its target tokenizer.
        size: target pieces per batch; None takes `decode.shortlist`.

    Examples:
        ```python
        shortlist = load_shortlist("runs/numbers", config, source, target, size=256)
        ```
    """
    decode = config["decode"]
    size = decode["shortlist"] if size is None else size
    if not size:
        raise ArgumentError("A shortlist needs a size: set decode.shortlist to a number > 0.")
    path = RunDirectory(run_dir).shortlist_path(
        decode["shortlist_per_source"], decode["shortlist_frequent"]
    )
    if os.path.exists(path):
        shortlist = Shortlist.load(path, size)
        if shortlist.special_ids == target_tokenizer.special_ids:
            return shortlist  # else counted before shortlists kept their vocabulary's ids
    pairs = corpus_split(config["data"], config["data"]["train_split"])
    rows = [
        tokenizer.tokenize(tf.constant(texts)).to_list()
        for tokenizer, texts in [
            (source_tokenizer, pairs.sources),
            (target_tokenizer, pairs.targets),
        ]
    ]
    shortlist = Shortlist.build(
        *rows,
        source_tokenizer.vocab_size,
        target_tokenizer.vocab_size,
        per_source=decode["shortlist_per_source"],
        frequent=decode["shortlist_frequent"],
        size=size,
        special_ids=target_tokenizer.special_ids,
    )
    shortlist.save(path)
    return shortlist


def translators(
    run_dir: str | Sequence[str],
    checkpoint: str = "best",
    beam_sizes: Sequence[int | None] = (None,),
    alpha: float | None = None,
    max_length: int | None = None,
    *,
    options: DecodeOptions | None = None,
    shortlist: int | None = None,
    jit_compile: bool = True,
    grow_cache: bool = True,
    compute_dtype: str = "float32",
    **option_values,
) -> tuple[list[Translator], dict]:
    """`([Translator per beam size], config)` of a trained run (or runs), loaded once.

    The translators decode with `options` (default: the run's `decode`
    section, `config.decode_options`) and the options given by name, each
    with one of `beam_sizes` (None: the options' own).

    Args:
        run_dir: a run directory, or a list of them for an ensemble.
        checkpoint: `"best"` or `"averaged"`.
        beam_sizes: a beam size for each translator.
        alpha: the length penalty; None: the options'.
        max_length: most target tokens to generate; None: the options'.
        options: the `inference.DecodeOptions` to start from, built once
            where the options are given (the command line builds them from
            the run's configuration and its flags).
        shortlist: target pieces per batch of the run's lexical shortlist
            (`load_shortlist`), 0 for none; None: `decode.shortlist`.
        jit_compile: whether the searches compile with XLA.
        grow_cache: whether the searches grow their cache (`Translator`).
        compute_dtype: `"float32"` or `"bfloat16"` weights and products in
            the searches (`Translator`).
        **option_values: further fields of `DecodeOptions`; None keeps the
            options' value.

    Examples:
        ```python
        (greedy, beam), config = translators("runs/numbers", "best", [1, 4])
        ```
    """
    config, model, source, target = load_models(run_dir, checkpoint)
    model = in_compute_dtype(model, compute_dtype)  # once for every beam size
    given = {"alpha": alpha, "max_length": max_length, **option_values}
    if options is None:
        options = decode_options(config)
    size = config["decode"]["shortlist"] if shortlist is None else shortlist
    loaded = None
    if size:
        loaded = load_shortlist(first_run_dir(run_dir), config, source, target, size)
    made = [
        Translator(
            model,
            source,
            target,
            options.replace_given(beam_size=beam_size, **given),
            jit_compile=jit_compile,
            grow_cache=grow_cache,
            shortlist=loaded,
            compute_dtype=compute_dtype,
        )
        for beam_size in beam_sizes
    ]
    return made, config


def make_translator(
    run_dir: str | Sequence[str],
    checkpoint: str = "best",
    beam_size: int | None = None,
    alpha: float | None = None,
    max_length: int | None = None,
    **arguments,
) -> Translator:
    """A `Translator` of a trained run; unset decoding options come from its config.

    Args:
        run_dir: a run directory, or a list of them for an ensemble (their
            models decode as one `Ensemble`; they must share tokenizers).
        checkpoint: `"best"` or `"averaged"`.
        beam_size: 1 for greedy search; None takes the config's (the first
            run's, for an ensemble), as do `alpha` and `max_length`.
        alpha: the length penalty.
        max_length: most target tokens to generate.
        **arguments: the keyword arguments of `translators` (`options`, a
            `DecodeOptions` to start from instead of the config's;
            `shortlist`, `jit_compile`, `grow_cache`, `compute_dtype`), and further options by
            name (`n_best`, `sample`, `temperature`, `top_k`, `top_p`, `seed`,
            and the length options `max_length_a`, `max_length_b`,
            `min_length`, `no_repeat_ngram_size`, which also default to the
            config's).

    Examples:
        ```python
        make_translator("runs/numbers", beam_size=1)(tf.constant(["zwei"]))  # [b'two']
        ```
    """
    made, _ = translators(run_dir, checkpoint, [beam_size], alpha, max_length, **arguments)
    return made[0]
