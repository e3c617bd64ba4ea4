"""Every engine of the package on a trained run beside CTranslate2: speed and agreement.

Translates a split of a trained run (the README main job's, a Multi30k model, ...) with

- the run's `Translator` with XLA (its default), without, and without XLA in bfloat16;
- its default SavedModel (what stock TF Serving runs) through `serving_default`;
- its LiteRT exports, float32 and dynamic int8, with one sentence a call and with a free batch;
- CTranslate2 float32 and int8 on the package's `export_ctranslate2` of the run at each of
  `--ct2-threads`: called directly on source pieces with its own search defaults
  (`ct2_*`, the reference), and through the package's `CTranslate2Translator`, which
  tokenizes and ranks beam hypotheses as the package does (`ct2_translator_*`);

each greedy and at beam 4 with the run's other decoding options. It times the first
`--sentences` sentences one at a time (p50) and as one batch (sentences/s), prints per row
(greedy and beam 4, one sentence and the batch) the package's fastest engine over
CTranslate2 int8's fastest thread count (`ct2_*` engines are CTranslate2's, not counted as the
package's), and per engine the share of the split's sentences
whose output is the package's float32 search's (the `Translator` without XLA, same beam).

    python benchmarks/run_speed.py --run-dir runs/numbers_de_en [--split test] \
        [--sentences 32] [--limit 1000] [--ct2-threads 1,2]

The last line is JSON.
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the SavedModel's tokenizer ops)
from engine_rows import (  # noqa: E402
    BEAMS,
    TRANSLATORS,
    fastest_against,
    print_rows,
    print_times,
    time_engines,
)

from keras_transformer import run  # noqa: E402
from keras_transformer.export import CTranslate2Translator, LiteRTTranslator  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402
from keras_transformer.run.evaluate import test_set  # noqa: E402


def translator_engines(run_dir, beam):
    """`{name: ((one, batch), texts)}` of the run's `Translator`s at `beam`."""
    engines = {}
    for kind, arguments in TRANSLATORS.items():
        translator = run.make_translator(run_dir, beam_size=beam, **arguments)
        engines[f"{kind}_beam{beam}"] = (
            (lambda s, t=translator: t([s]), lambda batch, t=translator: t(tf.constant(batch))),
            lambda lines, t=translator: translate_lines(t, lines),
        )
    return engines


def export_engines(run_dir, beam, work):
    """`{name: ((one, batch), texts)}` of the run's SavedModel and LiteRT files at `beam`."""
    saved = run.export(run_dir, f"beam{beam}", base_dir=os.path.join(work, "saved"), beam_size=beam)
    serving = tf.saved_model.load(saved).signatures["serving_default"]
    engines = {
        f"saved_model_beam{beam}": (
            (
                lambda s: serving(inputs=tf.constant([s])),
                lambda batch: serving(inputs=tf.constant(batch)),
            ),
            lambda lines: translate_lines(lambda batch: serving(inputs=batch)["outputs"], lines),
        )
    }
    for quantization in (None, "dynamic_int8"):
        kind = f"litert_{quantization or 'float32'}"
        for batch_size, suffix in ((1, ""), (None, "_batches")):
            path = run.export_litert_run(
                run_dir,
                os.path.join(work, f"{kind}{suffix}_beam{beam}"),
                beam_size=beam,
                quantization=quantization,
                batch_size=batch_size,
            )
            lite = LiteRTTranslator(path)
            calls = (lambda s, t=lite: t([s]), None) if batch_size else (None, lite)
            engines[f"{kind}{suffix}_beam{beam}"] = (calls, lambda lines, t=lite: t(lines))
    return engines


def ct2_engines(run_dir, source, lines, threads, work):
    """`{name: ((one, batch), texts)}` of CTranslate2 float32 and int8 at each thread count
    and beam: `ct2_*` called directly on the lines' source pieces with CTranslate2's own
    defaults (patience 1), `ct2_translator_*` through the package's `CTranslate2Translator`
    (tokenization, and the package's ranking: patience 4 at beam 4); `source` is the run's
    source tokenizer."""
    ids = source.tokenize(tf.constant(lines)).to_list()
    pieces_of = {s: [source.pieces[i] for i in row] for s, row in zip(lines, ids, strict=True)}
    engines = {}
    for quantization in ("float32", "int8"):
        directory = run.export_ctranslate2_run(
            run_dir,
            os.path.join(work, f"ct2_{quantization}"),
            quantization=None if quantization == "float32" else quantization,
        )
        for count, beam in [(n, b) for n in threads for b in BEAMS]:
            engine = CTranslate2Translator(directory, beam_size=beam, intra_threads=count)
            options = dict(
                beam_size=beam,
                length_penalty=engine.alpha if beam > 1 else 0.0,
                max_decoding_length=engine.max_length,
                no_repeat_ngram_size=engine.length_options.no_repeat_ngram_size,
            )

            def batch(lines, e=engine, o=options):
                return e.translator.translate_batch([pieces_of[s] for s in lines], **o)

            def texts(lines, e=engine, b=batch):
                return e.texts([result.hypotheses[0] for result in b(lines)])

            name = f"{quantization}_{count}t_beam{beam}"
            engines[f"ct2_{name}"] = ((lambda s, b=batch: b([s]), batch), texts)
            engines[f"ct2_translator_{name}"] = ((lambda s, e=engine: e([s]), engine), engine)
    return engines


def agreement(engines, lines):
    """Per engine, the share of `lines` it translates as the package's float32 search
    (`translator_no_xla`) of the same beam does."""
    texts = {name: translate(lines) for name, (_, translate) in engines.items()}
    shares = {}
    for name, outputs in texts.items():
        reference = texts[f"translator_no_xla_beam{name.rsplit('beam', 1)[1]}"]
        shares[name] = sum(a == b for a, b in zip(outputs, reference, strict=True)) / len(lines)
    return shares


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--sentences", type=int, default=32, help="timed; also the batch's size")
    parser.add_argument("--limit", type=int, default=1000, help="sentences checked for agreement")
    parser.add_argument(
        "--ct2-threads", default="1,2", help="CTranslate2 intra_threads counts, comma-separated"
    )
    args = parser.parse_args()

    config, _, source, _ = run.load_run(args.run_dir)
    split, corpus = test_set(config, args.split)
    lines = corpus.sources[: args.limit]
    sentences = lines[: args.sentences]
    work = tempfile.mkdtemp(prefix="run_speed_")
    engines = {}
    for beam in BEAMS:
        engines.update(translator_engines(args.run_dir, beam))
        engines.update(export_engines(args.run_dir, beam, work))
    threads = [int(n) for n in args.ct2_threads.split(",")]
    engines.update(ct2_engines(args.run_dir, source, lines, threads, work))
    engines = dict(sorted(engines.items(), key=lambda item: item[0].endswith("beam4")))

    calls = {name: pair for name, (pair, _) in engines.items()}
    latency, throughput = time_engines(calls, sentences)
    print(f"{args.run_dir}, {split}: {len(sentences)} sentences timed, {len(lines)} compared")
    print_times(calls, latency, throughput)
    rows = fastest_against(latency, throughput)
    print_rows(rows)
    same = agreement(engines, lines)
    print(f"\nshare of {len(lines)} sentences translated as the float32 search (no XLA) does:")
    for name, share in same.items():
        print(f"  {name:36}{100 * share:7.1f}%")
    result = dict(split=split, sentences=len(sentences), compared=len(lines), rows=rows)
    result.update(latency_ms=latency, sentences_per_s=throughput, same=same)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
