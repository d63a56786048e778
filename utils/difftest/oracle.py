"""PyTorch float64 evaluation of generated programs (the independent
oracle of difftest.py). gen.TORCH_CONVENTIONS says which conventions it
implements where an op's value or derivative is a choice (kinks, ties,
NaN and infinities), each one gradc's documented choice."""
import torch

from gen import FLOATS, RULE_BODIES, Val

torch.set_num_threads(1)
F64 = torch.float64


def rnd(t, dt):
    """Rounds a float64 tensor to dt's precision (the cast is
    differentiable: its gradient is rounded the same way); wraps an int64
    tensor to 32 bits (docs/IR.md: i32 arithmetic wraps)."""
    if dt == "i32" and t.dtype == torch.int64:
        return torch.remainder(t + 2**31, 2**32) - 2**31
    if dt == "f32" and t.dtype == F64:
        return t.to(torch.float32).to(F64)
    return t


class Custom(torch.autograd.Function):
    """An op with an explicit backward: fwd(*xs) -> y and
    bwd(xs, y, dy) -> cotangents (None for no gradient)."""

    @staticmethod
    def forward(ctx, fwd, bwd, *xs):
        y = fwd(*xs)
        if any(y is x for x in xs):
            # identity returns its operand: torch would then save it as
            # that input, and differentiating the rule again would take
            # d y / d x = 1 instead of this rule (docs/Gradients.md: the
            # forward op keeps its rule at every order; seed 20261204
            # program 2466, `dy * y` on identity).
            y = y.clone()
        ctx.bwd = bwd
        ctx.save_for_backward(*xs, y)
        # No cotangent (a rule's structural zero upstream) stays None, not
        # a tensor of zeros that bwd would turn into 0 / 0 (seed 20261204
        # program 589: max's mask / ties at a NaN).
        ctx.set_materialize_grads(False)
        return y

    @staticmethod
    def backward(ctx, dy):
        *xs, y = ctx.saved_tensors
        if dy is None:
            return (None, None) + (None,) * len(xs)
        grads = ctx.bwd(xs, y, dy)
        return (None, None) + tuple(grads)


def custom(fwd, bwd, *xs):
    return Custom.apply(fwd, bwd, *xs)


def sign(x):
    return torch.where(torch.isnan(x), x, torch.sign(x))


def zero(t):
    return torch.zeros_like(t)


def op_abs(x):
    return custom(torch.abs, lambda xs, y, dy: [dy * sign(xs[0])], x)


def op_softplus(x):
    def fwd(x):
        return torch.clamp_min(x, 0) + torch.log1p(torch.exp(-torch.abs(x)))
    return custom(fwd, lambda xs, y, dy: [dy * torch.sigmoid(xs[0])], x)


def op_relu(x):
    return custom(torch.relu,
                  lambda xs, y, dy: [torch.where(xs[0] > 0, dy, zero(dy))], x)


def op_maxmin(x, y, is_max):
    x, y = torch.broadcast_tensors(x, y)

    def fwd(a, b):
        return torch.maximum(a, b) if is_max else torch.minimum(a, b)

    def bwd(xs, z, dz):
        a, b = xs
        tie = torch.where(a == b, 0.5 * dz, zero(dz))
        if is_max:
            da = torch.where(a > b, dz, tie)
            db = torch.where(b > a, dz, tie)
        else:
            da = torch.where(a < b, dz, tie)
            db = torch.where(b < a, dz, tie)
        return [da, db]
    return custom(fwd, bwd, x, y)


def op_div(x, y):
    x, y = torch.broadcast_tensors(x, y)
    return custom(lambda a, b: a / b,
                  lambda xs, z, dz: [dz / xs[1], -(dz * z) / xs[1]], x, y)


