// builtin:lookup: deterministic per seed, a fixed held-out fifth, every task built whole in
// memory (file, test, solution, reference steps), and bad parameters named with the source.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/worker/scaffold_transcript.h"
#include "nlohmann/json.hpp"

namespace flotilla::trainer_bridge {
namespace {

// "lookup:c=42" or "lookup:c=42+3" -> file index, value, addend.
struct Parsed { int file = -1; int value = -1; int addend = 0; };
Parsed Parse(const std::string& id) {
  Parsed p;
  EXPECT_EQ(id.substr(0, 7), "lookup:");
  p.file = id[7] - 'a';
  EXPECT_EQ(id[8], '=');
  std::string rest = id.substr(9);
  size_t plus = rest.find('+');
  EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, plus), &p.value)) << id;
  if (plus != std::string::npos) {
    EXPECT_TRUE(absl::SimpleAtoi(rest.substr(plus + 1), &p.addend)) << id;
  }
  return p;
}

std::unique_ptr<TaskSource> Open(const std::string& source, uint64_t seed) {
  auto s = TaskSource::Open(source, seed);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(LookupTasksTest, SameSeedSameTasksOtherSeedOthers) {
  auto a = Open("builtin:lookup", 11), b = Open("builtin:lookup", 11), c = Open("builtin:lookup", 12);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->family(), "lookup");
  int same_as_other_seed = 0;
  for (int i = 0; i < 50; ++i) {
    Task x = a->Next(), y = b->Next(), z = c->Next();
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.terminal.environment_files, y.terminal.environment_files);
    EXPECT_EQ(x.terminal.test_files, y.terminal.test_files);
    same_as_other_seed += x.id == z.id;
  }
  EXPECT_LT(same_as_other_seed, 5);
}

TEST(LookupTasksTest, TaskIsBuiltWholeInMemory) {
  auto src = Open("builtin:lookup?files=3&max=50", 4);
  ASSERT_TRUE(src);
  for (int i = 0; i < 40; ++i) {
    Task t = src->Next();
    Parsed p = Parse(t.id);
    ASSERT_GE(p.file, 0);
    ASSERT_LT(p.file, 3);
    ASSERT_GE(p.value, 0);
    ASSERT_LE(p.value, 50);
    EXPECT_EQ(p.addend, 0);
    const std::string v = std::to_string(p.value);
    const std::string path = std::string("/app/data/") + char('a' + p.file) + ".txt";
    EXPECT_EQ(t.family, "lookup");
    EXPECT_EQ(t.answer, v);
    EXPECT_EQ(t.prompt, "Write the number in " + path + " to /app/answer.txt.");
    const worker::TerminalTask& task = t.terminal;
    EXPECT_EQ(task.name, t.id);
    EXPECT_EQ(task.instruction, t.prompt);
    EXPECT_EQ(task.layout, worker::TerminalTask::Layout::kTerminalBench2);
    EXPECT_EQ(task.environment_files, (std::map<std::string, std::string>{{path, v + "\n"}}));
    ASSERT_EQ(task.test_files.size(), 1u);
    EXPECT_EQ(task.test_files.at("/tests/test.sh"),
              "#!/bin/bash\nmkdir -p /logs/verifier\n"
              "got=$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null)\n"
              "if [ \"$got\" = \"" + v + "\" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n");
    EXPECT_EQ(task.test_command, (std::vector<std::string>{"bash", "/tests/test.sh"}));
    EXPECT_EQ(task.reward_file, "/logs/verifier/reward.txt");
    EXPECT_EQ(task.solution_script, "#!/bin/bash\nv=$(cat " + path + ")\necho \"$v\" > /app/answer.txt\n");
    EXPECT_TRUE(task.image.empty());
    EXPECT_TRUE(task.dir.empty());
    ASSERT_EQ(task.reference_steps.size(), 2u);
    EXPECT_EQ(task.reference_steps[0].command, "cat " + path);
    EXPECT_EQ(task.reference_steps[0].output, v + "\n");
    EXPECT_EQ(task.reference_steps[1].command, "echo " + v + " > /app/answer.txt");
    EXPECT_EQ(task.reference_steps[1].output, "");
  }
}

