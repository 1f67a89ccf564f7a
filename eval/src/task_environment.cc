#include "flotilla/eval/task_environment.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::eval {

std::string EnvTagOf(const std::string& name) {
  std::string t = absl::AsciiStrToLower(name);
  for (char& c : t) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.')) c = '-';
  }
  return t.empty() ? "env" : t;
}

absl::Status PrepareTaskEnvironment(environments::EnvBuilder& builder, worker::TerminalTask* task,
                                    const std::function<void(std::string_view)>& progress) {
  if (task->dockerfile.empty()) return absl::OkStatus();
  environments::BuildOptions bo;
  bo.tag = "task-" + EnvTagOf(task->name);
  bo.progress = progress;
  auto built = builder.Build(task->build_context, task->dockerfile, bo);
  if (!built.ok()) return Annotate(built.status(), absl::StrCat("task ", task->name, ": building its environment"));
  const environments::EnvImage& im = built->image;
  task->image = absl::StartsWith(im.top, "dir:") ? im.top.substr(4) : im.top;
  task->workdir = im.config.workdir.empty() ? "/" : im.config.workdir;
  task->env.clear();
  for (const auto& [k, v] : im.config.env) task->env[k] = v;
  task->user = im.config.user;
  return absl::OkStatus();
}

}  // namespace flotilla::eval
