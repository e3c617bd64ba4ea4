"""Loading exported SavedModels as a server would, in a new process: with
`tf.saved_model.load`, and in a TensorFlow 1 session as TF Serving's C++ loader does.

One process serves several exports (`fresh_process`): starting Python and TensorFlow
takes longer than a small export's load and calls.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

SERVER = """
import json, sys
import tensorflow as tf

def session_outputs(path, sentences):
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signature = meta.signature_def["serving_default"]
        feed = {signature.inputs["inputs"].name: sentences}
        out = session.run(signature.outputs["outputs"].name, feed)
    return [t.decode("utf-8") for t in out]

def decoded(value):  # strings that are not UTF-8 travel as hex
    return [bytes.fromhex(h) for h in value["hex"]] if isinstance(value, dict) else value

def signature_answers(path, requests):
    signatures = tf.saved_model.load(path).signatures
    answers = []
    for name, inputs in requests:
        got = signatures[name](**{k: tf.constant(decoded(v)) for k, v in inputs.items()})
        answers.append({k: v.numpy().tolist() for k, v in got.items()})
    return answers

exports = json.load(sys.stdin)
results = [None] * len(exports)
# Token-id exports first: they load before tensorflow_text is imported.
for index in sorted(range(len(exports)), key=lambda i: exports[i]["text"]):
    export = exports[index]
    if export["text"]:
        import tensorflow_text  # registers the tokenizer ops
    result = {}
    if export["sentences"] is not None:  # before this process has loaded it otherwise
        result["session"] = session_outputs(export["path"], export["sentences"])
    result["signatures"] = signature_answers(export["path"], export["requests"])
    if not export["text"]:  # loaded and answered without it
        assert "tensorflow_text" not in sys.modules
    results[index] = result
assert "keras_transformer" not in sys.modules
print(json.dumps(results, default=lambda b: b.decode("utf-8")))
"""


def serving_request(path, requests=(), sentences=None, text=True):
    """One export for `fresh_process`: `requests` is `[(signature, {input: value})]` for
    its signatures (lists, arrays, strings as `str` or `bytes`); `sentences` (optional
    `str`s) go to its `serving_default` in a TensorFlow 1 session; a token-id export
    (`text=False`) is loaded without `tensorflow_text`."""
    requests = [(name, {k: encoded(v) for k, v in inputs.items()}) for name, inputs in requests]
    return {"path": str(path), "requests": requests, "sentences": sentences, "text": text}


def encoded(value):
    """`value` as JSON can hold it: a list, or `{"hex": [...]}` for strings with `bytes`."""
    value = value.tolist() if isinstance(value, np.ndarray) else list(value)
    if any(isinstance(item, bytes) for item in value):
        return {"hex": [(s if isinstance(s, bytes) else s.encode()).hex() for s in value]}
    return value


def fresh_process(exports, python=sys.executable):
    """Loads each export of `exports` (`serving_request`s) in one new process of `python`
    that imports only `tensorflow` (and `tensorflow_text` once a text export needs it).

    Returns one `{"signatures": [{output: list}], "session": [str]}` per export: the
    answer to each request, strings as `str`, and the `serving_default` outputs of its
    `sentences` as TF Serving computes them (the MetaGraph loaded into a TensorFlow 1
    session, its saver restoring the variables, its tensors fed by name)."""
    done = subprocess.run(
        [python, "-c", textwrap.dedent(SERVER)],
        input=json.dumps(exports),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
