"""`keras-transformer`: train, evaluate, translate, export and average from a terminal.

    keras-transformer train     --run-dir runs/numbers [--config FILE] [--set section.key=value ...]
    keras-transformer evaluate  --run-dir runs/numbers [--split test] [--beam-size 4]
    keras-transformer translate --run-dir runs/numbers "twenty-one" ...   (or lines on stdin)
    keras-transformer translate --saved-model saved_models/numbers/1 < sentences.txt
    keras-transformer export    --run-dir runs/numbers [--name numbers_en_de] [--version 3]
    keras-transformer average   --run-dir runs/numbers [--last 5]

Errors a user can make end with one line on stderr and exit status 2; an
interrupted `train` exits with 130 and resumes when run again.
"""

import argparse
import json
import os
import sys

from keras_transformer.config import ConfigError, load_config


def main(argv=None):
    args = parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
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
    decode_arguments(evaluate)
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
    decode_arguments(export)
    export.set_defaults(command=run_export)

    average = commands.add_parser("average", help="average the last N epoch checkpoints")
    run_dir_argument(average)
    average.add_argument("--last", type=int, default=5)
    average.set_defaults(command=run_average)
    return p


def run_dir_argument(p):
    p.add_argument("--run-dir", required=True, help="the run directory")


def decode_arguments(p):
    p.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    p.add_argument("--beam-size", type=int, help="1 for greedy (default: decode.beam_size)")
    p.add_argument("--alpha", type=float, help="length penalty (default: decode.alpha)")


def run_train(args):
    config = load_config(args.config, args.set)
    from keras_transformer import workflow

    if config["train"]["devices"] > 1:
        workflow.distribution_strategy(config["train"]["devices"])
    workflow.train(args.run_dir, config)
    print(f"trained: {args.run_dir}")


def run_evaluate(args):
    from keras_transformer import workflow

    result = workflow.evaluate(
        args.run_dir, args.split, args.checkpoint, args.beam_size, args.alpha, args.output
    )
    print(f"{result['split']}: {result['sentences']} sentences, beam {result['beam_size']}")
    print(f"BLEU (cased)      {result['bleu']:6.2f}   {result['signature']}")
    print(f"BLEU (lowercased) {result['bleu_lowercase']:6.2f}")
    print(f"chrF              {result['chrf']:6.2f}")
    print(f"exact match       {result['exact_match']:6.2%}")
    print(f"hypotheses: {result['hypotheses']}")
    print(json.dumps(result))


def run_translate(args):
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    if args.saved_model:
        outputs = translate_with_saved_model(args.saved_model, sentences)
    else:
        from keras_transformer import workflow

        translator = workflow.make_translator(
            args.run_dir, args.checkpoint, args.beam_size, args.alpha
        )
        outputs = workflow.translate_lines(translator, sentences)
    for line in outputs:
        print(line)


def translate_with_saved_model(path, sentences):
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel in {path!r} (saved_model.pb is missing)")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    from keras_transformer.workflow import translate_lines

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
        beam_size=args.beam_size,
        alpha=args.alpha,
    )
    print(f"exported: {path}")


def run_average(args):
    from keras_transformer import workflow

    print(f"averaged model: {workflow.average_checkpoints(args.run_dir, args.last)}")


if __name__ == "__main__":
    sys.exit(main())
