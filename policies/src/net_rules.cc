#include "net_rules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "net_policy_abi.h"

namespace flotilla::policies {
namespace {

std::vector<PortRange> Merge(std::vector<PortRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const PortRange& a, const PortRange& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi;
  });
  std::vector<PortRange> out;
  for (const auto& r : ranges) {
    if (!out.empty() && static_cast<uint32_t>(r.lo) <= static_cast<uint32_t>(out.back().hi) + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<RuleEntry>> BuildRuleEntries(const NetworkPolicy& policy) {
  std::vector<RuleEntry> allow;
  for (const auto& rule : policy.allow) {
    auto it = std::find_if(allow.begin(), allow.end(), [&](const RuleEntry& e) { return e.cidr == rule.cidr; });
    if (it == allow.end()) {
      allow.push_back(RuleEntry{rule.cidr, false, rule.ports});
    } else {
      it->ports.insert(it->ports.end(), rule.ports.begin(), rule.ports.end());
    }
  }
  std::vector<RuleEntry> out;
  for (const auto& e : allow) {
    bool denied = std::any_of(policy.deny.begin(), policy.deny.end(),
                              [&](const Cidr& d) { return d.Contains(e.cidr); });
    if (denied) continue;
    RuleEntry full = e;
    for (const auto& wider : allow) {
      if (!(wider.cidr == e.cidr) && wider.cidr.Contains(e.cidr)) {
        full.ports.insert(full.ports.end(), wider.ports.begin(), wider.ports.end());
      }
    }
    full.ports = Merge(std::move(full.ports));
    if (full.ports.size() > FLOTILLA_MAX_PORT_RANGES) {
      return absl::InvalidArgumentError(absl::StrCat("network: ", full.cidr.ToString(), " needs ",
                                                     full.ports.size(), " port ranges; at most ",
                                                     FLOTILLA_MAX_PORT_RANGES, " fit"));
    }
    out.push_back(std::move(full));
  }
  for (const auto& d : policy.deny) {
    auto same = [&](const RuleEntry& e) { return e.cidr == d; };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(RuleEntry{d, true, {}});
  }
  return out;
}

}  // namespace flotilla::policies
