"""An OPUS-MT-sized Marian model imported and decoded beside CTranslate2, in one process.

Writes a Marian model directory of OPUS-MT's size (6 + 6 layers, d_model 512, 8 heads, dff
2048, a shared vocabulary of 32,000 pieces, random weights; SentencePiece models trained on
Multi30k's German and English when `MULTI30K_DIR` has it, else on the numbers corpus),
times `import_marian`, then translates the same sentences with

- the imported run's `Translator`, with XLA (its default) and without, greedy and beam 4,
  and without XLA in bfloat16 (`compute_dtype="bfloat16"`);
- CTranslate2 on the same directory converted by its own `OpusMTConverter`, float32 and
  int8, greedy and beam 4, with each of `--ct2-threads` intra-op thread counts (1 and 2 by
  default: float32 is faster with two on a 2-core VM, int8 often with one);
- the imported run's SavedModels through `serving_default`: the default export (what stock
  TF Serving runs), its bfloat16 twin, and the `xla=True` export (for a server started with
  `--xla_cpu_compilation_enabled=true`), greedy and beam 4, one sentence and the batch;
- its LiteRT exports, float32 and dynamic int8, greedy and beam 4,
  each with one sentence a call (timed one sentence at a time) and with a free batch
  (`batch_size=None`, timed on the batch), and dynamic int8 with 16 sentences a call (timed
  on the batch, its calls shared among the interpreters);

and prints, per engine, the one-sentence latency (p50) and its ratio to CTranslate2
float32's at its faster thread count, a batch's sentences per second, the files' sizes, and
for each of the four rows (greedy and beam 4, one sentence and the batch) the package's
fastest engine over CTranslate2 int8's fastest thread count, and the SavedModel's fastest
export and its default export (what stock TF Serving runs, the float32 search's outputs) over
CTranslate2 float32's. EOS gets a very negative output bias, so every engine writes
`--max-length` pieces for every sentence (checked for the `Translator` and CTranslate2
float32). `--engines` times some of the package's engines only (CTranslate2 always runs):
with every engine loaded the one process peaks at about 22 GiB of resident memory.

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/opus_mt_speed.py [--sentences 40] \
        [--ct2-threads 1,2] [--engines translator,saved_model,litert]

The last line is JSON.
"""

import argparse
import gzip
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the SavedModel's tokenizer ops)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
from engine_rows import (  # noqa: E402
    BEAMS,
    TRANSLATORS,
    fastest_against,
    print_rows,
    print_times,
    time_engines,
)
from opus_mt import write_opus_mt  # noqa: E402  (the tests' Marian directory writer)

from keras_transformer import run  # noqa: E402
from keras_transformer.datasets import ParallelCorpus, numbers_corpus  # noqa: E402

OPUS_MT_SIZES = ((6, 6), 512, 8, 2048)


def corpus_and_sentences(count):
    """`(corpus the SentencePiece models learn from, German sentences to translate)`."""
    directory = os.environ.get("MULTI30K_DIR", "")
    if os.path.isfile(os.path.join(directory, "train.de.gz")):

        def lines(name):
            with gzip.open(os.path.join(directory, name), "rt", encoding="utf-8") as f:
                return f.read().splitlines()

        corpus = ParallelCorpus(lines("train.de.gz"), lines("train.en.gz"))
        return corpus, lines("val.de.gz")[:count]
    test = numbers_corpus("test", source_lang="de", target_lang="en")
    return None, test.sources[:count]


def write_opus_mt_sized(directory, corpus):
    """An OPUS-MT-sized Marian directory of random weights whose outputs never end (EOS
    gets an output bias of -100), with SentencePiece models trained on `corpus`."""
    return write_opus_mt(
        directory,
        activation="swish",
        sizes=OPUS_MT_SIZES,
        vocab_size=32000,
        corpus=corpus,
        eos_bias=-100.0,
    )


