"""Text pipeline on Multi30k: SentencePiece round trip and the padding of batches.

Trains a shared SentencePiece model on the German and English training text,
reports how many validation sentences come back unchanged after
`detokenize(tokenize(s))` (compared with `s` in the tokenizer's normal form:
NFKC, single spaces, stripped), and the share of padding in the training
batches with length bucketing against the TF tutorial's batching (pad each
batch of the same size to its longest sentence).

    python benchmarks/text_pipeline.py --data ../shared/data/multi30k
"""

import argparse
import json
import os
import re
import time
import unicodedata

from keras_transformer.datasets import load_split
from keras_transformer.text import SentencePieceTokenizer, make_batches, padding_fraction

HERE = os.path.dirname(os.path.abspath(__file__))


def normal_form(text):
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=os.environ.get(
            "MULTI30K_DIR", os.path.join(HERE, "..", "..", "shared", "data", "multi30k")
        ),
        help="Multi30k directory ({split}.{lang}.gz); default $MULTI30K_DIR",
    )
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    train = load_split(args.data, "train", "de", "en")
    val = load_split(args.data, "val", "de", "en")
    start = time.perf_counter()
    tokenizer = SentencePieceTokenizer.train(train.sources + train.targets, args.vocab_size)
    train_seconds = time.perf_counter() - start

    sample = val.sources + val.targets
    restored = tokenizer.detokenize(tokenizer.tokenize(sample)).numpy()
    same = sum(r.decode("utf-8") == normal_form(s) for r, s in zip(restored, sample, strict=True))
    round_trip = same / len(sample)
    raw_same = sum(r.decode("utf-8") == s for r, s in zip(restored, sample, strict=True)) / len(
        sample
    )

    fractions = {}
    for name, bucketing in (("bucketed", True), ("pad_to_longest", False)):
        batches = make_batches(
            train, tokenizer, tokenizer, batch_size=args.batch_size, bucketing=bucketing, seed=0
        )
        fractions[name] = padding_fraction(batches.dataset)
    budget = make_batches(train, tokenizer, tokenizer, tokens_per_batch=4096, seed=0)
    fractions["bucketed_4096_tokens"] = padding_fraction(budget.dataset)

    print(f"SentencePiece: vocab {tokenizer.vocab_size}, trained in {train_seconds:.1f} s")
    print(f"val round trip (normal form): {same}/{len(sample)} = {round_trip:.4f}")
    print(f"val round trip (raw text):    {raw_same:.4f}")
    for name, value in fractions.items():
        print(f"padding, {name:22s} {value:.3f}")
    print(
        json.dumps(
            {
                "vocab_size": tokenizer.vocab_size,
                "round_trip": round(round_trip, 4),
                "round_trip_raw": round(raw_same, 4),
                "padding_bucketed": round(fractions["bucketed"], 4),
                "padding_pad_to_longest": round(fractions["pad_to_longest"], 4),
                "padding_bucketed_4096_tokens": round(fractions["bucketed_4096_tokens"], 4),
                "batch_size": args.batch_size,
            }
        )
    )


if __name__ == "__main__":
    main()
