"""CTranslate2 against the package on a trained run: same outputs, BLEU, speed.

Exports the run with `keras_transformer.export.export_ctranslate2` in float32
and int8, then decodes one split: greedily with the package's `Translator`
(XLA, as `evaluate` runs it), CTranslate2 float32 and CTranslate2 int8; and
with the run's beam search, in the package and in a CTranslate2 float32 export
of it read with the defaults (`CTranslate2Translator(directory)`: the
package's ranking and patience). Prints, per engine, cased sacreBLEU against
the references, the share of sentences whose output is identical to the
package's output of the same search, and sentences/s (the whole split, 64
sentences a batch, tokenization included, after one warm-up batch).

    python benchmarks/ctranslate2_run.py --run-dir runs/numbers_de_en [--split test]

The last line is JSON: `*_bleu`, `*_same` (the share of sentences equal to the
package's output of the same search) and `*_sent_s` for every engine.
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.export import CTranslate2Translator, export_ctranslate2  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402

BATCH = 64


def timed(translate, sentences):
    """`(outputs, sentences/s)`: one warm-up batch, then the whole list."""
    translate(sentences[:BATCH])
    start = time.perf_counter()
    outputs = translate(sentences)
    return outputs, len(sentences) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--threads", type=int, default=1, help="CTranslate2 intra_threads")
    args = parser.parse_args()

    (greedy, beam), config = run.translators(args.run_dir, args.checkpoint, [1, None])
    split = args.split or config["data"]["test_split"]
    corpus = run.corpus_split(config["data"], split)
    sources, references = corpus.sources, corpus.targets

    outputs, rates = {}, {}
    outputs["package_greedy"], rates["package_greedy"] = timed(
        lambda s: translate_lines(greedy, s, BATCH), sources
    )
    outputs["package_beam"], rates["package_beam"] = timed(
        lambda s: translate_lines(beam, s, BATCH), sources
    )
    with tempfile.TemporaryDirectory() as folder:
        for weights in ("float32", "int8"):
            directory = os.path.join(folder, weights)
            quantization = None if weights == "float32" else weights
            export_ctranslate2(greedy, directory, quantization=quantization)
            engine = CTranslate2Translator(directory, beam_size=1, intra_threads=args.threads)
            name = f"ct2_{weights}"
            outputs[name], rates[name] = timed(lambda s, e=engine: e(s, BATCH), sources)
        directory = export_ctranslate2(beam, os.path.join(folder, "beam"))
        engine = CTranslate2Translator(directory, intra_threads=args.threads)
        outputs["ct2_beam"], rates["ct2_beam"] = timed(lambda s: engine(s, BATCH), sources)

    result = {"split": split, "sentences": len(sources), "beam_size": beam.beam_size}
    print(f"{split}: {len(sources)} sentences; beam {beam.beam_size}; CT2 {args.threads} thread(s)")
    print(f"{'engine':16s} {'BLEU':>6s} {'same as package':>16s} {'sentences/s':>12s}")
    for name, texts in outputs.items():
        bleu = sacrebleu.corpus_bleu(texts, [references]).score
        package = outputs["package_beam" if "beam" in name else "package_greedy"]
        same = float(np.mean([a == b for a, b in zip(texts, package, strict=True)]))
        print(f"{name:16s} {bleu:6.2f} {same:16.2%} {rates[name]:12.1f}")
        result[f"{name}_bleu"] = round(bleu, 2)
        result[f"{name}_same"] = round(same, 4)
        result[f"{name}_sent_s"] = round(rates[name], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
