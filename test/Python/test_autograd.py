"""gradc functions as torch.autograd.Functions (runtime/python/
gradc_torch.py): gradcheck in f64 on every example's gradient, and the
gradient overrides of the seeds giving in PyTorch the numbers of
`gradc run`."""

import math

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

import gradc_torch
from conftest import EXAMPLES, INPUTS, example, gradc_run, load

torch.manual_seed(0)


def f64(*shape, requires_grad=True):
    return torch.randn(*shape, dtype=torch.float64,
                       requires_grad=requires_grad)


def labels(n, classes):
    return torch.randint(0, classes, (n,), dtype=torch.int32)


# Every @grad function of dsl_examples/ whose gradient is the derivative
# (the others are declared @surrogate and tested below against their
# rules), in f64, with inputs that need a gradient marked.
GRADCHECKS = {
    "spiral_mlp.loss": lambda: ("spiral_mlp", "loss", (
        f64(6, 2, requires_grad=False), f64(2, 5), f64(5), f64(5, 2),
        f64(2), labels(6, 2))),
    "mlp.loss": lambda: ("mlp", "loss", (
        f64(3, 4, requires_grad=False), f64(4, 3), f64(3), f64(3, 2), f64(2),
        labels(3, 2))),
    "split_layer.block": lambda: ("split_layer", "block", (
        f64(3, 4, requires_grad=False), f64(4, 5), f64(5), f64(5, 2))),
    "stable_logsumexp.naive": lambda: ("stable_logsumexp", "naive", (f64(5),)),
    "stable_logsumexp.builtin": lambda: ("stable_logsumexp", "builtin",
                                         (f64(5),)),
    "stable_logsumexp.stable": lambda: ("stable_logsumexp", "stable",
                                        (f64(5),)),
    # wf and bf get the reversed gradient on purpose: not checked here.
    "dann.loss": lambda: ("dann", "loss", (
        f64(4, 2, requires_grad=False), labels(4, 2),
        f64(4, 2, requires_grad=False), 0.7,
        f64(2, 3, requires_grad=False), f64(3, requires_grad=False),
        f64(3, 2), f64(2), f64(3, 4), f64(4), f64(4), f64(()))),
    "identity_overrides.plain": lambda: ("identity_overrides", "plain",
                                         (f64(3),)),
    "stack_override.plain": lambda: ("stack_override", "plain", (f64(2),)),
}


