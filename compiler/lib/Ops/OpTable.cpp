//===- OpTable.cpp - The one table of built-in ops ------------------------===//
//
// One row per op of Ops.def: operands, attributes, differentiability and a
// function that checks operand types and computes result types. Shapes may
// contain size names; a size name is only known to equal itself, so
// broadcasting `N` against `M` is an error even though the two might be
// equal at run time (gradc prefers a clear static error to a run-time one).
//
//===----------------------------------------------------------------------===//

#include "gradc/Ops/OpTable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>
#include <numeric>

using namespace gradc;

namespace {

//===----------------------------------------------------------------------===//
// Helpers for the inference functions
//===----------------------------------------------------------------------===//

bool fail(OpTypeError &error, diag::ID id,
          std::initializer_list<std::string> args) {
  error.id = id;
  error.args.assign(args.begin(), args.end());
  return false;
}

/// Resolves a possibly negative axis against `rank`; false if out of range.
bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

bool checkFloat(llvm::StringRef op, const TensorType &t, OpTypeError &error) {
  if (isFloat(t.dtype))
    return true;
  return fail(error, diag::err_op_needs_float, {op.str(), t.str()});
}

bool checkNumeric(llvm::StringRef op, const TensorType &t, OpTypeError &error) {
  if (isNumeric(t.dtype))
    return true;
  return fail(error, diag::err_op_needs_numeric, {op.str(), t.str()});
}

bool checkSameDType(llvm::StringRef op, const TensorType &a,
                    const TensorType &b, OpTypeError &error) {
  if (a.dtype == b.dtype)
    return true;
  return fail(error, diag::err_op_dtype_mismatch, {op.str(), a.str(), b.str()});
}

/// Broadcasts every operand's shape together.
bool broadcastAll(llvm::StringRef op, llvm::ArrayRef<TensorType> operands,
                  Shape &result, OpTypeError &error) {
  result = operands.front().shape;
  for (const TensorType &t : operands.drop_front()) {
    std::optional<Shape> s = broadcastShapes(result, t.shape);
    if (!s)
      return fail(error, diag::err_op_broadcast,
                  {shapeStr(result), shapeStr(t.shape), op.str()});
    result = *s;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Inference functions, one per family of ops
//===----------------------------------------------------------------------===//

/// identity, stop_gradient, zeros_like, ones_like: any type, same result.
bool inferSameAny(llvm::ArrayRef<TensorType> ops, AttrList &,
                  llvm::SmallVectorImpl<TensorType> &results, OpTypeError &) {
  results.push_back(ops[0]);
  return true;
}

template <OpKind K>
bool inferSameFloat(llvm::ArrayRef<TensorType> ops, AttrList &,
                    llvm::SmallVectorImpl<TensorType> &results,
                    OpTypeError &error) {
  if (!checkFloat(getOpName(K), ops[0], error))
    return false;
  results.push_back(ops[0]);
  return true;
}

template <OpKind K>
bool inferSameNumeric(llvm::ArrayRef<TensorType> ops, AttrList &,
                      llvm::SmallVectorImpl<TensorType> &results,
                      OpTypeError &error) {
  if (!checkNumeric(getOpName(K), ops[0], error))
    return false;
  results.push_back(ops[0]);
  return true;
}

/// add, sub, mul, div, maximum, minimum (numeric) and pow (float).
template <OpKind K, bool FloatOnly>
bool inferArith(llvm::ArrayRef<TensorType> ops, AttrList &,
                llvm::SmallVectorImpl<TensorType> &results,
                OpTypeError &error) {
  llvm::StringRef name = getOpName(K);
  for (const TensorType &t : ops)
    if (FloatOnly ? !checkFloat(name, t, error) : !checkNumeric(name, t, error))
      return false;
  if (!checkSameDType(name, ops[0], ops[1], error))
    return false;
  Shape shape;
  if (!broadcastAll(name, ops, shape, error))
    return false;
  results.push_back(TensorType(ops[0].dtype, shape));
  return true;
}

/// less ... not_equal: same element types, a bool result. Ordering
/// comparisons need numbers; equality works on bool too.
template <OpKind K, bool Ordering>
bool inferCompare(llvm::ArrayRef<TensorType> ops, AttrList &,
                  llvm::SmallVectorImpl<TensorType> &results,
                  OpTypeError &error) {
  llvm::StringRef name = getOpName(K);
  if (Ordering && !checkNumeric(name, ops[0], error))
    return false;
  if (!checkSameDType(name, ops[0], ops[1], error))
    return false;
  Shape shape;
  if (!broadcastAll(name, ops, shape, error))
    return false;
  results.push_back(TensorType(DType::Bool, shape));
  return true;
}

bool inferSelect(llvm::ArrayRef<TensorType> ops, AttrList &,
                 llvm::SmallVectorImpl<TensorType> &results,
                 OpTypeError &error) {
  if (ops[0].dtype != DType::Bool)
    return fail(error, diag::err_op_select_cond, {ops[0].str()});
  if (!checkSameDType("select", ops[1], ops[2], error))
    return false;
  Shape shape;
  if (!broadcastAll("select", ops, shape, error))
    return false;
  results.push_back(TensorType(ops[1].dtype, shape));
  return true;
}

bool inferClip(llvm::ArrayRef<TensorType> ops, AttrList &,
               llvm::SmallVectorImpl<TensorType> &results, OpTypeError &error) {
  for (const TensorType &t : ops)
    if (!checkNumeric("clip", t, error))
      return false;
  if (!checkSameDType("clip", ops[0], ops[1], error) ||
      !checkSameDType("clip", ops[0], ops[2], error))
    return false;
  Shape shape;
  if (!broadcastAll("clip", ops, shape, error))
    return false;
  results.push_back(TensorType(ops[0].dtype, shape));
  return true;
}

/// Reads the `axis` attribute of a reduction into a sorted list of
/// non-negative axes; absent means every axis.
bool normalizeAxes(llvm::StringRef op, AttrList &attrs, int64_t rank,
                   OpTypeError &error) {
  std::vector<int64_t> axes;
  if (const AttrValue *v = attrs.find("axis")) {
    if (const int64_t *one = std::get_if<int64_t>(v))
      axes.push_back(*one);
    else if (const auto *many = std::get_if<std::vector<int64_t>>(v))
      axes = *many;
  } else {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t &a : axes) {
    int64_t original = a;
    if (!normalizeAxis(a, rank))
      return fail(error, diag::err_op_axis_range,
                  {std::to_string(original), op.str(), std::to_string(rank)});
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] == axes[i - 1])
      return fail(error, diag::err_op_axis_duplicate,
                  {std::to_string(axes[i]), op.str()});
  attrs.set("axis", axes);
  if (!attrs.has("keepdims"))
    attrs.set("keepdims", false);
  return true;
}

template <OpKind K, bool FloatOnly>
bool inferReduce(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                 llvm::SmallVectorImpl<TensorType> &results,
                 OpTypeError &error) {
  llvm::StringRef name = getOpName(K);
  if (FloatOnly ? !checkFloat(name, ops[0], error)
                : !checkNumeric(name, ops[0], error))
    return false;
  if (!normalizeAxes(name, attrs, ops[0].getRank(), error))
    return false;
  const std::vector<int64_t> &axes = attrs.getInts("axis");
  bool keepdims = attrs.getBool("keepdims");
  TensorType result(ops[0].dtype);
  for (unsigned i = 0; i < ops[0].getRank(); ++i) {
    bool reduced = llvm::is_contained(axes, int64_t(i));
    if (!reduced)
      result.shape.push_back(ops[0].shape[i]);
    else if (keepdims)
      result.shape.push_back(Dim::known(1));
  }
  results.push_back(result);
  return true;
}

/// softmax, log_softmax: one axis (default -1), same type.
template <OpKind K>
bool inferSoftmax(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                  llvm::SmallVectorImpl<TensorType> &results,
                  OpTypeError &error) {
  llvm::StringRef name = getOpName(K);
  if (!checkFloat(name, ops[0], error))
    return false;
  int64_t rank = ops[0].getRank();
  if (rank == 0)
    return fail(error, diag::err_op_rank, {name.str(), "1", ops[0].str()});
  int64_t axis = attrs.has("axis") ? attrs.getInt("axis") : -1;
  int64_t original = axis;
  if (!normalizeAxis(axis, rank))
    return fail(error, diag::err_op_axis_range,
                {std::to_string(original), name.str(), std::to_string(rank)});
  attrs.set("axis", axis);
  results.push_back(ops[0]);
  return true;
}

bool sameDim(const Dim &a, const Dim &b) { return a == b; }

/// NumPy matmul: vectors are promoted (and the added axis removed again),
/// batch dimensions broadcast.
bool inferMatMul(llvm::ArrayRef<TensorType> ops, AttrList &,
                 llvm::SmallVectorImpl<TensorType> &results,
                 OpTypeError &error) {
  const TensorType &a = ops[0], &b = ops[1];
  if (!checkNumeric("matmul", a, error) || !checkNumeric("matmul", b, error) ||
      !checkSameDType("matmul", a, b, error))
    return false;
  if (a.isScalar() || b.isScalar())
    return fail(error, diag::err_op_matmul_scalar,
                {(a.isScalar() ? a : b).str()});
  Shape as = a.shape, bs = b.shape;
  bool aVector = as.size() == 1, bVector = bs.size() == 1;
  if (aVector)
    as.insert(as.begin(), Dim::known(1));
  if (bVector)
    bs.push_back(Dim::known(1));
  const Dim &k1 = as[as.size() - 1], &k2 = bs[bs.size() - 2];
  if (!sameDim(k1, k2))
    return fail(error, diag::err_op_matmul_shapes,
                {shapeStr(a.shape), shapeStr(b.shape)});
  llvm::ArrayRef<Dim> aBatch = llvm::ArrayRef(as).drop_back(2);
  llvm::ArrayRef<Dim> bBatch = llvm::ArrayRef(bs).drop_back(2);
  std::optional<Shape> batch = broadcastShapes(aBatch, bBatch);
  if (!batch)
    return fail(error, diag::err_op_matmul_shapes,
                {shapeStr(a.shape), shapeStr(b.shape)});
  Shape shape = *batch;
  if (!aVector)
    shape.push_back(as[as.size() - 2]);
  if (!bVector)
    shape.push_back(bs[bs.size() - 1]);
  results.push_back(TensorType(a.dtype, shape));
  return true;
}

bool inferTranspose(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                    llvm::SmallVectorImpl<TensorType> &results,
                    OpTypeError &error) {
  int64_t rank = ops[0].getRank();
  std::vector<int64_t> perm;
  if (attrs.has("perm")) {
    perm = attrs.getInts("perm");
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  std::vector<int64_t> sorted = perm;
  for (int64_t &p : sorted)
    if (p < 0)
      p += rank;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    return fail(error, diag::err_op_perm, {attrValueStr(perm), ops[0].str()});
  for (int64_t &p : perm)
    if (p < 0)
      p += rank;
  attrs.set("perm", perm);
  TensorType result(ops[0].dtype);
  for (int64_t p : perm)
    result.shape.push_back(ops[0].shape[p]);
  results.push_back(result);
  return true;
}

/// An element count as a monomial: a known factor times a product of size
/// names, so that reshape can check `[N, 28, 28]` -> `[N, 784]` statically.
/// A zero is kept aside so that the factor of the other sizes, which
/// knownSizesFit bounds, never overflows.
struct Monomial {
  int64_t nonZero = 1;
  bool zero = false;
  std::map<std::string, int> names;

  void multiply(const Dim &d) {
    if (!d.isKnown())
      ++names[d.getName().str()];
    else if (d.getSize() == 0)
      zero = true;
    else if (__builtin_mul_overflow(nonZero, d.getSize(), &nonZero))
      nonZero = INT64_MAX; // only after an error reported elsewhere
  }
  int64_t factor() const { return zero ? 0 : nonZero; }
  bool operator==(const Monomial &o) const {
    return factor() == o.factor() && names == o.names;
  }
};

bool inferReshape(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                  llvm::SmallVectorImpl<TensorType> &results,
                  OpTypeError &error) {
  Shape target = attrs.getShape("shape");
  Monomial from, to;
  for (const Dim &d : ops[0].shape)
    from.multiply(d);
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].isKnown() && target[i].getSize() == -1) {
      if (inferred != -1)
        return fail(error, diag::err_op_reshape_infer,
                    {ops[0].str(), shapeStr(target)});
      inferred = i;
      continue;
    }
    if (target[i].isKnown() && target[i].getSize() < 0)
      return fail(error, diag::err_op_reshape_count,
                  {ops[0].str(), shapeStr(target)});
  }
  // A target too large to count is not compared by a wrapped count.
  if (!knownSizesFit(target))
    return fail(error, diag::err_op_result_too_large,
                {"reshape", TensorType(ops[0].dtype, target).str()});
  for (size_t i = 0; i < target.size(); ++i)
    if (int(i) != inferred)
      to.multiply(target[i]);
  if (inferred != -1) {
    // from = to * x: x must be a known size or a single size name.
    Monomial rest = from;
    for (auto &[name, count] : to.names) {
      if (rest.names[name] < count)
        return fail(error, diag::err_op_reshape_infer,
                    {ops[0].str(), shapeStr(target)});
      rest.names[name] -= count;
    }
    std::erase_if(rest.names, [](const auto &p) { return p.second == 0; });
    if (to.factor() == 0 || rest.factor() % to.factor() != 0)
      return fail(error, diag::err_op_reshape_infer,
                  {ops[0].str(), shapeStr(target)});
    int64_t factor = rest.factor() / to.factor();
    if (rest.names.empty())
      target[inferred] = Dim::known(factor);
    else if (factor == 1 && rest.names.size() == 1 &&
             rest.names.begin()->second == 1)
      target[inferred] = Dim::named(rest.names.begin()->first);
    else
      return fail(error, diag::err_op_reshape_infer,
                  {ops[0].str(), shapeStr(target)});
    to.multiply(target[inferred]);
  }
  if (!(from == to))
    return fail(error, diag::err_op_reshape_count,
                {ops[0].str(), shapeStr(target)});
  attrs.set("shape", target);
  results.push_back(TensorType(ops[0].dtype, target));
  return true;
}

