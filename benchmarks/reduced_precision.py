"""Where an engine of reduced precision translates otherwise than the float32 search, what the
float32 model says of the two translations, and what the change costs in BLEU.

For a trained run, translates a split with the package's float32 search (the `Translator`
without XLA, the reference), the bfloat16 `Translator`, the dynamic int8 LiteRT file (a free
batch) and CTranslate2 int8 through `CTranslate2Translator` (the package's tokenization and
ranking), greedy and at beam 4, with the run's other decoding options. For each sentence an
engine translates otherwise, the float32 model scores both translations by teacher forcing
(`run.score_pairs`: each text tokenized by the run's target tokenizer, EOS included) and ranks
them as the search does (log P / `length_penalty(|Y|, alpha)`, the run's alpha and kind; at
beam 1 too). The gap is the float32 translation's score minus the engine's: near 0 the two
are a near tie that a change in the logits' last bits can flip; below 0 the engine found a
translation the float32 search scores higher and missed. A second referee looks at the
first piece where the two translations part (after the pieces they share): the float32
model's log-probability of its own piece there minus that of the engine's, in one
teacher-forced pass over the shared prefix. For greedy search it is what decided the
difference: a step gap near 0 is a near tie that any rounding may flip.

Prints per engine and beam: the share of sentences translated as the float32 search does, the
disagreements, how many of them are within 0.01, 0.05 and 0.1 of a tie, how many the engine
wins, the median gap, how many step gaps are within 0.1 and 0.5 of 0, the median step gap,
and the corpus BLEU (sacrebleu's defaults) of the engine and of the float32 search against
the references.

    python benchmarks/reduced_precision.py --run-dir runs/multi30k_de_en [--split test] \
        [--limit 1000]

The last line is JSON; it also counts the step gaps below 0 (`step_negative`), which for
greedy search can only be a piece a decoding rule (no repeated n-gram, a minimum length)
kept the float32 search from, or a text whose pieces, read again, are not the search's.
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402
from engine_rows import BEAMS  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.export import CTranslate2Translator, LiteRTTranslator  # noqa: E402
from keras_transformer.inference.probabilities import (  # noqa: E402
    log_softmax_without_pad_and_bos,
)
from keras_transformer.inference.scoring import score_outputs  # noqa: E402
from keras_transformer.run.evaluate import test_set  # noqa: E402

NEAR = (0.01, 0.05, 0.1)  # score gaps counted as near ties
NEAR_STEP = (0.1, 0.5)  # step gaps (log-probability of one piece) counted as near ties
BATCH = 64


def pieces_of(rows, eos_id):
    """Lists of target ids `(N, L)` cut before EOS (0 after it)."""
    cut = []
    for row in np.asarray(rows).tolist():
        cut.append(row[: row.index(eos_id)] if eos_id in row else [i for i in row if i])
    return cut


def translator_ids(translator, sources):
    """The pieces a `Translator` writes for each source: lists of target ids."""
    eos = translator.target_tokenizer.eos_id
    pieces = []
    for start in range(0, len(sources), BATCH):
        source_ids = translator.source_ids(tf.constant(sources[start : start + BATCH]))
        pieces += pieces_of(translator.translate_ids(source_ids).numpy(), eos)
    return pieces


def engines_at(run_dir, beam, work, target_tokenizer):
    """`{name: translate(sources) -> lists of target ids}` of the reduced-precision engines
    at `beam`: each engine's own pieces, not its text read again."""
    eos = target_tokenizer.eos_id
    bfloat16 = run.make_translator(
        run_dir, beam_size=beam, jit_compile=False, compute_dtype="bfloat16"
    )
    litert = LiteRTTranslator(
        run.export_litert_run(
            run_dir,
            os.path.join(work, f"litert_int8_beam{beam}"),
            beam_size=beam,
            quantization="dynamic_int8",
            batch_size=None,
        )
    )
    ct2_dir = os.path.join(work, f"ct2_int8_beam{beam}")
    ct2 = CTranslate2Translator(
        run.export_ctranslate2_run(run_dir, ct2_dir, quantization="int8"),
        beam_size=beam,
        intra_threads=1,
    )
    id_of = {piece: i for i, piece in enumerate(target_tokenizer.pieces)}

    def litert_ids(sources):
        rows = np.concatenate([litert.source_ids(s) for s in sources])  # (N, S)
        return pieces_of(litert.translate_ids(rows), eos)

    def ct2_ids(sources):
        written = ct2.translate_pieces(ct2.source_pieces(tf.constant(sources)), BATCH)
        return [[id_of[p] for p in row] for row in written]

    return {
        f"translator_bf16_beam{beam}": lambda sources: translator_ids(bfloat16, sources),
        f"litert_dynamic_int8_beam{beam}": litert_ids,
        f"ct2_translator_int8_beam{beam}": ct2_ids,
    }


def texts_of(tokenizer, rows):
    """The strings of lists of target ids."""
    ragged = tf.ragged.constant(rows, tf.int32, ragged_rank=1)
    return [text.decode("utf-8") for text in tokenizer.detokenize(ragged).numpy()]


def padded(rows, eos_id):
    """Lists of ids, each with EOS appended, as int32 `(N, max length + 1)`, 0-padded."""
    out = np.zeros((len(rows), max(len(r) for r in rows) + 1), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row) + 1] = [*row, eos_id]
    return out


