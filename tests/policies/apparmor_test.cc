// AppArmor profile text, checked by the real apparmor_parser when it is installed.
#include "flotilla/policies/apparmor.h"

#include "absl/strings/match.h"
#include "flotilla/policies/enforcers.h"
#include "flotilla/policies/landlock.h"
#include "gtest/gtest.h"

namespace flotilla::policies {
namespace {

Policy Sample() {
  auto p = ParsePolicyText(R"(name: sample
filesystem:
  read_write: [/, /tmp]
  read_only: [/usr, /etc]
  hidden: [/etc/shadow, /root/.ssh]
network:
  allow:
    - cidr: 10.0.0.0/8
)", "sample.yaml");
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(AppArmorProfileTest, RendersTheRulesThePolicyNeeds) {
  auto text = RenderAppArmorProfile(Sample(), "flotilla-sbx-1");
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* line : {"profile flotilla-sbx-1 flags=(attach_disconnected,mediate_deleted) {",
                           "  \"/{,**}\" rwlkmix,\n", "  \"/usr{,/**}\" rmix,\n", "  deny \"/usr{,/**}\" wl,\n",
                           "  deny \"/etc/shadow{,/**}\" rwlkmx,\n", "  deny mount,\n", "  deny pivot_root,\n",
                           "  deny @{PROC}/sys/** wl,\n", "  deny /sys/** wl,\n",
                           "  ptrace (trace, read, tracedby, readby) peer=flotilla-sbx-1,\n",
                           "  deny network raw,\n", "  network inet stream,\n"}) {
    EXPECT_TRUE(absl::StrContains(*text, line)) << "missing: " << line << "\nin:\n" << *text;
  }
  EXPECT_FALSE(absl::StrContains(*text, "deny network inet,"));
}

TEST(AppArmorProfileTest, NoNetworkPolicyDeniesInetSockets) {
  auto p = LoadPolicy("no-network");
  ASSERT_TRUE(p.ok());
  auto text = RenderAppArmorProfile(*p, "nonet");
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StrContains(*text, "  deny network inet,\n  deny network inet6,\n"));
}

TEST(AppArmorProfileTest, RejectsUnsafeNamesAndPaths) {
  EXPECT_EQ(RenderAppArmorProfile(Sample(), "bad name{").status().code(), absl::StatusCode::kInvalidArgument);
  Policy p = Sample();
  p.filesystem.read_only.push_back("/data/*");
  EXPECT_EQ(RenderAppArmorProfile(p, "ok").status().message(), "apparmor: path '/data/*' has glob or quote characters");
}

class AppArmorParserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parser = FindAppArmorParser();
    if (!parser.ok()) GTEST_SKIP() << parser.status();
  }
};

TEST_F(AppArmorParserTest, ShippedAndSamplePoliciesPassTheParser) {
  for (const auto& name : BuiltinPolicyNames()) {
    auto p = LoadPolicy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    auto text = RenderAppArmorProfile(*p, "flotilla-" + name);
    ASSERT_TRUE(text.ok());
    absl::Status s = CheckAppArmorProfile(*text);
    EXPECT_TRUE(s.ok()) << name << ": " << s << "\n" << *text;
  }
  auto text = RenderAppArmorProfile(Sample(), "flotilla-sample");
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(CheckAppArmorProfile(*text).ok()) << CheckAppArmorProfile(*text);
}

TEST_F(AppArmorParserTest, ParserRejectsABrokenProfile) {
  absl::Status s = CheckAppArmorProfile("profile broken {\n  /tmp/** rwx,\n}\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "apparmor: profile rejected: ")) << s;
}

TEST(AppArmorLoadTest, LoadingNeedsAppArmorInTheKernel) {
  if (AppArmorEnabled()) GTEST_SKIP() << "AppArmor is enabled here; this checks the refusal path";
  auto loaded = LoadedAppArmorProfile::Load("flotilla-x", "profile flotilla-x {}\n");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(loaded.status().message(), "apparmor: not enabled in this kernel");
  EXPECT_NE(ChangeAppArmorProfileOnExec("flotilla-x"), 0);
}

TEST(EnforcerProbeTest, ReportsEveryEnforcerWithAReason) {
  std::vector<EnforcerStatus> all = ProbeEnforcers();
  std::vector<std::string> names;
  for (const auto& e : all) {
    names.push_back(e.name);
    EXPECT_TRUE(absl::StartsWith(e.detail, e.name.substr(0, e.name.find('_')))) << e.detail;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"seccomp", "seccomp_notify", "ebpf_network", "landlock", "apparmor"}));
  EXPECT_EQ(all[4].active, AppArmorEnabled() && FindAppArmorParser().ok());
  if (!AppArmorEnabled()) {
    EXPECT_EQ(all[4].detail, "apparmor: not enabled in this kernel");
  }
  EXPECT_EQ(all[3].active, LandlockAbiVersion() > 0);
}

}  // namespace
}  // namespace flotilla::policies
