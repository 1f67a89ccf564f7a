#include "flotilla/trainer_bridge/task_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "lookup_tasks.h"
#include "nlohmann/json.hpp"

namespace flotilla::trainer_bridge {
namespace {

// Which arith questions a source draws: all, or one side of a fixed split in which a question
// (a op b) is held out when (a + 2b) mod 5 == 0 — a fifth of them, whatever the seed.
enum class ArithSplit { kAll, kTrain, kHeldOut };

bool HeldOut(int a, int b) { return (a + 2 * b) % 5 == 0; }

class ArithSource final : public TaskSource {
 public:
  ArithSource(std::string ops, int max, ArithSplit split, uint64_t seed)
      : ops_(std::move(ops)), max_(max), split_(split), rng_(seed) {}
  Task Next() override {
    absl::MutexLock lock(&mu_);
    std::uniform_int_distribution<int> operand(0, max_);
    std::uniform_int_distribution<size_t> op(0, ops_.size() - 1);
    int a = 0, b = 0;
    char o = '+';
    do {
      a = operand(rng_);
      b = operand(rng_);
      o = ops_[op(rng_)];
      if (o == '-' && b > a) std::swap(a, b);  // answers stay non-negative
    } while ((split_ == ArithSplit::kTrain && HeldOut(a, b)) || (split_ == ArithSplit::kHeldOut && !HeldOut(a, b)));
    int r = o == '+' ? a + b : o == '-' ? a - b : a * b;
    std::string q = absl::StrCat(a, std::string(1, o), b, "=");
    return Task{absl::StrCat("arith:", q), "arith", q, absl::StrCat(r), {}};
  }
  std::string family() const override { return "arith"; }

 private:
  const std::string ops_;
  const int max_;
  const ArithSplit split_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

class CopySource final : public TaskSource {
 public:
  CopySource(int len, std::string alphabet, uint64_t seed) : len_(len), alphabet_(std::move(alphabet)), rng_(seed) {}
  Task Next() override {
    absl::MutexLock lock(&mu_);
    std::uniform_int_distribution<size_t> pick(0, alphabet_.size() - 1);
    std::string s;
    for (int i = 0; i < len_; ++i) s.push_back(alphabet_[pick(rng_)]);
    return Task{absl::StrCat("copy:", s), "copy", absl::StrCat("copy ", s), s, {}};
  }
  std::string family() const override { return "copy"; }

 private:
  const int len_;
  const std::string alphabet_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

class FileSource final : public TaskSource {
 public:
  FileSource(std::vector<Task> tasks, std::string family, uint64_t seed)
      : tasks_(std::move(tasks)), family_(std::move(family)), rng_(seed) {}
  Task Next() override {
    absl::MutexLock lock(&mu_);
    std::uniform_int_distribution<size_t> pick(0, tasks_.size() - 1);
    return tasks_[pick(rng_)];
  }
  std::string family() const override { return family_; }

 private:
  const std::vector<Task> tasks_;
  const std::string family_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

// A folder of tasks: every task once per pass, each pass shuffled anew.
class FolderSource final : public TaskSource {
 public:
  FolderSource(std::vector<Task> tasks, uint64_t seed) : tasks_(std::move(tasks)), rng_(seed) {}
  Task Next() override {
    absl::MutexLock lock(&mu_);
    if (next_ == order_.size()) {
      order_.resize(tasks_.size());
      for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
      std::shuffle(order_.begin(), order_.end(), rng_);
      next_ = 0;
    }
    return tasks_[order_[next_++]];
  }
  std::string family() const override { return "terminal"; }

