//===- lstm.cpp - LSTM: ADBench's LSTM objective --------------------------===//
//
// L layers of B units over T steps (ADBench's layout: main[i][0] the
// weights, main[i][1] the biases of layer i, rows forget, input, output,
// change; extra the input scale, output scale and output bias). Per step
// and layer, elementwise, with x the input from below and (h, c) the
// layer's state:
//
//   f = σ(x w0 + b0), g = σ(h w1 + b1), o = σ(x w2 + b2), u = tanh(h w3 + b3)
//   c' = c f + g u,  h' = o tanh(c')
//
// and on top ŷ = h'_top e1 + e2, y = ŷ - log(2 + Σ e^ŷ), score += gold · y;
// the loss is -score / (T B). Its gradient is the reverse sweep: with
// s = -1/(T B), dŷ = s gold - s (Σ gold) e^ŷ / (2 + Σ e^ŷ), then per layer
// from the top: dh' (from above plus from the next step), dc' = dc_next +
// dh' o (1 - tanh²c'), and the gates' derivatives, which give dw, db, the
// input's dx (the layer below's dh') and this layer's dh and dc for the
// step before.
//
// The expert's code keeps a tape of the gates (f, g, o, u, tanh c') and of
// each layer's inputs (x, h, c) per step and layer, in scratch memory kept
// across calls, and runs B-wide loops that the compiler vectorises.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "lstm_cpp.h"
#ifndef BENCH_NO_LLVM
#include "lstm_llvm.h"
#endif

namespace {

struct Lstm {
  int64_t l, b, t;
  const float *main, *extra, *state, *xs, *golds;
  hand::Arena arena;

  // Tape slots per (step, layer), each B floats.
  enum { X, H, C, F, G, O, U, TC, Slots };

  template <bool Grad>
  float run(float *GRADC_RESTRICT dmain, float *GRADC_RESTRICT dextra) {
    const int64_t per = Slots * b;
    float *tape = arena.get(0, Grad ? t * l * per : l * per);
    float *hs = arena.get(1, l * b), *cs = arena.get(2, l * b);
    float *eY = arena.get(3, Grad ? t * b : b); // e^ŷ per step
    float *sums = arena.get(4, Grad ? t : 1);   // 2 + Σ e^ŷ per step
    for (int64_t i = 0; i < l; ++i) {
      std::memcpy(hs + i * b, state + (2 * i) * b, sizeof(float) * b);
      std::memcpy(cs + i * b, state + (2 * i + 1) * b, sizeof(float) * b);
    }
    const float *e0 = extra, *e1 = extra + b, *e2 = extra + 2 * b;
    double score = 0;
    for (int64_t s = 0; s < t; ++s) {
      const float *in = nullptr;
      for (int64_t i = 0; i < l; ++i) {
        float *GRADC_RESTRICT r = tape + ((Grad ? s * l : 0) + i) * per;
        const float *w = main + i * 8 * b, *bias = w + 4 * b;
        float *GRADC_RESTRICT h = hs + i * b, *GRADC_RESTRICT c = cs + i * b;
        float *GRADC_RESTRICT xr = r + X * b;
        if (i == 0)
          for (int64_t j = 0; j < b; ++j)
            xr[j] = xs[s * b + j] * e0[j];
        else
          std::memcpy(xr, in, sizeof(float) * b);
        // One loop per gate, each a vectorisable map over the B units.
        float *GRADC_RESTRICT f = r + F * b, *GRADC_RESTRICT g = r + G * b;
        float *GRADC_RESTRICT o = r + O * b, *GRADC_RESTRICT u = r + U * b;
        float *GRADC_RESTRICT tc = r + TC * b;
        std::memcpy(r + H * b, h, sizeof(float) * b);
        std::memcpy(r + C * b, c, sizeof(float) * b);
        for (int64_t j = 0; j < b; ++j)
          f[j] = gradc::sigmoid(xr[j] * w[j] + bias[j]);
        for (int64_t j = 0; j < b; ++j)
          g[j] = gradc::sigmoid(h[j] * w[b + j] + bias[b + j]);
        for (int64_t j = 0; j < b; ++j)
          o[j] = gradc::sigmoid(xr[j] * w[2 * b + j] + bias[2 * b + j]);
        for (int64_t j = 0; j < b; ++j)
          u[j] = gradc::tanh(h[j] * w[3 * b + j] + bias[3 * b + j]);
        for (int64_t j = 0; j < b; ++j)
          tc[j] = gradc::tanh(c[j] * f[j] + g[j] * u[j]);
        for (int64_t j = 0; j < b; ++j) {
          c[j] = c[j] * f[j] + g[j] * u[j];
          h[j] = o[j] * tc[j];
        }
        in = h;
      }
      float *ey = eY + (Grad ? s * b : 0);
      float sum = 2;
      for (int64_t j = 0; j < b; ++j) {
        ey[j] = gradc::exp(in[j] * e1[j] + e2[j]);
        sum += ey[j];
      }
      sums[Grad ? s : 0] = sum;
      float lg = gradc::log(sum), part = 0;
      for (int64_t j = 0; j < b; ++j)
        part += golds[s * b + j] * (in[j] * e1[j] + e2[j] - lg);
      score += part;
    }
    const float scale = -1.0f / float(t * b);
    if (!Grad)
      return float(score * scale);

    // The reverse sweep; dh and dc carry each layer's state back a step.
    std::memset(dmain, 0, sizeof(float) * l * 8 * b);
    std::memset(dextra, 0, sizeof(float) * 3 * b);
    float *dh = arena.get(5, l * b), *dc = arena.get(6, l * b);
    float *dtop = arena.get(7, b);
    std::memset(dh, 0, sizeof(float) * l * b);
    std::memset(dc, 0, sizeof(float) * l * b);
    float *de0 = dextra, *de1 = dextra + b, *de2 = dextra + 2 * b;
    for (int64_t s = t - 1; s >= 0; --s) {
      const float *gold = golds + s * b, *ey = eY + s * b;
      float gsum = 0;
      for (int64_t j = 0; j < b; ++j)
        gsum += gold[j];
      float k = scale * gsum / sums[s];
      // h'_top of this step is the next layer's x in the tape, or, for the
      // top layer, o tanh c'.
      const float *top = tape + (s * l + l - 1) * per;
      for (int64_t j = 0; j < b; ++j) {
        float dy = scale * gold[j] - k * ey[j];
        float htop = top[O * b + j] * top[TC * b + j];
        de1[j] += dy * htop;
        de2[j] += dy;
        dtop[j] = dy * e1[j];
      }
      for (int64_t i = l - 1; i >= 0; --i) {
        const float *r = tape + (s * l + i) * per;
        const float *w = main + i * 8 * b;
        float *GRADC_RESTRICT dw = dmain + i * 8 * b, *db = dw + 4 * b;
        float *GRADC_RESTRICT dhi = dh + i * b,
                              *GRADC_RESTRICT dci = dc + i * b;
        for (int64_t j = 0; j < b; ++j) {
          float dhn = dtop[j] + dhi[j];
          float o = r[O * b + j], tc = r[TC * b + j];
          float f = r[F * b + j], g = r[G * b + j], u = r[U * b + j];
          float x = r[X * b + j], h = r[H * b + j];
          float dcn = dci[j] + dhn * o * (1 - tc * tc);
          float p0 = dcn * r[C * b + j] * f * (1 - f);
          float p1 = dcn * u * g * (1 - g);
          float p2 = dhn * tc * o * (1 - o);
          float p3 = dcn * g * (1 - u * u);
          dw[j] += p0 * x;
          dw[b + j] += p1 * h;
          dw[2 * b + j] += p2 * x;
          dw[3 * b + j] += p3 * h;
          db[j] += p0;
          db[b + j] += p1;
          db[2 * b + j] += p2;
          db[3 * b + j] += p3;
          dci[j] = dcn * f;
          dhi[j] = p1 * w[b + j] + p3 * w[3 * b + j];
          dtop[j] = p0 * w[j] + p2 * w[2 * b + j]; // dx: the layer below
        }
      }
      for (int64_t j = 0; j < b; ++j)
        de0[j] += dtop[j] * xs[s * b + j];
    }
    return float(score * scale);
  }
};

} // namespace

