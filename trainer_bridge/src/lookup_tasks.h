// builtin:lookup: agentic tasks whose answer sits in a file of the sample's sandbox (see
// task_source.h for the parameters).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/trainer_bridge/task_source.h"

namespace flotilla::trainer_bridge {

// `source` is the whole source string (named in errors); `params` its query, parsed.
absl::StatusOr<std::unique_ptr<TaskSource>> OpenLookupSource(const std::string& source,
                                                             const std::map<std::string, std::string>& params,
                                                             uint64_t seed);

}  // namespace flotilla::trainer_bridge
