//===- main.cpp - The answers to "how do I change an op's gradient?" ------===//
//
// Calls the three other seed programs through the C++ layer of their
// generated headers and prints the gradients that their comments promise,
// in the order of the TensorFlow answers they restate:
//
//   identity_overrides.grad  gradient_override_map on Identity (llvm backend)
//   custom_clip.grad         @tf.custom_gradient on a whole layer
//   gradient_reversal.grad   the stop_gradient identity and its uses
//
// The C++ layer takes gradc::TensorView arguments, binds the size name N
// from them, and returns the C function's status. Three modules link into
// one program: every symbol carries its module's name.
//
//===----------------------------------------------------------------------===//

#include "custom_clip.h"
#include "gradient_reversal.h"
#include "identity_overrides.h"

#include <cstdio>
#include <vector>

namespace {

using View = gradc::TensorView<const float>;
using OutView = gradc::TensorView<float>;

/// Prints a vector as the .grad comments write it.
void print(const char *what, const std::vector<float> &v) {
  std::printf("%-34s [", what);
  for (size_t i = 0; i < v.size(); ++i)
    std::printf(i ? ", %g" : "%g", v[i]);
  std::printf("]\n");
}

/// Checks a status; the examples pass valid shapes, so any error is a bug.
bool ok(int status) {
  if (status != GRADC_OK)
    std::printf("error: status %d\n", status);
  return status == GRADC_OK;
}

} // namespace

int main() {
  const std::vector<float> x = {3.0f}, dy = {1.0f};
  std::vector<float> dx(1);
  View xv(x.data(), {1}), dyv(dy.data(), {1});
  OutView dxv(dx.data(), {1});

  // gradient_override_map: the same identity, three gradients.
  if (!ok(identity_overrides::scaled_grad(xv, dyv, dxv)))
    return 1;
  print("identity_overrides scaled_grad", dx);
  if (!ok(identity_overrides::clipped_grad(xv, dyv, dxv)))
    return 1;
  print("identity_overrides clipped_grad", dx);
  if (!ok(identity_overrides::plain_grad(xv, dyv, dxv)))
    return 1;
  print("identity_overrides plain_grad", dx);

  // custom_gradient: a named rule and an inline grad block agree.
  if (!ok(custom_clip::clip_layer_grad(xv, dyv, dxv)))
    return 1;
  print("custom_clip clip_layer_grad", dx);
  if (!ok(custom_clip::clip_layer_inline_grad(xv, dyv, dxv)))
    return 1;
  print("custom_clip clip_layer_inline_grad", dx);
  // uses_layer returns a scalar, so its gradient takes no cotangent.
  if (!ok(custom_clip::uses_layer_grad(xv, dxv)))
    return 1;
  print("custom_clip uses_layer_grad", dx);

  // stop_gradient: forward x, backward l * dy.
  std::vector<float> y(1);
  if (!ok(gradient_reversal::scale_gradient(xv, 0.5f, {y.data(), {1}})))
    return 1;
  print("scale_gradient(x, 0.5)", y);
  if (!ok(gradient_reversal::scale_gradient_grad(xv, 0.5f, dyv, dxv)))
    return 1;
  print("scale_gradient_grad(x, 0.5)", dx);
  if (!ok(gradient_reversal::quarter_gradient_grad(xv, dyv, dxv)))
    return 1;
  print("quarter_gradient_grad", dx);

  // Gradient reversal at the start (p = 0) and the end (p = 1) of training.
  for (float p : {0.0f, 1.0f}) {
    float strength = 0;
    if (!ok(gradient_reversal::reversal_strength(p, strength)) ||
        !ok(gradient_reversal::reverse_gradient_grad(xv, p, dyv, dxv)))
      return 1;
    std::printf("p = %g: lambda %.6f, ", p, strength);
    print("reverse_gradient_grad", dx);
  }

  // The straight-through sign: forward sign(x), backward clip's gradient.
  const std::vector<float> xs = {-2.0f, -0.5f, 0.5f, 2.0f}, ones(4, 1.0f);
  std::vector<float> s(4), ds(4);
  if (!ok(gradient_reversal::straight_through_sign({xs.data(), {4}},
                                                   {s.data(), {4}})) ||
      !ok(gradient_reversal::straight_through_sign_grad(
          {xs.data(), {4}}, {ones.data(), {4}}, {ds.data(), {4}})))
    return 1;
  print("straight_through_sign", s);
  print("straight_through_sign_grad", ds);
  return 0;
}
