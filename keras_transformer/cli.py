"""`keras-transformer`: train, evaluate, translate, export and average from a terminal.

    keras-transformer train     --run-dir runs/numbers [--config FILE] [--set section.key=value ...]
    keras-transformer evaluate  --run-dir runs/numbers [--split test] [--beam-size 1,4]
    keras-transformer translate --run-dir runs/numbers "twenty-one" ...   (or lines on stdin)
    keras-transformer translate --saved-model saved_models/numbers/1 < sentences.txt
    keras-transformer export    --run-dir runs/numbers [--name numbers_en_de] [--version 3] [--xla]
    keras-transformer average   --run-dir runs/numbers [--last 5]

Errors a user can make end with one line on stderr and exit status 2; an
interrupted `train` exits with 130 and resumes when run again.
"""

import argparse
import json
import os
import sys

from keras_transformer import startup
from keras_transformer.config import ConfigError, load_config


def main(argv=None):
    args = parser().parse_args(argv)
    if args.verbose:
        sys.stderr.write(startup.captured)
    try:
        return args.command(args) or 0
    except KeyboardInterrupt:
        print(
            "\nInterrupted. Run the same train command again to resume from the last epoch.",
            file=sys.stderr,
        )
        return 130
    except (ConfigError, FileNotFoundError, FileExistsError, ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def parser():
    p = argparse.ArgumentParser(prog="keras-transformer", description=__doc__.splitlines()[0])
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's C++ start-up lines (hidden unless TF_CPP_MIN_LOG_LEVEL is set)",
    )
    commands = p.add_subparsers(required=True, metavar="command")

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

    evaluate = commands.add_parser("evaluate", help="decode a split and score it with sacreBLEU")
    run_dir_argument(evaluate)
    evaluate.add_argument("--split", help="split to decode (default: data.test_split)")
    evaluate.add_argument("--output", help="hypotheses file (default: in the run directory)")
    decode_arguments(evaluate, several_beams=True)
    evaluate.set_defaults(command=run_evaluate)

    translate = commands.add_parser("translate", help="translate sentences (arguments or stdin)")
    source = translate.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-dir", help="a trained run directory")
    source.add_argument("--saved-model", help="an exported SavedModel version directory")
    translate.add_argument("sentences", nargs="*", help="sentences; stdin lines if none")
    decode_arguments(translate)
    translate.set_defaults(command=run_translate)

    export = commands.add_parser("export", help="write a SavedModel for TF Serving")
    run_dir_argument(export)
    export.add_argument("--name", help="model name (default: the run directory's name)")
    export.add_argument("--base-dir", default="saved_models")
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

    average = commands.add_parser("average", help="average the last N epoch checkpoints")
    run_dir_argument(average)
    average.add_argument("--last", type=int, default=5)
    average.set_defaults(command=run_average)
    return p


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


def beam_sizes_one(text):
    """One positive beam size."""
    sizes = beam_sizes(text)
    if len(sizes) != 1:
        raise argparse.ArgumentTypeError(f"give one beam size. Received: {text!r}")
    return sizes[0]


def run_train(args):
    config = load_config(args.config, args.set)
    from keras_transformer import workflow
    from keras_transformer.training import distribution_strategy

    if config["train"]["devices"] > 1:
        distribution_strategy(config["train"]["devices"])  # before TensorFlow starts
    workflow.train(args.run_dir, config)
    print(f"trained: {args.run_dir}")


def run_evaluate(args):
    from keras_transformer import workflow

    results = workflow.evaluate(
        args.run_dir, args.split, args.checkpoint, args.beam_size or [None], args.alpha, args.output
    )
    first = results[0]
    print(f"{first['split']}: {first['sentences']} sentences, checkpoint {first['checkpoint']}")
    print(f"{'':18}" + "".join(f"{'beam ' + str(r['beam_size']):>10}" for r in results))
    for label, key, form in [
        ("BLEU (cased)", "bleu", "{:10.2f}"),
        ("BLEU (lowercased)", "bleu_lowercase", "{:10.2f}"),
        ("chrF", "chrf", "{:10.2f}"),
        ("exact match", "exact_match", "{:10.2%}"),
    ]:
        print(f"{label:18}" + "".join(form.format(r[key]) for r in results))
    print(f"BLEU signature: {first['signature']}")
    for result in results:
        print(f"hypotheses, beam {result['beam_size']}: {result['hypotheses']}")
    for result in results:
        print(json.dumps(result))


def run_translate(args):
    from keras_transformer.inference import translate_lines

    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    if args.saved_model:
        outputs = translate_with_saved_model(args.saved_model, sentences)
    else:
        from keras_transformer import workflow

        translator = workflow.make_translator(
            args.run_dir, args.checkpoint, args.beam_size, args.alpha
        )
        outputs = translate_lines(translator, sentences)
    for line in outputs:
        print(line)


def translate_with_saved_model(path, sentences):
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel in {path!r} (saved_model.pb is missing)")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    from keras_transformer.inference import translate_lines

    serve = tf.saved_model.load(path).signatures["serving_default"]
    return translate_lines(lambda batch: serve(inputs=batch)["outputs"], sentences)


def run_export(args):
    from keras_transformer import workflow

    path = workflow.export(
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
    from keras_transformer import workflow

    print(f"averaged model: {workflow.average_checkpoints(args.run_dir, args.last)}")


if __name__ == "__main__":
    sys.exit(main())
