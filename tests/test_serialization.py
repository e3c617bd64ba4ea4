"""Every public object round-trips its config and a `.keras` file, with non-default arguments."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_transformer as kt
from keras_transformer import layers

BLOCK = dict(
    d_model=16,
    num_heads=2,
    dff=24,
    dropout_rate=0.2,
    attention_dropout_rate=0.05,
    norm_first=True,
    layer_norm_epsilon=1e-5,
    activation="gelu",
)
STACK = dict(BLOCK, num_layers=2, vocab_size=23, positions=layers.Sinusoidal(layout="concatenated"))

CASES = [
    (layers.Sinusoidal, dict(layout="concatenated", max_wavelength=500, placement="every_layer")),
    (layers.Learned, dict(max_positions=7, placement="queries_and_keys")),
    (layers.Rotary, dict(max_wavelength=500)),
    (layers.ShawRelative, dict(max_distance=3)),
    (layers.T5Bias, dict(num_buckets=16, max_distance=64)),
    (layers.ALiBi, dict()),
    (layers.PositionalEncoding, dict(layout="concatenated", max_wavelength=500)),
    (
        layers.PositionalEmbedding,
        dict(
            vocab_size=17,
            d_model=8,
            dropout_rate=0.3,
            positions=layers.Sinusoidal(layout="concatenated", max_wavelength=99),
        ),
    ),
    (
        layers.MultiHeadAttention,
        dict(
            d_model=12,
            num_heads=3,
            dropout_rate=0.1,
            use_bias=False,
            output_dim=10,
            kernel_initializer="he_normal",
            bias_initializer="ones",
            positions=layers.T5Bias(num_buckets=16, max_distance=64),
        ),
    ),
    (
        layers.FeedForward,
        dict(d_model=8, dff=20, activation="gelu_sigmoid", kernel_initializer="he_uniform"),
    ),
    (layers.EncoderLayer, BLOCK),
    (layers.DecoderLayer, BLOCK),
    (layers.Encoder, STACK),
    (layers.Decoder, STACK),
    (
        kt.Transformer,
        dict(
            {k: v for k, v in STACK.items() if k != "vocab_size"},
            input_vocab_size=19,
            target_vocab_size=21,
            shared_embeddings="output",
            activation="gelu_sigmoid",
        ),
    ),
    (kt.TransformerSchedule, dict(d_model=64, warmup_steps=123)),
    (
        kt.MaskedSparseCategoricalCrossentropy,
        dict(label_smoothing=0.25, reduction="sum", name="ce"),
    ),
    (kt.MaskedAccuracy, dict(name="acc")),
]


@pytest.mark.parametrize("cls, kwargs", CASES, ids=[c.__name__ for c, _ in CASES])
def test_every_argument_survives_get_config_and_from_config(cls, kwargs):
    obj = cls(**kwargs)
    config = obj.get_config()
    for name, value in kwargs.items():
        stored = config[name]
        if isinstance(value, layers.PositionScheme):  # a scheme's Keras config
            assert keras.saving.deserialize_keras_object(stored) == value, (name, stored)
        elif isinstance(stored, dict):  # initializer or similar, compare by class name
            assert value.lower().replace("_", "") in str(stored).lower().replace("_", ""), (
                name,
                stored,
            )
        else:
            assert stored == value, (name, stored, value)
    restored = cls.from_config(config)
    assert restored.get_config() == config


@pytest.mark.parametrize("cls, kwargs", CASES, ids=[c.__name__ for c, _ in CASES])
def test_registered_under_the_package_name(cls, kwargs):
    name = keras.saving.get_registered_name(cls)
    assert name == f"keras_transformer>{cls.__name__}"
    assert keras.saving.get_registered_object(name) is cls


def test_layers_inside_a_functional_model_round_trip_a_keras_file(tmp_path):
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    memory = layers.Encoder(**STACK)(source)
    x = layers.Decoder(**STACK)(target, memory)
    x = layers.FeedForward(16, 8)(x)
    x = layers.PositionalEncoding(layout="concatenated")(x)
    model = keras.Model([source, target], x)
    src = np.array([[3, 4, 5, 0]])
    tgt = np.array([[1, 6, 0]])
    path = tmp_path / "functional.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded([src, tgt])), ops.convert_to_numpy(model([src, tgt]))
    )


@keras.saving.register_keras_serializable(package="tests")
def squared_relu(x):
    return ops.square(ops.relu(x))


def test_an_uncompiled_model_loads_uncompiled_and_a_compiled_one_with_its_settings(tmp_path):
    model = kt.Transformer(1, 8, 2, 12, input_vocab_size=11, target_vocab_size=13)
    model((np.array([[3, 4, 0]]), np.array([[1, 5]])))
    model.save(tmp_path / "uncompiled.keras")
    assert not keras.models.load_model(tmp_path / "uncompiled.keras").compiled

    model.compile(optimizer="adam", loss=kt.MaskedSparseCategoricalCrossentropy(), r_drop=2.0)
    model.optimizer.build(model.trainable_variables)  # as training would, so its state saves
    model.save(tmp_path / "compiled.keras")
    loaded = keras.models.load_model(tmp_path / "compiled.keras")
    assert loaded.compiled and isinstance(loaded.optimizer, keras.optimizers.Adam)
    assert loaded.r_drop == 2.0 and loaded.micro_batches == 1


@pytest.mark.parametrize("activation", [squared_relu, keras.activations.gelu])
def test_a_callable_activation_round_trips_a_keras_file(activation, tmp_path):
    model = kt.Transformer(
        1, 8, 2, 12, input_vocab_size=11, target_vocab_size=13, activation=activation
    )
    inputs = (np.array([[3, 4, 5, 0]]), np.array([[1, 6, 0]]))
    expected = ops.convert_to_numpy(model(inputs))
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(ops.convert_to_numpy(loaded(inputs)), expected)
    for layer in [
        loaded,
        loaded.encoder,
        loaded.decoder.blocks[0],
        loaded.decoder.blocks[0].feed_forward,
    ]:
        assert layer.activation is activation, layer.name