bool inferBroadcastTo(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                      llvm::SmallVectorImpl<TensorType> &results,
                      OpTypeError &error) {
  const Shape &target = attrs.getShape("shape");
  std::optional<Shape> s = broadcastShapes(ops[0].shape, target);
  if (!s || *s != target)
    return fail(error, diag::err_op_broadcast_to,
                {ops[0].str(), shapeStr(target)});
  results.push_back(TensorType(ops[0].dtype, target));
  return true;
}

bool checkSameTypes(llvm::StringRef op, llvm::ArrayRef<TensorType> ops,
                    OpTypeError &error) {
  if (ops.empty())
    return fail(error, diag::err_op_empty_list, {op.str()});
  for (const TensorType &t : ops.drop_front())
    if (t != ops[0])
      return fail(error, diag::err_op_list_types,
                  {op.str(), ops[0].str(), t.str()});
  return true;
}

bool readAxis(llvm::StringRef op, AttrList &attrs, int64_t rank, int64_t &axis,
              OpTypeError &error) {
  axis = attrs.has("axis") ? attrs.getInt("axis") : 0;
  int64_t original = axis;
  if (!normalizeAxis(axis, rank))
    return fail(error, diag::err_op_axis_range,
                {std::to_string(original), op.str(), std::to_string(rank)});
  attrs.set("axis", axis);
  return true;
}

