"""The decoding defaults of the whole package.

The searches, `Translator` and the run configuration's `decode` section all
take them from here.
"""

MAX_LENGTH = 64  # most target tokens a search generates, EOS included
BEAM_SIZE = 4
ALPHA = 0.6  # strength of the length penalty
# How a finished output's log-probability is divided by its length |Y| (EOS counted):
# "gnmt", by ((5 + |Y|) / 6) ** alpha (Wu et al., 2016); "average", by |Y| ** alpha,
# Marian's `--normalize` and CTranslate2's `length_penalty` (alpha 1: the mean per token).
LENGTH_PENALTIES = ("gnmt", "average")
LENGTH_PENALTY = "gnmt"
