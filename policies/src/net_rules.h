// NetworkPolicy -> the entries of one sandbox in the BPF LPM trie.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {

// One trie entry. A longest-prefix lookup must give the whole answer, so every allow entry
// also carries the ports of every wider allow prefix that contains it, and allow entries that
// lie inside a deny prefix are dropped (deny wins).
struct RuleEntry {
  Cidr cidr;
  bool deny = false;
  std::vector<PortRange> ports;  // sorted, merged; empty for deny entries
};

// InvalidArgument when one entry needs more port ranges than the BPF value holds (16).
absl::StatusOr<std::vector<RuleEntry>> BuildRuleEntries(const NetworkPolicy& policy);

}  // namespace flotilla::policies