TEST(LookupTasksTest, AddAsksForTheNumberPlusAGivenAddend) {
  auto src = Open("builtin:lookup?files=1&max=9&add=4", 2);
  ASSERT_TRUE(src);
  std::set<int> addends;
  for (int i = 0; i < 200; ++i) {
    Task t = src->Next();
    Parsed p = Parse(t.id);
    EXPECT_EQ(p.file, 0);
    addends.insert(p.addend);
    const std::string k = std::to_string(p.addend);
    EXPECT_EQ(t.answer, std::to_string(p.value + p.addend));
    EXPECT_EQ(t.prompt, "Add " + k + " to the number in /app/data/a.txt and write the sum to /app/answer.txt.");
    EXPECT_EQ(t.terminal.environment_files.at("/app/data/a.txt"), std::to_string(p.value) + "\n");
    EXPECT_EQ(t.terminal.solution_script,
              "#!/bin/bash\nv=$(cat /app/data/a.txt)\necho $((v + " + k + ")) > /app/answer.txt\n");
    EXPECT_EQ(t.terminal.reference_steps[1].command, "echo " + t.answer + " > /app/answer.txt");
  }
  EXPECT_EQ(addends, (std::set<int>{1, 2, 3, 4}));
}

TEST(LookupTasksTest, SplitsHoldOutAFixedFifth) {
  for (uint64_t seed : {1u, 9u}) {
    auto train = Open("builtin:lookup?files=2&max=9&split=train", seed);
    auto held = Open("builtin:lookup?files=2&max=9&split=heldout", seed);
    ASSERT_TRUE(train && held);
    std::set<std::string> train_seen, held_seen;
    for (int i = 0; i < 1000; ++i) {
      Task t = train->Next(), h = held->Next();
      Parsed pt = Parse(t.id), ph = Parse(h.id);
      EXPECT_NE((pt.value + 2 * pt.file) % 5, 0) << t.id;
      EXPECT_EQ((ph.value + 2 * ph.file) % 5, 0) << h.id;
      train_seen.insert(t.id);
      held_seen.insert(h.id);
    }
    // 2 files x 10 values: a:0, a:5, b:3 and b:8 are held out, the other 16 are for training.
    EXPECT_EQ(held_seen, (std::set<std::string>{"lookup:a=0", "lookup:a=5", "lookup:b=3", "lookup:b=8"}));
    EXPECT_EQ(train_seen.size(), 16u);
  }
}

TEST(LookupTasksTest, LookSetsTheShareOfReferenceEpisodesThatReadTheFile) {
  // look=30: a mixed demonstrator. 30% of reference episodes read the file and write its number;
  // the rest list /app/data (the file's name, not its number) and write a guess in 0..max. The
  // task itself (instruction, file, test, solution) is the same either way.
  auto src = Open("builtin:lookup?files=1&max=9&look=30", 3);
  ASSERT_TRUE(src);
  int looks = 0, guesses_right = 0;
  std::set<std::string> guesses;
  for (int i = 0; i < 1000; ++i) {
    Task t = src->Next();
    const std::string v = std::to_string(Parse(t.id).value);
    EXPECT_EQ(t.prompt, "Write the number in /app/data/a.txt to /app/answer.txt.");
    EXPECT_EQ(t.terminal.environment_files.at("/app/data/a.txt"), v + "\n");
    EXPECT_EQ(t.terminal.solution_script, "#!/bin/bash\nv=$(cat /app/data/a.txt)\necho \"$v\" > /app/answer.txt\n");
    const auto& steps = t.terminal.reference_steps;
    ASSERT_EQ(steps.size(), 2u);
    if (steps[0].command == "cat /app/data/a.txt") {
      ++looks;
      EXPECT_EQ(steps[0].output, v + "\n");
      EXPECT_EQ(steps[1].command, "echo " + v + " > /app/answer.txt");
      continue;
    }
    EXPECT_EQ(steps[0].command, "ls /app/data");
    EXPECT_EQ(steps[0].output, "a.txt\n");
    const std::string& said = steps[1].command;
    ASSERT_THAT(said, ::testing::MatchesRegex("echo [0-9] > /app/answer.txt"));
    guesses.insert(said.substr(5, 1));
    guesses_right += said == "echo " + v + " > /app/answer.txt";
  }
  EXPECT_EQ(looks, 300);                // of 1000 (seed 3)
  EXPECT_EQ(guesses.size(), 10u);       // every digit is guessed
  EXPECT_EQ(guesses_right, 84);         // of the 700 guesses: about a tenth
  // The default (look=100) keeps the tasks and the reference episodes as before.
  auto a = Open("builtin:lookup?files=1&max=9", 3), b = Open("builtin:lookup?files=1&max=9&look=100", 3);
  for (int i = 0; i < 50; ++i) {
    Task x = a->Next(), y = b->Next();
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.terminal.reference_steps[0].command, "cat /app/data/a.txt");
    EXPECT_EQ(y.terminal.reference_steps[0].command, "cat /app/data/a.txt");
  }
}

