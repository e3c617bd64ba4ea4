"""Target-language tokens: the piece a multilingual model reads first to know which
language to write.

Multi-target OPUS-MT and Tatoeba-Challenge models (`opus-mt-en-ROMANCE`,
`opus-mt-tc-big-en-itc`, ...) hold pieces such as `>>por<<` and `>>spa<<` in
their source vocabulary, and expect one of them before the sentence's own
pieces. A model whose source vocabulary holds such pieces is translated with
a target language (`DecodeOptions.target_language`), and every engine puts
its token first (`SourcePolicy.prefix`).
"""

import re

from keras_transformer.errors import ArgumentError

LANGUAGE_TOKEN = re.compile(r">>[^<>\s]+<<")  # a whole piece: >>por<<, >>zho_Hant<<


def language_tokens(pieces):
    """The target-language tokens among `pieces` (a vocabulary), in its order.

    Examples:
        >>> language_tokens(["</s>", ">>por<<", "▁casa", ">>spa<<"])
        ['>>por<<', '>>spa<<']
    """
    return [piece for piece in pieces if LANGUAGE_TOKEN.fullmatch(piece)]


def language_token(language):
    """The token of `language`, given as its code (`por`) or as the token itself.

    Examples:
        >>> language_token("por"), language_token(">>por<<")
        ('>>por<<', '>>por<<')
    """
    return language if LANGUAGE_TOKEN.fullmatch(language) else f">>{language}<<"


def language_prefix(tokenizer, target_language):
    """The ids a source starts with for `target_language`: `(id of its token,)`, or `()`
    for a model without target-language tokens.

    Args:
        tokenizer: the source tokenizer (its `pieces` are the vocabulary).
        target_language: a language code (`por`) or token (`>>por<<`), or None.

    Raises:
        ArgumentError: if the vocabulary holds target-language tokens and
            `target_language` is None or not one of them (the message lists
            them), or if it holds none and `target_language` is given.

    Examples:
        ```python
        language_prefix(source_tokenizer, "por")  # (5,), the id of >>por<<
        ```
    """
    pieces = tokenizer.pieces
    tokens = language_tokens(pieces)
    if target_language is None and not tokens:
        return ()
    if not tokens:
        raise ArgumentError(
            "This model has no target-language tokens: translate without `target_language` "
            f"(--target-language). Received: {target_language!r}"
        )
    codes = ", ".join(token[2:-2] for token in tokens)
    if target_language is None:
        raise ArgumentError(
            "This model reads a target-language token first and needs a target language "
            f"(`target_language`, --target-language, decode.target_language): one of {codes}"
        )
    token = language_token(target_language)
    if token not in tokens:
        raise ArgumentError(
            f"`target_language` {target_language!r} is not a language of this model; "
            f"it writes {codes}"
        )
    return (pieces.index(token),)
