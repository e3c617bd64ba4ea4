"""Decoding any object with the first three step methods as a full `StepModel`."""

import tensorflow as tf

from keras_transformer.models.step import Step, StepModel


class HypothesisRows(StepModel):
    """The step interface for a model with only `encode`, `initial_cache` and `decode_step`.

    Repeats the model's state once per hypothesis, so that row i of every
    tensor serves hypothesis i, and reorders the model's cache by gathering
    the rows of the hypotheses that go on. It grows its cache where `model`
    is a `StepModel` that does.

    Args:
        model: an object with `encode(source_ids)`,
            `initial_cache(state, max_length)` and
            `decode_step(token_ids, step, cache, state)` whose state and
            cache are nests of tensors with the batch first.

    Examples:
        ```python
        # What beam_search does by itself for a model that is not a StepModel:
        token_ids, scores = beam_search(HypothesisRows(model), source_ids, 2, 3)
        ```
    """

    def __init__(self, model):
        self.model = model
        self.grows_cache = isinstance(model, StepModel) and model.grows_cache

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def initial_cache(self, state, max_length, beam_size=1):
        state = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), state)
        return {"state": state, "cache": self.model.initial_cache(state, max_length)}

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        options = {} if attention_layer is None else {"attention_layer": attention_layer}
        logits, own, attention = as_step(
            self.model.decode_step(token_ids, step, cache["cache"], cache["state"], **options)
        )
        return Step(logits, {"state": cache["state"], "cache": own}, attention)

    def reorder_cache(self, cache, beams):
        batch, k = tf.shape(beams)[0], tf.shape(beams)[1]
        rows = tf.reshape(beams + tf.range(batch)[:, None] * k, [-1])  # (B*k,)
        return {
            "state": cache["state"],
            "cache": tf.nest.map_structure(lambda c: tf.gather(c, rows), cache["cache"]),
        }

    def grow_cache(self, cache, max_length):
        return {"state": cache["state"], "cache": self.model.grow_cache(cache["cache"], max_length)}


def as_step_model(model):
    """`model` if it is a `StepModel`, else `HypothesisRows(model)`."""
    return model if isinstance(model, StepModel) else HypothesisRows(model)


def as_step(outputs):
    """A `decode_step`'s outputs as a `Step`: models of their own may return a plain
    `(logits, cache)` or `(logits, cache, attention)` tuple."""
    return outputs if isinstance(outputs, Step) else Step(*outputs)
