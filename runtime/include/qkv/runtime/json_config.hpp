// JSON configuration files as model loaders read them: a Hugging Face config.json,
// tokenizer.json, sentence-transformers' modules.json. Fields are read by name with their
// type checked, and every error names the file and the field (with its path inside the
// file for nested objects and arrays), e.g.
//
//   model/config.json: field 'hidden_size' is missing
//   model/config.json: field 'rope_scaling.factor' must be a number, got a string ("2")
//
// nlohmann-json parses the text; it is not part of this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qkv {

class JsonConfig {
public:
  /// Reads and parses a file; a missing file or bad JSON is a qkv::Error naming it.
  static JsonConfig load(const std::string &path);
  /// Parses text; `origin` names it in errors (a file name, "tokenizer.json", ...).
  static JsonConfig parse(const std::string &text, const std::string &origin);

  /// The file this value came from.
  const std::string &origin() const { return origin_; }
  /// Where this value is inside its file: "" for the whole file, "model", "modules[1]".
  const std::string &where() const { return where_; }

  bool is_object() const;
  bool is_array() const;
  /// The object has `key` with a value other than null.
  bool has(const std::string &key) const;
  /// The object's keys, sorted.
  std::vector<std::string> keys() const;

  // Required fields: a missing field, a null or a value of another type is a qkv::Error.
  std::int64_t integer(const std::string &key) const;
  double number(const std::string &key) const; // an integer or a float
  bool boolean(const std::string &key) const;
  std::string string(const std::string &key) const;
  /// A nested object or array, for further reads with the same error messages.
  JsonConfig at(const std::string &key) const;

  // Optional fields: `fallback` when the field is missing or null; another type is still
  // an error.
  std::int64_t integer(const std::string &key, std::int64_t fallback) const;
  double number(const std::string &key, double fallback) const;
  bool boolean(const std::string &key, bool fallback) const;
  std::string string(const std::string &key, const std::string &fallback) const;

  /// The elements of an array (this value must be one).
  std::vector<JsonConfig> elements() const;
  /// The value as a string / integer (for array elements and map values).
  std::string as_string() const;
  std::int64_t as_integer() const;

  /// A qkv::Error "origin: field 'where.key' <what>": for checks the caller makes on a
  /// value it read (a size that must be positive, a name it does not support).
  [[noreturn]] void fail(const std::string &key, const std::string &what) const;
  /// "origin: field 'where' <what>" (or "origin: <what>" for the whole file).
  [[noreturn]] void fail_here(const std::string &what) const;

private:
  // The parsed file is an nlohmann::json, kept out of this header: root_ owns it (shared by
  // every view into the file) and node_ points at this value inside it.
  JsonConfig(std::shared_ptr<const void> root, const void *node, std::string origin,
             std::string where);
  std::string path_of(const std::string &key) const;

  std::shared_ptr<const void> root_;
  const void *node_ = nullptr;
  std::string origin_, where_;
};

} // namespace qkv
