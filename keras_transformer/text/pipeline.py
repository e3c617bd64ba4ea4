"""From pairs of sentences to the batches `model.fit` trains on, in `tf.data`.

Each pair `(x, y)` becomes

    source_ids    = x + [EOS]
    target_in_ids = [BOS] + y     (teacher forcing: the decoder reads this)
    target_out_ids = y + [EOS]    (and predicts this)

and batches are `((source_ids (B, S), target_in_ids (B, T)), target_out_ids (B, T))`,
0-padded. Sentences of similar length are batched together (length bucketing)
under a budget of tokens per batch, so little of each batch is padding.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer.errors import ArgumentError, from_assertion
from keras_transformer.text.source import SourcePolicy
from keras_transformer.validation import check_choice, check_positive_int

TOKENIZE_BATCH = 1024


@dataclasses.dataclass
class Batches:
    """Batches ready for `model.fit`, and what was done to fit `max_length`.

    Attributes:
        dataset: `tf.data.Dataset` of `((source_ids, target_in_ids), target_out_ids)`.
        num_pairs: pairs in the input.
        num_dropped: pairs left out because a side was longer than `max_length`.
        num_truncated: pairs cut to `max_length`.
        num_batches: batches in one pass over the dataset (also its
            `cardinality`, so Keras' progress bar shows the total from the
            first epoch).
    """

    dataset: tf.data.Dataset
    num_pairs: int
    num_dropped: int
    num_truncated: int
    num_batches: int

    def __str__(self):
        return (
            f"{self.num_pairs} pairs: {self.num_dropped} dropped and "
            f"{self.num_truncated} truncated for exceeding max_length; "
            f"{self.num_batches} batches"
        )

    def shard(self, count, index, replicas=1):
        """Worker `index` of `count`'s share: batches index, index + count, ...

        Every worker gets the same number of batches, `num_batches // count`
        rounded down to a multiple of `replicas` (the last few batches of an
        epoch are left out), so that all workers take the same number of
        steps; the workers' batches are disjoint when each shuffles with the
        same seed. `tf.distribute`'s auto-sharding is turned off: it would
        shard again, and by data it can hand one worker a batch more than
        another, whose all-reduce would then wait for it. `count=1` keeps
        every batch (up to that rounding), for a dataset that every worker
        reads whole.

        Args:
            count: workers, >= 1.
            index: this worker's rank, in [0, count).
            replicas: the worker's local replicas, each of which takes one
                batch per step.

        Returns:
            A `Batches` whose `dataset` is this worker's, for
            `strategy.distribute_datasets_from_function`.

        Examples:
            >>> batches.shard(2, 0).num_batches == batches.num_batches // 2
        """
        check_positive_int("count", count)
        check_positive_int("replicas", replicas)
        if not 0 <= index < count:
            raise ArgumentError(f"`index` must be in [0, {count}). Received: index={index}")
        per_worker = self.num_batches // count // replicas * replicas
        dataset = self.dataset.take(per_worker * count).shard(count, index)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return dataclasses.replace(
            self,
            dataset=dataset.apply(tf.data.experimental.assert_cardinality(per_worker))
            .prefetch(tf.data.AUTOTUNE)
            .with_options(options),
            num_batches=per_worker,
        )


def as_pair_dataset(pairs):
    """A `tf.data.Dataset` of `(source, target)` strings from any pair source.

    Args:
        pairs: a `tf.data.Dataset` of string pairs, an object with
            `to_dataset()` (a `keras_transformer.datasets.ParallelCorpus`), or a
            `(sources, targets)` tuple of equal-length string lists.
    """
    if isinstance(pairs, tf.data.Dataset):
        return pairs
    if hasattr(pairs, "to_dataset"):
        return pairs.to_dataset()
    sources, targets = pairs
    if len(sources) != len(targets):
        raise ArgumentError(
            "`pairs` must hold as many sources as targets. "
            f"Received: {len(sources)} sources and {len(targets)} targets"
        )
    return tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))


def tokenize_pairs(pairs, source_tokenizer, target_tokenizer, keep_text=False):
    """Dataset of `(source_ids, target_ids)` ragged rows, no special ids added;
    `(source_ids, target_ids, source, target)` with `keep_text`."""

    def tokenize(sources, targets):
        ids = source_tokenizer.tokenize(sources), target_tokenizer.tokenize(targets)
        return (*ids, sources, targets) if keep_text else ids

    return (
        as_pair_dataset(pairs)
        .batch(TOKENIZE_BATCH)
        .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )


def make_batches(
    pairs,
    source_tokenizer,
    target_tokenizer,
    max_length=128,
    tokens_per_batch=4096,
    batch_size=None,
    bucketing=True,
    overflow="drop",
    shuffle=True,
    shuffle_buffer=20_000,
    seed=None,
    cache=True,
    sampling_alpha=None,
    sampling_nbest_size=-1,
    source_prefix=(),
):
    """Tokenizes, filters, buckets and pads pairs of sentences for training.

    Args:
        pairs: the sentence pairs; see `as_pair_dataset`.
        source_tokenizer: a `keras_transformer.text.Tokenizer` for the source.
        target_tokenizer: the target's tokenizer (may be the same object).
        max_length: longest `source_ids` and `target_in_ids` in tokens.
        tokens_per_batch: with bucketing, a batch of sentences padded to length
            L holds `tokens_per_batch // L` of them. Ignored if `batch_size`
            is given.
        batch_size: a fixed number of pairs per batch instead of a budget.
        bucketing: whether to group sentences of similar length. Without it,
            each batch is padded to its longest sentence (the TF tutorial's
            batching); this needs `batch_size`.
        overflow: what to do with a pair longer than `max_length`: `"drop"` it
            or `"truncate"` it (the source keeps its final EOS).
        shuffle: whether to shuffle pairs each epoch.
        shuffle_buffer: size of the shuffle buffer.
        seed: shuffle seed.
        cache: whether to keep the tokenized pairs in memory after the first
            pass (the count of overflowing pairs is that first pass); False
            for a corpus larger than memory, which is then read again each
            epoch.
        sampling_alpha: subword regularization: None (the default) tokenizes
            every pair once, with the best segmentation; a number draws a new
            segmentation of each sentence every epoch (`Tokenizer.sampler`,
            SentencePiece only). The pairs are filtered, counted and bucketed
            by the length of their best segmentation, so every epoch has the
            same batches' count; a sampled segmentation longer than
            `max_length` is replaced by the best one. Sampled segmentations
            are usually longer, so batches hold somewhat more tokens than
            `tokens_per_batch`. Validation batches should not sample.
        sampling_nbest_size: sample among this many best segmentations, or
            -1 (the default) among all.
        source_prefix: ids every source starts with, counted in its length
            (a multilingual model's target-language token,
            `text.languages.language_prefix`), as `Translator` puts them.

    Returns:
        A `Batches`: the dataset and the counts of dropped and truncated pairs.

    Raises:
        ValueError: if reading the pairs fails (the first pass, which counts
            them, reads them all), e.g. parallel files that differ in length.

    Examples:
        >>> batches = make_batches((["a b"], ["c"]), tokenizer, tokenizer, batch_size=2)
        >>> (source_ids, target_in_ids), target_out_ids = next(iter(batches.dataset))
    """
    check_positive_int("max_length", max_length)
    check_positive_int("tokens_per_batch", tokens_per_batch)
    check_choice("overflow", overflow, {"drop", "truncate"})
    if batch_size is not None:
        check_positive_int("batch_size", batch_size)
    elif not bucketing:
        raise ArgumentError("`batch_size` is required when `bucketing=False`. Received: None")
    if max_length < 2:
        raise ArgumentError(f"`max_length` must be at least 2. Received: max_length={max_length}")
    bos, eos = target_tokenizer.bos_id, target_tokenizer.eos_id
    source_policy = SourcePolicy(max_length, source_tokenizer.eos_id, tuple(source_prefix))
    prefix_length = len(source_policy.prefix)
    sampled = sampling_alpha is not None
    tokenizers = (source_tokenizer, target_tokenizer)
    samplers = [t.sampler(sampling_alpha, sampling_nbest_size) for t in tokenizers if sampled]

    tokenized = tokenize_pairs(pairs, source_tokenizer, target_tokenizer, keep_text=sampled)
    if cache:
        tokenized = tokenized.cache()

    def too_long(source, target, *_):
        source_length = tf.size(source) + prefix_length + 1
        return (source_length > max_length) | (tf.size(target) + 1 > max_length)

    def bucket_length(source, target, *_):
        """The length a pair is counted and bucketed by: its longer side, with the source's
        prefix, and BOS or EOS added."""
        longer = tf.maximum(tf.size(source) + prefix_length, tf.size(target))
        return tf.minimum(longer + 1, max_length)

    def count(counts, pair):
        """Pairs, pairs too long, and a histogram of the lengths of the examples kept."""
        pairs, long, lengths = counts
        is_long = too_long(*pair)
        length = bucket_length(*pair)
        kept = tf.logical_not(is_long) if overflow == "drop" else tf.constant(True)
        lengths += tf.cast(kept, tf.int64) * tf.one_hot(length, max_length + 1, dtype=tf.int64)
        return pairs + 1, long + tf.cast(is_long, tf.int64), lengths

    try:
        num_pairs, num_long, lengths = tokenized.reduce(
            (np.int64(0), np.int64(0), np.zeros(max_length + 1, np.int64)), count
        )
    except tf.errors.InvalidArgumentError as error:  # e.g. files that end apart
        raise from_assertion(error) from None
    num_pairs, num_long = int(num_pairs), int(num_long)

    if overflow == "drop":
        tokenized = tokenized.filter(lambda *pair: tf.logical_not(too_long(*pair)))
    if shuffle:
        tokenized = tokenized.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if sampled:
        tokenized = resample(tokenized, samplers, too_long, bucket_length)
    else:
        tokenized = tokenized.map(lambda *pair: (*pair, bucket_length(*pair)))

    def to_example(source, target, length):
        target = target[: max_length - 1]
        source_ids = tf.concat([source_policy.pieces(source), [source_policy.eos_id]], 0)  # (S,)
        target_in = tf.concat([[bos], target], axis=0)  # (T,)
        target_out = tf.concat([target, [eos]], axis=0)  # (T,)
        return (source_ids, target_in), target_out, length

    examples = tokenized.map(to_example, num_parallel_calls=tf.data.AUTOTUNE)
    if bucketing:
        boundaries = bucket_boundaries(max_length)
        sizes = bucket_batch_sizes(max_length, tokens_per_batch, batch_size)
    else:
        boundaries, sizes = [], [batch_size]
    batched = batch_examples(examples, boundaries, sizes)
    num_batches = count_batches(lengths.numpy(), boundaries, sizes)
    return Batches(
        dataset=batched.apply(tf.data.experimental.assert_cardinality(num_batches)).prefetch(
            tf.data.AUTOTUNE
        ),
        num_pairs=num_pairs,
        num_dropped=num_long if overflow == "drop" else 0,
        num_truncated=num_long if overflow == "truncate" else 0,
        num_batches=num_batches,
    )


def batch_examples(examples, boundaries, batch_sizes):
    """Padded batches of `(inputs, outputs, length)` examples, `length` dropped: grouped
    by `length` into the buckets `boundaries` makes, or in order with one bucket."""
    if boundaries:
        batched = examples.bucket_by_sequence_length(
            element_length_func=lambda inputs, outputs, length: length,
            bucket_boundaries=boundaries,
            bucket_batch_sizes=batch_sizes,
        )
    else:
        batched = examples.padded_batch(batch_sizes[0])
    return batched.map(lambda inputs, outputs, length: (inputs, outputs))


def resample(tokenized, samplers, too_long, bucket_length):
    """`(source_ids, target_ids, length)` with a newly sampled segmentation of each side,
    from `(best_source_ids, best_target_ids, source, target)`, where `length` is the
    best segmentation's bucket length; a pair whose sample is too long keeps the best."""
    source_sampler, target_sampler = samplers

    def sample(source_ids, target_ids, source, target):  # a batch of rows
        return source_ids, target_ids, source_sampler(source), target_sampler(target)

    def choose(source_ids, target_ids, source_sample, target_sample):
        length = bucket_length(source_ids, target_ids)
        best, drawn = (source_ids, target_ids), (source_sample, target_sample)
        chosen = tf.cond(too_long(*drawn), lambda: best, lambda: drawn)
        return (*chosen, length)

    return (
        tokenized.batch(TOKENIZE_BATCH)
        .map(sample, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(choose, num_parallel_calls=tf.data.AUTOTUNE)
    )


def count_batches(length_counts, boundaries, batch_sizes):
    """Batches that bucketing makes, whatever the order: a full one per `size` pairs of a
    bucket, and one more for the rest of each bucket.

    Args:
        length_counts: `length_counts[n]` examples of length n.
        boundaries: the bucket boundaries (`bucket_boundaries`); [] for one bucket.
        batch_sizes: pairs per batch in each bucket.
    """
    bucket = np.searchsorted(boundaries, np.arange(len(length_counts)), side="right")
    per_bucket = np.bincount(bucket, weights=length_counts, minlength=len(batch_sizes))
    return int(sum(-(-int(n) // size) for n, size in zip(per_bucket, batch_sizes, strict=True)))


def bucket_boundaries(max_length, width=8):
    """Bucket i holds lengths in [boundaries[i-1], boundaries[i]): 1-8, 9-16, ..."""
    return list(range(width + 1, max_length + 1, width))


def bucket_batch_sizes(max_length, tokens_per_batch, batch_size=None, width=8):
    """Pairs per batch in each bucket: a fixed `batch_size`, or the token budget."""
    longest = [b - 1 for b in bucket_boundaries(max_length, width)] + [max_length]
    if batch_size is not None:
        return [batch_size] * len(longest)
    return [max(1, tokens_per_batch // length) for length in longest]


def padding_fraction(dataset):
    """Share of padding among all source and target positions of a batched dataset."""
    padded = real = 0
    for (source_ids, _), target_out_ids in dataset:
        for ids in (source_ids, target_out_ids):
            padded += int(tf.size(ids))
            real += int(tf.math.count_nonzero(ids))
    return 1.0 - real / max(padded, 1)
