"""Scoring a trained run: sacreBLEU on a split, and force decoding of given translations."""

import json
import os
from collections.abc import Sequence

import numpy as np
import sacrebleu
import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.datasets import ParallelCorpus
from keras_transformer.errors import ArgumentError
from keras_transformer.files import read_lines
from keras_transformer.inference import Translator, translate_lines
from keras_transformer.inference.scoring import score_outputs
from keras_transformer.run.data import corpus_split
from keras_transformer.run.directory import RunDirectory
from keras_transformer.run.translators import first_run_dir, load_run, translators


def evaluate(
    run_dir: str | Sequence[str],
    split: str | None = None,
    checkpoint: str = "best",
    beam_size: int | None = None,
    alpha: float | None = None,
    output: str | None = None,
    *,
    source: str | None = None,
    reference: str | None = None,
    data_dir: str | None = None,
    **arguments,
) -> dict:
    """Translates a test set and scores it with sacreBLEU.

    The test set is the run's corpus's split, or files of your own: `source`
    and `reference`, or the split of a directory of `{split}.{lang}` files.
    A run whose configuration names no corpus (an imported model's) needs
    one of those.

    Args:
        run_dir: a trained (or imported) run directory, or a list of them for
            an ensemble (`run.translators`); the outputs are filed in the first.
        split: the split to decode; defaults to the config's `data.test_split`.
            With `source` and `reference`, the name the outputs are filed
            under (default: the source file's name).
        checkpoint: `"best"` or `"averaged"`.
        beam_size: 1 for greedy search; a list (e.g. `[1, 4]`) decodes with
            each, loading the model once. Defaults to `decode.beam_size`.
        alpha: length penalty; defaults to `decode.alpha`.
        output: the hypotheses file (with several beam sizes, one a beam size
            `k`, named with `.beam{k}` before its extension); defaults to
            `{run_dir}/{split}.{checkpoint}.beam{k}.hyp.txt`.
        source: a file of source sentences, one a line (plain or `.gz`).
        reference: its reference translations, line for line.
        data_dir: a directory of `{split}.{lang}` files (plain or `.gz`) in
            the run's languages (`data.source_lang`, `data.target_lang`).
        **arguments: the keyword arguments of `run.translators`: `options`,
            a `DecodeOptions` to start from instead of the config's,
            `shortlist`, and options by name (the length options
            `max_length_a`, `max_length_b`, `min_length`,
            `no_repeat_ngram_size`, ...); None or unset takes the config's.

    Returns:
        Dict with `bleu` (cased, detokenized, sacreBLEU's standard 13a
        tokenization), `bleu_lowercase`, `bleu_intl`, `bleu_intl_lowercase`
        (see `score_translations`), `chrf`, `signature`,
        `signature_intl_lowercase`, `exact_match`,
        `sentences`, `beam_size`, and `hypotheses` (the file written); a list
        of them, one a beam size, when `beam_size` is a list.
    """
    several = isinstance(beam_size, (list, tuple))
    beam_sizes = beam_size if several else [beam_size]
    run = RunDirectory(first_run_dir(run_dir))
    config = run.read_config()
    split, corpus = test_set(config, split, source, reference, data_dir)
    made, _ = translators(run_dir, checkpoint, beam_sizes, alpha, **arguments)
    results = []
    for translator in made:
        path = output or run.hypotheses_path(split, checkpoint, translator.beam_size)
        if output and len(beam_sizes) > 1:  # a file a beam size
            path = "{0}.beam{2}{1}".format(*os.path.splitext(output), translator.beam_size)
        hypotheses = translate_lines(translator, corpus.sources, config["decode"]["batch_size"])
        result = {
            "split": split,
            "checkpoint": checkpoint,
            "sentences": len(hypotheses),
            "beam_size": translator.beam_size,
            "alpha": translator.alpha,
            "length_penalty": translator.length_penalty,
            **score_translations(hypotheses, corpus.targets),
            "hypotheses": path,
        }
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(hypotheses) + "\n")
        evaluation = run.evaluation_path(split, checkpoint, translator.beam_size)
        with open(evaluation, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        results.append(result)
    return results if several else results[0]


def test_set(config, split=None, source=None, reference=None, data_dir=None):
    """`(name, ParallelCorpus)`: the test set `evaluate` decodes (see its arguments).

    Raises:
        ArgumentError: if only one of `source` and `reference` is given, or
            with `data_dir`; if their line counts differ or they are empty.
        ConfigError: for a run's own split when its configuration names no
            corpus.
        FileNotFoundError: naming a file that is missing.
    """
    if (source is None) != (reference is None) or (source is not None and data_dir):
        raise ArgumentError(
            "A test set of your own is `source` and `reference` files together "
            "(--source, --reference), or a `data_dir` (--data-dir). Received: "
            f"source={source!r}, reference={reference!r}, data_dir={data_dir!r}"
        )
    if source is not None:
        sources, references = read_lines(source), read_lines(reference)
        if len(sources) != len(references) or not sources:
            raise ArgumentError(
                f"{source} has {len(sources)} lines and {reference} {len(references)}: a "
                "test set needs one reference a source line, and at least one line."
            )
        name = split or os.path.basename(source).removesuffix(".gz")
        return name, ParallelCorpus(sources, references)
    data = config["data"]
    if data_dir is not None:
        data = {**data, "corpus": "files", "directory": data_dir}
    split = split or data["test_split"]
    return split, corpus_split(data, split)


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


def score_pairs(
    run_dir: str,
    sources: Sequence[str],
    targets: Sequence[str],
    checkpoint: str = "best",
    batch_size: int = 64,
    target_language: str | None = None,
) -> list[dict]:
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
        target_language: the language of `targets`, for a multi-target model
            (`DecodeOptions.target_language`); defaults to `decode.target_language`.

    Returns:
        A list of dicts, one per pair: `log_prob` (the total), `tokens`
        (target tokens with EOS) and `log_prob_per_token`.
    """
    if len(sources) != len(targets):
        raise ArgumentError(
            f"Scoring needs one target per source. Received: {len(sources)} sources, "
            f"{len(targets)} targets"
        )
    config, model, source_tokenizer, target_tokenizer = load_run(run_dir, checkpoint)
    language = target_language or config["decode"]["target_language"]
    reader = Translator(
        model, source_tokenizer, target_tokenizer, jit_compile=False, target_language=language
    )
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
