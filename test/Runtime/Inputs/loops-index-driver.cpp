// Calls test/Interp/take-index-errors.grad, compiled through the loop IR
// (gradc --emit=cpp --module-name=m), with indices in and
// out of range, and prints each status and result: an index out of range
// must return GRADC_ERROR_INDEX (2) before any read out of bounds, which
// AddressSanitizer would report. The buffers are exactly as large as the
// signature says, so an unchecked read or write would leave them.
#include "m.h"

#include <cstdio>
#include <memory>

int main() {
  // shifted: the loop reads x[t + 1] for t in 0..3, so x[3] at the end.
  auto x = std::make_unique<float[]>(3);
  for (int i = 0; i < 3; ++i)
    x[i] = float(i + 1);
  float s = 0;
  std::printf("shifted %d\n", m_shifted(x.get(), &s));
  std::printf("shifted_ok %d %g\n", m_shifted_ok(x.get(), &s), s);

  // gather: a 2 x 2 table, indices [1, -1] and [1, 2], then in range.
  auto table = std::make_unique<float[]>(4);
  for (int i = 0; i < 4; ++i)
    table[i] = float(i + 1);
  auto idx = std::make_unique<int32_t[]>(2);
  float y = 0;
  idx[0] = 1;
  idx[1] = -1;
  std::printf("gather %d\n", m_gather(2, 2, table.get(), idx.get(), &y));
  idx[1] = 2;
  auto d = std::make_unique<float[]>(4);
  std::printf("gather_grad %d\n",
              m_gather_grad(2, 2, table.get(), idx.get(), d.get()));
  idx[1] = 0;
  std::printf("gather %d %g\n", m_gather(2, 2, table.get(), idx.get(), &y),
              y);
  std::printf("gather_grad %d %g %g %g %g\n",
              m_gather_grad(2, 2, table.get(), idx.get(), d.get()), d[0],
              d[1], d[2], d[3]);

  // rows: x[t] for t in 0..M over an N x 2 table, N = 2 < M = 3 (x[t] is a
  // view of the row: its check must come before any read), then N = 3.
  auto m = std::make_unique<float[]>(3);
  for (int i = 0; i < 3; ++i)
    m[i] = float(i + 1);
  auto x2 = std::make_unique<float[]>(4), x3 = std::make_unique<float[]>(6);
  for (int i = 0; i < 6; ++i)
    x3[i] = float(i + 1);
  for (int i = 0; i < 4; ++i)
    x2[i] = x3[i];
  std::printf("rows %d\n", m_rows(2, 3, x2.get(), m.get(), &s));
  std::printf("rows %d %g\n", m_rows(3, 3, x3.get(), m.get(), &s), s);
  return 0;
}
