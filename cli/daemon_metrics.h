// What every daemon of the CLI shares about its Prometheus endpoint (`--metrics-listen ADDR`,
// `--metrics-port-file FILE`): the project's MetricsServer on the daemon's registry, and port
// files written whole.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "flotilla/common/metrics.h"
#include "flotilla/common/metrics_server.h"

namespace flotilla::cli {

// Writes "PORT\n" to `path` whole or not at all (rename), so a reader never sees a partial number.
void WritePortFile(const std::string& path, int port);

struct DaemonMetricsFlags {
  std::string listen;     // empty: no /metrics
  std::string port_file;  // empty: none
};

// Adds --metrics-listen and --metrics-port-file to `cmd`.
void AddDaemonMetricsFlags(CLI::App* cmd, DaemonMetricsFlags& flags, const std::string& example);

// Serves `registry` (borrowed; must outlive the server) on flags.listen, prints "<daemon>:
// metrics on port N" and writes the port file. Null (and OK) when flags.listen is empty;
// InvalidArgument or Unavailable naming --metrics-listen when the address is bad or taken.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeDaemonMetrics(const std::string& daemon,
                                                                   const DaemonMetricsFlags& flags,
                                                                   const MetricsRegistry& registry);

}  // namespace flotilla::cli
