"""The CTranslate2 export against the package's own model, token by token.

The package's translators here decode without XLA, so that no test waits for a compilation
per batch shape; `test_export` checks that XLA gives the same outputs."""

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf
from conftest import load_tiny_translation, randomize_position_tables

import keras_transformer as kt
from keras_transformer import run
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.scoring import score_outputs
from keras_transformer.run.directory import RunDirectory
from keras_transformer.text import SentencePieceTokenizer

ctranslate2 = pytest.importorskip("ctranslate2")
from keras_transformer.export.ctranslate2 import ctranslate2_spec, export_ctranslate2  # noqa: E402
from keras_transformer.export.ctranslate2_runtime import CTranslate2Translator  # noqa: E402


def teacher_forced_log_probs(model, tokenizer, sources, targets):
    """log P(y_t | y_<t, x) of every target token and EOS, from the Keras model."""
    source = tokenizer.tokenize(tf.constant(sources))
    target = tokenizer.tokenize(tf.constant(targets))
    rows = len(sources)
    eos = tf.fill([rows, 1], tokenizer.eos_id)
    source_ids = tf.concat([source, eos], axis=1).to_tensor(0)  # (B, S)
    target_in = tf.concat([tf.fill([rows, 1], tokenizer.bos_id), target], axis=1).to_tensor(0)
    target_out = tf.concat([target, eos], axis=1).to_tensor(0)  # (B, T)
    log_probs = tf.nn.log_softmax(model((source_ids, target_in)))  # (B, T, V)
    picked = tf.gather(log_probs, target_out, batch_dims=2).numpy()  # (B, T)
    lengths = target.row_lengths().numpy() + 1
    return [picked[i, :n] for i, n in enumerate(lengths)], source, target


@pytest.mark.parametrize(
    "architecture",
    [
        dict(),  # the paper: post-LN, separate output layer, interleaved sin/cos
        dict(
            norm_first=True,
            shared_embeddings="all",
            activation="gelu",
            positions=kt.layers.Sinusoidal(layout="concatenated"),
        ),
        dict(num_layers=(3, 1), activation="gelu_sigmoid"),
        dict(positions=kt.layers.Learned(48)),
        dict(positions="rotary", norm_first=True),
        dict(positions=kt.layers.ShawRelative(4)),
        dict(positions="relative_bias"),
    ],
    ids=[
        "post_ln",
        "pre_ln_tied_gelu_concatenated",
        "deep_encoder_shallow_decoder_gelu_sigmoid",
        "learned_positions",
        "rotary_pre_ln",
        "relative",
        "relative_bias",
    ],
)
def test_ctranslate2_scores_every_token_as_the_keras_model_does(architecture, tmp_path):
    corpus = numbers_corpus("train", limit=400)
    tokenizer = SentencePieceTokenizer.train(corpus.sources + corpus.targets, vocab_size=100)
    vocab = tokenizer.vocab_size
    settings = dict(num_layers=2, d_model=32, num_heads=4, dff=64) | architecture
    model = kt.Transformer(input_vocab_size=vocab, target_vocab_size=vocab, **settings)
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    randomize_position_tables(model)
    sources, targets = corpus.sources[:12], corpus.targets[:12]
    expected, source, target = teacher_forced_log_probs(model, tokenizer, sources, targets)

    translator = kt.Translator(model, tokenizer, tokenizer, max_length=10, jit_compile=False)
    directory = export_ctranslate2(translator, tmp_path / "ct2")
    pieces = tokenizer.pieces
    scored = ctranslate2.Translator(str(directory)).score_batch(
        [[pieces[i] for i in row] for row in source.to_list()],
        [[pieces[i] for i in row] for row in target.to_list()],
    )
    for want, got in zip(expected, scored, strict=True):
        np.testing.assert_allclose(got.log_probs, want, atol=2e-5)

    # An untrained model's favourite token is often BOS, which neither search may generate.
    greedy = translator.copy(beam_size=1)
    assert CTranslate2Translator(directory, beam_size=1)(sources) == (
        kt.inference.translate_lines(greedy, sources)
    )


def test_ctranslate2_greedy_is_the_package_greedy(tiny_translation, tmp_path):
    model, tokenizer = load_tiny_translation(tiny_translation)
    test = numbers_corpus("test", limit=300)
    translator = kt.Translator(model, tokenizer, tokenizer, beam_size=1, jit_compile=False)
    ours = kt.inference.translate_lines(translator, test.sources)
    theirs = CTranslate2Translator(export_ctranslate2(translator, tmp_path / "float32"))(
        test.sources
    )
    same = np.mean([a == b for a, b in zip(ours, theirs, strict=True)])
    assert same >= 0.99, f"only {same:.1%} of greedy outputs agree"


