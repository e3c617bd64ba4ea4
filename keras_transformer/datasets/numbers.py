"""The built-in corpus: numbers written out in words, translated between languages.

English "three hundred and twenty-one" is German "dreihunderteinundzwanzig"
(three-hundred-one-and-twenty): to translate it a model must reorder the tens
and the units inside every group of three digits, and learn each language's
words, compounds and exceptions ("eins" but "einundzwanzig", "one hundred" but
"hundert" or "einhundert"). The sentences are generated with `num2words`, so
the corpus needs nothing from outside and is the same on every machine.

The numbers are drawn from 0-999,999 with every digit count (1 to 6) equally
likely, and the splits never share a number: the test set measures whether
the model learnt the grammar, not a lookup table.
"""

import functools

import numpy as np
from num2words import num2words

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.validation import check_choice

SPLITS = ("train", "val", "test")
DEFAULT_SIZES = {"train": 30_000, "val": 1_000, "test": 1_000}
LANGUAGES = ("de", "en", "es", "fr", "it", "nl", "pt")
MAX_DIGITS = 6


def numbers_corpus(split="train", source_lang="en", target_lang="de", seed=0):
    """One split of the built-in numbers corpus.

    Args:
        split: `"train"` (30,000 pairs), `"val"` (1,000) or `"test"` (1,000).
        source_lang: language of the source words; one of `LANGUAGES`.
        target_lang: language of the target words; one of `LANGUAGES`.
        seed: seed of the draw; the splits of one seed never share a number.

    Returns:
        `ParallelCorpus`.

    Examples:
        >>> numbers_corpus("test")[0]
        ('...', '...')
    """
    check_choice("split", split, set(SPLITS))
    check_choice("source_lang", source_lang, set(LANGUAGES))
    check_choice("target_lang", target_lang, set(LANGUAGES))
    sources = _words(split, source_lang, seed)
    targets = _words(split, target_lang, seed)
    return ParallelCorpus(list(sources), list(targets))


@functools.lru_cache(maxsize=16)
def _words(split, lang, seed):
    """The numbers of one split written out in one language (num2words is slow)."""
    return tuple(num2words(n, lang=lang) for n in _draw(seed)[split])


@functools.lru_cache(maxsize=4)
def _draw(seed):
    """Distinct numbers for each split, every digit count equally likely."""
    rng = np.random.default_rng(seed)
    total = sum(DEFAULT_SIZES.values())
    chosen = set()
    drawn = []
    while len(drawn) < total:
        digits = rng.integers(1, MAX_DIGITS + 1)
        low = 0 if digits == 1 else 10 ** (digits - 1)
        number = int(rng.integers(low, 10**digits))
        if number not in chosen:
            chosen.add(number)
            drawn.append(number)
    splits, start = {}, 0
    for name in SPLITS:
        splits[name] = drawn[start : start + DEFAULT_SIZES[name]]
        start += DEFAULT_SIZES[name]
    return splits
