"""The arguments of `keras-transformer` and their checks."""

import argparse

from keras_transformer.cli.commands import (
    run_average,
    run_config,
    run_evaluate,
    run_export,
    run_import,
    run_plot,
    run_score,
    run_train,
    run_translate,
    run_translate_corpus,
)
from keras_transformer.errors import ArgumentError
from keras_transformer.export.saved_model import SAVED_MODELS_DIR
from keras_transformer.inference.options import OPTION_RULES, RUN, SAMPLING, DecodeOptions
from keras_transformer.inference.translator import COMPUTE_DTYPES

DESCRIPTION = "train, evaluate, translate, export and average from a terminal"
CONFIG_HELP = (
    "YAML or JSON file of options (keras-transformer config lists them), or the name of "
    "a packaged recipe (multi30k_de_en)"
)
# The `DecodeOptions` fields that evaluate, translate and export take as flags.


def compute_dtype_argument(parser):
    """`--compute-dtype`: the weights and products of the search (`Translator`)."""
    parser.add_argument(
        "--compute-dtype",
        choices=COMPUTE_DTYPES,
        default="float32",
        help="bfloat16: the search holds the weights in bfloat16, faster in batches on CPUs "
        "with bfloat16 instructions, outputs may differ (default: float32)",
    )


def parser():
    p = argparse.ArgumentParser(prog="keras-transformer", description=DESCRIPTION)
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
        add_translate_corpus,
        add_score,
        add_export,
        add_average,
        add_config,
        add_plot,
        add_import,
    ):
        add(commands)
    return p


def add_train(commands):

    train = commands.add_parser(
        "train",
        help="train a model, resume an interrupted run, or train a run for longer "
        "(--set train.epochs=N, more than before)",
    )
    run_dir_argument(train)
    config_arguments(
        train,
        "; without it, the defaults for a new run and the run's own configuration for one "
        "that exists",
    )
    train.set_defaults(command=run_train)


def add_evaluate(commands):
    evaluate = commands.add_parser("evaluate", help="decode a test set and score it with sacreBLEU")
    run_dir_argument(evaluate)
    evaluate.add_argument(
        "--split",
        help="split to decode (default: data.test_split); with --source, the name its "
        "outputs are filed under",
    )
    evaluate.add_argument(
        "--source", help="a test set of your own: source sentences, one a line (plain or .gz)"
    )
    evaluate.add_argument("--reference", help="the reference translations of --source's lines")
    evaluate.add_argument(
        "--data-dir",
        help="a directory of {split}.{lang} files (plain or .gz) in the run's languages, "
        "instead of the run's corpus",
    )
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
    source.add_argument(
        "--saved-model",
        help="an exported SavedModel version directory, or TF Serving's model directory "
        "(its newest version)",
    )
    source.add_argument("--litert", help="a LiteRT export directory (export --format litert)")
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
        "--constraints",
        help="file of target phrases each translation must contain: one line a sentence, "
        "phrases separated by tabs, an empty line for none",
    )
    translate.add_argument(
        "--sample", action="store_true", help="draw translations at random instead of searching"
    )
    translate.add_argument(
        "--xla",
        action="store_true",
        help="compile the search with XLA: faster per sentence, but each new batch and "
        "length shape first compiles for seconds",
    )
    compute_dtype_argument(translate)
    defaults = DecodeOptions()
    for name in DecodeOptions.names(flags=SAMPLING):
        decode_option(translate, name, f"(default: {getattr(defaults, name)})")
        translate.set_defaults(**{name: getattr(defaults, name)})
    translate.set_defaults(command=run_translate)


def add_translate_corpus(commands):
    corpus = commands.add_parser(
        "translate-corpus",
        help="translate text files with a SavedModel on Apache Beam (the beam extra); "
        "options this command does not know go to Beam (--direct_num_workers=2, ...)",
    )
    corpus.add_argument(
        "--saved-model",
        required=True,
        help="an exported SavedModel version directory, or TF Serving's model directory "
        "(its newest version)",
    )
    corpus.add_argument(
        "--input",
        action="append",
        required=True,
        help="a file or glob of files, plain or .gz, one sentence a line; repeat for more",
    )
    corpus.add_argument(
        "--output", required=True, help="directory of the translations, one file an input"
    )
    corpus.add_argument(
        "--signature",
        default="serving_default",
        choices=[
            "serving_default",
            "translate_n_best",
            "translate_with_prefix",
            "translate_constrained",
        ],
        help="the SavedModel signature to call; with_prefix reads source<TAB>prefix lines, "
        "constrained source<TAB>phrase<TAB>... lines (default: serving_default)",
    )
    corpus.add_argument(
        "--batch-size", type=positive_int, default=64, help="sentences a call (default: 64)"
    )
    corpus.add_argument(
        "--runner", default="DirectRunner", help="Beam's runner (default: DirectRunner)"
    )
    corpus.set_defaults(command=run_translate_corpus, pipeline_args=[])


def add_score(commands):
    score = commands.add_parser(
        "score", help="log-probability of given translations (force decoding)"
    )
    run_dir_argument(score)
    score.add_argument("--source", required=True, help="source sentences, one a line")
    score.add_argument("--target", required=True, help="their translations, one a line")
    score.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    decode_option(score, "target_language", "(default: decode.target_language)")
    score.set_defaults(command=run_score)


