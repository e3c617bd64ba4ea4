import json

import keras
import numpy as np

from keras_transformer.training.backup import TrainingBackup


def compiled_model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def run_steps(backup, model, epoch, steps):
    backup.on_epoch_begin(epoch)
    for batch in range(steps):
        model.optimizer.iterations.assign_add(1)
        backup.on_train_batch_end(batch)


def test_a_backup_that_ends_an_epoch_resumes_at_the_next_epoch(tmp_path):
    model = compiled_model()
    backup = TrainingBackup(str(tmp_path / "backup"), every_steps=2)
    backup.set_model(model)
    run_steps(backup, model, epoch=0, steps=4)  # step backups at 2 and 4 ...
    backup.on_epoch_end(0)  # ... and step 4 also ends epoch 0
    newest = backup.backups()[-1]
    with open(f"{newest}/training.json") as f:
        assert json.load(f) == {"epoch": 1, "step": 4}
    assert TrainingBackup(backup.directory).restore(compiled_model()) == 1


def test_restore_brings_back_weights_and_optimizer_steps(tmp_path):
    model = compiled_model()
    backup = TrainingBackup(str(tmp_path / "backup"), every_steps=3)
    backup.set_model(model)
    run_steps(backup, model, epoch=0, steps=3)  # a backup at step 3, inside epoch 0
    saved = [w.copy() for w in model.get_weights()]
    model.set_weights([w + 1 for w in saved])
    run_steps(backup, model, epoch=0, steps=1)  # step 4: not backed up
    fresh = compiled_model()
    assert TrainingBackup(backup.directory).restore(fresh) == 0  # epoch 0 runs again
    assert int(fresh.optimizer.iterations.numpy()) == 3
    for got, want in zip(fresh.get_weights(), saved, strict=True):
        np.testing.assert_array_equal(got, want)
