// Attacks on files: destroying the sandbox's own userland, escaping through PutFile/GetFile
// paths, reading the host's and the other sandbox's files, writing kernel tunables, and
// setuid binaries. The host's files and /usr/bin, and the bystander, are checked in TearDown.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "attack_fixture.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

using sandbox::SandboxEvent;
using sandbox::StopReason;

class FilesystemAttackTest : public AttackTest {
 protected:
  // After the sandbox destroyed its userland: the next exec fails and the runtime reports the
  // sandbox broken, both in the exec result and as a CRASHED event.
  void ExpectReportedBroken(const std::string& id, EventLog* log) {
    RunOutput next = Exec(id, {"/bin/sh", "-c", "echo alive"});
    EXPECT_NE(next.out, "alive\n");
    if (next.exec_ok) {
      EXPECT_EQ(next.result.reason, StopReason::kSandboxBroken) << next.result.detail;
    } else {
      EXPECT_NE(next.error.find("FAILED_PRECONDITION"), std::string::npos) << next.error;
    }
    SandboxEvent e;
    ASSERT_TRUE(log->WaitFor(SandboxEvent::Kind::kCrashed, std::chrono::seconds(10), &e))
        << "no CRASHED event for " << id;
    EXPECT_EQ(e.sandbox_id, id);
    EXPECT_EQ(e.reason, StopReason::kSandboxBroken) << e.detail;
  }
};

TEST_F(FilesystemAttackTest, RmRfRootStaysInsideAndIsReportedBroken) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EventLog log;
  auto watch = WatchInto(id, &log);
  // The top-level links first, so the userland is certainly gone even if the exec limit stops
  // the walk over the whole image.
  RunOutput r = Attack(id, "rm -rf --no-preserve-root /bin /lib /lib64 /sbin /etc / 2>/dev/null; echo rm-done",
                       8000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  ExpectReportedBroken(id, &log);
  EXPECT_EQ(::access("/bin/sh", X_OK), 0);
  EXPECT_EQ(::access("/etc/passwd", R_OK), 0);
  EXPECT_EQ(::access(marker_path().c_str(), R_OK), 0);
}

TEST_F(FilesystemAttackTest, DeletingUsrBinStaysInsideAndIsReportedBroken) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EventLog log;
  auto watch = WatchInto(id, &log);
  RunOutput r = Attack(id, "rm -rf /usr/bin; echo rc=$?; [ -e /usr/bin/sh ] || echo gone", 20000);
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out, "rc=0\ngone\n");
  ExpectReportedBroken(id, &log);
  EXPECT_EQ(::access("/usr/bin/sh", X_OK), 0);
}

TEST_F(FilesystemAttackTest, PutFileAndGetFileDoNotFollowSymlinksOut) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  const std::string dir = host_dir();
  RunOutput r = Attack(id, "mkdir -p /tmp && ln -s '" + dir + "' /tmp/to-host-dir && ln -s / /tmp/to-root && "
                           "ln -s '" + marker_path() + "' /tmp/to-marker && ln -s /etc/shadow /tmp/to-shadow && "
                           "ln -s ../../../../../../../.. /tmp/up && ln -s /proc/1/root /tmp/to-proc-root && echo made");
  ASSERT_TRUE(r.exec_ok) << r.error;
  ASSERT_EQ(r.out, "made\n");

  for (const std::string& path : std::vector<std::string>{"/tmp/to-host-dir/owned", "/tmp/to-root" + dir + "/owned",
                                  "/tmp/up" + dir + "/owned", "/tmp/to-proc-root" + dir + "/owned",
                                  "/proc/self/root" + dir + "/owned", "/proc/1/cwd" + dir + "/owned"}) {
    absl::Status s = runtime().PutFile(id, path, "pwned", 0644);
    EXPECT_NE(::access((dir + "/owned").c_str(), F_OK), 0) << "PutFile(" << path << ") wrote on the host";
    ::unlink((dir + "/owned").c_str());
    if (s.ok()) {
      // It stayed inside: the file is where the link points within the sandbox root.
      auto back = runtime().GetFile(id, dir + "/owned", 0);
      EXPECT_TRUE(back.ok()) << path << ": " << back.status();
    }
  }
  const std::string marker = ReadHostFile(marker_path());
  ASSERT_FALSE(marker.empty());
  absl::Status through_link = runtime().PutFile(id, "/tmp/to-marker", "pwned", 0644);
  EXPECT_EQ(ReadHostFile(marker_path()), marker) << "PutFile through a link rewrote the host marker";
  if (through_link.ok()) {
    auto inside = runtime().GetFile(id, marker_path(), 0);  // the link's target within the root
    ASSERT_TRUE(inside.ok()) << inside.status();
    EXPECT_EQ(inside->content, "pwned");
  }
  std::string host_shadow = ReadHostFile("/etc/shadow");
  ASSERT_FALSE(host_shadow.empty());
  for (const std::string& path : std::vector<std::string>{"/tmp/to-shadow", "/tmp/to-root/etc/shadow", "/tmp/up/etc/shadow",
                                  "/tmp/to-proc-root/etc/shadow", "/proc/self/root/etc/shadow",
                                  "/tmp/to-marker", "/tmp/up" + marker_path()}) {
    auto got = runtime().GetFile(id, path, 0);
    if (got.ok()) {
      EXPECT_NE(got->content, host_shadow) << "GetFile(" << path << ") read the host's /etc/shadow";
      EXPECT_EQ(got->content.find(bystander_secret()), std::string::npos);
      EXPECT_EQ(got->content.find(marker), std::string::npos)
          << "GetFile(" << path << ") read the host marker";
    }
  }
}

