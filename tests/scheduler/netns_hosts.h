// Hosts for multi-host tests: each a network namespace joined to the test's namespace by a
// veth pair, with its own address (10.231.<k>.2, the test's side 10.231.<k>.1). Made with
// iproute2 and always removed when the value dies. Needs root (CAP_NET_ADMIN).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flotilla::scheduler::testing {

class NetnsHosts {
 public:
  explicit NetnsHosts(int count) {
    const std::string tag = absl::StrCat(getpid() % 100000);
    for (int k = 0; k < count; ++k) {
      Host h;
      h.ns = absl::StrCat("flt", tag, "h", k);
      h.host_if = absl::StrCat("fv", tag, "a", k);
      h.ns_if = absl::StrCat("fv", tag, "b", k);
      h.address = absl::StrCat("10.231.", 100 + k, ".2");
      h.gateway = absl::StrCat("10.231.", 100 + k, ".1");
      hosts_.push_back(h);
      const Host& x = hosts_.back();
      ok_ = ok_ && Run(absl::StrCat("ip netns add ", x.ns)) &&
            Run(absl::StrCat("ip link add ", x.host_if, " type veth peer name ", x.ns_if)) &&
            Run(absl::StrCat("ip link set ", x.ns_if, " netns ", x.ns)) &&
            Run(absl::StrCat("ip addr add ", x.gateway, "/24 dev ", x.host_if)) &&
            Run(absl::StrCat("ip link set ", x.host_if, " up")) &&
            Run(absl::StrCat("ip -n ", x.ns, " addr add ", x.address, "/24 dev ", x.ns_if)) &&
            Run(absl::StrCat("ip -n ", x.ns, " link set ", x.ns_if, " up")) &&
            Run(absl::StrCat("ip -n ", x.ns, " link set lo up"));
    }
  }
  ~NetnsHosts() {
    for (const Host& h : hosts_) {
      Run(absl::StrCat("ip netns del ", h.ns, " 2>/dev/null"));
      Run(absl::StrCat("ip link del ", h.host_if, " 2>/dev/null"));
    }
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  struct Host {
    std::string ns, host_if, ns_if, address, gateway;
  };
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] const Host& host(int k) const { return hosts_[k]; }

 private:
  static bool Run(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }
  std::vector<Host> hosts_;
  bool ok_ = true;
};

}  // namespace flotilla::scheduler::testing
