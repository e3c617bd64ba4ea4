"""Scoring given translations with one teacher-forced pass of the model.

This is the referee of the searches: it runs the full forward pass on
`[BOS] + y`, not the cached step the searches use, and scores each output
as the searches rank it.
"""

import numpy as np

from keras_transformer.inference import probabilities
from keras_transformer.inference.defaults import LENGTH_PENALTY


def output_lengths(target_ids, eos_id):
    """Tokens of each output up to and including its first EOS (all if none): `(B,)`."""
    target_ids = np.asarray(target_ids)
    is_eos = target_ids == eos_id
    return np.where(is_eos.any(axis=1), is_eos.argmax(axis=1) + 1, target_ids.shape[1])


def score_outputs(
    model,
    source_ids,
    target_ids,
    bos_id,
    eos_id,
    alpha=0.6,
    batch_size=64,
    length_penalty=LENGTH_PENALTY,
):
    """log P(y | x) of each output y, by teacher forcing, and its normalized score.

    Padding and BOS are given probability zero, as in the searches, so a
    search's own score of its output can be checked against this one.

    Args:
        model: a `keras_transformer.Transformer`.
        source_ids: int `(N, S)`, 0-padded, as the search received them.
        target_ids: int `(N, L)` search outputs: tokens, then EOS, then 0.
        bos_id: id the decoder starts from.
        eos_id: id that ends an output.
        alpha: length penalty strength for the normalized score.
        batch_size: sentences per forward pass.
        length_penalty: "gnmt" or "average" (`inference.probabilities.length_penalty`).

    Returns:
        Dict of NumPy arrays `(N,)`: `"log_prob"` (the sum over the output's
        tokens, EOS included), `"length"` and `"score"`
        (`log_prob / length_penalty(length, alpha, kind)`).

    Examples:
        ```python
        tokens, _ = greedy_search(model, source_ids, bos_id=2, eos_id=3)
        score_outputs(model, source_ids, tokens, bos_id=2, eos_id=3)["score"]
        ```
    """
    source_ids, target_ids = np.asarray(source_ids), np.asarray(target_ids)
    lengths = output_lengths(target_ids, eos_id)
    log_prob = np.zeros(len(target_ids))
    for start in range(0, len(target_ids), batch_size):
        part = slice(start, start + batch_size)
        target = target_ids[part]  # (b, L)
        target_in = np.concatenate(
            [np.full((len(target), 1), bos_id, target.dtype), target[:, :-1]], axis=1
        )
        logits = model((source_ids[part], target_in), training=False)  # (b, L, V)
        log_probs = probabilities.log_softmax_without_pad_and_bos(logits, bos_id).numpy()
        picked = np.take_along_axis(log_probs, target[..., None], axis=-1)[..., 0]  # (b, L)
        inside = np.arange(target.shape[1])[None] < lengths[part, None]
        log_prob[part] = np.where(inside, picked, 0.0).sum(axis=1)
    score = log_prob / probabilities.length_penalty(lengths, alpha, length_penalty).numpy()
    return {"log_prob": log_prob, "length": lengths, "score": score}
