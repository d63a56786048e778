#!/usr/bin/env python3
"""The calls of test/Emit/llvm-narrow-matmul.grad: every function of it
on M x K operands of every shape below, with seeded values of full f32
mantissas (so that another order of the sums shows in the last bits)."""
import random

r = random.Random(15)


def mat(n, k):
    return [[r.uniform(-2, 2) for _ in range(k)] for _ in range(n)]


# M: fewer rows than a vector (the loops of the kernel), one vector, one
# more, neither a multiple of 8 nor of a block, a block of 64, several
# blocks; K: fewer than 8 (an untransposed a takes the loops), 8, with a
# rest of K % 8, one row.
SHAPES = [(1, 5), (7, 13), (8, 8), (9, 1), (9, 5), (37, 13), (64, 64),
          (100, 7), (130, 19)]
for m, k in SHAPES:
    for f, n in [("n1", 1), ("n2", 2), ("n3", 3), ("n15", 15), ("n16", 16),
                 ("n17", 17), ("d2", 2)]:
        print("# CALL: %s(%s, %s)" % (f, mat(m, k), mat(k, n)))
    print("# CALL: ta(%s, %s)" % (mat(k, m), mat(k, 2)))
    print("# CALL: tb(%s, %s)" % (mat(m, k), mat(3, k)))
    print("# CALL: both(%s, %s)" % (mat(k, m), mat(5, k)))
    print("# CALL: batched([%s, %s], [%s, %s])" %
          (mat(m, k), mat(m, k), mat(k, 3), mat(k, 3)))
    print("# CALL: layer_grad(%s, %s)" % (mat(m, k), mat(k, 2)))
