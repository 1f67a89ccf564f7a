// The policy YAML loader: good documents, every kind of bad one, shipped policies, apt mirrors.
#include <fstream>

#include "flotilla/policies/policy.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::policies {
namespace {

struct BadCase {
  const char* yaml;
  const char* error;
};

class PolicyErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PolicyErrorTest, NamesFileLineAndField) {
  auto p = ParsePolicyText(GetParam().yaml, "policy.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PolicyErrorTest,
    ::testing::Values(
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.0/8\n    - cidr: 1.2.3.4\n    - cidr: 10.0.0/33\n",
                "policy.yaml:5: network.allow[2].cidr: bad CIDR '10.0.0/33'"},
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.1/8\n",
                "policy.yaml:3: network.allow[0].cidr: bad CIDR '10.0.0.1/8': host bits set beyond /8"},
        BadCase{"network:\n  allow:\n    - cidr: 2001:db8::/129\n",
                "policy.yaml:3: network.allow[0].cidr: bad CIDR '2001:db8::/129'"},
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.0/8\n      ports: [443, 70000]\n",
                "policy.yaml:4: network.allow[0].ports[1]: bad port '70000' (use 1..65535 or LO-HI)"},
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.0/8\n      ports: [\"90-80\"]\n",
                "policy.yaml:4: network.allow[0].ports[0]: bad port '90-80' (use 1..65535 or LO-HI)"},
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.0/8\n      ports: []\n",
                "policy.yaml:4: network.allow[0].ports: empty port list (leave 'ports' out for every port)"},
        BadCase{"network:\n  allow:\n    - cidr: 10.0.0.0/8\n      list: loopback\n",
                "policy.yaml:3: network.allow[0]: give exactly one of 'cidr' and 'list'"},
        BadCase{"network:\n  allow:\n    - list: mirrors_of_mars\n",
                "policy.yaml:3: network.allow[0].list: unknown address list 'mirrors_of_mars' (known: package_mirrors, loopback)"},
        BadCase{"network:\n  alow: []\n",
                "policy.yaml:2: network.alow: unknown field (expected one of: allow, deny_lists)"},
        BadCase{"filesytem: {}\n",
                "policy.yaml:1: filesytem: unknown field (expected one of: name, execution_class, filesystem, network, syscalls, resources)"},
        BadCase{"filesystem:\n  read_only: [usr]\n",
                "policy.yaml:2: filesystem.read_only[0]: path 'usr' must be absolute"},
        BadCase{"filesystem:\n  read_write: [/tmp/../etc]\n",
                "policy.yaml:2: filesystem.read_write[0]: path '/tmp/../etc' must not contain '..'"},
        BadCase{"syscalls:\n  deny: [mount, frobnicate]\n",
                "policy.yaml:2: syscalls.deny[1]: unknown syscall 'frobnicate'"},
        BadCase{"syscalls:\n  base: podman\n",
                "policy.yaml:2: syscalls.base: unknown base 'podman' (expected docker_default or none)"},
        BadCase{"resources:\n  pids: lots\n",
                "policy.yaml:2: resources.pids: expected an integer, got 'lots'"},
        BadCase{"resources:\n  cpu_weight: 0\n", "policy.yaml:2: resources.cpu_weight: must be in 1..10000"},
        // Figures past the runtime's 32-bit fields are refused, never wrapped.
        BadCase{"resources:\n  pids: 5000000000\n", "policy.yaml:2: resources.pids: must be in 0..4194304"},
        BadCase{"resources:\n  cpu_quota: 1e300\n", "policy.yaml:2: resources.cpu_quota: must be in 0..10000 (CPUs)"},
        BadCase{"resources:\n  exec_timeout: 1200h\n",
                "policy.yaml:2: resources.exec_timeout: must be at most 1176h (49 days)"},
        BadCase{"resources:\n  memory: 12Q\n", "policy.yaml:2: resources.memory: bad size unit in '12Q'"},
        BadCase{"execution_class: realtime\n",
                "policy.yaml:1: execution_class: unknown class 'realtime' (expected latency_sensitive or best_effort)"},
        BadCase{"- just\n- a list\n", "policy.yaml:1: (top level): a policy must be a map"}));

