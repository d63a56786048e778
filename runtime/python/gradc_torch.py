"""gradc functions as PyTorch operations (docs/Python.md).

A module that ``gradc FILE.grad --emit=python`` generated takes and returns
NumPy arrays and CPU tensors but knows nothing of autograd. This file puts
each of its functions under PyTorch's autograd::

    import gradc_torch, spiral_mlp
    fns = gradc_torch.wrap(spiral_mlp)
    loss = fns.loss(x, w1, b1, w2, b2, labels)   # a tensor with a grad_fn
    loss.backward()                              # gradc's gradient

For a function marked ``@grad`` whose module was compiled with
``--split-grad``, the forward pass calls ``NAME_fwd`` and saves the
residuals it returns, and the backward pass calls ``NAME_bwd`` with them and
the cotangents (docs/ABI.md, "The split form"). Without the split form the
backward pass calls ``NAME_grad``, which runs the forward again. Gradient
overrides (rules, ``@custom_grad``, ``stop_gradient`` identities) therefore
act in PyTorch exactly as in ``gradc run``. Parameters outside the
function's ``@grad(...)`` list get no gradient (``None``).

``Layer`` makes an ``nn.Module`` of a function: the named arguments become
its ``nn.Parameter``s, and the others are the arguments of ``forward``.
"""

import json
import types

import torch

__all__ = ["wrap", "Function", "Layer"]


def _describe(module):
    text = getattr(module, "__gradc__", None)
    if text is None:
        raise TypeError(
            f"'{getattr(module, '__name__', module)}' is not a module that "
            "gradc --emit=python generated (it has no __gradc__)")
    return json.loads(text)


def _contiguous(t, like):
    """A cotangent the extension accepts: a contiguous tensor of the
    result's dtype (autograd hands out expanded, strided zeros and ones)."""
    if t is None:
        return torch.zeros_like(like)
    if t.dtype != like.dtype:
        t = t.to(like.dtype)
    return t.contiguous()


class Function:
    """A callable for function `name` of a generated module: autograd-aware
    when the function is marked @grad, a plain call otherwise."""

    def __init__(self, module, name, meta=None):
        meta = meta or _describe(module)
        info = meta["functions"].get(name)
        if info is None:
            raise AttributeError(
                f"module '{meta['module']}' has no function '{name}'")
        self.module = module
        self.name = name
        self.__name__ = name
        self.__doc__ = getattr(module, name).__doc__
        self.param_names = [p["name"] for p in info["params"]]
        self.num_results = len(info["results"])
        self.wrt = info.get("wrt")
        self._plain = getattr(module, name)
        self._autograd = None
        if self.wrt is not None:
            self._autograd = self._make_autograd(meta, info)

    def _bind(self, args, kwargs):
        if not kwargs:
            return args
        values = list(args) + [None] * (len(self.param_names) - len(args))
        for key, value in kwargs.items():
            if key not in self.param_names:
                raise TypeError(
                    f"{self.name}() got an unexpected keyword argument "
                    f"'{key}'")
            values[self.param_names.index(key)] = value
        return tuple(values)

    def __call__(self, *args, **kwargs):
        args = self._bind(args, kwargs)
        needs_grad = self._autograd is not None and torch.is_grad_enabled() \
            and any(isinstance(a, torch.Tensor) and a.requires_grad
                    for a in args)
        if not needs_grad:
            return self._plain(*args)
        return self._autograd.apply(*args)

    def _make_autograd(self, meta, info):
        module, name, wrt = self.module, self.name, self.wrt
        num_params = len(info["params"])
        num_results = self.num_results
        floating = [r["dtype"] in ("f32", "f64") for r in info["results"]]
        split = bool(info.get("fwd")) and info["fwd"] in meta["functions"]
        fwd = getattr(module, info["fwd"]) if split else None
        bwd = getattr(module, info["bwd"]) if split else None
        plain = self._plain
        grad = getattr(module, info["grad"])
        # NAME_grad takes no cotangent when NAME returns one float scalar.
        seed_is_one = (num_results == 1 and floating[0]
                       and not info["results"][0]["shape"])

        def as_tuple(x):
            return x if isinstance(x, tuple) else (x,)

        def forward(ctx, *args):
            if split:
                outs = as_tuple(fwd(*args))
                results, residuals = outs[:num_results], outs[num_results:]
            else:
                results, residuals = as_tuple(plain(*args)), ()
            results = tuple(torch.as_tensor(r) for r in results)
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            ctx.save_for_backward(*tensors, *results)
            ctx.is_tensor = [isinstance(a, torch.Tensor) for a in args]
            ctx.others = [None if t else a
                          for a, t in zip(args, ctx.is_tensor)]
            ctx.residuals = residuals
            ctx.mark_non_differentiable(
                *[r for r, f in zip(results, floating) if not f])
            return results[0] if num_results == 1 else results

        @torch.autograd.function.once_differentiable
        def backward(ctx, *cotangents):
            saved = list(ctx.saved_tensors)
            args = []
            for is_tensor, other in zip(ctx.is_tensor, ctx.others):
                args.append(saved.pop(0) if is_tensor else other)
            results = saved
            cts = [_contiguous(c, r) for c, r in zip(cotangents, results)]
            if split:
                grads = bwd(*args, *results, *ctx.residuals, *cts)
            elif seed_is_one:
                grads = grad(*args)
            else:
                grads = grad(*args, *cts)
            grads = as_tuple(grads)
            if not split and seed_is_one:
                grads = tuple(g * cts[0] for g in grads)
            out = [None] * num_params
            for g, index in zip(grads, wrt):
                if ctx.is_tensor[index] and ctx.needs_input_grad[index]:
                    out[index] = torch.as_tensor(g)
            return tuple(out)

        return type(name, (torch.autograd.Function,), {
            "forward": staticmethod(forward),
            "backward": staticmethod(backward),
            "__doc__": self.__doc__,
        })

    @property
    def autograd_function(self):
        """The torch.autograd.Function subclass (None unless @grad)."""
        return self._autograd

    def __repr__(self):
        return f"<gradc function {self.module.__name__}.{self.name}>"


