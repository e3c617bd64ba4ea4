"""Writes an OPUS-MT model as Hugging Face's TensorFlow copies hold it, with the logits
that `transformers` computes for it: the reference `tests/test_marian.py` checks the import
of `tf_model.h5` against.

The directory it writes, `tests/data/opus_mt_tf_h5/`, holds `config.json`, `tf_model.h5`
(saved by `transformers`' own `TFMarianMTModel`), `vocab.json`, `source.spm` and
`target.spm`, and no safetensors, as the many `Helsinki-NLP/opus-mt-*` repositories that
carry only TensorFlow weights; and `transformers_logits.npz`: source and decoder ids in
Marian's numbering and the logits `TFMarianMTModel` gives them. The sizes, vocabulary and
SentencePiece models are those of `tests/opus_mt.py`'s small post-norm model (one shared,
tied table) in Hugging Face's layout; the weights are `transformers`' own initialization
moved by random noise (the sinusoids kept, the "<pad>" row zero, as conversions write it).
`transformers` dropped its TensorFlow models in release 5, so the script runs beside
4.57 and Keras 2 (`tf-keras`):

    python3 -m venv /tmp/hf
    /tmp/hf/bin/pip install -e ".[test]" "transformers==4.57.6" "tf-keras==2.21.0"
    TF_USE_LEGACY_KERAS=1 /tmp/hf/bin/python tests/data/write_tf_marian.py tests/data/opus_mt_tf_h5
"""

import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opus_mt import write_hugging_face, write_opus_mt  # noqa: E402
from transformers import MarianConfig, TFMarianMTModel  # noqa: E402


def main(output):
    work = tempfile.mkdtemp()
    marian = write_opus_mt(os.path.join(work, "marian"), seed=11, eos_bias=0.0)
    hugging_face = write_hugging_face(marian, os.path.join(work, "hugging_face"))
    config = MarianConfig.from_pretrained(hugging_face)  # the sizes and ids of its files
    model = TFMarianMTModel(config)
    model(input_ids=np.zeros((1, 2), "int32"), decoder_input_ids=np.zeros((1, 2), "int32"))
    rng = np.random.default_rng(0)
    for weight in model.weights:  # every weight but the fixed sinusoids, away from its start
        if "embed_positions" not in weight.name:
            start = weight.numpy()
            weight.assign(start + rng.normal(0.0, 0.3, start.shape).astype(start.dtype))
    shared = model.model.shared.weights[0]
    shared.assign(np.concatenate([shared.numpy()[:-1], np.zeros((1, config.d_model), "float32")]))
    model.save_pretrained(output)
    for name in ("vocab.json", "source.spm", "target.spm"):
        shutil.copy(os.path.join(hugging_face, name), os.path.join(output, name))
    pad = model.config.pad_token_id
    sources = rng.integers(1, pad, (3, 6)).astype("int32")
    sources[:, -1] = 0  # EOS, Marian's id 0
    decoder_ids = rng.integers(1, pad, (3, 5)).astype("int32")
    decoder_ids[:, 0] = pad  # the decoder starts from "<pad>"
    logits = model(input_ids=sources, decoder_input_ids=decoder_ids).logits.numpy()
    np.savez(
        os.path.join(output, "transformers_logits.npz"),
        source_ids=sources,
        decoder_ids=decoder_ids,
        logits=logits,
    )
    shutil.rmtree(work)


if __name__ == "__main__":
    main(sys.argv[1])
