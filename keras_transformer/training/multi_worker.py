"""The multi-worker protocol: what every worker of a cluster does in step with the others.

Under `MultiWorkerMirroredStrategy` each worker runs the same `train`
command. Before training they check that they hold the same tokenizers,
restore backups of one common step, and feed the strategy their own share of
the batches; after it they report a digest of the weights, which is equal on
workers that trained in step. Every function here is a collective call: all
workers must make it.
"""

import hashlib

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import compat
from keras_transformer.errors import RunError


def all_workers(strategy, value):
    """`value` (an int) from every replica of every worker, as a list; a collective call."""
    local = strategy.run(lambda: tf.constant([value], tf.int64))
    return [int(v) for v in strategy.gather(local, axis=0).numpy()]


def check_same_on_every_worker(strategy, what, value):
    """Raises `RunError` unless every worker of `strategy` holds the same int `value`."""
    values = all_workers(strategy, value)
    if len(set(values)) > 1:
        raise RunError(
            f"The workers' {what} differ (one value per replica: {values}); every worker "
            "must run the same command on the same data."
        )


def restore_on_every_worker(backup, model, strategy):
    """`backup.restore`, on every worker from a backup of the same step; the epoch to start at.

    Workers back up independently, so a cluster stopped between two workers'
    backups holds a newer one on some workers: they restore the newest step
    that every worker has (each keeps its last two backups). With one worker
    this is `backup.restore(model)`.
    """
    at_most = min(all_workers(strategy, backup.newest_step()))
    for _ in range(3):  # again only if a worker's backup of that step was unreadable
        initial_epoch = backup.restore(model, at_most)
        steps = all_workers(strategy, backup.restored_step)
        if len(set(steps)) == 1:
            return initial_epoch
        at_most = min(steps)
        if at_most == 0:
            break  # a worker has nothing to restore, and the others have loaded a backup
    raise RunError(
        f"The workers have no readable backup of one step in common (they restored steps "
        f"{steps}). Delete every worker's backup directory to start the run over."
    )


def per_worker_batches(strategy, batches, shard):
    """`batches` fed to a multi-worker `strategy` as they are, one batch per replica and step.

    Keras' own path (`experimental_distribute_dataset`) would cut each
    token-budget batch into one piece per replica, some of them empty when a
    batch has fewer rows than there are replicas. Here every worker builds
    its own dataset instead (`distribute_datasets_from_function`): its share
    of the training batches (`shard=True`, `Batches.shard`), or all of the
    validation batches (`shard=False`), so that every worker computes the same
    `val_loss` for checkpoints and early stopping to compare.
    """

    def dataset_fn(context):
        replicas = context.num_replicas_in_sync // context.num_input_pipelines
        if shard:
            count, index = context.num_input_pipelines, context.input_pipeline_id
        else:
            count, index = 1, 0
        return batches.shard(count, index, replicas).dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


def weights_digest(model):
    """SHA-256 of the model's weights: equal on workers that trained in step."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def fit_under_multi_worker(model, strategy):
    """Works around the two steps of Keras 3.15's `fit` that fail under multiple workers.

    Under `MultiWorkerMirroredStrategy` Keras (tensorflow#72388):

    - builds the model from the mean of the first batch over all replicas, an
      all-reduce that the strategy refuses for nested inputs (and that could
      not work when workers' batches differ in shape); building needs only
      the batch's structure, shapes and dtypes, which this worker's own
      batch has, so the model is built from it;
    - reduces each step's logs with `strategy.reduce("MEAN", value, axis=0)`,
      which fails on the scalar losses and metrics; the steps return them
      with a leading axis of length 1, which that reduction averages away.
    """

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, batches in iterator:
                data_batch = keras.tree.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0], next(batches)
                )
                break
        with strategy.scope():
            compat.symbolic_build(model, data_batch)

    def with_leading_axis(step):
        def step_with_leading_axis(data):
            return {name: tf.reshape(value, [1]) for name, value in step(data).items()}

        return step_with_leading_axis

    compat.replace_symbolic_build(model, maybe_symbolic_build)
    model.train_step = with_leading_axis(model.train_step)
    model.test_step = with_leading_axis(model.test_step)
