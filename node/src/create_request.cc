#include "create_request.h"

namespace flotilla::node {

absl::StatusOr<sandbox::SandboxOptions> SandboxOptionsOf(const v1::CreateRequest& request) {
  if (request.execution_class() != v1::EXECUTION_CLASS_UNSPECIFIED &&
      !v1::ExecutionClass_IsValid(request.execution_class())) {
    return absl::InvalidArgumentError("execution_class: unknown value");
  }
  sandbox::SandboxOptions o;
  for (const auto& a : request.extra_allow()) {
    if (a.port() > 65535) return absl::InvalidArgumentError("extra_allow.port: above 65535");
    o.extra_allow.push_back({a.cidr(), static_cast<uint16_t>(a.port())});
  }
  o.id = request.sandbox_id();
  o.image = request.image();
  o.policy_yaml = request.policy_yaml();
  o.policy_name = request.policy_name();
  const v1::Resources& r = request.resources();
  o.resources = {r.memory_bytes(), r.pids(), r.cpu_weight(), r.cpu_quota_millicores(), r.disk_bytes(), r.timeout_ms(),
                 "", ""};
  o.execution_class = request.execution_class() == v1::LATENCY_SENSITIVE ? sandbox::ExecutionClass::kLatencySensitive
                                                                         : sandbox::ExecutionClass::kBestEffort;
  o.labels = {request.labels().begin(), request.labels().end()};
  return o;
}

v1::AdmitRequest AdmitRequestOf(const v1::CreateRequest& request) {
  v1::AdmitRequest admit;
  *admit.mutable_resources() = request.resources();
  admit.set_execution_class(request.execution_class());
  admit.set_numa_partition(request.numa_partition());
  return admit;
}

}  // namespace flotilla::node
