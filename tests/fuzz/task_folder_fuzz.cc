// Task folders (worker/include/flotilla/worker/terminal_task.h): the first byte picks the
// layout, the rest is its task.toml (2.x) or task.yaml (1.x), in a folder that otherwise holds
// what a valid task needs. Loading gives a task or an error naming the file, never a crash.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "flotilla/worker/terminal_task.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// One folder per process, removed at exit: instruction, tests and Dockerfiles of both layouts.
const fs::path& TaskDir() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "flotilla-fuzz-task-XXXXXX").string();
    FUZZ_CHECK(::mkdtemp(tmpl.data()) != nullptr);
    fs::path d = fs::path(tmpl) / "task";
    WriteFile(d / "instruction.md", "Write hello to /app/out.txt\n");
    WriteFile(d / "tests" / "test.sh", "#!/bin/bash\ntest -f /app/out.txt\n");
    WriteFile(d / "environment" / "Dockerfile", "FROM debian:bookworm\nWORKDIR /app\n");
    WriteFile(d / "run-tests.sh", "#!/bin/bash\nexit 0\n");
    WriteFile(d / "Dockerfile", "FROM debian:bookworm\n");
    static const std::string root = tmpl;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(root, ec);
    });
    return d;
  }();
  return dir;
}

}  // namespace

FLOTILLA_FUZZ_TARGET(task_folder) {
  const fs::path& dir = TaskDir();
  const bool v2 = size == 0 || (data[0] & 1) == 0;
  const std::string text = size > 0 ? std::string(reinterpret_cast<const char*>(data) + 1, size - 1) : "";
  std::error_code ec;
  fs::remove(dir / "task.toml", ec);
  fs::remove(dir / "task.yaml", ec);
  WriteFile(dir / (v2 ? "task.toml" : "task.yaml"), text);
  auto task = flotilla::worker::LoadTerminalTask(dir.string());
  if (!task.ok()) {
    FUZZ_CHECK(task.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(task.status().message().find(v2 ? "task.toml" : "task.yaml") != std::string::npos);
    return;
  }
  FUZZ_CHECK(task->agent_timeout_ms > 0 && task->test_timeout_ms > 0);
  FUZZ_CHECK(task->cpus >= 0 && task->cpus <= 1024);
  FUZZ_CHECK(!task->test_command.empty());
}
