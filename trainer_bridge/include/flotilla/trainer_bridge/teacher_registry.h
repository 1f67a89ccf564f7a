// TeacherRegistry: any number of OPD teachers, each a model with its own config, mapped to the
// datasets or domains it is best at, served by the engine's Score API.
//
// Resolution for a sample of dataset D with domain M: the first active teacher (config order)
// listing D, else the first active teacher listing M, else none (NotFound). The active set can
// be replaced while training runs (SetActive); samples already scored keep their teacher's name.
//
// Scoring fills the Sample's teacher fields for its generated positions (ids after the prompt):
// full vocabulary (teacher_width = vocab, teacher_ids empty) or top-k (teacher_width = k,
// teacher_ids the ids), per the teacher's config. A teacher's model is loaded into the engine
// the first time it scores (name "teacher/<name>").
//
// Thread-safe. The engine must outlive the registry.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "flotilla/inference/engine.h"
#include "flotilla/proto/trainer.pb.h"
#include "flotilla/trainer_bridge/experiment_config.h"

namespace flotilla::trainer_bridge {

class TeacherRegistry {
 public:
  TeacherRegistry(std::vector<TeacherConfig> teachers, std::vector<DatasetConfig> datasets);

  // The teacher that scores samples of `dataset` now.
  [[nodiscard]] absl::StatusOr<TeacherConfig> Resolve(const std::string& dataset) const;
  // Replaces the active set; NotFound naming the first unknown teacher (nothing changes then).
  absl::Status SetActive(const std::vector<std::string>& names);
  // Replaces the dataset -> domain map (after a mixture reconfiguration).
  void SetDatasets(std::vector<DatasetConfig> datasets);
  [[nodiscard]] std::vector<std::string> Active() const;
  [[nodiscard]] size_t size() const;

  // Scores one sample's generated positions with its dataset's teacher (see above).
  absl::Status Score(inference::Engine& engine, v1::Sample* sample);

  static std::string ModelName(const std::string& teacher) { return "teacher/" + teacher; }

 private:
  absl::Status EnsureLoaded(inference::Engine& engine, const TeacherConfig& t);

  const std::vector<TeacherConfig> teachers_;
  mutable absl::Mutex mu_;
  std::vector<DatasetConfig> datasets_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> active_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> loaded_ ABSL_GUARDED_BY(mu_);
  absl::Mutex load_mu_;  // serialises model loads (slow), not lookups
};

}  // namespace flotilla::trainer_bridge
