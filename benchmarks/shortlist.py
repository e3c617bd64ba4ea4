"""Lexical shortlists: BLEU, outputs changed and speed, the package and CTranslate2 alike.

A trained run's split (`--split`, default its validation split) is decoded
with the run's greedy and beam search (its `decode` options, XLA), once over
the whole target vocabulary and once over the run's shortlist
(`run.load_shortlist`: `--size` pieces a batch, the config's
`decode.shortlist_per_source` and `decode.shortlist_frequent`), in batches of
`decode.batch_size` sorted by length, as `evaluate` decodes. CTranslate2 int8
exports of the same model, with and without the shortlist as its `vmap`,
decode the same sentences (greedy and beam of the run's size). Engines are
timed in turn for `--rounds` rounds after a warm-up; the median counts.

Printed per engine: sentences/s, cased BLEU and chrF (sacreBLEU), and the
sentences whose output the shortlist changed; and the share of the target
vocabulary a batch's union of lists holds (mean and largest), for batches of
`decode.batch_size` and of one sentence. The JSON line holds
`package_{greedy,beam}_speedup` and `ct2_int8_{greedy,beam}_speedup` (sentences/s
with the shortlist over without) and `bleu_change_{greedy,beam}`.

    python benchmarks/shortlist.py --run-dir runs/multi30k_de_en --checkpoint averaged --size 2048
"""

import argparse
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.export import CTranslate2Translator, export_ctranslate2  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402
from keras_transformer.run.evaluate import score_translations  # noqa: E402


def union_shares(translator, sentences, batch_size):
    """`(mean, largest)` share of the target vocabulary in a batch's union of lists."""
    order = sorted(sentences, key=len)
    sizes = [
        translator.shortlist.union_size(translator.source_ids(order[i : i + batch_size]).numpy())
        for i in range(0, len(order), batch_size)
    ]
    vocab = translator.shortlist.target_vocab_size
    return round(float(np.mean(sizes)) / vocab, 4), round(max(sizes) / vocab, 4)


def engines_of(run_dir, checkpoint, size, folder):
    """`({name: translate(sentences)}, batch size, beam size, shortlisted translator)`."""
    config = run.RunDirectory(run_dir).read_config()
    beam_size = config["decode"]["beam_size"]
    batch = config["decode"]["batch_size"]
    (greedy, beam), _ = run.translators(run_dir, checkpoint, [1, beam_size], shortlist=0)
    tokenizers = greedy.source_tokenizer, greedy.target_tokenizer
    shortlist = run.load_shortlist(run_dir, config, *tokenizers, size)
    engines = {}
    for name, translator in [("greedy", greedy), ("beam", beam)]:
        for listed in (False, True):
            decoded = translator.copy(shortlist=shortlist) if listed else translator
            key = f"package {name}{' shortlist' if listed else ''}"
            engines[key] = lambda s, t=decoded: translate_lines(t, s, batch)
    for listed in (False, True):
        exported = beam.copy(shortlist=shortlist) if listed else beam
        directory = os.path.join(folder, f"int8{'-vmap' if listed else ''}")
        export_ctranslate2(exported, directory, quantization="int8")
        for name, k in [("greedy", 1), ("beam", beam_size)]:
            engine = CTranslate2Translator(directory, beam_size=k, intra_threads=1)
            key = f"ct2_int8 {name}{' shortlist' if listed else ''}"
            engines[key] = lambda s, e=engine: e(s, batch)
    return engines, batch, beam_size, greedy.copy(shortlist=shortlist)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's validation split")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--size", type=int, default=2048, help="target pieces a batch keeps")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    config = run.RunDirectory(args.run_dir).read_config()
    split = args.split or config["data"]["val_split"]
    corpus = run.corpus_split(config["data"], split)
    folder = tempfile.mkdtemp(prefix="shortlist_")
    engines, batch, beam_size, listed = engines_of(args.run_dir, args.checkpoint, args.size, folder)
    outputs = {name: translate(corpus.sources) for name, translate in engines.items()}  # warm-up
    seconds = {name: [] for name in engines}
    for _ in range(args.rounds):
        for name, translate in engines.items():
            start = time.perf_counter()
            translate(corpus.sources)
            seconds[name].append(time.perf_counter() - start)

    result = {"run_dir": args.run_dir, "split": split, "size": args.size, "beam_size": beam_size}
    result["union_share_batch"] = union_shares(listed, corpus.sources, batch)
    result["union_share_one"] = union_shares(listed, corpus.sources, 1)
    print(f"{split}: {len(corpus.sources)} sentences, batches of {batch}, beam {beam_size}")
    print(
        f"a batch's union of lists: {result['union_share_batch']} of the vocabulary "
        f"(mean, largest); one sentence's: {result['union_share_one']}"
    )
    for name, output in outputs.items():
        rate = len(corpus.sources) / statistics.median(seconds[name])
        scores = score_translations(output, corpus.targets)
        line = f"{name:28s} {rate:8.1f} sentences/s  BLEU {scores['bleu']:.2f}"
        line += f"  chrF {scores['chrf']:.2f}"
        key = name.replace(" ", "_")
        result.update({f"{key}_sent_s": round(rate, 2), f"{key}_bleu": round(scores["bleu"], 2)})
        if name.endswith("shortlist"):
            full = outputs[name.removesuffix(" shortlist")]
            changed = sum(a != b for a, b in zip(output, full, strict=True))
            line += f"  changed {changed}"
            result[f"{key}_changed"] = changed
        print(line)
    for engine in ("package", "ct2_int8"):
        for search in ("greedy", "beam"):
            base = f"{engine}_{search}"
            speedup = result[f"{base}_shortlist_sent_s"] / result[f"{base}_sent_s"]
            result[f"{base}_speedup"] = round(speedup, 3)
    for search in ("greedy", "beam"):
        change = result[f"package_{search}_shortlist_bleu"] - result[f"package_{search}_bleu"]
        result[f"bleu_change_{search}"] = round(change, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
