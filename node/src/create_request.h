// How the node agent reads a CreateRequest before it reserves anything (private to node/): what
// the runtime's options cannot carry is checked here (the execution class, each extra_allow
// port), each refusal an InvalidArgument naming its field; the runtime checks the rest of the
// options itself.
// Pure: no runtime, no lock, so the gRPC fuzz target runs it over any bytes.
//
//   ASSIGN_OR_RETURN(sandbox::SandboxOptions o, SandboxOptionsOf(request));
//   v1::AdmitRequest admit = AdmitRequestOf(request);
#pragma once

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.pb.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::node {

// The runtime's options for `request`; cpus/mems (the NUMA pinning) stay empty: the agent sets
// them from its partition once admitted.
absl::StatusOr<sandbox::SandboxOptions> SandboxOptionsOf(const v1::CreateRequest& request);

// What admission charges for `request`.
v1::AdmitRequest AdmitRequestOf(const v1::CreateRequest& request);

}  // namespace flotilla::node