def op_pow(x, y, dt, y_zero=False):
    x, y = torch.broadcast_tensors(x, y)

    def bwd(xs, z, dz):
        a, b = xs
        # y - 1 is an op of the rule, rounded to the element type: in f32,
        # -0.99999994 - 1 is -2, and x^-2 is finite where x < 0. x^(y-1)
        # is gradc's pow again, so a second differentiation gives its
        # exponent the cotangent 0 where x <= 0 too (torch.pow's would be
        # dz * z * ln x, NaN for x < 0: seed 20261203 program 649).
        # A structural-zero exponent (zeros_like upstream) makes the rule's
        # `y * x^(y-1)` a structural zero too, no gradient: not 0 * x^-1,
        # which exp's backward turns into 0 * inf = NaN at x = inf
        # (seed 20261206 program 40, pow(exp(x), zeros_like(x))).
        da = None if y_zero else dz * (b * op_pow(a, rnd(b - 1, dt), dt))
        pos = a > 0
        la = torch.log(torch.where(pos, a, torch.ones_like(a)))
        # z is the float64 power; gradc's rule multiplies by its result,
        # rounded to the element type: 3^448 is inf in f32, and a zero
        # cotangent times it NaN (seed 20261212 program 653).
        db = torch.where(pos, (dz * rnd(z, dt)) * la, zero(dz))
        return [da, db]
    return custom(torch.pow, bwd, x, y)


def op_clip(x, lo, hi):
    x, lo, hi = torch.broadcast_tensors(x, lo, hi)

    def fwd(a, l, h):
        return torch.minimum(torch.maximum(a, l), h)

    def bwd(xs, z, dz):
        a, l, h = xs
        below, above, inv = a < l, a > h, l > h
        dx = torch.where(below, zero(dz), torch.where(above, zero(dz), dz))
        dl = torch.where(below, torch.where(inv, zero(dz), dz), zero(dz))
        dh = torch.where(above, dz, torch.where(inv, dz, zero(dz)))
        return [dx, dl, dh]
    return custom(fwd, bwd, x, lo, hi)


def reduced_count(x, axes):
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def op_max(x, axes, keepdims):
    axes = sorted(axes)

    def fwd(x):
        if reduced_count(x, axes) == 0:
            shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
            low = -2**31 if x.dtype == torch.int64 else float("-inf")
            return torch.full(shape, low, dtype=x.dtype)
        if not axes:
            return x.clone()
        return torch.amax(x, dim=axes, keepdim=True)

    def bwd(xs, y, dy):
        x = xs[0]
        mask = (x == y).to(x.dtype)
        ties = mask.sum(dim=axes, keepdim=True) if axes else mask
        return [mask * dy / ties]
    y = custom(fwd, bwd, x)
    return squeeze(y, axes, keepdims)


def op_mean(x, axes, keepdims):
    """sum / n. The backward broadcasts dy first and divides each element
    by n: the adjoint of x -> mean is dy -> [dy / n per element], and over
    an empty axis (n = 0) that is a map into no elements, whose own
    adjoint (a second differentiation) is exactly 0. Dividing before
    broadcasting (torch's mean) makes it sum(nothing) / 0 = NaN (seed
    20261204 program 7933)."""
    axes = sorted(axes)
    n = reduced_count(x, axes)

    def fwd(x):
        return x.sum(dim=axes, keepdim=True) / n

    def bwd(xs, y, dy):
        return [dy.expand(xs[0].shape) / n]
    return squeeze(custom(fwd, bwd, x), axes, keepdims)


def squeeze(y, axes, keepdims):
    if keepdims or not axes:
        return y
    for a in sorted(axes, reverse=True):
        y = y.squeeze(a)
    return y


def op_logsumexp(x, axes, keepdims):
    axes = sorted(axes)

    def shifted(x):
        if reduced_count(x, axes) == 0:
            shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
            m = torch.full(shape, float("-inf"), dtype=x.dtype)
        elif axes:
            m = torch.amax(x, dim=axes, keepdim=True).detach()
        else:
            m = x.detach()
        e = torch.exp(x - m)
        s = e.sum(dim=axes, keepdim=True) if axes else e
        return m, e, s

    def fwd(x):
        m, e, s = shifted(x)
        return torch.where(torch.isfinite(m), m + torch.log(s), m)

    def bwd(xs, y, dy):
        m, e, s = shifted(xs[0])
        return [dy * (e / s)]
    return squeeze(custom(fwd, bwd, x), axes, keepdims)


