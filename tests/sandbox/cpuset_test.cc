// Pinning a sandbox to CPUs and a memory node (its sub-NUMA partition) through the cpuset
// controller, v1 or v2, whichever the host has; refused clearly where the lists are wrong.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandbox_fixture.h"

namespace flotilla::sandbox {
namespace {

using testing::SandboxTest;
using testing::ScopedSandbox;

class CpusetTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped()) return;
    if (!rt().features().cpuset) GTEST_SKIP() << "no cpuset controller on this host";
  }
};

std::string AllowedCpus(const std::string& status) {
  size_t at = status.find("Cpus_allowed_list:");
  if (at == std::string::npos) return "";
  size_t start = status.find_first_not_of(" \t", at + 18), end = status.find('\n', at);
  return status.substr(start, end - start);
}

TEST_F(CpusetTest, SandboxRunsOnlyOnItsPartitionsCpus) {
  SandboxOptions o;
  o.resources.cpus = "0";
  o.resources.mems = "0";
  ScopedSandbox sb(rt(), o);
  ASSERT_FALSE(sb.id().empty());
  EXPECT_EQ(AllowedCpus(Sh(sb.id(), "cat /proc/self/status")), "0");
  // A child cannot widen its own set: the cgroup bounds it.
  EXPECT_EQ(AllowedCpus(Sh(sb.id(), "sh -c 'cat /proc/self/status'")), "0");
  auto info = rt().Info(sb.id());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->resources.cpus, "0");
  EXPECT_EQ(info->resources.mems, "0");

  // An unpinned sandbox keeps every CPU the host gives the runtime.
  ScopedSandbox free(rt());
  ASSERT_FALSE(free.id().empty());
  std::string all;
  {
    std::ifstream in("/proc/self/status");
    all = AllowedCpus(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  EXPECT_EQ(AllowedCpus(Sh(free.id(), "cat /proc/self/status")), all);
}

TEST_F(CpusetTest, UnknownCpuIsInvalidArgumentAndLeavesNoCgroup) {
  const size_t before = std::filesystem::exists("/sys/fs/cgroup/cpuset")
                            ? std::distance(std::filesystem::recursive_directory_iterator("/sys/fs/cgroup/cpuset"),
                                            std::filesystem::recursive_directory_iterator())
                            : 0;
  SandboxOptions o;
  o.resources.cpus = "4095";
  auto r = rt().Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("resources.cpus: cannot pin to '4095'"), absl::string_view::npos) << r.status();
  const size_t after = std::filesystem::exists("/sys/fs/cgroup/cpuset")
                           ? std::distance(std::filesystem::recursive_directory_iterator("/sys/fs/cgroup/cpuset"),
                                           std::filesystem::recursive_directory_iterator())
                           : 0;
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace flotilla::sandbox
