"""One sentence at a time on every engine: the package's `Translator`, LiteRT, the
SavedModel and CTranslate2 int8 (with its default threads, and with one);
size, latency, agreement, BLEU, and the wall time of a first translation from
the command line.

Exports a trained run as LiteRT float32, float16 and dynamic int8
(`export_litert`), as the default SavedModel (no XLA, as stock TF Serving runs
it) and as CTranslate2 int8, then translates the same sentences one at a
time, as a device or a chat client does, with each engine in turn and with
the run's own `Translator` (XLA), all at the same beam size (rounds
alternate, so machine noise hits all). Prints per engine the file size, the
one-sentence latency (p50, p99) and its ratio to LiteRT float32's,
sentences per second, cased BLEU against the references and the sentences
whose output differs from LiteRT float32's.

With `--startup`, also times `keras-transformer translate` of one sentence
with `--run-dir`, `--saved-model` and `--litert`, each a new process, against
a process that only imports TensorFlow: the seconds a user waits beyond
TensorFlow's own start-up.

    python benchmarks/litert_latency.py --run-dir runs/multi30k_de_en --split val \\
        --checkpoint averaged [--beam-size 6] [--limit 1014] [--rounds 2] [--startup]

The last line is JSON, one object per engine, `int8_bleu_drop` and
`float16_bleu_drop` (LiteRT float32's BLEU minus theirs) and, with
`--startup`, `startup_s` (wall seconds per command, and TensorFlow's import).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the SavedModel's tokenizer ops)

from keras_transformer import run  # noqa: E402
from keras_transformer.export import export_translator  # noqa: E402
from keras_transformer.export.litert import LITERT_FILE, export_litert  # noqa: E402
from keras_transformer.export.litert_runtime import LiteRTTranslator  # noqa: E402


def directory_size(path):
    """Bytes of every file under `path` (or of the file `path`)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def engines(translator, directory):
    """`({name: (translate one sentence -> str, size in bytes or None)}, {format: path})`:
    `translator` itself and its exports, written into `directory`, and where the
    SavedModel and LiteRT float32 exports are."""
    made = {"translator_xla": (lambda s: translator([s])[0].numpy().decode(), None)}
    paths = {}
    for quantization in (None, "float16", "dynamic_int8"):
        name = f"litert_{quantization or 'float32'}"
        path = export_litert(translator, os.path.join(directory, name), quantization)
        paths.setdefault("litert", path)  # float32, the first
        lite = LiteRTTranslator(path)
        made[name] = (
            lambda s, lite=lite: lite([s])[0],
            directory_size(os.path.join(path, LITERT_FILE)),
        )
    saved = export_translator(translator, "model", base_dir=directory, warmup=False)
    paths["saved_model"] = saved
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    made["saved_model"] = (
        lambda s: serve(inputs=tf.constant([s]))["outputs"].numpy()[0].decode(),
        directory_size(saved),
    )
    try:
        from keras_transformer.export import CTranslate2Translator, export_ctranslate2
    except ImportError:
        print("ctranslate2 is not installed (pip install -e '.[bench]'): its row is left out")
        return made, paths
    ct2_dir = export_ctranslate2(translator, os.path.join(directory, "ct2"), quantization="int8")
    for name, threads in (("ctranslate2_int8", 0), ("ctranslate2_int8_one_thread", 1)):
        ct2 = CTranslate2Translator(ct2_dir, compute_type="int8", intra_threads=threads)
        made[name] = (
            lambda s, ct2=ct2: ct2([s])[0],
            directory_size(os.path.join(ct2_dir, "model.bin")),
        )
    return made, paths