def wrap(module):
    """A namespace with one Function per function of `module` (NAME_grad,
    NAME_fwd and NAME_bwd included, as plain calls)."""
    meta = _describe(module)
    ns = types.SimpleNamespace()
    for name in meta["functions"]:
        setattr(ns, name, Function(module, name, meta))
    return ns


class Layer(torch.nn.Module):
    """An nn.Module around a gradc function: each keyword argument is a
    parameter of the function that becomes an nn.Parameter (a float tensor)
    or is passed as given (anything else); forward takes the remaining
    parameters, in order or by name."""

    def __init__(self, fn, **params):
        super().__init__()
        if not isinstance(fn, Function):
            raise TypeError("Layer takes a gradc_torch.Function")
        self.fn = fn
        for key in params:
            if key not in fn.param_names:
                raise TypeError(f"{fn.name}() has no parameter '{key}'")
        self._fixed = {}
        for key, value in params.items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.register_parameter(
                    key, value if isinstance(value, torch.nn.Parameter)
                    else torch.nn.Parameter(value))
            else:
                self._fixed[key] = value
        self._names = list(params)
        self.inputs = [p for p in fn.param_names if p not in params]

    def forward(self, *args, **kwargs):
        if len(args) > len(self.inputs):
            raise TypeError(f"{self.fn.name} layer takes {len(self.inputs)} "
                            f"inputs ({', '.join(self.inputs)}), got "
                            f"{len(args)}")
        values = dict(zip(self.inputs, args))
        values.update(kwargs)
        for key in self._names:
            values[key] = self._fixed[key] if key in self._fixed \
                else getattr(self, key)
        missing = [p for p in self.fn.param_names if p not in values]
        if missing:
            raise TypeError(f"{self.fn.name} layer is missing input "
                            f"'{missing[0]}'")
        return self.fn(*[values[p] for p in self.fn.param_names])

    def extra_repr(self):
        return f"{self.fn.module.__name__}.{self.fn.name}"
