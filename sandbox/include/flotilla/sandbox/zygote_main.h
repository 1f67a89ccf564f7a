// The sandbox zygote as its own process image: an executable that calls RunZygoteIfAsked
// first thing in main() can be named in RuntimeOptions::zygote_binary. The runtime then
// starts it (posix_spawn, so the runtime process is not copied) as
//   <binary> sandbox zygote <channel fd> <user namespace fd> <runtime pid>
// and every sandbox init is a copy of that small process instead of the runtime's.
#pragma once

#include <string>

namespace flotilla::sandbox {

// The executable `name` in this executable's directory, when it exists, is executable and is
// not this executable itself; empty otherwise. (The `flotilla` CLI installs `flotilla` and
// `flotilla-full` side by side; flotilla-full's runtimes use `flotilla` as their zygote.)
std::string SiblingExecutable(const std::string& name);

// When argv is a zygote invocation, runs the zygote and never returns; otherwise returns
// false without side effects.
bool RunZygoteIfAsked(int argc, char** argv);

}  // namespace flotilla::sandbox
