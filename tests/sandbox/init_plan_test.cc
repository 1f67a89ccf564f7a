// InitPlan encoding: what the zygote and the init read back is exactly what the runtime built,
// and buffers that are not a whole plan are refused before anything runs.
#include "init_plan.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <cerrno>

#include <cstring>
#include <string>
#include <vector>

namespace flotilla::sandbox {
namespace {

using namespace std::string_literals;

// The hook entries of a decoded plan: kind, data, the descriptor the receiver sees.
std::string Hooks(const InitPlanView& v, const char* base) {
  InitPlanWireHeader h;
  std::memcpy(&h, base, sizeof(h));
  std::string out;
  for (uint32_t i = 0; i < h.n_hooks; ++i) {
    InitPlanWireHook k;
    std::memcpy(&k, base + h.hooks + i * sizeof(k), sizeof(k));
    out += std::to_string(k.stage) + ":" + std::to_string(k.kind) + ":" + std::string(v.At(k.data), k.len) + ":" +
           std::to_string(k.fd_index >= 0 ? v.fds()[k.fd_index] : -1) + ":" + std::to_string(k.data % 8) + ";";
  }
  return out;
}

InitPlan SamplePlan() {
  InitPlan p;
  p.control_fd = 40;
  p.tmpfs_fd = 41;
  p.rw_dir = "/state/run/i1/layer";
  p.root_dir = "/state/run/i1/root";
  p.hostname = "sbx-1";
  p.cgroup_procs = {"/sys/fs/cgroup/memory/a/cgroup.procs", "/sys/fs/cgroup/pids/a/cgroup.procs"};
  p.sched_idle = true;
  p.keep_caps = 0x1234567890ull;
  InitStep mount;
  mount.kind = InitStep::Kind::kMount;
  mount.source = "overlay";
  mount.target = "/state/run/i1/root";
  mount.fstype = "overlay";
  mount.data = "lowerdir=/a:/b";
  mount.flags = 6;
  InitStep node;
  node.kind = InitStep::Kind::kMknod;
  node.target = "/state/run/i1/root/dev/null";
  node.mode = 020666;
  node.dev = 259;
  node.optional = true;
  p.steps = {mount, node};
  p.before_userns.push_back(ChildHook{ChildHookKind::kLandlock, "abc", -1});
  p.last.push_back(ChildHook{ChildHookKind::kSeccomp, std::string("x\0y", 3), 42});
  return p;
}

// Decodes `bytes` from an 8-byte aligned copy, as the zygote's receive buffer is.
bool DecodeCopy(const std::string& bytes, std::vector<uint64_t>* storage, InitPlanView* view,
                const std::vector<int>& fds) {
  storage->assign(bytes.size() / 8 + 1, 0);
  std::memcpy(storage->data(), bytes.data(), bytes.size());
  return view->Decode(reinterpret_cast<const char*>(storage->data()), bytes.size(), fds.data(),
                      static_cast<int>(fds.size()), 7);
}

TEST(InitPlanTest, LayerDescriptorsComeRightAfterTheControlAndTmpfsOnes) {
  InitPlan p = SamplePlan();
  p.layer_fds = {50, 51};
  auto enc = EncodeInitPlan(p);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->fds, (std::vector<int>{40, 41, 50, 51, 42}));
  std::vector<uint64_t> storage;
  InitPlanView v;
  ASSERT_TRUE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 11, 12, 9}));
  ASSERT_EQ(v.layer_fd_count(), 2);
  EXPECT_EQ(v.layer_fd(0), 11);
  EXPECT_EQ(v.layer_fd(1), 12);
  // The seccomp hook's descriptor still resolves past them.
  EXPECT_EQ(Hooks(v, reinterpret_cast<const char*>(storage.data())), "0:1:abc:-1:0;1:2:x\0y:9:0;"s);
  // A count of layer descriptors the message does not carry is not a plan.
  EXPECT_FALSE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 11}));
}