def add_export(commands):
    export = commands.add_parser(
        "export",
        help="write a SavedModel for TF Serving, a CTranslate2 or LiteRT model, or an OPUS-MT "
        "directory in Marian's or Hugging Face's layout",
    )
    run_dir_argument(export)
    export.add_argument(
        "--format",
        default="saved_model",
        choices=["saved_model", "ctranslate2", "litert", "marian", "hugging_face"],
        help="ctranslate2 needs the optional `ctranslate2` package, litert `ai-edge-litert` to "
        "run; marian and hugging_face write OPUS-MT directories in Marian's layout (which "
        "CTranslate2's OpusMTConverter reads) and Hugging Face's",
    )
    export.add_argument(
        "--quantization",
        help="CTranslate2 weight type: int8, int8_float32, bfloat16, ...; LiteRT: float16 or "
        "dynamic_int8 (default: float32)",
    )
    export.add_argument(
        "--output",
        help="CTranslate2, LiteRT, Marian or Hugging Face model directory "
        "(default: {base-dir}/{run name}-{format}-{type}; marian, hugging_face: "
        "{base-dir}/{run name}-{format})",
    )
    export.add_argument(
        "--max-source-length",
        type=positive_int,
        help="LiteRT: the model's fixed source length in pieces, EOS included (default: 64)",
    )
    export.add_argument(
        "--batch-size",
        type=litert_batch_size,
        help="LiteRT: sentences a call of the model, a number or `any` (default: 1)",
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
    compute_dtype_argument(export)
    export.add_argument(
        "--n-best",
        type=positive_int,
        help="N of the translate_n_best signature (default: the beam size)",
    )
    decode_arguments(export)
    export.set_defaults(command=run_export)


def add_average(commands):
    average = commands.add_parser("average", help="average the last N epoch checkpoints")
    run_dir_argument(average)
    average.add_argument("--last", type=positive_int, default=5)
    average.set_defaults(command=run_average)


def add_config(commands):
    config = commands.add_parser(
        "config",
        help="print every option with its value and description, as a YAML file to start "
        "from (or the reference page, --markdown)",
    )
    config.add_argument("--run-dir", help="print this run's configuration")
    config_arguments(config, "")
    config.add_argument(
        "--markdown", action="store_true", help="print the configuration reference page"
    )
    config.set_defaults(command=run_config)


def add_plot(commands):
    plot = commands.add_parser(
        "plot",
        help="draw a run's loss, accuracy and learning rate, or its attention over a "
        "sentence (needs matplotlib)",
    )
    run_dir_argument(plot)
    plot.add_argument(
        "--attention",
        metavar="SENTENCE",
        help="draw the last decoder layer's cross-attention while the run's model "
        "translates SENTENCE greedily, instead of the training curves",
    )
    plot.add_argument(
        "--output",
        help="the picture; .png, .svg or .pdf (default: training.png, or attention.png, in "
        "the run directory)",
    )
    plot.set_defaults(command=run_plot)


def add_import(commands):
    imported = commands.add_parser(
        "import",
        help="write a model trained with another toolkit (an OPUS-MT/Marian directory) as a "
        "run directory, to translate, evaluate, export or fine-tune with train",
    )
    imported.add_argument("--format", required=True, choices=["marian"])
    imported.add_argument(
        "--model-dir",
        required=True,
        help="the model's directory: Marian's layout (decoder.yml, the .npz and .yml files "
        "it names, source.spm, target.spm) or Hugging Face's (config.json, "
        "model.safetensors or tf_model.h5, vocab.json, source.spm, target.spm)",
    )
    run_dir_argument(imported)
    imported.set_defaults(command=run_import)


def config_arguments(p, config_help):
    """`--config FILE` and the repeatable `--set SECTION.KEY=VALUE`."""
    p.add_argument("--config", help=CONFIG_HELP + config_help)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one option, e.g. --set train.epochs=5 (repeatable)",
    )


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
    for name in DecodeOptions.names(flags=RUN):
        decode_option(p, name, f"(default: decode.{name})")
    p.add_argument(
        "--shortlist",
        type=count,
        help="decode each batch over this many target pieces of the run's lexical shortlist; "
        "0: the whole vocabulary (default: decode.shortlist)",
    )


def decode_option(p, name, default_help):
    """Adds `--name` for the `DecodeOptions` field `name`, parsed and checked by its
    rule (`inference.options.OPTION_RULES`), as the options' type and the config check it."""
    rule = OPTION_RULES[name]

    def parse(text):
        try:
            return rule.parse(name, text)
        except ArgumentError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = name  # argparse's name for the value in its messages
    p.add_argument(f"--{name.replace('_', '-')}", type=parse, help=f"{rule.help} {default_help}")


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


def count(text):
    """An integer argument >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"give an integer >= 0. Received: {text!r}")
    return int(text)


def positive_int(text):
    """A positive integer argument."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a positive integer. Received: {text!r}")
    return int(text)


def litert_batch_size(text):
    """A positive integer, or `any` (kept as the string)."""
    return text if text == "any" else positive_int(text)


def beam_sizes_one(text):
    """One positive beam size."""
    sizes = beam_sizes(text)
    if len(sizes) != 1:
        raise argparse.ArgumentTypeError(f"give one beam size. Received: {text!r}")
    return sizes[0]
