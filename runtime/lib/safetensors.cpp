// SafeTensors: the .safetensors reader. The header is parsed with nlohmann-json and
// checked in full before any tensor is handed out; the file is mapped read-only.
#include <qkv/runtime/safetensors.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <qkv/dsl/error.hpp>

namespace qkv {

static_assert(std::endian::native == std::endian::little,
              "qkv's .safetensors reader assumes a little-endian host");

using json = nlohmann::json;

namespace {

struct DTypeEntry {
  const char *name;
  std::size_t size;
  std::optional<DType> qkv;
};
// The element types of the safetensors format; qkv has tensors of six of them.
constexpr DTypeEntry kDTypes[] = {
    {"F64", 8, DType::F64},       {"F32", 4, DType::F32},       {"F16", 2, DType::F16},
    {"BF16", 2, DType::BF16},     {"I64", 8, DType::I64},       {"I32", 4, DType::I32},
    {"I16", 2, std::nullopt},     {"I8", 1, std::nullopt},      {"U64", 8, std::nullopt},
    {"U32", 4, std::nullopt},     {"U16", 2, std::nullopt},     {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},    {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
    {"F8_E8M0", 1, std::nullopt}, {"C64", 8, std::nullopt},
};

const DTypeEntry *find_dtype(const std::string &name) {
  for (const DTypeEntry &e : kDTypes)
    if (name == e.name)
      return &e;
  return nullptr;
}

std::string range_str(const SafeTensorInfo &t) {
  return '[' + std::to_string(t.begin) + ", " + std::to_string(t.end) + ')';
}

/// The file, mapped read-only; unmapped when the last owner goes.
std::shared_ptr<const std::byte> map_file(const std::string &path, std::size_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    user_error(path + ": cannot open the file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    user_error(path + ": not a regular file");
  }
  size = static_cast<std::size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    user_error(path + ": " + std::to_string(size) +
               " bytes is too short for a .safetensors file (it starts with an 8-byte header "
               "length)");
  }
  void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    user_error(path + ": cannot map the file (" + std::strerror(err) + ")");
  return std::shared_ptr<const std::byte>(
      static_cast<const std::byte *>(p),
      [size](const std::byte *q) { ::munmap(const_cast<std::byte *>(q), size); });
}

/// Parses the header, reporting a key that appears twice at the top level (JSON allows
/// it, nlohmann keeps one of them silently, and the file would be ambiguous).
json parse_header(const std::string &path, std::string_view text) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty())
        duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception &e) { // a syntax error, or a number too large (406)
    user_error(path + ": the header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object())
    user_error(path + ": the header must be a JSON object, got " + header.type_name());
  if (!duplicate.empty())
    user_error(path + ": tensor '" + duplicate + "' appears twice in the header");
  return header;
}

std::uint64_t offset_value(const std::string &where, const json &v) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    user_error(where + ": data_offsets must be two non-negative integers, got " + v.dump());
  return v.get<std::uint64_t>();
}

/// One entry of the header, checked on its own: fields, dtype, shape, byte count, bounds.
SafeTensorInfo parse_entry(const std::string &path, const std::string &name, const json &e,
                           std::uint64_t data_size) {
  std::string where = path + ": tensor '" + name + "'";
  if (!e.is_object())
    user_error(where + ": its entry must be an object, got " + e.dump());
  for (const char *field : {"dtype", "shape", "data_offsets"})
    if (!e.contains(field))
      user_error(where + ": field '" + field + "' is missing");
  SafeTensorInfo t;
  t.name = name;
  if (!e["dtype"].is_string())
    user_error(where + ": dtype must be a string, got " + e["dtype"].dump());
  t.dtype = e["dtype"].get<std::string>();
  const DTypeEntry *dt = find_dtype(t.dtype);
  if (!dt)
    user_error(where + ": unknown dtype '" + t.dtype + "'");
  const json &shape = e["shape"];
  if (!shape.is_array())
    user_error(where + ": shape must be an array of non-negative integers, got " + shape.dump());
  std::uint64_t numel = 1;
  for (const json &d : shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
      user_error(where + ": shape must be an array of non-negative integers, got " + shape.dump());
    std::uint64_t n = d.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, n, &numel))
      user_error(where + ": shape " + shape.dump() + " has too many elements");
    t.shape.push_back(static_cast<std::int64_t>(n));
  }
  const json &off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    user_error(where + ": data_offsets must be two non-negative integers, got " + off.dump());
  t.begin = offset_value(where, off[0]);
  t.end = offset_value(where, off[1]);
  if (t.end < t.begin)
    user_error(where + ": data_offsets " + range_str(t) + " end before they begin");
  if (t.end > data_size)
    user_error(where + ": data_offsets " + range_str(t) + " run past the end of the data (" +
               std::to_string(data_size) + " bytes after the header; is the file truncated?)");
  std::uint64_t bytes = 0;
  bool overflow = __builtin_mul_overflow(numel, dt->size, &bytes);
  if (overflow || bytes != t.end - t.begin)
    user_error(where + ": shape " + shape.dump() + " of " + t.dtype + " needs " +
               (overflow ? std::string("too many") : std::to_string(bytes)) +
               " bytes but data_offsets " + range_str(t) + " hold " +
               std::to_string(t.end - t.begin));
  return t;
}

