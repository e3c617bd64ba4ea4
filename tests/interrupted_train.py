"""`keras-transformer train`, interrupted at an exact batch: the tests' crash.

    python tests/interrupted_train.py --epoch 2 --batch 3 --action kill -- train --run-dir ...

After batch `--batch` (1-based) of epoch `--epoch` (1-based), in the training
process itself, it prints `interrupted at step <optimizer iterations>` and then sends itself
SIGINT (`int`, as Ctrl-C does) or SIGKILL (`kill`, as `kill -9` or a lost
machine does), or makes every weight NaN (`nan`, so that the next step's loss
is NaN). The test, not the clock, decides where the run stops.
"""

import argparse
import functools
import os
import signal
import sys

import keras

from keras_transformer import cli, run


class InterruptAt(keras.callbacks.Callback):
    def __init__(self, epoch, batch, action):
        super().__init__()
        self.epoch, self.batch, self.action = epoch, batch, action
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        if (self._epoch, batch + 1) != (self.epoch, self.batch):
            return
        print(f"\ninterrupted at step {int(self.model.optimizer.iterations.numpy())}", flush=True)
        if self.action == "nan":
            for variable in self.model.trainable_variables:
                variable.assign(variable * float("nan"))
        else:
            os.kill(os.getpid(), {"int": signal.SIGINT, "kill": signal.SIGKILL}[self.action])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epoch", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--action", choices=["int", "kill", "nan"], required=True)
    parser.add_argument("cli_arguments", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    # As in a terminal: a process started in the background of a shell without
    # job control inherits SIGINT ignored, and Python then installs no handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt = InterruptAt(args.epoch, args.batch, args.action)
    run.train = functools.partial(run.train, callbacks=[interrupt])
    sys.exit(cli.main([a for a in args.cli_arguments if a != "--"]))


if __name__ == "__main__":
    main()