 private:
  const std::vector<Task> tasks_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> order_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

bool IsTaskFolder(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "task.toml") || std::filesystem::exists(dir / "task.yaml");
}

// A task folder, or a folder of them (in name order), as tasks carrying their TerminalTask.
absl::StatusOr<std::vector<Task>> FolderTasks(const std::string& source, const TaskPreparer& prepare) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (IsTaskFolder(source)) {
    dirs.push_back(source);
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(source, ec)) {
      if (entry.is_directory() && IsTaskFolder(entry.path())) dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
  }
  if (dirs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("task folder '", source, "' holds no task (task.toml or task.yaml)"));
  }
  std::vector<Task> tasks;
  for (const fs::path& d : dirs) {
    auto t = worker::LoadTerminalTask(fs::absolute(d).string());
    if (!t.ok()) return t.status();
    if (prepare) RETURN_IF_ERROR(prepare(&*t));
    Task task{t->name, "terminal", t->instruction, "", {}};
    task.terminal = std::move(*t);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

absl::StatusOr<std::map<std::string, std::string>> Params(const std::string& source, absl::string_view query) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.size() != 2) return absl::InvalidArgumentError(absl::StrCat("source '", source, "': bad parameter '", std::string(kv), "'"));
    out[p[0]] = p[1];
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TaskSource>> TaskSource::Open(const std::string& source, uint64_t seed,
                                                             const TaskPreparer& prepare) {
  if (source.starts_with("builtin:")) {
    std::string rest = source.substr(8);
    std::string family = rest.substr(0, rest.find('?'));
    std::string query = rest.find('?') == std::string::npos ? "" : rest.substr(rest.find('?') + 1);
    auto params = Params(source, query);
    if (!params.ok()) return params.status();
    auto get_int = [&](const std::string& k, int dflt, int lo, int hi) -> absl::StatusOr<int> {
      auto it = params->find(k);
      if (it == params->end()) return dflt;
      int v = 0;
      if (!absl::SimpleAtoi(it->second, &v) || v < lo || v > hi) {
        return absl::InvalidArgumentError(absl::StrCat("source '", source, "': ", k, " must be an integer in ", lo, "..", hi));
      }
      return v;
    };
    if (family == "arith") {
      std::string ops = params->contains("ops") ? (*params)["ops"] : "+";
      if (ops.empty() || ops.find_first_not_of("+-*") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("source '", source, "': ops must be a non-empty subset of '+-*'"));
      }
      auto max = get_int("max", 9, 0, 1000000);
      if (!max.ok()) return max.status();
      const std::string split = params->contains("split") ? (*params)["split"] : "all";
      if (split != "all" && split != "train" && split != "heldout") {
        return absl::InvalidArgumentError(absl::StrCat("source '", source, "': split must be all, train or heldout"));
      }
      if (split != "all" && *max < 4) {
        return absl::InvalidArgumentError(absl::StrCat("source '", source, "': split needs max >= 4"));
      }
      const ArithSplit which = split == "train" ? ArithSplit::kTrain : split == "heldout" ? ArithSplit::kHeldOut : ArithSplit::kAll;
      return std::unique_ptr<TaskSource>(new ArithSource(ops, *max, which, seed));
    }
    if (family == "copy") {
      auto len = get_int("len", 4, 1, 256);
      if (!len.ok()) return len.status();
      std::string alphabet = params->contains("alphabet") ? (*params)["alphabet"] : "abcd";
      if (alphabet.empty() || alphabet.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("source '", source, "': alphabet must be lowercase letters"));
      }
      return std::unique_ptr<TaskSource>(new CopySource(*len, alphabet, seed));
    }
    if (family == "lookup") return OpenLookupSource(source, *params, seed);
    return absl::InvalidArgumentError(absl::StrCat("source '", source, "': unknown builtin family '", family, "'"));
  }
  if (std::filesystem::is_directory(source)) {
    auto tasks = FolderTasks(source, prepare);
    if (!tasks.ok()) return tasks.status();
    return std::unique_ptr<TaskSource>(new FolderSource(std::move(*tasks), seed));
  }
  std::ifstream in(source);
  if (!in) return absl::NotFoundError(absl::StrCat("task file '", source, "' cannot be read"));
  std::vector<Task> tasks;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string() ||
        !j.contains("answer") || !j["answer"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", lineno, ": expected {\"prompt\": str, \"answer\": str}"));
    }
    std::string id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : absl::StrCat("line", lineno);
    tasks.push_back(Task{id, "file", j["prompt"].get<std::string>(), j["answer"].get<std::string>(), {}});
  }
  if (tasks.empty()) return absl::InvalidArgumentError(absl::StrCat("task file '", source, "' has no tasks"));
  return std::unique_ptr<TaskSource>(new FileSource(std::move(tasks), "file", seed));
}

}  // namespace flotilla::trainer_bridge
