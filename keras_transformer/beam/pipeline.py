"""Translating text files with Apache Beam: read numbered lines, translate them with the
SavedModel through `RunInference`, write each file's translations in its order.

A pipeline that runs on one machine (Beam's DirectRunner or Prism) runs unchanged
on Dataflow, Flink or Spark: every step is a Beam transform over files that the
workers open by name, and a bundle that a runner re-executes writes the same
files again, so each output holds every line once.
"""

import os
from collections.abc import Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.transforms.util import SortAndBatchElements

from keras_transformer.beam.handler import METRICS, SavedModelHandler, Translated
from keras_transformer.errors import ArgumentError
from keras_transformer.export.saved_model_layout import N_BEST_SIGNATURE, SERVING_SIGNATURE
from keras_transformer.validation import check_positive_int

MALFORMED_FILE = "malformed.tsv"
"""The dead-letter output: `file<TAB>line<TAB>reason`, one row a line that is not UTF-8."""
TRUNCATED_FILE = "truncated.tsv"
"""`file<TAB>line`, one row a source longer than the model reads (translated cut)."""
BATCH_CHARACTERS = 256  # characters a line may average in a batch of `batch_size` lines


class Malformed(NamedTuple):
    """A line that could not be translated: where it is and why."""

    path: str
    line: int
    reason: str


class ReadNumberedLines(beam.PTransform):
    """Lines of text files as `((path, line number), text)`, numbered from 1 per file.

    Outputs, by tag: `lines`; `malformed`, a `Malformed` for each line that is
    not UTF-8 (it is left out of `lines`); and `counts`, `(path, number of
    lines)` for each file, empty files included. Files named `.gz` are read
    through gzip. Line ends are `\\n` (a `\\r` before it is dropped), as
    `translate` reads standard input.

    Args:
        paths: the files, as `match_files` returns them.
    """

    def __init__(self, paths: Sequence[str]):
        super().__init__()
        self.paths = list(paths)

    def expand(self, pipeline):
        return (
            pipeline
            | "Files" >> beam.Create(self.paths)
            | "Lines" >> beam.ParDo(_ReadLines()).with_outputs("malformed", "counts", main="lines")
        )


class _ReadLines(beam.DoFn):
    def process(self, path):
        number = 0
        with FileSystems.open(path, compression_type=CompressionTypes.AUTO) as f:
            while raw := f.readline():
                number += 1
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    reason = f"invalid UTF-8 byte at position {error.start}: {raw[:80]!r}"
                    yield beam.pvalue.TaggedOutput("malformed", Malformed(path, number, reason))
                    continue
                yield (path, number), text.rstrip("\r\n")
        yield beam.pvalue.TaggedOutput("counts", (path, number))


class TranslateLines(beam.PTransform):
    """Translates keyed lines with a SavedModel: `(key, line)` -> `(key, Translated)`.

    Lines are sorted by length within a bundle and batched
    (`SortAndBatchElements`), so a batch pads little, and each batch is one call
    of the signature in `RunInference`, which loads the SavedModel once a worker.

    Args:
        saved_model: the SavedModel's version directory.
        signature: the signature to call (`handler.SIGNATURES`), which fixes
            what a line holds.
        batch_size: lines a batch holds at most.

    Examples:
        ```python
        with beam.Pipeline() as p:
            (p | beam.Create([(1, "siebzehn"), (2, "zwei")])
               | TranslateLines("saved_models/numbers_de_en/1")
               | beam.Map(print))  # (1, Translated(hypotheses=[('seventeen', nan)], ...))
        ```
    """

    def __init__(self, saved_model, signature=SERVING_SIGNATURE, batch_size=64):
        super().__init__()
        check_positive_int("batch_size", batch_size)
        self.handler = _KeyedBatches(SavedModelHandler(saved_model, signature, batch_size))
        self.batch_size = batch_size

    def expand(self, lines):
        return (
            lines
            | "Sort and batch"
            >> SortAndBatchElements(
                min_batch_size=1,
                max_batch_size=self.batch_size,
                max_batch_weight=self.batch_size * BATCH_CHARACTERS,
                element_size_fn=lambda keyed: len(keyed[1]),
            )
            | "Translate" >> RunInference(self.handler)
            | "Unbatch" >> beam.FlatMap(lambda batch: batch)
        )


