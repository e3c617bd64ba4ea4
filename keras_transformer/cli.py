"""`keras-transformer`: train, evaluate, translate, export and average from a terminal.

    keras-transformer train     --run-dir runs/numbers [--config FILE] [--set section.key=value ...]
    keras-transformer evaluate  --run-dir runs/numbers [--split test] [--beam-size 1,4]
    keras-transformer translate --run-dir runs/numbers "twenty-one" ...   (or lines on stdin)
    keras-transformer translate --saved-model saved_models/numbers/1 < sentences.txt
    keras-transformer translate --run-dir A [--run-dir B ...] [--n-best N] [--prefix FILE]
                                [--sample --temperature T --top-k K --top-p P --seed S] ...
    keras-transformer score     --run-dir runs/numbers --source FILE --target FILE
    keras-transformer export    --run-dir runs/numbers [--name numbers_en_de] [--version 3] [--xla]
    keras-transformer export    --run-dir runs/numbers --format ctranslate2 [--quantization int8]
    keras-transformer average   --run-dir runs/numbers [--last 5]

Errors a user can make (`keras_transformer.errors.UserError`, a missing or
existing file) end with one line on stderr and exit status 2; any other error
is a bug, shown with its traceback, exit status 1. An interrupted `train`
exits with 130 and resumes when run again. What the package logs is printed
on stdout.
"""

import argparse
import json
import logging
import os
import sys
import traceback

from keras_transformer import startup
from keras_transformer.config import load_config
from keras_transformer.errors import ArgumentError, UserError
from keras_transformer.export.saved_model import SAVED_MODELS_DIR

USER_ERRORS = (UserError, FileNotFoundError, FileExistsError)


def main(argv=None):
    args = parser().parse_args(argv)
    if args.verbose:
        sys.stderr.write(startup.captured)
    print_package_log()
    try:
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


def parser():
    p = argparse.ArgumentParser(prog="keras-transformer", description=__doc__.splitlines()[0])
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's C++ start-up lines (hidden unless TF_CPP_MIN_LOG_LEVEL is set)",
    )
    commands = p.add_subparsers(required=True, metavar="command")
    for add in (
        add_train,
        add_evaluate,
        add_translate,
        add_score,
        add_export,
        add_average,
    ):
        add(commands)
    return p


def add_train(commands):

    train = commands.add_parser("train", help="train a model, or resume an interrupted run")
    run_dir_argument(train)
    train.add_argument("--config", help="YAML or JSON file of options (see config.py)")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one option, e.g. --set train.epochs=5 (repeatable)",
    )
    train.set_defaults(command=run_train)


def add_evaluate(commands):
    evaluate = commands.add_parser("evaluate", help="decode a split and score it with sacreBLEU")
    run_dir_argument(evaluate)
    evaluate.add_argument("--split", help="split to decode (default: data.test_split)")
    evaluate.add_argument("--output", help="hypotheses file (default: in the run directory)")
    decode_arguments(evaluate, several_beams=True)
    evaluate.set_defaults(command=run_evaluate)


def add_translate(commands):
    translate = commands.add_parser("translate", help="translate sentences (arguments or stdin)")
    source = translate.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--run-dir",
        action="append",
        help="a trained run directory; repeat it to decode with an ensemble of runs",
    )
    source.add_argument("--saved-model", help="an exported SavedModel version directory")
    translate.add_argument("sentences", nargs="*", help="sentences; stdin lines if none")
    decode_arguments(translate)
    translate.add_argument(
        "--n-best",
        type=positive_int,
        help="print the N best translations of each sentence with their scores",
    )
    translate.add_argument(
        "--prefix", help="file of target prefixes, one a sentence: each translation starts so"
    )
    translate.add_argument(
        "--sample", action="store_true", help="draw translations at random instead of searching"
    )
    translate.add_argument("--temperature", type=float, default=1.0, help="with --sample")
    translate.add_argument("--top-k", type=int, default=0, help="with --sample (0: all)")
    translate.add_argument("--top-p", type=float, default=1.0, help="with --sample (1: all)")
    translate.add_argument("--seed", type=int, default=0, help="with --sample")
    translate.set_defaults(command=run_translate)