bool inferStack(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                llvm::SmallVectorImpl<TensorType> &results,
                OpTypeError &error) {
  if (!checkSameTypes("stack", ops, error))
    return false;
  int64_t axis;
  if (!readAxis("stack", attrs, ops[0].getRank() + 1, axis, error))
    return false;
  TensorType result = ops[0];
  result.shape.insert(result.shape.begin() + axis, Dim::known(ops.size()));
  results.push_back(result);
  return true;
}

bool inferUnstack(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                  llvm::SmallVectorImpl<TensorType> &results,
                  OpTypeError &error) {
  if (ops[0].isScalar())
    return fail(error, diag::err_op_rank, {"unstack", "1", ops[0].str()});
  int64_t axis;
  if (!readAxis("unstack", attrs, ops[0].getRank(), axis, error))
    return false;
  const Dim &d = ops[0].shape[axis];
  if (!d.isKnown())
    return fail(error, diag::err_op_unstack_named,
                {std::to_string(axis), d.getName().str()});
  // One result per slice: a bound keeps a type such as f32[100000000]
  // from exhausting memory while the program is only being checked.
  constexpr int64_t maxUnstackParts = 65536;
  if (d.getSize() > maxUnstackParts)
    return fail(error, diag::err_op_unstack_count,
                {std::to_string(d.getSize()), std::to_string(axis),
                 std::to_string(maxUnstackParts)});
  TensorType part = ops[0];
  part.shape.erase(part.shape.begin() + axis);
  results.append(d.getSize(), part);
  return true;
}

bool inferConcat(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                 llvm::SmallVectorImpl<TensorType> &results,
                 OpTypeError &error) {
  if (ops.empty())
    return fail(error, diag::err_op_empty_list, {"concat"});
  if (ops[0].isScalar())
    return fail(error, diag::err_op_rank, {"concat", "1", ops[0].str()});
  int64_t axis;
  if (!readAxis("concat", attrs, ops[0].getRank(), axis, error))
    return false;
  int64_t total = 0;
  for (const TensorType &t : ops) {
    if (!checkSameDType("concat", ops[0], t, error))
      return false;
    bool fits = t.getRank() == ops[0].getRank();
    for (unsigned i = 0; fits && i < t.getRank(); ++i)
      fits = i == axis || t.shape[i] == ops[0].shape[i];
    if (!fits)
      return fail(error, diag::err_op_concat_dims,
                  {ops[0].str(), t.str(), std::to_string(axis)});
    const Dim &d = t.shape[axis];
    if (!d.isKnown() && ops.size() > 1)
      return fail(error, diag::err_op_concat_named,
                  {std::to_string(axis), d.getName().str()});
    total += d.getSize();
  }
  TensorType result = ops[0];
  if (ops.size() > 1)
    result.shape[axis] = Dim::known(total);
  results.push_back(result);
  return true;
}

/// split(x, axis, sizes): the inverse of concat, made by differentiation.
bool inferSplit(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                llvm::SmallVectorImpl<TensorType> &results,
                OpTypeError &error) {
  if (ops[0].isScalar())
    return fail(error, diag::err_op_rank, {"split", "1", ops[0].str()});
  int64_t axis;
  if (!readAxis("split", attrs, ops[0].getRank(), axis, error))
    return false;
  const Shape &sizes = attrs.getShape("sizes");
  const Dim &whole = ops[0].shape[axis];
  if (sizes.size() == 1) {
    if (sizes[0] != whole)
      return fail(
          error, diag::err_op_split_sizes,
          {sizes[0].str(), std::to_string(axis), ops[0].str(), whole.str()});
  } else {
    int64_t total = 0;
    for (const Dim &d : sizes)
      total += d.isKnown() ? d.getSize() : 0;
    bool allKnown =
        llvm::all_of(sizes, [](const Dim &d) { return d.isKnown(); });
    if (!allKnown || !whole.isKnown() || total != whole.getSize())
      return fail(
          error, diag::err_op_split_sizes,
          {shapeStr(sizes), std::to_string(axis), ops[0].str(), whole.str()});
  }
  for (const Dim &d : sizes) {
    TensorType part = ops[0];
    part.shape[axis] = d;
    results.push_back(part);
  }
  return true;
}

/// Whether `part` elements from `start` can fit in an axis of `whole`
/// elements: false only when that is known to fail (size names are
/// compared when the program runs: docs/LanguageReference.md, "Slices").
bool sliceFits(int64_t start, const Dim &part, const Dim &whole) {
  if (start < 0 || (part.isKnown() && part.getSize() < 0))
    return false;
  if (part.isKnown() && whole.isKnown())
    return start + part.getSize() <= whole.getSize();
  if (part == whole)
    return start == 0;
  return true;
}

