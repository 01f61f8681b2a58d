// Document packing (jagged sequences packed into fixed-length rows): a captured tensor
// says which document each position belongs to, and a position sees the earlier
// positions of its own document only.
#include "variants.hpp"

#include <algorithm>
#include <random>

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("packed_documents");
  auto [q, k, v] = qkv_inputs(g);
  auto doc = g.input<i32>("doc", B, L); // doc[b, i]: the document of position i
  auto same_doc =
      mask_fn([&](auto b, auto h, auto qi, auto ki) { return doc(b, qi) == doc(b, ki); });
  auto o = attention(q, k, v).mask(and_masks(causal_mask(), same_doc));
  g.output("out", o.value());
  return g;
}

/// Documents of random lengths, 1 to L/4 positions (a fixed pseudo-random sequence),
/// numbered 0, 1, ... along each row.
void documents(TensorMap &in) {
  Tensor &doc = in.at("doc");
  std::int64_t rows = doc.shape()[0], len = doc.shape()[1];
  std::mt19937_64 random(7);
  auto longest = static_cast<std::uint64_t>(std::max<std::int64_t>(1, len / 4));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0, id = -1, end = 0; i < len; ++i) {
      if (i == end) {
        end += 1 + static_cast<std::int64_t>(random() % longest);
        ++id;
      }
      doc.set(r * len + i, static_cast<double>(id));
    }
}

} // namespace

const Variant packed_documents{"packed_documents",
                               "causal within each packed document (captured doc ids)",
                               Form::Attention, build, documents};

} // namespace qkv::gallery
