// TeacherRegistry's engine side: loading teachers into the engine and scoring samples.
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/trainer_bridge/teacher_registry.h"

namespace flotilla::trainer_bridge {

absl::Status TeacherRegistry::EnsureLoaded(inference::Engine& engine, const TeacherConfig& t) {
  {
    absl::MutexLock lock(&mu_);
    if (loaded_.contains(t.name)) return absl::OkStatus();
  }
  absl::MutexLock load(&load_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (loaded_.contains(t.name)) return absl::OkStatus();
  }
  std::ifstream in(t.model_config);
  if (!in) return absl::NotFoundError(absl::StrCat("teacher '", t.name, "': model_config '", t.model_config, "' cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  ASSIGN_OR_RETURN(inference::ModelConfig config, inference::ModelConfig::FromJson(ss.str()));
  RETURN_IF_ERROR(Annotate(engine.LoadModel(ModelName(t.name), config, t.weights, 0),
                           absl::StrCat("teacher '", t.name, "'")));
  absl::MutexLock lock(&mu_);
  loaded_.insert(t.name);
  return absl::OkStatus();
}

absl::Status TeacherRegistry::Score(inference::Engine& engine, v1::Sample* sample) {
  ASSIGN_OR_RETURN(TeacherConfig t, Resolve(sample->dataset()));
  RETURN_IF_ERROR(EnsureLoaded(engine, t));
  // Generated positions are those with a policy version; the prompt carries -1.
  uint32_t start = 0;
  while (start < static_cast<uint32_t>(sample->policy_versions_size()) && sample->policy_versions(start) < 0) ++start;
  std::vector<int32_t> ids(sample->ids().begin(), sample->ids().end());
  if (start == 0 || start >= ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sample ", sample->trajectory_id(), ": nothing generated to score"));
  }
  ASSIGN_OR_RETURN(inference::ScoreResult r,
                   engine.Score(ModelName(t.name), ids, start, t.full_vocab ? 0 : t.top_k, t.full_vocab));
  size_t positions = ids.size() - start;
  sample->set_teacher(t.name);
  sample->clear_teacher_ids();
  sample->clear_teacher_logprobs();
  if (t.full_vocab) {
    if (positions == 0 || r.full_logprobs.size() % positions != 0) {
      return absl::InternalError(absl::StrCat("teacher '", t.name, "': ", r.full_logprobs.size(),
                                              " full logprobs for ", positions, " positions"));
    }
    sample->set_teacher_width(static_cast<uint32_t>(r.full_logprobs.size() / positions));
    sample->mutable_teacher_logprobs()->Add(r.full_logprobs.begin(), r.full_logprobs.end());
  } else {
    if (r.top_ids.size() != positions * t.top_k || r.top_logprobs.size() != r.top_ids.size()) {
      return absl::InternalError(absl::StrCat("teacher '", t.name, "': top-k result of ", r.top_ids.size(),
                                              " ids for ", positions, " positions x ", t.top_k));
    }
    sample->set_teacher_width(t.top_k);
    sample->mutable_teacher_ids()->Add(r.top_ids.begin(), r.top_ids.end());
    sample->mutable_teacher_logprobs()->Add(r.top_logprobs.begin(), r.top_logprobs.end());
  }
  return absl::OkStatus();
}

}  // namespace flotilla::trainer_bridge
