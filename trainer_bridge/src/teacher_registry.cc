#include "flotilla/trainer_bridge/teacher_registry.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"

namespace flotilla::trainer_bridge {

TeacherRegistry::TeacherRegistry(std::vector<TeacherConfig> teachers, std::vector<DatasetConfig> datasets)
    : teachers_(std::move(teachers)), datasets_(std::move(datasets)) {
  for (const auto& t : teachers_) {
    if (t.active) active_.insert(t.name);
  }
}

absl::StatusOr<TeacherConfig> TeacherRegistry::Resolve(const std::string& dataset) const {
  absl::MutexLock lock(&mu_);
  std::string domain = dataset;
  for (const auto& d : datasets_) {
    if (d.name == dataset) domain = d.domain;
  }
  for (const std::string& key : {dataset, domain}) {
    for (const auto& t : teachers_) {
      if (!active_.contains(t.name)) continue;
      if (std::find(t.domains.begin(), t.domains.end(), key) != t.domains.end()) return t;
    }
  }
  return absl::NotFoundError(absl::StrCat("no active teacher for dataset '", dataset, "' (domain '", domain, "')"));
}

absl::Status TeacherRegistry::SetActive(const std::vector<std::string>& names) {
  std::set<std::string> next;
  for (const auto& n : names) {
    bool known = std::any_of(teachers_.begin(), teachers_.end(), [&](const auto& t) { return t.name == n; });
    if (!known) return absl::NotFoundError(absl::StrCat("teachers: unknown teacher '", n, "'"));
    next.insert(n);
  }
  absl::MutexLock lock(&mu_);
  active_ = std::move(next);
  return absl::OkStatus();
}

void TeacherRegistry::SetDatasets(std::vector<DatasetConfig> datasets) {
  absl::MutexLock lock(&mu_);
  datasets_ = std::move(datasets);
}

std::vector<std::string> TeacherRegistry::Active() const {
  absl::MutexLock lock(&mu_);
  return {active_.begin(), active_.end()};
}

size_t TeacherRegistry::size() const { return teachers_.size(); }

}  // namespace flotilla::trainer_bridge
