"""`keras-transformer`: train, evaluate, translate, export and average from a terminal.

    keras-transformer train     --run-dir runs/numbers [--config FILE] [--set section.key=value ...]
    keras-transformer evaluate  --run-dir runs/numbers [--split test] [--beam-size 1,4]
    keras-transformer translate --run-dir runs/numbers "twenty-one" ...   (or lines on stdin)
    keras-transformer translate --saved-model saved_models/numbers/1 < sentences.txt
    keras-transformer translate --litert saved_models/numbers-litert-float32 < sentences.txt
    keras-transformer translate --run-dir A [--run-dir B ...] [--n-best N] [--prefix FILE]
                                [--constraints FILE]
                                [--sample --temperature T --top-k K --top-p P --seed S]
                                [--max-length-a A --max-length-b B --min-length N
                                 --no-repeat-ngram-size N] ...
    keras-transformer translate-corpus --saved-model saved_models/numbers/1 \\
                                --input 'data/*.de.gz' --output out/ [Beam's options]
    keras-transformer score     --run-dir runs/numbers --source FILE --target FILE
    keras-transformer export    --run-dir runs/numbers [--name numbers_en_de] [--version 3] [--xla]
    keras-transformer export    --run-dir runs/numbers --format ctranslate2 [--quantization int8]
    keras-transformer export    --run-dir runs/numbers --format litert [--quantization dynamic_int8]
    keras-transformer average   --run-dir runs/numbers [--last 5]
    keras-transformer plot      --run-dir runs/numbers [--output training.svg]
    keras-transformer config    [--config FILE] [--set section.key=value ...] > mine.yaml

Errors a user can make (`keras_transformer.errors.UserError`, a missing or
existing file) end with one line on stderr and exit status 2; any other error
is a bug, shown with its traceback, exit status 1. An interrupted `train`
exits with 130 and resumes when run again. What the package logs is printed
on stdout.
"""

import logging
import sys
import traceback

from keras_transformer import startup
from keras_transformer.cli.commands import run_translate_corpus
from keras_transformer.cli.parser import parser
from keras_transformer.errors import UserError
from keras_transformer.validation import check_tensorflow_backend

USER_ERRORS = (UserError, FileNotFoundError, FileExistsError)


def main(argv=None):
    args, unknown = parser().parse_known_args(argv)
    if unknown and args.command is not run_translate_corpus:  # the rest go to Beam
        parser().error(f"unrecognized arguments: {' '.join(unknown)}")
    args.pipeline_args = unknown
    if args.verbose:
        sys.stderr.write(startup.captured)
    print_package_log()
    try:
        check_tensorflow_backend("keras-transformer")
        return args.command(args) or 0
    except KeyboardInterrupt:
        print(
            "\nInterrupted. Run the same train command again to resume from the last epoch.",
            file=sys.stderr,
        )
        return 130
    except USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        print(
            "error: this is a bug in keras-transformer; please report it with the "
            "traceback above and the command that caused it.",
            file=sys.stderr,
        )
        return 1


class PrintHandler(logging.Handler):
    """Prints each record's message on the standard output of the moment."""

    def emit(self, record):
        print(self.format(record), flush=True)


def print_package_log():
    """Shows the package's log messages (INFO and above) on stdout, once per process."""
    logger = logging.getLogger("keras_transformer")
    if not any(isinstance(handler, PrintHandler) for handler in logger.handlers):
        logger.addHandler(PrintHandler())
        logger.setLevel(logging.INFO)
        logger.propagate = False


if __name__ == "__main__":
    sys.exit(main())
