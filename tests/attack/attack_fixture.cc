#include "attack_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "flotilla/common/ids.h"
#include "flotilla/common/text_files.h"
#include "host_probe.h"

namespace flotilla::attack {
namespace {

size_t DirectoryEntries(const std::string& path) {
  size_t n = 0;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n;
}

bool LooksLikeNamespace(const std::string& link, const std::string& kind) {
  return link.rfind(kind + ":[", 0) == 0 && link.back() == ']';
}

}  // namespace

std::unique_ptr<sandbox::Runtime> AttackTest::runtime_;
std::unique_ptr<testing::TempDir> AttackTest::state_dir_;
std::string AttackTest::cgroup_prefix_;
static std::string g_open_error;

std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

void EventLog::Add(const sandbox::SandboxEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(e);
  cv_.notify_all();
}

bool EventLog::WaitFor(sandbox::SandboxEvent::Kind kind, std::chrono::milliseconds timeout,
                       sandbox::SandboxEvent* out) {
  std::unique_lock<std::mutex> lock(mu_);
  auto has = [&] {
    for (const auto& e : events_) {
      if (e.kind == kind) {
        if (out != nullptr) *out = e;
        return true;
      }
    }
    return false;
  };
  return cv_.wait_for(lock, timeout, has);
}

std::vector<sandbox::SandboxEvent> EventLog::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void AttackTest::SetUpTestSuite() { OpenSuiteRuntime(0); }

void AttackTest::OpenSuiteRuntime(uint32_t warm_pool_size) {
  state_dir_ = std::make_unique<testing::TempDir>();
  cgroup_prefix_ = "flotilla-attack" + std::to_string(::getpid());
  sandbox::RuntimeOptions options;
  options.state_dir = (state_dir_->path() / "state").string();
  options.cgroup_prefix = cgroup_prefix_;
  options.default_memory_bytes = kMemoryLimit;
  options.default_pids = kPidsLimit;
  options.default_disk_bytes = kDiskLimit;
  options.warm_pool_size = warm_pool_size;
  auto rt = sandbox::Runtime::Open(options);
  if (rt.ok()) {
    runtime_ = std::move(*rt);
  } else {
    g_open_error = rt.status().ToString();
  }
}

void AttackTest::TearDownTestSuite() {
  runtime_.reset();
  state_dir_.reset();
  // The runtime keeps its (now empty) "<prefix>" parent group in each hierarchy; this binary's
  // prefix is its own, so remove it. rmdir only removes an empty cgroup: anything the runtime
  // left inside stays for the leftover check to report.
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu",
                           "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified"}) {
    ::rmdir((std::string(root) + "/" + cgroup_prefix_).c_str());
  }
}

sandbox::SandboxOptions AttackTest::SmallOptions() {
  sandbox::SandboxOptions o;
  o.policy_name = "default";
  o.resources.memory_bytes = kMemoryLimit;
  o.resources.pids = kPidsLimit;
  o.resources.disk_bytes = kDiskLimit;
  o.resources.timeout_ms = 120000;
  o.labels = {{"suite", "attack"}};
  return o;
}

void AttackTest::SetUp() {
  ASSERT_NE(runtime_, nullptr) << "Runtime::Open failed: " << g_open_error;
  host_dir_ = std::make_unique<testing::TempDir>();
  marker_path_ = host_dir_->file("host-marker");
  marker_content_ = NewId("marker");
  {
    std::ofstream marker(marker_path_);
    marker << marker_content_;
  }
  ASSERT_EQ(ReadHostFile(marker_path_), marker_content_);
  host_pid_ns_ = NamespaceLink(0, "pid");
  host_mnt_ns_ = NamespaceLink(0, "mnt");
  host_net_ns_ = NamespaceLink(0, "net");
  host_root_ = DeviceInode("/");
  ASSERT_TRUE(LooksLikeNamespace(host_pid_ns_, "pid")) << host_pid_ns_;
  ASSERT_TRUE(LooksLikeNamespace(host_mnt_ns_, "mnt")) << host_mnt_ns_;
  ASSERT_TRUE(LooksLikeNamespace(host_net_ns_, "net")) << host_net_ns_;
  ASSERT_FALSE(host_root_.empty());
  for (const char* path : {"/etc/passwd", "/etc/shadow", "/etc/hostname", "/usr/bin/true",
                           "/proc/sys/vm/swappiness", "/proc/sys/kernel/core_pattern",
                           "/proc/sys/kernel/hostname"}) {
    host_files_[path] = ReadHostFile(path);
  }
  host_files_[marker_path_] = marker_content_;
  host_usr_bin_entries_ = DirectoryEntries("/usr/bin");
  ASSERT_GT(host_usr_bin_entries_, 10u);

  bystander_ = NewSandbox();
  ASSERT_FALSE(bystander_.empty());
  bystander_secret_ = NewId("secret");
  ASSERT_TRUE(runtime_->PutFile(bystander_, "/root/secret.txt", bystander_secret_, 0600).ok());
  RunOutput probe = Exec(bystander_, {"/bin/true"});
  ASSERT_TRUE(probe.exec_ok) << probe.error;
  ASSERT_EQ(probe.result.exit_code, 0);
}