TEST(PolicyLoaderTest, ParsesEverySection) {
  auto p = ParsePolicyText(R"(name: custom
execution_class: latency_sensitive
filesystem:
  read_only: [/usr, /etc/]
  read_write: [/tmp]
  hidden: [/etc/shadow]
network:
  allow:
    - cidr: 10.1.0.0/16
      ports: [443, "8000-8100"]
    - cidr: 2001:db8::/32
    - list: loopback
      ports: [8080]
syscalls:
  deny: [chroot]
  allow: [ptrace, personality]
resources:
  memory: 512M
  pids: 64
  cpu_weight: 50
  cpu_quota: 1.5
  disk: 1G
  exec_timeout: 30s
  sandbox_timeout: 1h
  output_limit: 1M
)", "custom.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "custom");
  EXPECT_EQ(p->execution_class, ExecutionClass::kLatencySensitive);
  EXPECT_EQ(p->filesystem.read_only, (std::vector<std::string>{"/usr", "/etc"}));
  EXPECT_EQ(p->filesystem.read_write, (std::vector<std::string>{"/tmp"}));
  EXPECT_EQ(p->filesystem.hidden, (std::vector<std::string>{"/etc/shadow"}));
  ASSERT_EQ(p->network.allow.size(), 4u);
  EXPECT_EQ(p->network.allow[0].cidr.ToString(), "10.1.0.0/16");
  EXPECT_TRUE(p->network.allow[0].cidr.ipv4);
  EXPECT_EQ(p->network.allow[0].ports, (std::vector<PortRange>{{443, 443}, {8000, 8100}}));
  EXPECT_EQ(p->network.allow[1].cidr.ToString(), "2001:db8::/32");
  EXPECT_EQ(p->network.allow[1].ports, (std::vector<PortRange>{{0, 65535}}));
  EXPECT_EQ(p->network.allow[2].cidr.ToString(), "127.0.0.0/8");
  EXPECT_EQ(p->network.allow[3].cidr.ToString(), "::1/128");
  EXPECT_EQ(p->network.allow[3].ports, (std::vector<PortRange>{{8080, 8080}}));
  const auto& deny = p->syscalls.deny;
  EXPECT_NE(std::find(deny.begin(), deny.end(), "chroot"), deny.end());
  EXPECT_NE(std::find(deny.begin(), deny.end(), "mount"), deny.end());
  EXPECT_EQ(std::find(deny.begin(), deny.end(), "ptrace"), deny.end());
  EXPECT_EQ(deny.size(), DockerDefaultDenyList().size());  // +chroot -ptrace
  EXPECT_FALSE(p->syscalls.deny_personality);
  EXPECT_TRUE(p->syscalls.deny_namespace_flags);
  EXPECT_EQ(p->resources.memory_bytes, 512u << 20);
  EXPECT_EQ(p->resources.pids, 64);
  EXPECT_EQ(p->resources.cpu_weight, 50);
  EXPECT_DOUBLE_EQ(p->resources.cpu_quota, 1.5);
  EXPECT_EQ(p->resources.disk_bytes, 1u << 30);
  EXPECT_EQ(p->resources.exec_timeout_ms, 30'000);
  EXPECT_EQ(p->resources.sandbox_timeout_ms, 3'600'000);
  EXPECT_EQ(p->resources.output_limit_bytes, 1u << 20);
}

