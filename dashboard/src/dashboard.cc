#include "flotilla/dashboard/dashboard.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/metrics_log.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "assets.h"

namespace flotilla::dashboard {
namespace {

using nlohmann::json;

constexpr int kMaxTrajectories = 1000;

void SendJson(HttpResponder& out, int status, const json& body) {
  out.Send(status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace));
}

void SendError(HttpResponder& out, int status, const absl::Status& error) {
  SendJson(out, status, json{{"error", std::string(error.message())}});
}

void SendError(HttpResponder& out, int status, const std::string& message) {
  SendJson(out, status, json{{"error", message}});
}

// A path segment with its %XX escapes decoded (the page encodes ids with encodeURIComponent:
// an RL sample's id "experiment/s12" arrives as "experiment%2Fs12"). Nullopt for a bad escape.
std::optional<std::string> PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size()) return std::nullopt;
    for (size_t k = i + 1; k <= i + 2; ++k) {
      const char c = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(in[k])));
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

int HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kInvalidArgument: return 400;
    default: return 500;
  }
}

json Summary(const v1::Trajectory& t) {
  int turns = 0, tool_calls = 0, tokens = 0, generated = 0;
  for (const auto& seg : t.segments()) {
    for (const auto& turn : seg.turns()) {
      if (turn.role() == v1::Turn::ASSISTANT) ++turns;
      tool_calls += turn.tool_calls_size();
      tokens += turn.tokens().ids_size();
      for (uint32_t m : turn.tokens().loss_mask()) generated += m != 0;
    }
  }
  return json{{"id", t.id()},
              {"experiment", t.experiment()},
              {"task", t.task()},
              {"dataset", t.dataset()},
              {"scaffold", t.scaffold()},
              {"reward", t.reward()},
              {"status", v1::TrajectoryStatus_Name(t.status())},
              {"segments", t.segments_size()},
              {"turns", turns},
              {"tool_calls", tool_calls},
              {"tokens", tokens},
              {"generated_tokens", generated},
              {"start_unix_ms", t.start_unix_ms()},
              {"end_unix_ms", t.end_unix_ms()}};
}

absl::StatusOr<json> TrajectoryJson(const v1::Trajectory& t, const std::function<std::string(int32_t)>& token_text) {
  std::string text;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  auto st = google::protobuf::util::MessageToJsonString(t, &text, opts);
  if (!st.ok()) return absl::InternalError(absl::StrCat("trajectory ", t.id(), ": ", st.ToString()));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return absl::InternalError(absl::StrCat("trajectory ", t.id(), ": unparsable JSON"));
  if (token_text) {
    int si = 0;
    for (const auto& seg : t.segments()) {
      int ti = 0;
      for (const auto& turn : seg.turns()) {
        json pieces = json::array();
        for (int32_t id : turn.tokens().ids()) pieces.push_back(token_text(id));
        j["segments"][si]["turns"][ti]["tokens"]["token_text"] = std::move(pieces);
        ++ti;
      }
      ++si;
    }
  }
  return j;
}

json FleetJson(const std::vector<FleetUnit>& units) {
  json out = json::array();
  for (const auto& u : units) {
    json nodes = json::array();
    for (const auto& n : u.nodes) {
      json boxes = json::array();
      for (const auto& b : n.sandboxes) boxes.push_back({{"id", b.id}, {"state", b.state}, {"class", b.klass}});
      nodes.push_back({{"id", n.id}, {"alive", n.alive}, {"slots_capacity", n.slots_capacity},
                       {"sandboxes", std::move(boxes)}});
    }
    out.push_back({{"id", u.id}, {"nodes", std::move(nodes)}});
  }
  return json{{"units", std::move(out)}};
}

json EvalJobs(const std::string& dir) {
  json jobs = json::array();
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return jobs;
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && std::filesystem::exists(e.path() / "result.json", ec)) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    std::ifstream in(p / "result.json");
    json result = json::parse(in, nullptr, false);
    jobs.push_back({{"job", p.filename().string()},
                    {"result", result.is_discarded() ? json{{"error", "result.json is not valid JSON"}} : result}});
  }
  return jobs;
}