int main(int argc, char **argv) {
  bench::Bench bench(argc, argv);
  const int64_t L = bench.size(0), C = bench.size(1), B = bench.size(2);
  const int64_t T = C - 1; // ADBench's c characters: c - 1 predictions
  auto main = bench.load<float>("main", L * 8 * B);
  auto extra = bench.load<float>("extra", 3 * B);
  auto state = bench.load<float>("state", L * 2 * B);
  auto xs = bench.load<float>("xs", T * B);
  auto golds = bench.load<float>("golds", T * B);
  Lstm hand{
      L, B, T, main.data(), extra.data(), state.data(), xs.data(), golds.data(),
      {}};
  auto outs = bench::makeResults({size_t(L * 8 * B), size_t(3 * B)});
  bench.add(
      "hand_fwd",
      [&] {
        outs[0].value = hand.run<false>(nullptr, nullptr);
        return 0;
      },
      outs[0].outputs(true, false));
  bench.add(
      "hand_vg",
      [&] {
        outs[1].value = hand.run<true>(outs[1][0], outs[1][1]);
        return 0;
      },
      outs[1].outputs(true, true));
#define LSTM_ARGS                                                              \
  L, B, T, main.data(), extra.data(), state.data(), xs.data(), golds.data()
#define GRADC_IMPLS(M, base)                                                   \
  bench.add(                                                                   \
      #M "_fwd", [&] { return M##_lstm(LSTM_ARGS, &outs[base].value); },       \
      outs[base].outputs(true, false));                                        \
  bench.add(                                                                   \
      #M "_grad",                                                              \
      [&] {                                                                    \
        return M##_lstm_grad(LSTM_ARGS, outs[base + 1][0], outs[base + 1][1]); \
      },                                                                       \
      outs[base + 1].outputs(false, true));                                    \
  bench.add(                                                                   \
      #M "_vg",                                                                \
      [&] {                                                                    \
        return M##_lstm_value_and_grad(LSTM_ARGS, &outs[base + 2].value,       \
                                       outs[base + 2][0], outs[base + 2][1]);  \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(lstm_cpp, 2)
#ifndef BENCH_NO_LLVM
  GRADC_IMPLS(lstm_llvm, 5)
#endif
  return bench.run();
}
