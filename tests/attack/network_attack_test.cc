// Network attacks: raw sockets, the host's own services on 127.0.0.1 and on its address,
// denied CIDRs, and UDP exfiltration. The sandbox has its own network namespace (only lo) and
// the eBPF cgroup programs refuse every connect/sendmsg the policy does not allow with EPERM.
// Host listeners (port 0) must receive nothing.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "attack_fixture.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

constexpr const char* kDeniedAddress = "198.51.100.7";  // TEST-NET-2: never allowed

class NetworkAttackTest : public AttackTest {
 protected:
  // A sandbox with the eBPF network enforcer active (the suite's precondition).
  std::string NewEnforcedSandbox(sandbox::SandboxOptions options = SmallOptions()) {
    sandbox::CreateResult created;
    std::string id = NewSandbox(options, &created);
    if (id.empty()) return id;
    const auto& active = created.enforcers_active;
    bool ebpf = std::find(active.begin(), active.end(), "ebpf-net") != active.end();
    EXPECT_TRUE(ebpf) << "the eBPF network enforcer is not active: "
                      << absl::StrJoin(created.enforcers_inactive, "; ");
    return id;
  }

  std::string Helper(const std::string& args) { return std::string(kHelperPath) + " " + args + "; "; }
};

TEST_F(NetworkAttackTest, RawSocketsReachNothingOutside) {
  std::string host_ip = HostIPv4();
  ASSERT_FALSE(host_ip.empty());
  HostListener udp(HostListener::Kind::kUdp, "0.0.0.0");
  ASSERT_TRUE(udp.ok());
  std::string id = NewEnforcedSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string port = std::to_string(udp.port());
  RunOutput r = Attack(id, Helper("raw " + host_ip + " " + port) + Helper("raw 127.0.0.1 " + port) +
                               "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sed 's/^/if=/'");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_FALSE(udp.ReceivedAnything(300)) << "a raw datagram from the sandbox reached the host";
  // Whatever the socket calls returned, the only interface inside is the sandbox's own lo.
  EXPECT_EQ(LinesStartingWith(r.out, "if="), std::vector<std::string>{"if=lo"}) << r.out;
  for (const std::string& line : LinesStartingWith(r.out, "socket_")) {
    EXPECT_TRUE(line.ends_with(" ok") || line.ends_with("errno=EPERM")) << line;
  }
}

TEST_F(NetworkAttackTest, HostServicesAreNotReachable) {
  std::string host_ip = HostIPv4();
  ASSERT_FALSE(host_ip.empty());
  HostListener loopback(HostListener::Kind::kTcp, "127.0.0.1");
  HostListener any(HostListener::Kind::kTcp, "0.0.0.0");
  ASSERT_TRUE(loopback.ok() && any.ok());
  std::string id = NewEnforcedSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  RunOutput r = Attack(id, Helper("connect 127.0.0.1 " + std::to_string(loopback.port())) +
                               Helper("connect " + host_ip + " " + std::to_string(any.port())) +
                               Helper("connect 127.0.0.1 " + std::to_string(any.port())));
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_FALSE(loopback.ReceivedAnything(300)) << "the sandbox reached the host's 127.0.0.1 listener";
  EXPECT_FALSE(any.ReceivedAnything(300)) << "the sandbox reached the host's listener on " << host_ip;
  std::vector<std::string> lines = LinesStartingWith(r.out, "tcp_");
  ASSERT_EQ(lines.size(), 3u) << r.out;
  // EPERM from the eBPF program; ECONNREFUSED only when the policy allows loopback, which is
  // then the sandbox's own lo with nothing listening.
  EXPECT_TRUE(lines[0] == "tcp_connect errno=EPERM" || lines[0] == "tcp_connect errno=ECONNREFUSED") << lines[0];
  EXPECT_EQ(lines[1], "tcp_connect errno=EPERM");
  EXPECT_TRUE(lines[2] == "tcp_connect errno=EPERM" || lines[2] == "tcp_connect errno=ECONNREFUSED") << lines[2];
}

// With a policy that allows exactly one loopback port, that port works (the positive control)
// and every other destination is refused by the eBPF programs, TCP and UDP alike.
TEST_F(NetworkAttackTest, DeniedCidrsAndPortsAreRefused) {
  sandbox::SandboxOptions options = SmallOptions();
  options.policy_name.clear();
  options.policy_yaml =
      "name: attack-one-port\n"
      "filesystem:\n"
      "  read_write: [/]\n"
      "network:\n"
      "  allow:\n"
      "    - cidr: 127.0.0.1\n"
      "      ports: [8081]\n";
  std::string id = NewEnforcedSandbox(options);
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  RunOutput r = Attack(
      id,
      "/usr/bin/python3 -c 'import socket, time\n"
      "ss = []\n"
      "for p in (8081, 8082):\n"
      "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "    s.bind((\"0.0.0.0\", p)); s.listen(8); ss.append(s)\n"
      "open(\"/tmp/ready\", \"w\").close()\n"
      "time.sleep(30)' &\n"
      "n=0; while [ ! -e /tmp/ready ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n" +
          Helper("connect 127.0.0.1 8081") + Helper("connect 127.0.0.1 8082") + Helper("connect 127.0.0.2 8081") +
          Helper(std::string("connect ") + kDeniedAddress + " 80") + Helper("udp 127.0.0.1 8081") +
          Helper("udp 127.0.0.1 8082") + Helper(std::string("udp ") + kDeniedAddress + " 53") + "kill $!",
      20000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out,
            "tcp_connect ok\ntcp_send ok\n"
            "tcp_connect errno=EPERM\n"
            "tcp_connect errno=EPERM\n"
            "tcp_connect errno=EPERM\n"
            "udp_sendto ok\nudp_connect ok\nudp_send ok\n"
            "udp_sendto errno=EPERM\nudp_connect errno=EPERM\nudp_send errno=EDESTADDRREQ\n"
            "udp_sendto errno=EPERM\nudp_connect errno=EPERM\nudp_send errno=EDESTADDRREQ\n")
      << r.err;
}

TEST_F(NetworkAttackTest, UdpExfiltrationIsRefused) {
  std::string host_ip = HostIPv4();
  ASSERT_FALSE(host_ip.empty());
  HostListener udp(HostListener::Kind::kUdp, "0.0.0.0");
  ASSERT_TRUE(udp.ok());
  std::string id = NewEnforcedSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string port = std::to_string(udp.port());
  RunOutput r = Attack(id, Helper("udp " + host_ip + " " + port) + Helper(std::string("udp ") + kDeniedAddress + " 53") +
                               Helper("udp 8.8.8.8 53") + Helper("udp 127.0.0.1 " + port));
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_FALSE(udp.ReceivedAnything(300)) << "a datagram from the sandbox reached the host";
  std::vector<std::string> lines = LinesStartingWith(r.out, "udp_");
  ASSERT_EQ(lines.size(), 12u) << r.out;
  for (size_t i = 0; i < 9; i += 3) {
    EXPECT_EQ(lines[i], "udp_sendto errno=EPERM");
    EXPECT_EQ(lines[i + 1], "udp_connect errno=EPERM");
    EXPECT_EQ(lines[i + 2], "udp_send errno=EDESTADDRREQ");
  }
  // Loopback: refused, or allowed into the sandbox's own lo where nothing listens.
  EXPECT_TRUE(lines[9] == "udp_sendto errno=EPERM" || lines[9] == "udp_sendto ok") << lines[9];
}

}  // namespace
}  // namespace flotilla::attack
