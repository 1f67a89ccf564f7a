#include "flotilla/scheduler/grpc_node_client.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace flotilla::scheduler {
namespace {

void SetDeadline(grpc::ClientContext& ctx, int64_t ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& s, const std::string& context) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(context, ": ", s.error_message()));
}

GrpcNodeClient::GrpcNodeClient(std::string node_id, const std::string& address, const GrpcNodeClientOptions& options)
    : node_id_(std::move(node_id)),
      options_(options),
      stub_(v1::NodeAgent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<PlaceResult> GrpcNodeClient::Place(const PlaceRequest& request) {
  PlaceResult out;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, options_.admit_timeout_ms);
    v1::AdmitRequest req;
    if (request.spec != nullptr) *req.mutable_resources() = request.spec->resources();
    req.mutable_resources()->set_memory_bytes(request.request.memory_bytes);
    req.set_execution_class(request.execution_class);
    req.set_numa_partition(request.partition);
    v1::AdmitResponse resp;
    grpc::Status s = stub_->Admit(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s, absl::StrCat("node ", node_id_, " Admit"));
    out.usage = FromProto(resp.usage());
    if (!resp.admitted()) {
      out.reason = resp.reason();
      return out;
    }
  }
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.create_timeout_ms);
  v1::CreateRequest req;
  req.set_sandbox_id(request.sandbox_id);
  if (request.spec != nullptr) {
    req.set_image(request.spec->image());
    req.set_policy_yaml(request.spec->policy_yaml());
    req.set_policy_name(request.spec->policy_name());
    *req.mutable_resources() = request.spec->resources();
    *req.mutable_labels() = request.spec->labels();
  }
  req.mutable_resources()->set_memory_bytes(request.request.memory_bytes);
  req.set_execution_class(request.execution_class);
  req.set_numa_partition(request.partition);
  v1::CreateResponse resp;
  grpc::Status s = stub_->Create(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    out.reason = s.error_message();
    absl::StatusOr<NodeUsageSnapshot> now = Usage();
    if (now.ok()) out.usage = *std::move(now);
    return out;
  }
  if (!s.ok()) return FromGrpc(s, absl::StrCat("node ", node_id_, " Create"));
  out.admitted = true;
  // The Admit answer predates our commit: count this sandbox in.
  if (request.partition < out.usage.partitions.size()) out.usage.partitions[request.partition].used += request.request;
  return out;
}

absl::Status GrpcNodeClient::Destroy(const std::string& sandbox_id) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.destroy_timeout_ms);
  v1::SandboxRef ref;
  ref.set_sandbox_id(sandbox_id);
  v1::Empty resp;
  return FromGrpc(stub_->Destroy(&ctx, ref, &resp), absl::StrCat("node ", node_id_, " Destroy"));
}

absl::StatusOr<NodeUsageSnapshot> GrpcNodeClient::Usage() {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.admit_timeout_ms);
  v1::NodeUsage usage;
  grpc::Status s = stub_->Usage(&ctx, v1::Empty(), &usage);
  if (!s.ok()) return FromGrpc(s, absl::StrCat("node ", node_id_, " Usage"));
  return FromProto(usage);
}

absl::StatusOr<std::vector<std::string>> GrpcNodeClient::List() {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.admit_timeout_ms);
  v1::ListResponse resp;
  grpc::Status s = stub_->List(&ctx, v1::ListRequest(), &resp);
  if (!s.ok()) return FromGrpc(s, absl::StrCat("node ", node_id_, " List"));
  std::vector<std::string> ids;
  for (const auto& info : resp.sandboxes()) ids.push_back(info.sandbox_id());
  return ids;
}

NodeClientFactory GrpcNodeClientFactory(const GrpcNodeClientOptions& options) {
  return [options](const std::string& node_id, const std::string& address)
             -> absl::StatusOr<std::shared_ptr<NodeClient>> {
    if (address.empty()) return absl::InvalidArgumentError(absl::StrCat("node ", node_id, ": address is empty"));
    return std::make_shared<GrpcNodeClient>(node_id, address, options);
  };
}

}  // namespace flotilla::scheduler
