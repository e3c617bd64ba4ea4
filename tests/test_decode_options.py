"""`DecodeOptions`: checked once where built, carried through dicts with a version."""

import json

import pytest

from keras_transformer.inference import DecodeOptions
from keras_transformer.inference.options import FORMAT_VERSION


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(beam_size=0), "`beam_size` must be a positive integer. Received: beam_size=0"),
        (dict(alpha=float("nan")), "`alpha` must be a finite number"),
        (dict(max_length=0), "`max_length` must be a positive integer"),
        (dict(max_source_length=0), "`max_source_length` must be a positive integer"),
        (dict(n_best=3, beam_size=2), "Received: n_best=3, beam_size=2"),
        (dict(patience=0.5), "patience"),
        (dict(max_length_b=0), "`max_length_b` must be an integer (at least 1 when"),
        (dict(max_length_a=-1.0), "`max_length_a` must be a finite number >= 0"),
        (dict(min_length=64), "Received: min_length=64, max_length=64"),
        (dict(no_repeat_ngram_size=-1), "`no_repeat_ngram_size` must be an integer >= 0"),
        (dict(sample=True, temperature=0.0), "`temperature` must be > 0"),
        (dict(sample=True, top_p=0.0), "`top_p` must be in (0, 1]"),
        (dict(sample=True, top_k=-1), "`top_k` must be an integer >= 0"),
    ],
)
def test_an_option_out_of_range_is_refused_by_name(values, message):
    with pytest.raises(ValueError) as error:
        DecodeOptions(**values)
    assert message in str(error.value)
    with pytest.raises(ValueError) as error:  # replace checks again
        DecodeOptions().replace(**values)
    assert message in str(error.value)


def test_sampling_takes_more_hypotheses_than_the_beam():
    assert DecodeOptions(sample=True, n_best=8, beam_size=1).n_best == 8


def test_options_survive_json_and_dicts_written_before_the_version_load():
    options = DecodeOptions(beam_size=6, alpha=1.0, patience=2.0, max_length_b=10, seed=3)
    written = json.loads(json.dumps(options.to_dict()))
    assert written["format_version"] == FORMAT_VERSION
    assert DecodeOptions.from_dict(written) == options
    # A CTranslate2 export's options file of an earlier release: no version, fewer fields.
    earlier = {"beam_size": 4, "alpha": 0.6, "patience": None, "max_length": 64}
    earlier |= {"max_source_length": 256, "quantization": "int8", "shortlist": False}
    loaded = DecodeOptions.from_dict(earlier, others=("quantization", "shortlist"))
    assert loaded == DecodeOptions()


@pytest.mark.parametrize(
    "values, message",
    [
        ({"beam_width": 4}, "Unknown decoding option 'beam_width'. Known: beam_size, alpha"),
        ({"format_version": FORMAT_VERSION + 1}, f"written in format {FORMAT_VERSION + 1}"),
        ({"beam_size": 0}, "`beam_size` must be a positive integer"),
    ],
)
def test_a_dict_with_unknown_names_a_newer_format_or_bad_values_is_refused(values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        DecodeOptions.from_dict(values)
    if "Unknown" in message:
        with pytest.raises(ValueError, match="Unknown decoding option 'beam_width'"):
            DecodeOptions().replace(**values)
