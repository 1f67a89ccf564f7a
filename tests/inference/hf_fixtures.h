// The Hugging Face fixtures of tests/inference/testdata/hf (made by scripts/make_hf_fixtures.py
// with transformers): each folder holds config.json, the weights and golden.json.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace flotilla::testing {

inline std::string HfFixtureRoot() {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/tests/inference/testdata/hf";
}

// Every fixture folder with a golden.json, sorted by name.
inline std::vector<std::string> HfFixtureNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(HfFixtureRoot(), ec)) {
    if (std::filesystem::exists(e.path() / "golden.json")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

}  // namespace flotilla::testing
