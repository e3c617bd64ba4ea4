"""glibc's malloc kept from returning freed memory (keras_transformer/memory.py).

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

MEMORY_MODULE = os.path.join(os.path.dirname(__file__), os.pardir, "keras_transformer", "memory.py")

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


# Importing the package under JAX with `keras_transformer.memory` replaced by a recorder.
IMPORT_UNDER_JAX = textwrap.dedent(
    """
    import json, sys, types

    calls = []
    recorder = types.ModuleType("keras_transformer.memory")
    recorder.MALLOC_VARIABLES = ()
    recorder.keep_freed_memory = lambda: calls.append("keep_freed_memory")
    recorder.keep_freed_memory_for_jax = lambda backend: calls.append(backend)
    sys.modules["keras_transformer.memory"] = recorder
    import keras
    import keras_transformer

    print(json.dumps({"backend": keras.backend.backend(), "calls": calls}))
    """
)


def test_fit_sets_malloc_for_its_backend_and_importing_the_package_does_not(monkeypatch):
    """`Transformer.fit` asks `keep_freed_memory_for_jax` with the backend it trains on (under
    TensorFlow that changes nothing, as the test above shows); importing the package under
    JAX asks nothing."""
    import keras
    import numpy as np

    import keras_transformer as kt
    from keras_transformer.models import train_step

    backends = []
    monkeypatch.setattr(train_step, "keep_freed_memory_for_jax", backends.append)
    model = kt.Transformer(1, 16, 2, 32, 20, 20)
    model.compile(optimizer="adam", loss=kt.MaskedSparseCategoricalCrossentropy())
    ids = np.array([[5, 6, 2], [7, 2, 0]], "int32")
    model.fit((ids, ids), ids, epochs=1, verbose=0)
    assert backends == [keras.backend.backend()]
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_UNDER_JAX],
        capture_output=True,
        text=True,
        env={**os.environ, "KERAS_BACKEND": "jax"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"backend": "jax", "calls": []}
