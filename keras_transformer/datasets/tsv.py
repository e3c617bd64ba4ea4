"""Tab-separated sentence pairs, the Tatoeba/Anki format of the Keras examples."""

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.datasets.parallel_files import read_lines
from keras_transformer.errors import ArgumentError


def load_tsv(path, source_column=0, target_column=1):
    """Reads `source<TAB>target[<TAB>anything]` lines into a `ParallelCorpus`.

    Columns past the two named are ignored (Anki files end with attribution).

    Args:
        path: the file, plain or `.gz`, UTF-8.
        source_column: index of the source column.
        target_column: index of the target column.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if the file is not UTF-8 or a line has too few columns
            (the message names the line).

    Examples:
        >>> corpus = load_tsv("deu.txt", source_column=1, target_column=0)
    """
    needed = max(source_column, target_column) + 1
    sources, targets = [], []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < needed:
            raise ArgumentError(
                f"{path!r} line {number} has {len(columns)} tab-separated column(s), "
                f"{needed} needed: {line[:80]!r}"
            )
        sources.append(columns[source_column])
        targets.append(columns[target_column])
    return ParallelCorpus(sources, targets)
