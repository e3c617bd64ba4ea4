"""`keep_freed_memory`, where 0.2.0 defined it: it lives in `keras_transformer.memory`,
which `Transformer.fit` calls under JAX, so that the model need not import `training/`."""

from keras_transformer.memory import (
    MALLOC_VARIABLES,
    keep_freed_memory,
    keep_freed_memory_for_jax,
)

__all__ = ["MALLOC_VARIABLES", "keep_freed_memory", "keep_freed_memory_for_jax"]
