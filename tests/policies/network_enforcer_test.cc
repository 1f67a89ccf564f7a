// eBPF network policy on a real cgroup v2 directory with a real forked child in it.
#include "flotilla/policies/network.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "flotilla/common/ids.h"
#include "gtest/gtest.h"

namespace flotilla::policies {
namespace {

// A cgroup v2 directory for one test; removed on destruction.
class TempCgroup {
 public:
  explicit TempCgroup(const std::string& root) : path_(root + "/flotilla-test-" + std::to_string(getpid()) + "-" + std::to_string(counter_++)) {
    ok_ = mkdir(path_.c_str(), 0755) == 0;
    if (ok_) fd_ = UniqueFd(open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  ~TempCgroup() {
    fd_.reset();
    if (ok_) rmdir(path_.c_str());
  }
  bool ok() const { return ok_ && fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  bool AddProcess(pid_t pid) const {
    std::ofstream procs(path_ + "/cgroup.procs");
    procs << pid;
    procs.flush();
    return procs.good();
  }

 private:
  static inline int counter_ = 0;
  std::string path_;
  bool ok_ = false;
  UniqueFd fd_;
};

// A listening TCP socket (or bound UDP socket) on an ephemeral loopback port.
struct Listener {
  UniqueFd fd;
  uint16_t port = 0;
};

Listener Listen(int family, int type, const char* addr) {
  Listener l;
  l.fd = UniqueFd(socket(family, type | SOCK_CLOEXEC, 0));
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &sin->sin_addr);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &sin6->sin6_addr);
    len = sizeof(sockaddr_in6);
  }
  EXPECT_EQ(bind(l.fd.get(), reinterpret_cast<sockaddr*>(&ss), len), 0) << addr << ": " << strerror(errno);
  if (type == SOCK_STREAM) {
    EXPECT_EQ(listen(l.fd.get(), 16), 0);
  }
  EXPECT_EQ(getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len), 0);
  l.port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return l;
}

// connect() or sendto() from the calling process; returns 0 or errno.
int Reach(int family, int type, const char* addr, uint16_t port) {
  int fd = socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    inet_pton(AF_INET, addr, &sin->sin_addr);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    inet_pton(AF_INET6, addr, &sin6->sin6_addr);
    len = sizeof(sockaddr_in6);
  }
  int rc = type == SOCK_STREAM ? connect(fd, reinterpret_cast<sockaddr*>(&ss), len)
                               : static_cast<int>(sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&ss), len));
  int err = rc < 0 ? errno : 0;
  close(fd);
  return err;
}

struct Attempt {
  int family;
  int type;
  const char* addr;
  uint16_t port;
};

// Runs `attempts` from a child placed in `cg`; returns each errno.
template <size_t N>
std::array<int, N> RunInCgroup(const TempCgroup& cg, const std::array<Attempt, N>& attempts) {
  std::array<int, N> result;
  result.fill(-1);
  int go[2];
  int out[2];
  EXPECT_EQ(pipe2(go, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    std::array<int, N> err;
    for (size_t i = 0; i < N; ++i) err[i] = Reach(attempts[i].family, attempts[i].type, attempts[i].addr, attempts[i].port);
    (void)!write(out[1], err.data(), sizeof(err));
    _exit(0);
  }
  close(go[0]);
  close(out[1]);
  EXPECT_TRUE(cg.AddProcess(pid));
  (void)!write(go[1], "g", 1);
  close(go[1]);
  EXPECT_EQ(read(out[0], result.data(), sizeof(result)), static_cast<ssize_t>(sizeof(result)));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return result;
}

class NetworkEnforcerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to load BPF programs and create cgroups";
    auto root = FindCgroup2Mount();
    if (!root.ok()) GTEST_SKIP() << root.status();
    root_ = *root;
    auto enforcer = NetworkEnforcer::Create();
    ASSERT_TRUE(enforcer.ok()) << enforcer.status();
    enforcer_ = std::move(*enforcer);
  }
  std::string root_;
  std::unique_ptr<NetworkEnforcer> enforcer_;
};

NetworkRule Rule(const char* cidr, std::vector<PortRange> ports) {
  return NetworkRule{*Cidr::Parse(cidr), std::move(ports)};
}

