"""What each command of `keras-transformer` does, over `keras_transformer.run`."""

import json
import sys

from keras_transformer.config import load_config
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.options import RUN, SAMPLING, DecodeOptions


def decode_flags(args, beam_size=True):
    """The decoding options given on the command line, by name: `--beam-size` (unless
    `beam_size` is False: `evaluate` takes several) and the run's decoding flags; None
    for a flag left out."""
    names = DecodeOptions.names(flags=RUN)
    return {
        **({"beam_size": args.beam_size} if beam_size else {}),
        **{name: getattr(args, name) for name in names},
    }


def run_options(run_dir, flags):
    """The `DecodeOptions` a command decodes with, built once here: the run's `decode`
    section with the `flags` given (`decode_flags`) in their place."""
    from keras_transformer.config import decode_options
    from keras_transformer.run.directory import RunDirectory

    return decode_options(RunDirectory(run_dir).read_config(), **flags)


def run_train(args):
    from keras_transformer import run
    from keras_transformer.run.directory import RunDirectory

    directory = RunDirectory(args.run_dir)
    # Without --config, a run that exists goes on with its own configuration.
    base = directory.read_config() if args.config is None and directory.has_config() else None
    config = load_config(args.config, args.set, base)
    from keras_transformer.training import distribution_strategy

    if config["train"]["devices"] > 1:
        distribution_strategy(config["train"]["devices"])  # before TensorFlow starts
    run.train(args.run_dir, config)
    print(f"trained: {args.run_dir}")


def run_import(args):
    from keras_transformer.run.opus_mt import import_marian

    run = import_marian(args.model_dir, args.run_dir)
    print(f"imported: {run.path}")
    with open(run.imported_path, encoding="utf-8") as f:
        languages = json.load(f)["target_languages"]
    if languages:
        print(f"target languages (--target-language): {', '.join(languages)}")


def run_config(args):
    from keras_transformer import config_reference
    from keras_transformer.run.directory import RunDirectory

    if args.markdown:
        if args.run_dir or args.config or args.set:
            raise ArgumentError(
                "--markdown prints the reference page of the defaults; it takes no "
                "--run-dir, --config or --set."
            )
        print(config_reference.markdown(), end="")
        return
    base = RunDirectory(args.run_dir).read_config() if args.run_dir else None
    print(config_reference.yaml_template(load_config(args.config, args.set, base)), end="")


def run_plot(args):
    from keras_transformer.run.plots import plot_attention, plot_run

    if args.attention is not None:
        print(f"plotted: {plot_attention(args.run_dir, args.attention, args.output)}")
    else:
        print(f"plotted: {plot_run(args.run_dir, args.output)}")


