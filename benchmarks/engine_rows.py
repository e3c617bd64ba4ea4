"""Timing helpers shared by the benchmarks that set the package's engines beside CTranslate2
(`opus_mt_speed.py` on random OPUS-MT-sized weights, `run_speed.py` on a trained run).

An engine is a pair of callables `(one sentence, batch)`, either of which may be None, named
`{kind}_beam{N}`; CTranslate2's names start with `ct2_{compute type}_`.
"""

import time
from fnmatch import fnmatch

import numpy as np

BEAMS = (1, 4)  # every row is timed greedy and at beam 4
# The run's `Translator`s every benchmark of engines times, by name: `make_translator` options.
TRANSLATORS = {
    "translator": dict(jit_compile=True),
    "translator_no_xla": dict(jit_compile=False),
    "translator_bf16": dict(jit_compile=False, compute_dtype="bfloat16"),
}


def one_at_a_time(translate, sentences):
    """Milliseconds per call (p50), translating each sentence alone (after one warm-up call)."""
    translate(sentences[0])
    times = []
    for sentence in sentences:
        start = time.perf_counter()
        translate(sentence)
        times.append(1000 * (time.perf_counter() - start))
    return float(np.percentile(times, 50))


def per_second(translate_batch, sentences):
    """Sentences a second of one call on the whole batch (after one warm-up call)."""
    translate_batch(sentences)  # warm-up (and compilation)
    start = time.perf_counter()
    translate_batch(sentences)
    return len(sentences) / (time.perf_counter() - start)


def time_engines(engines, sentences):
    """`(latency ms, sentences/s)`: dicts by engine name, of those it has a callable for."""
    latency, throughput = {}, {}
    for name, (one, batch) in engines.items():
        if one is not None:
            latency[name] = one_at_a_time(one, sentences)
        if batch is not None:
            throughput[name] = per_second(batch, sentences)
    return latency, throughput


def print_times(engines, latency, throughput):
    """One line an engine: p50 ms, its ratio to CTranslate2 float32's fastest at that beam,
    and sentences a second of a batch."""
    print(f"\n{'engine':36}{'1 sentence p50 ms':>19}{'x ct2 f32':>11}{'batch sent/s':>14}")
    for name in engines:
        beam = name.rsplit("beam", 1)[1]
        ct2_float32 = min(v for k, v in latency.items() if fnmatch(k, f"ct2_float32_*_beam{beam}"))
        rate = f"{throughput[name]:14.1f}" if name in throughput else f"{'':14}"
        if name in latency:
            print(f"{name:36}{latency[name]:19.1f}{latency[name] / ct2_float32:11.2f}{rate}")
        else:
            print(f"{name:36}{'':30}{rate}")


def fastest_against(latency, throughput, ours="", theirs="ct2_int8"):
    """Per row, `(the package's fastest engine whose name starts with `ours`, its speed over
    the fastest CTranslate2 engine whose name starts with `theirs`)`."""
    rows = {}
    for beam in BEAMS:
        search = "greedy" if beam == 1 else "beam4"
        for row, values, better in [
            (f"{search}_one", latency, min),
            (f"{search}_batch", throughput, max),
        ]:
            at_beam = {k: v for k, v in values.items() if k.endswith(f"beam{beam}")}
            reference = better(v for k, v in at_beam.items() if k.startswith(theirs))
            package = {
                k: v for k, v in at_beam.items() if k.startswith(ours) and not k.startswith("ct2_")
            }
            if not package:
                continue
            name = better(package, key=package.get)
            ratio = reference / package[name] if better is min else package[name] / reference
            rows[row] = (name, round(ratio, 2))
    return rows


def print_rows(rows, title="the package's fastest engine over CTranslate2 int8's fastest"):
    print(f"\n{title} (speed ratio):")
    for row, (name, ratio) in rows.items():
        print(f"  {row:20}{name:36}{ratio:6.2f}x")