TEST_F(FilesystemAttackTest, PutFileAndGetFileDotDotStaysInside) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  const std::string dir = host_dir();
  const std::string marker = ReadHostFile(marker_path());
  for (const std::string& path : std::vector<std::string>{"../../../../../../.." + dir + "/dotdot", "/../../../../.." + dir + "/dotdot",
                                  "/tmp/../../../.." + dir + "/dotdot", "/./../" + dir + "/./dotdot"}) {
    absl::Status s = runtime().PutFile(id, path, "pwned", 0644);
    EXPECT_NE(::access((dir + "/dotdot").c_str(), F_OK), 0) << "PutFile(" << path << ") wrote on the host";
    ::unlink((dir + "/dotdot").c_str());
  }
  std::string host_shadow = ReadHostFile("/etc/shadow");
  for (const std::string& path : std::vector<std::string>{"../../../../../../etc/shadow", "/../../../../etc/shadow",
                                  "/../../../.." + marker_path(), "/tmp/../../../../.." + marker_path()}) {
    auto got = runtime().GetFile(id, path, 0);
    if (got.ok()) {
      EXPECT_NE(got->content, host_shadow) << "GetFile(" << path << ") read the host's /etc/shadow";
      EXPECT_NE(got->content, marker) << "GetFile(" << path << ") read the host marker";
    }
  }
}

TEST_F(FilesystemAttackTest, HostShadowIsNotReadable) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  std::string host_shadow = ReadHostFile("/etc/shadow");
  ASSERT_FALSE(host_shadow.empty());
  std::string first_line = host_shadow.substr(0, host_shadow.find('\n'));
  RunOutput r = Attack(id,
                       "for f in /etc/shadow /proc/1/root/etc/shadow /proc/self/root/etc/shadow /etc/gshadow "
                       "/proc/" + std::to_string(::getpid()) + "/root/etc/shadow; do cat \"$f\" 2>/dev/null; done; "
                       "echo done");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out.find(first_line), std::string::npos) << "the host's /etc/shadow leaked into the sandbox";
  EXPECT_EQ(r.out.substr(r.out.size() - 5), "done\n");
  auto got = runtime().GetFile(id, "/etc/shadow", 0);
  if (got.ok()) {
    EXPECT_EQ(got->content.find(first_line), std::string::npos);
  }
}

TEST_F(FilesystemAttackTest, AnotherSandboxsFilesAreNotReachable) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  // Where the bystander's secret lives on the host: through its init's root, and its
  // overlay's upper directory (from the host's view of its mounts).
  InsideView bystander_view;
  ASSERT_TRUE(VerifyIsolated(bystander(), &bystander_view));
  pid_t init = InitOfPidNamespace(bystander_view.pid_ns);
  ASSERT_GT(init, 0);
  std::string via_root = "/proc/" + std::to_string(init) + "/root/root/secret.txt";
  ASSERT_EQ(ReadHostFile(via_root), bystander_secret()) << "positive control: the host sees the secret";
  std::vector<std::string> candidates = {via_root};
  for (const std::string& line : LinesStartingWith(ReadHostFile("/proc/" + std::to_string(init) + "/mountinfo"), "")) {
    size_t up = line.find("upperdir=");
    if (up == std::string::npos) continue;
    std::string upper = line.substr(up + 9, line.find_first_of(", ", up) - up - 9);
    candidates.push_back(upper + "/root/secret.txt");
  }
  ASSERT_GE(candidates.size(), 2u) << "the bystander's root is not an overlay with an upper dir";
  std::string script = "grep -rs " + bystander_secret() + " /root /tmp /var /run /home /mnt /srv 2>/dev/null; "
                       "for p in /proc/[0-9]*/root/root/secret.txt";
  for (const std::string& c : candidates) script += " '" + c + "'";
  script += "; do cat \"$p\" 2>/dev/null; done; echo done";
  RunOutput r = Attack(id, script);
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out, "done\n");
  for (const std::string& c : candidates) {
    auto got = runtime().GetFile(id, c, 0);
    if (got.ok()) {
      EXPECT_NE(got->content, bystander_secret()) << "GetFile(" << c << ")";
    }
  }
}