def op_sce(logits, labels, dt):
    """Per row logsumexp(logits) - logits[label]; the gradient is
    dloss * (softmax(logits) - one_hot(label)) as one product (Loss.cpp),
    not the sum of the two terms' gradients (which makes NaN of an
    infinite cotangent where the product is infinite). softmax and the
    difference are ops of the rule, each rounded to the element type: in
    f32 a probability of 1e-248 is 0, and an infinite cotangent times it
    is NaN, not -inf (seed 20261203 program 7172)."""
    def fwd(x):
        with torch.no_grad():
            lse = op_logsumexp(x, [x.dim() - 1], False)
        picked = torch.gather(x, -1, labels.unsqueeze(-1)).squeeze(-1)
        return lse - picked

    def bwd(xs, y, dy):
        x = xs[0]
        m = torch.amax(x, dim=-1, keepdim=True)
        e = torch.exp(x - m)
        soft = rnd(e / e.sum(dim=-1, keepdim=True), dt)
        hot = op_one_hot(labels, x.shape[-1])
        return [dy.unsqueeze(-1) * rnd(soft - hot, dt)]
    return custom(fwd, bwd, logits)


def op_one_hot(idx, depth):
    r = torch.arange(depth, dtype=torch.int64)
    return (idx.unsqueeze(-1) == r).to(F64)


UNARY_TORCH = {
    "neg": lambda x: -x, "exp": torch.exp, "log": torch.log,
    "sqrt": torch.sqrt, "abs": op_abs, "sign": lambda x: sign(x).detach(),
    "sin": torch.sin, "cos": torch.cos, "atan": torch.atan,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": op_relu, "softplus": op_softplus,
    "square": lambda x: x * x, "identity": lambda x: x,
    "stop_gradient": lambda x: x.detach(),
    "zeros_like": lambda x: torch.zeros_like(x).detach(),
    "ones_like": lambda x: torch.ones_like(x).detach(),
}
BINARY_TORCH = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y, "div": op_div,
    "maximum": lambda x, y: op_maxmin(x, y, True),
    "minimum": lambda x, y: op_maxmin(x, y, False),
    "less": torch.lt, "less_equal": torch.le, "greater": torch.gt,
    "greater_equal": torch.ge, "equal": torch.eq, "not_equal": torch.ne,
    "matmul": torch.matmul,
}


# Structural zeros (docs/Passes.md, "simplify"): the result of zeros_like,
# and of these ops when the named operands are structural zeros, is zero
# whatever the other operands hold (inf * zeros_like(x) is 0, not NaN;
# mean over nothing of zeros is 0, not NaN). `simplify` runs by default,
# so this is what every backend computes; an op with an @override rule is
# left alone.
ZERO_IF_FIRST = {"stop_gradient", "neg", "abs", "sqrt", "sign", "sin", "tanh",
                 "relu", "square", "sum", "mean", "max", "transpose",
                 "reshape", "broadcast_to", "unstack", "identity"}
ZERO_IF_BOTH = {"add", "sub", "maximum", "minimum"}
ZERO_IF_EITHER = {"mul", "matmul"}


def structural_zero(s, zeros, overridden):
    if overridden:
        return False
    if s.op == "zeros_like":
        return True

    def z(a):
        if isinstance(a, list):
            return all(z(v) for v in a)
        return isinstance(a, Val) and a.name in zeros
    args = s.args
    if s.op in ZERO_IF_FIRST:
        return z(args[0])
    if s.op in ZERO_IF_BOTH:
        return z(args[0]) and z(args[1])
    if s.op in ZERO_IF_EITHER:
        return z(args[0]) or z(args[1])
    if s.op == "div":
        return z(args[0])
    if s.op == "select":
        return z(args[1]) and z(args[2])
    if s.op in ("stack", "concat"):
        return z(args[0])
    return False