void ServeApi(const DashboardSources& src, const HttpRequest& req, HttpResponder& out) {
  const std::string& path = req.path;
  if (path == "/api/metrics_log") {
    if (src.metrics_log_path.empty()) return SendJson(out, 200, json::array());
    auto lines = ReadMetricsLog(src.metrics_log_path);
    if (!lines.ok()) return SendError(out, 500, lines.status());
    json arr = json::array();
    for (const auto& l : *lines) arr.push_back(json::parse(MetricsLogLineJson(l)));
    return SendJson(out, 200, arr);
  }
  if (path == "/api/fleet") {
    if (!src.fleet) return SendJson(out, 200, json{{"units", json::array()}, {"unavailable", true}});
    auto units = src.fleet();
    if (!units.ok()) return SendError(out, 500, units.status());
    return SendJson(out, 200, FleetJson(*units));
  }
  if (path == "/api/eval_jobs") return SendJson(out, 200, EvalJobs(src.eval_jobs_dir));
  if (path == "/api/trajectories") {
    if (!src.recent_trajectories) return SendJson(out, 200, json{{"trajectories", json::array()}, {"unavailable", true}});
    int limit = 100;
    for (absl::string_view kv : absl::StrSplit(req.query, '&')) {
      if (absl::StartsWith(kv, "limit=") && !absl::SimpleAtoi(kv.substr(6), &limit)) {
        return SendError(out, 400, "limit: expected an integer");
      }
    }
    if (limit < 1 || limit > kMaxTrajectories) return SendError(out, 400, "limit: must be in 1..1000");
    auto ts = src.recent_trajectories(limit);
    if (!ts.ok()) return SendError(out, HttpStatusOf(ts.status()), ts.status());
    json arr = json::array();
    for (const auto& t : *ts) arr.push_back(Summary(t));
    return SendJson(out, 200, json{{"trajectories", std::move(arr)}});
  }
  const std::string kOne = "/api/trajectories/";
  if (absl::StartsWith(path, kOne) && path.size() > kOne.size()) {
    if (!src.trajectory) return SendError(out, 404, "no trajectory store in this process");
    std::optional<std::string> id = PercentDecode(std::string_view(path).substr(kOne.size()));
    if (!id.has_value()) return SendError(out, 400, "trajectory id: bad %-escape");
    auto t = src.trajectory(*id);
    if (!t.ok()) return SendError(out, HttpStatusOf(t.status()), t.status());
    auto j = TrajectoryJson(*t, src.token_text);
    if (!j.ok()) return SendError(out, 500, j.status());
    (*j)["summary"] = Summary(*t);
    return SendJson(out, 200, *j);
  }
  SendError(out, 404, absl::StrCat("no such API: ", path));
}

}  // namespace

HttpHandler DashboardHandler(DashboardSources sources, HttpHandler next) {
  return [src = std::move(sources), next = std::move(next)](const HttpRequest& req, HttpResponder& out) {
    bool api = absl::StartsWith(req.path, "/api/");
    bool page = req.path == "/" || req.path == "/dashboard" || absl::StartsWith(req.path, "/dashboard/");
    bool metrics = req.path == "/metrics";
    if (!api && !page && !metrics) {
      if (next) return next(req, out);
      return out.Send(404, "text/plain", "not found\n");
    }
    if (req.method != "GET" && req.method != "HEAD") {
      if (next && api) return next(req, out);
      return out.Send(405, "text/plain", "use GET\n");
    }
    if (metrics) {
      if (!src.metrics) return out.Send(404, "text/plain", "no metrics in this process\n");
      return out.Send(200, "text/plain; version=0.0.4; charset=utf-8", src.metrics->RenderPrometheus());
    }
    if (api) return ServeApi(src, req, out);
    const Asset* asset = FindAsset(req.path == "/" || req.path == "/dashboard" ? "/dashboard/index.html" : req.path);
    if (asset == nullptr) return out.Send(404, "text/plain", "no such asset\n");
    out.Send(200, asset->content_type, asset->body);
  };
}

}  // namespace flotilla::dashboard
