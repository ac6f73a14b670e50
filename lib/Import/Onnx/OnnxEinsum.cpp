//===- OnnxEinsum.cpp - ONNX Einsum as batched matmuls ------------------===//
//
// Einsum's equation parsed and contracted pairwise (NodeEmitter::einsum);
// dispatched from OnnxOps.cpp through OnnxOps.def.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include "llvm/ADT/StringMap.h"

#include "llvm/ADT/StringSwitch.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

/// Einsum: operands contracted pairwise, left to right, each pair as one
/// batched matmul ([batch, left, contracted] x [batch, contracted, right])
/// between transposes and reshapes; a label no later operand or the output
/// needs is summed first. Ellipses are labels of their own; a label repeated
/// within one operand (a diagonal) is refused.
LogicalResult NodeEmitter::einsum() {
  std::string eq;
  for (char c : attrString(node, "equation", ""))
    if (c != ' ')
      eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  SmallVector<std::string> terms;
  {
    SmallVector<StringRef> parts;
    StringRef(lhs).split(parts, ',');
    for (StringRef t : parts)
      terms.push_back(t.str());
  }
  size_t operands = 0;
  for (size_t k = 0; k < inputs.size(); ++k)
    operands += has(k);
  if (terms.size() != operands)
    return error() << "equation '" << eq << "' names " << terms.size() << " operands, the node has "
                   << operands;
  // Labels: letters, and '0' + k for the k-th dimension an ellipsis covers
  // (counted from the right, so that ellipses of different ranks align).
  SmallVector<Value> xs;
  SmallVector<std::string> labels;
  int64_t ellipsisRank = 0;
  auto expand = [&](const std::string &term, int64_t rank, std::string &out) -> bool {
    size_t dots = term.find("...");
    std::string named =
        dots == std::string::npos ? term : term.substr(0, dots) + term.substr(dots + 3);
    for (char c : named)
      if (!std::isalpha((unsigned char)c))
        return false;
    int64_t covered = dots == std::string::npos ? 0 : rank - (int64_t)named.size();
    if (covered < 0 || (dots == std::string::npos && (int64_t)named.size() != rank))
      return false;
    ellipsisRank = std::max(ellipsisRank, covered);
    if (dots == std::string::npos) {
      out = named;
      return true;
    }
    std::string e;
    for (int64_t k = covered - 1; k >= 0; --k)
      e += (char)('0' + k);
    out = term.substr(0, dots) + e + term.substr(dots + 3);
    return true;
  };
  for (size_t k = 0, t = 0; k < inputs.size(); ++k) {
    if (!has(k))
      continue;
    Value x = in(k);
    if (failed(requireFloat(x)))
      return failure();
    std::string l;
    if (!expand(terms[t], typeOf(x).getRank(), l))
      return error() << "operand " << t << " ('" << terms[t] << "') does not match its rank "
                     << typeOf(x).getRank();
    for (size_t i = 0; i < l.size(); ++i)
      if (l.find(l[i], i + 1) != std::string::npos)
        return error() << "label '" << l[i] << "' repeats within operand " << t
                       << " (diagonals are not supported)";
    xs.push_back(x);
    labels.push_back(l);
    ++t;
  }
  if (xs.size() > 1 && typeOf(xs[0]).getElementType() != typeOf(xs[1]).getElementType())
    return error() << "operand element types differ";
  // The output: given, or (NumPy's implicit form) the ellipsis then the
  // labels that appear once, in alphabetical order.
  std::string out;
  if (arrow != std::string::npos) {
    std::string given = eq.substr(arrow + 2);
    if (!expand(given,
                (int64_t)(given.find("...") == std::string::npos ? given.size()
                                                                 : given.size() - 3 + ellipsisRank),
                out))
      return error() << "the output '" << given << "' is not a list of labels";
  } else {
    for (int64_t k = ellipsisRank - 1; k >= 0; --k)
      out += (char)('0' + k);
    std::map<char, int> count;
    for (const std::string &l : labels)
      for (char c : l)
        count[c] += std::isalpha((unsigned char)c) ? 1 : 0;
    for (auto [c, n] : count)
      if (n == 1)
        out += c;
  }
  // Every label's size, checked across operands.
  std::map<char, int64_t> size;
  for (size_t t = 0; t < xs.size(); ++t)
    for (size_t i = 0; i < labels[t].size(); ++i) {
      int64_t d = typeOf(xs[t]).getDimSize(i);
      auto [it, fresh] = size.insert({labels[t][i], d});
      if (!fresh && it->second != d)
        return error() << "label '" << labels[t][i] << "' has sizes " << it->second << " and " << d
                       << " (broadcasting is not supported)";
    }
  for (char c : out)
    if (!size.count(c))
      return error() << "output label '" << c << "' is in no operand";
  auto shapeOf = [&](const std::string &l) {
    SmallVector<int64_t> s;
    for (char c : l)
      s.push_back(size[c]);
    return s;
  };
  // Sums over the labels of |l| not in |keep|.
  auto sumAway = [&](Value x, std::string &l, const std::string &keep) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (size_t i = 0; i < l.size(); ++i)
      if (keep.find(l[i]) == std::string::npos)
        axes.push_back((int64_t)i);
      else
        kept += l[i];
    if (axes.empty())
      return x;
    l = kept;
    return Value(zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, x, axes, false));
  };
  auto permutation = [](const std::string &from, const std::string &to) {
    SmallVector<int64_t> perm;
    for (char c : to)
      perm.push_back((int64_t)from.find(c));
    return perm;
  };
  auto product = [&](const std::string &l) {
    int64_t n = 1;
    for (char c : l)
      n *= size[c];
    return n;
  };
  Value acc = xs[0];
  std::string accLabels = labels[0];
  for (size_t t = 1; t <= xs.size(); ++t) {
    // What later operands and the output still need.
    std::string needed = out;
    for (size_t u = t + 1; u < xs.size(); ++u)
      needed += labels[u];
    if (t == xs.size()) {
      acc = sumAway(acc, accLabels, needed);
      break;
    }
    Value x = xs[t];
    std::string xl = labels[t];
    acc = sumAway(acc, accLabels, needed + xl);
    x = sumAway(x, xl, needed + accLabels);
    std::string batch, left, contract, right;
    for (char c : accLabels)
      (xl.find(c) == std::string::npos       ? left
       : needed.find(c) != std::string::npos ? batch
                                             : contract) += c;
    for (char c : xl)
      if (accLabels.find(c) == std::string::npos)
        right += c;
    Value a = reshape(transposed(acc, permutation(accLabels, batch + left + contract)),
                      {product(batch), product(left), product(contract)});
    Value m = reshape(transposed(x, permutation(xl, batch + contract + right)),
                      {product(batch), product(contract), product(right)});
    acc = zero::MatmulOp::create(b, loc, a, m, false, false);
    accLabels = batch + left + right;
    acc = reshape(acc, shapeOf(accLabels));
  }
  results.push_back(transposed(acc, permutation(accLabels, out)));
  return success();
}
