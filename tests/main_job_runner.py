"""The README's main job, run as a user runs it.

The commands are read from the README's "Set up and run" block and run in a
directory of their own, with this environment's `keras-transformer`; `main`
writes what each printed to `outputs.json` there, which `outputs` reads back.
"""

import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUTS = "outputs.json"  # one {"args", "returncode", "stdout", "stderr"} per command


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


def run_command(command, cwd):
    """A shell command with this environment's `.venv/bin`, as a user runs it: its
    `CompletedProcess`, whatever its exit status."""
    command = command.replace(".venv/bin/", os.path.dirname(sys.executable) + os.sep)
    # The user's environment: without the TF_CPP_MIN_LOG_LEVEL the test session sets.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600
    )


def outputs(directory):
    """The `CompletedProcess`es `main` wrote in `directory`; every command succeeded."""
    path = directory / OUTPUTS
    done = [subprocess.CompletedProcess(**output) for output in json.loads(path.read_text())]
    for output in done:
        assert output.returncode == 0, f"{output.args}\n{output.stderr[-3000:]}"
    return done


def main(directory):
    """Runs the commands in order until one fails; writes their outputs at the end."""
    results = []
    try:
        for command in readme_main_job():
            done = run_command(command, directory)
            results.append(vars(done))
            if done.returncode != 0:
                break
    except Exception as error:  # a timeout, or a README the block cannot be read from
        failure = {"args": "main_job_runner.py", "returncode": 1, "stderr": repr(error)}
        results.append({**failure, "stdout": ""})
    with open(os.path.join(directory, OUTPUTS), "w", encoding="utf-8") as f:
        json.dump(results, f)