def test_a_default_ctranslate2_beam_search_gives_the_packages_translations(main_job, tmp_path):
    """Sentence by sentence, against the beam 4 outputs `evaluate` wrote in the main job."""
    directory, _ = main_job
    run_dir = directory / "runs" / "numbers_de_en"
    with open(RunDirectory(run_dir).hypotheses_path("test", "best", 4), encoding="utf-8") as f:
        ours = f.read().splitlines()
    sources = numbers_corpus("test", "de", "en").sources
    exported = run.export_ctranslate2_run(str(run_dir), tmp_path / "beam4")
    default = CTranslate2Translator(exported)
    assert default.beam_size == 4
    same = [a == b for a, b in zip(ours, default(sources), strict=True)]
    assert np.mean(same) >= 0.99, [i for i, s in enumerate(same) if not s][:20]
    own = CTranslate2Translator(exported, ranking="ctranslate2")(sources)  # patience 1
    assert np.mean([a == b for a, b in zip(ours, own, strict=True)]) < np.mean(same)


def test_ctranslate2_int8_translates_nearly_every_sentence_as_float32_does(main_job, tmp_path):
    """int8 is judged on a trained model (the README main job's, ~97% exact matches),
    sentence by sentence. On a model that is barely trained, most outputs sit near a
    tie between two pieces, and which way int8's rounding tips them depends on the
    CPU's int8 kernels: the tiny test model lost 2 BLEU on an AVX2 CPU and none on an
    AVX-512 one, with 137 of 300 outputs changed on the first."""
    directory, _ = main_job
    test = numbers_corpus("test", "de", "en")
    outputs = {
        quantization: CTranslate2Translator(
            run.export_ctranslate2_run(
                str(directory / "runs" / "numbers_de_en"),
                tmp_path / str(quantization),
                quantization=quantization,
                beam_size=1,
            )
        )(test.sources)
        for quantization in (None, "int8")
    }
    float32, int8 = outputs[None], outputs["int8"]
    same = np.mean([a == b for a, b in zip(float32, int8, strict=True)])
    assert same >= 0.97, f"int8 changes {1 - same:.1%} of the outputs"
    # int8 loses no more exact matches than it gains, up to McNemar's two standard
    # deviations, and keeps the BLEU.
    lost = sum(a == t != b for a, b, t in zip(float32, int8, test.targets, strict=True))
    gained = sum(b == t != a for a, b, t in zip(float32, int8, test.targets, strict=True))
    assert lost - gained <= 2 * np.sqrt(lost + gained), (lost, gained)
    bleu, bleu_int8 = (
        sacrebleu.corpus_bleu(output, [test.targets]).score for output in (float32, int8)
    )
    assert bleu > 90 and bleu_int8 >= bleu - 0.5, (bleu, bleu_int8)


