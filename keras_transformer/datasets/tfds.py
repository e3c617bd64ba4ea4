"""Translation data sets from TensorFlow Datasets (the optional `tfds` extra)."""

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.errors import MissingDependencyError, RunError


def load_tfds(name, split, data_dir=None, download=True):
    """Loads a supervised translation data set, e.g. `ted_hrlr_translate/pt_to_en`.

    Args:
        name: the TFDS name, with its config.
        split: e.g. `"train"`, `"validation"`.
        data_dir: where TFDS keeps prepared data (its default if None).
        download: whether TFDS may download and prepare the data.

    Returns:
        `ParallelCorpus` of the `(source, target)` pairs `as_supervised` gives.

    Raises:
        MissingDependencyError: if `tensorflow-datasets` is not installed.
        RuntimeError: if the data is neither prepared in `data_dir` nor
            downloadable (for example, offline).
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise MissingDependencyError(
            "Loading TFDS data sets needs `tensorflow-datasets`: "
            "pip install 'keras-transformer-nmt[tfds]'"
        ) from None
    try:
        dataset = tfds.load(
            name, split=split, data_dir=data_dir, as_supervised=True, download=download
        )
    except Exception as error:
        raise RunError(
            f"Could not load TFDS data set {name!r} (split {split!r}): {error}. "
            "Without internet access, prepare it elsewhere and pass its `data_dir`."
        ) from None
    sources, targets = [], []
    for source, target in dataset.as_numpy_iterator():
        sources.append(source.decode("utf-8", errors="replace"))
        targets.append(target.decode("utf-8", errors="replace"))
    return ParallelCorpus(sources, targets)