def wall_seconds(command):
    """Wall seconds of `command`, a new process; its failure stops the benchmark."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 1)


def startup_seconds(args, sentence, paths):
    """Wall seconds of a first translation of `sentence` from the command line, one
    new process per way of running the model (`paths` of the exports, as `engines`
    gives them), and of importing TensorFlow alone."""
    translate = [sys.executable, "-m", "keras_transformer", "translate"]
    run_dir = ["--run-dir", args.run_dir, "--checkpoint", args.checkpoint]
    if args.beam_size is not None:
        run_dir += ["--beam-size", str(args.beam_size)]
    return {
        "import_tensorflow": wall_seconds([sys.executable, "-c", "import tensorflow"]),
        "run_dir": wall_seconds(translate + run_dir + [sentence]),
        "saved_model": wall_seconds(translate + ["--saved-model", paths["saved_model"], sentence]),
        "litert": wall_seconds(translate + ["--litert", paths["litert"], sentence]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", default=None, help="default: the run's test split")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--beam-size", type=int, default=None, help="default: the run's")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--startup", action="store_true", help="also time a first translation from the CLI"
    )
    args = parser.parse_args()

    translator = run.make_translator(args.run_dir, args.checkpoint, args.beam_size)
    config = run.load_run(args.run_dir, args.checkpoint)[0]
    corpus = run.corpus_split(config["data"], args.split or config["data"]["test_split"])
    sources, references = corpus.sources[: args.limit], corpus.targets[: args.limit]
    with tempfile.TemporaryDirectory() as directory:
        made, paths = engines(translator, directory)
        for translate, _ in made.values():  # warm-up: first calls trace and allocate
            translate(sources[0])
        seconds = {name: [] for name in made}
        outputs = {}
        for _ in range(args.rounds):
            for name, (translate, _) in made.items():
                texts = []
                for sentence in sources:
                    start = time.perf_counter()
                    texts.append(translate(sentence))
                    seconds[name].append(time.perf_counter() - start)
                outputs[name] = texts
        startup = startup_seconds(args, sources[0], paths) if args.startup else None
    figures = {}
    base = outputs["litert_float32"]
    base_p50 = np.percentile(seconds["litert_float32"], 50) * 1000
    for name, (_, size) in made.items():
        times = np.array(seconds[name]) * 1000
        figures[name] = {
            "megabytes": None if size is None else round(size / 1e6, 2),
            "p50_ms": round(float(np.percentile(times, 50)), 2),
            "p50_to_litert_float32": round(float(np.percentile(times, 50) / base_p50), 2),
            "p99_ms": round(float(np.percentile(times, 99)), 2),
            "sentences_per_s": round(len(times) / (times.sum() / 1000), 1),
            "bleu": round(sacrebleu.corpus_bleu(outputs[name], [references]).score, 2),
            "differ_from_litert_float32": sum(
                a != b for a, b in zip(outputs[name], base, strict=True)
            ),
        }
        f = figures[name]
        size = "   -   " if f["megabytes"] is None else f"{f['megabytes']:7.2f}"
        print(
            f"{name:18} {size} MB  p50 {f['p50_ms']:7.2f} ms ({f['p50_to_litert_float32']:5.2f}x)"
            f"  p99 {f['p99_ms']:7.2f} ms  {f['sentences_per_s']:7.1f} sent/s  "
            f"BLEU {f['bleu']:6.2f}  differs {f['differ_from_litert_float32']}"
        )
    if startup is not None:
        base = startup["import_tensorflow"]
        print(f"first translation from the CLI, wall seconds (importing TensorFlow: {base} s):")
        for way, wall in startup.items():
            if way != "import_tensorflow":
                print(f"  --{way.replace('_', '-'):12} {wall:6.1f} s, {wall - base:5.1f} s beyond")
    drops = {
        f"{q}_bleu_drop": round(
            figures["litert_float32"]["bleu"] - figures[f"litert_{q}"]["bleu"], 2
        )
        for q in ("float16", "dynamic_int8")
    }
    print(
        json.dumps(
            {
                "sentences": len(sources),
                "beam_size": translator.beam_size,
                **figures,
                **drops,
                **({} if startup is None else {"startup_s": startup}),
            }
        )
    )


if __name__ == "__main__":
    main()
