"""The extension module of a .grad file: values against NumPy, torch
tensors in and out, and every kind of bad call raising a clear exception
(docs/Python.md, "Arguments")."""

import json
import threading
import time

import numpy as np
import pytest
import torch

from conftest import INPUTS, gradc_run, load


def k4_numpy(x, w):
    return np.sum(np.tanh(w.astype(np.float64) @ x.astype(np.float64)))


def test_values_against_numpy(calls):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    y = calls.k4(x, w)
    assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == np.float32
    assert abs(float(y) - k4_numpy(x, w)) < 1e-5
    dx, dw = calls.k4_grad(x, w)
    t = 1 - np.tanh(w.astype(np.float64) @ x) ** 2      # d tanh = 1 - tanh^2
    np.testing.assert_allclose(dx, w.T.astype(np.float64) @ t, rtol=1e-5)
    np.testing.assert_allclose(dw, np.outer(t, x), rtol=1e-5)
    # The split form: k4_bwd(x, w, k4_fwd(x, w), 1) is k4_grad(x, w).
    out, *res = calls.k4_fwd(x, w)
    ddx, ddw = calls.k4_bwd(x, w, out, *res, 1.0)
    np.testing.assert_allclose(ddx, dx, rtol=1e-6)
    np.testing.assert_allclose(ddw, dw, rtol=1e-6)


def test_sizes_keywords_and_integers(calls):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3))
    w = rng.standard_normal((3, 4))
    labels = np.array([0, 3, 1, 2, 3], dtype=np.int32)
    z = x @ w
    lse = np.log(np.exp(z).sum(axis=1))
    expected = 2.5 * np.mean(lse - z[np.arange(5), labels])
    assert abs(calls.loss(x, w, labels, 2.5) - expected) < 1e-12
    assert abs(calls.loss(x, labels=labels, w=w, scale=2.5) - expected) < 1e-12
    np.testing.assert_array_equal(
        calls.idiv(np.array([7, -7, 9], np.int32), np.array([2, 2, -3],
                                                            np.int32)),
        [3, -3, -3])                                   # truncates toward zero
    a, gt = calls.pick(np.array([True, False]), np.array([1., 2.]),
                       np.array([3., 0.]))
    np.testing.assert_array_equal(a, [1., 0.])
    assert gt.dtype == np.bool_ and gt.tolist() == [False, True]
    assert gradc_run(INPUTS / "calls.grad",
                     "pick([true, false], [1, 2], [3, 0])") == [
        [1, 0], [False, True]]


def test_torch_tensors_in_and_out(calls):
    x = torch.randn(4)
    w = torch.randn(4, 4, requires_grad=True)   # read through detach()
    y = calls.k4(x, w)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    assert abs(y.item() - torch.tanh(w @ x).sum().item()) < 1e-5
    dx, dw = calls.k4_grad(x, w)
    assert isinstance(dx, torch.Tensor) and dw.shape == (4, 4)


