#include "worker_metrics.h"

#include "absl/strings/str_cat.h"

namespace flotilla::worker {
namespace {

std::vector<double> LatencyBounds() { return MetricsRegistry::ExponentialBounds(0.001, 4, 9); }  // 1 ms .. 65 s

}  // namespace

SessionMetrics::SessionMetrics(MetricsRegistry& r)
    : registry_(r),
      opened_(&r.GetCounter("flotilla_worker_sessions_opened_total", "Worker sessions opened")),
      turns_(&r.GetCounter("flotilla_worker_turns_total", "Assistant turns the worker generated")),
      prompt_(&r.GetCounter("flotilla_worker_tokens_total",
                            "Tokens of worker turns: prompt (whole context), prompt_reused (kept from earlier "
                            "turns), completion",
                            {{"kind", "prompt"}})),
      reused_(&r.GetCounter("flotilla_worker_tokens_total", "", {{"kind", "prompt_reused"}})),
      completion_(&r.GetCounter("flotilla_worker_tokens_total", "", {{"kind", "completion"}})),
      tool_calls_(&r.GetCounter("flotilla_worker_tool_calls_total", "Tool calls in the model's replies")),
      turn_seconds_(&r.GetHistogram("flotilla_worker_turn_seconds", "Generation time of one assistant turn",
                                    LatencyBounds())) {}

void SessionMetrics::Closed(std::string_view status) {
  registry_.GetCounter("flotilla_worker_sessions_closed_total", "Worker sessions closed, by trajectory status",
                       {{"status", std::string(status)}})
      .Add();
}

void SessionMetrics::Turn(uint32_t prompt_tokens, uint32_t reused_tokens, uint32_t completion_tokens,
                          size_t tool_calls, double seconds) {
  turns_->Add();
  prompt_->Add(prompt_tokens);
  reused_->Add(reused_tokens);
  completion_->Add(completion_tokens);
  tool_calls_->Add(static_cast<double>(tool_calls));
  turn_seconds_->Observe(seconds);
}

RequestMetrics::RequestMetrics(MetricsRegistry& r) : registry_(r) {
  r.GetCounter("flotilla_worker_requests_total", "Worker HTTP requests by route and HTTP status",
               {{"route", "/metrics"}, {"status", "200"}});
  r.GetHistogram("flotilla_worker_request_seconds", "Worker HTTP request latency, to the last write", LatencyBounds(),
                 {{"route", "/metrics"}});
}

void RequestMetrics::Request(std::string_view route, int status, double seconds) {
  const std::string r(route);
  registry_.GetCounter("flotilla_worker_requests_total", "",
                       {{"route", r}, {"status", absl::StrCat(status)}})
      .Add();
  registry_.GetHistogram("flotilla_worker_request_seconds", "",
                         LatencyBounds(), {{"route", r}})
      .Observe(seconds);
}

}  // namespace flotilla::worker
