// The wire between the runtime and a sandbox's init (PID 1 inside): SOCK_SEQPACKET messages,
// one header each, an optional payload after it, file descriptors as SCM_RIGHTS.
//
//   init -> runtime  kReady                         (setup done; loop running)
//   init -> runtime  kSetupError  payload: text     (then init exits)
//   runtime -> init  kExec  exec_id, payload "cwd\0argv0\0...\0env0\0...", argc, envc;
//                    fds: stdin(read end), stdout(write), stderr(write), status(write)
//                    init writes the child's wait status (int32) to the status fd when it exits.
//   runtime -> init  kKill  exec_id, arg = signal   (signals the exec's process group)
#pragma once

#include <cstdint>

namespace flotilla::sandbox {

enum class InitMsg : uint32_t { kReady = 1, kSetupError = 2, kExec = 3, kKill = 4 };

struct InitHeader {
  InitMsg type;
  uint32_t exec_id;
  int32_t arg;
  uint32_t argc;
  uint32_t envc;
  uint32_t payload_len;
};

inline constexpr int kInitExecFds = 4;
inline constexpr uint32_t kInitMaxMessage = 256 * 1024;
inline constexpr int kInitMaxExecs = 128;   // concurrent execs per sandbox
inline constexpr int kInitMaxArgs = 8192;   // argv + env entries per exec

}  // namespace flotilla::sandbox
