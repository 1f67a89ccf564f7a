// gRPC requests to the node agent (from the scheduler, or from anything that reaches its
// port): a CreateRequest is read as the agent reads it (node::SandboxOptionsOf), then charged
// by the admission check against a node's usage, also taken from the input. Input: two bytes
// (little-endian) giving the CreateRequest's length, its protobuf bytes, then the NodeUsage's.
#include <algorithm>
#include <string>

#include "create_request.h"
#include "flotilla/admission/admission_check.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

FLOTILLA_FUZZ_TARGET(grpc_create_request) {
  using namespace flotilla;
  if (size < 2) return;
  const size_t n = std::min<size_t>(static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8, size - 2);
  v1::CreateRequest request;
  v1::NodeUsage usage;
  if (!request.ParseFromArray(data + 2, static_cast<int>(n)) ||
      !usage.ParseFromArray(data + 2 + n, static_cast<int>(size - 2 - n))) {
    return;
  }
  auto options = node::SandboxOptionsOf(request);
  if (options.ok()) {
    // What the runtime is asked for is exactly what the request said.
    FUZZ_CHECK(options->id == request.sandbox_id() && options->image == request.image());
    FUZZ_CHECK(options->extra_allow.size() == static_cast<size_t>(request.extra_allow_size()));
    for (int i = 0; i < request.extra_allow_size(); ++i) {
      FUZZ_CHECK(options->extra_allow[i].port == request.extra_allow(i).port());
    }
    FUZZ_CHECK(options->resources.memory_bytes == request.resources().memory_bytes());
    FUZZ_CHECK(options->resources.cpu_quota_millicores == request.resources().cpu_quota_millicores());
  } else {
    FUZZ_CHECK(options.status().code() == absl::StatusCode::kInvalidArgument);
  }
  // As the agent does: a partition it does not have is refused before admission.
  if (request.numa_partition() >= static_cast<uint32_t>(std::max(1, usage.partitions_size()))) return;
  const admission::AdmissionCheck check({.memory_overcommit = 1.5});
  const v1::AdmitRequest admit = node::AdmitRequestOf(request);
  const v1::AdmitResponse decision = check.Decide(usage, admit);
  FUZZ_CHECK(decision.admitted() == decision.reason().empty());
  if (!decision.admitted()) return;
  // An admitted placement is recorded and taken back exactly: no figure wraps on the way.
  const v1::NodeUsage after = check.Apply(usage, admit);
  FUZZ_CHECK(after.memory_used() >= usage.memory_used());
  FUZZ_CHECK(after.cpu_millicores_used() >= usage.cpu_millicores_used());
  FUZZ_CHECK(after.slots_used() > usage.slots_used());
  const v1::NodeUsage back = check.Release(after, admit);
  FUZZ_CHECK(back.SerializeAsString() == usage.SerializeAsString());
}