# Relative size of the perturbation of each op's result in a noisy run
# (run_call's `noise`): one unit in the last place of the element type.
ULP = {"f32": 2.0 ** -23, "f64": 2.0 ** -52}


class Evaluator:
    def __init__(self, prog, sizes, noise=None):
        self.prog, self.sizes = prog, sizes
        # None, or a torch.Generator: every float op's result is then
        # multiplied by 1 + ULP * r, r = +-1 drawn per element.
        self.noise = noise

    def perturb(self, y, dt):
        if self.noise is None or dt not in ULP or \
                not torch.is_floating_point(y) or y.numel() == 0:
            return y
        r = torch.randint(0, 2, y.shape, generator=self.noise)
        return y * (1 + ULP[dt] * (2 * r - 1).to(F64))

    def dim(self, d):
        return self.sizes[d] if isinstance(d, str) else d

    def use(self, env, v):
        """One use of a value. gradc gives each use its own cotangent in
        the element type and adds the uses' cotangents with the element
        type's `add` (docs/IR.md, "Numbers"), so an f32 use rounds its
        cotangent to f32 before autograd sums it in float64: two
        cotangents that overflow to +inf and -inf make NaN, as in gradc,
        not the float64 difference (seed 20261205 program 271)."""
        t = env[v.name]
        if v.dt == "f32" and torch.is_tensor(t) and t.requires_grad:
            return rnd(t, "f32")
        return t

    def value(self, env, a, dt):
        if isinstance(a, Val):
            return self.use(env, a)
        if isinstance(a, list):
            return [self.use(env, v) for v in a]
        if dt == "i32":
            return torch.tensor(int(a[1]), dtype=torch.int64)
        return rnd(torch.tensor(float(a[1]), dtype=F64), dt)

    def plain_op(self, s, xs, dt, zeros=()):
        op, at = s.op, s.attrs
        if op in UNARY_TORCH:
            return UNARY_TORCH[op](xs[0])
        if op == "pow":
            exponent = s.args[1]
            return op_pow(xs[0], xs[1], dt,
                          isinstance(exponent, Val) and exponent.name in zeros)
        if op in BINARY_TORCH:
            return BINARY_TORCH[op](xs[0], xs[1])
        if op == "select":
            return torch.where(xs[0], xs[1], xs[2])
        if op == "clip":
            return op_clip(*xs)
        if op in ("sum", "mean", "max", "logsumexp"):
            x = xs[0]
            rank = x.dim()
            ax = at.get("axis")
            if ax is None:
                axes = list(range(rank))
            else:
                ax = ax if isinstance(ax, list) else [ax]
                axes = sorted(a % rank for a in ax)
            kd = at.get("keepdims", False)
            if op == "max":
                return op_max(x, axes, kd)
            if op == "logsumexp":
                return op_logsumexp(x, axes, kd)
            if not axes:
                return x * 1
            if op == "sum":
                return x.sum(dim=axes, keepdim=kd)
            return op_mean(x, axes, kd)
        if op in ("softmax", "log_softmax"):
            ax = at.get("axis", -1)
            f = torch.softmax if op == "softmax" else torch.log_softmax
            return f(xs[0], dim=ax)
        if op == "transpose":
            perm = at.get("perm", list(reversed(range(xs[0].dim()))))
            return xs[0].permute(perm)
        if op == "reshape":
            # The statement's type, not the attribute: torch cannot infer
            # a -1 among zero elements.
            return xs[0].reshape([self.dim(d) for d in s.targets[0].shape])
        if op == "broadcast_to":
            return torch.broadcast_to(xs[0],
                                      [self.dim(d) for d in at["shape"]])
        if op == "stack":
            return torch.stack(xs[0], dim=at.get("axis", 0))
        if op == "concat":
            return torch.cat(xs[0], dim=at.get("axis", 0))
        if op == "unstack":
            return list(torch.unbind(xs[0], dim=at.get("axis", 0)))
        if op == "softmax_cross_entropy":
            return op_sce(xs[0], xs[1], dt)
        if op == "one_hot":
            return op_one_hot(xs[0], self.dim(at["depth"]))
        raise ValueError("no torch translation of " + op)

    def overridden(self, s, rule, xs, dt, zeros=()):
        """The op of s with rule's cotangents. A rule is inlined where it
        is used, so an operand that is a structural zero is one in the
        rule's body too: `dz * x` is zero when x is."""
        if rule.kind == "first_only":
            def fwd(*parts):
                return self.plain_op(s, [list(parts)], dt)

            def bwd(parts, y, dy):
                # zeros_like(parts[1]): a structural zero, no gradient.
                return [torch.unbind(dy, 0)[0], None]
            return custom(fwd, bwd, *xs[0])
        body = RULE_BODIES[rule.kind][1]
        operands = xs if rule.arity > 1 else xs[:1]

        def fwd(*ops):
            with torch.no_grad():
                return self.plain_op(s, list(ops), dt)

        zero_in = [isinstance(a, Val) and a.name in zeros for a in s.args]

        def bwd(ins, y, dy):
            grads = body(ins, y, dy)
            if rule.kind == "swap":  # (dz * y, dz * x)
                grads = [None if zero_in[1 - i] else g
                         for i, g in enumerate(grads)]
            # None: a structural zero (zeros_like in the rule, or dz * x
            # of a zero x), which contributes nothing, not even 0 * inf.
            return [None if g is None else rnd(g, dt) for g in grads]
        return custom(fwd, bwd, *operands)

    def stmt(self, f, s, env):
        dt = f.dt
        if s.kind == "index":
            env[s.targets[0].name] = env[s.args[0].name][s.args[1]]
            zeros = env.setdefault("__zeros__", set())
            if s.args[0].name in zeros:
                zeros.add(s.targets[0].name)
            return
        if s.kind == "gradcall":
            self.grad_call(s, env, dt)
            return
        if s.kind == "call":
            outs = self.call(s.op, [self.value(env, a, dt) for a in s.args])
            for t, v in zip(s.targets, outs):
                env[t.name] = v
            return
        xs = [self.value(env, a, dt) for a in s.args]
        rule = s.override.get(s.op) or f.fn_override.get(s.op)
        zeros = env.setdefault("__zeros__", set())
        if rule is not None:
            y = self.overridden(s, rule, xs, dt, zeros)
        else:
            y = self.plain_op(s, xs, dt, zeros)
        t = s.targets[0]
        if structural_zero(s, zeros, rule is not None):
            zeros.add(t.name)
            if isinstance(y, list):
                y = [torch.zeros_like(v).detach() for v in y]
            else:
                y = torch.zeros_like(y).detach()
        if isinstance(y, list):
            env[t.name] = [self.perturb(rnd(v, dt), dt) for v in y]
        elif t.name in zeros:
            env[t.name] = rnd(y, dt)
        else:
            env[t.name] = self.perturb(rnd(y, dt), t.dt) \
                if t.dt in FLOATS + ("i32",) else y

    def grad_call(self, s, env, dt):
        """`let (g0, ...) = f_grad(params, cotangents)`, differentiable
        again (create_graph)."""
        f = s.op
        args = [self.value(env, a, dt) for a in s.args]
        n = len(f.params)
        xs, cots = args[:n], args[n:]
        wrt = [f.params.index(q) for q in f.grad_params()]
        for i in wrt:
            if not xs[i].requires_grad:
                xs[i] = xs[i].detach().requires_grad_(True)
        outs = self.call(f, xs)
        if f.scalar_loss():
            cots = [torch.ones((), dtype=F64)]
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        inputs = [xs[i] for i in wrt]
        grads = [None] * len(inputs)
        if pairs:
            grads = torch.autograd.grad([o for o, _ in pairs], inputs,
                                        [c for _, c in pairs],
                                        create_graph=True, allow_unused=True)
        for t, g, x in zip(s.targets, grads, inputs):
            env[t.name] = rnd(g if g is not None else torch.zeros_like(x),
                              dt)

    def body(self, f, args):
        env = {p.name: a for p, a in zip(f.params, args)}
        for s in f.stmts:
            self.stmt(f, s, env)
        return [env[v.name] for v in f.results], env

    def call(self, f, args):
        if f.custom is None:
            return self.body(f, args)[0]
        # One primitive: the body forward, the rule or grad block backward.
        ev = self

        def fwd(*xs):
            with torch.no_grad():
                return ev.body(f, list(xs))[0][0]

        def bwd(xs, y, dy):
            if f.custom[0] == "rule":
                body = RULE_BODIES[f.custom[1].kind][1]
                return [rnd(g, f.dt) for g in body(list(xs), y, dy)]
            _, env = ev.body(f, list(xs))
            text = f.custom[1]
            if text == "dy":
                g = dy
            elif text == "0.5 * dy":
                g = 0.5 * dy
            elif text == "-dy":
                g = -dy
            elif text == "dy * cos(a0)":
                g = dy * rnd(torch.cos(xs[0]), f.dt)
            else:
                g = dy * env[text.split(" * ")[1]]
            return [rnd(g, f.dt)]
        return [custom(fwd, bwd, *args)]