TEST_F(FilesystemAttackTest, ProcSysIsReadOnly) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string swappiness = ReadHostFile("/proc/sys/vm/swappiness");
  std::string other = swappiness == "61\n" ? "62" : "61";
  std::string ratio = ReadHostFile("/proc/sys/vm/overcommit_ratio");
  std::string ratio_other = ratio == "51\n" ? "52" : "51";
  RunOutput r = Attack(id, std::string(kHelperPath) + " write /proc/sys/vm/swappiness " + other + "; " + kHelperPath +
                               " write /proc/sys/kernel/core_pattern core.flotilla-attack; " + kHelperPath +
                               " write /proc/sys/kernel/hostname attacked; " + kHelperPath +
                               " write /proc/sys/vm/overcommit_ratio " + ratio_other);
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> lines = LinesStartingWith(r.out, "write ");
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.ends_with("errno=EROFS") || line.ends_with("errno=EACCES") || line.ends_with("errno=EPERM"))
        << line;
  }
  EXPECT_EQ(ReadHostFile("/proc/sys/vm/swappiness"), swappiness);
  EXPECT_NE(ReadHostFile("/proc/sys/kernel/core_pattern"), "core.flotilla-attack\n");
  EXPECT_EQ(ReadHostFile("/proc/sys/vm/overcommit_ratio"), ratio);
}

TEST_F(FilesystemAttackTest, SysIsNotWritable) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  std::string ksm = ReadHostFile("/sys/kernel/mm/ksm/run");
  std::string printk_time = ReadHostFile("/sys/module/printk/parameters/time");
  RunOutput r = Attack(id, std::string(kHelperPath) + " write /sys/kernel/mm/ksm/run 1; " + kHelperPath +
                               " write /sys/module/printk/parameters/time " + (printk_time == "Y\n" ? "N" : "Y") +
                               "; mkdir -p /tmp/sys; mount -t sysfs sysfs /tmp/sys 2>/dev/null; echo mount=$?");
  ASSERT_TRUE(r.exec_ok) << r.error;
  std::vector<std::string> lines = LinesStartingWith(r.out, "write ");
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.ends_with("errno=ENOENT") || line.ends_with("errno=EROFS") || line.ends_with("errno=EACCES"))
        << line;
  }
  EXPECT_EQ(LinesStartingWith(r.out, "mount="), std::vector<std::string>{"mount=32"});
  EXPECT_EQ(ReadHostFile("/sys/kernel/mm/ksm/run"), ksm);
  EXPECT_EQ(ReadHostFile("/sys/module/printk/parameters/time"), printk_time);
}

// Kernel and disk interfaces: no block device, no kernel memory or log, and no way to make a
// device node (mknod needs CAP_MKNOD in the host's user namespace).
TEST_F(FilesystemAttackTest, DevicesAndKernelInterfacesAreOutOfReach) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  RunOutput r = Attack(id,
                       "echo blocks=$(find /dev /tmp -xdev -type b 2>/dev/null | wc -l)\n"
                       "for f in /dev/mem /dev/kmem /dev/port /dev/kmsg /dev/vda /dev/sda /proc/kcore /proc/kmsg; do "
                       "head -c 1 $f >/dev/null 2>&1 && echo \"read $f\"; done\n"
                       "mknod /tmp/disk b 254 0 2>/dev/null; echo mknod_block=$?\n"
                       "mknod /tmp/mem c 1 1 2>/dev/null; echo mknod_char=$?\n"
                       "cat /proc/keys 2>/dev/null | wc -c | sed 's/^/keys_bytes=/'\n");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out, "blocks=0\nmknod_block=1\nmknod_char=1\nkeys_bytes=0\n") << r.err;
}

