import collections

import numpy as np
import pytest

from keras_transformer.datasets import ParallelCorpus
from keras_transformer.text import SentencePieceTokenizer, make_batches, padding_fraction

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
