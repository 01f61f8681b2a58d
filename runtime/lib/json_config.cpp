// JsonConfig: typed, named reads of JSON configuration files (nlohmann-json).
#include <qkv/runtime/json_config.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <qkv/dsl/error.hpp>

namespace qkv {

using json = nlohmann::json;

namespace {

const json &node_of(const void *p) { return *static_cast<const json *>(p); }

/// "a string (\"384\")", "an integer (3)", ...: what a value is, for errors.
std::string describe_value(const json &v) {
  std::string text = v.dump();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  switch (v.type()) {
  case json::value_t::null: return "null";
  case json::value_t::boolean: return "a boolean (" + text + ")";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned: return "an integer (" + text + ")";
  case json::value_t::number_float: return "a number (" + text + ")";
  case json::value_t::string: return "a string (" + text + ")";
  case json::value_t::array: return "an array";
  case json::value_t::object: return "an object";
  default: return "a " + std::string(v.type_name());
  }
}

} // namespace

JsonConfig::JsonConfig(std::shared_ptr<const void> root, const void *node, std::string origin,
                       std::string where)
    : root_(std::move(root)), node_(node), origin_(std::move(origin)), where_(std::move(where)) {}

JsonConfig JsonConfig::load(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    user_error(path + ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad())
    user_error(path + ": cannot read the file");
  return parse(text.str(), path);
}

JsonConfig JsonConfig::parse(const std::string &text, const std::string &origin) {
  auto root = std::make_shared<json>();
  try {
    *root = json::parse(text);
  } catch (const json::exception &e) { // a syntax error, or a number too large (406)
    user_error(origin + ": not valid JSON (" + e.what() + ")");
  }
  const void *node = root.get();
  return JsonConfig(std::move(root), node, origin, "");
}

std::string JsonConfig::path_of(const std::string &key) const {
  return where_.empty() ? key : where_ + "." + key;
}

void JsonConfig::fail(const std::string &key, const std::string &what) const {
  user_error(origin_ + ": field '" + path_of(key) + "' " + what);
}

void JsonConfig::fail_here(const std::string &what) const {
  if (where_.empty())
    user_error(origin_ + ": " + what);
  user_error(origin_ + ": field '" + where_ + "' " + what);
}

bool JsonConfig::is_object() const { return node_of(node_).is_object(); }
bool JsonConfig::is_array() const { return node_of(node_).is_array(); }

bool JsonConfig::has(const std::string &key) const {
  const json &n = node_of(node_);
  if (!n.is_object())
    return false;
  auto it = n.find(key);
  return it != n.end() && !it->is_null();
}

std::vector<std::string> JsonConfig::keys() const {
  const json &n = node_of(node_);
  if (!n.is_object())
    fail_here("must be an object, got " + describe_value(n));
  std::vector<std::string> out;
  for (auto it = n.begin(); it != n.end(); ++it)
    out.push_back(it.key());
  return out;
}

JsonConfig JsonConfig::at(const std::string &key) const {
  const json &n = node_of(node_);
  if (!n.is_object())
    fail_here("must be an object, got " + describe_value(n));
  auto it = n.find(key);
  if (it == n.end() || it->is_null())
    fail(key, "is missing");
  return JsonConfig(root_, &*it, origin_, path_of(key));
}

std::vector<JsonConfig> JsonConfig::elements() const {
  const json &n = node_of(node_);
  if (!n.is_array())
    fail_here("must be an array, got " + describe_value(n));
  std::vector<JsonConfig> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    out.push_back(JsonConfig(root_, &n[i], origin_, where_ + "[" + std::to_string(i) + "]"));
  return out;
}

std::string JsonConfig::as_string() const {
  const json &n = node_of(node_);
  if (!n.is_string())
    fail_here("must be a string, got " + describe_value(n));
  return n.get<std::string>();
}

std::int64_t JsonConfig::as_integer() const {
  const json &n = node_of(node_);
  if (n.is_number_unsigned() && n.get<std::uint64_t>() > INT64_MAX)
    fail_here("is too large: " + n.dump());
  if (!n.is_number_integer())
    fail_here("must be an integer, got " + describe_value(n));
  return n.get<std::int64_t>();
}

std::int64_t JsonConfig::integer(const std::string &key) const { return at(key).as_integer(); }

double JsonConfig::number(const std::string &key) const {
  JsonConfig v = at(key);
  const json &n = node_of(v.node_);
  if (!n.is_number())
    fail(key, "must be a number, got " + describe_value(n));
  return n.get<double>();
}

bool JsonConfig::boolean(const std::string &key) const {
  JsonConfig v = at(key);
  const json &n = node_of(v.node_);
  if (!n.is_boolean())
    fail(key, "must be true or false, got " + describe_value(n));
  return n.get<bool>();
}

std::string JsonConfig::string(const std::string &key) const { return at(key).as_string(); }

std::int64_t JsonConfig::integer(const std::string &key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}
double JsonConfig::number(const std::string &key, double fallback) const {
  return has(key) ? number(key) : fallback;
}
bool JsonConfig::boolean(const std::string &key, bool fallback) const {
  return has(key) ? boolean(key) : fallback;
}
std::string JsonConfig::string(const std::string &key, const std::string &fallback) const {
  return has(key) ? string(key) : fallback;
}

} // namespace qkv
