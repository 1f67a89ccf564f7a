// builtin:lookup: the instruction names a file in the sandbox that holds a number; the agent must
// read it with a command (the model cannot know it otherwise), optionally add a number given in
// the instruction, and write the result to /app/answer.txt, which the task's test compares with
// the expected answer. Each task is built whole in memory: no task folder.
#include "lookup_tasks.h"

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyz";
constexpr char kAnswerFile[] = "/app/answer.txt";

enum class LookupSplit { kAll, kTrain, kHeldOut };

// A fixed fifth of the (file, value, addend) combinations is held out, whatever the seed.
bool HeldOut(int file, int value, int addend) { return (value + 2 * file + 3 * addend) % 5 == 0; }

struct LookupParams {
  int files = 4;    // the file is one of data/a.txt .. data/<files-th letter>.txt
  int max = 99;     // values 0..max
  int add = 0;      // 0: the answer is the value; else value + k with k in 1..add
  LookupSplit split = LookupSplit::kAll;
};

Task MakeTask(int file, int value, int addend) {
  const std::string letter(1, kLetters[file]);
  const std::string path = absl::StrCat("/app/data/", letter, ".txt");
  const std::string answer = absl::StrCat(value + addend);
  Task t;
  t.id = addend == 0 ? absl::StrCat("lookup:", letter, "=", value) : absl::StrCat("lookup:", letter, "=", value, "+", addend);
  t.family = "lookup";
  t.prompt = addend == 0 ? absl::StrCat("Write the number in ", path, " to ", kAnswerFile, ".")
                         : absl::StrCat("Add ", addend, " to the number in ", path, " and write the sum to ", kAnswerFile, ".");
  t.answer = answer;

  worker::TerminalTask& task = t.terminal;
  task.name = t.id;
  task.layout = worker::TerminalTask::Layout::kTerminalBench2;
  task.instruction = t.prompt;
  task.agent_timeout_ms = 60'000;
  task.test_timeout_ms = 30'000;
  task.environment_files[path] = absl::StrCat(value, "\n");
  task.test_files["/tests/test.sh"] = absl::StrCat(
      "#!/bin/bash\n"
      "mkdir -p /logs/verifier\n"
      "got=$(tr -d '[:space:]' < ", kAnswerFile, " 2>/dev/null)\n"
      "if [ \"$got\" = \"", answer, "\" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n");
  task.test_command = {"bash", "/tests/test.sh"};
  task.solution_script = addend == 0
      ? absl::StrCat("#!/bin/bash\nv=$(cat ", path, ")\necho \"$v\" > ", kAnswerFile, "\n")
      : absl::StrCat("#!/bin/bash\nv=$(cat ", path, ")\necho $((v + ", addend, ")) > ", kAnswerFile, "\n");
  task.reward_file = "/logs/verifier/reward.txt";

  task.reference_steps = {{absl::StrCat("cat ", path), absl::StrCat(value, "\n"), 0},
                          {absl::StrCat("echo ", answer, " > ", kAnswerFile), "", 0}};
  return t;
}

class LookupSource final : public TaskSource {
 public:
  LookupSource(LookupParams params, uint64_t seed) : params_(params), rng_(seed) {}
  Task Next() override {
    absl::MutexLock lock(&mu_);
    std::uniform_int_distribution<int> file(0, params_.files - 1);
    std::uniform_int_distribution<int> value(0, params_.max);
    std::uniform_int_distribution<int> addend(1, std::max(1, params_.add));
    int f = 0, v = 0, k = 0;
    do {
      f = file(rng_);
      v = value(rng_);
      k = params_.add == 0 ? 0 : addend(rng_);
    } while ((params_.split == LookupSplit::kTrain && HeldOut(f, v, k)) ||
             (params_.split == LookupSplit::kHeldOut && !HeldOut(f, v, k)));
    return MakeTask(f, v, k);
  }
  std::string family() const override { return "lookup"; }

 private:
  const LookupParams params_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<TaskSource>> OpenLookupSource(const std::string& source,
                                                             const std::map<std::string, std::string>& params,
                                                             uint64_t seed) {
  auto bad = [&](const std::string& key, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("source '", source, "': ", key, ": ", why));
  };
  LookupParams p;
  for (const auto& [key, text] : params) {
    if (key == "split") {
      if (text == "all") {
        p.split = LookupSplit::kAll;
      } else if (text == "train") {
        p.split = LookupSplit::kTrain;
      } else if (text == "heldout") {
        p.split = LookupSplit::kHeldOut;
      } else {
        return bad(key, absl::StrCat("must be all, train or heldout, not '", text, "'"));
      }
      continue;
    }
    int* field = key == "files" ? &p.files : key == "max" ? &p.max : key == "add" ? &p.add : nullptr;
    if (field == nullptr) return bad(key, "unknown parameter (lookup takes files, max, add, split)");
    const int lo = key == "files" ? 1 : 0;
    const int hi = key == "files" ? 26 : key == "max" ? 1'000'000 : 1000;
    if (!absl::SimpleAtoi(text, field) || *field < lo || *field > hi) {
      return bad(key, absl::StrCat("must be an integer in ", lo, "..", hi, ", not '", text, "'"));
    }
  }
  if (p.split != LookupSplit::kAll && p.max < 4) return bad("split", "needs max >= 4");
  return std::unique_ptr<TaskSource>(new LookupSource(p, seed));
}

}  // namespace flotilla::trainer_bridge
