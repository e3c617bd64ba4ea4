"""The residual connection around every sublayer (Vaswani et al., 2017, §3.1, §5.4)."""


def sublayer_input(x, norm, norm_first):
    """What a sublayer sees: LayerNorm(x) for pre-LN, x itself for post-LN."""
    return norm(x) if norm_first else x


def residual(x, sublayer_output, dropout, norm, norm_first, training):
    """Adds a sublayer's dropped-out output back to its input.

    Post-LN (paper): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN:          x + Dropout(Sublayer(LayerNorm(x))).

    Args:
        x: the sublayer's input `(B, L, D)`.
        sublayer_output: `(B, L, D)`.
        dropout: a `keras.layers.Dropout`.
        norm: the sublayer's `keras.layers.LayerNormalization`.
        norm_first: pre-LN instead of post-LN.
        training: whether dropout is active.

    Returns:
        `(B, L, D)`.
    """
    x = x + dropout(sublayer_output, training=training)
    return x if norm_first else norm(x)
