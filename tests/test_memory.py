"""glibc's malloc kept from returning freed memory (training/memory.py).

Measured as the kernel sees it: the page faults of allocating, touching and
freeing a 64 MB array again and again. With glibc's defaults each new array
is a fresh mapping whose pages fault in again; with `keep_freed_memory` the
freed memory is reused and nothing faults. Each case runs in a process of its
own, since the settings are the process's; the JAX backend's case is checked in
tests/test_backends.py with the same probe.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

MEMORY_MODULE = os.path.join(
    os.path.dirname(__file__), os.pardir, "keras_transformer", "training", "memory.py"
)

# Page faults of one 64 MB array allocated, touched and freed, after a first one.
REUSE_FAULTS = textwrap.dedent(
    """
    import resource

    import numpy as np


    def reuse_faults(cycles=8):
        np.ones(64 * 2**17)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(cycles):
            np.ones(64 * 2**17)
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / cycles
    """
)

# Loads memory.py by its path: the probe stays free of TensorFlow's allocations.
PLAIN_SIDE = REUSE_FAULTS + textwrap.dedent(
    """
    import importlib.util, json, sys

    spec = importlib.util.spec_from_file_location("memory", sys.argv[1])
    memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(memory)
    taken = memory.keep_freed_memory() if sys.argv[2] == "keep" else None
    print(json.dumps({"taken": taken, "faults": reuse_faults()}))
    """
)


def probe(mode):
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_SIDE, MEMORY_MODULE, mode],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")},
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_memory_is_reused_instead_of_faulted_in_again():
    default, kept = probe("default"), probe("keep")
    assert default["faults"] >= 30, default  # at least one fault per 2 MB huge page
    assert kept["taken"] is True
    assert kept["faults"] < default["faults"] / 10, (kept, default)


def test_only_the_jax_backend_without_malloc_variables_changes_malloc(monkeypatch):
    from keras_transformer.training.memory import keep_freed_memory_for_jax

    for name in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    assert keep_freed_memory_for_jax("tensorflow") is False
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert keep_freed_memory_for_jax("jax") is False