/// slice(x, axis, start, size) and pad(x, axis, start, size): the
/// `size` elements of x from `start` along `axis`, and its adjoint, zeros
/// of `size` along `axis` with x at `start`. The other axes are kept.
template <OpKind K>
bool inferSliceOrPad(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                     llvm::SmallVectorImpl<TensorType> &results,
                     OpTypeError &error) {
  llvm::StringRef name = getOpName(K);
  if (ops[0].isScalar())
    return fail(error, diag::err_op_rank, {name.str(), "1", ops[0].str()});
  int64_t axis;
  if (!readAxis(name, attrs, ops[0].getRank(), axis, error))
    return false;
  int64_t start = attrs.getInt("start");
  const Dim &size = attrs.getShape("size").front();
  const Dim &axisDim = ops[0].shape[axis];
  const Dim &part = K == OpKind::Slice ? size : axisDim;
  const Dim &whole = K == OpKind::Slice ? axisDim : size;
  if (!sliceFits(start, part, whole))
    return fail(error, diag::err_op_slice_range,
                {name.str(), part.str(), std::to_string(start),
                 std::to_string(axis),
                 K == OpKind::Slice ? ops[0].str() : "size " + whole.str()});
  TensorType result = ops[0];
  result.shape[axis] = size;
  results.push_back(result);
  return true;
}

/// take(table, indices, axis): table[..., indices[j...], ...] along
/// `axis`; the result replaces that axis by the shape of `indices` (a
/// scalar index drops it: `xs[t]` is take(xs, t, axis = 0)).
bool inferTake(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
               llvm::SmallVectorImpl<TensorType> &results, OpTypeError &error) {
  const TensorType &table = ops[0], &indices = ops[1];
  if (table.isScalar())
    return fail(error, diag::err_op_rank, {"take", "1", table.str()});
  if (indices.dtype != DType::I32)
    return fail(error, diag::err_op_indices, {"take", indices.str()});
  int64_t axis;
  if (!readAxis("take", attrs, table.getRank(), axis, error))
    return false;
  TensorType result(table.dtype);
  result.shape.append(table.shape.begin(), table.shape.begin() + axis);
  result.shape.append(indices.shape.begin(), indices.shape.end());
  result.shape.append(table.shape.begin() + axis + 1, table.shape.end());
  if (result.getRank() > maxRank)
    return fail(error, diag::err_op_result_rank,
                {"take", result.str(), std::to_string(result.getRank()),
                 std::to_string(maxRank)});
  results.push_back(result);
  return true;
}

/// scatter_add(src, indices, axis, size): the adjoint of take. Zeros with
/// `size` along `axis`, to which each slice of `src` is added at its
/// index: the axes of `indices` in src's shape become that one axis.
bool inferScatterAdd(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                     llvm::SmallVectorImpl<TensorType> &results,
                     OpTypeError &error) {
  const TensorType &src = ops[0], &indices = ops[1];
  if (indices.dtype != DType::I32)
    return fail(error, diag::err_op_indices, {"scatter_add", indices.str()});
  int64_t axis = attrs.has("axis") ? attrs.getInt("axis") : 0;
  int64_t n = indices.getRank();
  bool fits = axis >= 0 && axis + n <= int64_t(src.getRank());
  for (int64_t i = 0; fits && i < n; ++i)
    fits = src.shape[axis + i] == indices.shape[i];
  if (!fits)
    return fail(error, diag::err_op_broadcast,
                {src.str(), indices.str(), "scatter_add"});
  attrs.set("axis", axis);
  const Shape &size = attrs.getShape("size");
  TensorType result(src.dtype);
  result.shape.append(src.shape.begin(), src.shape.begin() + axis);
  result.shape.push_back(size[0]);
  result.shape.append(src.shape.begin() + axis + n, src.shape.end());
  results.push_back(result);
  return true;
}

bool inferOneHot(llvm::ArrayRef<TensorType> ops, AttrList &attrs,
                 llvm::SmallVectorImpl<TensorType> &results,
                 OpTypeError &error) {
  if (ops[0].dtype != DType::I32)
    return fail(error, diag::err_op_dtype_mismatch,
                {"one_hot", "i32", ops[0].str()});
  const Shape &depth = attrs.getShape("depth");
  if (depth.size() != 1 || (depth[0].isKnown() && depth[0].getSize() <= 0))
    return fail(error, diag::err_op_positive,
                {"depth", "one_hot", shapeStr(depth)});
  // f32 unless the IR asks for another float type: programs cannot write
  // `dtype`, but `gradc check` promotes whole modules to f64.
  DType dtype = DType::F32;
  if (attrs.has("dtype")) {
    std::optional<DType> t = parseDType(attrs.getString("dtype"));
    if (!t || !isFloat(*t))
      return fail(error, diag::err_op_needs_float,
                  {"one_hot", attrs.getString("dtype")});
    dtype = *t;
  }
  TensorType result(dtype, ops[0].shape);
  result.shape.push_back(depth[0]);
  results.push_back(result);
  return true;
}

bool inferSoftmaxCrossEntropy(llvm::ArrayRef<TensorType> ops, AttrList &,
                              llvm::SmallVectorImpl<TensorType> &results,
                              OpTypeError &error) {
  const TensorType &logits = ops[0], &labels = ops[1];
  if (!checkFloat("softmax_cross_entropy", logits, error))
    return false;
  if (logits.isScalar())
    return fail(error, diag::err_op_rank,
                {"softmax_cross_entropy", "1", logits.str()});
  Shape rows(logits.shape.begin(), logits.shape.end() - 1);
  if (labels.dtype != DType::I32 || labels.shape != rows)
    return fail(
        error, diag::err_op_labels,
        {rows.empty() ? "" : shapeStr(rows), logits.str(), labels.str()});
  results.push_back(TensorType(logits.dtype, rows));
  return true;
}

//===----------------------------------------------------------------------===//
// Scalar expansions: one result element from the operand elements at its
// position. The semantics of docs/IR.md, with its one NaN policy:
// `maximum`/`minimum`/`clip` propagate NaN (PrimOp::Max/Min), `relu` and
// `sign` keep a NaN, and no op turns a NaN into a number. Composite ops
// whose intermediate values would round differently in f32 (sigmoid,
// softplus) are gradc/Math.h functions of their own for f32 and expand
// into f64 primitives only for f64.
//===----------------------------------------------------------------------===//

using namespace gradc::sx;

ScalarNodePtr x0(ScalarType t) { return operand(0, t); }
ScalarNodePtr c(ScalarType t, double v) { return constant(t, v); }

/// A NaN stays itself; otherwise `rest`.
ScalarNodePtr keepNaN(ScalarType t, ScalarNodePtr rest) {
  if (!isFloatType(t))
    return rest;
  return select(prim(PrimOp::IsNaN, x0(t)), x0(t), std::move(rest));
}

// y = x (identity, stop_gradient).
ScalarNodePtr expandCopy(ScalarType t) { return x0(t); }
template <int V> ScalarNodePtr expandFill(ScalarType t) { return c(t, V); }
template <PrimOp P> ScalarNodePtr expandPrim1(ScalarType t) {
  return prim(P, x0(t));
}
template <PrimOp P> ScalarNodePtr expandPrim2(ScalarType t) {
  return prim(P, x0(t), operand(1, t));
}
template <Intrinsic F> ScalarNodePtr expandMath1(ScalarType t) {
  return intrinsic(F, x0(t));
}