TEST(PolicyLoaderTest, EmptyDocumentIsDefaultDenyEverything) {
  auto p = ParsePolicyText("", "empty.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "empty");
  EXPECT_TRUE(p->network.allow.empty());
  EXPECT_EQ(p->syscalls.deny, DockerDefaultDenyList());
  EXPECT_EQ(p->execution_class, ExecutionClass::kBestEffort);
}

TEST(PolicyLoaderTest, ShippedPoliciesLoadByName) {
  EXPECT_EQ(BuiltinPolicyNames(), (std::vector<std::string>{"default", "no-network", "build"}));
  for (const auto& name : BuiltinPolicyNames()) {
    auto p = LoadPolicy(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(p->name, name);
    EXPECT_EQ(p->source, "builtin:" + name + ".yaml");
    EXPECT_FALSE(p->syscalls.deny.empty());
  }
  auto no_net = LoadPolicy("no-network");
  ASSERT_TRUE(no_net.ok());
  EXPECT_TRUE(no_net->network.allow.empty());
}

TEST(PolicyLoaderTest, ShippedFilesOnDiskMatchTheEmbeddedOnes) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "FLOTILLA_SOURCE_DIR not set (run through ctest)";
  for (const auto& name : BuiltinPolicyNames()) {
    auto from_file = LoadPolicy(std::string(src) + "/policies/" + name + ".yaml");
    auto builtin = LoadPolicy(name);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    ASSERT_TRUE(builtin.ok()) << builtin.status();
    EXPECT_EQ(from_file->Fingerprint(), builtin->Fingerprint()) << name;
  }
}

TEST(PolicyLoaderTest, UnknownNameIsNotFound) {
  auto p = LoadPolicy("paranoid");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(),
            "no policy named 'paranoid' (shipped: default, no-network, build; or give a .yaml file)");
  EXPECT_EQ(LoadPolicy("/nonexistent/p.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(PolicyLoaderTest, FingerprintFollowsContentNotName) {
  auto a = ParsePolicyText("name: a\nresources: {pids: 10}\n", "a.yaml");
  auto b = ParsePolicyText("name: b\nresources: {pids: 10}\n", "b.yaml");
  auto c = ParsePolicyText("name: a\nresources: {pids: 11}\n", "a.yaml");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->Fingerprint(), b->Fingerprint());
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
  EXPECT_EQ(a->Fingerprint().size(), 32u);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(AptMirrorTest, ReadsListAndDeb822SourcesAndSkipsDisabledOnes) {
  testing::TempDir root;
  std::filesystem::create_directories(root.path() / "etc/apt/sources.list.d");
  WriteFile(root.file("etc/apt/sources.list"),
            "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://localhost/debian stable main\n"
            "deb-src http://user@127.0.0.2:8080/debian stable main\ndeb file:/srv/local ./\n");
  WriteFile(root.file("etc/apt/sources.list.d/a.sources"),
            "Types: deb\nURIs: https://[::1]/x\n  http://localhost/again\nSuites: s\n\n"
            "Types: deb\nEnabled: no\nURIs: http://192.0.2.9/disabled\n");
  WriteFile(root.file("etc/apt/sources.list.d/b.list.disabled"), "deb http://192.0.2.10/ x main\n");
  auto hosts = AptSourceHosts(root.path().string());
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"localhost", "127.0.0.2", "::1"}));

  PolicyLoadOptions opts{.apt_root = root.path().string()};
  auto p = ParsePolicyText("network:\n  allow:\n    - list: package_mirrors\n      ports: [80]\n"
                           "  deny_lists: [package_mirrors]\n", "build.yaml", opts);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> allowed;
  for (const auto& r : p->network.allow) allowed.push_back(r.cidr.ToString());
  // localhost resolves through the test machine's /etc/hosts; addresses given literally pass as is.
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), "127.0.0.1/32"), allowed.end());
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), "127.0.0.2/32"), allowed.end());
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), "::1/128"), allowed.end());
  EXPECT_EQ(p->network.deny.size(), p->network.allow.size());
  EXPECT_EQ(p->network.deny_lists, (std::vector<std::string>{"package_mirrors"}));
}

TEST(AptMirrorTest, UnresolvableMirrorIsSkippedAndReported) {
  testing::TempDir root;
  std::filesystem::create_directories(root.path() / "etc/apt");
  WriteFile(root.file("etc/apt/sources.list"),
            "deb http://no-such-host.invalid/debian stable main\ndeb http://192.0.2.5/debian stable main\n");
  PolicyLoadOptions opts{.apt_root = root.path().string()};
  auto p = ParsePolicyText("network:\n  deny_lists: [package_mirrors]\n", "p.yaml", opts);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->network.deny.size(), 1u);
  EXPECT_EQ(p->network.deny[0].ToString(), "192.0.2.5/32");
  EXPECT_EQ(p->network.unresolved_hosts, (std::vector<std::string>{"no-such-host.invalid"}));
  auto strict = ResolveNamedList("package_mirrors", opts);
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kUnavailable);
}

