#include "flotilla/eval/trial_result.h"

#include "absl/strings/str_cat.h"
#include "flotilla/worker/remote_chat.h"

namespace flotilla::eval {

using nlohmann::json;

TrialTokens CountTrialTokens(const v1::Trajectory& t) {
  TrialTokens out;
  bool any_ids = false;
  for (const v1::Segment& seg : t.segments()) {
    int64_t before = 0;  // tokens of the segment before the current turn
    for (const v1::Turn& turn : seg.turns()) {
      const int64_t n = turn.tokens().ids_size();
      any_ids = any_ids || n > 0;
      if (turn.role() == v1::Turn::ASSISTANT) {
        ++out.turns;
        int64_t generated = 0, head = -1;
        for (int i = 0; i < turn.tokens().loss_mask_size(); ++i) {
          if (turn.tokens().loss_mask(i) == 0) continue;
          ++generated;
          if (head < 0) head = i;
        }
        // The reply's head (the role marker a template opens it with) was part of the prompt;
        // its tail (the marker that closes it) is context only for the next reply.
        out.prompt_tokens += before + (head < 0 ? n : head);
        out.completion_tokens += generated;
      }
      before += n;
    }
  }
  if (out.turns > 0 && !any_ids) {
    out.exact = false;
    auto metric = [&](const char* key) {
      auto it = t.metrics().find(key);
      return it == t.metrics().end() ? int64_t{0} : static_cast<int64_t>(it->second);
    };
    out.prompt_tokens = metric(worker::kUsagePromptTokens);
    out.completion_tokens = metric(worker::kUsageCompletionTokens);
  }
  return out;
}

std::string TrialName(const std::string& task, const std::string& agent, int attempt) {
  return absl::StrCat(task, "__", agent, "__", attempt);
}

bool IsErrorType(const std::string& type) {
  for (const char* t : {"env_build_failed", "agent_timeout", "agent_error", "verifier_timeout", "verifier_error",
                        "sandbox_crashed"}) {
    if (type == t) return true;
  }
  return false;
}

json TrialResultToJson(const TrialResult& r) {
  return json{{"task", r.task},
              {"agent", r.agent},
              {"model", r.model},
              {"attempt", r.attempt},
              {"reward", r.reward},
              {"status", r.status},
              {"error_type", r.error_type},
              {"detail", r.detail},
              {"seconds", r.seconds},
              {"steps", r.steps},
              {"trajectory_id", r.trajectory_id},
              {"trajectory_store", r.trajectory_store},
              {"prompt_tokens", r.tokens.prompt_tokens},
              {"completion_tokens", r.tokens.completion_tokens},
              {"turns", r.tokens.turns},
              {"tokens_exact", r.tokens.exact}};
}

namespace {

// Reads j[key] into *out when present; an absent optional field keeps *out.
template <typename T>
absl::Status Field(const json& j, const char* key, bool required, const std::string& file, T* out) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": missing"));
    return absl::OkStatus();
  }
  bool ok;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    ok = it->is_number_integer();
  } else {
    ok = it->is_number();
  }
  if (!ok) {
    const char* want = std::is_same_v<T, std::string> ? "a string"
                       : std::is_same_v<T, bool>      ? "true or false"
                       : std::is_integral_v<T>        ? "an integer"
                                                      : "a number";
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": expected ", want, ", got ", it->dump()));
  }
  *out = it->get<T>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrialResult> TrialResultFromJson(const json& j, const std::string& file) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": expected a JSON object"));
  TrialResult r;
  absl::Status s;
  auto take = [&](absl::Status st) {
    if (s.ok()) s = std::move(st);
  };
  take(Field(j, "task", true, file, &r.task));
  take(Field(j, "agent", true, file, &r.agent));
  take(Field(j, "attempt", true, file, &r.attempt));
  take(Field(j, "reward", true, file, &r.reward));
  take(Field(j, "error_type", true, file, &r.error_type));
  take(Field(j, "model", false, file, &r.model));
  take(Field(j, "status", false, file, &r.status));
  take(Field(j, "detail", false, file, &r.detail));
  take(Field(j, "seconds", false, file, &r.seconds));
  take(Field(j, "steps", false, file, &r.steps));
  take(Field(j, "trajectory_id", false, file, &r.trajectory_id));
  take(Field(j, "trajectory_store", false, file, &r.trajectory_store));
  take(Field(j, "prompt_tokens", false, file, &r.tokens.prompt_tokens));
  take(Field(j, "completion_tokens", false, file, &r.tokens.completion_tokens));
  take(Field(j, "turns", false, file, &r.tokens.turns));
  take(Field(j, "tokens_exact", false, file, &r.tokens.exact));
  if (!s.ok()) return s;
  if (!r.error_type.empty() && !IsErrorType(r.error_type)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": error_type: unknown '", r.error_type, "'"));
  }
  if (r.attempt < 1) return absl::InvalidArgumentError(absl::StrCat(file, ": attempt: must be >= 1"));
  return r;
}

}  // namespace flotilla::eval
