"""The README's main job, run as the README writes it, with floors on what it prints.

The commands are read from the README's "Set up and run" block, so the README
cannot drift from what is tested; they run in a temporary directory with this
environment's `keras-transformer`. About ten minutes on two CPU cores.
"""

import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def readme_main_job():
    """The `keras-transformer` commands of the README's main job, in order."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    block = re.search(r"## Set up and run.*?```bash\n(.*?)```", readme, re.S).group(1)
    chain = block.split("\n\n")[0]  # the first command; the second runs the tests
    chain = " ".join(line.rstrip("\\ ") for line in chain.splitlines() if line[:1] != "#")
    commands = [part.strip() for part in chain.split("&&")]
    assert commands[0].startswith("python3 -m venv .venv") and "pip install" in commands[1]
    return commands[2:]


def run(command, cwd):
    command = command.replace(".venv/bin/", BIN + os.sep)
    # The user's environment: without the TF_CPP_MIN_LOG_LEVEL the test session sets.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    return done


def test_readme_main_job(tmp_path):
    commands = readme_main_job()
    assert [c.split()[1] for c in commands] == ["train", "evaluate", "export", "translate"]
    outputs = [run(command, tmp_path) for command in commands]
    train, evaluate, export, translate = outputs

    for output in outputs:  # a quiet CLI: none of TensorFlow's C++ start-up lines
        assert not re.search(r"^[IWE]0000 ", output.stderr, re.M), output.stderr[:2000]
        assert "cuInit" not in output.stderr and "Traceback" not in output.stderr

    results = [json.loads(line) for line in evaluate.stdout.splitlines() if line[:1] == "{"]
    by_beam = {r["beam_size"]: r for r in results}
    assert sorted(by_beam) == [1, 4], evaluate.stdout
    for result in results:
        assert result["exact_match"] >= 0.90, result
    assert by_beam[4]["exact_match"] >= by_beam[1]["exact_match"] - 0.01, results

    assert (tmp_path / "saved_models" / "numbers_de_en" / "1" / "saved_model.pb").is_file()
    assert len(translate.stdout.splitlines()) == 3

    # Sentence by sentence, beam 4 finds outputs at least as good as greedy's
    # under its own objective, rescored by a teacher-forced pass.
    compared = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "benchmarks", "beam_vs_greedy.py"),
            "--run-dir",
            "runs/numbers_de_en",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    figures = json.loads(compared.stdout.splitlines()[-1])
    assert figures["beam_at_least_greedy"] >= 0.99, compared.stdout
    # Where beam search loses, a plain search by the same rules finds the same output.
    assert figures["reference_agrees"] == figures["beam_worse"], compared.stdout
    print(evaluate.stdout, translate.stdout, compared.stdout, sep="\n")
