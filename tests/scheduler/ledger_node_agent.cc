#include "ledger_node_agent.h"

#include <grpcpp/grpcpp.h>

namespace flotilla::scheduler::testing {
namespace {

// What the node charges; the ledger's own defaults apply to fields left at 0.
ResourceVector RequestOf(const v1::Resources& r) { return {r.memory_bytes(), r.cpu_quota_millicores(), 1}; }

}  // namespace

grpc::Status LedgerNodeAgent::Admit(grpc::ServerContext*, const v1::AdmitRequest* req, v1::AdmitResponse* resp) {
  LedgerAdmitResult r = ledger_->Check(req->numa_partition(), RequestOf(req->resources()));
  resp->set_admitted(r.admitted);
  resp->set_reason(r.reason);
  *resp->mutable_usage() = ToProto(r.usage);
  return grpc::Status::OK;
}

grpc::Status LedgerNodeAgent::Create(grpc::ServerContext*, const v1::CreateRequest* req, v1::CreateResponse* resp) {
  if (req->sandbox_id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sandbox_id: empty");
  auto r = ledger_->Admit(req->sandbox_id(), req->numa_partition(), RequestOf(req->resources()));
  if (!r.ok()) return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, std::string(r.status().message()));
  if (!r->admitted) return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, r->reason);
  resp->set_sandbox_id(req->sandbox_id());
  return grpc::Status::OK;
}

grpc::Status LedgerNodeAgent::Destroy(grpc::ServerContext*, const v1::SandboxRef* req, v1::Empty*) {
  absl::Status s = ledger_->Release(req->sandbox_id());
  if (!s.ok()) return grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status LedgerNodeAgent::List(grpc::ServerContext*, const v1::ListRequest*, v1::ListResponse* resp) {
  for (const auto& id : ledger_->SandboxIds()) resp->add_sandboxes()->set_sandbox_id(id);
  return grpc::Status::OK;
}

grpc::Status LedgerNodeAgent::Usage(grpc::ServerContext*, const v1::Empty*, v1::NodeUsage* resp) {
  *resp = ToProto(ledger_->Usage());
  return grpc::Status::OK;
}

}  // namespace flotilla::scheduler::testing
