// SandboxEndpoint: the worker's HTTP API at 127.0.0.1:PORT inside a sandbox whose network
// stays closed. Only the NodeAgent API is used: a small forwarder (Python, run by Exec)
// listens on the sandbox's loopback and writes each connection's bytes to its stdout, which
// the Exec stream carries to the worker; the worker relays them to its own HTTP server and
// writes the answers back into the sandbox with PutFile, where the forwarder picks them up.
// The sandbox must be created with extra_allow {127.0.0.1/32, PORT} so the network policy
// lets its processes reach the forwarder.
//
// Thread-safety: Start/Stop from one thread; relaying runs on internal threads. The client is
// borrowed and must outlive the endpoint.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::worker {

class SandboxEndpoint {
 public:
  // `worker_port`: the worker's HTTP port on the host's 127.0.0.1. `node`: empty, the forwarder
  // runs under the sandbox's python3; else the path of a Node.js binary in the sandbox to run
  // the same forwarder written for Node (task environments without python3).
  static absl::StatusOr<std::unique_ptr<SandboxEndpoint>> Start(SandboxClient* client,
                                                                const std::string& sandbox_id,
                                                                int sandbox_port, int worker_port,
                                                                const std::string& node = "");
  virtual ~SandboxEndpoint() = default;
  // "http://127.0.0.1:PORT" as seen inside the sandbox.
  virtual std::string base_url() const = 0;
  // Connections relayed so far.
  virtual int connections() const = 0;
  virtual void Stop() = 0;
};

// The extra network rule a sandbox needs for the endpoint.
v1::NetworkRule EndpointNetworkRule(int sandbox_port);

}  // namespace flotilla::worker
