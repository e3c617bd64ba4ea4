"""Lexical shortlists: a step's output projection over the target pieces a source can use.

Most of a decoding step's pre-softmax projection goes to target pieces that
cannot follow the source at hand. A shortlist (Marian's lexical shortlists,
CTranslate2's `vmap`) lists, for each source piece, the target pieces that
most often occur in the same training pairs, plus the most frequent target
pieces overall. A batch then decodes over the union of its sources' lists:
the projection becomes a product with `size` rows of the embedding instead of
all `V`, and every other piece gets probability zero.

The union has a fixed size so that the search compiles once (XLA, and one
graph for a SavedModel): when a batch's union is larger, the pieces listed
by more of the batch's source pieces are kept (ties: the more frequent in
the training targets); when it is smaller, the most frequent of the others
fill it up. A sentence's translation can therefore depend on the sentences
it is batched with, as with other toolkits' shortlists; the union grows with
the batch, so `size` is chosen for the batch size used.
"""

import numpy as np
import tensorflow as tf

from keras_transformer.constants import PAD_ID, SPECIAL_IDS
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.probabilities import MINUS_INF
from keras_transformer.models.step import Step, StepModel, StepWrapper
from keras_transformer.validation import check_positive_int


class Shortlist:
    """The candidate target pieces of each source piece, and how many a batch decodes over.

    Args:
        candidates: int `(source vocabulary, K)`: row s lists the target
            pieces most often seen with source piece s (padded with
            `PAD_ID`).
        frequency: int `(target vocabulary,)`: how often each target piece
            occurs in the training targets; ranks the pieces when a batch's
            union is cut or filled to `size`, and its `frequent` most
            frequent pieces are candidates of every batch.
        frequent: how many of the most frequent target pieces every batch
            keeps.
        size: target pieces a batch decodes over (at most the vocabulary),
            at least the `frequent` pieces and the unknown piece and EOS.
        special_ids: the target vocabulary's `{"pad", "unk", "bos", "eos"}`
            ids (a tokenizer's `special_ids`): every batch keeps the unknown
            piece and EOS and never decodes padding or BOS. Defaults to the
            package's numbering (`constants.SPECIAL_IDS`).

    Examples:
        ```python
        shortlist = Shortlist.build(source_rows, target_rows, 8000, 8000, size=1024)
        ids = shortlist.vocab_ids(source_ids)  # (1024,) the batch's target pieces
        ```
    """

    def __init__(self, candidates, frequency, frequent, size, special_ids=None):
        self.candidates = np.asarray(candidates, np.int32)
        self.frequency = np.asarray(frequency, np.int64)
        if self.candidates.ndim != 2 or self.frequency.ndim != 1:
            raise ArgumentError(
                "A shortlist needs candidates (source vocabulary, K) and frequency (target "
                f"vocabulary,). Received shapes {self.candidates.shape} and "
                f"{self.frequency.shape}"
            )
        check_positive_int("size", size)
        check_positive_int("frequent", frequent)
        self.target_vocab_size = len(self.frequency)
        self.frequent = min(frequent, self.target_vocab_size)
        self.size = min(size, self.target_vocab_size)
        self.special_ids = dict(SPECIAL_IDS if special_ids is None else special_ids)
        ids = self.special_ids
        order = np.argsort(-self.frequency, kind="stable")  # most frequent first
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        # A piece's priority among the others: the more frequent, the higher.
        self._priority = (self.target_vocab_size - rank).astype(np.float32)  # (V,)
        always = np.zeros(self.target_vocab_size, bool)
        always[order[: self.frequent]] = True
        always[[i for i in (ids["unk"], ids["eos"]) if i < self.target_vocab_size]] = True
        always[[i for i in (ids["pad"], ids["bos"]) if i < self.target_vocab_size]] = False
        self._always = always
        if self.size < always.sum():
            raise ArgumentError(
                f"A shortlist of {size} target pieces is smaller than the {always.sum()} that "
                f"every batch keeps (the {self.frequent} most frequent, the unknown piece and "
                "EOS, less padding and BOS), so no piece a source lists could be decoded. Give "
                f"a size of at least {always.sum()}, or fewer frequent pieces "
                "(decode.shortlist_frequent)."
            )

    @classmethod
    def build(
        cls,
        source_rows,
        target_rows,
        source_vocab_size,
        target_vocab_size,
        per_source=20,
        frequent=256,
        size=1024,
        special_ids=None,
    ):
        """A shortlist counted from tokenized training pairs.

        Each source piece lists the `per_source` target pieces that occur in
        the most pairs with it, leaving out the `frequent` most frequent
        target pieces (every batch has those).

        Args:
            source_rows: the pairs' source token ids, a sequence of int
                sequences (ragged tensors' `to_list()` or lists of arrays).
            target_rows: their target token ids, as many sequences.
            source_vocab_size: the model's source vocabulary size.
            target_vocab_size: its target vocabulary size.
            per_source: candidates per source piece, K.
            frequent: most frequent target pieces kept for every batch.
            size: target pieces a batch decodes over.
            special_ids: the target vocabulary's special ids (see `Shortlist`).
        """
        check_positive_int("per_source", per_source)
        if len(source_rows) != len(target_rows):
            raise ArgumentError(
                f"A shortlist is counted from pairs: got {len(source_rows)} sources and "
                f"{len(target_rows)} targets"
            )
        keys, targets = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for source, target in zip(source_rows, target_rows, strict=True):
            targets.append(np.asarray(target, np.int64))
            pairs = np.unique(np.asarray(source, np.int64))[:, None] * target_vocab_size
            keys.append((pairs + np.unique(targets[-1])[None, :]).ravel())  # (s, t) once a pair
        frequency = np.bincount(np.concatenate(targets), minlength=target_vocab_size)
        keys, counts = np.unique(np.concatenate(keys), return_counts=True)
        common = np.argsort(-frequency, kind="stable")[:frequent]
        counts[np.isin(keys % target_vocab_size, common)] = 0  # batches have those anyway
        candidates = np.full((source_vocab_size, per_source), PAD_ID, np.int32)
        by_source = keys // target_vocab_size
        order = np.lexsort((-counts, by_source))  # per source piece, most pairs first
        keys, counts, by_source = keys[order], counts[order], by_source[order]
        starts = np.searchsorted(by_source, np.arange(source_vocab_size))
        ends = np.searchsorted(by_source, np.arange(source_vocab_size), side="right")
        for piece in np.flatnonzero(ends > starts):
            top = slice(starts[piece], min(ends[piece], starts[piece] + per_source))
            listed = keys[top][counts[top] > 0] % target_vocab_size
            candidates[piece, : len(listed)] = listed
        return cls(candidates, frequency, frequent, size, special_ids)

    def save(self, path):
        """Writes the shortlist to `path` (NumPy `.npz`)."""
        np.savez(
            path,
            candidates=self.candidates,
            frequency=self.frequency,
            frequent=self.frequent,
            size=self.size,
            special_ids=[self.special_ids[key] for key in SPECIAL_IDS],
        )

    @classmethod
    def load(cls, path, size=None):
        """The shortlist saved at `path`, optionally with another batch `size`.

        A file saved without special ids has the package's numbering.
        """
        with np.load(path) as saved:
            special_ids = None
            if "special_ids" in saved:
                special_ids = dict(zip(SPECIAL_IDS, saved["special_ids"].tolist(), strict=True))
            return cls(
                saved["candidates"],
                saved["frequency"],
                int(saved["frequent"]),
                int(saved["size"]) if size is None else size,
                special_ids,
            )

    def checked_for(self, tokenizer):
        """The shortlist, or an `ArgumentError` if it was counted for a vocabulary whose
        special ids are not `tokenizer`'s (the target tokenizer it decodes for)."""
        if self.special_ids != tokenizer.special_ids:
            raise ArgumentError(
                "The shortlist was counted for a vocabulary with other special ids: "
                f"{self.special_ids}, the target tokenizer's are {tokenizer.special_ids}. "
                "Count it for this vocabulary: Shortlist.build(..., "
                "special_ids=target_tokenizer.special_ids)."
            )
        return self

    def vocab_ids(self, source_ids):
        """The target pieces a batch decodes over: int32 `(size,)`, in no set order.

        Args:
            source_ids: int `(B, S)`, 0-padded: the batch's sources.
        """
        listed = tf.gather(tf.constant(self.candidates), tf.reshape(source_ids, [-1]))  # (B*S, K)
        hits = tf.math.bincount(
            tf.reshape(listed, [-1]),
            minlength=self.target_vocab_size,
            maxlength=self.target_vocab_size,
        )  # (V,)
        hits = tf.where(tf.range(self.target_vocab_size) == PAD_ID, 0, hits)
        # Every batch's pieces first, then those listed by more of the batch's source
        # pieces, then the more frequent.
        vocab = float(self.target_vocab_size)
        priority = tf.cast(hits, tf.float32) * vocab + self._priority
        priority = tf.where(self._always, vocab * vocab * vocab, priority)
        return tf.math.top_k(priority, self.size, sorted=False).indices  # (size,)

    def union_size(self, source_ids):
        """How many target pieces the union of a batch's lists holds, before it is cut
        or filled to `size`."""
        listed = set(self.candidates[np.asarray(source_ids)].ravel().tolist())
        return len((listed | set(np.flatnonzero(self._always).tolist())) - {PAD_ID})

    @property
    def always_ids(self):
        """The target pieces of every batch's union: int `(n,)`."""
        return np.flatnonzero(self._always)


