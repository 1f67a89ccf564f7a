// The suite's safety net, tested on its own: the isolation precheck and the inline guard must
// refuse on the host (where an attack would be destructive) and pass inside a sandbox.
#include <unistd.h>

#include <sstream>

#include "attack_fixture.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

TEST_F(AttackTest, GuardRefusesToRunOnTheHost) {
  std::string out;
  int status = RunOnHost({"/bin/sh", "-c", GuardScript() + "echo ATTACK-RAN"}, &out);
  EXPECT_EQ(status, kGuardRefusedExit);
  EXPECT_EQ(out, "");
}

TEST_F(AttackTest, GuardRefusesWhenTheMarkerIsVisible) {
  // A process in fresh namespaces but with the host's files in view must still be refused:
  // unshare gives new pid/mount/net namespaces while the host marker stays visible.
  std::string out;
  int status = RunOnHost({"/usr/bin/unshare", "--fork", "--pid", "--mount", "--net", "--mount-proc", "/bin/sh", "-c",
                          GuardScript() + "echo ATTACK-RAN"},
                         &out);
  EXPECT_EQ(status, kGuardRefusedExit);
  EXPECT_EQ(out, "");
}

TEST_F(AttackTest, GuardLetsTheAttackRunInsideASandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id, "echo ATTACK-RAN");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ATTACK-RAN\n");
}

TEST_F(AttackTest, PrecheckSeesOwnNamespacesRootAndAnUnprivilegedUid) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  InsideView view;
  ASSERT_TRUE(VerifyIsolated(id, &view));
  EXPECT_NE(view.pid_ns, NamespaceLink(0, "pid"));
  EXPECT_NE(view.mnt_ns, NamespaceLink(0, "mnt"));
  EXPECT_NE(view.net_ns, NamespaceLink(0, "net"));
  EXPECT_NE(view.user_ns, NamespaceLink(0, "user"));
  EXPECT_NE(view.root, DeviceInode("/"));
  // Root inside is an unprivileged uid on the host: "0 <host uid> <count>" with host uid != 0.
  std::istringstream map(view.uid_map);
  uint64_t inside = 1, outside = 0, count = 0;
  map >> inside >> outside >> count;
  EXPECT_EQ(inside, 0u);
  EXPECT_NE(outside, 0u);
  EXPECT_GE(count, 1u);
  // Two sandboxes never share a namespace.
  InsideView other;
  ASSERT_TRUE(VerifyIsolated(bystander(), &other));
  EXPECT_NE(view.pid_ns, other.pid_ns);
  EXPECT_NE(view.mnt_ns, other.mnt_ns);
  EXPECT_NE(view.net_ns, other.net_ns);
}

}  // namespace
}  // namespace flotilla::attack
