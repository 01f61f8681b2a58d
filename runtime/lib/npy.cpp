// NumPy .npy files (format versions 1.0, 2.0 and 3.0), as specified in
// numpy/lib/format.py: magic "\x93NUMPY", major, minor, a little-endian header length
// (2 bytes in 1.0, 4 in 2.0/3.0), then a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }
// padded with spaces and a newline, then the raw C-order data.
#include <qkv/runtime/tensor.hpp>

#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

namespace qkv {

// The data is copied byte for byte; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little,
              "qkv's .npy reader assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct Descr {
  const char *text;
  DType dtype;
};
constexpr Descr kDescrs[] = {{"<f4", DType::F32},
                             {"<f8", DType::F64},
                             {"<f2", DType::F16},
                             {"<i4", DType::I32},
                             {"<i8", DType::I64}};

[[noreturn]] void fail(const std::string &path, const std::string &why) {
  user_error("npy file '" + path + "': " + why);
}

/// A tiny parser for the header dict: string keys; values that are strings, True/False,
/// or tuples of integers. That is all numpy writes for a plain array.
class HeaderParser {
public:
  HeaderParser(const std::string &path, std::string text) : path_(path), s_(std::move(text)) {}

  struct Header {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<Shape> shape;
  };

  Header parse() {
    Header h;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}')
        break;
      std::string key = string();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail(path_, "descr is not a simple type string (structured dtypes are not supported)");
        h.descr = string();
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
      } else if (key == "shape") {
        h.shape = tuple();
      } else {
        fail(path_, "unexpected key '" + key + "' in the header");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}')
        fail(path_, "malformed header: " + s_);
    }
    if (!h.descr || !h.fortran_order || !h.shape)
      fail(path_, "header lacks descr, fortran_order or shape: " + s_);
    return h;
  }

private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c)
      fail(path_, std::string("malformed header (expected '") + c + "'): " + s_);
    ++i_;
  }
  std::string string() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"')
      fail(path_, "malformed header (expected a string): " + s_);
    std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos)
      fail(path_, "malformed header (unterminated string): " + s_);
    std::string r = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return r;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail(path_, "malformed header (fortran_order is not True or False): " + s_);
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    for (;;) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        return shape;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail(path_, "malformed shape in header: " + s_);
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::int64_t{1} << 52))
          fail(path_, "shape extent too large in header: " + s_);
        v = v * 10 + (s_[i_++] - '0');
      }
      shape.push_back(v);
      skip_ws();
      if (peek() == ',')
        ++i_;
      else if (peek() != ')')
        fail(path_, "malformed shape in header: " + s_);
    }
  }

  const std::string &path_;
  std::string s_;
  std::size_t i_ = 0;
};

std::uint32_t read_le(const unsigned char *p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

Tensor load_npy(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path, "it is a directory, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f)
    fail(path, "cannot open it for reading");
  std::string bytes;
  try { // libstdc++'s filebuf throws std::ios_base::failure on a read error
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure &e) {
    fail(path, std::string("cannot read it (") + e.what() + ")");
  }
  const auto *u = reinterpret_cast<const unsigned char *>(bytes.data());
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    fail(path, "not a .npy file (no \\x93NUMPY magic)");
  int major = u[6], minor = u[7];
  std::size_t len_bytes;
  if (major == 1)
    len_bytes = 2;
  else if (major == 2 || major == 3)
    len_bytes = 4;
  else
    fail(path, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (qkv reads 1.0, 2.0 and 3.0)");
  if (bytes.size() < kMagicLen + 2 + len_bytes)
    fail(path, "truncated header");
  std::size_t header_len = read_le(u + 8, static_cast<int>(len_bytes));
  std::size_t data_off = kMagicLen + 2 + len_bytes + header_len;
  if (bytes.size() < data_off)
    fail(path, "truncated header");
  HeaderParser parser(path, bytes.substr(kMagicLen + 2 + len_bytes, header_len));
  HeaderParser::Header h = parser.parse();

  std::optional<DType> dtype;
  for (const Descr &d : kDescrs)
    if (*h.descr == d.text)
      dtype = d.dtype;
  if (!dtype)
    fail(path, "unsupported dtype descr '" + *h.descr +
                   "' (qkv reads little-endian '<f4', '<f8', '<f2', '<i4', '<i8')");
  if (*h.fortran_order)
    fail(path, "fortran_order is True; qkv reads only C-order arrays "
               "(save np.ascontiguousarray(a))");

  // Size the data before allocating: a corrupt shape must not overflow or allocate wildly.
  std::size_t avail = bytes.size() - data_off;
  std::size_t need = dtype_size(*dtype);
  bool zero = false, overflow = false;
  for (std::int64_t e : *h.shape) {
    zero = zero || e == 0;
    overflow = __builtin_mul_overflow(need, static_cast<std::size_t>(e), &need) || overflow;
  }
  if (zero)
    need = 0;
  else if (overflow)
    fail(path, "truncated data: its shape needs more bytes than can be addressed");
  if (avail < need)
    fail(path, "truncated data: shape needs " + std::to_string(need) + " bytes, the file has " +
                   std::to_string(avail));
  Tensor t(*dtype, *h.shape);
  std::memcpy(t.data(), bytes.data() + data_off, need);
  return t;
}

void save_npy(const std::string &path, const Tensor &t) {
  if (t.empty())
    user_error("save_npy '" + path + "': the tensor is empty (default-constructed)");
  // NumPy has no bfloat16: it is widened (exactly) to float32.
  const Tensor &out = t.dtype() == DType::BF16 ? t.to(DType::F32) : t;
  const char *descr = nullptr;
  for (const Descr &d : kDescrs)
    if (d.dtype == out.dtype())
      descr = d.text;
  if (!descr)
    internal_error("save_npy: no descr for " + std::string(dtype_name(out.dtype())));

  std::string shape = "(";
  for (std::size_t i = 0; i < out.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(out.shape()[i]);
  if (out.shape().size() == 1)
    shape += ",";
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy pads the header with spaces and a final newline so the data starts on a
  // 64-byte boundary; version 1.0 unless the header needs more than 65535 bytes.
  std::size_t prefix = kMagicLen + 2 + 2;
  int major = 1;
  std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 65535) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
    total = (prefix + header.size() + 1 + 63) / 64 * 64;
  }
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';

  std::string bytes(kMagic, kMagicLen);
  bytes += static_cast<char>(major);
  bytes += '\0';
  std::uint32_t len = static_cast<std::uint32_t>(header.size());
  for (std::size_t i = 0; i < prefix - kMagicLen - 2; ++i)
    bytes += static_cast<char>((len >> (8 * i)) & 0xff);
  bytes += header;

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    fail(path, "cannot open it for writing");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.write(static_cast<const char *>(out.data()), static_cast<std::streamsize>(out.nbytes()));
  if (!f)
    fail(path, "write failed");
}

} // namespace qkv
