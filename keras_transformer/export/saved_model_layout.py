"""What a SavedModel export of the package holds, written by `saved_model` and read by
`saved_model_runtime`: its signatures' names and the files and function beside them."""

SERVING_SIGNATURE = "serving_default"
"""The strings-in, strings-out signature, the one TF Serving calls by default."""
IDS_SIGNATURE = "translate_ids"
"""The token-ids-in, token-ids-out signature."""
N_BEST_SIGNATURE = "translate_n_best"
PREFIX_SIGNATURE = "translate_with_prefix"
CONSTRAINED_SIGNATURE = "translate_constrained"
WARMUP_FILE = "tf_serving_warmup_requests"
EXTRA_DIR = "assets.extra"  # files TF Serving reads (warm-up requests) or leaves alone
OPTIONS_FILE = "keras_transformer.json"  # the `DecodeOptions` of the export and its n-best
TRUNCATED_FUNCTION = "truncated"  # strings (B,) -> bool (B,): the sources cut to the limit
