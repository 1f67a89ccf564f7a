// A task's environment readied for its trials: a task with a Dockerfile is built (from the
// cache when unchanged) and pointed at its image. `flotilla eval`, `flotilla run`, `flotilla
// worker run` (cli/task_environment.h) and the synthesizer's difficulty stage build through it.
//
// Thread-safety: as the EnvBuilder passed in.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "flotilla/environments/env_builder.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::eval {

// A tag from a folder name: lower case, anything but [a-z0-9._-] turned into '-'.
std::string EnvTagOf(const std::string& name);

// Builds `task`'s Dockerfile, tags it "task-<name>", and sets task->image, workdir (the
// image's WORKDIR, "/" without one, as under Docker), env and user (its USER). Does nothing
// for a task without a Dockerfile. Errors name the task and the Dockerfile line.
absl::Status PrepareTaskEnvironment(environments::EnvBuilder& builder, worker::TerminalTask* task,
                                    const std::function<void(std::string_view)>& progress);

}  // namespace flotilla::eval
