"""The README's main job, run as the README writes it, with floors on what it prints.

The commands are read from the README's "Set up and run" block, so the README
cannot drift from what is tested; they run once a session in a temporary
directory with this environment's `keras-transformer` (the `main_job` fixture,
whose run the documentation's examples use too), started in the background as
soon as the tests are collected.
"""

import json
import os
import re

from conftest import REPO
from scripts import run_script


def test_readme_main_job(main_job):
    directory, outputs = main_job
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

    assert (directory / "saved_models" / "numbers_de_en" / "1" / "saved_model.pb").is_file()
    assert len(translate.stdout.splitlines()) == 3

    # Sentence by sentence, beam 4 finds outputs at least as good as greedy's
    # under its own objective, rescored by a teacher-forced pass.
    compared = benchmark(directory, "beam_vs_greedy.py")
    figures = json.loads(compared.splitlines()[-1])
    assert figures["beam_at_least_greedy"] >= 0.99, compared
    # Where beam search loses, a plain search by the same rules finds the same output.
    assert figures["reference_agrees"] == figures["beam_worse"], compared

    # Every magnitude: the numbers below 100 (all trained on), and each digit count
    # of the test split (never seen).
    # The test split's translations are the ones `evaluate` wrote.
    by_digits = benchmark(directory, "numbers_by_digits.py", "--from-evaluate")
    for search in json.loads(by_digits.splitlines()[-1]).values():
        assert search["small"] >= 0.97, by_digits
        assert min(search["by_digits"].values()) >= 0.85, by_digits
    print(evaluate.stdout, translate.stdout, compared, by_digits, sep="\n")


def benchmark(directory, script, *options):
    """What `python benchmarks/<script> --run-dir runs/numbers_de_en` prints in the main
    job's directory, run in this process (`scripts.run_script`)."""
    path = os.path.join(REPO, "benchmarks", script)
    status, printed = run_script(
        path, "--run-dir", "runs/numbers_de_en", *options, directory=directory
    )
    assert status == 0, printed[-3000:]
    return printed
