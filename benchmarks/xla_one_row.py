"""Searches of a tied-embedding model through each layout of its projection, in one process.

For each size (encoder and decoder layers, d_model, vocabulary; 8 heads from d_model 256,
else 4, dff 4 x d_model; random weights, one tied matrix), times greedy search of one
sentence, beam 4 of one sentence, and greedy search and beam 4 of a batch of 32, each with
XLA through `inference.bucketed_search.OneRowProjection` (as a `Translator` with XLA
searches) and through the model alone (the embeddings transposed inside the loop at every
step), and without XLA through the model alone and through
`inference.bucketed_search.TransposedProjection` (as a search without XLA decodes: every
step multiplies by a copy transposed once per batch). Sources are 16 random pieces; EOS is
an id no model produces, so every search writes `--max-length` pieces. Each pair must give
the same tokens. Prints median milliseconds of `--rounds` calls after one warm-up call, and
the speed of each layout over the model alone, with XLA and without; the last line is JSON.

    python benchmarks/xla_one_row.py [--sizes 6,512,32000 3,128,500] [--rounds 5]
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer.inference import beam_search, greedy_search  # noqa: E402
from keras_transformer.inference.bucketed_search import (  # noqa: E402
    OneRowProjection,
    TransposedProjection,
)

BOS = 1
ROWS = {
    "greedy, one sentence": (1, 1),
    "beam 4, one sentence": (4, 1),
    "greedy, 32": (1, 32),
    "beam 4, 32": (4, 32),
}


def tied_model(layers, d_model, vocab):
    keras.utils.set_random_seed(0)
    heads = 8 if d_model >= 256 else 4
    model = kt.Transformer(
        layers, d_model, heads, 4 * d_model, vocab, vocab, shared_embeddings="all"
    )
    model((np.ones((1, 4), "int32"), np.ones((1, 2), "int32")))
    return model


def search(decoded, source, beam, eos, max_length):
    """Greedy search (`beam` 1) or beam search of `decoded`: `(token ids, scores)`."""
    if beam == 1:
        return greedy_search(decoded, source, BOS, eos, max_length=max_length)
    return beam_search(decoded, source, BOS, eos, max_length=max_length, beam_size=beam)


def median_ms(call, source, rounds):
    call(source)  # compiles
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = call(source)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times)), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["6,512,32000", "6,256,8000", "3,128,500"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-length", type=int, default=32)
    args = parser.parse_args()

    report = []
    for size in args.sizes:
        layers, d_model, vocab = (int(x) for x in size.split(","))
        model = tied_model(layers, d_model, vocab)
        sources = np.random.default_rng(0).integers(4, vocab, (32, 16)).astype("int32")
        sources[:, -1] = 3
        for row, (beam, batch) in ROWS.items():
            source = tf.constant(sources[:batch])
            times, tokens = {}, {}
            for name, decoded, xla in [
                ("xla_one_row_projection", OneRowProjection(model), True),
                ("xla_model_alone", model, True),
                ("no_xla_transposed_projection", TransposedProjection(model), False),
                ("no_xla_model_alone", model, False),
            ]:
                options = dict(decoded=decoded, beam=beam, eos=vocab, max_length=args.max_length)
                compiled = tf.function(lambda s, o=options: search(source=s, **o), jit_compile=xla)
                times[name], result = median_ms(compiled, source, args.rounds)
                tokens[name] = result[0].numpy()
            line = {"size": size, "row": row, **{k: round(v, 1) for k, v in times.items()}}
            for engine in ("xla", "no_xla"):
                layout = "one_row" if engine == "xla" else "transposed"
                laid_out, alone = f"{engine}_{layout}_projection", f"{engine}_model_alone"
                line[f"{engine}_speedup"] = round(times[alone] / times[laid_out], 2)
                line[f"{engine}_same_tokens"] = bool(
                    np.array_equal(tokens[laid_out], tokens[alone])
                )
            report.append(line)
            ms = "  ".join(f"{name} {times[name]:.1f} ms" for name in times)
            print(
                f"{size:>12} {row:<22} {ms}  speed-up with XLA {line['xla_speedup']:.2f}x, "
                f"without {line['no_xla_speedup']:.2f}x  same tokens: "
                f"{line['xla_same_tokens'] and line['no_xla_same_tokens']}",
                flush=True,
            )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
