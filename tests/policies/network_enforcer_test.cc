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
#include "net_test_util.h"

namespace flotilla::policies {
namespace {

using nettest::Attempt;
using nettest::Listen;
using nettest::Listener;
using nettest::Reach;
using nettest::RunInCgroup;
using nettest::TempCgroup;

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
