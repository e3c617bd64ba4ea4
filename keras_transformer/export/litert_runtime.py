"""Translating with a model written by `export_litert`: `LiteRTTranslator`, on the
`ai-edge-litert` interpreter, with SentencePiece in Python around it."""

import contextlib
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError, MissingDependencyError
from keras_transformer.export.litert_layout import (
    EXPORT_KEYS,
    ID_MAPS,
    LITERT_FILE,
    OPTIONS_FILE,
    SOURCE_MODEL,
    TARGET_MODEL,
)
from keras_transformer.export.options import open_export_file, read_options
from keras_transformer.files import text_items
from keras_transformer.inference.checks import refuse_one_string
from keras_transformer.inference.engine import Translations, refuse_arguments
from keras_transformer.inference.lines import BATCH_SIZE
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.text import SourcePolicy
from keras_transformer.validation import check_positive_int

# A file at least this large (its weights, which every step reads) is decoded with several
# threads even one sentence at a time; below it one thread is faster (benchmarks.md).
SEVERAL_THREADS_BYTES = 16 * 2**20
MAX_THREADS = 4  # CTranslate2's default intra-op thread count


def default_threads(path: str, batch_size: int | None) -> int:
    """The threads `LiteRTTranslator` takes for the `.tflite` file at `path` whose calls
    hold `batch_size` sentences (None: any number; a file of more than one sentence a
    call runs that many interpreters of one thread): every usable core, at most
    `MAX_THREADS`, for a file with batches or of `SEVERAL_THREADS_BYTES` or more, else one.

    Examples:
        ```python
        default_threads("litert/numbers_de_en/translator.tflite", 1)  # 1: a small file
        ```
    """
    if batch_size == 1 and os.path.getsize(path) < SEVERAL_THREADS_BYTES:
        return 1
    if sys.platform.startswith("linux"):  # the cores this process may run on
        usable = len(os.sched_getaffinity(0))
    else:
        usable = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, usable))


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as error:
        raise MissingDependencyError(
            "The LiteRT translator needs the `ai-edge-litert` package: "
            'pip install "keras-transformer-nmt[litert]"'
        ) from error
    return Interpreter


