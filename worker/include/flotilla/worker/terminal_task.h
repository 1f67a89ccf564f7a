// TerminalTask: a Terminal-Bench style task folder, in either layout.
//
//   1.x: task.yaml (instruction, max_agent_timeout_sec, max_test_timeout_sec), run-tests.sh,
//        tests/..., solution.sh, and environment files beside them (Dockerfile and
//        docker-compose files are not used: tasks run in the sandbox's image).
//   2.x: task.toml ([agent] timeout_sec, [verifier] timeout_sec), instruction.md,
//        environment/... (Dockerfile ignored likewise), tests/test.sh, which writes the reward
//        to /logs/verifier/reward.txt, and solution/solve.sh.
//
// Environment files go to /app (the agent's working directory) before the agent starts; test
// files go to /tests only after it has finished, so the agent never sees them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::worker {

struct TerminalTask {
  enum class Layout { kTerminalBench1, kTerminalBench2 };
  std::string name;                                   // the folder's name
  Layout layout = Layout::kTerminalBench2;
  std::string instruction;
  uint32_t agent_timeout_ms = 600'000;
  uint32_t test_timeout_ms = 300'000;
  std::map<std::string, std::string> environment_files;  // sandbox path -> content
  std::map<std::string, std::string> test_files;         // sandbox path -> content
  std::vector<std::string> test_command;                 // run after copying the test files
  std::string solution_script;                           // the reference solution (bash)
  std::string reward_file;                               // 2.x: read for the reward; 1.x: ""
};

// Loads a task folder; errors name the file and field ("task.toml: agent.timeout_sec: ...").
absl::StatusOr<TerminalTask> LoadTerminalTask(const std::string& dir);

// Reward of a finished test run: 2.x parses the reward file's number; 1.x is 1 when the test
// command exited 0, else 0.
absl::StatusOr<double> ParseReward(const std::string& reward_file_text);

}  // namespace flotilla::worker
