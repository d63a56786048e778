"""The Python examples of dsl_examples/python/, with bounded steps: the
spiral MLP trained from Python, DANN with gradc's gradient reversal in a
PyTorch model, and DistributedDataParallel over two gloo processes on
127.0.0.1 following the one-process loss curve, and the RNN of
loops/rnn_echo.grad trained from Python."""

import os
import re
import subprocess
import sys

from conftest import CACHE, EXAMPLES, example

SCRIPTS = EXAMPLES / "python"
# A guard against a hang, not a budget: on a loaded machine starting torch
# in three processes alone can take a minute.


def run(script, *args, timeout=300):
    env = dict(os.environ, GRADC_PYTHON_CACHE=CACHE)
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout, env=env)
    return proc.returncode, proc.stdout


def numbers(text, key):
    return [float(v) for v in re.findall(key + r" ([0-9.e+-]+)", text)]


def test_spiral_mlp():
    rc, out = run("spiral_mlp.py", "--steps", "300")
    assert rc == 0, out
    loss = numbers(out, "loss")
    assert 0.6 < loss[0] < 0.8            # two balanced classes: ln 2
    assert loss[-1] < 0.05
    assert numbers(out, "accuracy")[0] >= 0.97


def test_dann():
    rc, out = run("dann.py", "--steps", "200")
    assert rc == 0, out
    label = numbers(out, "label loss")
    assert label[-1] < label[0]
    assert numbers(out, "source accuracy")[0] >= 0.95


def test_ddp_two_processes_follow_one():
    example("split_layer")                # the module the script loads
    rc, out = run("ddp_train.py", "--steps", "20")
    assert rc == 0, out
    assert "ok: the same loss curve" in out
    single = numbers(out, r"\d+  loss")
    curves = re.findall(r"loss ([0-9.]+) +loss ([0-9.]+)", out)
    assert len(curves) >= 3
    for a, b in curves:
        assert abs(float(a) - float(b)) < 1e-5
    assert float(curves[-1][0]) < float(curves[0][0])
    assert single  # the columns were printed


def test_rnn_train():
    # A loop in a Python module: rnn_echo.grad through the loop printer.
    rc, out = run("rnn_train.py", "--steps", "100", "--report", "50")
    assert rc == 0, out
    loss = numbers(out, "held-out loss")
    assert len(loss) == 3
    assert loss[0] > 0.1                  # about the targets' mean square
    assert loss[-1] < loss[0] / 10
