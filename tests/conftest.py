import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_keras_state():
    """Every test starts from float32, a fixed seed and a clear session."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def multi30k_dir():
    """The Multi30k directory: $MULTI30K_DIR, or ../shared/data/multi30k beside the repo."""
    path = os.environ.get("MULTI30K_DIR", os.path.join(REPO, "..", "shared", "data", "multi30k"))
    if not os.path.isfile(os.path.join(path, "train.en.gz")):
        pytest.skip(f"Multi30k not found in {path}; set MULTI30K_DIR")
    return path
