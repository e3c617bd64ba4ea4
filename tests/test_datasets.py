import collections
import gzip

import pytest
from num2words import num2words

from keras_transformer.datasets import (
    load_corpus,
    load_parallel_files,
    load_split,
    load_tfds,
    load_tsv,
    numbers_corpus,
    small_numbers,
    split_numbers,
)


def write(path, data, compress=False):
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(data)
    return str(path)


def test_parallel_files_plain_and_gzip(tmp_path):
    source = write(tmp_path / "train.de.gz", "Ein Hund.\nZwei Katzen.\n".encode(), compress=True)
    target = write(tmp_path / "train.en", b"A dog.\r\nTwo cats.\n")
    corpus = load_parallel_files(source, target)
    assert corpus.sources == ["Ein Hund.", "Zwei Katzen."]
    assert corpus.targets == ["A dog.", "Two cats."]
    assert load_split(str(tmp_path), "train", "de", "en") == corpus


def test_parallel_files_errors_name_the_file_and_line(tmp_path):
    good = write(tmp_path / "a.txt", b"one\ntwo\nthree\n")
    short = write(tmp_path / "b.txt", b"one\ntwo\n")
    with pytest.raises(ValueError, match=r"differ in line count.*a.txt' has 3.*b.txt' has 2"):
        load_parallel_files(good, short)
    bad = write(tmp_path / "c.txt", b"one\ntw\xffo\nthree\n")
    with pytest.raises(ValueError, match=r"c.txt' is not UTF-8: line 2"):
        load_parallel_files(good, bad)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_parallel_files(good, str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match=r"No val.de or val.de.gz"):
        load_split(str(tmp_path), "val", "de", "en")


def test_multi30k_layout_loads(multi30k_dir):
    test = load_split(multi30k_dir, "test_2016_flickr", "de", "en")
    assert len(test) == 1000 and all(test.sources) and all(test.targets)


def test_tsv_ignores_extra_columns_and_blank_lines(tmp_path):
    path = write(tmp_path / "deu.txt", "Go.\tGeh.\tCC-BY 2.0\n\nHi.\tHallo!\tCC-BY\n".encode())
    corpus = load_tsv(path)
    assert corpus.sources == ["Go.", "Hi."] and corpus.targets == ["Geh.", "Hallo!"]
    swapped = load_tsv(path, source_column=1, target_column=0)
    assert swapped.sources == ["Geh.", "Hallo!"]


def test_tsv_names_a_line_with_too_few_columns(tmp_path):
    path = write(tmp_path / "pairs.tsv", b"a\tb\nonly one column\n")
    with pytest.raises(ValueError, match=r"line 2 has 1 tab-separated column"):
        load_tsv(path)


