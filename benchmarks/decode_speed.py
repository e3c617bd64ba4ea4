"""Decoding speed: cached greedy and beam search against the TF tutorial's uncached loop.

One untrained model of the training benchmark's size (4+4 layers, d_model 128,
8 heads, dff 512, vocab 8000) translates a batch of 32 random sources of
length 32 into 64 new tokens. EOS is set to an id the searches never stop at,
so every method generates all 64 tokens and they do the same work:

- cached greedy: `keras_transformer.inference.greedy_search` in one
  `tf.function` compiled with XLA, as `Translator` runs it (keys and values
  cached per layer, encoder run once); also without XLA;
- uncached greedy: the TF tutorial's loop, in a `tf.function` too: at each
  step the whole model runs again on the source and the growing prefix;
- beam 4: `keras_transformer.inference.beam_search`, beam size 4, with XLA;
  and, for scale, cached greedy search over each source repeated 4 times
  (as many rows as beam 4 decodes);
- keras-hub (when the `[bench]` extra is installed): the model of
  `kerashub_model.py`, of the same size, decoded greedily with keras-hub's own
  key/value caches in one `tf.function` with XLA (`kerashub_greedy`), and
  checked against its own uncached loop;
- batch-1 latency: cached greedy with XLA on the first source alone;
- CTranslate2 (when `ctranslate2` is installed): the same weights exported with
  `keras_transformer.export.ctranslate2_spec`, in float32 and int8, greedy and
  beam 4, with `--ct2-threads` threads (`min_decoding_length` makes it write all
  64 tokens too).

Each is timed `--rounds` times after a warm-up call; the median counts.
`beam4_cost` is what a beam-4 sentence costs in greedy sentences, and
`rows4_cost` what a sentence of greedy search over 4 times the rows does.

`--baseline REV` also runs greedy and beam 4 (both with XLA) with the package
`keras_transformer/inference/` as it was at git revision REV, on the
same model in the same process, the two versions timed in alternation, and
prints the ratio of their speeds: what a change to the searches costs. With
`--run-dir`, that comparison decodes a trained run's test split instead (its
model, tokenizer, EOS and `decode.max_length`; batches of 64 sources sorted
by length, as `evaluate` makes them, padded to one width), so outputs end where the model ends
them, and adds beam 4 with 2-best lists, greedy and beam 4 from a prefix
(each reference's first two pieces) and with phrases to meet (up to two
reference words each), and sampling with a seed; it counts the sentences on
which the two versions' outputs differ for each, and prints what the
phrases cost (constrained over free time, greedy and beam 4).

`--run-dir` without `--baseline` decodes a trained run's split (`--split`,
default its test split; `--checkpoint`) with what users run: the package's
`Translator` greedy and beam 4 (XLA, the run's decoding options) beside
CTranslate2 float32 and int8 of the same run (`export_ctranslate2`, greedy and
beam 4, `--ct2-threads`), every engine on the same sentences in batches of 64,
tokenization included, timed in turn for `--rounds` rounds after a warm-up; it
prints sentences/s, target tokens/s (the output's target pieces) and the share
of sentences each engine translates as the package's search of the same beam
size does. Its JSON line holds `greedy_over_ct2_int8` and
`beam4_over_ct2_int8`: the package's sentences/s over CTranslate2 int8's.
CTranslate2's beam search stops a sentence once `beam_size * patience`
hypotheses have ended (patience 1 unless `--patience P`); with `--patience P`
the package also decodes beam 4 with that patience
(`beam4_patience_over_ct2_int8`), the same rule as CTranslate2's.

    python benchmarks/decode_speed.py --rounds 5 [--baseline 6d8072f [--run-dir runs/x]]
    python benchmarks/decode_speed.py --run-dir runs/x [--split val] [--checkpoint averaged]
        [--patience 1]
"""

import argparse
import importlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import NamedTuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_transformer as kt  # noqa: E402
from keras_transformer import inference  # noqa: E402
from keras_transformer.inference import Translator, beam_search, greedy_search  # noqa: E402
from keras_transformer.models import StepWrapper  # noqa: E402
from keras_transformer.run import corpus_split, load_run  # noqa: E402

