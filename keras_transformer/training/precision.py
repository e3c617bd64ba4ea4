"""Whether mixed bfloat16 pays on this machine's CPU.

A CPU computes bfloat16 matrix products fast only with bfloat16 instructions
(x86: `avx512_bf16` or `amx_bf16`; Arm: `bf16`). Without them oneDNN emulates
bfloat16: on an AMD EPYC with `avx512_bf16`, `benchmarks/train_throughput.py`
trained 1.17x faster under `mixed_bfloat16` than in float32, and 0.48x as fast
with oneDNN kept to the instructions before them
(`ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI`). `train` warns before such a run; with
a GPU there is nothing to check.
"""

CPUINFO = "/proc/cpuinfo"
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(path=CPUINFO):
    """The feature flags the CPU reports, or None where they are unknown.

    They are unknown where `path` cannot be read (not Linux) or has no flag line
    (RISC-V's `isa`, s390 and some containers).

    Args:
        path: a file in the format of Linux's `/proc/cpuinfo`: `flags` lines on
            x86, `Features` lines on Arm.

    Returns:
        A frozenset of flag names, e.g. `{"avx2", "avx512f", "avx512_bf16", ...}`,
        or None.

    Examples:
        ```python
        "avx512_bf16" in (cpu_flags() or ())
        ```
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    flag_lines = [
        value.split()
        for name, _, value in (line.partition(":") for line in lines)
        if name.strip() in ("flags", "Features")
    ]
    if not flag_lines:
        return None
    return frozenset(flag for line in flag_lines for flag in line)


def slow_bfloat16_warning(policy, gpus, flags):
    """The warning to give before training under `policy`, or None.

    Args:
        policy: the Keras dtype policy name the run trains under.
        gpus: the GPUs TensorFlow sees (a list; any GPU computes bfloat16 itself).
        flags: the CPU's flags from `cpu_flags`, or None where unknown.

    Returns:
        A sentence naming the missing instructions and the fix, when the policy is
        `mixed_bfloat16`, there is no GPU, and the CPU's flags are known and have
        no bfloat16 instruction; else None.
    """
    if policy != "mixed_bfloat16" or gpus or flags is None or flags & BFLOAT16_FLAGS:
        return None
    return (
        "train.mixed_precision=bfloat16 on a CPU without bfloat16 instructions "
        f"(none of {', '.join(sorted(BFLOAT16_FLAGS))} in {CPUINFO}): bfloat16 is emulated "
        "and a training step can take twice as long as in float32; "
        "--set train.mixed_precision=false trains in float32."
    )
