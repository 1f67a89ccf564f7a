// builtin:lookup: the instruction names a file in the sandbox that holds a number; the agent must
// read it with a command (the model cannot know it otherwise), optionally add a number given in
// the instruction, and write the result to /app/answer.txt, which the task's test compares with
// the expected answer. Each task is built whole in memory: no task folder.
#include "lookup_tasks.h"

#include <algorithm>
#include <optional>
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
  int look = 100;   // percent of reference episodes that use the file (the rest guess)
  bool via_cp = false;  // the episodes that use the file copy it with cp (via=cp)
  LookupSplit split = LookupSplit::kAll;
};

// The reference episode (the warm start's demonstration). By default the demonstrator reads the
// file (cat) and writes the number it read (echo); with `via_cp` it lists /app/data and copies
// the file to the answer with cp (the tool carries the number: the model need not copy a token
// from the tool output). When `guess` is set it lists /app/data (which shows the file's name,
// not the number) and writes *guess instead, as an agent that answers without looking would.
Task MakeTask(int file, int value, int addend, bool via_cp, std::optional<int> guess = std::nullopt) {
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

  if (guess.has_value()) {
    task.reference_steps = {{"ls /app/data", absl::StrCat(letter, ".txt\n"), 0},
                            {absl::StrCat("echo ", *guess, " > ", kAnswerFile), "", 0}};
  } else if (via_cp) {
    task.reference_steps = {{"ls /app/data", absl::StrCat(letter, ".txt\n"), 0},
                            {absl::StrCat("cp ", path, " ", kAnswerFile), "", 0}};
  } else {
    task.reference_steps = {{absl::StrCat("cat ", path), absl::StrCat(value, "\n"), 0},
                            {absl::StrCat("echo ", answer, " > ", kAnswerFile), "", 0}};
  }
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
    if (params_.look >= 100) return MakeTask(f, v, k, params_.via_cp);
    // Drawn only for a mixed demonstrator, so look=100 draws the same tasks as before.
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<int> guess(0, params_.max + params_.add);
    const bool looks = percent(rng_) < params_.look;
    const int g = guess(rng_);
    return looks ? MakeTask(f, v, k, params_.via_cp) : MakeTask(f, v, k, params_.via_cp, g);
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
    if (key == "via") {
      if (text != "echo" && text != "cp") return bad(key, absl::StrCat("must be echo or cp, not '", text, "'"));
      p.via_cp = text == "cp";
      continue;
    }
    int* field = key == "files" ? &p.files
                 : key == "max" ? &p.max
                 : key == "add" ? &p.add
                 : key == "look" ? &p.look
                                 : nullptr;
    if (field == nullptr) return bad(key, "unknown parameter (lookup takes files, max, add, look, via, split)");
    const int lo = key == "files" ? 1 : 0;
    const int hi = key == "files" ? 26 : key == "max" ? 1'000'000 : key == "look" ? 100 : 1000;
    if (!absl::SimpleAtoi(text, field) || *field < lo || *field > hi) {
      return bad(key, absl::StrCat("must be an integer in ", lo, "..", hi, ", not '", text, "'"));
    }
  }
  if (p.split != LookupSplit::kAll && p.max < 4) return bad("split", "needs max >= 4");
  if (p.via_cp && p.add > 0) return bad("via", "cp copies the number as it is: needs add=0");
  return std::unique_ptr<TaskSource>(new LookupSource(p, seed));
}

}  // namespace flotilla::trainer_bridge