BOS = 2
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def uncached_greedy(model, source_ids, new_tokens):
    """The TF tutorial's loop: re-run the model on the prefix, append the argmax."""
    batch = tf.shape(source_ids)[0]
    prefix = tf.fill([batch, 1], BOS)

    def body(step, prefix):
        logits = model((source_ids, prefix), training=False)[:, -1]  # (B, V)
        token = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return step + 1, tf.concat([prefix, token[:, None]], axis=1)

    _, prefix = tf.while_loop(
        lambda step, _: step < new_tokens,
        body,
        (tf.constant(0), prefix),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None])),
    )
    return prefix[:, 1:]


def time_call(fn, source_ids, rounds, convert=True):
    fn(source_ids)  # trace and warm up
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn(source_ids)
        if convert:
            np.asarray(out)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def ctranslate2_rates(model, source_ids, new_tokens, rounds, threads):
    """Sentences/s of CTranslate2 on `model`'s weights: float32 and int8, greedy and beam 4."""
    try:
        import ctranslate2
    except ImportError:
        print("ctranslate2 is not installed: its rows are left out")
        return {}
    from keras_transformer.export import ctranslate2_spec, write_spec

    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, 8000)]
    sources = [[pieces[i] for i in row] for row in source_ids]
    rates = {}
    with tempfile.TemporaryDirectory() as folder:
        for weights in ("float32", "int8"):
            directory = os.path.join(folder, weights)
            spec = ctranslate2_spec(model, pieces, pieces)
            write_spec(spec, directory, None if weights == "float32" else weights)
            translator = ctranslate2.Translator(directory, intra_threads=threads)
            for beam in (1, 4):

                def run(batch, beam=beam, translator=translator):
                    return translator.translate_batch(
                        batch,
                        beam_size=beam,
                        max_decoding_length=new_tokens,
                        min_decoding_length=new_tokens,
                    )

                seconds = time_call(run, sources, rounds, convert=False)
                name = f"ct2_{weights}" + ("" if beam == 1 else "_beam4")
                rates[name] = len(sources) / seconds
            rates[f"ct2_{weights}_batch1_ms"] = 1000 * time_call(
                lambda batch, t=translator: t.translate_batch(
                    batch,
                    beam_size=1,
                    max_decoding_length=new_tokens,
                    min_decoding_length=new_tokens,
                ),
                sources[:1],
                rounds,
                convert=False,
            )
    return rates


def kerashub_rate(source_ids, new_tokens, rounds):
    """Sentences/s of keras-hub's cached greedy decoding, and its token agreement with
    its own uncached loop; None where keras-hub is not installed."""
    try:
        from kerashub_model import kerashub_greedy, kerashub_transformer
    except ImportError:
        print("keras-hub is not installed (pip install -e '.[bench]'): its row is left out")
        return None
    layers, heads = 4, 8
    model = kerashub_transformer(layers, 128, heads, 512, 8000, 8000, length=new_tokens)
    cached = tf.function(
        lambda s: kerashub_greedy(model, s, new_tokens, BOS, layers, heads), jit_compile=True
    )
    uncached = tf.function(lambda s: uncached_greedy(model, s, new_tokens))
    agree = float(np.mean(cached(source_ids).numpy() == uncached(source_ids).numpy()))
    return len(source_ids) / time_call(cached, source_ids, rounds), agree


def searches_at(revision):
    """`(search module, model adapter)` of `keras_transformer/inference/` at a git revision.

    The package is imported under the name `inference_at_baseline` beside this
    checkout's (its files on disk, so that AutoGraph can read their source);
    the rest of `keras_transformer` is this checkout's. Revisions before the
    step interface returned a `Step` get the model through `TwoValueSteps`.
    """
    archive = subprocess.run(
        ["git", "archive", revision, "keras_transformer/inference"], cwd=REPO, capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision} failed: {archive.stderr.decode().strip()}")
    folder = tempfile.mkdtemp(prefix="inference_at_")
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(folder, filter="data")
    package = os.path.join(folder, "inference_at_baseline")
    os.rename(os.path.join(folder, "keras_transformer", "inference"), package)
    for name in os.listdir(package):
        path = os.path.join(package, name)
        with open(path, encoding="utf-8") as file:
            source = file.read().replace("keras_transformer.inference", "inference_at_baseline")
        with open(path, "w", encoding="utf-8") as file:
            file.write(source)
    sys.path.insert(0, folder)
    module = importlib.import_module("inference_at_baseline.search")
    steps_are_pairs = not os.path.isfile(os.path.join(package, "adapters.py"))
    return module, (TwoValueSteps if steps_are_pairs else lambda model: model)


