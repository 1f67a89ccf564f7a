// The sandbox zygote as its own process image: an executable that calls RunZygoteIfAsked
// first thing in main() can be named in RuntimeOptions::zygote_binary. The runtime then
// starts it (posix_spawn, so the runtime process is not copied) as
//   <binary> sandbox zygote <channel fd> <user namespace fd> <runtime pid>
// and every sandbox init is a copy of that small process instead of the runtime's.
#pragma once

#include <string>

namespace flotilla::sandbox {

// The executable `name` in this executable's directory, when it exists, is executable and is
// not this executable itself; empty otherwise. (The `flotilla` CLI installs `flotilla`,
// `flotilla-full` and `flotilla-zygote` side by side.)
std::string SiblingExecutable(const std::string& name);

// The zygote executable for a runtime in this process, from this executable's directory:
// `flotilla-zygote` (static, linked from the zygote's code alone: the smallest inits), else
// the `flotilla` CLI (where no static flotilla-zygote could be built); empty when neither is
// there (the runtime then forks this process as its zygote).
std::string SiblingZygoteExecutable();

// When argv is a zygote invocation, runs the zygote and never returns; otherwise returns
// false without side effects.
bool RunZygoteIfAsked(int argc, char** argv);

}  // namespace flotilla::sandbox
