"""Where the test suite's CPU time goes, process by process.

Runs a command (`python -m pytest` unless one is given after `--`, such as `bash .ci/run`)
with a `sitecustomize.py` on `PYTHONPATH` that makes every Python process of the run write
its CPU time (user + system, `resource.getrusage` at exit), its wall time, its command line
and the test that started it: pip and venv, the pytest workers, and each command or process
a test starts (the README main job's commands among them). Then prints the processes by CPU
time and the totals by kind. `--durations` says where the time goes per test, but in wall
time and without what a test's processes used.

    python benchmarks/suite_processes.py [--top 25] [-- bash .ci/run]

A process killed by a signal (the tests that kill training runs) writes nothing. The last
line is JSON.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
from main_job_runner import readme_main_job  # noqa: E402  (the README's main job)

HOOK = """
import atexit, json, os, resource, sys, time

_START = time.time()


def _record():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {
        "argv": " ".join(sys.argv)[:120],
        "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "wall_s": round(time.time() - _START, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }
    with open(os.environ["SUITE_PROCESSES_LOG"], "a") as f:
        f.write(json.dumps(record) + "\\n")


atexit.register(_record)
"""


def main_job_commands():
    """Each README main job command without its program (`train --run-dir runs/...`)."""
    return [" ".join(shlex.split(command)[1:4]) for command in readme_main_job()]


def kind(record, main_job):
    """`install` (venv and pip), `main job` (one of the `main_job` commands, which run in the
    background while other tests run), `started by a test`, or `pytest` (the workers and
    their leader)."""
    if any(command in record["argv"] for command in main_job):
        return "main job"
    if record["test"]:
        return "started by a test"
    return "pytest" if record["worker"] or "pytest" in record["argv"] else "install"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="processes to list")
    parser.add_argument("command", nargs="*", help="the command to run, after --")
    args = parser.parse_args()
    hook_dir = tempfile.mkdtemp(prefix="suite_processes_")
    with open(os.path.join(hook_dir, "sitecustomize.py"), "w") as f:
        f.write(HOOK)
    log = os.path.join(hook_dir, "processes.jsonl")
    path = os.pathsep.join(p for p in [hook_dir, os.environ.get("PYTHONPATH", "")] if p)
    env = {**os.environ, "PYTHONPATH": path, "SUITE_PROCESSES_LOG": log}
    done = subprocess.run(args.command or [sys.executable, "-m", "pytest"], env=env)
    with open(log) as f:
        records = [json.loads(line) for line in f]
    totals, main_job = defaultdict(float), main_job_commands()
    for record in records:
        totals[kind(record, main_job)] += record["cpu_s"]
    print(f"\n{'CPU s':>8}{'wall s':>8}  {'worker':7}{'command':60}test")
    for r in sorted(records, key=lambda r: -r["cpu_s"])[: args.top]:
        test = r["test"].removesuffix(" (call)")
        print(f"{r['cpu_s']:8.1f}{r['wall_s']:8.1f}  {r['worker']:7}{r['argv'][:58]:60}{test}")
    print()
    for name, cpu in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"{name:20}{cpu:8.0f} CPU s")
    print(json.dumps({"exit": done.returncode, "cpu_s": dict(totals), "processes": len(records)}))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
