"""The step interface: what a model offers the searches, declared once.

Every search of `keras_transformer.inference` (greedy, beam, sampling,
prefixes, ensembles) decodes through these methods and nothing else of a
model:

    state = model.encode(source_ids)                                  # once
    cache = model.initial_cache(state, max_length, beam_size=k)
    logits, cache, attention = model.decode_step(tokens, step, cache, state)   # per step
    cache = model.reorder_cache(cache, beams)   # beam search: j goes on from beams[:, j]
    cache = model.grow_cache(cache, longer)     # only where `grows_cache` is True
    state = model.restrict_vocabulary(state, ids)   # only where `restricts_vocabulary`
    state = model.one_row_projection(state)         # XLA searches: a single row's layout
    state = model.transposed_projection(state)      # searches without XLA: every row's

`Transformer` and `inference.Ensemble` derive from `StepModel`. Any other
object with `encode`, `initial_cache(state, max_length)` and `decode_step`
can be decoded too: the searches wrap it in `inference.HypothesisRows`,
which repeats its state per hypothesis and reorders its cache by gathering
rows.
"""

from typing import NamedTuple


class Step(NamedTuple):
    """What one decoding step returns.

    Attributes:
        logits: float32 `(B * k, V)`, the next-token logits of each hypothesis.
        cache: the cache with the step's position written.
        attention: float32 `(B * k, S)`, the cross-attention of the decoder
            layer asked for (averaged over heads), or None.
    """

    logits: object
    cache: object
    attention: object = None


class StepModel:
    """Base of the models the searches decode through their own cache.

    Subclasses implement the five methods; `grows_cache` says whether
    `grow_cache` may be called (a search then starts with a short cache and
    grows it with the output, `inference.loop.cache_lengths`),
    `restricts_vocabulary` whether `restrict_vocabulary` may (a lexical
    shortlist, `inference.Shortlisted`, decodes through it), and
    `max_positions` is the longest source or target the model reads (None:
    no limit; a learned position table has one), which `Translator` checks
    its lengths against.

    The shapes: B sentences, k hypotheses per sentence, L cache positions,
    V target vocabulary, S source length. `state` and `cache` are nests of
    tensors the model defines; the searches only pass them back.

    Example (a wrapper that changes one method, the rest forwarded):
    ```python
    class Shifted(StepWrapper):  # adds 1 to another model's logits
        def decode_step(self, token_ids, step, cache, state, attention_layer=None):
            logits, cache, attention = self.model.decode_step(
                token_ids, step, cache, state, attention_layer)
            return Step(logits + 1.0, cache, attention)
    ```
    """

    max_positions = None

    grows_cache = False
    restricts_vocabulary = False

    def encode(self, source_ids):
        """The decoding state of source ids `(B, S)`, computed once per batch."""
        raise NotImplementedError

    def initial_cache(self, state, max_length, beam_size=1):
        """The empty cache of `beam_size` hypotheses per sentence, `max_length` positions each."""
        raise NotImplementedError

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        """A `Step` from the tokens `(B * k,)` at position `step` (k per sentence, in order)."""
        raise NotImplementedError

    def reorder_cache(self, cache, beams):
        """The cache after hypothesis j of sentence b took over hypothesis `beams[b, j]`."""
        raise NotImplementedError

    def grow_cache(self, cache, max_length):
        """The cache with room for `max_length` positions; only if `grows_cache`."""
        raise NotImplementedError(f"{type(self).__name__} has a cache of fixed length")

    def one_row_projection(self, state):
        """The state an XLA search decodes: what a step of a single row multiplies by laid
        out before the loop (`Transformer.one_row_projection`); unchanged by default."""
        return state

    def transposed_projection(self, state):
        """The state a search without XLA decodes: what every step multiplies by laid
        out before the loop (`Transformer.transposed_projection`); unchanged by default."""
        return state

    def restrict_vocabulary(self, state, ids):
        """The state under which `decode_step` scores only the target pieces `ids` `(n,)`.

        Its logits are then `(B * k, n)`: column j is the logit of piece
        `ids[j]`, the value the whole vocabulary's logits have there. Only
        if `restricts_vocabulary`.
        """
        raise NotImplementedError(f"{type(self).__name__} decodes over its whole vocabulary")


class StepWrapper(StepModel):
    """A `StepModel` that forwards each method to the `StepModel` it wraps.

    Subclasses override the methods they change; a class attribute
    `grows_cache = False` keeps the searches to one cache of `max_length`,
    and `restricts_vocabulary = False` refuses shortlists (for a wrapper
    whose `decode_step` needs the whole vocabulary's logits).

    Args:
        model: the `StepModel` to forward to.
    """

    def __init__(self, model):
        self.model = model

    @property
    def grows_cache(self):
        return self.model.grows_cache

    @property
    def max_positions(self):
        return max_positions_of(self.model)

    @property
    def restricts_vocabulary(self):
        return self.model.restricts_vocabulary

    @property
    def input_vocab_size(self):
        return self.model.input_vocab_size

    @property
    def target_vocab_size(self):
        return self.model.target_vocab_size

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def initial_cache(self, state, max_length, beam_size=1):
        return self.model.initial_cache(state, max_length, beam_size)

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        return self.model.decode_step(token_ids, step, cache, state, attention_layer)

    def reorder_cache(self, cache, beams):
        return self.model.reorder_cache(cache, beams)

    def grow_cache(self, cache, max_length):
        return self.model.grow_cache(cache, max_length)

    def one_row_projection(self, state):
        return self.model.one_row_projection(state)

    def transposed_projection(self, state):
        return self.model.transposed_projection(state)

    def restrict_vocabulary(self, state, ids):
        return self.model.restrict_vocabulary(state, ids)


class FixedCache(StepWrapper):
    """`model` decoded in one cache of `max_length`, which never grows.

    A search over it traces and compiles one loop instead of one per cache
    size (`inference.loop.cache_lengths`): it starts sooner, while every step
    attends over all `max_length` positions. The outputs are the same.

    Args:
        model: the `StepModel` to decode.

    Examples:
        ```python
        token_ids, scores = greedy_search(FixedCache(model), source_ids, 2, 3)
        ```
    """

    grows_cache = False


def max_positions_of(model):
    """The longest source or target `model` reads: its `max_positions`, or None
    (no limit) for an object with the step methods alone."""
    return getattr(model, "max_positions", None)
