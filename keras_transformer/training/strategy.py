"""Choosing the `tf.distribute` strategy a run trains under, and this process's part in it.

`auto` reads the standard `TF_CONFIG` cluster spec: when it names more than
one task, every task runs the same `train` command under
`MultiWorkerMirroredStrategy` (synchronous data parallelism: each worker
computes the gradient of its own batches, and an all-reduce sums them before
every update). The first worker, or the task of type `chief`, is the chief: it
alone writes the run directory.
"""

import hashlib
import json
import os
import socket
import tempfile
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.errors import ArgumentError, RunError

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker")
"""The values of the config's `train.strategy`."""


class WorkerRole(NamedTuple):
    """This process's place in its cluster.

    Attributes:
        is_chief: whether it writes the run directory.
        index: its rank among the cluster's tasks (the chief is 0).
        count: tasks in the cluster (1 without a cluster).
    """

    is_chief: bool
    index: int
    count: int


def cluster_tasks():
    """`[(task_type, index), ...]` of the training tasks `TF_CONFIG` names, chief first."""
    spec = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster = spec.get("cluster", {})
    return [(kind, i) for kind in ("chief", "worker") for i in range(len(cluster.get(kind, [])))]


def strategy_kind(kind, devices):
    """The strategy `auto` stands for, checked against `devices`."""
    if kind not in STRATEGIES:
        raise ArgumentError(f"`kind` must be one of {STRATEGIES}. Received: {kind!r}")
    if kind == "auto":
        if len(cluster_tasks()) > 1:
            return "multi_worker"
        return "mirrored" if devices > 1 else "one_device"
    if kind == "one_device" and devices > 1:
        raise RunError(
            f"strategy one_device trains on one device, but devices={devices}; "
            "use strategy mirrored (or auto) for several."
        )
    if kind == "multi_worker" and not cluster_tasks():
        raise RunError(
            "strategy multi_worker needs the cluster in the TF_CONFIG environment "
            'variable, e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}.'
        )
    return kind


def distribution_strategy(devices=1, kind="auto"):
    """The strategy of `kind`: one device, `MirroredStrategy`, or `MultiWorkerMirroredStrategy`.

    Call it first in a process: splitting the CPU into logical devices and
    joining a cluster must both happen before TensorFlow starts.

    Args:
        devices: local replicas for `mirrored`; with fewer GPUs than that,
            the CPU is split into `devices` logical devices.
        kind: `"auto"` (`multi_worker` when `TF_CONFIG` names more than one
            task, else `mirrored` when `devices > 1`, else `one_device`),
            `"one_device"`, `"mirrored"` or `"multi_worker"` (every local GPU,
            or the CPU, of each worker in `TF_CONFIG`).

    Raises:
        RuntimeError: if TensorFlow has already initialized its devices, or
            `kind` contradicts `devices` or the environment.

    Examples:
        ```python
        with distribution_strategy(2).scope():
            model = Transformer(...)
        ```
    """
    kind = strategy_kind(kind, devices)
    if kind == "multi_worker":
        if devices > 1:
            raise RunError(
                "strategy multi_worker replicates over each worker's GPUs (or its "
                f"CPU); leave devices at 1. Received: devices={devices}"
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if devices <= 1:
        return tf.distribute.get_strategy()
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= devices:
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(devices)])
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * devices
        )
    except RuntimeError:
        raise RunError(
            "devices > 1 on CPU needs the logical devices set before TensorFlow "
            "starts; run it from a fresh process (the CLI does)."
        ) from None
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])


def worker_role(strategy):
    """This process's `WorkerRole` under `strategy`; the chief of one when not multi-worker."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return WorkerRole(True, 0, 1)
    resolver = strategy.cluster_resolver
    tasks = cluster_tasks()
    index = tasks.index((resolver.task_type, resolver.task_id))
    return WorkerRole(index == 0, index, len(tasks))


def localhost_tf_configs(count):
    """`TF_CONFIG` values for a cluster of `count` workers on this machine, one per worker.

    Each worker gets a free port. For trying multi-worker training on one
    machine, and for its tests and benchmark.

    Examples:
        ```python
        for index, tf_config in enumerate(localhost_tf_configs(2)):
            subprocess.Popen(["keras-transformer", "train", ...], env={"TF_CONFIG": tf_config})
        ```
    """
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    cluster = {"worker": [f"localhost:{s.getsockname()[1]}" for s in sockets]}
    for s in sockets:
        s.close()
    return [
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        for index in range(count)
    ]


def worker_directory(run_dir, role):
    """Where a worker that is not the chief writes its run: a directory of its own.

    It is the same path every time this run is trained on this machine, so a
    restarted worker finds its backup there, and it lies outside `run_dir`
    (in the system's temporary directory), so a run directory shared with the
    chief holds only the chief's files.
    """
    key = hashlib.sha1(os.path.abspath(run_dir).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"keras-transformer-{key}-worker-{role.index}")