def test_ctranslate2_takes_the_exported_length_options(tiny_translation, tmp_path):
    model, tokenizer = load_tiny_translation(tiny_translation)
    sources = numbers_corpus("test").sources[:100] + ["", "   "]
    options = {"min_length": 6, "no_repeat_ngram_size": 2}
    translator = kt.Translator(
        model, tokenizer, tokenizer, beam_size=1, **options, jit_compile=False
    )
    ours = kt.inference.translate_lines(translator, sources)
    exported = CTranslate2Translator(export_ctranslate2(translator, tmp_path / "options"))
    theirs = exported(sources)
    assert ours[-2:] == theirs[-2:] == ["", ""]
    assert exported([]) == [] and exported(sources[:1]) == theirs[:1]
    with pytest.raises(ArgumentError, match="one string"):
        exported(sources[0])  # not its characters, one by one
    same = np.mean([a == b for a, b in zip(ours, theirs, strict=True)])
    assert same >= 0.97, f"only {same:.1%} of greedy outputs agree"
    plain = translator.copy(min_length=0, no_repeat_ngram_size=0)
    bound = [
        i for i, text in enumerate(kt.inference.translate_lines(plain, sources)) if text != ours[i]
    ]
    assert len(bound) >= 10  # sentences the options change
    assert np.mean([ours[i] == theirs[i] for i in bound]) >= 0.9, bound

    # CTranslate2 takes the forbidden tokens away before its softmax, the package after
    # it, so their beams part on many sentences of a barely trained model (it searches
    # with raised probabilities); every ended hypothesis is scored again, and the score
    # given is the package's score of the output, which the referee computes.
    beam = translator.copy(beam_size=4, alpha=1.0)
    engine = CTranslate2Translator(export_ctranslate2(beam, tmp_path / "beam"))
    outputs = [pieces for (pieces, _), *_ in engine.search_pieces(engine.source_pieces(sources))]
    target_ids = np.zeros((len(sources), beam.max_length + 1), np.int32)
    for row, pieces in enumerate(outputs):
        ids = [tokenizer.pieces.index(p) for p in pieces] + [tokenizer.eos_id]
        target_ids[row, : len(ids)] = ids
    referee = score_outputs(
        model, beam.source_ids(sources), target_ids, tokenizer.bos_id, tokenizer.eos_id, 1.0
    )["score"]
    given = engine.translate(sources)
    np.testing.assert_allclose(given["scores"][:, 0], referee, atol=1e-2)  # padding and BOS
    same = beam.translate(sources).translations[:, 0] == given.translations[:, 0]
    assert same.mean() >= 0.7, np.flatnonzero(~same)

    limited = translator.copy(min_length=0, max_length_a=1.0, max_length_b=-1)
    cut = CTranslate2Translator(export_ctranslate2(limited, tmp_path / "limited"))
    ids = tokenizer.tokenize(tf.constant(sources)).to_list()
    source_pieces = [[tokenizer.pieces[i] for i in row] for row in ids]
    for source, target in zip(source_pieces, cut.translate_pieces(source_pieces), strict=True):
        assert len(target) <= max(1, len(source)), (source, target)  # 1 * (pieces + EOS) - 1


