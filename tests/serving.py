"""Loading an exported SavedModel as a server would, in a new process: with
`tf.saved_model.load`, and in a TensorFlow 1 session as TF Serving's C++ loader does."""

import json
import os
import subprocess
import sys
import textwrap

SIGNATURES = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
path, requests = json.load(sys.stdin)
signatures = tf.saved_model.load(path).signatures
answers = []
for name, inputs in requests:
    got = signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    answers.append({k: v.numpy().tolist() for k, v in got.items()})
assert "keras_transformer" not in sys.modules
print(json.dumps(answers, default=lambda b: b.decode("utf-8")))
"""

SESSION = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
path, sentences = json.load(sys.stdin)
with tf.compat.v1.Session(graph=tf.Graph()) as session:
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta.signature_def["serving_default"]
    feed = {signature.inputs["inputs"].name: sentences}
    out = session.run(signature.outputs["outputs"].name, feed)
print(json.dumps([t.decode("utf-8") for t in out]))
"""


def _run(script, data, python):
    done = subprocess.run(
        [python, "-c", textwrap.dedent(script)],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def fresh_process_signatures(path, requests, python=sys.executable):
    """Calls a SavedModel's signatures in a new process of `python` that imports only
    `tensorflow` and `tensorflow_text`; `requests` is `[(signature, {input: list})]`, and
    the answer one `{output: list}` per request, strings as `str`."""
    return _run(SIGNATURES, [str(path), requests], python)


def session_serving_default(path, sentences, python=sys.executable):
    """The `serving_default` outputs (`str`) of a SavedModel for `sentences`, loaded into a
    TensorFlow 1 session in a new process of `python`, as TF Serving loads it (the
    MetaGraph's saver restores the variables, its tensors are fed by name)."""
    return _run(SESSION, [str(path), sentences], python)
