// ReadNodeCapacity: the host's memory, CPUs and NUMA partitions from sysfs.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "flotilla/node/node_agent.h"

namespace flotilla::node {
namespace {

// A sysfs or procfs file's text; NotFound when it cannot be opened.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> ParseCpuList(absl::string_view text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(absl::StripAsciiWhitespace(text), ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> r = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(r[0], &lo)) continue;
    hi = lo;
    if (r.size() == 2 && !absl::SimpleAtoi(r[1], &hi)) continue;
    for (int c = lo; c <= hi && c - lo < 65536; ++c) out.push_back(c);
  }
  return out;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(i == j ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

uint64_t MemTotalKb(const std::string& meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    size_t p = line.find("MemTotal:");
    if (p == absl::string_view::npos) continue;
    absl::string_view rest = absl::StripAsciiWhitespace(line.substr(p + 9));
    rest = absl::StripSuffix(rest, "kB");
    uint64_t kb = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kb)) return kb;
  }
  return 0;
}

}  // namespace

absl::StatusOr<v1::NodeUsage> ReadNodeCapacity(const std::string& sysfs_root, uint32_t slots_capacity,
                                               uint32_t partitions_per_node) {
  if (partitions_per_node == 0) return absl::InvalidArgumentError("partitions_per_node: must be at least 1");
  v1::NodeUsage u;
  struct Node {
    int index;
    std::vector<int> cpus;
    uint64_t memory;
  };
  std::vector<Node> nodes;
  std::error_code ec;
  const std::string node_dir = sysfs_root + "/devices/system/node";
  for (const auto& e : std::filesystem::directory_iterator(node_dir, ec)) {
    std::string name = e.path().filename().string();
    int idx = 0;
    if (name.rfind("node", 0) != 0 || !absl::SimpleAtoi(name.substr(4), &idx)) continue;
    auto cpulist = ReadSmallFile(e.path().string() + "/cpulist");
    auto meminfo = ReadSmallFile(e.path().string() + "/meminfo");
    if (!cpulist.ok() || !meminfo.ok()) continue;
    nodes.push_back({idx, ParseCpuList(*cpulist), MemTotalKb(*meminfo) * 1024});
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) { return a.index < b.index; });
  if (nodes.empty()) {  // no NUMA information: one node of everything
    auto online = ReadSmallFile(sysfs_root + "/devices/system/cpu/online");
    auto meminfo = ReadSmallFile("/proc/meminfo");
    std::vector<int> cpus = online.ok() ? ParseCpuList(*online) : std::vector<int>{};
    if (cpus.empty()) {
      for (long i = 0; i < ::sysconf(_SC_NPROCESSORS_ONLN); ++i) cpus.push_back(static_cast<int>(i));
    }
    nodes.push_back({0, cpus, meminfo.ok() ? MemTotalKb(*meminfo) * 1024 : 0});
  }
  uint32_t total_parts = static_cast<uint32_t>(nodes.size()) * partitions_per_node;
  uint32_t index = 0;
  uint64_t memory = 0;
  uint32_t cpus = 0;
  for (const Node& n : nodes) {
    memory += n.memory;
    cpus += static_cast<uint32_t>(n.cpus.size());
    for (uint32_t k = 0; k < partitions_per_node; ++k, ++index) {
      v1::NumaPartition* p = u.add_partitions();
      p->set_index(index);
      p->set_numa_node(static_cast<uint32_t>(n.index));
      size_t lo = n.cpus.size() * k / partitions_per_node, hi = n.cpus.size() * (k + 1) / partitions_per_node;
      p->set_cpus(FormatCpuList(std::vector<int>(n.cpus.begin() + static_cast<long>(lo), n.cpus.begin() + static_cast<long>(hi))));
      p->set_memory_capacity(n.memory / partitions_per_node);
      p->set_slots_capacity(slots_capacity / total_parts + (index < slots_capacity % total_parts ? 1 : 0));
    }
  }
  u.set_memory_capacity(memory);
  u.set_cpu_millicores_capacity(cpus * 1000);
  u.set_slots_capacity(slots_capacity);
  return u;
}

}  // namespace flotilla::node
