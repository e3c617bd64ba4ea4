"""The data a run's configuration names: corpus splits and their batches."""

from keras_transformer.datasets import ParallelCorpus, load_corpus
from keras_transformer.errors import ConfigError
from keras_transformer.text import make_batches
from keras_transformer.text.languages import language_prefix


def corpus_split(data, split, stream=False, limit=None):
    """The `split` of the corpus that the `data` configuration section names.

    Args:
        data: the `data` section of a run configuration.
        split: a split name, e.g. `data["val_split"]`.
        stream: for a corpus of files, read them as they are needed.
        limit: the first `limit` pairs only.

    Examples:
        ```python
        corpus = corpus_split(load_config()["data"], "val")  # the built-in numbers
        ```
    """
    if data["corpus"] is None:
        raise ConfigError(
            f"data.corpus is null: the run's configuration names no corpus to read its "
            f"{split!r} split from (an imported model comes without one). Give one, e.g. "
            "--set data.corpus=files data.directory=DIR, or evaluate on files of your own "
            "with --source and --reference."
        )
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
        limit=limit,
    )


def training_corpus(data):
    """The training split, streamed from files, cut to `train_limit` pairs if set."""
    return corpus_split(data, data["train_split"], stream=True, limit=data["train_limit"])


def training_and_validation_batches(config, train, val, tokenizers):
    """`(train, val)` `text.Batches` of the two corpora as a run configuration says.

    The `data` section sets the lengths and the token budget; a training
    batch holds `train.micro_batches` times `data.tokens_per_batch` tokens
    (the model cuts it into that many slices), is shuffled with `train.seed`,
    and samples its segmentations as `tokenizer.sampling_alpha` and
    `tokenizer.sampling_nbest_size` say (subword regularization); validation
    batches never sample. A corpus in memory is cached after its first
    epoch, a stream is read again each epoch. A multilingual model's sources
    start with the token of `decode.target_language`, as when it translates.

    Args:
        config: a run configuration (`config.load_config`).
        train: the training corpus.
        val: the validation corpus.
        tokenizers: the `(source, target)` tokenizers.

    Examples:
        ```python
        train_batches, val_batches = training_and_validation_batches(
            config, train, val, (tokenizer, tokenizer)
        )
        ```
    """
    data, tokenizer, t = config["data"], config["tokenizer"], config["train"]
    source, target = tokenizers
    options = dict(
        max_length=data["max_length"],
        tokens_per_batch=data["tokens_per_batch"],
        overflow=data["overflow"],
        source_prefix=language_prefix(source, config["decode"]["target_language"]),
    )
    train_batches = make_batches(
        train,
        source,
        target,
        seed=t["seed"],
        cache=isinstance(train, ParallelCorpus),
        sampling_alpha=tokenizer["sampling_alpha"],
        sampling_nbest_size=tokenizer["sampling_nbest_size"],
        **{**options, "tokens_per_batch": data["tokens_per_batch"] * t["micro_batches"]},
    )
    val_batches = make_batches(val, source, target, shuffle=False, **options)
    return train_batches, val_batches