def directory_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def ct2_engine(engine, options, pieces_of):
    """`(one sentence, batch)` calls of a CTranslate2 translator with `options`."""
    return (
        lambda s: engine.translate_batch([pieces_of[s]], **options),
        lambda batch: engine.translate_batch([pieces_of[s] for s in batch], **options),
    )


SAVED_MODELS = {
    "saved_model": dict(),
    "saved_model_bf16": dict(compute_dtype="bfloat16"),
    "saved_model_xla": dict(xla=True),
}
# LiteRT files by sentences a call: one, a free batch, and a fixed 16 (dynamic int8 only: a
# loop of known shapes, whose calls are dealt to the interpreters in turn).
LITERT_FILES = {1: "", None: "_batches", 16: "_batch16"}
FAMILIES = ("translator", "saved_model", "litert")


def both_beams(kinds):
    """`(kind, options, beam)` for each kind of `kinds` at each of `BEAMS`."""
    return [(kind, options, beam) for kind, options in kinds.items() for beam in BEAMS]


def translator_engines(run_dir, sentences, max_length):
    """`{name: (one sentence, batch)}` of the run's `Translator`s, greedy and beam 4."""
    engines = {}
    for kind, options, beam in both_beams(TRANSLATORS):
        translator = run.make_translator(run_dir, beam_size=beam, max_length=max_length, **options)
        engines[f"{kind}_beam{beam}"] = (
            lambda s, t=translator: t([s]),
            lambda batch, t=translator: t(tf.constant(batch)),
        )
    written = translator.translate_ids(translator.source_ids(sentences)).numpy() != 0
    assert written.sum(axis=1).min() == max_length, "an output ended before max_length"
    return engines


def ct2_engines(model_dir, work, source_pieces, sentences, args, results):
    """`{name: (one sentence, batch)}` of CTranslate2 float32 and int8 on its own conversion
    of `model_dir`, at each of `--ct2-threads` and both beams; sizes go into `results`."""
    import ctranslate2
    from ctranslate2.converters import OpusMTConverter

    pieces_of = dict(zip(sentences, source_pieces, strict=True))
    engines = {}
    for compute_type in ("float32", "int8"):
        converted = os.path.join(work, f"ct2_{compute_type}")
        OpusMTConverter(model_dir).convert(converted, quantization=compute_type)
        results[f"ct2_{compute_type}_bytes"] = directory_size(converted)
        for threads in [int(n) for n in args.ct2_threads.split(",")]:
            engine = ctranslate2.Translator(converted, intra_threads=threads)
            if compute_type == "float32":
                hypotheses = engine.translate_batch(
                    source_pieces, max_decoding_length=args.max_length
                )
                assert min(len(h.hypotheses[0]) for h in hypotheses) == args.max_length
            for beam in BEAMS:
                options = dict(beam_size=beam, max_decoding_length=args.max_length)
                engines[f"ct2_{compute_type}_{threads}t_beam{beam}"] = ct2_engine(
                    engine, options, pieces_of
                )
    return engines


def saved_model_engines(run_dir, work, max_length, results):
    """`{name: (one sentence, batch)}` of the run's SavedModels through `serving_default`,
    greedy and beam 4: the default export (what stock TF Serving runs), its bfloat16 twin,
    and `xla=True` (for a server started with `--xla_cpu_compilation_enabled=true`); sizes
    go into `results`."""
    engines = {}
    for kind, options, beam in both_beams(SAVED_MODELS):
        saved = run.export(
            run_dir,
            f"{kind}_beam{beam}",
            base_dir=os.path.join(work, "saved"),
            beam_size=beam,
            max_length=max_length,
            **options,
        )
        results[f"{kind}_bytes"] = directory_size(saved)
        serving = tf.saved_model.load(saved).signatures["serving_default"]
        engines[f"{kind}_beam{beam}"] = (
            lambda s, f=serving: f(inputs=tf.constant([s])),
            lambda batch, f=serving: f(inputs=tf.constant(batch)),
        )
    return engines