TEST(LookupTasksTest, ViaCpCopiesTheFileInsteadOfWritingTheNumber) {
  // via=cp: the episodes that use the file list /app/data and copy the file to the answer (the
  // tool carries the number); the guessing ones list it and write a guess, as with via=echo.
  auto src = Open("builtin:lookup?files=1&max=9&look=20&via=cp", 5);
  ASSERT_TRUE(src);
  int copies = 0;
  for (int i = 0; i < 500; ++i) {
    Task t = src->Next();
    const auto& steps = t.terminal.reference_steps;
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0].command, "ls /app/data");
    EXPECT_EQ(steps[0].output, "a.txt\n");
    if (steps[1].command == "cp /app/data/a.txt /app/answer.txt") {
      ++copies;
    } else {
      EXPECT_THAT(steps[1].command, ::testing::MatchesRegex("echo [0-9] > /app/answer.txt"));
    }
  }
  EXPECT_EQ(copies, 84);  // of 500 (seed 5): about a fifth
}

TEST(LookupTasksTest, BadParametersNameTheSourceAndParameter) {
  struct Case { std::string source; std::string says; };
  const std::vector<Case> cases = {
      {"builtin:lookup?files=0", "files: must be an integer in 1..26, not '0'"},
      {"builtin:lookup?files=27", "files: must be an integer in 1..26, not '27'"},
      {"builtin:lookup?max=ten", "max: must be an integer in 0..1000000, not 'ten'"},
      {"builtin:lookup?add=-1", "add: must be an integer in 0..1000, not '-1'"},
      {"builtin:lookup?look=101", "look: must be an integer in 0..100, not '101'"},
      {"builtin:lookup?via=mv", "via: must be echo or cp, not 'mv'"},
      {"builtin:lookup?via=cp&add=2", "via: cp copies the number as it is: needs add=0"},
      {"builtin:lookup?split=test", "split: must be all, train or heldout, not 'test'"},
      {"builtin:lookup?max=3&split=heldout", "split: needs max >= 4"},
      {"builtin:lookup?file=2", "file: unknown parameter (lookup takes files, max, add, look, via, split)"},
      {"builtin:lookup?files", "bad parameter 'files'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    auto s = TaskSource::Open(c.source, 1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("source '" + c.source + "'"));
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr(c.says));
  }
}

// The agentic main job's sizes: its reference episode (what the SFT warm start trains on, and what
// a model that solves the task generates) in the tokens the worker records, with the scaffold
// texts the experiment sets; the context holds it with room for a wrong turn.
TEST(LookupTasksTest, TheAgenticExampleEpisodeFitsItsContext) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  auto cfg = LoadExperimentConfig(std::string(src == nullptr ? "." : src) + "/examples/agentic-grpo/experiment.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->scaffold, "mini");
  ASSERT_EQ(cfg->datasets.size(), 1u);
  auto tasks = Open(cfg->datasets[0].source, 3);
  ASSERT_TRUE(tasks);
  worker::ScaffoldOptions o;  // the fields RolloutRunner::EpisodeOptions takes from the experiment
  o.scaffold = cfg->scaffold;
  o.system_prompt = cfg->system_prompt;
  o.system_template = cfg->system_template;
  o.instance_template = cfg->instance_template;
  // The mixed demonstrator's two episodes (look=20&via=cp): list, then guess; list, then cp.
  const size_t max_context = nlohmann::json::parse(cfg->policy.model_json)["max_context"].get<size_t>();
  EXPECT_EQ(max_context, 512u);
  std::set<size_t> closing_sizes;
  for (int i = 0; i < 40; ++i) {
    Task t = tasks->Next();
    auto ex = worker::ReferenceTurnExamples(SandboxTaskOf(t), o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    ASSERT_EQ(ex->size(), 2u);  // 2 turns, the first a tool call
    EXPECT_EQ((*ex)[0].prompt.size(), 99u);
    EXPECT_EQ((*ex)[0].target.size(), 25u);  // ```bash\nls /app/data\n``` and the end token
    EXPECT_EQ((*ex)[1].prompt.size(), 178u);
    const bool copies = t.terminal.reference_steps[1].command.rfind("cp ", 0) == 0;
    EXPECT_EQ((*ex)[1].target.size(), copies ? 93u : 83u);
    closing_sizes.insert((*ex)[1].target.size());
    const size_t episode = (*ex)[1].prompt.size() + (*ex)[1].target.size();
    EXPECT_EQ(episode, copies ? 271u : 261u);
    EXPECT_GE(cfg->rollout.max_new_tokens, (*ex)[1].target.size());
    EXPECT_LE(episode + cfg->rollout.max_new_tokens, max_context);
  }
  EXPECT_EQ(closing_sizes, (std::set<size_t>{83u, 93u}));  // both kinds among the first 40
}

}  // namespace
}  // namespace flotilla::trainer_bridge
