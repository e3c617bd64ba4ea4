"""Terminology constraints on a trained run: how often they hold, what they do to BLEU,
and what they cost, per beam size.

For each sentence of a split, the unconstrained output is compared with the
reference: up to `--phrases` reference words (three letters or more) that
the output lacks become that sentence's constraints (sentences whose output
has every such word get none). The split is then decoded again with them.
Printed per beam size: the share of constrained sentences whose output
contains every phrase as a contiguous run of target pieces, and as whole
words of its text ("hair" is not in "haired"; both must be 100%), cased
sacreBLEU and chrF without and with the constraints, the longest output in
words, and sentences per second of both decodes (the same sentences, batches
of `--batch-size`). The first pass of each decode compiles a search for each
new shape of its batches (source width, phrases per sentence, tokens per
phrase), what a user decoding a file once pays (`cost_first_pass`,
constrained over free time). Then `--rounds` times, in turn, the free decode,
the decode with an empty list of phrases for every sentence (the phrase
machinery alone) and the constrained one are timed without compilation; the
fastest of each counts (`cost`, constrained over free; `machinery_cost`,
empty phrases over free), since the machine's speed drifts between runs.

    python benchmarks/constrained_decoding.py --run-dir runs/multi30k_de_en --split val \
        --checkpoint averaged --beam-sizes 1,4

The last line is JSON, one entry per beam size with `met_share`,
`word_share`, `bleu_free`, `bleu_constrained`, `chrf_free`, `chrf_constrained`,
`longest_free_words`, `longest_constrained_words`, `sentences_per_s_free`,
`sentences_per_s_constrained`, `cost` (free over constrained speed),
`machinery_cost` and `cost_first_pass`.
"""

import argparse
import json
import os
import re
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.run.data import corpus_split  # noqa: E402
from keras_transformer.run.evaluate import score_translations  # noqa: E402


def words(text):
    return re.findall(r"\w{3,}", text)


def missing_words(hypothesis, reference, limit, rng):
    """Up to `limit` distinct reference words the hypothesis lacks, chosen at random."""
    present = set(words(hypothesis))
    missing = sorted({w for w in words(reference) if w not in present})
    rng.shuffle(missing)
    return missing[:limit]


def decode(translator, sentences, constraints, batch_size):
    """Translations in the order given, and the seconds the decode took."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = [None] * len(sentences)
    start = time.perf_counter()
    for first in range(0, len(order), batch_size):
        chunk = order[first : first + batch_size]
        batch = tf.constant([sentences[i] for i in chunk])
        if constraints is None:
            texts = translator(batch).numpy()
        else:
            texts = translator(batch, constraints=[constraints[i] for i in chunk]).numpy()
        for i, text in zip(chunk, texts, strict=True):
            out[i] = text.decode("utf-8")
    return out, time.perf_counter() - start


def contains_pieces(tokenizer, text, phrase):
    pieces = tokenizer.tokenize(tf.constant([text, phrase])).to_list()
    n = len(pieces[1])
    return any(pieces[0][i : i + n] == pieces[1] for i in range(len(pieces[0]) - n + 1))


def contains_words(text, phrase):
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", default="val")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--beam-sizes", default="1,4")
    parser.add_argument("--phrases", type=int, default=2, help="constraints per sentence")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, help="first N sentences only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes of each decode")
    args = parser.parse_args()

    made, config = run.translators(
        args.run_dir, args.checkpoint, [int(b) for b in args.beam_sizes.split(",")]
    )
    corpus = corpus_split(config["data"], args.split)
    sources, references = corpus.sources[: args.limit], corpus.targets[: args.limit]
    results = []
    for translator in made:
        decode(translator, sources[:2], None, args.batch_size)  # compile
        free, free_first_s = decode(translator, sources, None, args.batch_size)
        rng = np.random.default_rng(args.seed)
        constraints = [
            missing_words(h, r, args.phrases, rng) for h, r in zip(free, references, strict=True)
        ]
        none = [[] for _ in sources]
        decode(translator, sources[:2], constraints[:2], args.batch_size)  # compile
        kept, kept_first_s = decode(translator, sources, constraints, args.batch_size)
        decode(translator, sources, none, args.batch_size)  # compile
        seconds = {"free": [], "none": [], "kept": []}
        for _ in range(args.rounds):
            for name, given in [("free", None), ("none", none), ("kept", constraints)]:
                seconds[name].append(decode(translator, sources, given, args.batch_size)[1])
        free_s, none_s, kept_s = (min(seconds[name]) for name in ("free", "none", "kept"))
        tokenizer = translator.target_tokenizer
        constrained = [i for i, c in enumerate(constraints) if c]
        met = [
            all(contains_pieces(tokenizer, kept[i], p) for p in constraints[i]) for i in constrained
        ]
        whole = [all(contains_words(kept[i], p) for p in constraints[i]) for i in constrained]
        free_scores, kept_scores = (score_translations(o, references) for o in (free, kept))
        result = {
            "beam_size": translator.beam_size,
            "sentences": len(sources),
            "constrained_sentences": len(constrained),
            "phrases": sum(len(c) for c in constraints),
            "met_share": float(np.mean(met)) if met else 1.0,
            "word_share": float(np.mean(whole)) if whole else 1.0,
            "bleu_free": free_scores["bleu"],
            "bleu_constrained": kept_scores["bleu"],
            "chrf_free": free_scores["chrf"],
            "chrf_constrained": kept_scores["chrf"],
            "longest_free_words": max(len(t.split()) for t in free),
            "longest_constrained_words": max(len(t.split()) for t in kept),
            "sentences_per_s_free": len(sources) / free_s,
            "sentences_per_s_constrained": len(sources) / kept_s,
        }
        result["cost"] = kept_s / free_s
        result["machinery_cost"] = none_s / free_s
        result["cost_first_pass"] = kept_first_s / free_first_s
        results.append(result)
        print(
            f"beam {translator.beam_size}: {len(constrained)} of {len(sources)} sentences "
            f"constrained ({result['phrases']} phrases), every phrase kept in "
            f"{result['met_share']:.1%} (as whole words {result['word_share']:.1%}); "
            f"BLEU {result['bleu_free']:.2f} -> "
            f"{result['bleu_constrained']:.2f}, chrF {result['chrf_free']:.2f} -> "
            f"{result['chrf_constrained']:.2f}; longest output {result['longest_free_words']} -> "
            f"{result['longest_constrained_words']} words; {result['sentences_per_s_free']:.1f} "
            f"-> {result['sentences_per_s_constrained']:.1f} sentences/s "
            f"({result['cost']:.2f}x the time, {result['machinery_cost']:.2f}x with no phrase "
            f"given; {result['cost_first_pass']:.2f}x in the first pass, which compiles each new "
            "shape)",
            flush=True,
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
