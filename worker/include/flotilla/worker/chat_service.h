// ChatService: turns wire-neutral chat requests into model replies, keeping each session's
// exact token record and saving its trajectory after every turn.
//
// A request is bound to a session by (in order): an explicit session id (URL path, header or
// API key, parsed by the wire layer), a Responses API previous_response_id, or the open
// session whose recorded conversation the request extends; otherwise a new session opens.
//
// Thread-safety: thread-safe. Requests of one session are serialized; sessions run in
// parallel. Ownership: the generator and store are borrowed and must outlive the service.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/metrics.h"
#include "flotilla/proto/trajectory.pb.h"
#include "flotilla/worker/chat_types.h"
#include "flotilla/worker/hf_chat.h"
#include "flotilla/worker/remote_chat.h"
#include "flotilla/worker/session.h"
#include "flotilla/worker/token_generator.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::worker {

struct ChatServiceOptions {
  const Clock* clock = &SystemClock::Get();
  TrajectoryStore* store = nullptr;    // nullable: trajectories are kept in memory only
  std::string experiment;              // written into every trajectory header
  std::string scaffold = "api";
  int32_t experts_per_token = 0;       // routing width of the model (layers x top_k)
  // A Hugging Face model's tokenizer and chat template (borrowed; must outlive the service);
  // null: the byte model's fixed chat format.
  const HfChat* hf = nullptr;
  // An external endpoint that replies instead of the generator (borrowed; must outlive the
  // service; the generator may then be null): turns are recorded as text, without token spans,
  // and the endpoint's usage is summed into the trajectory's metrics (remote_chat.h).
  const RemoteChat* remote = nullptr;
  // Sessions, turns, tokens and tool calls go here (borrowed; must outlive the service); null:
  // none are counted.
  MetricsRegistry* metrics = nullptr;
};

class SessionMetrics;

class ChatService {
 public:
  ChatService(TokenGenerator* generator, ChatServiceOptions options);
  ~ChatService();

  // Generates one assistant reply. `observer` (nullable) sees text as it becomes final.
  // InvalidArgument for requests the model cannot serve (context overflow).
  absl::StatusOr<ChatReply> Complete(const ChatRequest& request, ReplyObserver* observer);

  // Tokens the request's prompt would occupy (system, tools and messages, rendered fresh); 0
  // with a remote endpoint (its tokenizer is not known here).
  uint32_t CountTokens(const ChatRequest& request) const;

  // Opens a session with the given trajectory header (task, scaffold, sandbox...).
  std::string OpenSession(const v1::Trajectory& header, std::string session_id = "");
  // Finishes a session: sets status, reward, detail, end time and `metrics` (added to the
  // header's), saves the trajectory, releases the engine state. Returns the final trajectory.
  absl::StatusOr<v1::Trajectory> CloseSession(const std::string& session_id,
                                              v1::TrajectoryStatus status, double reward,
                                              const std::string& detail,
                                              v1::StopReason repercussion = v1::STOP_REASON_NONE,
                                              const std::map<std::string, double>& metrics = {});
  absl::StatusOr<v1::Trajectory> Trajectory(const std::string& session_id);

  std::string ModelName() const { return options_.remote != nullptr ? options_.remote->model() : generator_->ModelName(); }
  const HfChat* hf() const { return options_.hf; }
  TrajectoryStore* store() const { return options_.store; }

  // The conversation a request amounts to: a system turn (system text plus the tool
  // definitions) if either is present, then the request's messages.
  // With a Hugging Face chat template the tools go to the template instead (see Conversation).
  static std::vector<ChatMessage> PromptMessages(const ChatRequest& request);

 private:
  struct Entry {
    std::mutex mu;                     // serializes this session's requests
    Session session;
    v1::Trajectory header;
    Entry(std::string id, int32_t width, const HfChat* hf) : session(std::move(id), width, hf) {}
  };
  // The messages the session records: PromptMessages, or with an HfChat the system text alone.
  std::vector<ChatMessage> Conversation(const ChatRequest& request) const;
  std::shared_ptr<Entry> Bind(const ChatRequest& request, std::vector<ChatMessage>* messages);
  std::shared_ptr<Entry> NewEntry(const std::string& id, const v1::Trajectory& header);
  absl::Status Save(Entry& entry);
  absl::StatusOr<ChatReply> GenerateRemote(Entry& entry, const ChatRequest& request,
                                           const std::vector<ChatMessage>& messages, ReplyObserver* observer);
  // Remembers a reply's id for Responses API chaining (the segment it ended).
  void RememberResponse(const std::string& reply_id, const std::string& session_id, const RecordedSegment& segment);
  absl::StatusOr<ChatReply> Generate(Entry& entry, const ChatRequest& request,
                                     const std::vector<ChatMessage>& messages,
                                     ReplyObserver* observer);

  TokenGenerator* generator_;
  ChatServiceOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> sessions_;       // GUARDED_BY(mu_)
  struct ResponseRef { std::string session; std::vector<ChatMessage> messages; };
  std::map<std::string, ResponseRef> responses_;                  // GUARDED_BY(mu_)
  std::unique_ptr<SessionMetrics> metrics_;                       // null without options_.metrics
  MetricsRegistry::CollectorHandle live_sessions_;                // last: removed before the rest goes
};

// The text block that tells the model which tools it may call (part of the system turn).
std::string RenderToolsBlock(const std::vector<ToolSpec>& tools);

}  // namespace flotilla::worker