def run_evaluate(args):
    from keras_transformer import run

    results = run.evaluate(
        args.run_dir,
        args.split,
        args.checkpoint,
        args.beam_size or [None],
        output=args.output,
        source=args.source,
        reference=args.reference,
        data_dir=args.data_dir,
        options=run_options(args.run_dir, decode_flags(args, beam_size=False)),
        shortlist=args.shortlist,
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
    from keras_transformer.files import read_lines
    from keras_transformer.inference import translate_lines, translate_lines_with_scores
    from keras_transformer.inference.lines import BATCH_SIZE

    sentences = input_sentences(args.sentences)
    extras = args.n_best or args.prefix or args.constraints or args.sample
    if args.saved_model or args.litert:
        given = [value for value in decode_flags(args).values() if value is not None]
        if extras or given or args.shortlist is not None:
            raise ArgumentError(
                "--n-best, --prefix, --constraints, --sample and the decoding options need "
                "--run-dir; an exported model translates with the options it was exported "
                "with (a SavedModel's translate_n_best, translate_with_prefix and "
                "translate_constrained signatures take n-best lists, prefixes and constraints)."
            )
        from keras_transformer import run

        if args.litert:
            engine = run.open_engine(args.litert, kind="litert")
        else:
            engine = run.open_engine(args.saved_model, kind="saved_model")
        if engine.max_source_length is not None:  # None: a SavedModel of an earlier release
            report_truncated(engine, sentences)
        for line in translate_lines(engine, sentences):
            print(line)
        return
    from keras_transformer import run

    flags = {**decode_flags(args), "n_best": args.n_best}
    if args.sample:
        flags.update({name: getattr(args, name) for name in DecodeOptions.names(flags=SAMPLING)})
        flags["sample"] = True
    run_dirs = args.run_dir if len(args.run_dir) > 1 else args.run_dir[0]
    translator = run.make_translator(
        run_dirs,
        args.checkpoint,
        options=run_options(args.run_dir[0], flags),
        shortlist=args.shortlist,
        jit_compile=args.xla,
        compute_dtype=args.compute_dtype,
        # One batch decodes in one cache: tracing a loop per cache size costs more than
        # the short caches save (docs/cli.md).
        grow_cache=len(sentences) > BATCH_SIZE,
    )
    report_truncated(translator, sentences)
    if not extras:
        for line in translate_lines(translator, sentences):
            print(line)
        return
    prefixes = read_lines(args.prefix) if args.prefix else None
    constraints = None
    if args.constraints:
        constraints = [[p for p in line.split("\t") if p] for line in read_lines(args.constraints)]
        translator.constraint_ids(constraints)  # names a sentence whose phrases cannot fit
    results = translate_lines_with_scores(translator, sentences, prefixes, constraints)
    for index, hypotheses in enumerate(results):
        if args.n_best:
            for text, score in hypotheses:
                print(f"{index}\t{score:.4f}\t{text}")
        else:
            print(hypotheses[0][0])


def run_translate_corpus(args):
    from keras_transformer import beam
    from keras_transformer.run.engines import newest_version

    saved_model = newest_version(args.saved_model) or args.saved_model
    report = beam.translate_corpus(
        saved_model,
        args.input,
        args.output,
        signature=args.signature,
        batch_size=args.batch_size,
        pipeline_args=[f"--runner={args.runner}", *args.pipeline_args],
    )
    print(
        f"{report.lines} lines of {report.files} files translated into {args.output}; "
        f"{report.malformed} not UTF-8 ({beam.MALFORMED_FILE}), "
        f"{report.truncated} cut to the model's source length ({beam.TRUNCATED_FILE})"
    )


def input_sentences(arguments):
    """The sentences given as arguments, or else the lines of standard input, read as
    UTF-8 (an `ArgumentError` names a line or argument that is not)."""
    from keras_transformer.files import decode_lines, text_items

    if arguments:
        return text_items(arguments)
    return decode_lines(sys.stdin.buffer, "standard input")


def report_truncated(translator, sentences, batch_size=256):
    """Says on stderr which `sentences` are too long for the translator and are cut.

    `translator` is any engine (`inference.engine`).
    """
    cut = [
        start + index + 1
        for start in range(0, len(sentences), batch_size)
        for index, is_cut in enumerate(translator.truncated(sentences[start : start + batch_size]))
        if is_cut
    ]
    if cut:
        lines = ", ".join(str(line) for line in cut[:20]) + (", ..." if len(cut) > 20 else "")
        print(
            f"warning: {len(cut)} of {len(sentences)} lines are longer than the "
            f"{translator.max_source_length} source tokens the model reads (EOS included) "
            f"and are translated cut to them: line {lines}",
            file=sys.stderr,
        )


def run_score(args):
    from keras_transformer import run
    from keras_transformer.files import read_lines

    sources, targets = read_lines(args.source), read_lines(args.target)
    if len(sources) != len(targets):
        raise ArgumentError(
            f"{args.source} has {len(sources)} lines but {args.target} has {len(targets)}; "
            "score needs one translation a source line."
        )
    print("log_prob\ttokens\tlog_prob_per_token")
    scored = run.score_pairs(
        args.run_dir, sources, targets, args.checkpoint, target_language=args.target_language
    )
    for result in scored:
        print(f"{result['log_prob']:.4f}\t{result['tokens']}\t{result['log_prob_per_token']:.4f}")


def run_export(args):
    from keras_transformer import run

    for flag in ("max_source_length", "batch_size"):
        if getattr(args, flag) and args.format != "litert":
            raise ArgumentError(f"--{flag.replace('_', '-')} is for --format litert.")
    if args.compute_dtype != "float32" and args.format != "saved_model":
        raise ArgumentError(
            "--compute-dtype is for SavedModel exports; --format ctranslate2 and litert "
            "take --quantization."
        )
    options = run_options(args.run_dir, decode_flags(args))
    if args.format in ("marian", "hugging_face"):
        if args.quantization or args.n_best or args.shortlist:
            raise ArgumentError(
                f"--quantization, --n-best and --shortlist are not for --format {args.format}."
            )
        export = {"marian": run.export_marian_run, "hugging_face": run.export_hugging_face_run}
        path = export[args.format](
            args.run_dir, args.output, args.base_dir, args.checkpoint, options=options
        )
        print(f"exported: {path}")
        return
    if args.format in ("litert", "ctranslate2"):
        if args.n_best:
            raise ArgumentError("--n-best is for SavedModel exports (translate_n_best).")
        if args.format == "litert":
            batch_size = None if args.batch_size == "any" else args.batch_size or 1
            export = run.export_litert_run
            extra = {"max_source_length": args.max_source_length, "batch_size": batch_size}
        else:
            export, extra = run.export_ctranslate2_run, {}
        path = export(
            args.run_dir,
            args.output,
            args.base_dir,
            args.checkpoint,
            args.quantization,
            **extra,
            options=options,
            shortlist=args.shortlist,
        )
        print(f"exported: {path}")
        return
    if args.quantization or args.output:
        raise ArgumentError("--quantization and --output are for --format ctranslate2 or litert.")
    path = run.export(
        args.run_dir,
        args.name,
        args.base_dir,
        args.version,
        args.checkpoint,
        text=not args.ids_only,
        xla=args.xla,
        n_best=args.n_best,
        options=options,
        shortlist=args.shortlist,
        compute_dtype=args.compute_dtype,
    )
    print(f"exported: {path}")


def run_average(args):
    from keras_transformer import run

    print(f"averaged model: {run.average_checkpoints(args.run_dir, args.last)}")
