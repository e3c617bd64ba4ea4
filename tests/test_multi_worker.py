"""Two worker processes on localhost train one run under `MultiWorkerMirroredStrategy`.

Each worker gets the standard `TF_CONFIG` for a two-worker cluster on free
ports and runs the same `keras-transformer train` command; worker 0 is the
chief. Each worker's temporary directory is its own (`TMPDIR`), so the test
sees what each one leaves behind. The workers accumulate two micro-batches per
update, which Keras' optimizer-level accumulation cannot do under this strategy.
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from test_cli import HERE, metrics_epochs, train_arguments

from keras_transformer.training.strategy import localhost_tf_configs


def test_auto_chooses_by_tf_config_and_devices_and_the_chief_comes_first(monkeypatch):
    from keras_transformer.training.strategy import cluster_tasks, strategy_kind

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert strategy_kind("auto", 1) == "one_device"
    assert strategy_kind("auto", 2) == "mirrored"
    with pytest.raises(RuntimeError, match="multi_worker needs the cluster in the TF_CONFIG"):
        strategy_kind("multi_worker", 1)
    with pytest.raises(RuntimeError, match="one_device trains on one device"):
        strategy_kind("one_device", 2)
    task = {"type": "worker", "index": 0}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": task}))
    assert strategy_kind("auto", 1) == "one_device"  # a cluster of one
    cluster = {"worker": ["a:1", "b:1"], "chief": ["c:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
    assert strategy_kind("auto", 1) == "multi_worker"
    assert cluster_tasks() == [("chief", 0), ("worker", 0), ("worker", 1)]


def start_workers(tmp_path, round_, commands):
    """Starts one process per command, worker i with its TF_CONFIG; output goes to files."""
    workers = []
    tf_configs = localhost_tf_configs(len(commands))
    for index, (command, tf_config) in enumerate(zip(commands, tf_configs, strict=True)):
        temporary = tmp_path / f"tmp-{index}"
        temporary.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "TF_CONFIG": tf_config,
            "TMPDIR": str(temporary),
            "TF_CPP_MIN_LOG_LEVEL": "2",
        }
        log = open(tmp_path / f"worker-{index}.{round_}.log", "w+", encoding="utf-8")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        workers.append((process, log))
    return workers


def output(worker):
    worker[1].seek(0)
    return worker[1].read()


def finish(workers, timeout=600):
    for process, _ in workers:
        process.wait(timeout=timeout)
    return [process.returncode for process, _ in workers]


def train_command(run_dir, *extra):
    arguments = train_arguments(run_dir, "train.epochs=2", *extra)
    return [sys.executable, "-m", "keras_transformer", *arguments]


def killed_command(run_dir, epoch, batch, *extra):
    arguments = train_arguments(run_dir, "train.epochs=2", *extra)
    script = os.path.join(HERE, "interrupted_train.py")
    options = ["--epoch", str(epoch), "--batch", str(batch), "--action", "kill", "--"]
    return [sys.executable, script, *options, *arguments]


def digests(workers):
    return [re.findall(r"weights sha256 ([0-9a-f]{64})", output(w)) for w in workers]


def losses(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def test_a_cluster_restarted_after_a_lost_worker_resumes_and_trains_in_step(tmp_path):
    """Two workers accumulating two micro-batches an update; one is lost (SIGKILL) in
    epoch 2 and the cluster restarted: it resumes from its backups without training
    epoch 1 again, the workers end with the same weights, and only the chief wrote the
    run. Was two tests (`test_two_workers_train_in_step_and_only_the_chief_writes` and
    `test_a_cluster_restarted_after_a_lost_worker_resumes_from_its_backups`), each
    starting clusters of its own."""
    run_dir = tmp_path / "numbers"
    accumulating = "train.gradient_accumulation_steps=2"
    commands = [train_command(run_dir, accumulating), killed_command(run_dir, 2, 2, accumulating)]
    workers = start_workers(tmp_path, 1, commands)
    lost, survivor = workers[1][0], workers[0][0]
    lost.wait(timeout=600)
    assert lost.returncode == -signal.SIGKILL, output(workers[1])[-3000:]
    time.sleep(2)
    if survivor.poll() is None:  # it waits for the lost worker's all-reduce
        survivor.send_signal(signal.SIGKILL)
    survivor.wait(timeout=60)
    assert not (run_dir / "trained.json").exists()
    assert metrics_epochs(run_dir) == ["0"]
    # Only a normal exit removes TensorFlow's AutoGraph scratch files: the killed
    # worker left them, and its own directory, which holds its backup.
    left_by_the_kill = set(os.listdir(tmp_path / "tmp-1"))
    own = {name for name in left_by_the_kill if name.startswith("keras-transformer-")}
    assert len(own) == 1, left_by_the_kill

    restarted = start_workers(tmp_path, 2, [train_command(run_dir, accumulating)] * 2)
    codes = finish(restarted)
    assert codes == [0, 0], [output(w)[-3000:] for w in restarted]
    assert all("each training batch: 2 micro-batches" in output(w) for w in restarted)
    resumed = [re.findall(r"resuming from the backup at step (\d+)", output(w)) for w in restarted]
    assert resumed[0] == resumed[1] and len(resumed[0]) == 1, resumed
    assert metrics_epochs(run_dir) == ["0", "1"]  # epoch 1 was not trained again
    (chief,), (other,) = digests(restarted)
    assert chief == other  # the same weights after the last update

    for name in ["config.json", "model.keras", "trained.json", "metrics.csv", "tokenizers", "logs"]:
        assert (run_dir / name).exists(), name
    assert sorted(os.listdir(run_dir / "checkpoints")) == [
        "epoch-001.weights.h5",
        "epoch-002.weights.h5",
    ]
    assert not (run_dir / "backup").exists()
    # The restarted worker that is not the chief left nothing behind, its own directory
    # included; the killed worker's scratch files stay.
    assert set(os.listdir(tmp_path / "tmp-1")) == left_by_the_kill - own
    first, last = losses(run_dir)
    assert np.isfinite([first, last]).all() and last < first
    shares = [
        re.search(r"of 2: (\d+) of the (\d+) training", output(w)).groups() for w in restarted
    ]
    assert shares[0] == shares[1] and int(shares[0][0]) == int(shares[0][1]) // 2, shares
