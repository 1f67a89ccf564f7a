#include "flotilla/scheduler/numa.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "flotilla/common/status.h"

namespace flotilla::scheduler {

absl::StatusOr<uint32_t> CountCpuList(const std::string& cpulist) {
  uint32_t count = 0;
  std::string text(absl::StripAsciiWhitespace(cpulist));
  if (text.empty()) return 0u;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<std::string> ends = absl::StrSplit(part, '-');
    uint32_t lo = 0, hi = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &lo) ||
        !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &hi) || hi < lo) {
      return absl::InvalidArgumentError(absl::StrCat("cpulist: malformed '", cpulist, "'"));
    }
    count += hi - lo + 1;
  }
  return count;
}

absl::StatusOr<std::vector<NumaDomain>> ReadNumaTopology(const std::string& sys_root) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(sys_root) / "devices/system/node";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError(absl::StrCat(dir.string(), ": no NUMA directory"));
  std::vector<NumaDomain> out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    uint32_t id = 0;
    if (name.rfind("node", 0) != 0 || !absl::SimpleAtoi(name.substr(4), &id)) continue;
    NumaDomain d;
    d.node = id;
    std::ifstream cpus(entry.path() / "cpulist");
    std::getline(cpus, d.cpus);
    d.cpus = std::string(absl::StripAsciiWhitespace(d.cpus));
    ASSIGN_OR_RETURN(d.cpu_count, CountCpuList(d.cpus));
    if (d.cpu_count == 0) continue;
    std::ifstream mem(entry.path() / "meminfo");
    std::string line;
    while (std::getline(mem, line)) {
      // "Node 0 MemTotal:        5990136 kB"
      size_t pos = line.find("MemTotal:");
      if (pos == std::string::npos) continue;
      std::istringstream rest(line.substr(pos + 9));
      uint64_t kb = 0;
      rest >> kb;
      d.memory_bytes = kb * 1024;
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const NumaDomain& a, const NumaDomain& b) { return a.node < b.node; });
  if (out.empty()) return absl::NotFoundError(absl::StrCat(dir.string(), ": no NUMA domain with CPUs"));
  return out;
}

std::vector<PartitionUsage> CutPartitions(const std::vector<NumaDomain>& domains, uint32_t total_slots,
                                          uint32_t partitions_per_domain) {
  std::vector<PartitionUsage> out;
  if (partitions_per_domain == 0) partitions_per_domain = 1;
  uint64_t total_cpus = 0;
  for (const auto& d : domains) total_cpus += d.cpu_count;
  if (total_cpus == 0) return out;
  uint32_t slots_left = total_slots;
  for (size_t i = 0; i < domains.size(); ++i) {
    const NumaDomain& d = domains[i];
    uint32_t domain_slots = i + 1 == domains.size()
                                ? slots_left
                                : static_cast<uint32_t>(uint64_t{total_slots} * d.cpu_count / total_cpus);
    slots_left -= domain_slots;
    for (uint32_t k = 0; k < partitions_per_domain; ++k) {
      PartitionUsage p;
      p.index = static_cast<uint32_t>(out.size());
      p.numa_node = d.node;
      p.cpus = d.cpus;
      p.capacity.slots = domain_slots / partitions_per_domain + (k < domain_slots % partitions_per_domain ? 1 : 0);
      p.capacity.memory_bytes = d.memory_bytes / partitions_per_domain;
      p.capacity.cpu_millicores = d.cpu_count * 1000 / partitions_per_domain;
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace flotilla::scheduler
