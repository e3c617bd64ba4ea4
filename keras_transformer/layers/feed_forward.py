"""The position-wise feed-forward network (Vaswani et al., 2017, §3.3)."""

from collections.abc import Callable

import keras

from keras_transformer.layers.activations import get_activation, serialize_activation
from keras_transformer.layers.rows import over_rows
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied at every position.

    Args:
        d_model: output size D (the model width).
        dff: inner size d_ff.
        activation: activation of the inner layer. Defaults to `"relu"`.
        kernel_initializer: initializer of both kernels.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, L, D_in)`.

    Returns:
        `(B, L, d_model)`; the input's Keras mask passes through.

    Raises:
        ValueError: if `d_model` or `dff` is not a positive integer.

    Examples:
        ```python
        ffn = FeedForward(d_model=64, dff=256)
        ffn(np.zeros((2, 10, 64), "float32")).shape  # (2, 10, 64)
        ```
    """

    def __init__(
        self,
        d_model: int,
        dff: int,
        activation: str | Callable = "relu",
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("d_model", d_model)
        check_positive_int("dff", dff)
        self.d_model = d_model
        self.dff = dff
        self.activation = get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.inner = keras.layers.Dense(
            dff,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="inner",
        )
        self.outer = keras.layers.Dense(
            d_model,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="outer",
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        self.inner.build(inputs_shape)
        self.outer.build((*inputs_shape[:-1], self.dff))

    def call(self, inputs):
        # (B, L, D_in) -> (B, L, dff) -> (B, L, D), each position a row
        return over_rows(lambda rows: self.outer(self.inner(rows)), inputs)

    def compute_output_shape(self, inputs_shape):
        return (*inputs_shape[:-1], self.d_model)

    def get_config(self):
        config = {
            "d_model": self.d_model,
            "dff": self.dff,
            "activation": serialize_activation(self.activation),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
        return {**super().get_config(), **config}
