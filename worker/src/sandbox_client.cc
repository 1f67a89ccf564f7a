#include "flotilla/worker/sandbox_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::worker {
namespace {

absl::Status FromGrpc(const grpc::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("sandbox ", std::string(what), ": ", s.error_message()));
}

}  // namespace

SandboxClient::SandboxClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::NodeAgent::NewStub(std::move(channel))) {}

std::unique_ptr<SandboxClient> SandboxClient::ThroughScheduler(std::shared_ptr<grpc::Channel> scheduler,
                                                               std::string tenant) {
  std::unique_ptr<SandboxClient> c(new SandboxClient());
  c->scheduler_ = v1::Scheduler::NewStub(std::move(scheduler));
  c->tenant_ = std::move(tenant);
  return c;
}

absl::StatusOr<std::shared_ptr<v1::NodeAgent::Stub>> SandboxClient::StubFor(const std::string& sandbox_id) const {
  if (stub_ != nullptr) return stub_;
  absl::MutexLock lock(&mu_);
  auto it = placed_.find(sandbox_id);
  if (it == placed_.end()) {
    return absl::NotFoundError(absl::StrCat("sandbox ", sandbox_id, ": not placed through this client"));
  }
  return it->second.stub;
}

std::string SandboxClient::NodeOf(const std::string& sandbox_id) const {
  absl::MutexLock lock(&mu_);
  auto it = placed_.find(sandbox_id);
  return it == placed_.end() ? "" : it->second.node_id;
}

absl::StatusOr<std::string> SandboxClient::Create(const v1::CreateRequest& request) {
  if (scheduler_ != nullptr) {
    if (!request.sandbox_id().empty()) {
      return absl::InvalidArgumentError("sandbox create: sandbox_id: the scheduler names sandboxes");
    }
    if (request.extra_allow_size() > 0) {
      return absl::InvalidArgumentError(
          "sandbox create: extra_allow: the scheduler's CreateSandbox carries no per-sandbox network rules");
    }
    if (request.numa_partition() != 0) {
      return absl::InvalidArgumentError("sandbox create: numa_partition: the scheduler chooses the partition");
    }
    v1::CreateSandboxRequest req;
    req.set_tenant(tenant_);
    *req.mutable_resources() = request.resources();
    req.set_execution_class(request.execution_class());
    req.set_policy_name(request.policy_name());
    req.set_policy_yaml(request.policy_yaml());
    req.set_image(request.image());
    req.mutable_labels()->insert(request.labels().begin(), request.labels().end());
    grpc::ClientContext ctx;
    v1::CreateSandboxResponse resp;
    absl::Status st = FromGrpc(scheduler_->CreateSandbox(&ctx, req, &resp), "create (scheduler)");
    if (!st.ok()) return st;
    const v1::SandboxPlacement& p = resp.placement();
    absl::MutexLock lock(&mu_);
    std::shared_ptr<v1::NodeAgent::Stub>& node = nodes_[p.node_address()];
    if (node == nullptr) {
      node = v1::NodeAgent::NewStub(grpc::CreateChannel(p.node_address(), grpc::InsecureChannelCredentials()));
    }
    placed_[p.sandbox_id()] = {p.node_id(), node};
    return p.sandbox_id();
  }
  grpc::ClientContext ctx;
  v1::CreateResponse resp;
  absl::Status st = FromGrpc(stub_->Create(&ctx, request, &resp), "create");
  if (!st.ok()) return st;
  return resp.sandbox_id();
}

absl::StatusOr<ExecOutcome> SandboxClient::Exec(const v1::ExecRequest& request,
                                                const std::function<void(std::string_view)>& on_stdout) {
  ASSIGN_OR_RETURN(std::shared_ptr<v1::NodeAgent::Stub> stub, StubFor(request.sandbox_id()));
  grpc::ClientContext ctx;
  auto reader = stub->Exec(&ctx, request);
  ExecOutcome out;
  bool exited = false;
  v1::ExecChunk chunk;
  while (reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case v1::ExecChunk::kStdout:
        out.output += chunk.stdout();
        if (on_stdout) on_stdout(chunk.stdout());
        break;
      case v1::ExecChunk::kStderr:
        out.output += chunk.stderr();
        break;
      case v1::ExecChunk::kExit:
        exited = true;
        out.exit_code = chunk.exit().exit_code();
        out.signal = chunk.exit().signal();
        out.reason = chunk.exit().reason();
        out.detail = chunk.exit().detail();
        out.wall_ms = chunk.exit().wall_ms();
        break;
      default:
        break;
    }
  }
  absl::Status st = FromGrpc(reader->Finish(), "exec");
  if (!st.ok()) return st;
  if (!exited) return absl::InternalError("sandbox exec: the stream ended without an exit record");
  return out;
}

absl::Status SandboxClient::PutFile(const std::string& sandbox_id, const std::string& path,
                                    std::string_view content, uint32_t mode) {
  grpc::ClientContext ctx;
  v1::PutFileRequest req;
  req.set_sandbox_id(sandbox_id);
  req.set_path(path);
  req.set_content(std::string(content));
  req.set_mode(mode);
  v1::PutFileResponse resp;
  ASSIGN_OR_RETURN(std::shared_ptr<v1::NodeAgent::Stub> stub, StubFor(sandbox_id));
  return FromGrpc(stub->PutFile(&ctx, req, &resp), absl::StrCat("put ", path));
}

absl::StatusOr<std::string> SandboxClient::GetFile(const std::string& sandbox_id,
                                                   const std::string& path, uint64_t max_bytes) {
  grpc::ClientContext ctx;
  v1::GetFileRequest req;
  req.set_sandbox_id(sandbox_id);
  req.set_path(path);
  req.set_max_bytes(max_bytes);
  v1::GetFileResponse resp;
  ASSIGN_OR_RETURN(std::shared_ptr<v1::NodeAgent::Stub> stub, StubFor(sandbox_id));
  absl::Status st = FromGrpc(stub->GetFile(&ctx, req, &resp), absl::StrCat("get ", path));
  if (!st.ok()) return st;
  return resp.content();
}

absl::Status SandboxClient::Destroy(const std::string& sandbox_id) {
  if (scheduler_ != nullptr) {
    grpc::ClientContext ctx;
    v1::DeleteSandboxRequest req;
    req.set_sandbox_id(sandbox_id);
    v1::DeleteSandboxResponse resp;
    absl::Status st = FromGrpc(scheduler_->DeleteSandbox(&ctx, req, &resp), "destroy (scheduler)");
    absl::MutexLock lock(&mu_);
    placed_.erase(sandbox_id);
    return st;
  }
  grpc::ClientContext ctx;
  v1::SandboxRef req;
  req.set_sandbox_id(sandbox_id);
  v1::Empty resp;
  return FromGrpc(stub_->Destroy(&ctx, req, &resp), "destroy");
}

}  // namespace flotilla::worker
