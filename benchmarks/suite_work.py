"""What the test suite's processes spend their time on, by test module: the graph work that
is neither a test's assertions nor its model's arithmetic.

Runs pytest (with the arguments given after `--`) with this file as a plugin in every
worker. The plugin times, per test module, each call of:

- `BucketedSearch._search`: the Python trace of a `Translator`'s search (one per new
  translator, option set or export signature; running a traced search is not counted);
- `keras.models.load_model`, `tf.saved_model.save` and `tf.saved_model.load`;
- `tf.lite.TFLiteConverter.convert` (a LiteRT export's conversion).

Then prints the totals by kind and the largest (module, kind) rows. The times are wall
times inside the workers, so they grow when the two workers share the cores; their
counts say what a change of the tests removed.

    python benchmarks/suite_work.py [--top 30] [-- tests/test_export.py -n 0]

The last line is JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

OUTPUT = "SUITE_WORK_DIR"  # where each worker writes its tallies


def wrap(owner, name, kind, tallies, current):
    """Replaces `owner.name` by a function that adds its calls' time to `tallies`."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            tally = tallies[f"{current[0]}|{kind}"]
            tally[0] += 1
            tally[1] += time.perf_counter() - start

    setattr(owner, name, timed)


def pytest_configure(config):
    """Installs the timers in this pytest process (a worker or the only process)."""
    if OUTPUT not in os.environ:
        return
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller: its workers run the tests
    import atexit

    import keras
    import tensorflow as tf

    from keras_transformer.inference.bucketed_search import BucketedSearch

    tallies, current = defaultdict(lambda: [0, 0.0]), ["(collection)"]
    wrap(BucketedSearch, "_search", "search trace", tallies, current)
    wrap(keras.models, "load_model", "load_model", tallies, current)
    wrap(tf.saved_model, "save", "SavedModel save", tallies, current)
    wrap(tf.saved_model, "load", "SavedModel load", tallies, current)
    wrap(tf.lite.TFLiteConverter, "convert", "LiteRT convert", tallies, current)

    class Module:
        def pytest_runtest_logstart(self, nodeid, location):
            current[0] = nodeid.split("::")[0]

    config.pluginmanager.register(Module())

    def write():
        path = os.path.join(os.environ[OUTPUT], f"{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump(dict(tallies), f)

    atexit.register(write)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30, help="(module, kind) rows to print")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as output:
        env = dict(os.environ, **{OUTPUT: output})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-p", "suite_work", *args.pytest_args]
        code = subprocess.call(command, env=env)
        totals, kinds = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
        for name in os.listdir(output):
            with open(os.path.join(output, name)) as f:
                for key, (count, seconds) in json.load(f).items():
                    module, kind = key.split("|")
                    for tally in (totals[(module, kind)], kinds[kind]):
                        tally[0] += count
                        tally[1] += seconds
    print(f"\n{'kind':16} {'calls':>6} {'seconds':>8}")
    for kind, (count, seconds) in sorted(kinds.items(), key=lambda item: -item[1][1]):
        print(f"{kind:16} {count:6d} {seconds:8.1f}")
    print(f"\n{'seconds':>8} {'calls':>6}  {'kind':16} module")
    rows = sorted(totals.items(), key=lambda item: -item[1][1])[: args.top]
    for (module, kind), (count, seconds) in rows:
        print(f"{seconds:8.1f} {count:6d}  {kind:16} {module}")
    print(json.dumps({"exit": code, "kinds": {k: [c, round(s, 1)] for k, (c, s) in kinds.items()}}))
    return code


if __name__ == "__main__":
    sys.exit(main())