class TwoValueSteps(StepWrapper):
    """A model's step interface as it was before `Step`: `decode_step` returns
    `(logits, cache)`, and `(logits, cache, attention)` only with `attention_layer`."""

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        logits, cache, attention = self.model.decode_step(
            token_ids, step, cache, state, attention_layer
        )
        return (logits, cache) if attention_layer is None else (logits, cache, attention)


def xla_searches(model, bos, eos, new_tokens):
    """Greedy search and beam 4 of `model` as XLA-compiled functions of source ids, each
    decoding `new_tokens` tokens (with an `eos` no search produces, exactly that many)."""
    greedy = tf.function(
        lambda s: greedy_search(model, s, bos, eos, max_length=new_tokens)[0],
        jit_compile=True,
    )
    beam = tf.function(
        lambda s: beam_search(model, s, bos, eos, max_length=new_tokens, beam_size=4)[0],
        jit_compile=True,
    )
    return {"greedy": greedy, "beam4": beam}


def time_alternately(functions, batches, rounds):
    """Median seconds of each function over all `batches`, timed in turn round by round
    (fair on a noisy machine), and each function's outputs, one array per batch."""
    outputs = {name: [np.asarray(fn(b)) for b in batches] for name, fn in functions.items()}
    seconds = {name: [] for name in functions}
    for _ in range(rounds):
        for name, fn in functions.items():
            start = time.perf_counter()
            for batch in batches:
                np.asarray(fn(batch))
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}, outputs


class Batch(NamedTuple):
    """One batch of a comparison: source ids `(B, S)` and, for a trained run, target
    prefixes `(B, P)` and phrases to meet `(B, C, T)` (0-padded), or None."""

    source_ids: object
    prefix_ids: object = None
    constraint_ids: object = None


def run_batches(run_dir, batch_size=64, seed=0):
    """`(model, batches, max_length, bos, eos, continues_word)` for a trained run's test
    split: its sources tokenized as `Translator` does, sorted by length, in `Batch`es,
    all padded to one width. Each sentence's prefix is the first two pieces of its reference,
    and its phrases up to two reference words of three letters or more, chosen at random
    (whether the output would hold them or not)."""
    config, model, source, target = load_run(run_dir)
    split = corpus_split(config["data"], config["data"]["test_split"])
    order = sorted(range(len(split.sources)), key=lambda i: len(split.sources[i]))
    translator = Translator(model, source, target)
    rng = np.random.default_rng(seed)
    phrases = []
    for i in order:
        words = sorted(set(re.findall(r"\w{3,}", split.targets[i])))
        rng.shuffle(words)
        phrases.append((words[:2] + ["", ""])[:2])
    # One width for every batch, so that each search compiles once (twice with the last).
    source_ids = translator.source_ids([split.sources[i] for i in order]).numpy()  # (N, S)
    prefix_ids = target.tokenize([split.targets[i] for i in order])[:, :2].to_tensor().numpy()
    pieces = target.tokenize(tf.reshape(tf.constant(phrases), [-1])).to_tensor()  # (N*2, T)
    constraint_ids = tf.reshape(pieces, [len(order), 2, -1]).numpy()  # (N, 2, T)
    columns = (source_ids, prefix_ids, constraint_ids)
    batches = [
        Batch(*(ids[first : first + batch_size] for ids in columns))
        for first in range(0, len(order), batch_size)
    ]
    max_length = config["decode"]["max_length"]
    return model, batches, max_length, target.bos_id, target.eos_id, target.continues_word


