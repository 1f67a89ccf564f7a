// TerminalTask: a Terminal-Bench style task folder, in either layout.
//
//   1.x: task.yaml (instruction, max_agent_timeout_sec, max_test_timeout_sec), Dockerfile,
//        run-tests.sh, tests/..., solution.sh; the build context is the task folder.
//   2.x (Harbor): task.toml ([agent] timeout_sec, [verifier] timeout_sec, [environment] cpus,
//        memory_mb or memory ("2G"), storage_mb), instruction.md, environment/Dockerfile (the
//        build context is environment/), tests/test.sh, which writes the reward to
//        /logs/verifier/reward.txt or /logs/verifier/reward.json, and solution/solve.sh.
//
// A task with a Dockerfile runs in the environment built from it (the caller builds it with
// flotilla::environments and sets `image`, `workdir` and `env`); its files reach the image
// only through the Dockerfile's COPY/ADD, as under Docker. A task without one runs in the
// sandbox's default image with its environment files copied to /app. Test files go to /tests
// only after the agent has finished, so the agent never sees them.
//
// The reward of a 2.x task: reward.txt when the tests wrote it (a number); otherwise
// reward.json: a number, or an object whose "reward" member is a number, or else the mean of
// the object's numeric members. reward.txt wins when both exist. 1.x: 1 when the test
// command exited 0, else 0.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::worker {

// One action of a reference agent and what it prints, known in advance (see
// scaffold_transcript.h, which renders a scaffold's conversation from a list of them).
struct ReferenceStep {
  std::string command;   // bash, run in the task's working directory; not empty, no "```"
  std::string output;    // stdout and stderr as the sandbox returns them
  int exit_code = 0;
};

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
  // The reference solution as agent steps with their outputs, for tasks built in memory whose
  // outputs are known (a task folder has none): what a warm start teaches.
  std::vector<ReferenceStep> reference_steps;
  std::string reward_file;                               // 2.x: read for the reward; 1.x: ""
  std::string reward_json_file;                          // 2.x: read when reward_file is absent

  std::string dir;             // the task folder, absolute
  std::string dockerfile;      // its Dockerfile ("" when it has none)
  std::string build_context;   // the Dockerfile's build context
  double cpus = 0;             // [environment] cpus; 0: the policy's
  uint64_t memory_bytes = 0;   // [environment] memory_mb / memory; 0: the policy's
  uint64_t disk_bytes = 0;     // [environment] storage_mb; 0: the policy's

  // Set by the caller once the environment is built: the sandbox image ("sha256:<hex>" or a
  // root filesystem folder), the image's WORKDIR (commands run there; default /app), ENV and USER.
  std::string image;
  std::string workdir = "/app";
  std::map<std::string, std::string> env;
  // The image's USER ("" or root: root): the agent, the reference solution and the tests run
  // as it, resolved against the image's /etc/passwd (image_user.h).
  std::string user;
};

// Loads a task folder; errors name the file and field ("task.toml: agent.timeout_sec: ...").
absl::StatusOr<TerminalTask> LoadTerminalTask(const std::string& dir);

// Reward of a finished test run: 2.x parses the reward file's number; 1.x is 1 when the test
// command exited 0, else 0.
absl::StatusOr<double> ParseReward(const std::string& reward_file_text);
// reward.json's reward (see above); errors name `file`.
absl::StatusOr<double> ParseRewardJson(const std::string& text, const std::string& file);

}  // namespace flotilla::worker