class _KeyedBatches(ModelHandler):
    """A handler whose example is a batch of `(key, line)` pairs, translated in one call
    by `lines`, a `SavedModelHandler`; `RunInference` passes the batches one at a time."""

    def __init__(self, lines):
        super().__init__(min_batch_size=1, max_batch_size=1)
        self.lines = lines

    def load_model(self):
        return self.lines.load_model()

    def run_inference(self, batch, model, inference_args=None):
        results = []
        for pairs in batch:
            keys = [key for key, _ in pairs]
            translated = self.lines.run_inference([line for _, line in pairs], model)
            results.append(list(zip(keys, translated, strict=True)))
        return results

    def get_metrics_namespace(self):
        return self.lines.get_metrics_namespace()


class TranslateFiles(beam.PTransform):
    """Reads text files, translates every line, and writes each file's translations in its
    order to `output_dir`, under the file's own name (gzip when it ends in `.gz`).

    The output has a line for each input line: an empty or whitespace-only line
    translates to an empty line, a line longer than the model reads is
    translated cut (and listed in `truncated.tsv`), and a line that is not UTF-8
    is an empty line (and listed with its file, line and reason in
    `malformed.tsv`, the dead-letter output). With `translate_n_best` each
    line gives its `N` hypotheses as `index<TAB>score<TAB>translation`, index
    counted from 0 in each file, as `translate --n-best` prints them.

    Args:
        paths: the input files (`match_files`); their base names must differ.
        output_dir: directory of the outputs, made if missing.
        saved_model: the SavedModel's version directory.
        signature: the signature to call (`handler.SIGNATURES`).
        batch_size: lines a batch holds at most.
    """

    def __init__(self, paths, output_dir, saved_model, signature=SERVING_SIGNATURE, batch_size=64):
        super().__init__()
        self.paths = list(paths)
        self.outputs = output_paths(self.paths, output_dir)
        self.output_dir = output_dir
        self.translate = TranslateLines(saved_model, signature, batch_size)
        self.signature = signature

    def expand(self, pipeline):
        read = pipeline | "Read" >> ReadNumberedLines(self.paths)
        # A file is read in one worker; the lines are spread over all before translating.
        spread = read.lines | "Spread" >> beam.Reshuffle()
        translated = spread | "Translate" >> self.translate
        by_file = translated | "By file" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1])))
        malformed = read.malformed | "Malformed by file" >> beam.Map(lambda m: (m.path, m))
        grouped = {"lines": by_file, "counts": read.counts, "malformed": malformed}
        cut = (
            grouped
            | "Group" >> beam.CoGroupByKey()
            | "Write" >> beam.ParDo(_WriteFile(self.outputs, self.signature))
        )
        _write_table(read.malformed, self.output_dir, MALFORMED_FILE, "Report malformed")
        _write_table(cut, self.output_dir, TRUNCATED_FILE, "Report truncated")
        return cut


class _WriteFile(beam.DoFn):
    """Writes one file's translations in line order (to a temporary name, renamed into
    place, so a re-run bundle replaces the file) and yields `(path, line)` of its cut
    sources."""

    def __init__(self, outputs, signature):
        self.outputs = outputs
        self.signature = signature

    def process(self, element):
        path, groups = element
        (count,) = groups["counts"]
        malformed = list(groups["malformed"])
        rows = [None] * count
        for number, translated in groups["lines"]:
            rows[number - 1] = translated
        for line in malformed:
            rows[line.line - 1] = line
        missing = [number for number, row in enumerate(rows, start=1) if row is None]
        if missing:  # a runner that lost elements; never write a file with holes
            raise RuntimeError(f"{path}: no translation of lines {missing[:20]}")
        target = self.outputs[path]
        partial = target + ".partial"
        compression = CompressionTypes.detect_compression_type(target)
        with FileSystems.create(partial, compression_type=compression) as f:
            for index, row in enumerate(rows):
                f.write(self.format(index, row).encode("utf-8"))
        if FileSystems.exists(target):
            FileSystems.delete([target])
        FileSystems.rename([partial], [target])
        cut = [
            n
            for n, row in enumerate(rows, start=1)
            if isinstance(row, Translated) and row.truncated
        ]
        Metrics.counter(METRICS, "lines").inc(count)
        Metrics.counter(METRICS, "malformed").inc(len(malformed))
        Metrics.counter(METRICS, "truncated").inc(len(cut))
        for number in cut:
            yield path, number

    def format(self, index, row):
        if isinstance(row, Malformed):
            return "\n"
        if self.signature == N_BEST_SIGNATURE:
            return "".join(f"{index}\t{score:.4f}\t{text}\n" for text, score in row.hypotheses)
        return row.hypotheses[0][0] + "\n"