// sign(x) = 1, -1 or 0 (+0 for ±0); NaN stays NaN.
ScalarNodePtr expandSign(ScalarType t) {
  return keepNaN(
      t, select(prim(PrimOp::Gt, x0(t), c(t, 0)), c(t, 1),
                select(prim(PrimOp::Lt, x0(t), c(t, 0)), c(t, -1), c(t, 0))));
}

// relu(x) = x <= 0 ? +0 : x: +0 for ±0, and a NaN fails the ordered
// compare and stays itself (not max(x, 0), which would keep -0). One
// compare, as gradc/Math.h's relu: the NaN test of `keepNaN` around
// `x > 0 ? x : 0` is the same function, but LLVM 19's InstCombine
// miscompiles it when x is a fabs (it folds the pair into `fcmp ugt` of
// the fabs's operand, so relu(abs(-0.5)) became 0;
// test/Backends/llvm-instcombine-fabs.grad).
ScalarNodePtr expandRelu(ScalarType t) {
  if (!isFloatType(t))
    return select(prim(PrimOp::Gt, x0(t), c(t, 0)), x0(t), c(t, 0));
  return select(prim(PrimOp::Le, x0(t), c(t, 0)), c(t, 0), x0(t));
}

// sigmoid(x) = 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that
// no large positive number is exponentiated. NaN gives NaN (second arm).
ScalarNodePtr expandSigmoid(ScalarType t) {
  if (t == ScalarType::F32)
    return intrinsic(Intrinsic::Sigmoid, x0(t));
  ScalarNodePtr pos =
      prim(PrimOp::Div, c(t, 1),
           prim(PrimOp::Add, c(t, 1),
                intrinsic(Intrinsic::Exp, prim(PrimOp::Neg, x0(t)))));
  ScalarNodePtr neg =
      prim(PrimOp::Div, intrinsic(Intrinsic::Exp, x0(t)),
           prim(PrimOp::Add, c(t, 1), intrinsic(Intrinsic::Exp, x0(t))));
  return select(prim(PrimOp::Ge, x0(t), c(t, 0)), std::move(pos),
                std::move(neg));
}

// softplus(x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
ScalarNodePtr expandSoftplus(ScalarType t) {
  if (t == ScalarType::F32)
    return intrinsic(Intrinsic::Softplus, x0(t));
  return prim(
      PrimOp::Add, prim(PrimOp::Max, x0(t), c(t, 0)),
      intrinsic(Intrinsic::Log1p,
                intrinsic(Intrinsic::Exp,
                          prim(PrimOp::Neg, prim(PrimOp::Abs, x0(t))))));
}

// square(x) = x * x.
ScalarNodePtr expandSquare(ScalarType t) {
  return prim(PrimOp::Mul, x0(t), x0(t));
}

// pow of integers is the f64 power converted back (truncated, wrapped).
ScalarNodePtr expandPow(ScalarType t) {
  if (isFloatType(t))
    return intrinsic(Intrinsic::Pow, x0(t), operand(1, t));
  return cast(t, intrinsic(Intrinsic::Pow, cast(ScalarType::F64, x0(t)),
                           cast(ScalarType::F64, operand(1, t))));
}

// select(cond, a, b) = cond ? a : b.
ScalarNodePtr expandSelect(ScalarType t) {
  return select(operand(0, ScalarType::Bool), operand(1, t), operand(2, t));
}