def to_tensor(value, dt):
    if dt == "i32":
        return torch.tensor(value, dtype=torch.int64)
    if dt == "bool":
        return torch.tensor(value, dtype=torch.bool)
    return rnd(torch.tensor(value, dtype=F64), dt)


def run_call(prog, call, noise=None):
    """Evaluates a call (gen.Call); returns a list of numpy arrays (one per
    result line). With `noise` (a seed), every float op's result is
    perturbed by one unit in the last place, up or down at random: the
    program's own sensitivity to rounding (see conditioning)."""
    f = prog.main
    gen = None
    if noise is not None:
        gen = torch.Generator()
        gen.manual_seed(noise)
    ev = Evaluator(prog, call.sizes, gen)
    args = [to_tensor(v, p.dt) for v, p in zip(call.values, f.params)]
    wrt = f.grad_params() if call.grad else []
    for p in wrt:
        i = f.params.index(p)
        args[i] = args[i].clone().requires_grad_(True)
    with torch.enable_grad():
        outs = ev.call(f, args)
        if not call.grad:
            return [o.detach().numpy() for o in outs]
        if f.scalar_loss():
            cots = [torch.ones((), dtype=F64)]
        else:
            cots = [to_tensor(v, o.dt) for v, o in
                    zip(call.cotangents, f.results)]
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        inputs = [args[f.params.index(p)] for p in wrt]
        if pairs:
            grads = torch.autograd.grad([o for o, _ in pairs],
                                        inputs, [c for _, c in pairs],
                                        allow_unused=True)
        else:
            grads = [None] * len(inputs)
    return [(g if g is not None else torch.zeros_like(x)).detach().numpy()
            for g, x in zip(grads, inputs)]


def conditioning(prog, call, runs=4):
    """How far each result element moves when every op is rounded one unit
    in the last place up or down (Monte Carlo arithmetic, `runs` seeds):
    per result line, a numpy array of the largest move, inf where a
    perturbed run is not finite where the exact one is. An ill-conditioned
    program (sin(exp(x)) at large x, 10^exp(exp(x)): the relative
    condition number is |x f'(x) / f(x)|, in the thousands there) gives
    two correct implementations results this far apart, whose differences
    are one rounding here and there (a libm's last bit, a fused op)."""
    import numpy
    base = run_call(prog, call)
    out = [numpy.zeros(numpy.shape(b)) for b in base]
    for k in range(runs):
        for i, (b, p) in enumerate(zip(base, run_call(prog, call, k + 1))):
            b = numpy.asarray(b, dtype=float)
            p = numpy.asarray(p, dtype=float)
            with numpy.errstate(invalid="ignore"):
                move = numpy.abs(p - b)
            same = (p == b) | (numpy.isnan(p) & numpy.isnan(b))
            move = numpy.where(same, 0.0, move)
            move = numpy.where(numpy.isnan(move), numpy.inf, move)
            out[i] = numpy.maximum(out[i], move)
    return out
