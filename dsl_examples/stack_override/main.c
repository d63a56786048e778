/*===- main.c - The stack override, called from C ------------------------===//
//
// The seed program of gradc (stack_override.grad) seen from a C program:
// gradc_add_module(... BACKEND llvm) compiled the module to an object file,
// and the generated `stack_override.h` declares its C ABI. Each function
// takes its inputs, then one pointer per output, and returns a status.
//
// y = stack([x, x]) is a 2 x 2 matrix whose two rows are copies of x, so
// with the cotangent dy = [[3, 4], [6, 8]] the built-in rule gives x the
// sum of the rows, [9, 12], while the rule first_only gives it only the
// first row, [3, 4].
//
//===----------------------------------------------------------------------===*/

#include "stack_override.h"

#include <stdio.h>

static void print2(const char *what, const float v[2]) {
  printf("%-44s [%g, %g]\n", what, v[0], v[1]);
}

int main(void) {
  const float x[2] = {1, 2};
  const float dy[2 * 2] = {3, 4, 6, 8};
  float y[2 * 2];
  float dx[2];

  /* The forward function: one output, written through `out`. */
  if (stack_override_synth(x, y) != GRADC_OK)
    return 1;
  printf("synth([1, 2])                                [[%g, %g], [%g, %g]]\n",
         y[0], y[1], y[2], y[3]);

  /* synth does not return a scalar, so synth_grad takes one cotangent. */
  if (stack_override_synth_grad(x, dy, dx) != GRADC_OK)
    return 1;
  print2("synth_grad, @override(stack = first_only):", dx);

  if (stack_override_plain_grad(x, dy, dx) != GRADC_OK)
    return 1;
  print2("plain_grad, the built-in rule:", dx);
  return 0;
}