def litert_engines(run_dir, work, max_length, results):
    """`{name: (one sentence, batch)}` of the run's LiteRT files, float32 and dynamic int8,
    greedy and beam 4, one for each of `LITERT_FILES`; sizes go into `results`."""
    from keras_transformer.export.litert_runtime import LiteRTTranslator

    engines = {}
    kinds = {"litert_float32": None, "litert_dynamic_int8": "dynamic_int8"}
    for kind, quantization, beam in both_beams(kinds):
        for batch_size, suffix in LITERT_FILES.items():
            if batch_size == 16 and quantization is None:
                continue
            path = run.export_litert_run(
                run_dir,
                os.path.join(work, f"{kind}{suffix}_beam{beam}"),
                beam_size=beam,
                max_length=max_length,
                quantization=quantization,
                batch_size=batch_size,
            )
            lite = LiteRTTranslator(path)
            if batch_size == 1:
                results[f"{kind}_bytes"] = directory_size(path)
                engines[f"{kind}_beam{beam}"] = (lambda s, t=lite: t([s]), None)
            else:
                engines[f"{kind}{suffix}_beam{beam}"] = (None, lite)
    return engines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=32, help="also the batch's size")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument(
        "--ct2-threads", default="1,2", help="CTranslate2 intra_threads counts, comma-separated"
    )
    parser.add_argument(
        "--engines",
        default=",".join(FAMILIES),
        help=f"the package's engines to time beside CTranslate2, of {', '.join(FAMILIES)}",
    )
    args = parser.parse_args()
    families = args.engines.split(",")
    if unknown := set(families) - set(FAMILIES):
        parser.error(f"unknown --engines {', '.join(sorted(unknown))}; choose from {FAMILIES}")
    from keras_transformer.run.opus_mt import import_marian

    corpus, sentences = corpus_and_sentences(args.sentences)
    work = tempfile.mkdtemp(prefix="opus_mt_speed_")
    model_dir = write_opus_mt_sized(os.path.join(work, "opus-mt"), corpus)
    start = time.perf_counter()
    run_dir = import_marian(model_dir, os.path.join(work, "run")).path
    import_s = time.perf_counter() - start
    results = {
        "import_s": round(import_s, 1),
        "npz_bytes": directory_size(os.path.join(model_dir, "opus.model.npz")),
    }
    print(f"import_marian: {import_s:.1f} s")

    source = run.load_run(run_dir)[2]
    source_pieces = [
        [source.pieces[i] for i in row] for row in source.tokenize(tf.constant(sentences)).to_list()
    ]
    print(f"{len(sentences)} sentences, {np.mean([len(p) for p in source_pieces]):.1f} pieces each")
    engines = {}
    if "translator" in families:
        engines.update(translator_engines(run_dir, sentences, args.max_length))
    engines.update(ct2_engines(model_dir, work, source_pieces, sentences, args, results))
    if "saved_model" in families:
        engines.update(saved_model_engines(run_dir, work, args.max_length, results))
    if "litert" in families:
        engines.update(litert_engines(run_dir, work, args.max_length, results))

    latency, throughput = time_engines(engines, sentences)
    print_times(engines, latency, throughput)
    results["rows"] = fastest_against(latency, throughput)
    print_rows(results["rows"])
    if "saved_model" in families:
        served = fastest_against(latency, throughput, ours="saved_model", theirs="ct2_float32")
        results["saved_model_rows"] = served
        print_rows(served, "the SavedModel's fastest export over CTranslate2 float32's fastest")
        default = fastest_against(
            latency, throughput, ours="saved_model_beam", theirs="ct2_float32"
        )
        results["default_saved_model_rows"] = default
        print_rows(default, "the default SavedModel over CTranslate2 float32's fastest")
    for key, size in results.items():
        if key.endswith("_bytes"):
            print(f"{key:26}{size / 2**20:10.1f} MiB")
    results.update(latency_ms=latency, sentences_per_s=throughput)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
