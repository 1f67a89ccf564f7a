// The node's pinned copy of the eBPF network programs: shared by enforcers of one pin
// directory, kept between processes, purged of dead cgroups' entries, and taken away whole.
#include <bpf/bpf.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "flotilla/policies/network.h"
#include "gtest/gtest.h"
#include "net_test_util.h"

namespace flotilla::policies {
namespace {

using nettest::Listen;
using nettest::Listener;
using nettest::RunInCgroup;
using nettest::TempCgroup;

// The program id behind each of an attachment's links.
std::set<uint32_t> ProgramIds(const NetworkAttachment& att) {
  std::set<uint32_t> ids;
  for (uint32_t link_id : att.link_ids()) {
    UniqueFd fd(bpf_link_get_fd_by_id(link_id));
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (fd.valid() && bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0) ids.insert(info.prog_id);
  }
  return ids;
}

std::vector<std::string> AnchorsOf(const std::string& root) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    if (n.rfind("flotilla-netpolicy-node.", 0) == 0) names.push_back(n);
  }
  return names;
}

class NetworkPinnedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to load BPF programs, mount a bpffs and create cgroups";
    auto root = FindCgroup2Mount();
    if (!root.ok()) GTEST_SKIP() << root.status();
    root_ = *root;
    pin_dir_ = "/run/flotilla-test-" + std::to_string(getpid()) + "/bpf";
    anchors_before_ = AnchorsOf(root_);
  }
  void TearDown() override {
    if (pin_dir_.empty()) return;
    EXPECT_TRUE(NetworkEnforcer::RemovePinned(pin_dir_).ok());
    std::filesystem::remove_all(std::filesystem::path(pin_dir_).parent_path());
  }
  std::unique_ptr<NetworkEnforcer> Pinned() {
    auto e = NetworkEnforcer::Create(NetworkEnforcer::Options{.max_rules = 4096, .keep_hooks_warm = true, .pin_dir = pin_dir_});
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  std::string root_, pin_dir_;
  std::vector<std::string> anchors_before_;
};

TEST_F(NetworkPinnedTest, EnforcersShareOneCopyThatOutlivesThemUntilRemoved) {
  Listener allowed = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  Listener denied = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  NetworkPolicy policy;
  policy.allow = {NetworkRule{*Cidr::Parse("127.0.0.1"), {{allowed.port, allowed.port}}}};
  std::set<uint32_t> first_ids;
  {
    auto a = Pinned();
    auto b = Pinned();
    ASSERT_TRUE(a && b);
    struct statfs st {};
    ASSERT_EQ(statfs(pin_dir_.c_str(), &st), 0);
    EXPECT_EQ(st.f_type, static_cast<decltype(st.f_type)>(BPF_FS_MAGIC)) << pin_dir_ << " is not a bpffs";
    EXPECT_EQ(AnchorsOf(root_).size(), anchors_before_.size() + 1) << "one anchor cgroup for the pinned copy";
    TempCgroup cg1(root_), cg2(root_);
    ASSERT_TRUE(cg1.ok() && cg2.ok());
    auto att1 = a->Attach(policy, cg1.fd());
    auto att2 = b->Attach(policy, cg2.fd());
    ASSERT_TRUE(att1.ok() && att2.ok());
    first_ids = ProgramIds(**att1);
    EXPECT_EQ(first_ids.size(), 4u);
    EXPECT_EQ(ProgramIds(**att2), first_ids) << "the second enforcer loaded programs of its own";
    auto err = RunInCgroup<2>(cg2, {{{AF_INET, SOCK_STREAM, "127.0.0.1", allowed.port},
                                     {AF_INET, SOCK_STREAM, "127.0.0.1", denied.port}}});
    EXPECT_EQ(err[0], 0);
    EXPECT_EQ(err[1], EPERM);
    EXPECT_EQ((*att2)->denials(), 1u);
    EXPECT_EQ((*att1)->denials(), 0u) << "counters are per cgroup in the shared map";
  }
  // No enforcer holds the programs now; the pins do.
  {
    auto c = Pinned();
    ASSERT_TRUE(c);
    TempCgroup cg(root_);
    ASSERT_TRUE(cg.ok());
    auto att = c->Attach(policy, cg.fd());
    ASSERT_TRUE(att.ok());
    EXPECT_EQ(ProgramIds(**att), first_ids) << "the pinned copy did not outlive its enforcers";
  }
  ASSERT_TRUE(NetworkEnforcer::RemovePinned(pin_dir_).ok());
  struct statfs st {};
  EXPECT_TRUE(statfs(pin_dir_.c_str(), &st) != 0 || st.f_type != BPF_FS_MAGIC) << "the bpffs is still mounted";
  EXPECT_FALSE(std::filesystem::exists(pin_dir_));
  EXPECT_EQ(AnchorsOf(root_), anchors_before_) << "the anchor cgroup is still there";
  auto d = Pinned();
  ASSERT_TRUE(d);
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  auto att = d->Attach(policy, cg.fd());
  ASSERT_TRUE(att.ok());
  for (uint32_t id : ProgramIds(**att)) EXPECT_EQ(first_ids.count(id), 0u) << "removed programs came back";
}

