#include "VectorMath.h"

#include <cmath>

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace qkv::ir {

Value emitExp2(KernelBuilder &kb, Value x, int degree) {
  ImplicitLocOpBuilder &b = kb.builder();
  Type t = x.getType();
  Type elem = getElementTypeOrSelf(t);
  bool f64 = elem.isF64();
  int bits = f64 ? 64 : 32, mantissa = f64 ? 52 : 23, bias = f64 ? 1023 : 127;
  if (degree <= 0)
    degree = f64 ? 12 : 7;
  Type intElem = b.getIntegerType(bits);
  Type intT =
      isa<VectorType>(t) ? Type(VectorType::get(cast<VectorType>(t).getShape(), intElem)) : intElem;

  // Clamp to the exponent range: x = -inf (a masked score) becomes -bias, whose power of
  // two has all-zero bits, i.e. exactly 0.
  Value lo = kb.fconst(t, -double(bias)), hi = kb.fconst(t, double(bias));
  Value xc = arith::MinimumFOp::create(b, arith::MaximumFOp::create(b, x, lo), hi);
  Value n = math::RoundEvenOp::create(b, xc); // one vrndscaleps, where floor(x + 0.5) is two
  Value f = arith::SubFOp::create(b, xc, n);

  // 2^f = sum_k (f ln2)^k / k!, Horner from the highest degree.
  double ln2 = std::log(2.0), coef = 1.0;
  SmallVector<double> c;
  for (int k = 0; k <= degree; ++k) {
    c.push_back(coef);
    coef *= ln2 / double(k + 1);
  }
  Value p = kb.fconst(t, c[degree]);
  for (int k = degree - 1; k >= 0; --k)
    p = math::FmaOp::create(b, p, f, kb.fconst(t, c[k]));

  // 2^n: (n + bias) << mantissa, reinterpreted as a float.
  Value ni = arith::FPToSIOp::create(b, intT, n);
  auto intConst = [&](int64_t v) -> Value {
    auto a = b.getIntegerAttr(intElem, v);
    if (auto vt = dyn_cast<VectorType>(intT))
      return arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, Attribute(a)));
    return arith::ConstantOp::create(b, a);
  };
  Value biasV = intConst(bias), shift = intConst(mantissa);
  Value pow2 = arith::BitcastOp::create(
      b, t, arith::ShLIOp::create(b, arith::AddIOp::create(b, ni, biasV), shift));
  return arith::MulFOp::create(b, p, pow2);
}

} // namespace qkv::ir