def first_difference(ours, theirs):
    """The first position where two piece lists, each ending in EOS, differ."""
    return next(t for t, (x, y) in enumerate(zip(ours, theirs, strict=False)) if x != y)


def step_gaps(translator, source_ids, ours, theirs):
    """Per pair of piece lists that differ, the float32 model's log p(our piece) - log
    p(their piece) at the first position where they differ (EOS included)."""
    tokenizer = translator.target_tokenizer
    eos, bos = tokenizer.eos_id, tokenizer.bos_id
    a, b = [[*row, eos] for row in ours], [[*row, eos] for row in theirs]
    first = [first_difference(p, q) for p, q in zip(a, b, strict=True)]
    target_in = np.zeros((len(a), max(first) + 1), np.int32)  # (N, T): BOS, shared prefix
    target_in[:, 0] = bos
    for row, (pieces, t) in enumerate(zip(a, first, strict=True)):
        target_in[row, 1 : t + 1] = pieces[:t]
    gaps = []
    for start in range(0, len(a), BATCH):
        part = slice(start, start + BATCH)
        logits = translator.model((source_ids[part], target_in[part]), training=False)
        log_probs = log_softmax_without_pad_and_bos(logits, bos).numpy()  # (b, T, V)
        rows = np.arange(len(log_probs))
        at = log_probs[rows, first[part]]  # (b, V): after the shared prefix
        ours_at = at[rows, [p[t] for p, t in zip(a[part], first[part], strict=True)]]
        theirs_at = at[rows, [q[t] for q, t in zip(b[part], first[part], strict=True)]]
        gaps.extend(ours_at - theirs_at)
    return np.array(gaps)


def compare(translator, sources, references, reference_ids, ids):
    """The row of one engine: agreement (of texts), the float32 model's gaps on the
    sentences it translates otherwise, and both BLEU scores."""
    tokenizer = translator.target_tokenizer
    ours_text, texts = texts_of(tokenizer, reference_ids), texts_of(tokenizer, ids)
    differ = [i for i, (a, b) in enumerate(zip(texts, ours_text, strict=True)) if a != b]
    row = {
        "same": 1 - len(differ) / len(sources),
        "differ": len(differ),
        "bleu": sacrebleu.corpus_bleu(texts, [references]).score,
        "bleu_float32": sacrebleu.corpus_bleu(ours_text, [references]).score,
    }
    if differ:
        options, eos = translator.options, tokenizer.eos_id
        source_ids = translator.source_ids(tf.constant([sources[i] for i in differ])).numpy()
        ours, theirs = [reference_ids[i] for i in differ], [ids[i] for i in differ]
        scored = [
            score_outputs(
                translator.model,
                source_ids,
                padded(rows, eos),
                tokenizer.bos_id,
                eos,
                options.alpha,
                length_penalty=options.length_penalty,
            )["score"]
            for rows in (ours, theirs)
        ]
        gaps = scored[0] - scored[1]
        row.update({f"within_{near}": int(np.sum(np.abs(gaps) < near)) for near in NEAR})
        row.update(engine_wins=int(np.sum(gaps < 0)), median_gap=float(np.median(gaps)))
        steps = step_gaps(translator, source_ids, ours, theirs)
        row.update({f"step_within_{near}": int(np.sum(np.abs(steps) < near)) for near in NEAR_STEP})
        row.update(median_step_gap=float(np.median(steps)), step_negative=int(np.sum(steps < 0)))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--limit", type=int, default=1000, help="sentences compared")
    args = parser.parse_args()

    config, _, _, _ = run.load_run(args.run_dir)
    split, corpus = test_set(config, args.split)
    sources, references = corpus.sources[: args.limit], corpus.targets[: args.limit]
    work = tempfile.mkdtemp(prefix="reduced_precision_")
    rows = {}
    for beam in BEAMS:
        float32 = run.make_translator(args.run_dir, beam_size=beam, jit_compile=False)
        reference_ids = translator_ids(float32, sources)
        engines = engines_at(args.run_dir, beam, work, float32.target_tokenizer)
        for name, translate in engines.items():
            rows[name] = compare(float32, sources, references, reference_ids, translate(sources))
    print(f"{args.run_dir}, {split}: {len(sources)} sentences, against the float32 search")
    columns = [f"score gap < {n}" for n in NEAR] + ["engine wins", "median gap"]
    columns += [f"step gap < {n}" for n in NEAR_STEP] + ["median step", "BLEU", "float32"]
    print(f"{'engine':30}{'same':>8}{'differ':>8}" + "".join(f"{c:>17}" for c in columns))
    for name, row in rows.items():
        counts = [row.get(f"within_{n}", 0) for n in NEAR] + [row.get("engine_wins", 0)]
        steps = [row.get(f"step_within_{n}", 0) for n in NEAR_STEP]
        cells = [f"{c:17d}" for c in counts] + [f"{row.get('median_gap', 0.0):17.4f}"]
        cells += [f"{c:17d}" for c in steps] + [f"{row.get('median_step_gap', 0.0):17.4f}"]
        cells += [f"{row['bleu']:17.2f}", f"{row['bleu_float32']:17.2f}"]
        print(f"{name:30}{100 * row['same']:7.1f}%{row['differ']:8d}" + "".join(cells))
    print(json.dumps(dict(split=split, sentences=len(sources), rows=rows)))


if __name__ == "__main__":
    main()
