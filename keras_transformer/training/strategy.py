"""Choosing the `tf.distribute` strategy a run trains under."""

import tensorflow as tf


def distribution_strategy(devices):
    """One device, or `MirroredStrategy` over `devices` GPUs or logical CPUs.

    Args:
        devices: number of replicas; with fewer GPUs than that, the CPU is
            split into `devices` logical devices, which must happen before
            TensorFlow initializes its devices (call this first in a process).

    Raises:
        RuntimeError: if TensorFlow has already initialized its devices.

    Example:
    ```python
    with distribution_strategy(2).scope():
        model = Transformer(...)
    ```
    """
    if devices <= 1:
        return tf.distribute.get_strategy()
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= devices:
        return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(devices)])
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * devices
        )
    except RuntimeError:
        raise RuntimeError(
            "train.devices > 1 on CPU needs the logical devices set before TensorFlow "
            "starts; run it from a fresh process (the CLI does)."
        ) from None
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])
