// A C++ program for llvm-object-link.test: it includes the header of
// `--emit=header` and links the object files of `--emit=obj`, calls the
// functions through the C ABI (and the header's checked C++ wrappers), and
// prints results in `gradc run`'s format and statuses by name.
#include "llvm_status.h"
#include "stack_override.h"

#include <cmath>
#include <cstdio>

static void print(const char *what, const float *v, int n) {
  std::printf("%s [", what);
  for (int i = 0; i < n; ++i)
    std::printf("%s%g", i ? ", " : "", v[i]);
  std::printf("]\n");
}

static const char *statusName(int s) {
  switch (s) {
  case GRADC_OK:
    return "GRADC_OK";
  case GRADC_ERROR_SIZE:
    return "GRADC_ERROR_SIZE";
  case GRADC_ERROR_INDEX:
    return "GRADC_ERROR_INDEX";
  case GRADC_ERROR_DIV_ZERO:
    return "GRADC_ERROR_DIV_ZERO";
  case GRADC_ERROR_ALLOC:
    return "GRADC_ERROR_ALLOC";
  }
  return "unknown";
}

int main() {
  // The seed example: synth_grad([1, 2], [[3, 4], [6, 8]]).
  float x[2] = {1, 2}, dy[4] = {3, 4, 6, 8}, dx[2] = {0, 0};
  int s = stack_override_synth_grad(x, dy, dx);
  std::printf("synth_grad %s\n", statusName(s));
  print("d_x", dx, 2);
  s = stack_override_plain_grad(x, dy, dx);
  print("plain d_x", dx, 2);
  float y[4];
  s = stack_override::synth(gradc::TensorView<const float>(x, {2}),
                            gradc::TensorView<float>(y, {2, 2}));
  std::printf("synth %s\n", statusName(s));
  print("y", y, 4);

  // Sizes and scalars: N = 2.
  float xs[4] = {0, 1, 2, -1}, w[2] = {1, 0.5f}, dxs[4], ds = 0, out = 0;
  s = llvm_status_scaled(2, xs, w, 3, &out);
  std::printf("scaled %s %.6g\n", statusName(s), out);
  s = llvm_status_scaled_grad(2, xs, w, 3, dxs, &ds);
  std::printf("scaled_grad %s\n", statusName(s));
  print("d_x", dxs, 4);
  std::printf("d_s %.6g\n", ds);

  // Every error status.
  s = llvm_status_scaled(-1, xs, w, 3, &out);
  std::printf("negative size: %s\n", statusName(s));
  int32_t a[3] = {7, -7, 1}, b[3] = {2, 2, 0}, q[3];
  std::printf("divide by zero: %s\n", statusName(llvm_status_divide(3, a, b, q)));
  b[2] = -1;
  s = llvm_status_divide(3, a, b, q);
  std::printf("divide: %s [%d, %d, %d]\n", statusName(s), q[0], q[1], q[2]);
  float logits[6] = {0, 0, 0, 1, 2, 3}, l[2];
  int32_t labels[2] = {0, 3};
  std::printf("bad label: %s\n",
              statusName(llvm_status_loss(2, logits, labels, l)));
  labels[1] = 2;
  s = llvm_status_loss(2, logits, labels, l);
  std::printf("loss %s [%.6g, %.6g]\n", statusName(s), l[0], l[1]);
  return 0;
}
