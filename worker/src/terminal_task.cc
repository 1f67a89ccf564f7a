#include "flotilla/worker/terminal_task.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace flotilla::worker {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(p.string(), ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every regular file under `root` (recursively), keyed by `dest` + its relative path.
absl::Status CollectFiles(const fs::path& root, const std::string& dest,
                          const std::vector<std::string>& skip_names,
                          std::map<std::string, std::string>* out) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    fs::path rel = fs::relative(it->path(), root);
    std::string top = rel.begin()->string();
    bool skip = false;
    for (const std::string& s : skip_names) skip = skip || top == s;
    if (skip) continue;
    ASSIGN_OR_RETURN(std::string content, Read(it->path()));
    (*out)[dest + "/" + rel.generic_string()] = std::move(content);
  }
  if (ec) return absl::InternalError(absl::StrCat(root.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// The few TOML forms task.toml uses: [section] headers and key = number | "string".
absl::StatusOr<std::map<std::string, std::string>> ParseSimpleToml(const std::string& text,
                                                                   const std::string& file) {
  std::map<std::string, std::string> out;
  std::string section;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      if (line.back() != ']') return absl::InvalidArgumentError(absl::StrCat(file, ":", line_no, ": bad section header"));
      section = line.substr(1, line.size() - 2);
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;  // arrays and tables spanning lines are not needed
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out[section.empty() ? key : section + "." + key] = value;
  }
  return out;
}

absl::Status Seconds(const std::map<std::string, std::string>& toml, const std::string& key,
                     const std::string& file, uint32_t* out_ms) {
  auto it = toml.find(key);
  if (it == toml.end()) return absl::OkStatus();
  double v;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v) || v <= 0 || v > 86400) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": expected seconds in (0, 86400], got '",
                                                   it->second, "'"));
  }
  *out_ms = static_cast<uint32_t>(v * 1000);
  return absl::OkStatus();
}

// The most memory a task may ask for: 16 TiB, as memory_mb's bound.
constexpr double kMaxMemoryBytes = double(1ull << 44);