TEST(InitPlanTest, RoundTripsEveryField) {
  auto enc = EncodeInitPlan(SamplePlan());
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->fds, (std::vector<int>{40, 41, 42}));
  std::vector<uint64_t> storage;
  InitPlanView v;
  // The receiver's own numbers for the three descriptors.
  ASSERT_TRUE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 9}));
  EXPECT_EQ(v.control_fd(), 5);
  EXPECT_EQ(v.tmpfs_fd(), 6);
  EXPECT_EQ(v.userns_fd(), 7);
  EXPECT_STREQ(v.rw_dir(), "/state/run/i1/layer");
  EXPECT_STREQ(v.root_dir(), "/state/run/i1/root");
  EXPECT_STREQ(v.hostname(), "sbx-1");
  EXPECT_TRUE(v.sched_idle());
  EXPECT_FALSE(v.core_sched());
  EXPECT_EQ(v.keep_caps(), 0x1234567890ull);
  ASSERT_EQ(v.cgroup_proc_count(), 2u);
  const char* first = v.first_cgroup_proc();
  EXPECT_STREQ(first, "/sys/fs/cgroup/memory/a/cgroup.procs");
  EXPECT_STREQ(first + std::strlen(first) + 1, "/sys/fs/cgroup/pids/a/cgroup.procs");
  ASSERT_EQ(v.step_count(), 2u);
  InitPlanWireStep m = v.step(0);
  EXPECT_EQ(m.kind, static_cast<uint32_t>(InitStep::Kind::kMount));
  EXPECT_STREQ(v.At(m.source), "overlay");
  EXPECT_STREQ(v.At(m.fstype), "overlay");
  EXPECT_STREQ(v.At(m.data), "lowerdir=/a:/b");
  EXPECT_EQ(m.flags, 6u);
  EXPECT_EQ(m.optional, 0u);
  InitPlanWireStep n = v.step(1);
  EXPECT_EQ(n.kind, static_cast<uint32_t>(InitStep::Kind::kMknod));
  EXPECT_STREQ(v.At(n.source), "");
  EXPECT_STREQ(v.At(n.target), "/state/run/i1/root/dev/null");
  EXPECT_EQ(n.mode, 020666u);
  EXPECT_EQ(n.dev, 259u);
  EXPECT_EQ(n.optional, 1u);
  EXPECT_EQ(Hooks(v, reinterpret_cast<const char*>(storage.data())),
            "0:1:abc:-1:0;1:2:x\0y:9:0;"s);
}

// Hook data that is not a whole encoding fails with EINVAL before anything is applied (so
// this test process stays unrestricted).
TEST(InitPlanTest, HooksRefuseDataThatIsNotAWholeEncoding) {
  auto enc = EncodeInitPlan(SamplePlan());
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::vector<uint64_t> storage;
  InitPlanView v;
  ASSERT_TRUE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 9}));
  EXPECT_EQ(v.RunHooks(0), EINVAL);
  EXPECT_EQ(v.RunHooks(1), EINVAL);
  sock_filter one{BPF_RET | BPF_K, 0, 0, 0x7fff0000};
  std::string seccomp = EncodeSeccompHook(&one, 1, false);
  EXPECT_EQ(seccomp.size(), 8u + sizeof(sock_filter));
  EXPECT_EQ(RunChildHook(2, seccomp.data(), seccomp.size() - 1, -1), EINVAL);
  EXPECT_EQ(RunChildHook(7, seccomp.data(), seccomp.size(), -1), EINVAL);
  EXPECT_EQ(::prctl(PR_GET_SECCOMP, 0, 0, 0, 0), 0);  // still no filter here
  // AppArmor: an empty or oversized profile name is refused before the kernel is asked.
  EXPECT_EQ(RunChildHook(3, "", 0, -1), EINVAL);
  std::string long_name(300, 'a');
  EXPECT_EQ(RunChildHook(3, long_name.data(), long_name.size(), -1), EINVAL);
}