@pytest.mark.parametrize("case", sorted(GRADCHECKS))
def test_gradcheck(case):
    name, fn, args = GRADCHECKS[case]()
    fns = gradc_torch.wrap(example(name, f64=True))
    assert gradcheck(getattr(fns, fn), args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_gradcheck_without_split_form():
    # Built without --split-grad, the backward pass calls NAME_grad.
    module = load(INPUTS / "calls.grad", split=False)
    assert not hasattr(module, "loss_fwd")
    fns = gradc_torch.wrap(module)
    args = (f64(3, 2, requires_grad=False), f64(2, 4), labels(3, 4), 1.5)
    assert gradcheck(fns.loss, args, eps=1e-6, atol=1e-7)
    args = (f64(3, 4, requires_grad=False), f64(4, 5), f64(5), f64(5, 2))
    split = gradc_torch.wrap(load(gradc_f64_split_layer(), split=False))
    assert gradcheck(split.block, args, eps=1e-6, atol=1e-7)


def gradc_f64_split_layer():
    from conftest import f64_variant
    return f64_variant("split_layer")


def grad_of(fn, args, index, cotangent=None):
    """The gradient of args[index] after one backward pass."""
    args = [torch.tensor(a, requires_grad=(i == index))
            if isinstance(a, list) else a for i, a in enumerate(args)]
    y = fn(*args)
    y.backward(cotangent if cotangent is not None else torch.ones_like(y))
    return args[index].grad


def same(torch_value, run_value):
    np.testing.assert_allclose(torch_value.detach().numpy(),
                               np.array(run_value, dtype=np.float32),
                               rtol=1e-6, atol=0)


def test_seed_stack_first_only():
    fns = gradc_torch.wrap(example("stack_override"))
    dy = torch.tensor([[3., 4.], [6., 8.]])
    path = EXAMPLES / "stack_override.grad"
    g = grad_of(fns.synth, [[1., 2.]], 0, dy)
    assert g.tolist() == [3., 4.]                      # only the first copy
    same(g, gradc_run(path, "synth_grad([1, 2], [[3, 4], [6, 8]])")[0])
    g = grad_of(fns.plain, [[1., 2.]], 0, dy)
    assert g.tolist() == [9., 12.]                     # both copies
    same(g, gradc_run(path, "plain_grad([1, 2], [[3, 4], [6, 8]])")[0])


@pytest.mark.parametrize("name,fn,expected", [
    ("identity_overrides", "scaled", 5.0),
    ("identity_overrides", "clipped", 0.1),
    ("identity_overrides", "plain", 1.0),
    ("custom_clip", "clip_layer", 0.1),
    ("custom_clip", "clip_layer_inline", 0.1),
])
def test_seed_identity_overrides(name, fn, expected):
    fns = gradc_torch.wrap(example(name))
    g = grad_of(getattr(fns, fn), [[3.]], 0)
    assert g.tolist() == [pytest.approx(expected, rel=1e-7)]
    same(g, gradc_run(EXAMPLES / f"{name}.grad", f"{fn}_grad([3], [1])")[0])


def test_seed_clip_inside_a_model():
    fns = gradc_torch.wrap(example("custom_clip"))
    x = torch.tensor([3., -2.], requires_grad=True)
    fns.uses_layer(x).backward()     # cotangent 3 everywhere, clipped to 0.1
    assert x.grad.tolist() == [pytest.approx(0.1)] * 2
    same(x.grad, gradc_run(EXAMPLES / "custom_clip.grad",
                           "uses_layer_grad([3, -2])")[0])


def test_seed_gradient_reversal():
    fns = gradc_torch.wrap(example("gradient_reversal"))
    path = EXAMPLES / "gradient_reversal.grad"
    dy = torch.tensor([1., -2.])
    g = grad_of(fns.scale_gradient, [[1., 2.], -0.5], 0, dy)
    assert g.tolist() == [-0.5, 1.]                    # l * dy
    same(g, gradc_run(path, "scale_gradient_grad([1, 2], -0.5, [1, -2])")[0])
    g = grad_of(fns.quarter_gradient, [[1., 2.]], 0, dy)
    assert g.tolist() == [0.25, -0.5]
    lam = 2 / (1 + math.exp(-10 * 0.3)) - 1            # lambda(p), p = 0.3
    x = torch.tensor([1., 2.], requires_grad=True)
    y = fns.reverse_gradient(x, 0.3)
    assert y.tolist() == [1., 2.]                      # forward: x
    y.backward(dy)
    np.testing.assert_allclose(x.grad.numpy(), [-lam, 2 * lam], rtol=1e-6)
    same(x.grad, gradc_run(path, "reverse_gradient_grad([1, 2], 0.3, [1, -2])")[0])
    g = grad_of(fns.straight_through_sign, [[0.5, 2., -3.]], 0)
    assert g.tolist() == [1., 0., 0.]                  # dy where |x| < 1
    same(g, gradc_run(path, "straight_through_sign_grad([0.5, 2, -3], [1, 1, 1])")[0])


def test_seed_dann_reversal_matches_pytorch():
    """DANN's loss through gradc against the same model in PyTorch with a
    gradient-reversal autograd.Function of its own."""

    class Reverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, lam):
            ctx.lam = lam
            return h.clone()

        @staticmethod
        def backward(ctx, dy):
            return -ctx.lam * dy, None

    def reference(xs, ys, xt, lam, wf, bf, wy, by, wd, bd, vd, cd):
        hs, ht = torch.tanh(xs @ wf + bf), torch.tanh(xt @ wf + bf)
        label = torch.nn.functional.cross_entropy(hs @ wy + by, ys.long())

        def domain(h):
            return torch.tanh(Reverse.apply(h, lam) @ wd + bd) @ vd + cd
        softplus = torch.nn.functional.softplus
        return label + softplus(domain(hs)).mean() + softplus(-domain(ht)).mean()

    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    data = [r(6, 2), torch.tensor([0, 1, 1, 0, 1, 0], dtype=torch.int32),
            r(6, 2), 0.6]
    weights = [r(2, 3), r(3), r(3, 2), r(2), r(3, 4), r(4), r(4), r(())]
    fns = gradc_torch.wrap(example("dann"))
    grads = []
    for fn in (fns.loss, reference):
        ws = [w.clone().requires_grad_() for w in weights]
        loss = fn(*data, *ws)
        loss.backward()
        grads.append([loss.detach()] + [w.grad for w in ws])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-4,
                                   atol=2e-6)
    # ... and as `gradc run` prints them.
    def lit(t):
        return str(t.tolist()) if t.dim() else repr(float(t))
    call = "loss_grad(" + ", ".join(
        [lit(data[0]), str(data[1].tolist()), lit(data[2]), "0.6"]
        + [lit(w) for w in weights]) + ")"
    run = gradc_run(EXAMPLES / "dann.grad", call)
    for ours, theirs in zip(grads[0][1:], run):
        np.testing.assert_allclose(ours.numpy(), np.array(theirs, np.float32),
                                   rtol=1e-5, atol=1e-7)


def test_layer_module_and_parameters():
    fns = gradc_torch.wrap(example("split_layer"))
    layer = gradc_torch.Layer(fns.block, w1=torch.randn(4, 8), b1=torch.zeros(8),
                              w2=torch.randn(8, 3))
    assert [n for n, _ in layer.named_parameters()] == ["w1", "b1", "w2"]
    x = torch.randn(5, 4)
    out = layer(x)
    assert out.shape == (5, 3) and out.grad_fn is not None
    out.square().sum().backward()
    h = torch.tanh(x @ layer.w1 + layer.b1)            # the same in PyTorch
    ref = (h @ layer.w2).square().sum()
    w1, b1, w2 = torch.autograd.grad(ref, [layer.w1, layer.b1, layer.w2])
    np.testing.assert_allclose(layer.w1.grad.numpy(), w1.numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(layer.w2.grad.numpy(), w2.numpy(), rtol=1e-4,
                               atol=1e-5)
    # No grad needed: the plain function runs, and no graph is kept.
    with torch.no_grad():
        assert layer(x).grad_fn is None
    with pytest.raises(TypeError, match="has no parameter 'w3'"):
        gradc_torch.Layer(fns.block, w3=torch.zeros(1))


def test_gradcheck_catches_a_surrogate():
    # The harness can fail: scaled's gradient is 5 dy, not the identity's.
    fns = gradc_torch.wrap(example("identity_overrides", f64=True))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(fns.scaled, (f64(3),), eps=1e-6, atol=1e-7)