def add_score(commands):
    score = commands.add_parser(
        "score", help="log-probability of given translations (force decoding)"
    )
    run_dir_argument(score)
    score.add_argument("--source", required=True, help="source sentences, one a line")
    score.add_argument("--target", required=True, help="their translations, one a line")
    score.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    score.set_defaults(command=run_score)


def add_export(commands):
    export = commands.add_parser(
        "export", help="write a SavedModel for TF Serving, or a CTranslate2 model"
    )
    run_dir_argument(export)
    export.add_argument(
        "--format",
        default="saved_model",
        choices=["saved_model", "ctranslate2"],
        help="ctranslate2 needs the optional `ctranslate2` package",
    )
    export.add_argument(
        "--quantization",
        help="CTranslate2 weight type: int8, int8_float32, bfloat16, ... (default: float32)",
    )
    export.add_argument(
        "--output",
        help="CTranslate2 model directory (default: {base-dir}/{run name}-ctranslate2-{type})",
    )
    export.add_argument("--name", help="model name (default: the run directory's name)")
    export.add_argument("--base-dir", default=SAVED_MODELS_DIR)
    export.add_argument("--version", type=int, help="version (default: the next free one)")
    export.add_argument(
        "--ids-only",
        action="store_true",
        help="leave out the tokenizers: token ids in and out, for servers without TF Text ops",
    )
    export.add_argument(
        "--xla",
        action="store_true",
        help="compile the search with XLA (faster; TF Serving then needs "
        "--xla_cpu_compilation_enabled=true)",
    )
    decode_arguments(export)
    export.set_defaults(command=run_export)


def add_average(commands):
    average = commands.add_parser("average", help="average the last N epoch checkpoints")
    run_dir_argument(average)
    average.add_argument("--last", type=positive_int, default=5)
    average.set_defaults(command=run_average)


def run_dir_argument(p):
    p.add_argument("--run-dir", required=True, help="the run directory")


def decode_arguments(p, several_beams=False):
    p.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    if several_beams:
        p.add_argument(
            "--beam-size",
            type=beam_sizes,
            help="1 for greedy; several, e.g. 1,4, are decoded and shown side by side "
            "(default: decode.beam_size)",
        )
    else:
        p.add_argument(
            "--beam-size", type=beam_sizes_one, help="1 for greedy (default: decode.beam_size)"
        )
    p.add_argument("--alpha", type=float, help="length penalty (default: decode.alpha)")


def beam_sizes(text):
    """`"1,4"` -> [1, 4]: positive integers, separated by commas."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"beam sizes are positive integers separated by commas, e.g. 1,4. Received: {text!r}"
        )
    return sizes


def positive_int(text):
    """A positive integer argument."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a positive integer. Received: {text!r}")
    return int(text)


def beam_sizes_one(text):
    """One positive beam size."""
    sizes = beam_sizes(text)
    if len(sizes) != 1:
        raise argparse.ArgumentTypeError(f"give one beam size. Received: {text!r}")
    return sizes[0]


def run_train(args):
    config = load_config(args.config, args.set)
    from keras_transformer import run
    from keras_transformer.training import distribution_strategy

    if config["train"]["devices"] > 1:
        distribution_strategy(config["train"]["devices"])  # before TensorFlow starts
    run.train(args.run_dir, config)
    print(f"trained: {args.run_dir}")