// [environment] memory: "2G", "512M", "1024K" or a number of MiB. Numbers are checked finite
// before they are converted: NaN or a huge value would make the conversion undefined.
absl::Status Memory(const std::map<std::string, std::string>& toml, const std::string& file, TerminalTask* t) {
  if (auto it = toml.find("environment.memory_mb"); it != toml.end()) {
    double mb;
    if (!absl::SimpleAtod(it->second, &mb) || !std::isfinite(mb) || mb < 8 || mb > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": environment.memory_mb: expected MiB in [8, 16777216], got '", it->second, "'"));
    }
    t->memory_bytes = static_cast<uint64_t>(mb * (1 << 20));
  }
  if (auto it = toml.find("environment.memory"); it != toml.end() && t->memory_bytes == 0) {
    std::string v = absl::AsciiStrToUpper(it->second);
    double scale = 1 << 20;
    if (!v.empty() && (v.back() == 'B')) v.pop_back();
    if (!v.empty() && v.back() == 'G') scale = 1 << 30;
    if (!v.empty() && v.back() == 'K') scale = 1 << 10;
    if (!v.empty() && (v.back() == 'G' || v.back() == 'M' || v.back() == 'K')) v.pop_back();
    double n;
    if (!absl::SimpleAtod(v, &n) || !std::isfinite(n) || n * scale < (8 << 20) || n * scale > kMaxMemoryBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": environment.memory: expected a size like \"2G\" or \"512M\", got '", it->second, "'"));
    }
    t->memory_bytes = static_cast<uint64_t>(n * scale);
  }
  if (auto it = toml.find("environment.storage_mb"); it != toml.end()) {
    double mb;
    if (!absl::SimpleAtod(it->second, &mb) || !std::isfinite(mb) || mb < 1 || mb > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": environment.storage_mb: expected MiB in [1, 16777216], got '", it->second, "'"));
    }
    t->disk_bytes = static_cast<uint64_t>(mb * (1 << 20));
  }
  if (auto it = toml.find("environment.cpus"); it != toml.end()) {
    if (!absl::SimpleAtod(it->second, &t->cpus) || !std::isfinite(t->cpus) || t->cpus <= 0 || t->cpus > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": environment.cpus: expected a number in (0, 1024], got '", it->second, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadV2(const fs::path& dir, TerminalTask* t) {
  t->layout = TerminalTask::Layout::kTerminalBench2;
  ASSIGN_OR_RETURN(std::string toml_text, Read(dir / "task.toml"));
  ASSIGN_OR_RETURN(auto toml, ParseSimpleToml(toml_text, "task.toml"));
  RETURN_IF_ERROR(Seconds(toml, "agent.timeout_sec", "task.toml", &t->agent_timeout_ms));
  RETURN_IF_ERROR(Seconds(toml, "verifier.timeout_sec", "task.toml", &t->test_timeout_ms));
  RETURN_IF_ERROR(Memory(toml, "task.toml", t));
  ASSIGN_OR_RETURN(t->instruction, Read(dir / "instruction.md"));
  if (fs::exists(dir / "environment" / "Dockerfile")) {
    t->dockerfile = (dir / "environment" / "Dockerfile").string();
    t->build_context = (dir / "environment").string();
  }
  if (!fs::exists(dir / "tests" / "test.sh")) {
    return absl::InvalidArgumentError(absl::StrCat((dir / "tests").string(), ": test.sh missing"));
  }
  if (fs::exists(dir / "environment")) {
    RETURN_IF_ERROR(CollectFiles(dir / "environment", "/app", {"Dockerfile", "docker-compose.yaml"},
                                 &t->environment_files));
  }
  RETURN_IF_ERROR(CollectFiles(dir / "tests", "/tests", {}, &t->test_files));
  t->test_command = {"bash", "/tests/test.sh"};
  t->reward_file = "/logs/verifier/reward.txt";
  t->reward_json_file = "/logs/verifier/reward.json";
  if (fs::exists(dir / "solution" / "solve.sh")) {
    ASSIGN_OR_RETURN(t->solution_script, Read(dir / "solution" / "solve.sh"));
  }
  return absl::OkStatus();
}

absl::Status LoadV1(const fs::path& dir, TerminalTask* t) {
  t->layout = TerminalTask::Layout::kTerminalBench1;
  ASSIGN_OR_RETURN(std::string yaml_text, Read(dir / "task.yaml"));
  YAML::Node y;
  try {
    y = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("task.yaml:", e.mark.line + 1, ": ", e.msg));
  }
  // Indexing a scalar or a sequence throws in yaml-cpp: anything but a mapping is refused first.
  if (!y.IsMap()) return absl::InvalidArgumentError("task.yaml: expected a mapping of fields");
  if (!y["instruction"] || !y["instruction"].IsScalar()) {
    return absl::InvalidArgumentError("task.yaml: instruction: required string");
  }
  t->instruction = y["instruction"].as<std::string>();
  if (fs::exists(dir / "Dockerfile")) {
    t->dockerfile = (dir / "Dockerfile").string();
    t->build_context = dir.string();
  }
  for (auto [key, out] : {std::pair{"max_agent_timeout_sec", &t->agent_timeout_ms},
                          std::pair{"max_test_timeout_sec", &t->test_timeout_ms}}) {
    if (!y[key]) continue;
    double v = 0;
    try {
      v = y[key].as<double>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(absl::StrCat("task.yaml: ", key, ": expected a number of seconds"));
    }
    if (!std::isfinite(v) || v <= 0 || v > 86400) {
      return absl::InvalidArgumentError(absl::StrCat("task.yaml: ", key, ": out of range"));
    }
    *out = static_cast<uint32_t>(v * 1000);
  }
  if (!fs::exists(dir / "run-tests.sh")) {
    return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": run-tests.sh missing"));
  }
  RETURN_IF_ERROR(CollectFiles(dir, "/app",
                               {"task.yaml", "run-tests.sh", "solution.sh", "tests", "Dockerfile",
                                "docker-compose.yaml"},
                               &t->environment_files));
  if (fs::exists(dir / "tests")) {
    RETURN_IF_ERROR(CollectFiles(dir / "tests", "/tests", {}, &t->test_files));
  }
  ASSIGN_OR_RETURN(t->test_files["/tests/run-tests.sh"], Read(dir / "run-tests.sh"));
  t->test_command = {"bash", "/tests/run-tests.sh"};
  if (fs::exists(dir / "solution.sh")) {
    ASSIGN_OR_RETURN(t->solution_script, Read(dir / "solution.sh"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TerminalTask> LoadTerminalTask(const std::string& dir_text) {
  fs::path dir(dir_text);
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("task ", dir_text, ": not a directory"));
  TerminalTask t;
  t.dir = fs::absolute(dir).lexically_normal().string();
  t.name = fs::absolute(dir).lexically_normal().filename().string();
  if (t.name.empty()) t.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  if (fs::exists(dir / "task.toml")) {
    dir = fs::path(t.dir);
    RETURN_IF_ERROR(Annotate(LoadV2(dir, &t), absl::StrCat("task ", dir_text)));
  } else if (fs::exists(dir / "task.yaml")) {
    dir = fs::path(t.dir);
    RETURN_IF_ERROR(Annotate(LoadV1(dir, &t), absl::StrCat("task ", dir_text)));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", dir_text, ": neither task.toml (Terminal-Bench 2.x) nor task.yaml (1.x)"));
  }
  return t;
}

absl::StatusOr<double> ParseReward(const std::string& text) {
  double v;
  std::string s(absl::StripAsciiWhitespace(text));
  if (!absl::SimpleAtod(s, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("reward file: expected a number, got '", s.substr(0, 40), "'"));
  }
  return v;
}

absl::StatusOr<double> ParseRewardJson(const std::string& text, const std::string& file) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": not JSON"));
  if (j.is_number()) return j.get<double>();
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": expected a number or an object"));
  if (j.contains("reward")) {
    if (!j["reward"].is_number()) return absl::InvalidArgumentError(absl::StrCat(file, ": reward: expected a number"));
    return j["reward"].get<double>();
  }
  double sum = 0;
  int n = 0;
  for (const auto& [k, v] : j.items()) {
    if (v.is_number()) {
      sum += v.get<double>();
      ++n;
    }
  }
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(file, ": no numeric member to take the reward from"));
  return sum / n;
}

}  // namespace flotilla::worker