TEST_F(NetworkEnforcerTest, AllowsListedPortsAndDeniesTheRestWithEperm) {
  Listener allowed = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  Listener denied = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  Listener udp_allowed = Listen(AF_INET, SOCK_DGRAM, "127.0.0.1");
  Listener v6_allowed = Listen(AF_INET6, SOCK_STREAM, "::1");
  Listener v6_denied = Listen(AF_INET6, SOCK_STREAM, "::1");
  auto cg_holder = std::make_unique<TempCgroup>(root_);
  const TempCgroup& cg = *cg_holder;
  ASSERT_TRUE(cg.ok()) << cg.path() << ": " << strerror(errno);
  NetworkPolicy policy;
  policy.allow = {Rule("127.0.0.1", {{allowed.port, allowed.port}, {udp_allowed.port, udp_allowed.port}}),
                  Rule("::1", {{v6_allowed.port, v6_allowed.port}})};
  auto att = enforcer_->Attach(policy, cg.fd());
  ASSERT_TRUE(att.ok()) << att.status();
  EXPECT_EQ((*att)->rule_count(), 2u);
  std::vector<uint32_t> links = (*att)->link_ids();
  ASSERT_EQ(links.size(), 4u);

  auto err = RunInCgroup<7>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.1", allowed.port},
                                  {AF_INET, SOCK_STREAM, "127.0.0.1", denied.port},
                                  {AF_INET, SOCK_DGRAM, "127.0.0.1", udp_allowed.port},
                                  {AF_INET, SOCK_DGRAM, "192.0.2.1", 53},
                                  {AF_INET6, SOCK_STREAM, "::1", v6_allowed.port},
                                  {AF_INET6, SOCK_STREAM, "::1", v6_denied.port},
                                  {AF_INET6, SOCK_DGRAM, "::ffff:192.0.2.1", 53}}});
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], EPERM);
  EXPECT_EQ(err[2], 0);
  EXPECT_EQ(err[3], EPERM);
  EXPECT_EQ(err[4], 0);
  EXPECT_EQ(err[5], EPERM);
  EXPECT_EQ(err[6], EPERM);
  EXPECT_EQ((*att)->denials(), 4u);
  // This process is outside the cgroup: not affected.
  EXPECT_EQ(Reach(AF_INET, SOCK_STREAM, "127.0.0.1", denied.port), 0);

  att->reset();
  for (uint32_t id : links) {
    int fd = bpf_link_get_fd_by_id(id);
    EXPECT_LT(fd, 0) << "link " << id << " still exists";
    if (fd >= 0) close(fd);
  }
  std::string path = cg.path();
  cg_holder.reset();
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
}

TEST_F(NetworkEnforcerTest, DenyListWinsOverAWiderAllowRule) {
  Listener mirror = Listen(AF_INET, SOCK_STREAM, "127.0.0.3");
  Listener other = Listen(AF_INET, SOCK_STREAM, "127.0.0.4");
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  NetworkPolicy policy;
  policy.allow = {Rule("127.0.0.0/8", {{1, 65535}})};
  policy.deny = {*Cidr::Parse("127.0.0.3")};
  auto att = enforcer_->Attach(policy, cg.fd());
  ASSERT_TRUE(att.ok()) << att.status();
  auto err = RunInCgroup<2>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.3", mirror.port},
                                  {AF_INET, SOCK_STREAM, "127.0.0.4", other.port}}});
  EXPECT_EQ(err[0], EPERM);
  EXPECT_EQ(err[1], 0);
  EXPECT_EQ((*att)->denials(), 1u);
}

TEST_F(NetworkEnforcerTest, ANarrowRuleKeepsThePortsOfAWiderOne) {
  Listener a = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  Listener b = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  Listener c = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  NetworkPolicy policy;
  policy.allow = {Rule("127.0.0.0/8", {{a.port, a.port}}), Rule("127.0.0.1/32", {{b.port, b.port}})};
  auto att = enforcer_->Attach(policy, cg.fd());
  ASSERT_TRUE(att.ok()) << att.status();
  auto err = RunInCgroup<3>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.1", a.port},
                                  {AF_INET, SOCK_STREAM, "127.0.0.1", b.port},
                                  {AF_INET, SOCK_STREAM, "127.0.0.1", c.port}}});
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], 0);
  EXPECT_EQ(err[2], EPERM);
}

TEST_F(NetworkEnforcerTest, EmptyPolicyDeniesEverythingAndDetachRestoresAccess) {
  Listener l = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  auto att = enforcer_->Attach(NetworkPolicy{}, cg.fd());
  ASSERT_TRUE(att.ok()) << att.status();
  EXPECT_EQ((RunInCgroup<1>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.1", l.port}}})[0]), EPERM);
  att->reset();
  EXPECT_EQ((RunInCgroup<1>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.1", l.port}}})[0]), 0);
}

TEST_F(NetworkEnforcerTest, SecondAttachToTheSameCgroupIsAlreadyExists) {
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  auto first = enforcer_->Attach(NetworkPolicy{}, cg.fd());
  ASSERT_TRUE(first.ok());
  auto second = enforcer_->Attach(NetworkPolicy{}, cg.fd());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(NetworkEnforcerTest, NonCgroupDirectoryIsInvalidArgument) {
  UniqueFd tmp(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto att = enforcer_->Attach(NetworkPolicy{}, tmp.get());
  EXPECT_EQ(att.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NetworkEnforcerTest, AnchorCgroupLivesAsLongAsTheEnforcer) {
  std::string anchor = root_ + "/flotilla-netpolicy-anchor." + std::to_string(getpid());
  EXPECT_TRUE(std::filesystem::is_directory(anchor));
  enforcer_.reset();
  EXPECT_FALSE(std::filesystem::exists(anchor));
}

TEST(Cgroup2MountTest, FindsTheV2Hierarchy) {
  auto root = FindCgroup2Mount();
  if (!root.ok()) GTEST_SKIP() << root.status();
  EXPECT_TRUE(std::filesystem::exists(*root + "/cgroup.procs")) << *root;
}

}  // namespace
}  // namespace flotilla::policies