// A deny list is moot while only loopback is allowed (a sandbox's loopback is its own): with
// defer_moot_deny_lists it is named but not looked up until a wider rule makes it matter.
TEST(AptMirrorTest, DenyListOfALoopbackOnlyPolicyWaitsUntilItMatters) {
  testing::TempDir root;
  std::filesystem::create_directories(root.path() / "etc/apt");
  WriteFile(root.file("etc/apt/sources.list"), "deb http://192.0.2.5/debian stable main\n");
  PolicyLoadOptions opts{.apt_root = root.path().string(), .defer_moot_deny_lists = true};
  const char* yaml = "network:\n  allow:\n    - list: loopback\n  deny_lists: [package_mirrors]\n";
  auto p = ParsePolicyText(yaml, "p.yaml", opts);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->network.deny_pending);
  EXPECT_TRUE(p->network.deny.empty());
  EXPECT_TRUE(OnlyLoopbackAllowed(p->network));
  EXPECT_EQ(p->network.deny_lists, (std::vector<std::string>{"package_mirrors"}));

  p->network.allow.push_back(NetworkRule{*Cidr::Parse("192.0.2.0/24"), {PortRange{}}});
  EXPECT_FALSE(OnlyLoopbackAllowed(p->network));
  ASSERT_TRUE(ResolvePendingDenyLists(&p->network, opts).ok());
  EXPECT_FALSE(p->network.deny_pending);
  ASSERT_EQ(p->network.deny.size(), 1u);
  EXPECT_EQ(p->network.deny[0].ToString(), "192.0.2.5/32");

  // Without the option, or with a wider allow rule, the list is resolved at load as before.
  auto eager = ParsePolicyText(yaml, "p.yaml", PolicyLoadOptions{.apt_root = root.path().string()});
  ASSERT_TRUE(eager.ok());
  EXPECT_FALSE(eager->network.deny_pending);
  EXPECT_EQ(eager->network.deny.size(), 1u);
  auto wide = ParsePolicyText("network:\n  allow:\n    - cidr: 10.0.0.0/8\n  deny_lists: [package_mirrors]\n",
                              "p.yaml", opts);
  ASSERT_TRUE(wide.ok());
  EXPECT_FALSE(wide->network.deny_pending);
  EXPECT_EQ(wide->network.deny.size(), 1u);
  // An unknown list name is still an error of the document when its lookup is deferred.
  auto bad = ParsePolicyText("network:\n  deny_lists: [mirrors_of_mars]\n", "p.yaml", opts);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AptMirrorTest, NoAptConfigurationMeansAnEmptyList) {
  testing::TempDir root;
  auto hosts = AptSourceHosts(root.path().string());
  ASSERT_TRUE(hosts.ok());
  EXPECT_TRUE(hosts->empty());
}

TEST(AllowFlagTest, ParsesTheFlagForms) {
  auto a = ParseAllowFlag("10.0.0.0/8:443");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cidr.ToString(), "10.0.0.0/8");
  EXPECT_EQ(a->ports, (std::vector<PortRange>{{443, 443}}));
  auto b = ParseAllowFlag("[2001:db8::/32]:8000-8100");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cidr.ToString(), "2001:db8::/32");
  EXPECT_EQ(b->ports, (std::vector<PortRange>{{8000, 8100}}));
  auto c = ParseAllowFlag("192.0.2.7");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cidr.ToString(), "192.0.2.7/32");
  EXPECT_EQ(c->ports, (std::vector<PortRange>{{0, 65535}}));
  auto d = ParseAllowFlag("::1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cidr.ToString(), "::1/128");
  EXPECT_EQ(ParseAllowFlag("10.0.0.0/8:0").status().message(), "bad port '0' (use 1..65535 or LO-HI)");
  EXPECT_EQ(ParseAllowFlag("nope:80").status().message(), "bad CIDR 'nope'");
}

TEST(CidrTest, ContainsAcrossPrefixes) {
  auto wide = *Cidr::Parse("10.0.0.0/8");
  auto narrow = *Cidr::Parse("10.1.2.0/24");
  auto other = *Cidr::Parse("11.0.0.0/8");
  auto v6 = *Cidr::Parse("::ffff:10.1.2.3");
  EXPECT_TRUE(wide.Contains(narrow));
  EXPECT_FALSE(narrow.Contains(wide));
  EXPECT_FALSE(wide.Contains(other));
  EXPECT_TRUE(wide.Contains(v6));  // IPv4-mapped IPv6 is the same address
  EXPECT_EQ(Cidr::Parse("0.0.0.0/0")->prefix_len, 96);
}

}  // namespace
}  // namespace flotilla::policies
