"""The data a run's configuration names: corpus splits and their batches."""

from keras_transformer.datasets import ParallelCorpus, load_corpus
from keras_transformer.text import make_batches


def corpus_split(data, split, stream=False):
    """The `split` of the corpus that the `data` configuration section names.

    Args:
        data: the `data` section of a run configuration.
        split: a split name, e.g. `data["val_split"]`.
        stream: for a corpus of files, read them as they are needed.

    Examples:
        ```python
        corpus = corpus_split(load_config()["data"], "val")  # the built-in numbers
        ```
    """
    return load_corpus(
        data["corpus"],
        split,
        data["source_lang"],
        data["target_lang"],
        directory=data["directory"],
        path=data["path"],
        name=data["name"],
        stream=stream,
        split_names=(data["train_split"], data["val_split"], data["test_split"]),
    )


def training_corpus(data):
    """The training split, streamed from files, cut to `train_limit` pairs if set."""
    corpus = corpus_split(data, data["train_split"], stream=True)
    return corpus if data["train_limit"] is None else corpus[: data["train_limit"]]


def training_and_validation_batches(
    data, train, val, tokenizers, seed, micro_batches, sampling=(None, -1)
):
    """`(train, val)` `text.Batches` of the two corpora as the `data` section says.

    A training batch holds `micro_batches` times `data.tokens_per_batch`
    tokens (the model cuts it into that many slices); a corpus in memory is
    cached after its first epoch, a stream is read again each epoch.
    `sampling` is `(alpha, nbest_size)` of subword regularization for the
    training batches (`make_batches`); validation batches never sample.
    """
    source, target = tokenizers
    options = dict(
        max_length=data["max_length"],
        tokens_per_batch=data["tokens_per_batch"],
        overflow=data["overflow"],
    )
    train_batches = make_batches(
        train,
        source,
        target,
        seed=seed,
        cache=isinstance(train, ParallelCorpus),
        sampling_alpha=sampling[0],
        sampling_nbest_size=sampling[1],
        **{**options, "tokens_per_batch": data["tokens_per_batch"] * micro_batches},
    )
    val_batches = make_batches(val, source, target, shuffle=False, **options)
    return train_batches, val_batches