def test_numbers_corpus_is_fixed_disjoint_and_correct():
    train, val, test = (numbers_corpus(split) for split in ("train", "val", "test"))
    assert (len(train), len(val), len(test)) == (30_000, 1_000, 1_000)
    assert numbers_corpus("test", limit=5) == test[:5]  # writes out only what it returns
    assert load_corpus("numbers", "train", "en", "de", limit=300) == train[:300]
    assert not set(test.sources) & set(train.sources)
    assert not set(val.sources) & set(train.sources)
    assert not set(val.sources) & set(test.sources)
    assert len(set(test.sources)) == len(set(val.sources)) == 1_000
    for split, corpus in [("train", train), ("val", val), ("test", test)]:
        numbers = split_numbers(split)
        assert len(numbers) == len(corpus)
        for n in numbers[:: max(1, len(numbers) // 50)]:  # the words are the numbers'
            i = numbers.index(n)
            assert corpus[i] == (num2words(n, lang="en"), num2words(n, lang="de"))
    for split in ("val", "test"):
        digits = collections.Counter(len(str(n)) for n in split_numbers(split))
        assert digits == {3: 250, 4: 250, 5: 250, 6: 250}
    # Every magnitude is taught: each number below 100 is trained on, more than once,
    # and the larger digit counts hold most of the corpus.
    counts = collections.Counter(split_numbers("train"))
    assert all(counts[n] >= 5 for n in range(100))
    digits = collections.Counter(len(str(n)) for n in split_numbers("train"))
    assert min(digits[1], digits[2]) > 1_000 and digits[3] > 2_000
    assert digits[4] + digits[5] + digits[6] > 0.75 * 30_000
    pairs = dict(zip(train.sources, train.targets, strict=True))
    for english, german in [("zero", "null"), ("one", "eins"), ("seventeen", "siebzehn")]:
        assert pairs[english] == german


def test_small_numbers_are_every_number_below_100():
    small = small_numbers("de", "en")
    assert len(small) == 100
    assert small[0] == ("null", "zero")
    assert small[21] == ("einundzwanzig", "twenty-one")
    assert small[99] == ("neunundneunzig", "ninety-nine")
    with pytest.raises(ValueError, match=r"`source_lang` must be one of"):
        small_numbers("xx", "en")


def test_numbers_corpus_other_languages_and_bad_choice():
    french = numbers_corpus("val", source_lang="de", target_lang="fr")
    german = numbers_corpus("val")
    assert french.sources == german.targets
    with pytest.raises(ValueError, match=r"`target_lang` must be one of.*target_lang='xx'"):
        numbers_corpus("val", target_lang="xx")


def test_tfds_by_name_on_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        corpus = load_tfds("ted_hrlr_translate/pt_to_en", split="train")
    assert len(corpus) == 6
    assert all(isinstance(s, str) for s in corpus.sources + corpus.targets)


def test_tfds_offline_failure_is_a_clear_message(tmp_path):
    pytest.importorskip("tensorflow_datasets")
    with pytest.raises(RuntimeError, match=r"Could not load TFDS data set 'ted_hrlr_translate"):
        load_tfds("ted_hrlr_translate/pt_to_en", "train", data_dir=str(tmp_path), download=False)


def write_shards(directory, sizes, extra_target_line=None):
    """Shards `train-00i.de.gz` / `train-00i.en` with `sizes[i]` lines each."""
    pairs = []
    for i, size in enumerate(sizes):
        sources = [f"Satz {i} {j}" for j in range(size)]
        targets = [f"sentence {i} {j}" for j in range(size)]
        if extra_target_line == i:
            targets.append("one line too many")
        write(directory / f"train-00{i}.de.gz", "".join(s + "\n" for s in sources).encode(), True)
        write(directory / f"train-00{i}.en", "".join(t + "\n" for t in targets).encode())
        pairs += list(zip(sources, targets[:size], strict=True))
    return pairs


def test_a_streamed_split_holds_the_pairs_of_its_shards(tmp_path):
    from keras_transformer.datasets import StreamingCorpus

    pairs = write_shards(tmp_path, [7, 3, 5])
    corpus = StreamingCorpus.from_directory(str(tmp_path), "train", "de", "en")
    streamed = [(s.decode(), t.decode()) for s, t in corpus.to_dataset().as_numpy_iterator()]
    assert sorted(streamed) == sorted(pairs) and len(streamed) == len(pairs)
    in_memory = load_split(str(tmp_path), "train", "de", "en")  # the shards, one after another
    assert list(zip(in_memory.sources, in_memory.targets, strict=True)) == pairs
    assert len(list(corpus[:4].to_dataset())) == 4
    limited = load_corpus(
        "files", "train", "de", "en", directory=str(tmp_path), stream=True, limit=4
    )
    assert [(s.decode(), t.decode()) for s, t in limited.to_dataset().as_numpy_iterator()] == [
        (s.decode(), t.decode()) for s, t in corpus[:4].to_dataset().as_numpy_iterator()
    ]

    sample = corpus.sample_sentences(6, seed=1)
    assert len(sample) == 6 and set(sample) <= {s for pair in pairs for s in pair}
    assert sample == corpus.sample_sentences(6, seed=1) != corpus.sample_sentences(6, seed=2)
    assert sorted(corpus.sample_sentences(100, ["target"])) == sorted(t for _, t in pairs)


@pytest.mark.parametrize("target_count", [7, 8, 9, 12])
def test_files_read_in_blocks_end_apart_wherever_the_block_ends(tmp_path, target_count):
    import tensorflow as tf

    from keras_transformer.datasets.streaming import aligned_lines

    write(tmp_path / "a.de", "".join(f"s{i}\n" for i in range(8)).encode())
    write(tmp_path / "a.en", "".join(f"t{i}\n" for i in range(target_count)).encode())
    pairs = aligned_lines(str(tmp_path / "a.de"), str(tmp_path / "a.en"), block=4)
    if target_count == 8:  # two full blocks on each side
        assert [(s.decode(), t.decode()) for s, t in pairs.as_numpy_iterator()] == [
            (f"s{i}", f"t{i}") for i in range(8)
        ]
        return
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"a\.de and .*a\.en"):
        list(pairs.as_numpy_iterator())


def test_shards_that_end_apart_stop_the_stream_with_both_names(tmp_path):
    from keras_transformer.datasets import StreamingCorpus
    from keras_transformer.text import SentencePieceTokenizer, make_batches

    write_shards(tmp_path, [4, 6], extra_target_line=1)
    corpus = StreamingCorpus.from_directory(str(tmp_path), "train", "de", "en")
    tokenizer = SentencePieceTokenizer.train(["Satz sentence 0 1 2 3 4 5"] * 20, vocab_size=20)
    with pytest.raises(
        ValueError, match=r"differ in line count: .*train-001.de.gz and .*train-001.en"
    ):
        make_batches(corpus, tokenizer, tokenizer, cache=False)
    with pytest.raises(ValueError, match=r"differ in line count: .*train-001.de.gz"):
        corpus.sample_sentences(100)  # what a tokenizer trains on, read first
    (tmp_path / "train-001.en").unlink()
    write(tmp_path / "train-002.en", b"x\n")
    with pytest.raises(ValueError, match=r"do not pair up: \['train-000', 'train-001'\]"):
        StreamingCorpus.from_directory(str(tmp_path), "train", "de", "en")
