// CgroupDriver::Limit on a cgroup v2 layout, over a plain directory: a v2 cgroup whose parent
// did not delegate the cpu controller has no cpu.weight or cpu.max, exactly like the plain
// directory, so a CPU limit that cannot be written must fail the create, naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cgroups.h"
#include "testing/temp_dir.h"

namespace flotilla::sandbox {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CgroupV2LimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = CgroupDriver::PureV2At(root_.path().string());
    ASSERT_TRUE(driver_.EnsureGroup("flotilla").ok());
    auto cg = driver_.Make("flotilla", "sbx-1");
    ASSERT_TRUE(cg.ok()) << cg.status();
    cg_ = std::move(*cg);
    dir_ = root_.file("flotilla/sbx-1");
    ASSERT_TRUE(std::filesystem::is_directory(dir_));
  }
  // The files a delegated cpu controller provides (empty here: a plain file is not truncated by
  // the write the way a cgroup file is replaced).
  void DelegateCpu() {
    std::ofstream(dir_ + "/cpu.weight");
    std::ofstream(dir_ + "/cpu.max");
  }

  flotilla::testing::TempDir root_;
  CgroupDriver driver_;
  std::unique_ptr<SandboxCgroup> cg_;
  std::string dir_;
};

TEST_F(CgroupV2LimitTest, CpuWeightWithoutTheCpuControllerIsAnError) {
  CgroupLimits limits;
  limits.cpu_weight = 50;
  absl::Status s = driver_.Limit(*cg_, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "resources.cpu_weight: not applied (open " + dir_ + "/cpu.weight: No such file or directory)");
}

TEST_F(CgroupV2LimitTest, CpuQuotaWithoutTheCpuControllerIsAnError) {
  CgroupLimits limits;
  limits.cpu_quota_millicores = 1500;
  absl::Status s = driver_.Limit(*cg_, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "resources.cpu_quota_millicores: not applied (open " + dir_ + "/cpu.max: No such file or directory)");
}

TEST_F(CgroupV2LimitTest, CpuLimitsAreWrittenWhereTheControllerIsDelegated) {
  DelegateCpu();
  CgroupLimits limits;
  limits.cpu_weight = 50;
  limits.cpu_quota_millicores = 1500;
  ASSERT_TRUE(driver_.Limit(*cg_, limits).ok());
  EXPECT_EQ(Read(dir_ + "/cpu.weight"), "50");
  EXPECT_EQ(Read(dir_ + "/cpu.max"), "150000 100000");
}

}  // namespace
}  // namespace flotilla::sandbox
