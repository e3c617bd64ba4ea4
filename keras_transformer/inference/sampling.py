"""Sampling: each next token drawn from the model's distribution, cut by temperature,
top-k and top-p (nucleus sampling)."""

import dataclasses

import tensorflow as tf

from keras_transformer.inference.defaults import MAX_LENGTH
from keras_transformer.inference.loop import token_by_token
from keras_transformer.inference.options import DecodeOptions, lengths_of
from keras_transformer.inference.probabilities import MINUS_INF
from keras_transformer.inference.result import TargetSide, from_log_probs


def sample(
    model,
    source_ids,
    bos_id,
    eos_id,
    max_length=MAX_LENGTH,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=0,
    prefix_ids=None,
    length_options=None,
    constraint_ids=None,
    continues_word=None,
):
    """Draws each next token at random from the model's distribution.

    The distribution is sharpened or flattened by `temperature`, then cut to
    its `top_k` most probable tokens and to the smallest set of most probable
    tokens whose probability reaches `top_p` (nucleus sampling, Holtzman et
    al., 2020), and renormalized. Draws are stateless: the same `seed` and
    inputs give the same outputs.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface.
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        temperature: > 0; the logits are divided by it. Defaults to 1.
        top_k: keep only the k most probable tokens; 0 keeps all.
        top_p: keep the most probable tokens up to this total probability,
            in (0, 1]; 1 keeps all.
        seed: an integer.
        prefix_ids: optional int `(B, P)`, 0-padded: each output starts
            with its row.
        length_options: optional `inference.LengthOptions`.
        constraint_ids: optional int `(B, C, T)`: phrases each output must
            contain (`inference.constraints`).
        continues_word: optional bool `(V,)`, the target pieces that go on
            with the word before them (`Tokenizer.continues_word`): with
            `constraint_ids`, none may follow a phrase, so that phrases are
            written as whole words.

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        samples and the sum of their tokens' log-probabilities under the
        model (before temperature and cuts).

    Examples:
        ```python
        token_ids, _ = sample(model, source_ids, 2, 3, temperature=0.8, top_p=0.9, seed=1)
        ```
    """
    options = DecodeOptions(
        max_length=max_length,
        sample=True,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        **lengths_of(length_options),
    )
    search = Sampling(options, TargetSide(bos_id, eos_id, continues_word))
    result = search(model, source_ids, prefix_ids, constraint_ids)
    return result.token_ids[:, 0], result.log_probs[:, 0]


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Sampling as a `Search`: `n_best` outputs of each sentence, each drawn token by
    token from the model's distribution (cut as `sample` says).

    Args:
        options: the `inference.DecodeOptions` (`temperature`, `top_k`,
            `top_p`, `seed`, `n_best`, `max_length`, the length options, and
            `alpha` for the scores).
        target: the `inference.TargetSide`.

    Examples:
        ```python
        search = Sampling(DecodeOptions(sample=True, n_best=3, seed=1), TargetSide(2, 3))
        result = search(model, source_ids)  # DecodingResult, N = 3
        ```
    """

    options: DecodeOptions
    target: TargetSide

    def __call__(self, model, source_ids, prefix_ids=None, constraint_ids=None):
        """The `DecodingResult` of `source_ids` `(B, S)`, optionally from `prefix_ids`
        `(B, P)` and meeting `constraint_ids` `(B, C, T)`: N = `n_best` samples, drawn
        in rows of their own (sentence i's in rows i * N to i * N + N - 1)."""
        n = self.options.n_best

        def repeated(ids):
            return None if ids is None else tf.repeat(ids, n, axis=0)

        token_ids, log_probs, _ = token_by_token(
            model,
            repeated(source_ids),
            self.draw,
            self.target,
            self.options,
            repeated(prefix_ids),
            repeated(constraint_ids),
        )
        batch = tf.shape(source_ids)[0]
        return from_log_probs(
            tf.reshape(token_ids, [batch, n, self.options.max_length]),
            tf.reshape(log_probs, [batch, n]),
            self.target.eos_id,
            self.options,
        )

    def draw(self, log_probs, step):
        """Each row's next token `(B,)`, drawn from `log_probs` `(B, V)` at `step`."""
        options = self.options
        logits = cut_to_top_p(
            cut_to_top_k(log_probs / options.temperature, options.top_k), options.top_p
        )
        step_seed = tf.stack([tf.cast(options.seed, tf.int32), step])
        drawn = tf.random.stateless_categorical(logits, 1, step_seed, dtype=tf.int32)
        return drawn[:, 0]  # (B,)


def cut_to_top_k(logits, k):
    """`logits` `(B, V)` with all but the k largest of each row at -inf (k = 0: all kept)."""
    if k == 0:
        return logits
    kth = tf.math.top_k(logits, tf.minimum(k, tf.shape(logits)[-1])).values[:, -1:]  # (B, 1)
    return tf.where(logits < kth, MINUS_INF, logits)


def cut_to_top_p(logits, p):
    """`logits` `(B, V)` cut to the smallest most-probable set whose probability reaches p."""
    if p >= 1.0:
        return logits
    ordered = tf.sort(logits, direction="DESCENDING")  # (B, V)
    before = tf.math.cumsum(tf.nn.softmax(ordered), axis=-1, exclusive=True)  # (B, V)
    # A token is kept while the probability of the more probable ones is below p.
    kept = tf.where(before < p, ordered, MINUS_INF)
    smallest = tf.reduce_min(tf.where(kept > MINUS_INF, kept, ordered[:, :1]), -1, keepdims=True)
    return tf.where(logits < smallest, MINUS_INF, logits)
