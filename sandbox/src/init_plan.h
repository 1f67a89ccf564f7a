// Encoding an InitPlan for the zygote (the runtime's side of init_plan_view.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "init_plan_view.h"

namespace flotilla::sandbox {

struct EncodedInitPlan {
  std::string bytes;
  std::vector<int> fds;  // the runtime's descriptors, in wire order
};

// InvalidArgument when the plan does not fit kInitPlanMaxBytes / kInitPlanMaxFds.
absl::StatusOr<EncodedInitPlan> EncodeInitPlan(const InitPlan& plan);

// The data of a kSeccomp hook: the program's instructions and whether it uses a listener.
std::string EncodeSeccompHook(const sock_filter* insns, size_t count, bool uses_notify);

}  // namespace flotilla::sandbox
