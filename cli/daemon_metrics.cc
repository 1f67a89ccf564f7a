#include "daemon_metrics.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::cli {

void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  FILE* pf = std::fopen(tmp.c_str(), "w");
  if (pf == nullptr) return;
  std::fprintf(pf, "%d\n", port);
  std::fclose(pf);
  std::rename(tmp.c_str(), path.c_str());
}

void AddDaemonMetricsFlags(CLI::App* cmd, DaemonMetricsFlags& flags, const std::string& example) {
  cmd->add_option("--metrics-listen", flags.listen,
                  absl::StrCat("serve Prometheus /metrics on this host:port (port 0: any; empty: off), e.g. ", example));
  cmd->add_option("--metrics-port-file", flags.port_file, "write the bound metrics port here once serving");
}

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeDaemonMetrics(const std::string& daemon,
                                                                   const DaemonMetricsFlags& flags,
                                                                   const MetricsRegistry& registry) {
  if (flags.listen.empty()) return std::unique_ptr<MetricsServer>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(flags.listen, registry);
  if (!server.ok()) return Annotate(server.status(), "--metrics-listen");
  std::cout << daemon << ": metrics on port " << (*server)->port() << std::endl;
  if (!flags.port_file.empty()) WritePortFile(flags.port_file, (*server)->port());
  return server;
}

}  // namespace flotilla::cli
