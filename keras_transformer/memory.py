"""glibc's malloc kept from handing freed memory back to the operating system.

Under Keras' JAX backend a training step allocates and frees buffers of many
megabytes. glibc serves each of them with a fresh `mmap` (or trims its heap
when they are freed), so the next step faults every page in again: on a 2-core
CPU a third of the step went to the kernel (see "Training on JAX" in
docs/benchmarks.md). `keep_freed_memory` tells glibc, through `mallopt`, to
serve large blocks from its heap, to keep freed memory for reuse and to use one
arena for all threads; the process then holds on to its peak memory, as
TensorFlow's own allocator does.

`Transformer.fit` calls it when training starts under the JAX backend, unless
one of glibc's `MALLOC_ARENA_MAX`, `MALLOC_MMAP_MAX_`, `MALLOC_TRIM_THRESHOLD_`
variables is set: then the environment's settings are the ones in force.
Importing the package changes nothing. A training loop of your own calls
`keep_freed_memory()` itself.
"""

import ctypes
import ctypes.util
import os

# mallopt's parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8

# mallopt takes an int: the largest trim threshold it can set (2 GiB).
LARGEST_TRIM_THRESHOLD = 2**31 - 1

MALLOC_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory():
    """Keeps glibc's malloc from returning freed memory to the operating system.

    Sets one arena for all threads, no `mmap` for large blocks and a trim
    threshold of 2 GiB. Does nothing where the C library is not glibc.

    Returns:
        True if glibc took the three settings, False where there is no glibc.

    Example:

        from keras_transformer.memory import keep_freed_memory
        keep_freed_memory()  # before a long JAX training on a CPU
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return False
    settings = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, LARGEST_TRIM_THRESHOLD))
    return all(libc.mallopt(parameter, value) == 1 for parameter, value in settings)


def keep_freed_memory_for_jax(backend):
    """Calls `keep_freed_memory` when `backend` is "jax" and the environment sets
    none of glibc's malloc variables; returns whether it did."""
    if backend != "jax" or any(name in os.environ for name in MALLOC_VARIABLES):
        return False
    return keep_freed_memory()
