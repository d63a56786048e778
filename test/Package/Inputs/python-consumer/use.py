import math

import numpy as np

import model_cpp
import model_llvm

w = np.array([0, math.log(3)], np.float32)
t = np.array([1, -2], np.float32)
for m in (model_cpp, model_llvm):
    print(m.__name__, "loss %.4f" % m.loss(w, t),
          "d_w [%.4f, %.4f]" % tuple(m.loss_grad(w, t)))
    out, *res = m.loss_fwd(w, t)
    print(m.__name__, "bwd d_w [%.3f, %.3f]" % tuple(m.loss_bwd(w, t, out, *res, 2.0)))
try:
    model_llvm.loss(w, t[:1])
except ValueError as e:
    print("ValueError:", e)
