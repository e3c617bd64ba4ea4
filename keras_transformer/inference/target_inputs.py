"""Target-side inputs of a translation: prefixes and constraint phrases as checked ids.

Each input is checked twice over: eagerly, where its values are known, with an
`ArgumentError` that names the text at fault, and in a graph (a SavedModel's
signature) with assertions that fail the request with the same words.
"""

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.checks import check_prefix_lengths, refuse_unknown_pieces
from keras_transformer.inference.constraints import check_fit


class TargetInputs:
    """Prefixes and constraint phrases tokenized with the target tokenizer and checked
    against `max_length` and the target vocabulary.

    Args:
        tokenizer: the target side's `keras_transformer.text.Tokenizer`.
        max_length: the most target tokens a search writes.

    Examples:
        ```python
        inputs = TargetInputs(target_tokenizer, max_length=64)
        inputs.prefix_ids(tf.constant(["zwei"]), tf.constant(["two"]))  # int32 (1, P)
        ```
    """

    def __init__(self, tokenizer, max_length):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def prefix_ids(self, sentences, prefixes):
        """The prefixes `(B,)` tokenized: int32 `(B, P)`, 0-padded, one per sentence, none
        over `max_length` tokens, none with a piece the vocabulary lacks."""
        pieces = self.tokenizer.tokenize(prefixes)  # ragged (B, None)
        padded = pieces.to_tensor(PAD_ID)  # (B, P)
        lengths = tf.get_static_value(pieces.row_lengths())
        if lengths is not None:
            check_prefix_lengths(tf.get_static_value(tf.size(sentences)), lengths, self.max_length)
        checks = [  # for a graph, where the eager checks above see no values
            self.refuse_unknown(padded, "prefix", prefixes),
            tf.debugging.assert_equal(
                tf.size(prefixes), tf.size(sentences), message="Give one prefix per sentence"
            ),
            tf.debugging.assert_less_equal(
                tf.cast(pieces.row_lengths(), tf.int32),
                self.max_length,
                message=f"A prefix has more tokens than max_length={self.max_length}",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(padded)

    def constraint_ids_for(self, sentences, constraints):
        """`constraint_ids` with one row of phrases per sentence of `sentences` `(B,)`."""
        ids = self.constraint_ids(constraints)
        rows = tf.shape(ids)[0]
        sentence_count, count = tf.get_static_value(tf.size(sentences)), tf.get_static_value(rows)
        if None not in (sentence_count, count) and sentence_count != count:
            raise ArgumentError(
                "Give one row of constraints per sentence. Received: "
                f"{sentence_count} sentences, {count} rows of constraints"
            )
        one_each = tf.debugging.assert_equal(
            rows, tf.size(sentences), message="Give one row of constraints per sentence"
        )
        with tf.control_dependencies([one_each]):
            return tf.identity(ids)

    def constraint_ids(self, constraints):
        """Target phrases tokenized: int32 `(B, C, T)`, 0-padded.

        Args:
            constraints: per sentence a list of strings, or strings `(B, C)`
                (`""`: no phrase).

        Raises:
            ValueError: eagerly, naming the first sentence whose phrases do
                not fit in `max_length` tokens with EOS.
        """
        if not tf.is_tensor(constraints):
            for row in constraints:
                if isinstance(row, (str, bytes)):
                    raise ArgumentError(
                        "`constraints` must hold a list of phrases per sentence. Received: "
                        f"the string {row!r:.80} as a sentence's row"
                    )
            width = max([1] + [len(phrases) for phrases in constraints])
            constraints = [list(phrases) + [""] * (width - len(phrases)) for phrases in constraints]
            if not constraints:
                constraints = tf.zeros([0, 1], tf.string)
        constraints = tf.ensure_shape(
            tf.convert_to_tensor(constraints, tf.string),
            [None, None],
            name="constraints_must_be_a_matrix",
        )
        shape = tf.shape(constraints)
        pieces = self.tokenizer.tokenize(tf.reshape(constraints, [-1]))  # (B*C, None)
        ids = tf.reshape(pieces.to_tensor(PAD_ID), [shape[0], shape[1], -1])  # (B, C, T)
        check_fit(ids, None, self.max_length)
        known = self.refuse_unknown(ids, "constraint phrase", constraints)
        needed = tf.reduce_sum(tf.cast(ids != PAD_ID, tf.int32), axis=[1, 2])
        fits = tf.debugging.assert_less(
            needed,
            self.max_length,
            message=f"The constraints of a sentence need max_length={self.max_length} tokens "
            "or more, with EOS",
        )
        with tf.control_dependencies([fits, known]):
            return tf.identity(ids)

    def refuse_unknown(self, ids, what, texts):
        """Refuses a `what` (prefix, constraint phrase) that the target vocabulary can
        write only with its unknown piece, which would put "⁇" in the translation.

        Eagerly an `ArgumentError` naming the text; returns the assertion that
        does the same in a graph.

        Args:
            ids: int32 `(B, T)` or `(B, C, T)`, the texts' pieces, 0-padded.
            what: the texts' name in the message.
            texts: strings of the shape of `ids` without its last axis.
        """
        unknown = tf.reduce_any(ids == self.tokenizer.unk_id, axis=-1)  # (B,) or (B, C)
        found = tf.get_static_value(unknown)
        if found is not None:
            refuse_unknown_pieces(found, tf.get_static_value(texts), what)
        return tf.debugging.assert_equal(
            tf.reduce_any(unknown),
            False,
            message=f"A {what} has characters the target vocabulary lacks (it could be written "
            "only as the unknown piece)",
        )
