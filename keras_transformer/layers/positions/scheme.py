"""What a position scheme is: the questions the layers ask it.

A Transformer's attention is blind to order; a position scheme tells the model
where each token is. The paper adds a table to the embeddings (§3.5); later
schemes rotate queries and keys (RoPE), add learned vectors per distance to
keys and values (Shaw et al.), or add a bias per distance to the logits (T5,
ALiBi). The layers do not switch on the scheme's name: they take one
`PositionScheme` and ask it

- `table(...)`: a layer adding position rows to `(B, L, D)` vectors, or None,
  and where those rows go (`placement`);
- `attention_weights(attention)`: the weights (or constants) it keeps in a
  self-attention layer, created there so they load and save with it;
- `rotate(x, start)`: queries or keys moved by their positions;
- `attention_terms(...)`: what `scaled_dot_product_attention` adds for the
  distances between queries and keys;
- `max_positions`: the longest sequence it can place (None: no limit);
- `check(d_model, num_heads=None)`: whether it fits a model's sizes.

A scheme is a frozen dataclass of its settings, registered with Keras, so
`get_config` / `from_config` round-trip it and two equal schemes compare equal.
Each subclass names its shorthand (`name`), the string `positions.get` and a
run's configuration accept.

Examples:
    ```python
    @dataclasses.dataclass(frozen=True)
    class NoPositions(PositionScheme):  # a bag of words
        name = "none"
    ```
"""

import dataclasses

from keras_transformer.errors import ArgumentError
from keras_transformer.validation import check_choice

PLACEMENTS = ("input", "every_layer", "queries_and_keys")
SCHEMES = {}  # shorthand -> class, filled as each scheme's class is defined


class PositionScheme:
    """Base of the position schemes; on its own, it places nothing.

    Subclasses are frozen dataclasses of their settings that set `name` and
    override the hooks they need; the defaults say "no table, nothing in
    attention".
    """

    name = ""  # the shorthand
    placement = "input"  # where a table goes; the schemes with one make it a field
    max_positions = None  # the longest sequence it places; None: any

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            SCHEMES[cls.name] = cls

    @property
    def in_attention(self):
        """Whether every self-attention takes part (rotates, or adds a term)."""
        return False

    def check(self, d_model, num_heads=None):
        """Raises `ArgumentError` if the scheme does not fit these sizes (`num_heads`
        None: asked by a layer without heads, the embedding)."""

    def table(self, **layer_kwargs):
        """A layer adding position rows to `(B, L, D)` inputs (called with
        `start_index`), or None; `layer_kwargs` are its `name` and `dtype`."""
        return None

    def attention_weights(self, attention):
        """What the scheme keeps in `attention` (a `MultiHeadAttention`): weights
        created with its `add_weight` (so they save and load with it) or fixed
        constants; a tuple, empty by default."""
        return ()

    def rotate(self, x, start=0):
        """`x` `(B, H, L, K)`, queries or keys at positions `start..start + L - 1`,
        as attention should compare them; `x` itself by default."""
        return x

    def attention_terms(self, weights, query_positions, key_positions, bidirectional):
        """Keyword arguments for `scaled_dot_product_attention`: what it adds for the
        distance of each query-key pair.

        Args:
            weights: what `attention_weights` created, in the layer's order.
            query_positions: integer `(T,)`, or `(1,)` for queries all at one position.
            key_positions: integer `(S,)`.
            bidirectional: False where a query only sees keys before it (a
                decoder's self-attention).

        Returns:
            A dict with any of `logit_bias`, `relative_keys`, `relative_values`.
        """
        return {}

    def get_config(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def _check_placement(self):
        check_choice("placement", self.placement, PLACEMENTS)


def check_even(what, size, name):
    """An `ArgumentError` unless `size` is even: `what` pairs its features."""
    if size % 2:
        raise ArgumentError(f"{what} needs an even {name}. Received: {name}={size}")