@contextlib.contextmanager
def _native_stderr_silenced():
    """Within it, what native code writes on file descriptor 2 is dropped (Python's
    exceptions are not: they are raised, not written)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _Interpreter:
    """One LiteRT interpreter of a translator file: source ids in, target ids and scores out,
    resized to each call's rows where the file's batch is free."""

    def __init__(self, interpreter):
        self.interpreter = interpreter
        details = interpreter.get_input_details()[0]
        self._input, self.rows = details["index"], int(details["shape"][0])
        # The target ids are the integer output; the score the float one, which files
        # written before it was an output lack.
        outputs = {o["dtype"]: o["index"] for o in interpreter.get_output_details()}
        self._output, self._scores = outputs[np.int32], outputs.get(np.float32)

    @property
    def has_scores(self):
        return self._scores is not None

    def run(self, source_ids):
        """Target ids `(rows, max_length)` and scores `(rows,)` (None without them) of int32
        source ids `(rows, max_source_length)`."""
        if len(source_ids) != self.rows:
            self.interpreter.resize_tensor_input(self._input, list(source_ids.shape))
            self.interpreter.allocate_tensors()
            self.rows = len(source_ids)
        self.interpreter.set_tensor(self._input, source_ids)
        self.interpreter.invoke()  # LiteRT releases the GIL while it runs
        scores = self.interpreter.get_tensor(self._scores) if self.has_scores else None
        return self.interpreter.get_tensor(self._output), scores

    def run_all(self, parts):
        """`run` of each of `parts`, in turn: a list of `(target_ids, scores)`."""
        return [self.run(part) for part in parts]


class LiteRTTranslator:
    """Translates strings with a model written by `export_litert`.

    Runs on the `ai-edge-litert` interpreter (not TensorFlow's deprecated
    `tf.lite.Interpreter`), with SentencePiece in Python around it. An empty
    or whitespace-only sentence is the source `[EOS]`, which the search ends
    at once: it translates to "", as everywhere in the package. A source
    longer than the export's `max_source_length` is cut to it (`truncated`
    says which). A file exported with one sentence a call (the default) is
    called once per sentence, on one interpreter of `num_threads` threads. A
    file of a fixed `batch_size` of several sentences runs `num_threads`
    interpreters of one thread each, which take its batches (a short last one
    padded with empty sources) in turn and decode side by side; a file whose
    batch is free, as many, each decoding a share of every
    `inference.lines.BATCH_SIZE` sentences (two such interpreters are faster
    than one of two threads: docs/guides/litert.md, "Threads").

    Args:
        directory: a directory written by `export_litert`.
        num_threads: threads; None: `default_threads` (one for a small file of
            one sentence a call, else every usable core up to four). A file of
            one sentence a call runs one interpreter of that many threads;
            other files, that many interpreters of one thread.

    Examples:
        ```python
        translate = LiteRTTranslator("litert/numbers_de_en")
        translate(["dreihunderteinundzwanzig", ""])  # ['three hundred and twenty-one', '']
        ```
    """

    def __init__(self, directory: str, num_threads: int | None = None):
        import sentencepiece

        if num_threads is not None:
            check_positive_int("num_threads", num_threads)

        self.options = read_options(directory, OPTIONS_FILE, "LiteRT")
        self.decode_options = DecodeOptions.from_dict(self.options, others=EXPORT_KEYS)
        self.max_source_length = self.decode_options.max_source_length
        self.max_length = self.decode_options.max_length
        # Sentences a call; None: any number (files written before batches hold one).
        self.batch_size = self.options.get("batch_size", 1)
        self.source_policy = SourcePolicy(
            self.max_source_length,
            self.options["source_eos_id"],
            tuple(self.options.get("source_prefix_ids", ())),
        )
        self.source, self.target = (
            open_export_file(
                directory,
                name,
                sentencepiece.SentencePieceProcessor,
                "a SentencePiece model",
                "litert",
            )
            for name in (SOURCE_MODEL, TARGET_MODEL)
        )
        self._source_map = self._target_map = None  # SentencePiece ids are the model's
        if os.path.isfile(os.path.join(directory, ID_MAPS)):
            maps = open_export_file(
                directory, ID_MAPS, lambda path: dict(np.load(path)), "the id maps", "litert"
            )
            self._source_map, self._target_map = maps["source"], maps["target"]
        interpreter_class = _interpreter_class()

        def load_interpreters(path):
            self.num_threads = num_threads or default_threads(path, self.batch_size)
            one_sentence = self.batch_size == 1  # a device's file: one interpreter, its threads
            count, threads = (1, self.num_threads) if one_sentence else (self.num_threads, 1)
            with _native_stderr_silenced():  # LiteRT's "INFO: Created ... XNNPACK delegate"
                made = [
                    interpreter_class(model_path=path, num_threads=threads) for _ in range(count)
                ]
                for interpreter in made:
                    interpreter.allocate_tensors()
            return [_Interpreter(interpreter) for interpreter in made]

        self._interpreters = open_export_file(
            directory, LITERT_FILE, load_interpreters, "a LiteRT model", "litert"
        )
        self._last_scores = np.zeros(0, np.float32)

    def source_ids(self, sentence):
        """A sentence's ids, cut to `max_source_length` with EOS: int32 `(1, S)`, 0-padded."""
        return self._source_rows([sentence], 1)

    def _source_rows(self, sentences, rows):
        """Ids of `sentences` (a list of `str`), `rows` of them: int32 `(rows, S)`, rows past
        the sentences holding an empty source's."""
        ids = np.full((rows, self.max_source_length), PAD_ID, np.int32)
        for row in range(rows):
            pieces = self.source.encode(sentences[row] if row < len(sentences) else "")
            if self._source_map is not None:
                pieces = self._source_map[pieces].tolist()
            kept = self.source_policy.ids(pieces)
            ids[row, : len(kept)] = kept
        return ids

    def translate_ids(self, source_ids):
        """Target ids `(B, max_length)` of source ids `(B, max_source_length)`, 0 after EOS,
        where B is the file's batch size or a multiple of it, or any number for a file whose
        batch is free; `scores` then holds the outputs' scores."""
        source_ids = np.asarray(source_ids)
        rows = source_ids.shape[0] if source_ids.ndim == 2 else 0
        if (
            source_ids.ndim != 2
            or source_ids.shape[1] != self.max_source_length
            or rows == 0
            or (self.batch_size is not None and rows % self.batch_size)
            or source_ids.dtype.kind not in "iu"
        ):
            raise ArgumentError(
                f"`source_ids` must be integer ids of shape ({self.batch_size or 'B'}, "
                f"{self.max_source_length}). Received: shape {source_ids.shape}, dtype "
                f"{source_ids.dtype}"
            )
        count = len(self._interpreters)
        if self.batch_size is None:  # a share of the rows for each interpreter
            parts = np.array_split(source_ids.astype(np.int32), min(rows, count))
        else:  # the file's batches, dealt out to the interpreters in turn
            parts = np.split(source_ids.astype(np.int32), rows // self.batch_size)
        shares = [parts[first::count] for first in range(min(count, len(parts)))]
        if len(shares) == 1:
            done = [_Interpreter.run_all(self._interpreters[0], shares[0])]
        else:  # interpreters decode side by side
            with ThreadPoolExecutor(len(shares)) as pool:
                done = list(pool.map(_Interpreter.run_all, self._interpreters, shares))
        results = [done[part % count][part // count] for part in range(len(parts))]
        if self._interpreters[0].has_scores:
            self._last_scores = np.concatenate([scores for _, scores in results])
        return np.concatenate([target_ids for target_ids, _ in results])

    def truncated(self, sentences):
        """Which sentences are longer than `max_source_length` pieces with EOS: list of bool."""
        return [self.source_policy.truncated(len(self.source.encode(s))) for s in sentences]

    @property
    def scores(self):
        """The scores of the last call's outputs, log P / length penalty: float32 `(B,)`."""
        if not self._interpreters[0].has_scores:
            raise ArgumentError(
                "This LiteRT file was written without scores; export it again for them."
            )
        return self._last_scores

    @property
    def score(self):
        """The score of the last call's first output (float)."""
        return float(self.scores[0])

    def __call__(self, sentences: Sequence[str]) -> list[str]:
        """Translations of strings `(B,)` (`strings`): a list of `str`."""
        return [text for text, _ in self._translate_all(self.strings(sentences))]

    def translate(
        self,
        sentences: Sequence[str],
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
    ) -> Translations:
        """Translations with their scores, as every engine gives them
        (`inference.engine`): the search fixed at export.

        Args:
            sentences: a list of strings `(B,)`.
            prefixes: not taken (an `ArgumentError` says so): the file holds
                one search, without prefixes or constraints.
            constraints: not taken either.

        Returns:
            `inference.Translations`: `translations`, `str` `(B, 1)`, `scores`,
            float32 `(B, 1)`, log P / length penalty, and `truncated`, bool `(B,)`.

        Examples:
            ```python
            LiteRTTranslator("litert/numbers_de_en").translate(["zwei"]).translations
            # array([['two']], dtype=object)
            ```
        """
        refuse_arguments(
            self,
            "the LiteRT file holds one search with its options fixed at export",
            prefixes=prefixes,
            constraints=constraints,
        )
        sentences = self.strings(sentences)
        pairs = self._translate_all(sentences, scores=True)
        return Translations.of(
            [[text] for text, _ in pairs],
            [[score] for _, score in pairs],
            self.truncated(sentences),
        )

    @staticmethod
    def strings(sentences):
        """`sentences` `(B,)`, given as a list or an array or tensor of strings, as a list of
        `str` (bytes read as UTF-8), or an `ArgumentError` naming an item that is not a
        string or not UTF-8."""
        refuse_one_string(sentences)
        if not isinstance(sentences, (list, tuple)):
            sentences = np.asarray(sentences, dtype=object).reshape(-1).tolist()
        return text_items(sentences)

    def _translate_all(self, sentences, scores=False):
        """`(text, score or None)` of each of `sentences`, a list of `str`, translated
        `batch_size` (or `BATCH_SIZE`) a call."""
        pairs = []
        batch = self.batch_size
        per_call = BATCH_SIZE if batch is None else batch * len(self._interpreters)
        for start in range(0, len(sentences), per_call):
            chunk = sentences[start : start + per_call]
            whole = -(-len(chunk) // batch) * batch if batch else len(chunk)  # whole batches
            rows = self._source_rows(chunk, whole)
            target_ids = self.translate_ids(rows)  # (rows, max_length)
            chunk_scores = self.scores.tolist() if scores else [None] * len(rows)
            pairs += [(self._text(target_ids[row]), chunk_scores[row]) for row in range(len(chunk))]
        return pairs

    def _text(self, target_ids):
        ended = np.flatnonzero(target_ids == self.options["eos_id"])
        ids = target_ids[: ended[0] if len(ended) else len(target_ids)]
        ids = [int(i) for i in ids if i != PAD_ID]
        if self._target_map is not None:
            ids = self._target_map[ids].tolist()
        return self.target.decode([i for i in ids if i != self.target.bos_id()])