def run_evaluate(args):
    from keras_transformer import run

    results = run.evaluate(
        args.run_dir, args.split, args.checkpoint, args.beam_size or [None], args.alpha, args.output
    )
    first = results[0]
    print(f"{first['split']}: {first['sentences']} sentences, checkpoint {first['checkpoint']}")
    print(f"{'':18}" + "".join(f"{'beam ' + str(r['beam_size']):>10}" for r in results))
    for label, key, form in [
        ("BLEU (cased)", "bleu", "{:10.2f}"),
        ("BLEU (lowercased)", "bleu_lowercase", "{:10.2f}"),
        ("BLEU (intl)", "bleu_intl", "{:10.2f}"),
        ("BLEU (intl, lc)", "bleu_intl_lowercase", "{:10.2f}"),
        ("chrF", "chrf", "{:10.2f}"),
        ("exact match", "exact_match", "{:10.2%}"),
    ]:
        print(f"{label:18}" + "".join(form.format(r[key]) for r in results))
    print(f"BLEU signature: {first['signature']}")
    print(f"BLEU (intl, lc) signature: {first['signature_intl_lowercase']}")
    for result in results:
        print(f"hypotheses, beam {result['beam_size']}: {result['hypotheses']}")
    for result in results:
        print(json.dumps(result))


def run_translate(args):
    from keras_transformer.datasets import read_lines
    from keras_transformer.inference import translate_lines, translate_lines_with_scores

    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    extras = args.n_best or args.prefix or args.sample
    if args.saved_model:
        if extras:
            raise ArgumentError(
                "--n-best, --prefix and --sample need --run-dir; an exported model "
                "translates with the options it was exported with."
            )
        for line in translate_with_saved_model(args.saved_model, sentences):
            print(line)
        return
    from keras_transformer import run

    options = {"n_best": args.n_best or 1}
    if args.sample:
        options.update(
            sample=True,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
        )
    run_dirs = args.run_dir if len(args.run_dir) > 1 else args.run_dir[0]
    translator = run.make_translator(
        run_dirs, args.checkpoint, args.beam_size, args.alpha, **options
    )
    if not extras:
        for line in translate_lines(translator, sentences):
            print(line)
        return
    prefixes = read_lines(args.prefix) if args.prefix else None
    results = translate_lines_with_scores(translator, sentences, prefixes)
    for index, hypotheses in enumerate(results):
        if args.n_best:
            for text, score in hypotheses:
                print(f"{index}\t{score:.4f}\t{text}")
        else:
            print(hypotheses[0][0])


def run_score(args):
    from keras_transformer import run
    from keras_transformer.datasets import read_lines

    sources, targets = read_lines(args.source), read_lines(args.target)
    if len(sources) != len(targets):
        raise ArgumentError(
            f"{args.source} has {len(sources)} lines but {args.target} has {len(targets)}; "
            "score needs one translation a source line."
        )
    print("log_prob\ttokens\tlog_prob_per_token")
    for result in run.score_pairs(args.run_dir, sources, targets, args.checkpoint):
        print(f"{result['log_prob']:.4f}\t{result['tokens']}\t{result['log_prob_per_token']:.4f}")


def translate_with_saved_model(path, sentences):
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel in {path!r} (saved_model.pb is missing)")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    from keras_transformer.inference import translate_lines

    serve = tf.saved_model.load(path).signatures["serving_default"]
    return translate_lines(lambda batch: serve(inputs=batch)["outputs"], sentences)


def run_export(args):
    from keras_transformer import run

    if args.format == "ctranslate2":
        path = run.export_ctranslate2_run(
            args.run_dir,
            args.output,
            args.base_dir,
            args.checkpoint,
            args.quantization,
            beam_size=args.beam_size,
            alpha=args.alpha,
        )
        print(f"exported: {path}")
        return
    if args.quantization or args.output:
        raise ArgumentError("--quantization and --output are for --format ctranslate2.")
    path = run.export(
        args.run_dir,
        args.name,
        args.base_dir,
        args.version,
        args.checkpoint,
        text=not args.ids_only,
        xla=args.xla,
        beam_size=args.beam_size,
        alpha=args.alpha,
    )
    print(f"exported: {path}")


def run_average(args):
    from keras_transformer import run

    print(f"averaged model: {run.average_checkpoints(args.run_dir, args.last)}")


if __name__ == "__main__":
    sys.exit(main())
