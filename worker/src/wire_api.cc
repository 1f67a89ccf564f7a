#include "flotilla/worker/wire_api.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/ids.h"
#include "wire_apis.h"
#include "wire_common.h"
#include "worker_metrics.h"

namespace flotilla::worker {
namespace {

constexpr char kKeyPrefix[] = "session-";

// Splits "/s/<id>/rest" into the id and "/rest"; the id must be a safe id.
absl::Status TakePathSession(std::string* path, std::string* session) {
  if (!absl::StartsWith(*path, "/s/")) return absl::OkStatus();
  size_t end = path->find('/', 3);
  std::string id = path->substr(3, end == std::string::npos ? std::string::npos : end - 3);
  if (!IsSafeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("path: bad session id '", id,
                                                   "' (use letters, digits, '-', '_', '.')"));
  }
  *session = id;
  *path = end == std::string::npos ? "/" : path->substr(end);
  return absl::OkStatus();
}

std::string KeySession(const HttpRequest& req) {
  std::string key = req.Header("x-api-key");
  std::string auth = req.Header("authorization");
  if (key.empty() && absl::StartsWithIgnoreCase(auth, "bearer ")) key = auth.substr(7);
  if (absl::StartsWith(key, kKeyPrefix)) {
    std::string id = key.substr(sizeof(kKeyPrefix) - 1);
    if (IsSafeId(id)) return id;
  }
  return "";
}

}  // namespace

void WireApi::Handle(const HttpRequest& request, HttpResponder& out) {
  std::string path = request.path;
  std::string session;
  const bool anthropic_shape = absl::StrContains(path, "/messages");
  if (auto st = TakePathSession(&path, &session); !st.ok()) {
    return anthropic_shape ? wire::SendAnthropicError(out, st) : wire::SendOpenAiError(out, st);
  }
  if (session.empty()) {
    std::string header = request.Header("x-flotilla-session");
    if (!header.empty()) {
      if (!IsSafeId(header)) {
        return wire::SendOpenAiError(out, absl::InvalidArgumentError(
            absl::StrCat("x-flotilla-session: bad session id '", header, "'")));
      }
      session = header;
    }
  }
  if (session.empty()) session = KeySession(request);
  if (absl::StartsWith(path, "/v1/")) path = path.substr(3);
  while (path.size() > 1 && path.back() == '/') path.pop_back();

  const bool post = request.method == "POST";
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (path == "/chat/completions" && post) return wire::HandleChatCompletions(*service_, request, session, out);
  if (path == "/responses" && post) return wire::HandleResponses(*service_, request, session, out);
  if (path == "/messages" && post) return wire::HandleMessages(*service_, request, session, out);
  if (path == "/messages/count_tokens" && post) return wire::HandleCountTokens(*service_, request, out);
  if ((path == "/models" || path == "/models/" + service_->ModelName()) && get) {
    wire::Json model{{"id", service_->ModelName()}, {"object", "model"}, {"type", "model"},
                     {"created", 0}, {"created_at", "1970-01-01T00:00:00Z"},
                     {"owned_by", "flotilla"}, {"display_name", service_->ModelName()}};
    if (path != "/models") return out.Send(200, "application/json", wire::Dump(model));
    wire::Json list{{"object", "list"}, {"data", wire::Json::array({model})}, {"has_more", false},
                    {"first_id", service_->ModelName()}, {"last_id", service_->ModelName()}};
    return out.Send(200, "application/json", wire::Dump(list));
  }
  if (path == "/health" && get) return out.Send(200, "application/json", R"({"status":"ok"})");
  const bool known = path == "/chat/completions" || path == "/responses" || path == "/messages" ||
                     path == "/messages/count_tokens" || path == "/models" || path == "/health";
  absl::Status st = known ? absl::InvalidArgumentError(absl::StrCat(
                                "method ", request.method, " is not allowed on ", request.path))
                          : absl::NotFoundError(absl::StrCat("no such endpoint: ", request.method,
                                                             " ", request.path));
  if (anthropic_shape) return wire::SendAnthropicError(out, st);
  wire::SendOpenAiError(out, st);
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeWireApi(const std::string& address, WireApi* api,
                                                         MetricsRegistry* metrics) {
  HttpHandler handler = [api](const HttpRequest& r, HttpResponder& out) { api->Handle(r, out); };
  if (metrics != nullptr) handler = CountRequests(std::move(handler), *metrics);
  return HttpServer::Start(address, std::move(handler));
}

std::string RouteLabel(const std::string& request_path) {
  std::string path = request_path;
  std::string session;
  if (!TakePathSession(&path, &session).ok()) return "other";
  if (absl::StartsWith(path, "/v1/")) path = path.substr(3);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  for (const char* route : {"/chat/completions", "/responses", "/messages", "/messages/count_tokens", "/models",
                            "/health", "/metrics"}) {
    if (path == route) return route;
  }
  if (absl::StartsWith(path, "/models/")) return "/models";
  if (path == "/" || path == "/dashboard" || absl::StartsWith(path, "/dashboard/")) return "/dashboard";
  if (absl::StartsWith(path, "/api/")) return path.substr(0, path.find('/', 5));  // "/api/trajectories/ID" -> "/api/trajectories"
  return "other";
}

namespace {

// Passes every call on and counts the request just before its last bytes go out (so a client
// that has the whole answer also finds it counted).
class CountingResponder final : public HttpResponder {
 public:
  CountingResponder(HttpResponder& out, RequestMetrics& metrics, std::string route)
      : out_(out), metrics_(metrics), route_(std::move(route)), start_(std::chrono::steady_clock::now()) {}
  void Send(int status, std::string_view content_type, std::string_view body) override {
    Count(status);
    out_.Send(status, content_type, body);
  }
  void StartStream(int status, std::string_view content_type) override {
    status_ = status;
    out_.StartStream(status, content_type);
  }
  bool Write(std::string_view data) override { return out_.Write(data); }
  void EndStream() override {
    Count(status_);
    out_.EndStream();
  }
  // A handler that never answered is counted with status 0.
  void Done() { Count(0); }

 private:
  void Count(int status) {
    if (counted_) return;
    counted_ = true;
    metrics_.Request(route_, status, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  HttpResponder& out_;
  RequestMetrics& metrics_;
  const std::string route_;
  const std::chrono::steady_clock::time_point start_;
  int status_ = 0;
  bool counted_ = false;
};

}  // namespace

HttpHandler CountRequests(HttpHandler inner, MetricsRegistry& registry) {
  auto metrics = std::make_shared<RequestMetrics>(registry);
  return [inner = std::move(inner), metrics](const HttpRequest& request, HttpResponder& out) {
    CountingResponder counting(out, *metrics, RouteLabel(request.path));
    inner(request, counting);
    counting.Done();
  };
}

}  // namespace flotilla::worker
