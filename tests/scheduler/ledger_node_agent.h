// A NodeAgent gRPC service whose sandboxes are NodeLedger entries, not kernel sandboxes:
// Admit/Create/Destroy/List/Usage run the real node-side admission and accounting, so the
// scheduler can be tested over real gRPC, across processes and network namespaces.
// Exec, files, snapshots and pause are not served (UNIMPLEMENTED). Thread-safe.
#pragma once

#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/scheduler_sim/node_ledger.h"

namespace flotilla::scheduler::testing {

class LedgerNodeAgent final : public v1::NodeAgent::Service {
 public:
  explicit LedgerNodeAgent(NodeLedger* ledger) : ledger_(ledger) {}

  grpc::Status Admit(grpc::ServerContext*, const v1::AdmitRequest*, v1::AdmitResponse*) override;
  grpc::Status Create(grpc::ServerContext*, const v1::CreateRequest*, v1::CreateResponse*) override;
  grpc::Status Destroy(grpc::ServerContext*, const v1::SandboxRef*, v1::Empty*) override;
  grpc::Status List(grpc::ServerContext*, const v1::ListRequest*, v1::ListResponse*) override;
  grpc::Status Usage(grpc::ServerContext*, const v1::Empty*, v1::NodeUsage*) override;

 private:
  NodeLedger* const ledger_;
};

}  // namespace flotilla::scheduler::testing
