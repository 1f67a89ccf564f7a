#include "sandbox_cycle.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::bench {

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

absl::Status SandboxCycle(sandbox::Runtime& runtime, std::atomic<int>* started_ahead) {
  sandbox::SandboxOptions options;
  options.policy_name = "default";
  ASSIGN_OR_RETURN(sandbox::CreateResult created, runtime.Create(options));
  if (created.started_ahead && started_ahead != nullptr) started_ahead->fetch_add(1);
  sandbox::ExecOptions exec;
  exec.argv = {"/bin/true"};
  absl::StatusOr<sandbox::ExecResult> result = runtime.Exec(created.id, exec, nullptr);
  absl::Status destroyed = runtime.Destroy(created.id);
  RETURN_IF_ERROR(result);
  if (result->exit_code != 0) {
    return absl::InternalError(absl::StrCat("/bin/true in ", created.id, " exited ", result->exit_code, " (",
                                            std::string(sandbox::StopReasonName(result->reason)), ": ", result->detail, ")"));
  }
  return destroyed;
}

}  // namespace flotilla::bench