// Where no bpffs can be had, the programs load for the process alone and still enforce.
TEST_F(NetworkPinnedTest, WithoutPinsTheProgramsStillLoadAndEnforce) {
  auto e = NetworkEnforcer::Create(
      NetworkEnforcer::Options{.max_rules = 4096, .keep_hooks_warm = false, .pin_dir = "/proc/version/bpf"});
  ASSERT_TRUE(e.ok()) << e.status();
  Listener l = Listen(AF_INET, SOCK_STREAM, "127.0.0.1");
  TempCgroup cg(root_);
  ASSERT_TRUE(cg.ok());
  auto att = (*e)->Attach(NetworkPolicy{}, cg.fd());
  ASSERT_TRUE(att.ok()) << att.status();
  EXPECT_EQ((RunInCgroup<1>(cg, {{{AF_INET, SOCK_STREAM, "127.0.0.1", l.port}}})[0]), EPERM);
}

TEST_F(NetworkPinnedTest, EntriesOfACgroupWhoseProcessDiedArePurged) {
  uint64_t cgroup_id = 0;
  {
    TempCgroup cg(root_);
    ASSERT_TRUE(cg.ok());
    int ids[2];
    ASSERT_EQ(pipe(ids), 0);
    pid_t pid = fork();
    if (pid == 0) {
      // A process that attaches and dies without detaching.
      auto e = NetworkEnforcer::Create(NetworkEnforcer::Options{.max_rules = 4096, .keep_hooks_warm = true, .pin_dir = pin_dir_});
      if (!e.ok()) _exit(2);
      NetworkPolicy policy;
      policy.allow = {NetworkRule{*Cidr::Parse("10.0.0.0/8"), {{1, 65535}}}};
      auto att = (*e)->Attach(policy, cg.fd());
      if (!att.ok()) _exit(3);
      uint64_t id = (*att)->cgroup_id();
      (void)!write(ids[1], &id, sizeof(id));
      _exit(0);
    }
    close(ids[1]);
    ASSERT_EQ(read(ids[0], &cgroup_id, sizeof(cgroup_id)), static_cast<ssize_t>(sizeof(cgroup_id)));
    close(ids[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }  // the cgroup is removed here
  std::string version_dir;
  for (const auto& e : std::filesystem::directory_iterator(pin_dir_)) {
    if (e.is_directory()) version_dir = e.path().string();  // beside the bpffs's own *.debug files
  }
  UniqueFd denials(bpf_obj_get((version_dir + "/denials").c_str()));
  ASSERT_TRUE(denials.valid()) << version_dir << ": " << std::strerror(errno);
  uint64_t count = 0;
  ASSERT_EQ(bpf_map_lookup_elem(denials.get(), &cgroup_id, &count), 0) << "the dead process's entry should be there";
  auto next = Pinned();
  ASSERT_TRUE(next);
  EXPECT_GE(next->PurgeDeadCgroups(), 1);
  EXPECT_NE(bpf_map_lookup_elem(denials.get(), &cgroup_id, &count), 0);
  EXPECT_EQ(errno, ENOENT);
  UniqueFd rules(bpf_obj_get((version_dir + "/rules").c_str()));
  ASSERT_TRUE(rules.valid());
  uint8_t key[28], nkey[28];
  const void* prev = nullptr;
  int left = 0;
  while (bpf_map_get_next_key(rules.get(), prev, nkey) == 0) {
    uint64_t id;
    std::memcpy(&id, nkey + 4, sizeof(id));
    if (id == cgroup_id) ++left;
    std::memcpy(key, nkey, sizeof(key));
    prev = key;
  }
  EXPECT_EQ(left, 0) << "rules of the dead cgroup are still in the shared map";
}

}  // namespace
}  // namespace flotilla::policies
