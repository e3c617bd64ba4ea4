"""Lexical shortlists: counted as a reference counts them, decoded as the model decodes."""

from collections import Counter

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import load_tiny_translation

import keras_transformer as kt
from keras_transformer import export
from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.datasets import numbers_corpus
from keras_transformer.inference import Shortlist, Shortlisted, beam_search, greedy_search

V = 60


def random_pairs(count=300, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, (count, 2))
    sources = [rng.integers(4, V, n) for n, _ in lengths]
    # targets lean on their sources, as translations do: piece s tends to bring s + 1
    targets = [
        np.concatenate([s[: m // 2] % (V - 5) + 5, rng.integers(4, V, m - m // 2)])
        for s, (_, m) in zip(sources, lengths, strict=True)
    ]
    return sources, targets


def test_build_lists_each_source_pieces_most_frequent_companions():
    sources, targets = random_pairs()
    shortlist = Shortlist.build(sources, targets, V, V, per_source=4, frequent=6, size=30)

    frequency = Counter(t for row in targets for t in row.tolist())
    common = {t for t, _ in sorted(frequency.items(), key=lambda c: (-c[1], c[0]))[:6]}
    together = Counter(
        (s, t)
        for src, tgt in zip(sources, targets, strict=True)
        for s in set(src.tolist())
        for t in set(tgt.tolist())
    )
    for piece in range(V):
        companions = sorted(
            ((-n, t) for (s, t), n in together.items() if s == piece and t not in common)
        )
        expected = [t for _, t in companions[:4]]
        listed = [t for t in shortlist.candidates[piece].tolist() if t != PAD_ID]
        assert listed == expected, piece
    assert shortlist.frequency.tolist() == [frequency.get(t, 0) for t in range(V)]


def test_a_batch_keeps_its_union_then_the_most_frequent_pieces():
    sources, targets = random_pairs()
    shortlist = Shortlist.build(sources, targets, V, V, per_source=3, frequent=5, size=30)
    by_frequency = np.argsort(-shortlist.frequency, kind="stable")
    always = set(by_frequency[:5].tolist()) | {UNK_ID, EOS_ID}
    for batch in ([[7, 9, 0]], [[4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 0]], [[0]]):
        ids = set(shortlist.vocab_ids(tf.constant(batch, tf.int32)).numpy().tolist())
        union = {t for s in np.ravel(batch) for t in shortlist.candidates[s].tolist()} | always
        union -= {PAD_ID}
        assert len(ids) == 30 and PAD_ID not in ids and BOS_ID not in ids
        assert shortlist.union_size(batch) == len(union)
        assert union <= ids  # the union fits: the most frequent of the others fill it up
        fill = [t for t in by_frequency.tolist() if t not in union and t not in (PAD_ID, BOS_ID)]
        assert ids - union == set(fill[: 30 - len(union)])

    # A union larger than `size` keeps every batch's pieces, then those listed by more
    # of the batch's source pieces, then the more frequent.
    small = Shortlist(shortlist.candidates, shortlist.frequency, frequent=5, size=12)
    batch = [list(range(4, 20))]
    hits = Counter(t for s in batch[0] for t in small.candidates[s].tolist() if t != PAD_ID)
    rank = {t: r for r, t in enumerate(by_frequency.tolist())}
    ranked = sorted(set(hits) - always, key=lambda t: (-hits[t], rank[t]))
    kept = set(small.vocab_ids(tf.constant(batch, tf.int32)).numpy().tolist())
    assert kept == always | set(ranked[: 12 - len(always)])


@pytest.mark.parametrize(
    "shared", [[None], ["all"], [None, "all"]], ids=["output_layer", "tied", "ensemble"]
)
def test_shortlisted_logits_are_the_model_logits_at_the_listed_pieces(shared):
    models = [kt.Transformer(2, 16, 2, 32, V, V, shared_embeddings=s) for s in shared]
    shortlist = Shortlist.build(*random_pairs(), V, V, per_source=3, frequent=4, size=20)
    source_ids = np.random.default_rng(1).integers(4, V, (3, 7)).astype("int32")
    for model in models:
        model((source_ids, source_ids))
    model = models[0] if len(models) == 1 else kt.inference.Ensemble(models)
    steps = {}
    for name, decoded in [("full", model), ("short", Shortlisted(model, shortlist))]:
        state = decoded.encode(source_ids)
        cache = decoded.initial_cache(state, 8, beam_size=2)
        logits = []
        for step, token in enumerate([BOS_ID, 9, 17]):
            out = decoded.decode_step(np.full([6], token), step, cache, state)
            logits.append(out.logits.numpy())
            cache = out.cache
        steps[name] = np.stack(logits)  # (3, B*k, V)
    listed = np.sort(shortlist.vocab_ids(source_ids).numpy())
    others = np.setdiff1d(np.arange(V), listed)
    np.testing.assert_allclose(steps["short"][..., listed], steps["full"][..., listed], atol=1e-5)
    assert np.all(steps["short"][..., others] == -np.inf)


def test_a_shortlist_of_the_whole_vocabulary_changes_no_search():
    model = kt.Transformer(2, 16, 2, 32, V, V, shared_embeddings="all")
    shortlist = Shortlist.build(*random_pairs(), V, V, per_source=2, frequent=2, size=V)
    source_ids = np.random.default_rng(2).integers(4, V, (4, 6)).astype("int32")
    source_ids[1, 3:] = 0
    model((source_ids, source_ids))
    short = Shortlisted(model, shortlist)
    for search, options in [(greedy_search, {}), (beam_search, {"beam_size": 3})]:
        plain = search(model, source_ids, BOS_ID, EOS_ID, max_length=9, **options)
        listed = search(short, source_ids, BOS_ID, EOS_ID, max_length=9, **options)
        np.testing.assert_array_equal(listed[0], plain[0])
        np.testing.assert_allclose(listed[1], plain[1], rtol=1e-5)


def test_translator_saved_model_and_ctranslate2_decode_over_the_shortlist(
    tiny_translation, tmp_path
):
    model, tokenizer = load_tiny_translation(tiny_translation)
    train = numbers_corpus("train", limit=3000)
    rows = [tokenizer.tokenize(tf.constant(t)).to_list() for t in (train.sources, train.targets)]
    vocab = tokenizer.vocab_size
    shortlist = Shortlist.build(*rows, vocab, vocab, per_source=8, frequent=16, size=72)
    sources = numbers_corpus("test").sources[:93] + ["", "   ", "two"]
    plain = kt.Translator(model, tokenizer, tokenizer, beam_size=1, jit_compile=False)
    short = plain.copy(shortlist=shortlist)
    other_ids = {**tokenizer.special_ids, "bos": vocab - 1}
    with pytest.raises(ValueError, match="counted for a vocabulary with other special ids"):
        plain.copy(
            shortlist=Shortlist(shortlist.candidates, shortlist.frequency, 16, 72, other_ids)
        )
    # batches of 8, whose unions (56-62 pieces) fit in 72
    ours, full = (kt.inference.translate_lines(t, sources, 8) for t in (short, plain))
    assert ours[-3:-1] == ["", ""]
    same = np.mean([a == b for a, b in zip(ours, full, strict=True)])
    assert 0.95 <= same < 1, f"the shortlist changed {1 - same:.1%} of the outputs"
    for batch in (["two"], sources[:5]):  # a batch of one decodes over its own list
        listed = set(shortlist.vocab_ids(short.source_ids(batch)).numpy().tolist())
        output = set(short.translate_ids(short.source_ids(batch)).numpy().ravel().tolist())
        assert len(listed) == 72 < vocab and output - {PAD_ID} <= listed

    exported = kt.export.export_translator(short, "short", base_dir=tmp_path)
    served = tf.saved_model.load(exported).signatures["serving_default"]
    outputs = served(inputs=tf.constant(sources[:8]))["outputs"].numpy()
    assert (outputs == short(tf.constant(sources[:8])).numpy()).all()

    pytest.importorskip("ctranslate2")
    directory = export.export_ctranslate2(short, tmp_path / "ct2")
    vmap = (tmp_path / "ct2" / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert vmap[0].startswith("\t") and len(vmap) > 10
    translated = export.CTranslate2Translator(directory)
    assert translated.use_vmap
    # CTranslate2 decodes over the batch's union alone, the package over the union
    # filled up to `size`: every sentence on which they differ is one whose package
    # output takes a piece from the filling.
    always = set(np.flatnonzero(shortlist._always).tolist())
    differ = 0
    for start in range(0, len(sources), 8):
        batch = sources[start : start + 8]
        source_ids = short.source_ids(batch)
        union = {t for s in source_ids.numpy().ravel() for t in shortlist.candidates[s]} | always
        outputs = short.translate_ids(source_ids).numpy()
        for text, theirs, output in zip(
            short(batch).numpy(), translated(batch), outputs, strict=True
        ):
            if text.decode() != theirs:
                differ += 1
                assert set(output.tolist()) - union - {PAD_ID}, (text, theirs)
    assert differ <= 0.15 * len(sources), differ  # 10 of 96 on the AMD AVX-512 VM
    keras.backend.clear_session()


def test_shortlists_refuse_what_they_cannot_decode(tmp_path):
    shortlist = Shortlist.build(*random_pairs(), V, V, frequent=4, size=20)
    with pytest.raises(ValueError, match="shortlist has 60 target pieces, the model 70"):
        Shortlisted(kt.Transformer(1, 8, 2, 8, 70, 70), shortlist)
    with pytest.raises(ValueError, match="restricts its vocabulary.*HypothesisRows does not"):
        Shortlisted(kt.inference.HypothesisRows(kt.Transformer(1, 8, 2, 8, V, V)), shortlist)
    with pytest.raises(ValueError, match="size"):
        Shortlist(shortlist.candidates, shortlist.frequency, frequent=4, size=0)
    with pytest.raises(ValueError, match="shortlist of 5 target pieces is smaller than the 6"):
        Shortlist(shortlist.candidates, shortlist.frequency, frequent=4, size=5)
    with pytest.raises(ValueError, match="shapes"):
        Shortlist(shortlist.candidates.ravel(), shortlist.frequency, frequent=4, size=8)
    shortlist.save(tmp_path / "s.npz")
    loaded = Shortlist.load(tmp_path / "s.npz", size=10)
    np.testing.assert_array_equal(loaded.candidates, shortlist.candidates)
    assert (loaded.size, loaded.frequent) == (10, shortlist.frequent)


def test_a_shortlist_keeps_the_special_pieces_of_its_own_vocabulary(tmp_path):
    """A vocabulary numbered otherwise (an imported Marian one: EOS 1, its start piece last)
    keeps its own unknown piece and EOS in every batch and never decodes its own BOS; the
    package's BOS and EOS ids are ordinary pieces there."""
    marian = {"pad": 0, "unk": 2, "bos": V - 1, "eos": 1}
    sources, targets = random_pairs()
    targets = [np.concatenate([row, [BOS_ID, EOS_ID]]) for row in targets]  # ordinary here
    shortlist = Shortlist.build(
        sources, targets, V, V, per_source=3, frequent=5, size=30, special_ids=marian
    )
    by_frequency = np.argsort(-shortlist.frequency, kind="stable").tolist()
    assert by_frequency[:2] == sorted([BOS_ID, EOS_ID])  # the most frequent pieces
    assert set(shortlist.always_ids.tolist()) == set(by_frequency[:5]) | {1, 2}
    for batch in ([[7, 9, 0]], [[0]]):
        ids = set(shortlist.vocab_ids(tf.constant(batch, tf.int32)).numpy().tolist())
        assert {1, 2, BOS_ID, EOS_ID} <= ids and not ids & {0, V - 1}, batch
    shortlist.save(tmp_path / "marian.npz")
    assert Shortlist.load(tmp_path / "marian.npz").special_ids == marian
    # A file saved before shortlists kept their ids has the package's numbering.
    np.savez(
        tmp_path / "old.npz",
        candidates=shortlist.candidates,
        frequency=shortlist.frequency,
        frequent=5,
        size=30,
    )
    old = Shortlist.load(tmp_path / "old.npz")
    assert old.special_ids == {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
    with pytest.raises(ValueError, match="counted for a vocabulary with other special ids"):
        shortlist.checked_for(type("Vocabulary", (), {"special_ids": old.special_ids}))
    assert old.checked_for(type("Vocabulary", (), {"special_ids": dict(old.special_ids)})) is old
