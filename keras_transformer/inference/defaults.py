"""The decoding defaults of the whole package.

The searches, `Translator` and the run configuration's `decode` section all
take them from here.
"""

MAX_LENGTH = 64  # most target tokens a search generates, EOS included
BEAM_SIZE = 4
ALPHA = 0.6  # strength of the GNMT length penalty
