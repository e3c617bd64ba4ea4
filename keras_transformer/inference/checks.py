"""Checks of the tensors every search takes, with errors that name the argument."""

import numpy as np
import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.files import text_items


def integer_ids(ids, name, axes):
    """`ids` as a tensor, or an `ArgumentError` unless it holds integers with the `axes`."""
    ids = tf.convert_to_tensor(ids)
    if not ids.dtype.is_integer or ids.shape.rank != len(axes):
        raise ArgumentError(
            f"`{name}` must be integer token ids of shape ({', '.join(axes)}). "
            f"Received: {name} with dtype={ids.dtype.name}, shape={ids.shape}"
        )
    return ids


def refuse_one_string(sentences, name="sentences"):
    """An `ArgumentError` if `sentences` is one string where a list of them belongs."""
    if isinstance(sentences, (str, bytes)):
        raise ArgumentError(
            f"`{name}` must be a list of strings (B,). Received: one string "
            "(put it in a list for a batch of one)"
        )


def check_sentences(sentences, name="sentences"):
    """`sentences` as a `tf.string` tensor `(B,)`, or an `ArgumentError` naming what it is.

    A rank that is not known (a graph traced without shapes) passes. A list
    whose item is not UTF-8 text is refused (`files.text_items`); a tensor's
    bytes are not read here: the tokenizers map bytes that are not UTF-8 to
    the unknown piece, so a served batch does not fail for one bad request.

    Examples:
        ```python
        check_sentences(["ein Hund", ""])  # tf.string (2,)
        check_sentences("ein Hund")  # ArgumentError: one string, not a list of them
        ```
    """
    refuse_one_string(sentences, name)
    if isinstance(sentences, (list, tuple)) and all(
        isinstance(item, (str, bytes)) for item in sentences
    ):
        sentences = text_items(sentences, name)
    if isinstance(sentences, (tf.Tensor, tf.Variable)) and sentences.dtype != tf.string:
        raise ArgumentError(
            f"`{name}` must be strings (tf.string). Received: dtype={sentences.dtype.name}"
        )
    try:
        sentences = tf.convert_to_tensor(sentences, tf.string)
    except (TypeError, ValueError):
        raise ArgumentError(
            f"`{name}` must be a list of strings (B,). Received: {str(sentences)[:80]}"
        ) from None
    if sentences.shape.rank not in (None, 1):
        raise ArgumentError(
            f"`{name}` must be a list of strings (B,). Received: shape {sentences.shape}"
        )
    return sentences


def check_source_ids(source_ids):
    """`source_ids` as an int32 or int64 tensor `(B, S)`, or an `ArgumentError`."""
    source_ids = integer_ids(source_ids, "source_ids", ["batch", "seq"])
    if source_ids.dtype not in (tf.int32, tf.int64):
        raise ArgumentError(
            "`source_ids` must be int32 or int64 token ids. "
            f"Received: source_ids with dtype={source_ids.dtype.name}"
        )
    return source_ids


def check_prefix_ids(prefix_ids, batch):
    """`prefix_ids` as int32 `(B, P + 1)` (a padding column ensures P + 1 >= 1), or None."""
    if prefix_ids is None:
        return None
    prefix_ids = integer_ids(prefix_ids, "prefix_ids", ["batch", "prefix_length"])
    prefix_ids = tf.ensure_shape(tf.cast(prefix_ids, tf.int32), [batch, None])
    return tf.pad(prefix_ids, [[0, 0], [0, 1]], constant_values=PAD_ID)


def refuse_unknown_pieces(has_unknown, texts, what):
    """An `ArgumentError` naming the first of `texts` whose pieces include the target
    vocabulary's unknown piece, which would write "⁇" into a translation.

    Args:
        has_unknown: bool array, True where a text has the unknown piece.
        texts: the texts (`str` or `bytes`), an array of the same shape.
        what: the texts' name in the message, e.g. `"prefix"`.

    Examples:
        ```python
        refuse_unknown_pieces([False, True], ["seven", "☃"], "prefix")  # ArgumentError
        ```
    """
    found = np.asarray(has_unknown, bool)
    if not found.any():
        return
    index = tuple(int(i) for i in np.argwhere(found)[0])
    text = np.asarray(texts, object)[index]
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    raise ArgumentError(
        f"The {what} {text!r} of sentence {index[0]} has characters the target vocabulary "
        "lacks: it could be written only as the unknown piece, ⁇. Leave it out or write it "
        "with characters the model knows."
    )


def check_prefix_lengths(sentence_count, lengths, max_length):
    """An `ArgumentError` unless there is one prefix per sentence, none over `max_length`.

    Args:
        sentence_count: how many sentences the prefixes go with, or None when
            that is not known yet (the lengths are still checked).
        lengths: int `(B,)`, each prefix's length in target tokens.
        max_length: the most tokens a translation has.

    Examples:
        ```python
        check_prefix_lengths(2, [1, 3], max_length=8)  # passes
        check_prefix_lengths(2, [1, 9], max_length=8)  # ArgumentError: prefix 1 has 9 tokens
        ```
    """
    lengths = np.asarray(lengths)
    if sentence_count is not None and sentence_count != len(lengths):
        raise ArgumentError(
            f"Give one prefix per sentence. Received: {sentence_count} sentences, "
            f"{len(lengths)} prefixes"
        )
    if (lengths > max_length).any():
        row = int(np.argmax(lengths > max_length))
        raise ArgumentError(
            f"Prefix {row} has {lengths[row]} tokens, more than a translation's "
            f"max_length={max_length}. Shorten the prefix or raise max_length."
        )


def check_constraint_ids(constraint_ids, batch):
    """`constraint_ids` as int32 `(B, C, T)`, or None."""
    if constraint_ids is None:
        return None
    constraint_ids = integer_ids(constraint_ids, "constraint_ids", ["batch", "phrases", "tokens"])
    return tf.ensure_shape(tf.cast(constraint_ids, tf.int32), [batch, None, None])


def check_continues_word(continues_word):
    """`continues_word` as a bool tensor `(V,)`, or None."""
    if continues_word is None:
        return None
    continues_word = tf.convert_to_tensor(continues_word)
    if continues_word.dtype != tf.bool or continues_word.shape.rank != 1:
        raise ArgumentError(
            "`continues_word` must be a bool vector (vocab_size,). Received: continues_word "
            f"with dtype={continues_word.dtype.name}, shape={continues_word.shape}"
        )
    return continues_word