// A profile that cannot be entered (none loaded by that name, or no AppArmor here) fails the
// hook, so init stops its set-up rather than run unconfined. Run in a child: on a host with
// AppArmor a success would confine this test process.
TEST(InitPlanTest, AnAppArmorHookThatCannotApplyFails) {
  pid_t pid = ::fork();
  if (pid == 0) {
    const char name[] = "flotilla-no-such-profile";
    ::_exit(RunChildHook(3, name, sizeof(name) - 1, -1) != 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Every hook kind the runtime sends decodes (a plan with an AppArmor hook, as on hosts with
// AppArmor, is a whole plan); an unknown kind does not.
TEST(InitPlanTest, DecodesEveryHookKindAndRefusesUnknownOnes) {
  InitPlan p = SamplePlan();
  p.before_userns.insert(p.before_userns.begin(), ChildHook{ChildHookKind::kAppArmor, "flotilla-p1", -1});
  auto enc = EncodeInitPlan(p);
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::vector<uint64_t> storage;
  InitPlanView v;
  ASSERT_TRUE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 9}));
  EXPECT_EQ(Hooks(v, reinterpret_cast<const char*>(storage.data())),
            "0:3:flotilla-p1:-1:0;0:1:abc:-1:0;1:2:x\0y:9:0;"s);
  std::string bad = enc->bytes;
  InitPlanWireHeader h;
  std::memcpy(&h, bad.data(), sizeof(h));
  InitPlanWireHook k;
  std::memcpy(&k, bad.data() + h.hooks, sizeof(k));
  k.kind = 4;
  std::memcpy(bad.data() + h.hooks, &k, sizeof(k));
  EXPECT_FALSE(DecodeCopy(bad, &storage, &v, {5, 6, 9}));
}

TEST(InitPlanTest, RefusesWhatIsNotAWholePlan) {
  auto enc = EncodeInitPlan(SamplePlan());
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::vector<uint64_t> storage;
  InitPlanView v;
  // Wrong descriptor count.
  EXPECT_FALSE(DecodeCopy(enc->bytes, &storage, &v, {5, 6}));
  // Every truncation.
  for (size_t len = 0; len < enc->bytes.size(); len += 7) {
    EXPECT_FALSE(DecodeCopy(enc->bytes.substr(0, len), &storage, &v, {5, 6, 9})) << len;
  }
  // A step's string offset past the end.
  std::string bad = enc->bytes;
  InitPlanWireHeader h;
  std::memcpy(&h, bad.data(), sizeof(h));
  InitPlanWireStep s;
  std::memcpy(&s, bad.data() + h.steps, sizeof(s));
  s.target = static_cast<uint32_t>(bad.size());
  std::memcpy(bad.data() + h.steps, &s, sizeof(s));
  EXPECT_FALSE(DecodeCopy(bad, &storage, &v, {5, 6, 9}));
  // A hook pointing at a descriptor that was not sent.
  bad = enc->bytes;
  InitPlanWireHook k;
  std::memcpy(&k, bad.data() + h.hooks + sizeof(k), sizeof(k));
  k.fd_index = 3;
  std::memcpy(bad.data() + h.hooks + sizeof(k), &k, sizeof(k));
  EXPECT_FALSE(DecodeCopy(bad, &storage, &v, {5, 6, 9}));
  // Unchanged bytes still decode.
  EXPECT_TRUE(DecodeCopy(enc->bytes, &storage, &v, {5, 6, 9}));
}

TEST(InitPlanTest, RefusesMissingDescriptorsAndOversizedPlans) {
  InitPlan p = SamplePlan();
  p.tmpfs_fd = -1;
  EXPECT_EQ(EncodeInitPlan(p).status().code(), absl::StatusCode::kInvalidArgument);
  p = SamplePlan();
  InitStep big;
  big.kind = InitStep::Kind::kMkdir;
  big.target = std::string(kInitPlanMaxBytes, 'a');
  p.steps.push_back(big);
  EXPECT_EQ(EncodeInitPlan(p).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::sandbox