// clip(x, lo, hi) = minimum(maximum(x, lo), hi).
ScalarNodePtr expandClip(ScalarType t) {
  return prim(PrimOp::Min, prim(PrimOp::Max, x0(t), operand(1, t)),
              operand(2, t));
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

const char *const xOnly[] = {"x"};
const char *const xy[] = {"x", "y"};
const char *const selectOperands[] = {"cond", "a", "b"};
const char *const clipOperands[] = {"x", "lo", "hi"};
const char *const listOperand[] = {"xs"};
const char *const sceOperands[] = {"logits", "labels"};
const char *const oneHotOperands[] = {"indices"};
const char *const callOperands[] = {"args"};
const char *const takeOperands[] = {"table", "indices"};
const char *const scatterOperands[] = {"src", "indices"};

const AttrInfo reduceAttrs[] = {{"axis", AttrKind::Axes, false},
                                {"keepdims", AttrKind::Bool, false}};
// `accumulate = "f32"`: the op's f32 sums add in f32 (docs/IR.md,
// "Summation order"); IR-only, set by the accumulate-f32 pass.
const AttrInfo sumAttrs[] = {{"axis", AttrKind::Axes, false},
                             {"keepdims", AttrKind::Bool, false},
                             {"accumulate", AttrKind::Symbol, false}};
const AttrInfo softmaxAttrs[] = {{"axis", AttrKind::Int, false},
                                 {"accumulate", AttrKind::Symbol, false}};
const AttrInfo accumulateAttr[] = {{"accumulate", AttrKind::Symbol, false}};
const AttrInfo axisAttr[] = {{"axis", AttrKind::Int, false}};
const AttrInfo permAttr[] = {{"perm", AttrKind::IntList, false}};
const AttrInfo shapeAttr[] = {{"shape", AttrKind::Shape, true}};
const AttrInfo splitAttrs[] = {{"axis", AttrKind::Int, false},
                               {"sizes", AttrKind::Shape, true}};
const AttrInfo oneHotAttrs[] = {{"depth", AttrKind::Dim, true},
                                {"dtype", AttrKind::Symbol, false}};
const AttrInfo constantAttr[] = {{"value", AttrKind::Floats, true}};
const AttrInfo calleeAttr[] = {{"callee", AttrKind::Symbol, true}};
const AttrInfo sliceAttrs[] = {{"axis", AttrKind::Int, true},
                               {"start", AttrKind::Int, true},
                               {"size", AttrKind::Dim, true}};
const AttrInfo scatterAttrs[] = {{"axis", AttrKind::Int, false},
                                 {"size", AttrKind::Dim, true}};
const AttrInfo forAttrs[] = {{"body", AttrKind::Symbol, true},
                             {"start", AttrKind::Int, true},
                             {"trip", AttrKind::Dim, true},
                             {"carries", AttrKind::Int, true},
                             {"reverse", AttrKind::Bool, false},
                             {"checkpoint", AttrKind::Symbol, false},
                             {"every", AttrKind::Int, false},
                             {"snapshots", AttrKind::Int, false},
                             {"recompute", AttrKind::Symbol, false},
                             {"recompute_carries", AttrKind::Int, false}};
const AttrInfo ifAttrs[] = {{"then", AttrKind::Symbol, true},
                            {"else", AttrKind::Symbol, true}};

const bool selectDiff[] = {false, true, true};
const bool sceDiff[] = {true, false};
const bool indexedDiff[] = {true, false};

constexpr const char *notDiffCompare =
    "a comparison's result is bool; it has no gradient";
constexpr const char *notDiffConstant =
    "its result does not depend on the operand's values";

constexpr unsigned math = Elementwise | Arithmetic;
constexpr unsigned layout = IndexMap | SplatPreserving;

/// An elementwise op of one or two operands: traits, zero rule, expansion.
// clang-format off
#define UNARY(K, N, INFER, SUMMARY, ZERO, EXPAND)                              \
  {OpKind::K, N, xOnly, false, {}, {}, nullptr, true, SUMMARY, INFER, math,    \
   ZERO, EXPAND}
#define BINARY(K, N, INFER, SUMMARY, TRAITS, ZERO, EXPAND)                     \
  {OpKind::K, N, xy, false, {}, {}, nullptr, true, SUMMARY, INFER, TRAITS,     \
   ZERO, EXPAND}
// clang-format on
#define COMPARE(K, N, ORD, SUMMARY, PRIM)                                      \
  {OpKind::K,                                                                  \
   N,                                                                          \
   xy,                                                                         \
   false,                                                                      \
   {},                                                                         \
   {},                                                                         \
   notDiffCompare,                                                             \
   true,                                                                       \
   SUMMARY,                                                                    \
   inferCompare<OpKind::K, ORD>,                                               \
   math,                                                                       \
   ZeroWhen::Never,                                                            \
   expandPrim2<PRIM>}

const OpInfo opTable[] = {
    {OpKind::Identity,
     "identity",
     xOnly,
     false,
     {},
     {},
     nullptr,
     true,
     "y = x",
     inferSameAny,
     Elementwise | layout,
     ZeroWhen::Never,
     expandCopy},
    {OpKind::StopGradient,
     "stop_gradient",
     xOnly,
     false,
     {},
     {},
     "it is the identity forward and blocks the gradient by definition",
     true,
     "y = x; no gradient flows through",
     inferSameAny,
     Elementwise | IndexMap,
     ZeroWhen::First,
     expandCopy},
    {OpKind::ZerosLike,
     "zeros_like",
     xOnly,
     false,
     {},
     {},
     notDiffConstant,
     true,
     "zeros of x's type",
     inferSameAny,
     Elementwise,
     ZeroWhen::Never,
     expandFill<0>},
    {OpKind::OnesLike,
     "ones_like",
     xOnly,
     false,
     {},
     {},
     notDiffConstant,
     true,
     "ones of x's type",
     inferSameAny,
     Elementwise,
     ZeroWhen::Never,
     expandFill<1>},
    UNARY(Neg, "neg", inferSameNumeric<OpKind::Neg>, "y = -x", ZeroWhen::First,
          expandPrim1<PrimOp::Neg>),
    UNARY(Exp, "exp", inferSameFloat<OpKind::Exp>, "y = e^x", ZeroWhen::Never,
          expandMath1<Intrinsic::Exp>),
    UNARY(Log, "log", inferSameFloat<OpKind::Log>, "y = ln x", ZeroWhen::Never,
          expandMath1<Intrinsic::Log>),
    UNARY(Sqrt, "sqrt", inferSameFloat<OpKind::Sqrt>, "y = sqrt(x)",
          ZeroWhen::First, expandMath1<Intrinsic::Sqrt>),
    UNARY(Abs, "abs", inferSameNumeric<OpKind::Abs>, "y = |x|", ZeroWhen::First,
          expandPrim1<PrimOp::Abs>),
    {OpKind::Sign,
     "sign",
     xOnly,
     false,
     {},
     {},
     "it is piecewise constant: its derivative is zero wherever it exists",
     true,
     "y = -1, 0 or 1",
     inferSameNumeric<OpKind::Sign>,
     math,
     ZeroWhen::First,
     expandSign},
    UNARY(Sin, "sin", inferSameFloat<OpKind::Sin>, "y = sin x", ZeroWhen::First,
          expandMath1<Intrinsic::Sin>),
    UNARY(Cos, "cos", inferSameFloat<OpKind::Cos>, "y = cos x", ZeroWhen::Never,
          expandMath1<Intrinsic::Cos>),
    UNARY(Atan, "atan", inferSameFloat<OpKind::Atan>, "y = arctan x",
          ZeroWhen::First, expandMath1<Intrinsic::Atan>),
    UNARY(Tanh, "tanh", inferSameFloat<OpKind::Tanh>, "y = tanh x",
          ZeroWhen::First, expandMath1<Intrinsic::Tanh>),
    UNARY(Sigmoid, "sigmoid", inferSameFloat<OpKind::Sigmoid>,
          "y = 1 / (1 + e^-x)", ZeroWhen::Never, expandSigmoid),
    UNARY(Relu, "relu", inferSameNumeric<OpKind::Relu>, "y = max(x, 0)",
          ZeroWhen::First, expandRelu),
    UNARY(Softplus, "softplus", inferSameFloat<OpKind::Softplus>,
          "y = ln(1 + e^x)", ZeroWhen::Never, expandSoftplus),
    UNARY(Square, "square", inferSameNumeric<OpKind::Square>, "y = x * x",
          ZeroWhen::First, expandSquare),

    BINARY(Add, "add", (inferArith<OpKind::Add, false>), "z = x + y", math,
           ZeroWhen::All, expandPrim2<PrimOp::Add>),
    BINARY(Sub, "sub", (inferArith<OpKind::Sub, false>), "z = x - y", math,
           ZeroWhen::All, expandPrim2<PrimOp::Sub>),
    BINARY(Mul, "mul", (inferArith<OpKind::Mul, false>), "z = x * y", math,
           ZeroWhen::Any, expandPrim2<PrimOp::Mul>),
    BINARY(Div, "div", (inferArith<OpKind::Div, false>), "z = x / y",
           math | IntDivision, ZeroWhen::First, expandPrim2<PrimOp::Div>),
    BINARY(Pow, "pow", (inferArith<OpKind::Pow, true>), "z = x ^ y", math,
           ZeroWhen::Never, expandPow),
    BINARY(Maximum, "maximum", (inferArith<OpKind::Maximum, false>),
           "z = max(x, y)", math, ZeroWhen::All, expandPrim2<PrimOp::Max>),
    BINARY(Minimum, "minimum", (inferArith<OpKind::Minimum, false>),
           "z = min(x, y)", math, ZeroWhen::All, expandPrim2<PrimOp::Min>),
    COMPARE(Less, "less", true, "z = x < y", PrimOp::Lt),
    COMPARE(LessEqual, "less_equal", true, "z = x <= y", PrimOp::Le),
    COMPARE(Greater, "greater", true, "z = x > y", PrimOp::Gt),
    COMPARE(GreaterEqual, "greater_equal", true, "z = x >= y", PrimOp::Ge),
    COMPARE(Equal, "equal", false, "z = x == y", PrimOp::Eq),
    COMPARE(NotEqual, "not_equal", false, "z = x != y", PrimOp::Ne),
    {OpKind::Select,
     "select",
     selectOperands,
     false,
     {},
     selectDiff,
     nullptr,
     true,
     "z = cond ? a : b",
     inferSelect,
     math,
     ZeroWhen::Values,
     expandSelect},
    {OpKind::Clip,
     "clip",
     clipOperands,
     false,
     {},
     {},
     nullptr,
     true,
     "z = min(max(x, lo), hi)",
     inferClip,
     math,
     ZeroWhen::Never,
     expandClip},

    {OpKind::Sum,
     "sum",
     xOnly,
     false,
     sumAttrs,
     {},
     nullptr,
     true,
     "sum over axes",
     inferReduce<OpKind::Sum, false>,
     NoTraits,
     ZeroWhen::First,
     nullptr},
    {OpKind::Mean,
     "mean",
     xOnly,
     false,
     sumAttrs,
     {},
     nullptr,
     true,
     "mean over axes",
     inferReduce<OpKind::Mean, true>,
     NoTraits,
     ZeroWhen::First,
     nullptr},
    {OpKind::Max,
     "max",
     xOnly,
     false,
     reduceAttrs,
     {},
     nullptr,
     true,
     "maximum over axes",
     inferReduce<OpKind::Max, false>,
     SplatPreserving,
     ZeroWhen::First,
     nullptr},
    {OpKind::LogSumExp,
     "logsumexp",
     xOnly,
     false,
     sumAttrs,
     {},
     nullptr,
     true,
     "ln of the sum of e^x over axes, computed stably",
     inferReduce<OpKind::LogSumExp, true>,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    {OpKind::Softmax,
     "softmax",
     xOnly,
     false,
     softmaxAttrs,
     {},
     nullptr,
     true,
     "e^x / sum(e^x) along axis",
     inferSoftmax<OpKind::Softmax>,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    {OpKind::LogSoftmax,
     "log_softmax",
     xOnly,
     false,
     softmaxAttrs,
     {},
     nullptr,
     true,
     "x - logsumexp(x) along axis",
     inferSoftmax<OpKind::LogSoftmax>,
     NoTraits,
     ZeroWhen::Never,
     nullptr},

    {OpKind::MatMul,
     "matmul",
     xy,
     false,
     accumulateAttr,
     {},
     nullptr,
     true,
     "matrix product with NumPy matmul rules",
     inferMatMul,
     NoTraits,
     ZeroWhen::Any,
     nullptr},
    {OpKind::Transpose,
     "transpose",
     xOnly,
     false,
     permAttr,
     {},
     nullptr,
     true,
     "permute axes (default: reverse them)",
     inferTranspose,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::Reshape,
     "reshape",
     xOnly,
     false,
     shapeAttr,
     {},
     nullptr,
     true,
     "same elements, new shape (one -1 is inferred)",
     inferReshape,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::BroadcastTo,
     "broadcast_to",
     xOnly,
     false,
     shapeAttr,
     {},
     nullptr,
     true,
     "NumPy broadcast to a shape",
     inferBroadcastTo,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::Stack,
     "stack",
     listOperand,
     true,
     axisAttr,
     {},
     nullptr,
     true,
     "join tensors along a new axis",
     inferStack,
     layout,
     ZeroWhen::All,
     nullptr},
    {OpKind::Unstack,
     "unstack",
     xOnly,
     false,
     axisAttr,
     {},
     nullptr,
     true,
     "split a tensor along an axis into a list",
     inferUnstack,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::Concat,
     "concat",
     listOperand,
     true,
     axisAttr,
     {},
     nullptr,
     true,
     "join tensors along an existing axis",
     inferConcat,
     layout,
     ZeroWhen::All,
     nullptr},
    {OpKind::Split,
     "split",
     xOnly,
     false,
     splitAttrs,
     {},
     nullptr,
     false,
     "cut a tensor along an axis into parts of given sizes",
     inferSplit,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::Slice,
     "slice",
     xOnly,
     false,
     sliceAttrs,
     {},
     nullptr,
     false,
     "the size elements from start along axis (`x[a:b]`)",
     inferSliceOrPad<OpKind::Slice>,
     layout,
     ZeroWhen::First,
     nullptr},
    {OpKind::Pad,
     "pad",
     xOnly,
     false,
     sliceAttrs,
     {},
     nullptr,
     false,
     "zeros of size along axis with x at start: slice's adjoint",
     inferSliceOrPad<OpKind::Pad>,
     NoTraits,
     ZeroWhen::First,
     nullptr},

    {OpKind::Take, "take", takeOperands, false, axisAttr, indexedDiff, nullptr,
     true, "gather along axis at i32 indices (out of range: GRADC_ERROR_INDEX)",
     inferTake, NoTraits, ZeroWhen::Never, nullptr},
    {OpKind::ScatterAdd, "scatter_add", scatterOperands, false, scatterAttrs,
     indexedDiff, nullptr, false,
     "zeros of size along axis, src's slices added at indices", inferScatterAdd,
     NoTraits, ZeroWhen::Never, nullptr},

    {OpKind::OneHot,
     "one_hot",
     oneHotOperands,
     false,
     oneHotAttrs,
     {},
     "its operand is integer indices",
     true,
     "f32 rows with 1 at each index, 0 elsewhere",
     inferOneHot,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    {OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy", sceOperands, false,
     accumulateAttr, sceDiff, nullptr, true,
     "per row: logsumexp(logits) - logits[label]", inferSoftmaxCrossEntropy,
     NoTraits, ZeroWhen::Never, nullptr},

    {OpKind::Constant,
     "constant",
     {},
     false,
     constantAttr,
     {},
     "it has no operands",
     false,
     "a literal tensor",
     nullptr,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    {OpKind::Call,
     "call",
     callOperands,
     true,
     calleeAttr,
     {},
     nullptr,
     false,
     "call of another function",
     nullptr,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    // Differentiable only through the @custom_grad rule the call carries;
    // without one, differentiation reports the extern by name.
    {OpKind::ExternCall,
     "extern_call",
     callOperands,
     true,
     calleeAttr,
     {},
     nullptr,
     false,
     "call of an extern C/C++ function",
     nullptr,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    // A counted loop: `trip` calls of the body function `body` with
    // (index, carries..., invariants...); the first `carries` operands are
    // the initial carries, the rest invariants. Results: the final carries,
    // then each per-step output of the body stacked along a new first axis.
    // Types are explicit, as for a call; the verifier checks them.
    {OpKind::For,
     "for",
     callOperands,
     true,
     forAttrs,
     {},
     nullptr,
     false,
     "counted loop over a body function, with carries and stacked outputs",
     nullptr,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
    // A branch: operand 0 is a bool scalar; the function `then` (if true)
    // or `else` runs on the other operands, and its results are the op's.
    // Both functions take the same parameters and return the same types.
    {OpKind::If,
     "if",
     callOperands,
     true,
     ifAttrs,
     {},
     nullptr,
     false,
     "branch on a bool scalar between two functions",
     nullptr,
     NoTraits,
     ZeroWhen::Never,
     nullptr},
};

#undef UNARY
#undef BINARY
#undef COMPARE

constexpr size_t numOps = 0
#define GRADC_OP(Id, Name) +1
#include "gradc/Ops/Ops.def"
    ;
static_assert(std::size(opTable) == numOps,
              "one row per op of Ops.def, in the same order");

/// TensorFlow op-type names people reach for by habit.
const std::pair<const char *, const char *> tensorFlowNames[] = {
    {"Pack", "stack"},
    {"Unpack", "unstack"},
    {"ConcatV2", "concat"},
    {"Identity", "identity"},
    {"StopGradient", "stop_gradient"},
    {"ZerosLike", "zeros_like"},
    {"OnesLike", "ones_like"},
    {"Neg", "neg"},
    {"Exp", "exp"},
    {"Log", "log"},
    {"Sqrt", "sqrt"},
    {"Abs", "abs"},
    {"Sign", "sign"},
    {"Sin", "sin"},
    {"Cos", "cos"},
    {"Tanh", "tanh"},
    {"Sigmoid", "sigmoid"},
    {"Relu", "relu"},
    {"Softplus", "softplus"},
    {"Square", "square"},
    {"Add", "add"},
    {"AddV2", "add"},
    {"Sub", "sub"},
    {"Mul", "mul"},
    {"RealDiv", "div"},
    {"Div", "div"},
    {"Pow", "pow"},
    {"Maximum", "maximum"},
    {"Minimum", "minimum"},
    {"Select", "select"},
    {"SelectV2", "select"},
    {"ClipByValue", "clip"},
    {"Sum", "sum"},
    {"Mean", "mean"},
    {"Max", "max"},
    {"Softmax", "softmax"},
    {"LogSoftmax", "log_softmax"},
    {"MatMul", "matmul"},
    {"BatchMatMul", "matmul"},
    {"BatchMatMulV2", "matmul"},
    {"Transpose", "transpose"},
    {"Reshape", "reshape"},
    {"BroadcastTo", "broadcast_to"},
    {"OneHot", "one_hot"},
    {"SparseSoftmaxCrossEntropyWithLogits", "softmax_cross_entropy"},
};

} // namespace

const OpInfo &gradc::getOpInfo(OpKind kind) {
  return opTable[static_cast<size_t>(kind)];
}

llvm::StringRef gradc::getOpName(OpKind kind) { return getOpInfo(kind).name; }

llvm::ArrayRef<OpInfo> gradc::getAllOps() { return opTable; }

const OpInfo *gradc::lookupOp(llvm::StringRef name) {
  for (const OpInfo &info : opTable)
    if (info.userVisible && name == info.name)
      return &info;
  return nullptr;
}

llvm::StringRef gradc::suggestOpName(llvm::StringRef name) {
  llvm::StringRef best;
  unsigned bestDistance = std::max<unsigned>(2, name.size() / 3) + 1;
  for (const OpInfo &info : opTable) {
    if (!info.userVisible)
      continue;
    unsigned d = name.lower() == info.name
                     ? 0
                     : name.edit_distance(info.name, true, bestDistance);
    if (d < bestDistance) {
      bestDistance = d;
      best = info.name;
    }
  }
  return best;
}

llvm::StringRef gradc::mapTensorFlowOpName(llvm::StringRef tfName) {
  for (const auto &[tf, ours] : tensorFlowNames)
    if (tfName == tf)
      return ours;
  return {};
}

bool OpInfo::isOperandDifferentiable(unsigned index) const {
  if (!isDifferentiable())
    return false;
  if (differentiableOperands.empty())
    return true;
  if (variadic)
    return differentiableOperands[0];
  return index < differentiableOperands.size() && differentiableOperands[index];
}

const AttrInfo *OpInfo::findAttr(llvm::StringRef attrName) const {
  for (const AttrInfo &a : attrs)
    if (attrName == a.name)
      return &a;
  return nullptr;
}

bool gradc::inferOpTypes(OpKind op, llvm::ArrayRef<TensorType> operands,
                         AttrList &attrs,
                         llvm::SmallVectorImpl<TensorType> &results,
                         OpTypeError &error) {
  const OpInfo &info = getOpInfo(op);
  assert(info.inferTypes && "constant and call have explicit result types");
  if (!info.variadic && operands.size() != info.operandNames.size())
    return fail(error, diag::err_op_operand_count,
                {info.name, std::to_string(info.operandNames.size()),
                 std::to_string(operands.size())});
  for (const AttrInfo &a : info.attrs)
    if (a.required && !attrs.has(a.name))
      return fail(error, diag::err_op_missing_attr, {info.name, a.name});
  if (!info.inferTypes(operands, attrs, results, error))
    return false;
  // Every shape an op forms (a reshape or broadcast_to target, a one_hot
  // depth, a matmul or broadcast of large operands) must be one whose
  // element count and strides can be computed, and of a rank the C ABI's
  // header can represent.
  for (const TensorType &t : results) {
    if (t.getRank() > maxRank)
      return fail(error, diag::err_op_result_rank,
                  {info.name, t.str(), std::to_string(t.getRank()),
                   std::to_string(maxRank)});
    if (!knownSizesFit(t.shape))
      return fail(error, diag::err_op_result_too_large, {info.name, t.str()});
  }
  // The normal form lists the attributes in the table's order, whatever
  // order the caller set them in and wherever inference filled in a
  // default (`sum(x, keepdims = true)` gains its `axis` last). Attributes
  // the table does not declare stay, at the end, for the verifier to see.
  AttrList ordered;
  for (const AttrInfo &a : info.attrs)
    if (const AttrValue *v = attrs.find(a.name))
      ordered.set(a.name, *v);
  for (const NamedAttr &entry : attrs.entries())
    if (!info.findAttr(entry.name))
      ordered.set(entry.name, entry.value);
  attrs = std::move(ordered);
  return true;
}

bool gradc::isElementwiseArithmetic(OpKind op) {
  const OpInfo &info = getOpInfo(op);
  return info.has(Elementwise) && info.has(Arithmetic);
}

std::optional<Shape> gradc::broadcastShapes(llvm::ArrayRef<Dim> a,
                                            llvm::ArrayRef<Dim> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right, as NumPy does.
    const Dim *da = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim *db = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    auto isOne = [](const Dim *d) {
      return !d || (d->isKnown() && d->getSize() == 1);
    };
    if (isOne(da))
      result[i] = db ? *db : Dim::known(1);
    else if (isOne(db) || *da == *db)
      result[i] = *da;
    else
      return std::nullopt;
  }
  return result;
}
