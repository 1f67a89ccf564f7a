// Landlock plans applied in forked children, checked with real file operations.
#include "flotilla/policies/landlock.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::policies {
namespace {

int OpenErr(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

// Applies `plan` in a child, then runs each (path, flags) open; returns the errnos.
template <size_t N>
std::array<int, N> OpensUnderPlan(const LandlockPlan& plan, const std::array<std::pair<std::string, int>, N>& opens) {
  std::array<int, N> result;
  result.fill(-1);
  int out[2];
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    if (plan.ApplyInChild() != 0) _exit(3);
    std::array<int, N> err;
    for (size_t i = 0; i < N; ++i) err[i] = OpenErr(opens[i].first, opens[i].second);
    (void)!write(out[1], err.data(), sizeof(err));
    _exit(0);
  }
  close(out[1]);
  EXPECT_EQ(read(out[0], result.data(), sizeof(result)), static_cast<ssize_t>(sizeof(result)));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return result;
}

class LandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (LandlockAbiVersion() == 0) GTEST_SKIP() << "landlock: not available in this kernel";
    for (const char* d : {"rw", "ro", "ro/secret-dir", "other"}) std::filesystem::create_directories(dir_.path() / d);
    for (const char* f : {"ro/file", "ro/shadow", "ro/secret-dir/key", "other/file", "rw/existing"}) {
      std::ofstream(dir_.file(f)) << "data";
    }
  }
  testing::TempDir dir_;
};

TEST_F(LandlockTest, DeniesWritesOutsideTheAllowedDirectories) {
  FilesystemPolicy fs;
  fs.read_write = {dir_.file("rw")};
  fs.read_only = {dir_.file("ro")};
  auto plan = LandlockPlan::Create(fs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto err = OpensUnderPlan<6>(*plan, {{{dir_.file("rw/new"), O_WRONLY | O_CREAT},
                                        {dir_.file("rw/existing"), O_RDWR},
                                        {dir_.file("ro/file"), O_RDONLY},
                                        {dir_.file("ro/file"), O_WRONLY},
                                        {dir_.file("ro/new"), O_WRONLY | O_CREAT},
                                        {dir_.file("other/file"), O_RDONLY}}});
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], 0);
  EXPECT_EQ(err[2], 0);
  EXPECT_EQ(err[3], EACCES);
  EXPECT_EQ(err[4], EACCES);
  EXPECT_EQ(err[5], EACCES);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("ro/new")));
}

TEST_F(LandlockTest, HiddenPathsBeneathAnAllowedDirectoryAreDenied) {
  FilesystemPolicy fs;
  fs.read_only = {dir_.file("ro")};
  fs.hidden = {dir_.file("ro/shadow"), dir_.file("ro/secret-dir")};
  auto plan = LandlockPlan::Create(fs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto err = OpensUnderPlan<4>(*plan, {{{dir_.file("ro/file"), O_RDONLY},
                                        {dir_.file("ro/shadow"), O_RDONLY},
                                        {dir_.file("ro/secret-dir/key"), O_RDONLY},
                                        {dir_.file("ro"), O_RDONLY | O_DIRECTORY}}});
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], EACCES);
  EXPECT_EQ(err[2], EACCES);
  EXPECT_EQ(err[3], 0);  // the directory stays listable
}

TEST_F(LandlockTest, ReadOnlyBeneathReadWriteIsReadOnly) {
  FilesystemPolicy fs;
  fs.read_write = {dir_.path().string()};
  fs.read_only = {dir_.file("ro")};
  auto plan = LandlockPlan::Create(fs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto err = OpensUnderPlan<3>(*plan, {{{dir_.file("rw/new"), O_WRONLY | O_CREAT},
                                        {dir_.file("ro/file"), O_WRONLY},
                                        {dir_.file("ro/file"), O_RDONLY}}});
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], EACCES);
  EXPECT_EQ(err[2], 0);
}

TEST_F(LandlockTest, MissingPathsAreSkippedAndRelativeOnesRejected) {
  FilesystemPolicy fs;
  fs.read_write = {dir_.file("rw"), dir_.file("does-not-exist")};
  auto plan = LandlockPlan::Create(fs);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((OpensUnderPlan<1>(*plan, {{{dir_.file("rw/x"), O_WRONLY | O_CREAT}}})[0]), 0);
  fs.read_only = {"relative/path"};
  EXPECT_EQ(LandlockPlan::Create(fs).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LandlockTest, AbiMatchesTheKernel) {
  auto plan = LandlockPlan::Create(FilesystemPolicy{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->abi(), LandlockAbiVersion());
  EXPECT_GE(plan->abi(), 1);
  EXPECT_EQ(plan->handled_access() & 0x1fff, 0x1fffu);  // every ABI 1 right is handled
}

// A truncated encoding (e.g. a damaged message to a sandbox init) is refused with EINVAL
// before any restriction: the process can still write everywhere.
TEST_F(LandlockTest, TruncatedEncodingIsRefusedBeforeApplying) {
  FilesystemPolicy fs;
  fs.read_only = {dir_.file("ro")};
  auto plan = LandlockPlan::Create(fs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string& enc = plan->encoded();
  ASSERT_GT(enc.size(), 24u);
  for (size_t len : {size_t{0}, size_t{10}, enc.size() - 1}) {
    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    pid_t pid = fork();
    if (pid == 0) {
      int result[2] = {ApplyEncodedLandlockPlan(enc.data(), len), OpenErr(dir_.file("other/file"), O_WRONLY)};
      (void)!write(out[1], result, sizeof(result));
      _exit(0);
    }
    close(out[1]);
    int result[2] = {-1, -1};
    EXPECT_EQ(read(out[0], result, sizeof(result)), static_cast<ssize_t>(sizeof(result)));
    close(out[0]);
    waitpid(pid, nullptr, 0);
    EXPECT_EQ(result[0], EINVAL) << len;
    EXPECT_EQ(result[1], 0) << len;
  }
}

}  // namespace
}  // namespace flotilla::policies
