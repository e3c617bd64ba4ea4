"""Several models decoded as one, through the step interface the searches use."""

import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.adapters import as_step, as_step_model
from keras_transformer.models.step import Step, StepModel, max_positions_of


class Ensemble(tf.Module, StepModel):
    """Averages the log-probabilities of several models at every decoding step.

    Each model keeps its own state and cache; the ensemble is a
    `models.StepModel` (it grows its cache where every model does), so
    every search and `Translator` take it in place of one model. Its
    `decode_step` returns the mean of the models' logits: each model's
    log-probabilities are its logits minus a constant per row, so after the
    searches' softmax this is exactly the renormalized mean of the models'
    log-probabilities, and an ensemble of a model with itself gives that
    model's logits bit for bit. The models must share their vocabularies.

    Args:
        models: a list of trained `keras_transformer.Transformer`s (or
            other objects with the step interface).

    Raises:
        ValueError: if `models` is empty or their vocabulary sizes differ.

    Examples:
        ```python
        ensemble = Ensemble([model_a, model_b])
        token_ids, scores = beam_search(ensemble, source_ids, bos_id=2, eos_id=3)
        ```
    """

    def __init__(self, models):
        super().__init__(name="ensemble")
        models = list(models)
        if not models:
            raise ArgumentError("`models` must hold at least one model. Received: []")
        sizes = {(m.input_vocab_size, m.target_vocab_size) for m in models}
        if len(sizes) > 1:
            raise ArgumentError(
                "The models of an ensemble must share their vocabularies. Received "
                f"(input_vocab_size, target_vocab_size) of {sorted(sizes)}"
            )
        self.models = models
        self.decoders = [as_step_model(model) for model in models]
        self.input_vocab_size, self.target_vocab_size = sizes.pop()
        self.grows_cache = all(decoder.grows_cache for decoder in self.decoders)
        self.restricts_vocabulary = all(d.restricts_vocabulary for d in self.decoders)
        limits = [max_positions_of(model) for model in models]
        self.max_positions = min((n for n in limits if n is not None), default=None)

    def encode(self, source_ids):
        """Each model's decoding state, a tuple in the order of `models`."""
        return tuple(model.encode(source_ids) for model in self.models)

    def one_row_projection(self, state):
        """Each model's state laid out for a step of one row under XLA
        (`Transformer.one_row_projection`)."""
        return tuple(
            decoder.one_row_projection(own)
            for decoder, own in zip(self.decoders, state, strict=True)
        )

    def transposed_projection(self, state):
        """Each model's state laid out for the steps of a search without XLA
        (`Transformer.transposed_projection`)."""
        return tuple(
            decoder.transposed_projection(own)
            for decoder, own in zip(self.decoders, state, strict=True)
        )

    def initial_cache(self, state, max_length, beam_size=1):
        """Each model's empty cache, a tuple in the order of `models`."""
        return tuple(
            decoder.initial_cache(own, max_length, beam_size=beam_size)
            for decoder, own in zip(self.decoders, state, strict=True)
        )

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        """A `Step` of the mean logits `(B, V)` float32 of every model.

        With `attention_layer`, its attention is the models' mean
        cross-attention `(B, S)` in that layer.
        """
        steps = [
            as_step(decoder.decode_step(token_ids, step, own_cache, own_state, attention_layer))
            for decoder, own_cache, own_state in zip(self.decoders, cache, state, strict=True)
        ]
        logits = tf.add_n([s.logits for s in steps]) / len(steps)  # (B, V)
        attention = None
        if attention_layer is not None:
            attention = tf.add_n([s.attention for s in steps]) / len(steps)  # (B, S)
        return Step(logits, tuple(s.cache for s in steps), attention)

    def grow_cache(self, cache, max_length):
        """Each model's cache grown (`Transformer.grow_cache`), where all models can."""
        return tuple(
            decoder.grow_cache(own, max_length)
            for decoder, own in zip(self.decoders, cache, strict=True)
        )

    def restrict_vocabulary(self, state, ids):
        """Each model's state restricted to the pieces `ids` (`Transformer.restrict_vocabulary`).

        The mean of the models' logits at the listed pieces is their mean
        logits there, so a shortlisted ensemble scores as the ensemble does.
        """
        return tuple(
            decoder.restrict_vocabulary(own, ids)
            for decoder, own in zip(self.decoders, state, strict=True)
        )

    def reorder_cache(self, cache, beams):
        """Each model's cache reordered for beam search (`Transformer.reorder_cache`)."""
        return tuple(
            decoder.reorder_cache(own, beams)
            for decoder, own in zip(self.decoders, cache, strict=True)
        )
