// Where the model tests find all-MiniLM-L6-v2 and the committed fixtures.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <qkv/models/sentence_encoder.hpp>

namespace qkv::test {

/// The model directory (scripts/fetch-model.sh minilm puts it there; ./qkv.sh test runs
/// that script). A missing model fails the test with what to run: these tests never skip.
inline std::string minilm_dir() {
  std::string dir = default_minilm_dir();
  if (!std::filesystem::exists(std::filesystem::path(dir) / "model.safetensors"))
    ADD_FAILURE() << "all-MiniLM-L6-v2 is not in " << dir
                  << "; run scripts/fetch-model.sh minilm (./qkv.sh test does)";
  return dir;
}

/// A committed fixture of tests/models/data (scripts/make-minilm-fixtures.py wrote them).
inline std::string fixture(const std::string &name) {
  return std::string(QKV_MODEL_TEST_DATA) + "/" + name;
}

inline nlohmann::json read_json(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    ADD_FAILURE() << "cannot open " << path;
  return nlohmann::json::parse(in);
}

} // namespace qkv::test
