// BuildImage end to end: debootstrap a minimal Debian from the machine's own apt source, then run
// sandboxes on it. Bad names and unknown suites are refused before anything is written.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sandbox_fixture.h"

namespace flotilla::sandbox {
namespace {

using testing::SandboxTest;
using testing::ScopedSandbox;

std::string HostDebianMajor() {
  std::ifstream in("/etc/debian_version");
  std::string v;
  std::getline(in, v);
  return v.substr(0, v.find('.'));
}

class ImageBuildTest : public SandboxTest {};

TEST_F(ImageBuildTest, RefusesBadNamesAndUnknownSuites) {
  EXPECT_EQ(BuildImage(state_dir(), "../escape", "", nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildImage(state_dir(), "", "", nullptr).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = BuildImage(state_dir(), "nosuite", "no-such-suite", nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("no-such-suite"), absl::string_view::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(state_dir() + "/images/nosuite/rootfs"));
}

TEST_F(ImageBuildTest, BuildsDebianAndRunsSandboxesOnIt) {
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  if (HostDebianMajor().empty()) GTEST_SKIP() << "host is not Debian: no suite to build";
  std::vector<std::string> lines;
  absl::Status built = BuildImage(state_dir(), "deb", "", [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(built.ok()) << built << "\n" << (lines.empty() ? "" : lines.back());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().rfind("debootstrap ", 0), 0u) << lines.front();
  EXPECT_TRUE(std::filesystem::exists(state_dir() + "/images/deb/rootfs/var/lib/dpkg/status"));
  EXPECT_FALSE(std::filesystem::exists(state_dir() + "/images/deb/rootfs.partial"));

  // A second build of the same name is refused and leaves the first image as it was.
  EXPECT_EQ(BuildImage(state_dir(), "deb", "", nullptr).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::exists(state_dir() + "/images/deb/rootfs/var/lib/dpkg/status"));

  SandboxOptions o;
  o.image = "deb";
  {
    ScopedSandbox sb(rt(), o);
    ASSERT_FALSE(sb.id().empty());
    std::string version = Sh(sb.id(), "cat /etc/debian_version");
    EXPECT_EQ(version.substr(0, version.find('.')), HostDebianMajor()) << version;
    ExecResult r;
    std::string status = Sh(sb.id(), "dpkg-query -W -f='${Status}' coreutils", &r);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(status, "install ok installed");
    Sh(sb.id(), "echo mine > /etc/marker && rm -f /usr/bin/apt-get", &r);
    EXPECT_EQ(r.exit_code, 0);
  }
  // Writes of one sandbox stay in its own writable layer: the next one sees the clean image.
  ScopedSandbox next(rt(), o);
  ASSERT_FALSE(next.id().empty());
  ExecResult r;
  EXPECT_EQ(Sh(next.id(), "test -e /etc/marker && echo leaked; test -x /usr/bin/apt-get && echo apt", &r), "apt\n");
  EXPECT_TRUE(std::filesystem::exists(state_dir() + "/images/deb/rootfs/usr/bin/apt-get"));
}

}  // namespace
}  // namespace flotilla::sandbox
