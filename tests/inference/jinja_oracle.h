// Runs tests/inference/render_chat_template.py (Debian's python3-jinja2 under transformers'
// conventions) over a batch of cases, for the interpreter's byte-equality tests.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::inference::testing {

struct OracleResult {
  bool ok = false;
  std::string text;   // the rendering, when ok
  std::string error;  // the Python exception, when not
};

inline std::string OracleSourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s == nullptr ? "." : s;
}

// Whether Debian's python3 has jinja2 (python3-jinja2).
inline bool OracleAvailable() {
  int status = 0;
  flotilla::testing::RunShell("/usr/bin/python3 -c 'import jinja2' 2>/dev/null", &status);
  return status == 0;
}

// One result per case, or nullopt when the oracle failed as a whole.
inline std::optional<std::vector<OracleResult>> RunOracle(const nlohmann::ordered_json& cases) {
  flotilla::testing::TempDir dir;
  std::string path = dir.file("cases.json");
  std::ofstream(path) << cases.dump();
  int status = 0;
  std::string out = flotilla::testing::RunShell(
      "/usr/bin/python3 '" + OracleSourceDir() + "/tests/inference/render_chat_template.py' '" + path + "'", &status);
  if (status != 0) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() != cases.size()) return std::nullopt;
  std::vector<OracleResult> results;
  for (const auto& r : j) {
    OracleResult o;
    o.ok = r.value("ok", false);
    o.text = r.value("text", "");
    o.error = r.value("error", "");
    results.push_back(std::move(o));
  }
  return results;
}

}  // namespace flotilla::inference::testing
