"""`Translator`: strings in, strings out, with the tokenizers and the search in one graph."""

import logging

import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.bucketed_search import shared_search
from keras_transformer.inference.checks import check_sentences
from keras_transformer.inference.engine import Translations
from keras_transformer.inference.ensemble import Ensemble
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.inference.shortlist import Shortlist
from keras_transformer.inference.target_inputs import TargetInputs
from keras_transformer.models import StepModel, Transformer
from keras_transformer.models.step import max_positions_of
from keras_transformer.text import SourcePolicy, Tokenizer
from keras_transformer.text.languages import language_prefix
from keras_transformer.validation import check_choice, check_tensorflow_backend

COMPUTE_DTYPES = ("float32", "bfloat16")


def in_compute_dtype(model, dtype):
    """`model` (a `Transformer` or an `Ensemble` of them) computing in `dtype`: the model
    itself for `"float32"` or when it computes in `dtype` already, else a copy."""
    check_choice("compute_dtype", dtype, COMPUTE_DTYPES)
    if dtype == "float32":
        return model
    if isinstance(model, Ensemble):
        members = [in_compute_dtype(member, dtype) for member in model.models]
        same = all(a is b for a, b in zip(members, model.models, strict=True))
        return model if same else Ensemble(members)
    if not isinstance(model, Transformer):
        raise ArgumentError(
            f"compute_dtype={dtype!r} copies a keras_transformer.Transformer (or an Ensemble "
            f"of them) into {dtype}. Received: a model of type {type(model).__name__}"
        )
    return model.dtype_copy(dtype)


class TranslatorRetracingFilter(logging.Filter):
    """Drops TensorFlow's "triggered tf.function retracing" warning about a `Translator`'s
    own traced methods.

    Each `Translator` traces its search once, by design; several translators (an
    evaluation over beam sizes, a loop over options) trace the same methods once each,
    which TensorFlow counts as retracing one function and answers with advice that
    does not apply (define the function outside the loop). Its warning about any other
    function passes.
    """

    TRACED = ("Translator._translate_strings", "Translator.translate_ids")

    def filter(self, record):
        message = record.getMessage()
        if "triggered tf.function retracing" not in message:
            return True
        return not any(f"<function {name} at " in message for name in self.TRACED)


tf.get_logger().addFilter(TranslatorRetracingFilter())


