"""Beam search against greedy search, sentence by sentence, on a trained run.

Decodes a split twice, greedily and with beam search, and rescores every
output with one teacher-forced pass of the full model
(`keras_transformer.inference.scoring.score_outputs`), independent of the
cached step both searches use. Beam search exists to find outputs that score
better under its own objective (log P / length penalty), so on each sentence
its output should score at least as well as greedy's; an average would hide
the sentences where it does not. Also prints each search's exact-match share.

    python benchmarks/beam_vs_greedy.py --run-dir runs/numbers_de_en [--beam-size 4]

The last line is JSON: `greedy_exact`, `beam_exact`, `beam_at_least_greedy`
(share of sentences), `sentences`, `beam_size`, `alpha`.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import workflow  # noqa: E402
from keras_transformer.inference.scoring import score_outputs  # noqa: E402

TOLERANCE = 1e-4  # float32 sums of ~20 log-probabilities, two code paths


def decode_and_rescore(translator, scorer, sentences, batch_size):
    """`(texts, scores)` per sentence, in the order given.

    Each output is scored by `score_outputs` with the scorer's length
    penalty; its batch holds sentences of similar length, 0-padded, which
    leaves the teacher-forced logits at real positions unchanged.
    """
    tokenizer = translator.target_tokenizer
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    texts, scores = [None] * len(order), np.zeros(len(order))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        source_ids = translator.source_ids(tf.constant([sentences[i] for i in chunk]))
        target_ids = translator.translate_ids(source_ids)  # (b, max_length)
        decoded = tokenizer.detokenize(target_ids).numpy()
        rescored = score_outputs(
            scorer.model,
            source_ids.numpy(),
            target_ids.numpy(),
            tokenizer.bos_id,
            tokenizer.eos_id,
            scorer.alpha,
        )
        for row, i in enumerate(chunk):
            texts[i], scores[i] = decoded[row].decode("utf-8"), rescored["score"][row]
    return texts, scores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    (greedy, beam), config = workflow.translators(
        args.run_dir, args.checkpoint, [1, args.beam_size]
    )
    split = args.split or config["data"]["test_split"]
    corpus = workflow.load_corpus(config["data"], split)
    results = {}
    for name, translator in [("greedy", greedy), ("beam", beam)]:
        texts, scores = decode_and_rescore(translator, beam, corpus.sources, args.batch_size)
        results[name] = {
            "exact": np.mean([h == r for h, r in zip(texts, corpus.targets, strict=True)]),
            "score": scores,
            "texts": texts,
        }
    g, b = results["greedy"], results["beam"]
    at_least = b["score"] >= g["score"] - TOLERANCE
    print(f"{split}: {len(corpus)} sentences, beam {args.beam_size}, alpha {beam.alpha}")
    print(f"exact match: greedy {g['exact']:.2%}, beam {b['exact']:.2%}")
    print(
        f"rescored log P / lp: greedy mean {g['score'].mean():.4f}, beam mean "
        f"{b['score'].mean():.4f}; beam >= greedy on {at_least.mean():.2%} of sentences"
    )
    for i in np.argsort(b["score"] - g["score"])[: min(5, int((~at_least).sum()))]:
        print(
            f"  beam worse on #{i}: {corpus.sources[i]!r}\n"
            f"    greedy {g['score'][i]:.4f} {g['texts'][i]!r}\n"
            f"    beam   {b['score'][i]:.4f} {b['texts'][i]!r}"
        )
    print(
        json.dumps(
            {
                "sentences": len(corpus),
                "beam_size": args.beam_size,
                "alpha": beam.alpha,
                "greedy_exact": round(float(g["exact"]), 4),
                "beam_exact": round(float(b["exact"]), 4),
                "beam_at_least_greedy": round(float(at_least.mean()), 4),
            }
        )
    )


if __name__ == "__main__":
    main()