std::map<std::string, std::string> parse_metadata(const std::string &path, const json &m) {
  if (!m.is_object())
    user_error(path + ": __metadata__ must be an object of strings, got " + m.dump());
  std::map<std::string, std::string> out;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->is_string())
      user_error(path + ": __metadata__ '" + it.key() + "' must be a string, got " + it->dump());
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

/// Tensors sorted by offset; two that share a byte are a lying file.
void check_overlaps(const std::string &path, std::vector<SafeTensorInfo> &tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const SafeTensorInfo &a, const SafeTensorInfo &b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const SafeTensorInfo *last = nullptr; // the non-empty tensor reaching furthest so far
  for (const SafeTensorInfo &t : tensors) {
    if (t.begin == t.end)
      continue;
    if (last && t.begin < last->end)
      user_error(path + ": tensors '" + last->name + "' " + range_str(*last) + " and '" + t.name +
                 "' " + range_str(t) + " overlap");
    if (!last || t.end > last->end)
      last = &t;
  }
}

} // namespace

std::size_t safetensors_dtype_size(const std::string &dtype) {
  const DTypeEntry *e = find_dtype(dtype);
  return e ? e->size : 0;
}

std::optional<DType> SafeTensorInfo::qkv_dtype() const {
  const DTypeEntry *e = find_dtype(dtype);
  return e ? e->qkv : std::nullopt;
}

std::int64_t SafeTensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    n *= d;
  return n;
}

SafeTensors SafeTensors::open(const std::string &path) {
  auto s = std::make_shared<State>();
  s->path = path;
  s->mapping = map_file(path, s->file_size);
  const std::byte *base = s->mapping.get();
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  if (header_len > kMaxHeaderBytes)
    user_error(path + ": header length " + std::to_string(header_len) + " is over the " +
               std::to_string(kMaxHeaderBytes) + "-byte limit (not a .safetensors file?)");
  if (header_len > s->file_size - 8)
    user_error(path + ": header length " + std::to_string(header_len) +
               " runs past the end of the file (" + std::to_string(s->file_size) +
               " bytes; is it truncated?)");
  std::string_view text(reinterpret_cast<const char *>(base + 8), header_len);
  json header = parse_header(path, text);
  s->data = base + 8 + header_len;
  s->data_size = s->file_size - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      s->metadata = parse_metadata(path, *it);
    else
      s->tensors.push_back(parse_entry(path, it.key(), *it, s->data_size));
  }
  check_overlaps(path, s->tensors);
  for (std::size_t i = 0; i < s->tensors.size(); ++i)
    s->index[s->tensors[i].name] = i;
  return SafeTensors(std::move(s));
}

bool SafeTensors::contains(const std::string &name) const { return state_->index.count(name); }

const SafeTensorInfo &SafeTensors::info(const std::string &name) const {
  auto it = state_->index.find(name);
  if (it == state_->index.end())
    user_error(state_->path + ": no tensor '" + name + "' (the file has " +
               std::to_string(state_->tensors.size()) + " tensors)");
  return state_->tensors[it->second];
}

std::span<const std::byte> SafeTensors::bytes(const std::string &name) const {
  const SafeTensorInfo &t = info(name);
  return {state_->data + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

Tensor SafeTensors::load(const std::string &name) const {
  const SafeTensorInfo &t = info(name);
  std::optional<DType> dt = t.qkv_dtype();
  if (!dt)
    user_error(state_->path + ": tensor '" + name + "' is " + t.dtype +
               ", which qkv has no tensors of (F32, F64, F16, BF16, I32, I64)");
  Tensor out = Tensor::uninitialized(*dt, t.shape);
  std::span<const std::byte> src = bytes(name);
  if (!src.empty())
    std::memcpy(out.data(), src.data(), src.size());
  return out;
}

Tensor SafeTensors::load(const std::string &name, DType dtype) const {
  Tensor t = load(name);
  return t.dtype() == dtype ? t : t.to(dtype);
}

Tensor SafeTensors::load(const std::string &name, DType dtype, const Shape &shape) const {
  const SafeTensorInfo &t = info(name);
  if (t.shape != shape) {
    auto str = [](const Shape &s) {
      std::string r = "[";
      for (std::size_t i = 0; i < s.size(); ++i)
        r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    user_error(state_->path + ": tensor '" + name + "' has shape " + str(t.shape) + ", expected " +
               str(shape));
  }
  return load(name, dtype);
}

} // namespace qkv