def searches_of(module, model, settings):
    """The searches a comparison times, each `Batch -> token ids` in one XLA-compiled
    `tf.function`, made from `module`'s public search functions (whose keyword
    arguments have not changed) so that two versions of them run the same calls.

    `settings` holds `bos`, `eos` and `max_length`, and for a trained run
    `continues_word`; without it, only greedy and beam 4 (the untrained model's
    EOS is never written, so prefixes and phrases would not end)."""
    bos, eos, n = settings["bos"], settings["eos"], settings["max_length"]
    calls = {
        "greedy": lambda b: module.greedy_search(model, b.source_ids, bos, eos, max_length=n),
        "beam4": lambda b: module.beam_search(
            model, b.source_ids, bos, eos, max_length=n, beam_size=4
        ),
    }
    if "continues_word" in settings:
        phrases = {"continues_word": settings["continues_word"]}
        calls.update(
            {
                "beam4_nbest2": lambda b: module.beam_search(
                    model, b.source_ids, bos, eos, max_length=n, beam_size=4, n_best=2
                ),
                "greedy_prefix": lambda b: module.greedy_search(
                    model, b.source_ids, bos, eos, max_length=n, prefix_ids=b.prefix_ids
                ),
                "beam4_prefix": lambda b: module.beam_search(
                    model, b.source_ids, bos, eos, n, 4, prefix_ids=b.prefix_ids
                ),
                "greedy_constrained": lambda b: module.greedy_search(
                    model, b.source_ids, bos, eos, n, constraint_ids=b.constraint_ids, **phrases
                ),
                "beam4_constrained": lambda b: module.beam_search(
                    model, b.source_ids, bos, eos, n, 4, constraint_ids=b.constraint_ids, **phrases
                ),
                "sample_seed": lambda b: module.sample(
                    model, b.source_ids, bos, eos, n, temperature=0.8, top_p=0.9, seed=7
                ),
            }
        )
    return {
        name: tf.function(lambda b, call=call: call(b)[0], jit_compile=True)
        for name, call in calls.items()
    }


def compare_with_baseline(revision, model, batches, rounds, settings):
    """`(speed now / then per search, sentences whose outputs differ per search, what a
    beam-4 sentence costs now in greedy sentences)` of this checkout's searches against
    those at `revision`, same model and inputs (`searches_of`)."""
    old, adapt = searches_at(revision)
    functions = {}
    for label, module, decoded in [("now", inference, model), (revision, old, adapt(model))]:
        for name, search in searches_of(module, decoded, settings).items():
            functions[f"{name} {label}"] = search
    seconds, outputs = time_alternately(functions, batches, rounds)
    ratios, differ = {}, {}
    beam4_cost = seconds["beam4 now"] / seconds["greedy now"]
    print(f"beam 4 costs {beam4_cost:.2f} greedy sentences now")
    for search in searches_of(inference, model, settings):
        now_s, then_s = seconds[f"{search} now"], seconds[f"{search} {revision}"]
        ratios[search] = round(then_s / now_s, 3)
        now, then = (
            np.concatenate([o.reshape(len(o), -1) for o in outputs[f"{search} {v}"]])
            for v in ("now", revision)
        )
        differ[search] = int((now != then).any(axis=1).sum())
        print(
            f"{search:18s} now {now_s:.3f} s, at {revision} {then_s:.3f} s: speed now / then "
            f"{then_s / now_s:.3f}; outputs differ on {differ[search]} of {len(now)} sentences"
        )
    for search in ("greedy", "beam4"):
        if f"{search}_constrained" in ratios:
            cost = {
                v: seconds[f"{search}_constrained {v}"] / seconds[f"{search} {v}"]
                for v in ("now", revision)
            }
            ratios[f"{search}_constrained_cost"] = {v: round(c, 2) for v, c in cost.items()}
            print(
                f"{search} with phrases costs {cost['now']:.2f}x the free search's time now, "
                f"{cost[revision]:.2f}x at {revision}"
            )
    return ratios, differ, round(beam4_cost, 2)


