// NodeClient over the NodeAgent gRPC API: Place = Admit (the node's own check) then Create;
// a Create refused with RESOURCE_EXHAUSTED (another replica got there between the two) is a
// rejection like an Admit refusal. Thread-safe (gRPC stubs are).
#pragma once

#include <memory>
#include <string>

#include "flotilla/proto/sandbox.grpc.pb.h"
#include "flotilla/scheduler/node_client.h"

namespace flotilla::scheduler {

struct GrpcNodeClientOptions {
  int64_t admit_timeout_ms = 2000;
  int64_t create_timeout_ms = 60000;   // creating a real sandbox mounts layers, makes cgroups
  int64_t destroy_timeout_ms = 30000;
};

class GrpcNodeClient final : public NodeClient {
 public:
  GrpcNodeClient(std::string node_id, const std::string& address, const GrpcNodeClientOptions& options = {});

  absl::StatusOr<PlaceResult> Place(const PlaceRequest& request) override;
  absl::Status Destroy(const std::string& sandbox_id) override;
  absl::StatusOr<NodeUsageSnapshot> Usage() override;
  absl::StatusOr<std::vector<std::string>> List() override;

 private:
  const std::string node_id_;
  const GrpcNodeClientOptions options_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

// A NodeClientFactory making GrpcNodeClients.
NodeClientFactory GrpcNodeClientFactory(const GrpcNodeClientOptions& options = {});

// grpc::Status <-> absl::Status with the same code and message.
absl::Status FromGrpc(const grpc::Status& s, const std::string& context);

}  // namespace flotilla::scheduler
