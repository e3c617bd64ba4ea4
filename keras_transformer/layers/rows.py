"""Position-wise products written as one matrix product over rows."""

from collections.abc import Callable

from keras import ops


def over_rows(function: Callable, x):
    """`function` applied to `x` `(..., D)` seen as rows `(N, D)`, reshaped to `(..., E)`.

    A dense projection of `(B, T, D)` by a `(D, E)` matrix is one `(B * T, D)`
    by `(D, E)` product. Written so, it is one matrix-product op in a
    TensorFlow graph, where `ops.matmul` of a 3-D tensor builds a `tensordot`
    of about twenty (shape arithmetic, reshapes, constants): fewer ops to
    trace, to load from a SavedModel and for the executor to run at every
    step of a search. The values are those of the 3-D product.

    Args:
        function: maps rows `(N, D)` to `(N, E)`, each row alone (a dense
            layer, a product by a matrix).
        x: tensor `(..., D)` with a known last dimension.

    Returns:
        `(..., E)`.

    Example:
        ```python
        y = over_rows(lambda rows: ops.matmul(rows, kernel), x)  # (B, T, D) -> (B, T, E)
        ```
    """
    if len(x.shape) == 2:
        return function(x)
    y = function(ops.reshape(x, (-1, x.shape[-1])))  # (N, E)
    return ops.reshape(y, (*ops.shape(x)[:-1], y.shape[-1]))