def compare_with_ctranslate2(run_dir, split, checkpoint, rounds, threads, patience=None):
    """Sentences/s, target tokens/s and agreement of the package and CTranslate2 on a run."""
    from keras_transformer import run
    from keras_transformer.export import CTranslate2Translator, export_ctranslate2
    from keras_transformer.inference import translate_lines

    (greedy, beam), config = run.translators(run_dir, checkpoint, [1, 4])
    split = split or config["data"]["test_split"]
    sources = corpus_split(config["data"], split).sources
    engines = {
        "package greedy": lambda s: translate_lines(greedy, s, 64),
        "package beam4": lambda s: translate_lines(beam, s, 64),
    }
    if patience is not None:
        stops_sooner = beam.copy(patience=patience)
        engines["package beam4 patience"] = lambda s: translate_lines(stops_sooner, s, 64)
    folder = tempfile.mkdtemp(prefix="ct2_")
    for weights in ("float32", "int8"):
        directory = os.path.join(folder, weights)
        export_ctranslate2(beam, directory, quantization=None if weights == "float32" else weights)
        for size, name in ((1, "greedy"), (4, "beam4")):
            engine = CTranslate2Translator(
                directory, beam_size=size, intra_threads=threads, patience=patience
            )
            engines[f"ct2 {weights} {name}"] = lambda s, e=engine: e(s, 64)
    outputs = {name: translate(sources) for name, translate in engines.items()}  # warm-up
    seconds = {name: [] for name in engines}
    for _ in range(rounds):
        for name, translate in engines.items():
            start = time.perf_counter()
            translate(sources)
            seconds[name].append(time.perf_counter() - start)
    result = {
        "run_dir": run_dir,
        "split": split,
        "sentences": len(sources),
        "rounds": rounds,
        "patience": engine.patience,
    }
    print(
        f"{split}: {len(sources)} sentences, CTranslate2 with {threads} thread(s) "
        f"and patience {engine.patience}"
    )
    for name, output in outputs.items():
        rate = len(sources) / statistics.median(seconds[name])
        tokens = int(greedy.target_tokenizer.tokenize(tf.constant(output)).flat_values.shape[0])
        search = "beam4" if "beam4" in name else "greedy"
        reference = outputs[f"package {search}"]  # the package's exact search
        same = np.mean([a == b for a, b in zip(output, reference, strict=True)])
        tokens_s = tokens * rate / len(sources)
        print(f"{name:20s} {rate:8.1f} sentences/s {tokens_s:9.0f} tokens/s, same {same:.1%}")
        key = name.replace(" ", "_")
        result.update({f"{key}_sent_s": round(rate, 2), f"{key}_same": round(float(same), 4)})
    for search, ours in [("greedy", "greedy"), ("beam4", "beam4"), ("beam4", "beam4_patience")]:
        if f"package_{ours}_sent_s" in result:
            ratio = result[f"package_{ours}_sent_s"] / result[f"ct2_int8_{search}_sent_s"]
            result[f"{ours}_over_ct2_int8"] = round(ratio, 3)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-length", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--baseline", help="a git revision whose searches to compare with")
    parser.add_argument("--run-dir", help="decode this trained run (see above)")
    parser.add_argument("--split", help="with --run-dir alone: default the run's test split")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--ct2-threads", type=int, default=1, help="CTranslate2 intra_threads")
    parser.add_argument(
        "--patience",
        type=float,
        help="with --run-dir: beam 4 of both engines stops once 4 * P hypotheses have ended",
    )
    args = parser.parse_args()
    if args.run_dir and not args.baseline:
        result = compare_with_ctranslate2(
            args.run_dir, args.split, args.checkpoint, args.rounds, args.ct2_threads, args.patience
        )
        print(json.dumps(result))
        return

    keras.utils.set_random_seed(0)
    vocab = 8000
    never = -1  # an EOS id no search can produce
    model = kt.Transformer(4, 128, 8, 512, vocab, vocab)
    rng = np.random.default_rng(0)
    source_ids = rng.integers(4, vocab, (args.batch, args.source_length)).astype("int32")
    model((source_ids[:, :2], source_ids[:, :2]))

    n = args.new_tokens
    if args.baseline:
        if args.run_dir:
            run_model, batches, max_length, bos, eos, continues_word = run_batches(args.run_dir)
            settings = {"bos": bos, "eos": eos, "max_length": max_length}
            settings["continues_word"] = continues_word
            ratios, differ, beam4_cost = compare_with_baseline(
                args.baseline, run_model, batches, args.rounds, settings
            )
        else:
            settings = {"bos": BOS, "eos": never, "max_length": n}
            ratios, differ, beam4_cost = compare_with_baseline(
                args.baseline, model, [Batch(source_ids)], args.rounds, settings
            )
        print(
            json.dumps(
                {
                    "baseline": args.baseline,
                    "run_dir": args.run_dir,
                    "speed_now_over_then": ratios,
                    "beam4_cost_now": beam4_cost,
                    "sentences_differing": differ,
                }
            )
        )
        return

    def greedy(s):
        return greedy_search(model, s, BOS, never, max_length=n)[0]

    cached = tf.function(greedy, jit_compile=True)
    cached_no_xla = tf.function(greedy, jit_compile=False)
    beam = tf.function(
        lambda s: beam_search(model, s, BOS, never, max_length=n, beam_size=4)[0],
        jit_compile=True,
    )
    uncached = tf.function(lambda s: uncached_greedy(model, s, n))

    cached_ids = cached(source_ids).numpy()
    uncached_ids = uncached(source_ids).numpy()
    agree = float(np.mean(cached_ids == uncached_ids))

    seconds = {
        "cached": time_call(cached, source_ids, args.rounds),
        "cached_no_xla": time_call(cached_no_xla, source_ids, args.rounds),
        "uncached": time_call(uncached, source_ids, args.rounds),
        "beam4": time_call(beam, source_ids, args.rounds),
    }
    rows4 = np.repeat(source_ids, 4, axis=0)  # as many rows as beam 4 decodes
    rows4_cost = time_call(cached, rows4, args.rounds) / seconds["cached"]
    batch1_ms = 1000 * time_call(cached, source_ids[:1], args.rounds)
    kerashub = kerashub_rate(source_ids, n, args.rounds)
    rate = {name: args.batch / s for name, s in seconds.items()}
    for name in seconds:
        print(f"{name:13s} {seconds[name]:7.3f} s per batch  {rate[name]:8.2f} sentences/s")
    print(f"cached/uncached speedup {rate['cached'] / rate['uncached']:.1f}x")
    print(f"beam 4 costs {rate['cached'] / rate['beam4']:.2f} greedy sentences")
    print(f"greedy search over 4x the rows costs {rows4_cost:.2f} greedy sentences")
    print(f"batch 1, cached greedy: {batch1_ms:.1f} ms")
    if kerashub is not None:
        print(f"keras-hub cached greedy {kerashub[0]:8.2f} sentences/s", end="; ")
        print(f"package / keras-hub {rate['cached'] / kerashub[0]:.2f}x", end="; ")
        print(f"its cached and uncached loops agree on {kerashub[1]:.4f} of the tokens")
    ct2 = ctranslate2_rates(model, source_ids, n, args.rounds, args.ct2_threads)
    for name, value in ct2.items():
        unit = "ms" if name.endswith("_ms") else "sentences/s"
        print(f"{name:22s} {value:8.2f} {unit}")
    print(f"cached and uncached greedy agree on {agree:.4f} of the tokens")
    print(
        json.dumps(
            {
                "cached_sent_s": round(rate["cached"], 3),
                "cached_no_xla_sent_s": round(rate["cached_no_xla"], 3),
                "uncached_sent_s": round(rate["uncached"], 3),
                "beam4_sent_s": round(rate["beam4"], 3),
                "beam4_cost": round(rate["cached"] / rate["beam4"], 2),
                "rows4_cost": round(rows4_cost, 2),
                "kerashub_sent_s": None if kerashub is None else round(kerashub[0], 3),
                "batch1_ms": round(batch1_ms, 2),
                **{
                    (k if k.endswith("_ms") else f"{k}_sent_s"): round(v, 3) for k, v in ct2.items()
                },
                "speedup": round(rate["cached"] / rate["uncached"], 2),
                "speedup_no_xla": round(rate["cached_no_xla"] / rate["uncached"], 2),
                "token_agreement": agree,
                "batch": args.batch,
                "source_length": args.source_length,
                "new_tokens": n,
                "ct2_threads": args.ct2_threads,
            }
        )
    )


if __name__ == "__main__":
    main()