class Translator(tf.Module):
    """Translates a batch of sentences with a trained `Transformer`.

    Tokenizes the sources (each gets the EOS the model was trained with),
    searches with cached keys and values, and detokenizes. Everything runs in
    TensorFlow ops, so the translator can be saved as one SavedModel
    (`keras_transformer.export.export_translator`).

    Any input gives one output string: empty and whitespace-only inputs are
    translated as the empty string; invalid UTF-8 and unseen characters become
    the unknown id; sources longer than `max_source_length` tokens are cut to
    it (their first pieces, with EOS and any target-language token, fill
    `max_source_length`), which `translate` and `truncated` report. A model
    with a learned position table reads at most its `max_positions` tokens:
    `max_source_length` is lowered to that, and a `max_length` over it is
    refused.

    Args:
        model: a trained `keras_transformer.Transformer`, or an `Ensemble`
            of models that share the tokenizers.
        source_tokenizer: the source side's `keras_transformer.text.Tokenizer`.
        target_tokenizer: the target side's tokenizer (may be the same).
        options: the search's `inference.DecodeOptions` (beam size, length
            penalty, lengths, repetition, patience, sampling). Defaults to
            `DecodeOptions()`: beam search of 4, alpha 0.6, at most 64 tokens.
        jit_compile: whether to compile the search with XLA (faster on a
            CPU once compiled, a compilation for each new batch and length
            bucket; docs/benchmarks.md); the tokenizers always run uncompiled.
        grow_cache: whether the search starts with a short cache and
            doubles it when full (faster per sentence; one loop to trace and
            compile per cache size, docs/design/decoding-cache.md). False
            decodes in one cache of `max_length` (`models.FixedCache`): the
            first call returns sooner, for a process that translates a few
            sentences. The outputs are the same.
        shortlist: optional `inference.Shortlist`: each batch decodes over
            its sources' candidate target pieces only (the others get
            probability zero), for a cheaper output projection.
        compute_dtype: `"float32"` or `"bfloat16"`: the search runs a copy of
            the model with bfloat16 weights (`Transformer.dtype_copy`), half
            the bytes a step reads; faster in batches where the CPU has
            bfloat16 instructions (AVX-512 BF16, AMX), slower where it has
            not. Outputs may differ from float32's (docs/benchmarks.md).
        **option_values: options by name, replacing those of `options`
            (`beam_size=1`, `max_length=32`, ...; the fields of
            `DecodeOptions`). Each is also readable as an attribute
            (`translator.beam_size`).

    Raises:
        ValueError: on an option out of range or unknown, a tokenizer whose
            vocabulary is larger than the model's embedding, or a
            `max_length` over the model's `max_positions`.

    Examples:
        ```python
        translator = Translator(model, source_tokenizer, target_tokenizer, beam_size=4)
        translator(tf.constant(["ein Hund läuft."])).numpy()  # array([b'a dog runs.'])
        translator.copy(n_best=2).translate(["ein Hund läuft."]).translations  # str (1, 2)
        ```
    """

    def __init__(
        self,
        model: StepModel,
        source_tokenizer: Tokenizer,
        target_tokenizer: Tokenizer,
        options: DecodeOptions | None = None,
        *,
        jit_compile: bool = True,
        grow_cache: bool = True,
        shortlist: Shortlist | None = None,
        compute_dtype: str = "float32",
        **option_values,
    ):
        check_tensorflow_backend("Translator")
        model = in_compute_dtype(model, compute_dtype)
        super().__init__(name="translator")
        if options is None:
            options = DecodeOptions()
        elif not isinstance(options, DecodeOptions):
            raise ArgumentError(
                "`options` must be a `DecodeOptions`; give single options by name "
                f"(max_length=64, beam_size=4). Received: options={options!r:.80}"
            )
        options = options.replace(**option_values)
        for side, tokenizer, model_vocab in [
            ("source", source_tokenizer, model.input_vocab_size),
            ("target", target_tokenizer, model.target_vocab_size),
        ]:
            if tokenizer.vocab_size > model_vocab:
                raise ArgumentError(
                    f"The {side} tokenizer does not fit the model: it has "
                    f"{tokenizer.vocab_size} ids, the model's {side} vocabulary "
                    f"{model_vocab}."
                )
        limit = max_positions_of(model)
        if limit is not None:  # a learned position table: sources are cut to it
            if options.max_length > limit:
                raise ArgumentError(
                    f"The model reads at most {limit} positions (its `max_positions`), "
                    f"fewer than `max_length`. Received: max_length={options.max_length}"
                )
            options = options.replace(max_source_length=min(options.max_source_length, limit))
        self.max_positions = limit
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.options = options
        self.source_policy = SourcePolicy(
            options.max_source_length,
            source_tokenizer.eos_id,
            language_prefix(source_tokenizer, options.target_language),
        )
        self.jit_compile = jit_compile
        self.grow_cache = grow_cache
        self.shortlist = shortlist
        self.compute_dtype = compute_dtype
        self.bucketed_search = shared_search(
            model,
            source_tokenizer,
            target_tokenizer,
            options,
            jit_compile=jit_compile,
            grow_cache=grow_cache,
            shortlist=shortlist,
            source_prefix_length=len(self.source_policy.prefix),
        )

    def copy(self, **changes):
        """A new `Translator` of the same model and tokenizers, with `changes` to its options.

        `changes` may name any argument of `Translator` and any field of
        `DecodeOptions`.

        Examples:
            ```python
            greedy = translator.copy(beam_size=1)
            ```
        """
        arguments = {
            "model": self.model,
            "source_tokenizer": self.source_tokenizer,
            "target_tokenizer": self.target_tokenizer,
            "options": self.options,
            "jit_compile": self.jit_compile,
            "grow_cache": self.grow_cache,
            "shortlist": self.shortlist,
            "compute_dtype": self.compute_dtype,
        }
        given = {name: changes.pop(name) for name in list(changes) if name in arguments}
        return Translator(**{**arguments, **given}, **changes)  # the rest are options

    @property
    def length_options(self):
        """The length and repetition options of `options`, as the searches take them."""
        return self.options.length_options

    def __call__(self, sentences, constraints=None):
        """Translates `sentences` `(B,)` into strings `(B,)`.

        Args:
            sentences: strings `(B,)`.
            constraints: optional target phrases each translation must
                contain: per sentence a list of strings (`[]` for none), or
                strings `(B, C)` with `""` for none (see `translate`).
        """
        if constraints is None:
            return self._translate_strings(check_sentences(sentences))
        return self.translate_tensors(sentences, constraints=constraints)["translations"][:, 0]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")], autograph=False)
    def _translate_strings(self, sentences):
        # A server passes tensors of any shape through unchecked: check at run time.
        sentences = tf.ensure_shape(sentences, [None], name="inputs_must_be_a_vector")
        return self.target_tokenizer.detokenize(self.translate_ids(self.source_ids(sentences)))

    def truncated(self, sentences):
        """Which of `sentences` `(B,)` are cut to `max_source_length`: bool `(B,)`.

        Examples:
            ```python
            translator.truncated(["zwei", "eins " * 300]).numpy()  # array([False,  True])
            ```
        """
        return self.source_policy.tf_truncated(
            self.source_tokenizer.tokenize(check_sentences(sentences))
        )

    def source_ids(self, sentences):
        """Tokenized sources, cut to `max_source_length` with EOS: int32 `(B, S)`."""
        pieces = self.source_tokenizer.tokenize(check_sentences(sentences))  # ragged (B, None)
        return self.source_policy.tf_ids(pieces)  # (B, S)

    def translate(self, sentences, prefixes=None, constraints=None):
        """Translations with their scores, optionally from given target prefixes and
        containing given phrases: the `Translations` every engine returns.

        Args:
            sentences: strings `(B,)` (a list or a `tf.string` tensor).
            prefixes: optional strings `(B,)`: each translation starts with
                its prefix (an empty one leaves the sentence free). A prefix
                of `max_length` tokens is the whole output, without EOS.
            constraints: optional target phrases each translation must
                contain as one contiguous run of tokens, as whole words
                (`inference.constraints`): per sentence a list of strings,
                or strings `(B, C)` with `""` for none.

        Returns:
            `inference.Translations`: `translations`, `str` `(B, n_best)`,
            `scores`, float32 `(B, n_best)`: log P / length_penalty, best
            first for beam search, and `truncated`, bool `(B,)`: the sources
            cut to `max_source_length`.

        Raises:
            ValueError: if `prefixes` or `constraints` and `sentences` differ
                in number, a prefix has more than `max_length` tokens, or a
                sentence's phrases (and prefix) do not fit in `max_length`
                tokens with EOS; an `ArgumentError` inside a `tf.function`,
                where `translate_tensors` gives the same as tensors.
        """
        if not tf.executing_eagerly():
            raise ArgumentError(
                "Translator.translate returns Python values and runs eagerly; inside a "
                "tf.function call Translator.translate_tensors."
            )
        return Translations.of(**self.translate_tensors(sentences, prefixes, constraints))

    def translate_tensors(self, sentences, prefixes=None, constraints=None):
        """`translate` as TensorFlow tensors, for a graph (the SavedModel's signatures): a
        dict of `"translations"` tf.string `(B, n_best)`, `"scores"` float32 `(B, n_best)`
        and `"truncated"` bool `(B,)`. Arguments and checks are those of `translate`."""
        sentences = check_sentences(sentences)
        inputs = TargetInputs(self.target_tokenizer, self.max_length)
        prefix_ids = constraint_ids = None
        if prefixes is not None:
            prefix_ids = inputs.prefix_ids(sentences, check_sentences(prefixes, "prefixes"))
        if constraints is not None:
            constraint_ids = inputs.constraint_ids_for(sentences, constraints)
        pieces = self.source_tokenizer.tokenize(sentences)  # ragged (B, None), tokenized once
        result = self.search(self.source_policy.tf_ids(pieces), prefix_ids, constraint_ids)
        batch, n, length = tf.unstack(tf.shape(result.token_ids))
        texts = self.target_tokenizer.detokenize(tf.reshape(result.token_ids, [batch * n, length]))
        return {
            "translations": tf.reshape(texts, [batch, n]),
            "scores": result.scores,
            "truncated": self.source_policy.tf_truncated(pieces),
        }

    def constraint_ids(self, constraints):
        """Target phrases tokenized and checked: int32 `(B, C, T)`, 0-padded
        (`TargetInputs.constraint_ids`)."""
        return TargetInputs(self.target_tokenizer, self.max_length).constraint_ids(constraints)

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False
    )
    def translate_ids(self, source_ids):
        """Searches from source ids `(B, S)`; returns target ids `(B, max_length)`.

        Ids outside [0, source vocabulary) raise `InvalidArgumentError`.
        Sources are padded to a power of two (at least 8) in length, and
        with XLA the batch to a power of two, so that a new input size does
        not cost a new compilation.
        """
        return self.search(source_ids).token_ids[:, 0]

    def search(self, source_ids, prefix_ids=None, constraint_ids=None, *, static_shapes=False):
        """The translator's search over source ids `(B, S)`: a `DecodingResult` with
        N = `n_best`.

        Args:
            source_ids: int32 `(B, S)`, each row cut and ending in EOS
                (`source_ids`); ids outside [0, source vocabulary) raise
                `InvalidArgumentError`.
            prefix_ids: optional int32 `(B, P)`, 0-padded target prefixes.
            constraint_ids: optional int32 `(B, C, T)`, 0-padded phrases
                (`constraint_ids`).
            static_shapes: True traces the search for the inputs' own
                shapes rather than once for any shape: inside a graph of
                fixed shapes (`export.export_litert`), every shape in the
                search's loop is then a constant, and LiteRT runs the loop
                without planning its memory again at each step.

        The search is traced once, and the inputs are padded to a few
        shapes, which XLA compiles once each (`inference.BucketedSearch`);
        the result holds the B rows given.

        Examples:
            ```python
            result = translator.search(translator.source_ids(["siebzehn"]))
            result.token_ids.shape  # (1, 1, 64)
            ```
        """
        return self.bucketed_search(
            source_ids, prefix_ids, constraint_ids, static_shapes=static_shapes
        )


# Every decoding option reads as an attribute of the translator: `translator.beam_size`.
for _name in DecodeOptions.names():
    setattr(Translator, _name, property(lambda self, name=_name: getattr(self.options, name)))