def test_zero_sizes(calls):
    out = calls.idiv(np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert out.shape == (0,)


BAD_CALLS = [
    # (call, exception, message)
    (lambda m: m.k4(np.ones(4), np.eye(4, dtype=np.float32)), TypeError,
     "k4(): argument 'x' must be f32[4], got f64[4]"),
    (lambda m: m.k4(np.ones((1, 4), np.float32), np.eye(4, dtype=np.float32)),
     ValueError, "k4(): argument 'x' must be f32[4], got f32[1, 4]: rank 2, "
     "expected 1"),
    (lambda m: m.k4(np.ones(5, np.float32), np.eye(4, dtype=np.float32)),
     ValueError, "argument 'x' must be f32[4], got f32[5]: dimension 0 is 5, "
     "expected 4"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)), np.zeros(6, np.int32),
                      1.0), ValueError,
     "loss(): argument 'labels' must be i32[B], got i32[6]: size 'B' is 5 "
     "from argument 'x'"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((2, 4)), np.zeros(5, np.int32),
                      1.0), ValueError,
     "argument 'w' must be f64[F, C], got f64[2, 4]: size 'F' is 3 from "
     "argument 'x'"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)),
                      np.zeros(5, np.int64), 1.0), TypeError,
     "argument 'labels' must be i32[B], got int64[5]"),
    (lambda m: m.k4(np.ones(4, np.float32), np.eye(4, dtype=np.float32).T),
     ValueError, "argument 'w' must be f32[4, 4], got a non-contiguous "
     "f32[4, 4]"),
    (lambda m: m.k4(np.ones(8, np.float32)[::2], np.eye(4, dtype=np.float32)),
     ValueError, "got a non-contiguous f32[4]"),
    (lambda m: m.k4(torch.ones(4, device="meta"), np.eye(4, dtype=np.float32)),
     TypeError, "argument 'x' must be f32[4], got a tensor on meta: gradc "
     "functions run on the CPU"),
    (lambda m: m.k4(torch.ones(4, dtype=torch.bfloat16), torch.eye(4)),
     TypeError, "argument 'x' must be f32[4], got a tensor of torch.bfloat16"),
    (lambda m: m.k4(torch.ones(4), torch.eye(4).t()), ValueError,
     "argument 'w' must be f32[4, 4], got a non-contiguous f32[4, 4]"),
    (lambda m: m.k4([1, 2, 3, 4], np.eye(4, dtype=np.float32)), TypeError,
     "argument 'x' must be f32[4], got 'list'"),
    (lambda m: m.k4(np.ones(4, np.float32)), TypeError,
     "k4() missing argument 'w' (f32[4, 4])"),
    (lambda m: m.k4(1, 2, 3), TypeError, "k4() takes 2 arguments (x, w), got 3"),
    (lambda m: m.k4(np.ones(4, np.float32), w=1, v=2), TypeError,
     "k4() got an unexpected keyword argument 'v'"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)), np.zeros(5, np.int32),
                      "2"), TypeError,
     "argument 'scale' must be f64 (a real number), got 'str'"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)), np.zeros(5, np.int32),
                      1.0, x=1), TypeError,
     "loss() got multiple values for argument 'x'"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)), np.zeros(5, np.int32),
                      1.0, 2.0), TypeError,
     "loss() takes 4 arguments (x, w, labels, scale), got 5"),
    (lambda m: m.loss(np.ones((5, 3)), np.ones((3, 4)),
                      np.array([0, 1, 2, 3, 4], np.int32), 1.0), IndexError,
     "loss(): a label of softmax_cross_entropy is outside [0, classes) "
     "(GRADC_ERROR_INDEX)"),
    (lambda m: m.idiv(np.ones(2, np.int32), np.array([1, 0], np.int32)),
     ZeroDivisionError, "idiv(): integer division by zero"),
    (lambda m: m.pick(np.array([1, 0], np.uint8), np.ones(2), np.ones(2)),
     TypeError, "argument 'mask' must be bool[N], got uint8[2]"),
]


@pytest.mark.parametrize("call,error,message", BAD_CALLS)
def test_bad_calls(calls, call, error, message):
    with pytest.raises(error) as info:
        call(calls)
    assert message in str(info.value)


def test_gil_released_during_call(calls):
    a = (np.random.default_rng(3).standard_normal((600, 600)) / 40).astype(
        np.float32)
    start = time.perf_counter()
    calls.slow(a)
    alone = time.perf_counter() - start
    counter = 0
    worker = threading.Thread(target=calls.slow, args=(a,))
    worker.start()
    while worker.is_alive():
        counter += 1
    worker.join()
    # With the GIL held, this thread would stand still for the whole call;
    # with it released, it spins (millions of times per second) beside it.
    assert alone > 0.01
    assert counter > 1000


def test_both_backends_agree():
    cpp = load(INPUTS / "calls.grad", backend="cpp")
    llvm = load(INPUTS / "calls.grad", backend="llvm")
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
    np.testing.assert_allclose(cpp.k4_grad(x, w)[1], llvm.k4_grad(x, w)[1],
                               rtol=1e-5)


WEIRD = [None, "x", b"x", 1.5, -1, 2 ** 70, [], {}, object(), np.float16(1),
         np.ones((2, 2, 2)), np.ones(3, np.float16), np.ones(0, np.float32),
         np.array(3.0), torch.ones(3), torch.ones(2, 2).t(),
         torch.ones(3, dtype=torch.complex64), torch.ones(3, device="meta")]


# Any value for any parameter: an exception, never a crash.
@pytest.mark.parametrize("name", ["k4", "k4_grad", "k4_fwd", "k4_bwd", "loss",
                                  "loss_grad", "idiv", "pick"])
def test_garbage_never_crashes(calls, name):
    fn = getattr(calls, name)
    arity = len(json.loads(calls.__gradc__)["functions"][name]["params"])
    for value in WEIRD:
        for args in ([value] * arity, [value], [value] * (arity + 3)):
            try:
                fn(*args)
            except (TypeError, ValueError, OverflowError, IndexError,
                    ZeroDivisionError):
                pass