void AttackTest::TearDown() {
  if (runtime_ == nullptr) return;
  if (!bystander_.empty()) ExpectHostIntact();
  for (const std::string& id : sandboxes_) {
    absl::Status s = runtime_->Destroy(id);
    EXPECT_TRUE(s.ok() || absl::IsNotFound(s)) << id << ": " << s;
  }
  sandboxes_.clear();
}

std::string AttackTest::NewSandbox(sandbox::SandboxOptions options, sandbox::CreateResult* result) {
  auto created = runtime_->Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return "";
  sandboxes_.push_back(created->id);
  if (result != nullptr) *result = *created;
  return created->id;
}

absl::Status AttackTest::DestroySandbox(const std::string& id) { return runtime_->Destroy(id); }

RunOutput AttackTest::Exec(const std::string& id, const std::vector<std::string>& argv, uint32_t timeout_ms,
                           const std::string& stdin_data) {
  RunOutput r;
  sandbox::ExecOptions options;
  options.argv = argv;
  options.timeout_ms = timeout_ms;
  options.stdin_data = stdin_data;
  options.output_limit_bytes = 4u << 20;
  auto start = std::chrono::steady_clock::now();
  auto result = runtime_->Exec(id, options, [&r](sandbox::OutputStream s, std::string_view data) {
    (s == sandbox::OutputStream::kStdout ? r.out : r.err).append(data);
  });
  r.host_wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.exec_ok = result.ok();
  if (result.ok()) {
    r.result = *result;
  } else {
    r.error = result.status().ToString();
  }
  return r;
}

bool AttackTest::VerifyIsolated(const std::string& id, InsideView* view) {
  std::string tag = NewId("probe");
  std::string script =
      "for k in pid mnt net user; do readlink /proc/self/ns/$k || echo none; done\n"
      "stat -c %d:%i / || echo none\n"
      "if [ -e " + ShellQuote(marker_path_) + " ]; then echo marker=visible; else echo marker=hidden; fi\n"
      "head -n 1 /proc/self/uid_map || echo none\n"
      ": > /.flotilla-" + tag + " 2>/dev/null; : > /usr/.flotilla-" + tag + " 2>/dev/null; "
      ": > /tmp/.flotilla-" + tag + " 2>/dev/null\n"
      "echo end\n";
  RunOutput r = Exec(id, {"/bin/sh", "-c", script});
  bool ok = true;
  for (const std::string& host_path : {"/.flotilla-" + tag, "/usr/.flotilla-" + tag, "/tmp/.flotilla-" + tag}) {
    if (::access(host_path.c_str(), F_OK) == 0) {
      ::unlink(host_path.c_str());
      ADD_FAILURE() << "isolation: a file written inside sandbox " << id << " appeared on the host at " << host_path;
      ok = false;
    }
  }
  if (!r.exec_ok || r.result.exit_code != 0) {
    ADD_FAILURE() << "isolation: probe exec failed in " << id << ": " << r.error << " exit=" << r.result.exit_code
                  << " stderr=" << r.err;
    return false;
  }
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.size() != 8 || lines[7] != "end") {
    ADD_FAILURE() << "isolation: unexpected probe output from " << id << ":\n" << r.out;
    return false;
  }
  InsideView v{lines[0], lines[1], lines[2], lines[3], lines[4], lines[6]};
  if (view != nullptr) *view = v;
  auto check = [&](bool good, const std::string& what) {
    if (!good) {
      ADD_FAILURE() << "isolation: " << what << " (sandbox " << id << ")";
      ok = false;
    }
  };
  check(LooksLikeNamespace(v.pid_ns, "pid") && v.pid_ns != host_pid_ns_, "pid namespace is the host's: " + v.pid_ns);
  check(LooksLikeNamespace(v.mnt_ns, "mnt") && v.mnt_ns != host_mnt_ns_, "mount namespace is the host's: " + v.mnt_ns);
  check(LooksLikeNamespace(v.net_ns, "net") && v.net_ns != host_net_ns_, "net namespace is the host's: " + v.net_ns);
  check(LooksLikeNamespace(v.user_ns, "user") && v.user_ns != NamespaceLink(0, "user"),
        "user namespace is the host's: " + v.user_ns);
  check(v.root != "none" && v.root != host_root_, "root is the host's root: " + v.root);
  check(lines[5] == "marker=hidden", "the host marker " + marker_path_ + " is visible inside");
  return ok;
}

