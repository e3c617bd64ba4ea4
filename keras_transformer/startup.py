"""A quiet TensorFlow start-up: its C++ start-up lines are kept, not printed.

Importing TensorFlow prints lines from C++ before its logging is set up
(oneDNN notices, "Could not find cuda drivers", a `failed call to cuInit`
error on machines without a GPU, CPU-feature notices); `TF_CPP_MIN_LOG_LEVEL`
does not reach them. When the package is imported before TensorFlow and
`TF_CPP_MIN_LOG_LEVEL` is unset, TensorFlow is imported with the process's
standard error sent to a file, and `TF_CPP_MIN_LOG_LEVEL` is set to 2
(warnings and errors only from then on). The lines are kept in `captured`;
`keras-transformer --verbose` prints them. Set `TF_CPP_MIN_LOG_LEVEL` (to 0
for everything) to see TensorFlow's own output unchanged. If the import
fails, what it printed is shown with the error.
"""

import os
import sys
import tempfile

captured = ""


def import_tensorflow_quietly():
    """Imports TensorFlow and finds its devices, keeping their start-up lines in `captured`."""
    global captured
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        imported = False
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # looks for GPUs: the cuInit line
            imported = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured = sink.read().decode("utf-8", errors="replace")
            if not imported:
                sys.stderr.write(captured)