class Shortlisted(StepWrapper):
    """A model decoded over its batch's shortlist: the other pieces get logit -inf.

    Every search decodes through it as through the model itself; the
    logits it returns are the model's at the listed pieces. Any `StepModel`
    whose `restricts_vocabulary` is True can be shortlisted: a
    `keras_transformer.Transformer`, or an `inference.Ensemble` of them.

    Args:
        model: a `models.StepModel` that restricts its vocabulary.
        shortlist: a `Shortlist` of the model's vocabularies.

    Examples:
        ```python
        token_ids, scores = beam_search(Shortlisted(model, shortlist), source_ids, 2, 3)
        ```
    """

    restricts_vocabulary = False  # its logits span the vocabulary again

    def __init__(self, model, shortlist):
        if not (isinstance(model, StepModel) and model.restricts_vocabulary):
            raise ArgumentError(
                f"A shortlist decodes a model that restricts its vocabulary "
                f"(`restricts_vocabulary`); {type(model).__name__} does not"
            )
        if shortlist.target_vocab_size != model.target_vocab_size:
            raise ArgumentError(
                f"The shortlist has {shortlist.target_vocab_size} target pieces, the model "
                f"{model.target_vocab_size}."
            )
        super().__init__(model)
        self.shortlist = shortlist

    def encode(self, source_ids):
        ids = self.shortlist.vocab_ids(source_ids)  # (n,)
        n, vocab = tf.shape(ids)[0], self.model.target_vocab_size
        # Column of each vocabulary piece in the shortlisted logits; n: the -inf column.
        column = tf.tensor_scatter_nd_update(tf.fill([vocab], n), ids[:, None], tf.range(n))
        state = self.model.restrict_vocabulary(self.model.encode(source_ids), ids)
        return {"model": state, "column": column}

    def initial_cache(self, state, max_length, beam_size=1):
        return self.model.initial_cache(state["model"], max_length, beam_size)

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        logits, cache, attention = self.model.decode_step(
            token_ids, step, cache, state["model"], attention_layer
        )  # (B*k, n)
        unlisted = tf.fill([tf.shape(logits)[0], 1], MINUS_INF)
        logits = tf.gather(tf.concat([logits, unlisted], axis=1), state["column"], axis=1)
        return Step(logits, cache, attention)  # (B*k, V)
