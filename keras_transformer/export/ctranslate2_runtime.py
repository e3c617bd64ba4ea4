"""Translating with a model written by `export_ctranslate2`: `CTranslate2Translator`.

CTranslate2 runs the encoder, the decoder and the search; the package's own
tokenizers (saved beside the model) give the pieces, cut as every path of the
package cuts a source (`keras_transformer.text.SourcePolicy`). Requires the
optional `ctranslate2` package.
"""

import math
import os

import numpy as np
import tensorflow as tf

from keras_transformer.export.ctranslate2 import (
    DECODE_FILE,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    _ctranslate2,
)
from keras_transformer.export.options import read_options
from keras_transformer.inference.checks import check_sentences
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.inference.probabilities import length_penalty
from keras_transformer.text import SourcePolicy, load_tokenizer
from keras_transformer.validation import check_at_least, check_choice

RANKINGS = ("package", "ctranslate2")
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

    Beam search ranks its hypotheses as the package does by default: the
    beam's `beam_size` ended hypotheses come back with their log-probabilities,
    and the one with the best GNMT score, log P / ((5 + |Y|) / 6) ** alpha,
    is the translation. `ranking="ctranslate2"` keeps CTranslate2's own
    ranking, log P / |Y| ** alpha, which favours other lengths.

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
        ranking: `"package"` (GNMT's length penalty: the package's
            translations) or `"ctranslate2"` (CTranslate2's length penalty;
            with the default patience, CTranslate2's own beam search).

    Examples:
        ```python
        translate = CTranslate2Translator("ct2_model", beam_size=1)
        translate(["ein Hund läuft."])  # ['a dog runs.']
        ```
    """

    def __init__(
        self,
        directory,
        beam_size=None,
        alpha=None,
        compute_type="default",
        intra_threads=0,
        patience=None,
        ranking="package",
    ):
        ct2 = _ctranslate2()
        check_choice("ranking", ranking, set(RANKINGS))
        written = read_options(directory, DECODE_FILE, "CTranslate2")
        options = DecodeOptions.from_dict(written, others=("quantization", "shortlist"))
        if patience is None:
            patience = options.patience or PATIENCE[ranking]
        check_at_least("patience", patience, 1)
        self.patience = patience
        self.ranking = ranking
        self.beam_size = options.beam_size if beam_size is None else beam_size
        self.alpha = options.alpha if alpha is None else alpha
        self.max_length = options.max_length
        self.max_source_length = options.max_source_length
        self.use_vmap = written.get("shortlist", False)
        self.length_options = options.length_options
        self.source_tokenizer = load_tokenizer(os.path.join(directory, SOURCE_TOKENIZER))
        self.target_tokenizer = load_tokenizer(os.path.join(directory, TARGET_TOKENIZER))
        self.source_policy = SourcePolicy(self.max_source_length, self.source_tokenizer.eos_id)
        self._source_pieces = self.source_tokenizer.pieces
        target_pieces = self.target_tokenizer.pieces
        self._target_ids = {p: i for i, p in enumerate(target_pieces)}
        # As in the package's search: padding and BOS get probability zero.
        self._never_generated = [
            [target_pieces[self.target_tokenizer.pad_id]],
            [target_pieces[self.target_tokenizer.bos_id]],
        ]
        self.translator = ct2.Translator(
            os.fspath(directory),
            device="cpu",
            compute_type=compute_type,
            intra_threads=intra_threads,
        )

    def limit(self, source_length):
        """Most target tokens for a source of `source_length` pieces (EOS not counted)."""
        a, b = self.length_options.max_length_a, self.length_options.max_length_b
        b = self.max_length if b is None else b
        return max(1, min(self.max_length, math.floor(a * (source_length + 1) + b)))

    def translate_pieces(self, source_pieces, max_batch_size=64):
        """Target pieces for lists of source pieces (EOS is appended by the model)."""
        targets = [[] for _ in source_pieces]  # an empty source stays empty
        by_limit = {}
        for index, pieces in enumerate(source_pieces):
            if pieces:
                by_limit.setdefault(self.limit(len(pieces)), []).append(index)
        own_ranking = self.beam_size == 1 or self.ranking == "ctranslate2"
        for limit, indices in by_limit.items():
            results = self.translator.translate_batch(
                [source_pieces[i] for i in indices],
                beam_size=self.beam_size,
                length_penalty=self.alpha if self.beam_size > 1 else 0.0,
                num_hypotheses=1 if own_ranking else self.beam_size,
                return_scores=not own_ranking,
                patience=self.patience,
                max_decoding_length=limit,
                min_decoding_length=self.length_options.min_length,
                no_repeat_ngram_size=self.length_options.no_repeat_ngram_size,
                max_batch_size=max_batch_size,
                suppress_sequences=self._never_generated,
                use_vmap=self.use_vmap,
            )
            for i, result in zip(indices, results, strict=True):
                targets[i] = result.hypotheses[0] if own_ranking else self.best(result)
        return targets

    def best(self, result):
        """The hypothesis of a CTranslate2 `result` with the best GNMT score.

        CTranslate2 scores a hypothesis log P / |Y| ** alpha, |Y| counting its
        EOS as the package counts it.
        """
        lengths = np.array([len(h) + 1 for h in result.hypotheses], np.float64)  # (N,)
        log_probs = np.array(result.scores) * lengths**self.alpha  # (N,)
        scores = log_probs / length_penalty(lengths, self.alpha).numpy()
        return result.hypotheses[int(np.argmax(scores))]

    def source_pieces(self, sentences):
        """The pieces each of `sentences` `(B,)` is translated from: cut, EOS not yet added."""
        ids = self.source_tokenizer.tokenize(check_sentences(sentences)).to_list()
        return [[self._source_pieces[i] for i in self.source_policy.pieces(row)] for row in ids]

    def __call__(self, sentences, max_batch_size=64):
        """Translations of `sentences` (a list of `str`), as a list of `str`."""
        sentences = check_sentences(sentences)  # (B,)
        if sentences.shape[0] == 0:
            return []
        targets = self.translate_pieces(self.source_pieces(sentences), max_batch_size)
        target_ids = tf.ragged.constant(
            [
                [self._target_ids.get(p, self.target_tokenizer.unk_id) for p in row]
                for row in targets
            ],
            dtype=tf.int32,
            ragged_rank=1,
        )
        texts = self.target_tokenizer.detokenize(target_ids).numpy()
        return [t.decode("utf-8") for t in texts]
