"""The warm-up learning-rate schedule of the paper (Vaswani et al., 2017, §5.3), and the
schedules that wrap it: a constant factor, a linear cool-down, a count of updates."""

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    The rate grows linearly for `warmup_steps` steps, then decays with the
    inverse square root of the step. `step` is the optimizer's iteration
    count, which Keras starts at 0; the formula gives 0 there (the first
    update is a no-op, as in the TensorFlow tutorial), and the schedule is
    finite for every step >= 0.

    Args:
        d_model: model width D.
        warmup_steps: steps of linear warm-up. Defaults to 4000.

    Raises:
        ValueError: if `d_model` or `warmup_steps` is not a positive integer.

    Examples:
        ```python
        schedule = TransformerSchedule(d_model=512)
        schedule(4000)  # the peak, 512**-0.5 * 4000**-0.5
        ```
    """

    def __init__(self, d_model, warmup_steps=4000):
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        self.d_model = d_model
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        # rsqrt(0) is inf; at step 0 the min() picks the warm-up term, 0.
        decay = ops.rsqrt(ops.maximum(step, 1.0))
        warmup = step * self.warmup_steps**-1.5
        return self.d_model**-0.5 * ops.minimum(decay, warmup)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Another schedule's learning rate times a constant.

    Args:
        schedule: a `LearningRateSchedule`, e.g. `TransformerSchedule`.
        scale: the factor.

    Examples:
        >>> ScaledSchedule(TransformerSchedule(256, warmup_steps=800), 0.7)(800)  # 0.7 * peak
    """

    def __init__(self, schedule, scale):
        self.schedule = schedule
        self.scale = scale

    def __call__(self, step):
        return self.schedule(step) * self.scale

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule), "scale": self.scale}

    @classmethod
    def from_config(cls, config):
        return cls(keras.saving.deserialize_keras_object(config["schedule"]), config["scale"])


@keras.saving.register_keras_serializable(package="keras_transformer")
class LinearCooldown(keras.optimizers.schedules.LearningRateSchedule):
    """Another schedule, brought down linearly to 0 over the last steps of training.

    lrate = schedule(step) * clip((total_steps - step) / cooldown_steps, 0, 1)

    The rate is the other schedule's until `total_steps - cooldown_steps`,
    then falls in a straight line to 0 at `total_steps` and stays there. The
    paper's schedule alone ends training at a rate still near a third of its
    peak (31% after 8,260 steps with 800 of warm-up); a run of a fixed
    length that cools down ends nearer a minimum (on Multi30k, 16 epochs
    whose last 4 cool down: validation loss 2.439 against 2.460, the
    Multi30k guide's R-Drop section).

    Args:
        schedule: a `LearningRateSchedule`, e.g. `TransformerSchedule`.
        total_steps: the optimizer steps of the whole run.
        cooldown_steps: how many of them, at the end, cool down;
            at most `total_steps`.

    Raises:
        ValueError: if a step count is not a positive integer, or
            `cooldown_steps` > `total_steps`.

    Examples:
        >>> paper = TransformerSchedule(256, warmup_steps=800)
        >>> cooled = LinearCooldown(paper, total_steps=4000, cooldown_steps=1000)
        >>> cooled(3500)  # half of paper(3500)
    """

    def __init__(self, schedule, total_steps, cooldown_steps):
        check_positive_int("total_steps", total_steps)
        check_positive_int("cooldown_steps", cooldown_steps)
        if cooldown_steps > total_steps:
            raise ArgumentError(
                "`cooldown_steps` must be at most `total_steps`. Received: "
                f"cooldown_steps={cooldown_steps}, total_steps={total_steps}"
            )
        self.schedule = schedule
        self.total_steps = total_steps
        self.cooldown_steps = cooldown_steps

    def __call__(self, step):
        left = (self.total_steps - ops.cast(step, "float32")) / self.cooldown_steps
        return self.schedule(step) * ops.clip(left, 0.0, 1.0)

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "total_steps": self.total_steps,
            "cooldown_steps": self.cooldown_steps,
        }

    @classmethod
    def from_config(cls, config):
        schedule = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["total_steps"], config["cooldown_steps"])


@keras.saving.register_keras_serializable(package="keras_transformer")
class PerUpdateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Another schedule, counted in optimizer updates under gradient accumulation.

    With `gradient_accumulation_steps=N`, a Keras optimizer updates the
    weights once every N micro-batches but calls its schedule with the count
    of micro-batches. This schedule divides that count by N, so that update
    u gets `schedule(u)` as it would without accumulation, and the warm-up
    lasts `warmup_steps` updates, not micro-batches.

    Args:
        schedule: a `LearningRateSchedule`, e.g. `TransformerSchedule`.
        micro_batches: N, the optimizer's `gradient_accumulation_steps`.

    Examples:
        >>> per_update = PerUpdateSchedule(TransformerSchedule(256, warmup_steps=800), 4)
        >>> per_update(4 * 800 + 3)  # the micro-batch that ends update 800: the peak
    """

    def __init__(self, schedule, micro_batches):
        check_positive_int("micro_batches", micro_batches)
        self.schedule = schedule
        self.micro_batches = micro_batches

    def __call__(self, step):
        return self.schedule(ops.floor_divide(step, self.micro_batches))

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "micro_batches": self.micro_batches,
        }

    @classmethod
    def from_config(cls, config):
        schedule = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["micro_batches"])
