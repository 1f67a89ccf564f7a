#include "flotilla/eval/training_records.h"

#include "absl/strings/str_cat.h"

namespace flotilla::eval {

using nlohmann::json;

namespace {

const char* RoleName(v1::Turn::Role r) {
  switch (r) {
    case v1::Turn::SYSTEM: return "system";
    case v1::Turn::ASSISTANT: return "assistant";
    case v1::Turn::TOOL: return "tool";
    default: return "user";
  }
}

std::string StatusName(v1::TrajectoryStatus s) {
  std::string name = v1::TrajectoryStatus_Name(s);
  return name.rfind("TRAJECTORY_STATUS_", 0) == 0 ? name.substr(18) : name;
}

json Header(const v1::Trajectory& t, int segment) {
  return json{{"id", t.id()},           {"segment", segment},
              {"task", t.task()},       {"scaffold", t.scaffold()},
              {"reward", t.reward()},   {"status", StatusName(t.status())}};
}

json Message(const v1::Turn& turn) {
  json m = {{"role", RoleName(turn.role())}, {"content", turn.text()}};
  if (turn.tool_calls_size() > 0) {
    json calls = json::array();
    for (const v1::ToolCall& c : turn.tool_calls()) {
      calls.push_back({{"id", c.id()}, {"type", "function"},
                       {"function", {{"name", c.name()}, {"arguments", c.arguments_json()}}}});
    }
    m["tool_calls"] = calls;
  }
  if (turn.role() == v1::Turn::TOOL) m["tool_call_id"] = turn.tool_call_id();
  return m;
}

}  // namespace

absl::StatusOr<TrainingFormat> ParseTrainingFormat(const std::string& name) {
  if (name == "sft") return TrainingFormat::kSft;
  if (name == "rl") return TrainingFormat::kRl;
  return absl::InvalidArgumentError(absl::StrCat("--format ", name, ": unknown format (sft, rl)"));
}

std::vector<json> TrainingRecords(const v1::Trajectory& t, TrainingFormat format) {
  std::vector<json> out;
  for (int s = 0; s < t.segments_size(); ++s) {
    const v1::Segment& seg = t.segments(s);
    bool replied = false;
    json ids = json::array(), mask = json::array(), logprobs = json::array(), versions = json::array();
    json messages = json::array();
    for (const v1::Turn& turn : seg.turns()) {
      replied = replied || turn.role() == v1::Turn::ASSISTANT;
      messages.push_back(Message(turn));
      const v1::TokenSpan& span = turn.tokens();
      for (int i = 0; i < span.ids_size(); ++i) {
        const uint32_t m = i < span.loss_mask_size() ? span.loss_mask(i) : 0;
        ids.push_back(span.ids(i));
        mask.push_back(m);
        logprobs.push_back(i < span.logprobs_size() ? span.logprobs(i) : 0.0f);
        versions.push_back(i < span.policy_versions_size() ? span.policy_versions(i) : int64_t{-1});
      }
    }
    json r = Header(t, s);
    if (format == TrainingFormat::kSft) {
      if (!replied) continue;
      r["messages"] = std::move(messages);
      if (!ids.empty()) {
        r["input_ids"] = std::move(ids);
        r["loss_mask"] = std::move(mask);
      }
    } else {
      if (ids.empty()) continue;
      r["group_id"] = t.group_id();
      r["effort"] = t.effort();
      r["input_ids"] = std::move(ids);
      r["loss_mask"] = std::move(mask);
      r["logprobs"] = std::move(logprobs);
      r["policy_versions"] = std::move(versions);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace flotilla::eval
