import collections

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from keras_transformer.datasets import ParallelCorpus, numbers_corpus
from keras_transformer.run.data import training_and_validation_batches
from keras_transformer.text import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    make_batches,
    padding_fraction,
)

WORDS = "one two three four five six seven eight nine ten".split()


def corpus(n=400, seed=0):
    """Pairs whose lengths vary from 1 to 30 words; the target reverses the source."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for _ in range(n):
        words = list(rng.choice(WORDS, size=rng.integers(1, 31)))
        sources.append(" ".join(words))
        targets.append(" ".join(reversed(words)))
    return ParallelCorpus(sources, targets)


@pytest.fixture
def tokenizer():
    return SentencePieceTokenizer.train(WORDS * 20, vocab_size=20)


def rows(batches):
    """Every example of a batched dataset as unpadded Python lists."""
    out = []
    for (source, target_in), target_out in batches.dataset:
        for s, ti, to in zip(source.numpy(), target_in.numpy(), target_out.numpy(), strict=True):
            out.append((tuple(s[s != 0]), tuple(ti[ti != 0]), tuple(to[to != 0])))
    return out


def test_examples_are_teacher_forcing_pairs_and_each_appears_once(tokenizer):
    pairs = corpus()
    batches = make_batches(
        pairs, tokenizer, tokenizer, max_length=512, tokens_per_batch=2048, seed=1
    )
    expected = []
    for s, t in zip(pairs.sources, pairs.targets, strict=True):
        x = tokenizer.tokenize([s]).to_list()[0]
        y = tokenizer.tokenize([t]).to_list()[0]
        expected.append((tuple(x + [3]), tuple([2] + y), tuple(y + [3])))
    assert collections.Counter(rows(batches)) == collections.Counter(expected)
    assert (batches.num_pairs, batches.num_dropped, batches.num_truncated) == (400, 0, 0)


def test_batches_keep_to_the_token_budget(tokenizer):
    batches = make_batches(corpus(), tokenizer, tokenizer, max_length=512, tokens_per_batch=2000)
    sizes = []
    for (source, target_in), _ in batches.dataset:
        length = max(source.shape[1], target_in.shape[1])
        assert source.shape[0] * length <= 2000
        sizes.append(source.shape[0])
    assert max(sizes) > 2 * min(sizes)  # short sentences come in bigger batches


def test_bucketing_pads_less_than_padding_to_the_longest(tokenizer):
    pairs = corpus(n=1000)
    bucketed = make_batches(pairs, tokenizer, tokenizer, batch_size=32, max_length=512, seed=0)
    longest = make_batches(
        pairs, tokenizer, tokenizer, batch_size=32, bucketing=False, max_length=512
    )
    assert padding_fraction(bucketed.dataset) < 0.5 * padding_fraction(longest.dataset)


def test_long_pairs_are_dropped_and_counted(tokenizer):
    pairs = corpus()
    lengths = [len(tokenizer.tokenize([s]).to_list()[0]) + 1 for s in pairs.sources]
    batches = make_batches(pairs, tokenizer, tokenizer, max_length=40, batch_size=8)
    too_long = sum(n > 40 for n in lengths)  # source and target have equal length here
    assert batches.num_dropped == too_long > 0 and batches.num_truncated == 0
    examples = rows(batches)
    assert len(examples) == 400 - too_long
    assert max(len(s) for s, _, _ in examples) <= 40
    assert "dropped" in str(batches)


def test_long_pairs_are_truncated_and_counted(tokenizer):
    pairs = corpus()
    batches = make_batches(
        pairs, tokenizer, tokenizer, max_length=40, batch_size=8, overflow="truncate"
    )
    examples = rows(batches)
    assert len(examples) == 400 and batches.num_truncated > 0 and batches.num_dropped == 0
    for source, target_in, target_out in examples:
        assert len(source) <= 40 and len(target_in) <= 40
        assert source[-1] == 3 and target_out[-1] == 3 and target_in[0] == 2


@pytest.mark.parametrize("overflow", ["drop", "truncate"])
def test_a_source_prefix_starts_every_source_and_counts_in_its_length(tokenizer, overflow):
    """A multilingual model's target-language token (here id 17) goes before each source's
    pieces, as `Translator` puts it; a source then needs one token less to be too long."""
    pairs = corpus()
    batches = make_batches(
        pairs,
        tokenizer,
        tokenizer,
        max_length=40,
        batch_size=8,
        overflow=overflow,
        source_prefix=(17,),
    )
    expected, long = [], 0
    for s, t in zip(pairs.sources, pairs.targets, strict=True):
        x = tokenizer.tokenize([s]).to_list()[0]
        y = tokenizer.tokenize([t]).to_list()[0]
        if len(x) + 2 > 40 or len(y) + 1 > 40:
            long += 1
            if overflow == "drop":
                continue
        expected.append((tuple([17] + x[:38] + [3]), tuple([2] + y[:39]), tuple(y[:39] + [3])))
    assert collections.Counter(rows(batches)) == collections.Counter(expected)
    counted = batches.num_dropped if overflow == "drop" else batches.num_truncated
    assert counted == long > 0


@pytest.mark.parametrize(
    "options",
    [
        dict(tokens_per_batch=300),
        dict(tokens_per_batch=300, overflow="truncate"),
        dict(batch_size=7),
        dict(batch_size=7, bucketing=False),
    ],
)
def test_the_batch_count_is_known_before_the_first_pass(tokenizer, options):
    batches = make_batches(corpus(), tokenizer, tokenizer, max_length=24, seed=3, **options)
    assert batches.dataset.cardinality().numpy() == batches.num_batches
    for _ in range(2):  # a reshuffled pass makes as many batches
        assert sum(1 for _ in batches.dataset) == batches.num_batches


def test_bad_lines_pass_through_without_crashing(tokenizer):
    pairs = ([b"", b"   ", b"one \xff two", "one \u2603".encode(), b"one " * 3000], ["a"] * 5)
    batches = make_batches(pairs, tokenizer, tokenizer, max_length=64, batch_size=4)
    examples = rows(batches)
    assert batches.num_dropped == 1 and len(examples) == 4
    assert sum(source == (3,) for source, _, _ in examples) == 2  # the empty lines


def test_bad_arguments_fail_clearly(tokenizer):
    with pytest.raises(ValueError, match=r"`overflow` must be one of.*overflow='cut'"):
        make_batches(corpus(4), tokenizer, tokenizer, overflow="cut")
    with pytest.raises(ValueError, match="`batch_size` is required"):
        make_batches(corpus(4), tokenizer, tokenizer, bucketing=False)
    with pytest.raises(ValueError, match="as many sources as targets"):
        make_batches((["a", "b"], ["c"]), tokenizer, tokenizer)


def test_worker_shares_are_disjoint_equal_and_leave_out_only_the_last_batches(tokenizer):
    def worker_batches():  # what each worker builds: the same corpus, seed and order
        return make_batches(
            corpus(), tokenizer, tokenizer, max_length=512, tokens_per_batch=600, seed=3
        )

    def batch_rows(batches):
        return [tuple(map(tuple, source.numpy())) for (source, _), _ in batches.dataset]

    whole = batch_rows(worker_batches())
    per_worker = len(whole) // 3
    assert len(whole) % 3 != 0  # some batches are left out
    for index in range(3):
        share = worker_batches().shard(3, index)
        assert share.num_batches == per_worker
        assert batch_rows(share) == whole[index : 3 * per_worker : 3]
    assert batch_rows(worker_batches().shard(1, 0)) == whole
    with pytest.raises(ValueError, match=r"`index` must be in \[0, 2\)"):
        worker_batches().shard(2, 2)


@pytest.fixture
def number_words():
    """`(tokenizer, pairs)`: German and English number words, which split many ways."""
    pairs = numbers_corpus("train", "de", "en", limit=800)
    return SentencePieceTokenizer.train(pairs.sources + pairs.targets, vocab_size=200), pairs


def texts(tokenizer, examples):
    """The source and target text of each `rows` example."""
    sources = [list(source) for source, _, _ in examples]
    targets = [list(target_out) for _, _, target_out in examples]
    return [
        tokenizer.detokenize(tf.ragged.constant(ids)).numpy().tolist() for ids in (sources, targets)
    ]


def test_subword_sampling_draws_new_segmentations_of_the_same_text_every_epoch(number_words):
    tokenizer, pairs = number_words
    options = dict(max_length=64, tokens_per_batch=1024, shuffle=False)
    best = make_batches(pairs, tokenizer, tokenizer, **options)
    sampled = make_batches(pairs, tokenizer, tokenizer, sampling_alpha=0.1, **options)
    assert sampled.num_batches == best.num_batches
    best_rows = rows(best)
    epochs = [rows(sampled) for _ in range(2)]
    for epoch in epochs:
        # The same pairs in the same order (bucketed by their best segmentation's
        # length), the same text, other pieces.
        assert texts(tokenizer, epoch) == texts(tokenizer, best_rows)
        changed = sum(a != b for a, b in zip(epoch, best_rows, strict=True))
        assert changed > len(best_rows) // 5, changed
        assert sum(len(row[2]) for row in epoch) > sum(len(row[2]) for row in best_rows)
    assert epochs[0] != epochs[1]


def test_a_sample_longer_than_max_length_is_replaced_by_the_best_segmentation(number_words):
    tokenizer, pairs = number_words
    sources, targets = (
        tokenizer.tokenize(side).to_list() for side in (pairs.sources, pairs.targets)
    )
    best_lengths = [max(len(s), len(t)) + 1 for s, t in zip(sources, targets, strict=True)]
    max_length = sorted(best_lengths)[len(best_lengths) * 9 // 10]  # keeps 90% of the pairs
    options = dict(max_length=max_length, tokens_per_batch=1024, shuffle=False)
    best = make_batches(pairs, tokenizer, tokenizer, **options)
    sampled = make_batches(pairs, tokenizer, tokenizer, sampling_alpha=0.0, **options)  # uniform
    assert sampled.num_dropped == best.num_dropped > 0
    examples = rows(sampled)
    assert max(max(len(s), len(t)) for s, t, _ in examples) <= max_length
    assert texts(tokenizer, examples) == texts(tokenizer, rows(best))  # nothing cut short
    assert any(len(t) == max_length for _, t, _ in examples)  # long pairs kept the best


def test_validation_batches_and_the_tokenizer_never_sample(number_words):
    tokenizer, pairs = number_words
    config = {
        "data": {"max_length": 64, "tokens_per_batch": 1024, "overflow": "drop"},
        "tokenizer": {"sampling_alpha": 0.1, "sampling_nbest_size": -1},
        "train": {"seed": 0, "micro_batches": 1},
        "decode": {"target_language": None},
    }
    train, val = training_and_validation_batches(config, pairs, pairs, (tokenizer, tokenizer))
    best = rows(make_batches(pairs, tokenizer, tokenizer, 64, 1024, shuffle=False))
    assert rows(val) == rows(val) == best
    assert sorted(rows(train)) != sorted(best)
    once = tokenizer.tokenize(pairs.sources).to_list()
    assert tokenizer.tokenize(pairs.sources).to_list() == once  # the decoding path's tokenizer
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.model_proto)
    assert once == processor.encode(pairs.sources)  # the library's best segmentation


def test_subword_sampling_needs_sentencepiece_and_valid_options(number_words):
    tokenizer, pairs = number_words
    wordpiece = WordPieceTokenizer.train(pairs.sources[:50] + pairs.targets[:50], vocab_size=100)
    with pytest.raises(ValueError, match=r"WordPieceTokenizer has one segmentation"):
        make_batches(pairs, wordpiece, wordpiece, sampling_alpha=0.1)
    with pytest.raises(ValueError, match=r"`nbest_size` must be -1 .* Received: nbest_size=1"):
        make_batches(pairs, tokenizer, tokenizer, sampling_alpha=0.1, sampling_nbest_size=1)
    with pytest.raises(ValueError, match=r"`alpha` must be a number >= 0. Received: alpha=-0.5"):
        make_batches(pairs, tokenizer, tokenizer, sampling_alpha=-0.5)