std::string AttackTest::GuardScript() const {
  // Fails closed: an unreadable link, an empty answer or the host's own value refuses.
  return "__flotilla_ns() { v=$(readlink /proc/self/ns/$1) || return 1; case \"$v\" in \"$2\"|\"\") return 1;; "
         "\"$1:[\"*\"]\") return 0;; *) return 1;; esac; }\n"
         "__flotilla_root=$(stat -c %d:%i /) || __flotilla_root=\n"
         "if __flotilla_ns pid " + ShellQuote(host_pid_ns_) + " && __flotilla_ns mnt " + ShellQuote(host_mnt_ns_) +
         " && __flotilla_ns net " + ShellQuote(host_net_ns_) + " && [ -n \"$__flotilla_root\" ] && [ \"$__flotilla_root\" != " +
         ShellQuote(host_root_) + " ] && [ ! -e " + ShellQuote(marker_path_) + " ]; then :; else "
         "echo 'flotilla-attack: isolation guard refused to run the attack' >&2; exit " +
         std::to_string(kGuardRefusedExit) + "; fi\n"
         "unset -f __flotilla_ns; unset __flotilla_root\n";
}

RunOutput AttackTest::Attack(const std::string& id, const std::string& script, uint32_t timeout_ms) {
  if (!VerifyIsolated(id)) {
    RunOutput refused;
    refused.error = "refused: sandbox " + id + " failed the isolation precheck; the attack was not run";
    ADD_FAILURE() << refused.error;
    return refused;
  }
  RunOutput r = Exec(id, {"/bin/sh", "-c", GuardScript() + script}, timeout_ms);
  if (r.exec_ok && r.result.exit_code == kGuardRefusedExit &&
      r.err.find("isolation guard refused") != std::string::npos) {
    ADD_FAILURE() << "the inline isolation guard refused to run the attack in " << id;
    r.exec_ok = false;
    r.error = "refused by the inline guard";
  }
  return r;
}

void AttackTest::InstallHelper(const std::string& id) {
  std::ifstream in(FLOTILLA_ATTACK_HELPER, std::ios::binary);
  std::string binary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(in.good() || in.eof()) << "cannot read " << FLOTILLA_ATTACK_HELPER;
  ASSERT_GT(binary.size(), 100000u) << FLOTILLA_ATTACK_HELPER;
  absl::Status s = runtime_->PutFile(id, kHelperPath, binary, 0755);
  ASSERT_TRUE(s.ok()) << s;
}

void AttackTest::ExpectHostIntact() {
  for (const auto& [path, before] : host_files_) {
    EXPECT_EQ(ReadHostFile(path), before) << "host file changed: " << path;
  }
  EXPECT_EQ(DirectoryEntries("/usr/bin"), host_usr_bin_entries_) << "host /usr/bin changed";
  EXPECT_EQ(::access("/usr/bin/true", X_OK), 0) << "host /usr/bin/true is gone";
  EXPECT_EQ(RunOnHost({"/usr/bin/true"}), 0) << "the host cannot run /usr/bin/true";
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << "the host cannot open a file";
  if (fd >= 0) ::close(fd);
  RunOutput r = Exec(bystander_, {"/bin/true"});
  EXPECT_TRUE(r.exec_ok) << "bystander sandbox: " << r.error;
  EXPECT_EQ(r.result.exit_code, 0) << "bystander sandbox cannot run /bin/true: " << r.result.detail;
  auto secret = runtime_->GetFile(bystander_, "/root/secret.txt", 0);
  EXPECT_TRUE(secret.ok()) << secret.status();
  if (secret.ok()) {
    EXPECT_EQ(secret->content, bystander_secret_) << "bystander's file changed";
  }
}

std::unique_ptr<sandbox::Watch> AttackTest::WatchInto(const std::string& id, EventLog* log) {
  return runtime_->WatchEvents(id, [log](const sandbox::SandboxEvent& e) { log->Add(e); });
}

}  // namespace flotilla::attack