def _write_table(rows, output_dir, name, label):
    """Writes `rows` (tuples) to `output_dir/name` as tab-separated lines, sorted; an
    empty file when there are none."""
    target = FileSystems.join(output_dir, name)

    def write(all_rows):
        with FileSystems.create(target) as f:
            for row in sorted(all_rows):
                f.write(("\t".join(str(field) for field in row) + "\n").encode("utf-8"))

    return rows | f"{label}: collect" >> beam.combiners.ToList() | label >> beam.Map(write)


def match_files(patterns: Sequence[str]) -> list[str]:
    """The files that `patterns` (paths or globs, on any file system Beam reads) name, in
    order, or an `ArgumentError` naming a pattern that matches none."""
    paths = []
    for pattern in map(os.fspath, patterns):
        matched = FileSystems.match([pattern])[0].metadata_list
        if not matched:
            raise ArgumentError(f"No file matches the input {pattern!r}.")
        paths += sorted(m.path for m in matched if m.path not in paths)
    return paths


def output_paths(paths, output_dir):
    """`{input path: output path}`: each file's base name in `output_dir`, or an
    `ArgumentError` naming two inputs whose names would collide there."""
    outputs = {}
    for path in paths:
        target = FileSystems.join(output_dir, os.path.basename(path))
        clash = [other for other, out in outputs.items() if out == target]
        if clash:
            raise ArgumentError(
                f"The inputs {clash[0]!r} and {path!r} have one name; their translations "
                f"would both be {target!r}. Translate them into separate output directories."
            )
        outputs[path] = target
    return outputs


class CorpusReport(NamedTuple):
    """What `translate_corpus` did: lines read (malformed ones included), lines that
    were not UTF-8, and sources translated cut, over all files."""

    files: int
    lines: int
    malformed: int
    truncated: int


def translate_corpus(
    saved_model,
    inputs: Sequence[str],
    output_dir: str,
    signature: str = SERVING_SIGNATURE,
    batch_size: int = 64,
    pipeline_args: Sequence[str] = (),
) -> CorpusReport:
    """Translates text files with a SavedModel on Apache Beam and waits for the pipeline.

    Args:
        saved_model: the SavedModel's version directory (`export_translator`).
        inputs: files or globs (`data/*.de.gz`), plain or `.gz`.
        output_dir: where each file's translations go, under its name
            (`TranslateFiles`), with `malformed.tsv` and `truncated.tsv`.
        signature: the signature to call (`handler.SIGNATURES`).
        batch_size: lines a call of the signature translates at most.
        pipeline_args: Beam's pipeline options, as on a command line
            (`["--runner=DirectRunner", "--direct_num_workers=2"]`).

    Returns:
        `CorpusReport`, from the pipeline's counters.

    Examples:
        ```python
        translate_corpus("saved_models/numbers_de_en/1", ["data/*.de.gz"], "out",
                         pipeline_args=["--direct_num_workers=2"])
        # CorpusReport(files=4, lines=10000, malformed=0, truncated=0)
        ```
    """
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions

    saved_model, output_dir = os.fspath(saved_model), os.fspath(output_dir)
    if not FileSystems.exists(FileSystems.join(saved_model, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel in {saved_model!r} (saved_model.pb is missing)")
    paths = match_files(inputs)
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    transform = TranslateFiles(paths, output_dir, saved_model, signature, batch_size)
    pipeline = beam.Pipeline(options=PipelineOptions(list(pipeline_args)))
    _ = pipeline | "Translate files" >> transform
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(METRICS))["counters"]
    totals = {name: 0 for name in ("lines", "malformed", "truncated")}
    for counter in counters:
        if counter.key.metric.name in totals:
            totals[counter.key.metric.name] += counter.committed or 0
    return CorpusReport(len(paths), **totals)