TEST_F(FilesystemAttackTest, SetuidBinariesGainNothing) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  const std::string h = kHelperPath;
  RunOutput r = Attack(id, "cp " + h + " /attack/suid && chown 0:0 /attack/suid && chmod 4755 /attack/suid && "
                           "stat -c mode=%a,uid=%u /attack/suid && " + h + " ids && " + h +
                           " as_user 1000 /attack/suid ids && " + h + " as_user 1000 /usr/bin/su -c true root"
                           " </dev/null >/dev/null 2>&1; echo su=$?");
  ASSERT_TRUE(r.exec_ok) << r.error;
  EXPECT_EQ(r.out,
            "mode=4755,uid=0\n"
            "ids ruid=0 euid=0 suid=0 nnp=1\n"    // root inside, with no_new_privs
            "ids ruid=1000 euid=1000 suid=1000 nnp=1\n"  // the setuid-root copy gained nothing
            "su=1\n");
  // On the host the "root-owned" setuid copy belongs to the sandbox's unprivileged uid.
  InsideView view;
  ASSERT_TRUE(VerifyIsolated(id, &view));
  pid_t init = InitOfPidNamespace(view.pid_ns);
  ASSERT_GT(init, 0);
  struct stat st {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(init) + "/root/attack/suid").c_str(), &st), 0);
  EXPECT_NE(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 04000, 04000u);
}

// Snapshot commits the writable layer to <state>/layers/<hash>, storing owners as seen inside
// (root inside -> uid 0). A setuid-root binary made inside must not become a host-root-owned
// setuid file that unprivileged host users can reach: that would be a local root on the host.
TEST_F(FilesystemAttackTest, SnapshotDoesNotPlantReachableSetuidRootFilesOnTheHost) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(InstallHelper(id));
  const std::string h = kHelperPath;
  RunOutput r = Attack(id, "cp " + h + " /attack/suid && chmod 4755 /attack/suid && cp " + h +
                               " /attack/sgid && chmod 2755 /attack/sgid && echo planted");
  ASSERT_TRUE(r.exec_ok) << r.error;
  ASSERT_EQ(r.out, "planted\n") << r.err;
  auto snap = runtime().Snapshot(id, "");
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->layer_id.rfind("sha256:", 0), 0u) << snap->layer_id;
  const std::string state = state_path();
  const std::string layer = state + "/layers/" + snap->layer_id.substr(7);
  struct stat planted {};
  ASSERT_EQ(::lstat((layer + "/root/attack/suid").c_str(), &planted), 0) << "positive control: " << layer;

  // Reachable by an unprivileged host user: every directory from the state dir down to the
  // file grants search to others (the state dir's own parents are the host's business:
  // /var/lib is 0755 on a stock host).
  auto reachable = [&](const std::filesystem::path& file) {
    for (std::filesystem::path dir = file.parent_path(); dir.string().size() >= state.size(); dir = dir.parent_path()) {
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
      if (dir == state) break;
    }
    return true;
  };
  std::vector<std::string> dangerous;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(layer, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bool setuid_root = (st.st_mode & S_ISUID) != 0 && st.st_uid == 0;
    bool setgid_root = (st.st_mode & S_ISGID) != 0 && st.st_gid == 0;
    if ((setuid_root || setgid_root) && (st.st_mode & S_IXOTH) != 0 && reachable(it->path())) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
      dangerous.push_back(it->path().string() + " mode " + mode + " uid " + std::to_string(st.st_uid));
    }
  }
  EXPECT_EQ(dangerous, std::vector<std::string>{})
      << "host-root-owned setuid/setgid files any host user can execute";
  // What such a file gives: executed on the host by uid 65534 (through an fd, since this
  // test's own temp dir is private), it runs with euid 0.
  if (!dangerous.empty()) {
    std::string out;
    int status = RunOnHost({"/bin/sh", "-c",
                            "exec 3<'" + layer + "/root/attack/suid' && exec /usr/bin/setpriv --reuid=65534 "
                            "--regid=65534 --clear-groups /proc/self/fd/3 ids"},
                           &out);
    ADD_FAILURE() << "uid 65534 running " << layer << "/root/attack/suid: exit " << status << ": " << out;
  }

  // Inside a sandbox started from the layer, the copy still gains nothing (no_new_privs).
  sandbox::SandboxOptions from_layer = SmallOptions();
  from_layer.image = snap->layer_id;
  std::string child = NewSandbox(from_layer);
  ASSERT_FALSE(child.empty());
  RunOutput c = Attack(child, h + " as_user 1000 /attack/suid ids");
  ASSERT_TRUE(c.exec_ok) << c.error;
  EXPECT_EQ(c.out, "ids ruid=1000 euid=1000 suid=1000 nnp=1\n") << c.err;
}

}  // namespace
}  // namespace flotilla::attack
