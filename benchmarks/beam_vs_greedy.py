"""Beam search against greedy search, sentence by sentence, on a trained run.

Decodes a split twice, greedily and with beam search, and rescores every
output with one teacher-forced pass of the full model
(`keras_transformer.inference.scoring.score_outputs`), independent of the
cached step both searches use. Beam search exists to find outputs that score
better under its own objective (log P / length penalty), so on each sentence
its output should score at least as well as greedy's; an average would hide
the sentences where it does not. Also prints each search's exact-match share.

Beam search can lose to greedy: greedy's prefix leaves the beam once k other
hypotheses are more probable, and its completion may still have scored
better. Each sentence where beam search loses is therefore searched again by
`reference_beam_search`, the same rules written out plainly in NumPy on full
forward passes (no cache, no in-graph loop), which reports whether it finds
the same output and at which step greedy's prefix was outranked.

    python benchmarks/beam_vs_greedy.py --run-dir runs/numbers_de_en [--beam-size 4]

The last line is JSON: `greedy_exact`, `beam_exact`, `beam_at_least_greedy`
(share of sentences), `beam_worse`, `reference_agrees` (of those, how many
the reference search also decodes to the package's beam output),
`sentences`, `beam_size`, `alpha`.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.inference.scoring import output_lengths, score_outputs  # noqa: E402
from keras_transformer.inference.search import (  # noqa: E402
    length_penalty,
    log_softmax_without_pad_and_bos,
)

TOLERANCE = 1e-4  # float32 sums of ~20 log-probabilities, two code paths


def decode_and_rescore(translator, scorer, sentences, batch_size):
    """`(texts, scores, target_ids, source_ids)` per sentence, in the order given.

    Each output is scored by `score_outputs` with the scorer's length
    penalty; its batch holds sentences of similar length, 0-padded, which
    leaves the teacher-forced logits at real positions unchanged.
    """
    tokenizer = translator.target_tokenizer
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    texts, scores = [None] * len(order), np.zeros(len(order))
    target_rows, source_rows = [None] * len(order), [None] * len(order)
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
            target_rows[i], source_rows[i] = target_ids[row].numpy(), source_ids[row].numpy()
    return texts, scores, target_rows, source_rows


def penalty(length, alpha):
    return float(length_penalty(length, alpha))


def next_token_log_probs(model, source_row, prefixes, bos_id):
    """log p(next token) after each prefix, by one full forward pass: `(n, V)`."""
    target_in = np.array([[bos_id, *prefix] for prefix in prefixes], np.int32)  # (n, t + 1)
    source = np.repeat(source_row[None], len(prefixes), axis=0)  # (n, S)
    logits = model((source, target_in), training=False)[:, -1]  # (n, V)
    return log_softmax_without_pad_and_bos(logits, bos_id).numpy()


def reference_beam_search(model, source_row, bos_id, eos_id, k, alpha, max_length, watch):
    """The package's beam search rules on one sentence, step by step in NumPy.

    Each step takes the 2k most probable one-token extensions of the live
    hypotheses; those among the first k that end in EOS join the k best
    finished ones (scored log P / length_penalty), the k best that do not
    end stay alive. The sentence is done when the best live log P, under the
    most favourable length penalty still ahead, cannot beat the worst of k
    finished hypotheses; at `max_length` the live ones compete as they are.

    Args:
        watch: a token sequence (greedy's output, EOS included) whose
            prefixes are followed through the beam.

    Returns:
        `(tokens, score, outranked)`: the best hypothesis without EOS, its
        score, and `(step, log P of watch's prefix, log P of the k-th live
        hypothesis)` at the first step watch's prefix was not kept, or None.
    """
    alive = [((), 0.0)]  # (tokens, log P)
    finished = []  # (score, tokens)
    outranked = None
    for step in range(max_length):
        log_probs = next_token_log_probs(model, source_row, [t for t, _ in alive], bos_id)
        candidates = [
            (logp + lp, tokens + (token,))
            for (tokens, logp), lp_row in zip(alive, log_probs, strict=True)
            for token, lp in enumerate(lp_row)
            if np.isfinite(lp)
        ]
        candidates.sort(key=lambda c: -c[0])
        top = candidates[: 2 * k]
        for logp, tokens in top[:k]:
            if tokens[-1] == eos_id:
                finished.append((logp / penalty(step + 1, alpha), tokens[:-1]))
        finished = sorted(finished, key=lambda f: -f[0])[:k]
        alive = [(tokens, logp) for logp, tokens in top if tokens[-1] != eos_id][:k]
        prefix = tuple(watch[: step + 1])
        if outranked is None and len(prefix) == step + 1 and prefix[-1] != eos_id:
            if prefix not in [tokens for tokens, _ in alive]:
                logp = next(c[0] for c in candidates if c[1] == prefix)
                outranked = (step, logp, alive[-1][1])
        best_possible = alive[0][1] / max(
            penalty(min(step + 2, max_length), alpha), penalty(max_length, alpha)
        )
        if len(finished) == k and best_possible <= finished[-1][0]:
            break
    else:
        finished += [(logp / penalty(max_length, alpha), tokens) for tokens, logp in alive]
    score, tokens = max(finished, key=lambda f: f[0])
    return list(tokens), score, outranked


def check_with_reference(beam, greedy_ids, beam_ids, source_ids, worse):
    """Re-searches each sentence in `worse`; the number whose output equals the package's."""
    tokenizer = beam.target_tokenizer
    bos_id, eos_id = tokenizer.bos_id, tokenizer.eos_id
    agree = 0
    for i in worse:
        watch = greedy_ids[i][: output_lengths(greedy_ids[i : i + 1], eos_id)[0]]
        tokens, score, outranked = reference_beam_search(
            beam.model,
            source_ids[i],
            bos_id,
            eos_id,
            beam.beam_size,
            beam.alpha,
            beam.max_length,
            list(watch),
        )
        package = beam_ids[i][: output_lengths(beam_ids[i : i + 1], eos_id)[0]]
        same = tokens == [t for t in package if t != eos_id]
        agree += same
        where = (
            "greedy's prefix stayed in the beam"
            if outranked is None
            else f"greedy's prefix outranked at step {outranked[0]} "
            f"(log P {outranked[1]:.4f} < {outranked[2]:.4f}, the k-th live)"
        )
        print(
            f"  #{i}: reference {'equals' if same else 'DIFFERS FROM'} the package's beam "
            f"(score {score:.4f}); {where}"
        )
    return agree


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    (greedy, beam), config = run.translators(args.run_dir, args.checkpoint, [1, args.beam_size])
    split = args.split or config["data"]["test_split"]
    corpus = run.corpus_split(config["data"], split)
    results = {}
    for name, translator in [("greedy", greedy), ("beam", beam)]:
        texts, scores, ids, sources = decode_and_rescore(
            translator, beam, corpus.sources, args.batch_size
        )
        results[name] = {
            "ids": ids,
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
    worse = np.flatnonzero(~at_least)
    for i in worse[np.argsort((b["score"] - g["score"])[worse])][:5]:
        print(
            f"  beam worse on #{i}: {corpus.sources[i]!r}\n"
            f"    greedy {g['score'][i]:.4f} {g['texts'][i]!r}\n"
            f"    beam   {b['score'][i]:.4f} {b['texts'][i]!r}"
        )
    if len(worse):
        print(f"the reference search on the {len(worse)} sentences where beam search lost:")
    agree = check_with_reference(beam, g["ids"], b["ids"], sources, worse)
    print(
        json.dumps(
            {
                "sentences": len(corpus),
                "beam_size": args.beam_size,
                "alpha": beam.alpha,
                "greedy_exact": round(float(g["exact"]), 4),
                "beam_exact": round(float(b["exact"]), 4),
                "beam_at_least_greedy": round(float(at_least.mean()), 4),
                "beam_worse": len(worse),
                "reference_agrees": int(agree),
            }
        )
    )


if __name__ == "__main__":
    main()
