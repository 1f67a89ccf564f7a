// The leftover check: runs after every other test (CTest DEPENDS on all of them, RUN_SERIAL)
// and asserts that nothing of any flotilla sandbox remains on the host: no cgroup in any v1
// hierarchy or in the v2 hierarchy, no mount, no BPF program attached to a flotilla cgroup, no
// cgroup BPF link whose cgroup is gone, no pinned BPF object, no sandbox process.
//
// What the node's runtimes share on purpose and keep between processes (the pinned network
// programs, their anchor cgroup and bpffs) is taken away first by `flotilla sandbox cleanup`,
// the command an operator runs; everything else must already be gone.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host_probe.h"

namespace flotilla::attack {
namespace {

class NodeCleanup : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* cli = std::getenv("FLOTILLA_CLI");
    ASSERT_NE(cli, nullptr) << "FLOTILLA_CLI (the flotilla binary) is not set";
    std::string out;
    ASSERT_EQ(RunOnHost({cli, "sandbox", "cleanup"}, &out), 0) << out;
  }
};
::testing::Environment* const node_cleanup = ::testing::AddGlobalTestEnvironment(new NodeCleanup);

// Host uids that sandbox processes run as (root inside maps to 100000, a 65536 range).
constexpr uint64_t kSandboxUidBase = 100000;
constexpr uint64_t kSandboxUidCount = 65536;

struct CgroupDir {
  std::string path;
  uint64_t inode = 0;
};

std::vector<CgroupDir> AllCgroupDirs(const std::string& top) {
  std::vector<CgroupDir> found;
  std::vector<std::pair<std::string, int>> stack = {{top, 0}};
  while (!stack.empty()) {
    auto [dir, depth] = stack.back();
    stack.pop_back();
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) found.push_back({dir, st.st_ino});
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (e->d_type == DT_DIR && n != "." && n != ".." && depth < 8) stack.push_back({dir + "/" + n, depth + 1});
    }
    ::closedir(d);
  }
  return found;
}

// The roots of every mounted hierarchy: /sys/fs/cgroup itself on a pure v2 host, otherwise
// each v1 controller directory and the unified v2 one below it.
std::vector<std::string> HierarchyRoots() {
  if (::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) return {"/sys/fs/cgroup"};
  std::vector<std::string> roots;
  DIR* d = ::opendir("/sys/fs/cgroup");
  if (d == nullptr) return roots;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (e->d_type == DT_DIR && n != "." && n != "..") roots.push_back("/sys/fs/cgroup/" + n);
  }
  ::closedir(d);
  return roots;
}

// A runtime keeps its sandboxes' cgroups under "<prefix>/<instance>.<sandbox id>" of each hierarchy.
// Left over is anything below a flotilla* group, and any flotilla* group with processes; an
// empty top-level flotilla* group is the runtime's own parent (shared by its instances).
TEST(LeftoverTest, NoSandboxCgroupRemains) {
  std::vector<std::string> leftovers;
  for (const std::string& root : HierarchyRoots()) {
    for (const CgroupDir& c : AllCgroupDirs(root)) {
      std::string rel = c.path.substr(root.size());  // "", "/flotilla", "/flotilla/i1/sbx-..."
      if (rel.rfind("/flotilla", 0) != 0) continue;
      bool nested = rel.find('/', 1) != std::string::npos;
      if (nested || !ReadHostFile(c.path + "/cgroup.procs").empty()) leftovers.push_back(c.path);
    }
  }
  EXPECT_EQ(leftovers, std::vector<std::string>{});
}

TEST(LeftoverTest, NoSandboxMountRemains) {
  EXPECT_EQ(MountsContaining("flotilla"), std::vector<std::string>{});
}

// Sandbox processes on the host: in a flotilla cgroup, or running as a sandbox uid.
std::vector<std::string> SandboxProcesses() {
  std::vector<std::string> found;
  for (pid_t pid : ProcessesInCgroupsNamed("/flotilla")) {
    found.push_back(std::to_string(pid) + " in a flotilla cgroup: " +
                    ReadHostFile("/proc/" + std::to_string(pid) + "/cmdline"));
  }
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return {"cannot read /proc"};
  while (dirent* e = ::readdir(proc)) {
    std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream status(ReadHostFile("/proc/" + name + "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Uid:", 0) != 0) continue;
      uint64_t uid = std::stoull(line.substr(4));
      if (uid >= kSandboxUidBase && uid < kSandboxUidBase + kSandboxUidCount) {
        found.push_back(name + " runs as sandbox uid " + std::to_string(uid) + ": " +
                        ReadHostFile("/proc/" + name + "/comm"));
      }
    }
  }
  ::closedir(proc);
  return found;
}

TEST(LeftoverTest, NoSandboxProcessRemains) {
  // A sandbox init whose test process has just ended is handed to the host's init to reap; on
  // a loaded machine that takes a moment. Anything still there after 5 s is left over.
  std::vector<std::string> leftovers = SandboxProcesses();
  for (int i = 0; i < 50 && !leftovers.empty(); ++i) {
    ::usleep(100 * 1000);
    leftovers = SandboxProcesses();
  }
  EXPECT_EQ(leftovers, std::vector<std::string>{});
}

TEST(LeftoverTest, NoSandboxBpfProgramOrLinkRemains) {
  // Programs attached to a flotilla cgroup in the unified hierarchy.
  std::string tree;
  ASSERT_EQ(RunOnHost({"/usr/sbin/bpftool", "-j", "cgroup", "tree", "/sys/fs/cgroup/unified"}, &tree), 0)
      << "bpftool is required (scripts/install-deps.sh installs it)";
  nlohmann::json attached = nlohmann::json::parse(tree.empty() ? "[]" : tree, nullptr, false);
  ASSERT_FALSE(attached.is_discarded()) << tree;
  std::vector<std::string> leftovers;
  for (const auto& entry : attached) {
    std::string cgroup = entry.value("cgroup", "");
    if (cgroup.find("flotilla") != std::string::npos) leftovers.push_back("attached to " + cgroup);
  }
  // cgroup links whose cgroup no longer exists (a link that outlived its sandbox).
  std::string links_text;
  ASSERT_EQ(RunOnHost({"/usr/sbin/bpftool", "-j", "link", "show"}, &links_text), 0);
  nlohmann::json links = nlohmann::json::parse(links_text.empty() ? "[]" : links_text, nullptr, false);
  ASSERT_FALSE(links.is_discarded()) << links_text;
  std::set<uint64_t> live;
  for (const CgroupDir& c : AllCgroupDirs("/sys/fs/cgroup/unified")) live.insert(c.inode);
  for (const auto& link : links) {
    if (link.value("type", "") != "cgroup") continue;
    uint64_t cgroup_id = link.value("cgroup_id", uint64_t{0});
    if (live.count(cgroup_id) == 0) {
      leftovers.push_back("cgroup link " + std::to_string(link.value("id", 0)) + " on a removed cgroup " +
                          std::to_string(cgroup_id));
    }
  }
  // Pinned objects.
  DIR* fs = ::opendir("/sys/fs/bpf");
  if (fs != nullptr) {
    while (dirent* e = ::readdir(fs)) {
      if (std::string(e->d_name).find("flotilla") != std::string::npos) {
        leftovers.push_back(std::string("pinned /sys/fs/bpf/") + e->d_name);
      }
    }
    ::closedir(fs);
  }
  EXPECT_EQ(leftovers, std::vector<std::string>{});
}

}  // namespace
}  // namespace flotilla::attack
