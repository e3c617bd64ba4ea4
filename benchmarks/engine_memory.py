"""Peak memory (RSS) of each engine at OPUS-MT size, each in a process of its own.

Writes the Marian model directory `opus_mt_speed.py` times (6 + 6 layers, d_model 512,
a tied 32,000-piece matrix, random weights; SentencePiece models trained on Multi30k when
`MULTI30K_DIR` has it, else on the numbers corpus), imports it, exports it (the default
SavedModel at beam 4, LiteRT float32 and dynamic int8 files with a free batch dimension,
CTranslate2 float32 and int8 by CTranslate2's own `OpusMTConverter`), then starts one new
Python process per engine. Each process imports what its engine needs, notes its resident
memory, loads the engine, translates one sentence and then a batch of `--sentences` at beam
4, and reports its peak resident memory (`VmHWM`), which the table prints beside the
memory after the imports and the peak over a process that only imports TensorFlow (the
LiteRT and CTranslate2 processes do not import it).

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/engine_memory.py [--sentences 32]

The last line is JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

BEAM = 4
ENGINES = (
    "tensorflow_only",
    "translator",
    "translator_no_xla",
    "translator_bf16",
    "saved_model",
    "litert_float32",
    "litert_dynamic_int8",
    "ct2_float32",
    "ct2_int8",
)


def resident_mib(field="VmRSS"):
    """This process's resident memory now (`VmRSS`) or at its peak (`VmHWM`), MiB (Linux).
    Not `ru_maxrss`, which a process started by `subprocess` inherits from its parent."""
    with open("/proc/self/status", encoding="ascii") as f:
        line = next(line for line in f if line.startswith(f"{field}:"))
    return int(line.split()[1]) / 1024


def child(engine, paths, max_length):
    """Loads `engine`, translates one sentence and the batch; prints its memory as JSON.
    Only the engines that need TensorFlow import it."""
    with open(paths["sentences"], encoding="utf-8") as f:
        sentences, pieces = json.load(f)
    if engine.startswith("translator"):
        from keras_transformer import run

        options = dict(beam_size=BEAM, max_length=max_length)
        if engine == "translator_no_xla":
            options["jit_compile"] = False
        if engine == "translator_bf16":
            options.update(jit_compile=False, compute_dtype="bfloat16")
        imported = resident_mib()
        translator = run.make_translator(paths["run"], **options)
        translate = translator
    elif engine == "saved_model":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

        imported = resident_mib()
        serving = tf.saved_model.load(paths["saved_model"]).signatures["serving_default"]

        def translate(batch):
            return serving(inputs=tf.constant(batch))

    elif engine.startswith("litert"):
        from keras_transformer.export.litert_runtime import LiteRTTranslator

        imported = resident_mib()
        translate = LiteRTTranslator(paths[engine])
    elif engine.startswith("ct2"):
        import ctranslate2

        imported = resident_mib()
        of = dict(zip(sentences, pieces, strict=True))
        engine_ = ctranslate2.Translator(paths[engine], intra_threads=1)

        def translate(batch):
            options = dict(beam_size=BEAM, max_decoding_length=max_length)
            return engine_.translate_batch([of[s] for s in batch], **options)

    else:  # tensorflow_only
        import tensorflow  # noqa: F401

        imported = resident_mib()

        def translate(batch):
            return batch

    translate(sentences[:1])
    translate(sentences)
    peak = resident_mib("VmHWM")
    print(json.dumps({"imported_mib": round(imported, 1), "peak_mib": round(peak, 1)}))


def prepare(work, count, max_length):
    """Writes, imports and exports the model in `work`; returns the children's paths."""
    import tensorflow as tf
    from ctranslate2.converters import OpusMTConverter
    from opus_mt_speed import corpus_and_sentences, write_opus_mt_sized

    from keras_transformer import run
    from keras_transformer.run.opus_mt import import_marian

    corpus, sentences = corpus_and_sentences(count)
    model_dir = write_opus_mt_sized(os.path.join(work, "opus-mt"), corpus)
    run_dir = import_marian(model_dir, os.path.join(work, "run")).path
    source = run.load_run(run_dir)[2]
    ids = source.tokenize(tf.constant(sentences)).to_list()
    pieces = [[source.pieces[i] for i in row] for row in ids]
    paths = {"run": run_dir, "sentences": os.path.join(work, "sentences.json")}
    with open(paths["sentences"], "w", encoding="utf-8") as f:
        json.dump([sentences, pieces], f)
    options = dict(beam_size=BEAM, max_length=max_length)
    paths["saved_model"] = run.export(run_dir, base_dir=os.path.join(work, "saved"), **options)
    for quantization in ("float32", "dynamic_int8"):
        paths[f"litert_{quantization}"] = run.export_litert_run(
            run_dir,
            os.path.join(work, f"litert_{quantization}"),
            quantization=None if quantization == "float32" else quantization,
            batch_size=None,
            **options,
        )
    for compute_type in ("float32", "int8"):
        converted = os.path.join(work, f"ct2_{compute_type}")
        OpusMTConverter(model_dir).convert(converted, quantization=compute_type)
        paths[f"ct2_{compute_type}"] = converted
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=32, help="the batch's size")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, json.loads(args.paths), args.max_length)

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
    sys.path.insert(0, os.path.dirname(__file__))
    paths = prepare(tempfile.mkdtemp(prefix="engine_memory_"), args.sentences, args.max_length)
    report = {}
    for engine in ENGINES:
        command = [sys.executable, __file__, "--child", engine, "--paths", json.dumps(paths)]
        command += ["--max-length", str(args.max_length)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        report[engine] = json.loads(done.stdout.strip().splitlines()[-1])
    base = report["tensorflow_only"]["peak_mib"]
    print(f"\n{'engine':24}{'after imports MiB':>19}{'peak MiB':>10}{'over TF only':>14}")
    for engine, memory in report.items():
        over = memory["peak_mib"] - base
        print(f"{engine:24}{memory['imported_mib']:19.0f}{memory['peak_mib']:10.0f}{over:14.0f}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
