"""The built-in corpus: numbers written out in words, translated between languages.

English "three hundred and twenty-one" is German "dreihunderteinundzwanzig"
(three-hundred-one-and-twenty): to translate it a model must reorder the tens
and the units inside every group of three digits, and learn each language's
words, compounds and exceptions ("eins" but "einundzwanzig", "one hundred" but
"hundert" or "einhundert"). The sentences are generated with `num2words`, so
the corpus needs nothing from outside and is the same on every machine.

Training numbers are drawn from 0-999,999 by digit count first, in the
proportions of `TRAIN_DIGIT_WEIGHTS`, so every magnitude is taught: each
one-digit number appears over a hundred times and each two-digit one 6 to 25
times, while four pairs in five are the four- to six-digit compounds that need
the grammar. Validation and test draw 250 distinct numbers of
each digit count from 3 to 6 that training never sees: the test set measures
whether the model learnt the grammar, not a lookup table. The hundred numbers
below 100 cannot be held out (each is a word the grammar builds on), so they
are trained on and checked by `small_numbers` instead.
"""

import functools

import numpy as np
from num2words import num2words

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.validation import check_choice, check_positive_int

SPLITS = ("train", "val", "test")
DEFAULT_SIZES = {"train": 30_000, "val": 1_000, "test": 1_000}
LANGUAGES = ("de", "en", "es", "fr", "it", "nl", "pt")
MAX_DIGITS = 6
HELD_OUT_DIGITS = range(3, MAX_DIGITS + 1)  # digit counts of the val and test numbers
TRAIN_DIGIT_WEIGHTS = (1, 1, 2, 6, 6, 6)  # relative share of 1, 2, ..., 6 digits in train


def numbers_corpus(split="train", source_lang="en", target_lang="de", seed=0, limit=None):
    """One split of the built-in numbers corpus, or its first `limit` pairs.

    Args:
        split: `"train"` (30,000 pairs, small numbers repeated), `"val"`
            (1,000) or `"test"` (1,000 distinct numbers of 3 to 6 digits).
        source_lang: language of the source words; one of `LANGUAGES`.
        target_lang: language of the target words; one of `LANGUAGES`.
        seed: seed of the draw; val and test of one seed share no number
            with each other or with training.
        limit: the first `limit` pairs only, which are all that is written
            out (`num2words` takes seconds for a whole training split).

    Returns:
        `ParallelCorpus`.

    Examples:
        >>> numbers_corpus("test")[0]
        ('...', '...')
        >>> len(numbers_corpus("train", limit=300))
        300
    """
    check_choice("split", split, set(SPLITS))
    check_choice("source_lang", source_lang, set(LANGUAGES))
    check_choice("target_lang", target_lang, set(LANGUAGES))
    if limit is not None:
        check_positive_int("limit", limit)
    numbers = _draw(seed)[split][:limit]
    sources = [_written(number, source_lang) for number in numbers]
    return ParallelCorpus(sources, [_written(number, target_lang) for number in numbers])


def small_numbers(source_lang="en", target_lang="de"):
    """Every number from 0 to 99, in order: the words the grammar builds on.

    They are all in the training split (a held-out test cannot have them), so
    this measures whether a model knows them, not whether it generalizes.

    Args:
        source_lang: language of the source words; one of `LANGUAGES`.
        target_lang: language of the target words; one of `LANGUAGES`.

    Returns:
        `ParallelCorpus` of 100 pairs; pair `n` is the number `n`.

    Examples:
        >>> small_numbers("de", "en")[21]
        ('einundzwanzig', 'twenty-one')
    """
    check_choice("source_lang", source_lang, set(LANGUAGES))
    check_choice("target_lang", target_lang, set(LANGUAGES))
    sources = [_written(n, source_lang) for n in range(100)]
    return ParallelCorpus(sources, [_written(n, target_lang) for n in range(100)])


def split_numbers(split="train", seed=0):
    """The numbers behind `numbers_corpus(split, ..., seed=seed)`, in its order.

    Args:
        split: `"train"`, `"val"` or `"test"`.
        seed: seed of the draw.

    Returns:
        List of ints.

    Examples:
        >>> len(str(split_numbers("test")[0]))  # its digit count, 3 to 6
        4
    """
    check_choice("split", split, set(SPLITS))
    return list(_draw(seed)[split])


@functools.lru_cache(maxsize=None)
def _written(number, lang):
    """`number` written out in `lang`, once per process (num2words is slow)."""
    return num2words(number, lang=lang)


@functools.lru_cache(maxsize=4)
def _draw(seed):
    """The numbers of each split: held-out val and test first, then training.

    Val and test take 250 distinct numbers of each digit count from 3 to 6
    (500 of the 900 three-digit numbers, a small share of the others);
    training draws a digit count from 1 to 6 in the proportions of
    `TRAIN_DIGIT_WEIGHTS` and then a number of that count uniformly, with
    repetition, from those val and test did not take.
    """
    rng = np.random.default_rng(seed)
    splits, held_out = {}, set()
    for split in ("val", "test"):
        per_count = DEFAULT_SIZES[split] // len(HELD_OUT_DIGITS)
        numbers = []
        for digits in HELD_OUT_DIGITS:
            numbers += _distinct(rng, digits, per_count, exclude=held_out)
        held_out.update(numbers)
        rng.shuffle(numbers)
        splits[split] = numbers
    weights = np.array(TRAIN_DIGIT_WEIGHTS) / sum(TRAIN_DIGIT_WEIGHTS)
    counts = rng.choice(np.arange(1, MAX_DIGITS + 1), size=DEFAULT_SIZES["train"], p=weights)
    splits["train"] = [_uniform(rng, int(digits), exclude=held_out) for digits in counts]
    return splits


def _distinct(rng, digits, count, exclude):
    """`count` distinct numbers of `digits` digits, none of them in `exclude`."""
    chosen = {}
    while len(chosen) < count:
        chosen[_uniform(rng, digits, exclude)] = None
    return list(chosen)


def _uniform(rng, digits, exclude):
    """A number of `digits` digits not in `exclude`, uniformly (0 has one digit)."""
    low = 0 if digits == 1 else 10 ** (digits - 1)
    while True:
        number = int(rng.integers(low, 10**digits))
        if number not in exclude:
            return number
