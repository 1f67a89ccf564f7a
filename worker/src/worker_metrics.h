// The worker's Prometheus families (private to the worker):
//
//   flotilla_worker_sessions_opened_total                 sessions opened
//   flotilla_worker_sessions_closed_total{status}         sessions closed, by trajectory status
//   flotilla_worker_sessions_live                         sessions open now (read at scrape time)
//   flotilla_worker_turns_total                           assistant turns generated
//   flotilla_worker_tokens_total{kind}                    prompt (the whole context of a turn),
//                                                         prompt_reused (kept from earlier turns,
//                                                         not prefilled again), completion
//   flotilla_worker_tool_calls_total                      tool calls the model made
//   flotilla_worker_turn_seconds                          one turn's generation time
//   flotilla_worker_requests_total{route,status}          HTTP requests by route and status
//   flotilla_worker_request_seconds{route}                HTTP request latency (to the last write)
//
// Thread-safety: the pointers are set once at construction and the families are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/common/metrics.h"

namespace flotilla::worker {

class SessionMetrics {
 public:
  explicit SessionMetrics(MetricsRegistry& registry);
  void Opened() { opened_->Add(); }
  void Closed(std::string_view status);
  // One generated turn: its context, the part reused from earlier turns, its reply.
  void Turn(uint32_t prompt_tokens, uint32_t reused_tokens, uint32_t completion_tokens, size_t tool_calls,
            double seconds);

 private:
  MetricsRegistry& registry_;
  Counter* opened_;
  Counter* turns_;
  Counter* prompt_;
  Counter* reused_;
  Counter* completion_;
  Counter* tool_calls_;
  Histogram* turn_seconds_;
};

class RequestMetrics {
 public:
  // Registers the families (a scrape shows them before the first request is counted).
  explicit RequestMetrics(MetricsRegistry& registry);
  // `route` is one of the wire API's routes or "other" (the label set stays bounded).
  void Request(std::string_view route, int status, double seconds);

 private:
  MetricsRegistry& registry_;
};

}  // namespace flotilla::worker
