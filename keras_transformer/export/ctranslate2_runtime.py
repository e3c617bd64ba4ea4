"""Translating with a model written by `export_ctranslate2`: `CTranslate2Translator`.

CTranslate2 runs the encoder, the decoder and the search; the package's own
tokenizers (saved beside the model) give the pieces, cut as every path of the
package cuts a source (`keras_transformer.text.SourcePolicy`). Requires the
optional `ctranslate2` package.
"""

import math
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.export.ctranslate2_layout import (
    DECODE_FILE,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    import_ctranslate2,
)
from keras_transformer.export.options import open_export_file, read_options
from keras_transformer.inference.checks import (
    check_prefix_lengths,
    check_sentences,
    refuse_unknown_pieces,
)
from keras_transformer.inference.engine import Translations, refuse_arguments
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.inference.probabilities import length_penalty
from keras_transformer.inference.rules import output_limits
from keras_transformer.text import SourcePolicy, load_tokenizer
from keras_transformer.text.languages import language_prefix
from keras_transformer.validation import check_at_least, check_choice

RANKINGS = ("package", "ctranslate2")
COMPUTE_TYPES = (  # CTranslate2's; one the CPU lacks is replaced by the nearest it has
    "default",
    "auto",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
# The patience of a search exported without one (the package's stops when its output is
# certain, which CTranslate2 cannot): 4 gives the package's beam 4 outputs on the main
# job's test split (docs/guides/ctranslate2.md); CTranslate2's own is 1.
PATIENCE = {"package": 4, "ctranslate2": 1}


class CTranslate2Translator:
    """Translates strings with a model written by `export_ctranslate2`.

    Tokenization uses the package's own tokenizers (TensorFlow Text), so the
    ids are the ones the model was trained on; CTranslate2 runs the encoder,
    the decoder and the search. The exported length options map to
    CTranslate2's: `min_length` to `min_decoding_length`,
    `no_repeat_ngram_size` to its own, and a limit of `max_length_a` and
    `max_length_b` to `max_decoding_length`, sentence by sentence (sentences
    of one limit are translated together). CTranslate2 cuts an output at
    that limit where the package's search ends it with EOS, so outputs that
    reach it can differ.

    Beam search ranks its hypotheses as the package does by default: every
    hypothesis that ended (`beam_size * patience` of them) comes back with its
    log-probability, and the one with the best score under the exported
    `length_penalty` is the translation: GNMT's, log P / ((5 + |Y|) / 6) ** alpha,
    or "average", log P / |Y| ** alpha, which is CTranslate2's own. CTranslate2 takes
    the tokens that `no_repeat_ngram_size` and `min_length` forbid away
    before its softmax, so the probabilities it searches with are raised by
    theirs; with either option the hypotheses are scored again without it
    (`score_batch`), as the package scores them. `ranking="ctranslate2"`
    keeps CTranslate2's own ranking, log P / |Y| ** alpha, which with GNMT's
    penalty favours other lengths.

    Args:
        directory: a directory written by `export_ctranslate2`.
        beam_size: 1 for greedy; defaults to the exported translator's.
        alpha: the length penalty's alpha; defaults to the exported
            translator's.
        compute_type: CTranslate2's compute type, e.g. `"default"` (the
            saved weights), `"int8"`, `"float32"`.
        intra_threads: threads per translation (0: CTranslate2's default).
        patience: CTranslate2's beam search patience: a sentence's search
            goes on until `beam_size * patience` hypotheses have ended;
            defaults to the exported translator's. A translator exported
            without one stops when its output is certain, which CTranslate2
            cannot: then 4 with the package's ranking, 1 (CTranslate2's
            default, the soonest) with its own.
        ranking: `"package"` (the exported length penalty: the package's
            translations) or `"ctranslate2"` (CTranslate2's length penalty;
            with the default patience, CTranslate2's own beam search).
        length_penalty: `"gnmt"` or `"average"` (`DecodeOptions.length_penalty`);
            defaults to the exported translator's.

    Examples:
        ```python
        translate = CTranslate2Translator("ct2_model", beam_size=1)
        translate(["ein Hund läuft."])  # ['a dog runs.']
        ```
    """

    def __init__(
        self,
        directory: str,
        beam_size: int | None = None,
        alpha: float | None = None,
        compute_type: str = "default",
        intra_threads: int = 0,
        patience: float | None = None,
        ranking: str = "package",
        length_penalty: str | None = None,
    ):
        ct2 = import_ctranslate2()
        check_choice("ranking", ranking, set(RANKINGS))
        check_choice("compute_type", compute_type, set(COMPUTE_TYPES))
        written = read_options(directory, DECODE_FILE, "CTranslate2")
        options = DecodeOptions.from_dict(written, others=("quantization", "shortlist"))
        if patience is None:
            patience = options.patience or PATIENCE[ranking]
        check_at_least("patience", patience, 1)
        self.patience = patience
        self.ranking = ranking
        self.beam_size = options.beam_size if beam_size is None else beam_size
        # CTranslate2's search ends when this many hypotheses have ended: all are ranked.
        self.ended_hypotheses = round(self.beam_size * patience)
        self.n_best = min(options.n_best, self.beam_size)
        self.alpha = options.alpha if alpha is None else alpha
        if length_penalty is not None:
            options = options.replace(length_penalty=length_penalty)
        self.length_penalty = options.length_penalty
        self.max_length = options.max_length
        self.max_source_length = options.max_source_length
        self.use_vmap = written.get("shortlist", False)
        self.length_options = options.length_options
        self.source_tokenizer, self.target_tokenizer = (
            open_export_file(directory, name, load_tokenizer, "a tokenizer", "ctranslate2")
            for name in (SOURCE_TOKENIZER, TARGET_TOKENIZER)
        )
        self.source_policy = SourcePolicy(
            self.max_source_length,
            self.source_tokenizer.eos_id,
            language_prefix(self.source_tokenizer, options.target_language),
        )
        self._source_pieces = self.source_tokenizer.pieces
        target_pieces = self.target_tokenizer.pieces
        self._target_ids = {p: i for i, p in enumerate(target_pieces)}
        # As in the package's search: padding and BOS get probability zero.
        self._never_generated = [
            [target_pieces[self.target_tokenizer.pad_id]],
            [target_pieces[self.target_tokenizer.bos_id]],
        ]
        self.translator = open_export_file(
            directory,
            "model.bin",
            lambda _: ct2.Translator(
                os.fspath(directory),
                device="cpu",
                compute_type=compute_type,
                intra_threads=intra_threads,
            ),
            "a CTranslate2 model",
            "ctranslate2",
        )

    def translate_pieces(self, source_pieces, max_batch_size=64):
        """Target pieces for lists of source pieces (EOS is appended by the model)."""
        return [ranked[0][0] for ranked in self.search_pieces(source_pieces, None, max_batch_size)]

    def search_pieces(self, source_pieces, prefix_pieces=None, max_batch_size=64):
        """Per source, its `n_best` outputs as `(target pieces, score)`, best first.

        Args:
            source_pieces: lists of source pieces (EOS is appended by the model).
            prefix_pieces: optional lists of target pieces each output starts
                with (`[]` for none).
            max_batch_size: sentences per CTranslate2 batch.

        The score is the package's, log P / its length penalty, with EOS
        counted in |Y| when the output has one (not when it stops at its limit).
        """
        prefix_pieces = prefix_pieces or [[] for _ in source_pieces]
        ranked = [None] * len(source_pieces)
        by_limit, empty = {}, []
        language = len(self.source_policy.prefix)  # a source's own pieces come after it
        limits = self.limits([len(p) for p in source_pieces], [len(p) for p in prefix_pieces])
        for index, (pieces, prefix) in enumerate(zip(source_pieces, prefix_pieces, strict=True)):
            if len(pieces) > language or prefix:
                by_limit.setdefault(int(limits[index]), []).append(index)
            else:
                empty.append(index)
        if empty:  # the output is EOS at once, as in the package's search: score it
            # The same source (the prefix alone) for every one.
            (result,) = self.translator.score_batch([source_pieces[empty[0]]], [[]])
            score = sum(result.log_probs) / float(self.penalty(1.0))
            for index in empty:
                ranked[index] = [([], score)] + [([], -math.inf)] * (self.n_best - 1)
        own_ranking = self.beam_size == 1 or self.ranking == "ctranslate2"
        for limit, indices in by_limit.items():
            results = self.translator.translate_batch(
                [source_pieces[i] for i in indices],
                target_prefix=[prefix_pieces[i] or None for i in indices],
                beam_size=self.beam_size,
                length_penalty=self.alpha if self.beam_size > 1 else 0.0,
                num_hypotheses=self.n_best if own_ranking else self.ended_hypotheses,
                return_scores=True,
                patience=self.patience,
                max_decoding_length=limit,
                min_decoding_length=self.length_options.min_length,
                no_repeat_ngram_size=self.length_options.no_repeat_ngram_size,
                max_batch_size=max_batch_size,
                suppress_sequences=self._never_generated,
                use_vmap=self.use_vmap,
            )
            scores = self.scores(
                results,
                limit,
                [source_pieces[i] for i in indices],
                [prefix_pieces[i] for i in indices],
                max_batch_size,
            )
            for i, result, score in zip(indices, results, scores, strict=True):
                order = range(len(score)) if own_ranking else np.argsort(-score, kind="stable")
                ranked[i] = [(result.hypotheses[j], float(score[j])) for j in order][: self.n_best]
        return ranked

    def penalty(self, length):
        """What the package divides the log P of an output of `length` tokens by."""
        return length_penalty(length, self.alpha, self.length_penalty)

    def limits(self, source_lengths, prefix_lengths):
        """Most target tokens for sources of `source_lengths` pieces (EOS not counted), at
        least each prefix of `prefix_lengths` pieces and EOS, at most `max_length`: an int
        array `(B,)`, from the searches' own rule (`inference.rules.output_limits`), applied
        to the whole batch at once."""
        source_lengths = np.asarray(source_lengths, np.int32) + 1  # with EOS
        limits = output_limits(self.max_length, self.length_options, source_lengths, prefix_lengths)
        return limits.numpy()

    def scores(self, results, limit, sources, prefixes, max_batch_size=64):
        """The package's score, log P / length penalty (`self.penalty`), of each hypothesis of
        CTranslate2's `results` of `sources` from `prefixes` (lists of pieces): a
        float64 `(N,)` array per result, -inf for a hypothesis that cannot be
        among the `n_best`.

        CTranslate2 scores a hypothesis log P / |Y| ** alpha (alpha 0 for
        greedy), |Y| counting its EOS as the package counts it; an output
        that stops at `limit` tokens has no EOS. Its log P can be higher than
        the package's: it leaves a prefix's tokens out, and it raises every
        token's probability by that of the tokens `no_repeat_ngram_size` and
        `min_length` forbid (taken away before its softmax, where the package
        takes them away after it). Such hypotheses are scored again whole
        (`score_batch`): all of an output with a prefix; without one, the
        `n_best` whose CTranslate2 score is highest, then, one at a time,
        the one whose CTranslate2 score (a bound of the package's) is highest
        while that bound could still place it among the `n_best`. `score_batch`'s
        softmax, unlike the search's, keeps padding and BOS: a score found
        so is lower by their probability (about 0.01 on a small model).
        """
        ct2_alpha = self.alpha if self.beam_size > 1 else 0.0
        has_eos = [np.array([len(h) < limit for h in r.hypotheses]) for r in results]  # (N,) each
        lengths = [  # |Y|, EOS counted where there is one: (N,) each
            np.array([len(h) for h in r.hypotheses], np.float64) + eos
            for r, eos in zip(results, has_eos, strict=True)
        ]
        # One penalty call for every hypothesis of the batch: (sum N,), split per result.
        every = self.penalty(np.concatenate(lengths)).numpy()
        penalties = np.split(every, np.cumsum([len(n) for n in lengths])[:-1])
        scores = [
            np.array(r.scores) * length**ct2_alpha / penalty  # (N,)
            for r, length, penalty in zip(results, lengths, penalties, strict=True)
        ]
        renormalized = self.length_options.no_repeat_ngram_size or self.length_options.min_length
        exact = [
            np.full(len(s), not (prefix or renormalized))
            for s, prefix in zip(scores, prefixes, strict=True)
        ]

        def score_again(picks):  # [(result, hypothesis)]
            scored = self.translator.score_batch(
                [sources[r] for r, _ in picks],
                [results[r].hypotheses[j] for r, j in picks],
                max_batch_size=max_batch_size,
            )
            for (r, j), s in zip(picks, scored, strict=True):
                log_p = sum(s.log_probs[: len(s.log_probs) - (not has_eos[r][j])])  # EOS's is last
                scores[r][j] = log_p / penalties[r][j]
                exact[r][j] = True

        picks = [
            (r, j)
            for r, (s, prefix) in enumerate(zip(scores, prefixes, strict=True))
            for j in (range(len(s)) if prefix else np.argsort(-s, kind="stable")[: self.n_best])
            if not exact[r][j]
        ]
        while picks:  # then, per sentence not settled, the hypothesis whose bound is highest
            score_again(picks)
            picks = [
                (r, int(np.argmax(np.where(known, -math.inf, s))))
                for r, (s, known) in enumerate(zip(scores, exact, strict=True))
                if not settled(s, known, self.n_best)
            ]
        return [np.where(known, s, -math.inf) for s, known in zip(scores, exact, strict=True)]

    def source_pieces(self, sentences):
        """The pieces each of `sentences` `(B,)` is translated from: cut, EOS not yet added."""
        ids = self.source_tokenizer.tokenize(check_sentences(sentences)).to_list()
        return [[self._source_pieces[i] for i in self.source_policy.pieces(row)] for row in ids]

    def truncated(self, sentences):
        """Which of `sentences` `(B,)` are cut to `max_source_length`: bool array `(B,)`."""
        pieces = self.source_tokenizer.tokenize(check_sentences(sentences))
        return self.source_policy.tf_truncated(pieces).numpy()

    def __call__(self, sentences: Sequence[str], max_batch_size: int = 64) -> list[str]:
        """Translations of `sentences` (a list of `str`), as a list of `str`."""
        sentences = check_sentences(sentences)  # (B,)
        if sentences.shape[0] == 0:
            return []
        return self.texts(self.translate_pieces(self.source_pieces(sentences), max_batch_size))

    def translate(
        self,
        sentences: Sequence[str],
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        max_batch_size: int = 64,
    ) -> Translations:
        """Translations with their scores, optionally from target prefixes, as every
        engine gives them (`inference.engine`).

        Args:
            sentences: strings `(B,)`.
            prefixes: optional strings `(B,)`: each translation starts with
                its prefix ("" leaves the sentence free).
            constraints: not taken (an `ArgumentError` says so): CTranslate2
                has no phrase constraints.
            max_batch_size: sentences per CTranslate2 batch.

        Returns:
            `inference.Translations`: `translations`, `str` `(B, n_best)`,
            `scores`, float32 `(B, n_best)`: log P / GNMT length penalty, best
            first, and `truncated`, bool `(B,)`.

        Examples:
            ```python
            CTranslate2Translator("ct2_model").translate(["zwei"], prefixes=["the"])
            ```
        """
        refuse_arguments(self, "CTranslate2 has no phrase constraints", constraints=constraints)
        sentences = check_sentences(sentences)  # (B,)
        prefix_pieces = None
        if prefixes is not None:
            prefixes = check_sentences(prefixes, "prefixes")
            ids = self.target_tokenizer.tokenize(prefixes).to_list()
            check_prefix_lengths(sentences.shape[0], [len(row) for row in ids], self.max_length)
            unk = self.target_tokenizer.unk_id
            refuse_unknown_pieces([unk in row for row in ids], prefixes.numpy(), "prefix")
            pieces = self.target_tokenizer.pieces
            prefix_pieces = [[pieces[i] for i in row] for row in ids]
        ranked = self.search_pieces(self.source_pieces(sentences), prefix_pieces, max_batch_size)
        texts = self.texts([pieces for outputs in ranked for pieces, _ in outputs])
        n = self.n_best
        return Translations.of(
            [texts[row * n : (row + 1) * n] for row in range(len(ranked))],
            [[score for _, score in outputs] for outputs in ranked],
            self.truncated(sentences),
        )

    def texts(self, targets):
        """The strings of lists of target pieces: a list of `str`."""
        if not targets:
            return []
        target_ids = tf.ragged.constant(
            [
                [self._target_ids.get(p, self.target_tokenizer.unk_id) for p in row]
                for row in targets
            ],
            dtype=tf.int32,
            ragged_rank=1,
        )
        return [t.decode("utf-8") for t in self.target_tokenizer.detokenize(target_ids).numpy()]


def settled(scores, exact, n):
    """Whether the `n` best of a sentence's hypotheses are known: `scores` `(N,)`
    holds package scores where `exact` `(N,)` is True and upper bounds of them
    elsewhere, and none of the bounds beats the `n`-th best exact score."""
    known = np.sort(scores[exact])[::-1]  # best first
    if exact.all():
        return True
    return len(known) >= n and known[n - 1] >= scores[~exact].max()