def test_ctranslate2_export_refuses_what_it_cannot_write(tiny_translation, tmp_path):
    model, tokenizer = load_tiny_translation(tiny_translation)
    translator = kt.Translator(model, tokenizer, tokenizer)
    with pytest.raises(ValueError, match="Unknown quantization 'int3'"):
        export_ctranslate2(translator, tmp_path / "a", quantization="int3")
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="taken"):
        export_ctranslate2(translator, tmp_path / "taken")
    with pytest.raises(FileNotFoundError, match="keras_transformer.json is missing"):
        CTranslate2Translator(str(tmp_path / "taken"))
    softplus = kt.Transformer(1, 16, 2, 32, 50, 50, activation="softplus")
    softplus((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    with pytest.raises(ValueError, match="no activation 'softplus'"):
        ctranslate2_spec(softplus, tokenizer.pieces[:50], tokenizer.pieces[:50])
    for elsewhere in ("every_layer", "queries_and_keys"):
        positions = kt.layers.Sinusoidal(placement=elsewhere)
        placed = kt.Transformer(1, 16, 2, 32, 50, 50, positions=positions)
        placed((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
        with pytest.raises(ValueError, match=f"elsewhere \\(placement='{elsewhere}'"):
            ctranslate2_spec(placed, tokenizer.pieces[:50], tokenizer.pieces[:50])
    alibi = kt.Transformer(1, 16, 2, 32, 50, 50, positions="alibi")
    alibi((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    with pytest.raises(ValueError, match="CTranslate2's encoder-decoder has no ALiBi positions"):
        ctranslate2_spec(alibi, tokenizer.pieces[:50], tokenizer.pieces[:50])
    too_many = tokenizer.pieces + [f"extra{i}" for i in range(model.input_vocab_size)]
    with pytest.raises(ValueError, match=f"source vocabulary has {len(too_many)} pieces"):
        ctranslate2_spec(model, too_many, tokenizer.pieces)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ctranslate2-")]
    keras.backend.clear_session()


def test_ctranslate2_patience_lets_beam_search_find_the_package_outputs(tiny_translation, tmp_path):
    """CTranslate2's own beam search stops a sentence once `beam_size` hypotheses have
    ended and divides by its own length penalty, log P / |Y| ** alpha; with alpha 1.0 a
    longer live hypothesis can still win. Its patience of 4 keeps searching, and its
    outputs agree with the package's exact search on more sentences than they stop
    agreeing on (67 and 16 of 300 when written). The default ranks the ended hypotheses
    by the package's GNMT score among every hypothesis that ended, with a patience of 4,
    and agrees on nearly every sentence (99.7% on an AVX2 VM)."""
    model, tokenizer = load_tiny_translation(tiny_translation)
    sources = numbers_corpus("test").sources[:300]
    translator = kt.Translator(
        model, tokenizer, tokenizer, beam_size=4, alpha=1.0, jit_compile=False
    )
    ours = kt.inference.translate_lines(translator, sources)
    directory = export_ctranslate2(translator, tmp_path / "beam")
    own = {p: CTranslate2Translator(directory, patience=p, ranking="ctranslate2") for p in (1, 4)}
    theirs = {p: translate(sources) for p, translate in own.items()}
    agree = {p: [a == b for a, b in zip(ours, out, strict=True)] for p, out in theirs.items()}
    gained = sum(b and not a for a, b in zip(agree[1], agree[4], strict=True))
    lost = sum(a and not b for a, b in zip(agree[1], agree[4], strict=True))
    assert gained >= 20 and lost <= gained // 3, (np.mean(agree[1]), np.mean(agree[4]))
    default = CTranslate2Translator(directory)
    assert (default.patience, default.ranking) == (4, "package")
    same = np.mean([a == b for a, b in zip(ours, default(sources), strict=True)])
    assert same >= 0.97 and same >= np.mean(agree[4]), (same, np.mean(agree[4]))
    with pytest.raises(ValueError, match="`ranking` must be one of"):
        CTranslate2Translator(directory, ranking="gnmt")
    with pytest.raises(ValueError, match="patience.*Received: patience=0"):
        CTranslate2Translator(directory, patience=0)


def test_ctranslate2_translate_gives_the_translators_outputs_scores_and_prefixes(
    tiny_translation, tmp_path
):
    """`translate`, the interface every engine shares: the same keys and shapes as
    `Translator.translate`, the package's score of each output, target prefixes, and
    constraints refused by name."""
    model, tokenizer = load_tiny_translation(tiny_translation)
    sources = numbers_corpus("test").sources[:60] + ["", "   "]
    for options in [dict(beam_size=1), dict(beam_size=4, n_best=2, alpha=1.0)]:
        translator = kt.Translator(model, tokenizer, tokenizer, **options, jit_compile=False)
        engine = CTranslate2Translator(export_ctranslate2(translator, tmp_path / str(options)))
        # Every other sentence from its translation's first word: a German number is one
        # word, which the search must then end or go on from.
        first_words = [t.split(" ")[0] for t in kt.inference.translate_lines(translator, sources)]
        prefixes = [word if i % 2 else "" for i, word in enumerate(first_words)]
        for given in [None, prefixes]:
            ours, theirs = (e.translate(sources, given) for e in (translator, engine))
            n = options.get("n_best", 1)
            assert theirs["translations"].shape == theirs["scores"].shape == (len(sources), n)
            assert type(theirs) is type(ours) is kt.inference.Translations
            np.testing.assert_array_equal(theirs.truncated, ours.truncated)
            np.testing.assert_array_equal(theirs.truncated, engine.truncated(sources))
            same = ours.translations == theirs.translations  # (B, n)
            assert same[:, 0].mean() >= 0.93, (options, given is not None, same[:, 0].mean())
            if given is not None:
                starts = zip(theirs["translations"][:, 0], given, strict=True)
                assert all(text.startswith(prefix) for text, prefix in starts)
            # With a prefix, CTranslate2's scorer does not leave padding and BOS out of
            # the softmax as the search does: a prefix's log P is lower by their mass.
            # And two hypotheses of an n-best list can spell one text with other pieces.
            tolerance = 2e-3 if given is None else 2e-2
            close = np.isclose(theirs.scores, ours.scores, rtol=2e-3, atol=tolerance)  # (B, n)
            assert close[same].mean() >= 0.98, np.flatnonzero(same & ~close)
        lines = kt.inference.translate_lines_with_scores(engine, sources[:3])
        assert [[text for text, _ in row] for row in lines] == (
            engine.translate(sources[:3])["translations"].tolist()
        )
    with pytest.raises(ArgumentError, match="does not take `constraints`: CTranslate2 has no"):
        engine.translate(sources[:1], constraints=[["zwei"]])
    with pytest.raises(ArgumentError, match="Give one prefix per sentence"):
        engine.translate(sources[:2], prefixes=["zwei"])
    long_prefix = " ".join(["two"] * (engine.max_length + 1))
    with pytest.raises(ArgumentError, match=r"Prefix 1 has \d+ tokens.*max_length="):
        engine.translate(sources[:2], prefixes=["", long_prefix])
