"""Writes the op names TensorFlow registers, then those that tensorflow_text adds.

The two lists beside this file come from TensorFlow 2.12.1 with TensorFlow Text
2.12.1, the TF-Text release linked into the latest stock `tensorflow_model_server`:

    python3 -m venv /tmp/tf212
    /tmp/tf212/bin/pip install tensorflow==2.12.1 tensorflow-text==2.12.1
    /tmp/tf212/bin/python tests/data/list_registered_ops.py \\
        tests/data/tensorflow_2.12.1_ops.txt tests/data/tensorflow_text_2.12.1_ops.txt

`tests/test_export.py` checks every op of an export against their union.
"""

import sys

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api


def registered_ops():
    buffer = c_api.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(buffer))
    return {op.name for op in ops.op}


core = registered_ops()
import tensorflow_text  # noqa: E402,F401

text = registered_ops() - core
print(tf.__version__, tensorflow_text.__version__, len(core), len(text), file=sys.stderr)
for path, names in [(sys.argv[1], core), (sys.argv[2], text)]:
    with open(path, "w") as f:
        f.write("\n".join(sorted(names)) + "\n")
