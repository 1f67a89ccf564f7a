// Client request ids on CreateSandbox: RequestFingerprint (what makes two requests "the same
// request", stable across processes since it is journaled) and how a scale unit answers a
// request whose id it has seen (ScaleUnit::Replay).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "flotilla/scheduler/scale_unit.h"

namespace flotilla::scheduler {

uint64_t RequestFingerprint(const v1::CreateSandboxRequest& request) {
  v1::CreateSandboxRequest copy = request;
  copy.clear_request_id();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);  // map fields in key order
    copy.SerializeToCodedStream(&out);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

absl::StatusOr<v1::SandboxPlacement> ScaleUnit::ReplayRecord(const std::string& request_id,
                                                              const RequestRecord& record,
                                                              uint64_t fingerprint) const {
  if (record.fingerprint != fingerprint) {
    return absl::AlreadyExistsError(absl::StrCat(
        "request_id '", request_id, "': already used by a different request",
        record.sandbox_id.empty() ? "" : absl::StrCat(" (sandbox ", record.sandbox_id, ")"),
        "; a retry must repeat the original request unchanged, a new request needs a new id"));
  }
  if (record.sandbox_id.empty()) {
    return absl::AbortedError(
        absl::StrCat("request_id '", request_id, "': the first request with this id is still being placed; retry"));
  }
  absl::StatusOr<v1::SandboxPlacement> p = GetSandbox(record.sandbox_id);
  if (absl::IsNotFound(p.status())) {
    return absl::FailedPreconditionError(absl::StrCat("request_id '", request_id, "': its sandbox ",
                                                      record.sandbox_id, " was already deleted"));
  }
  return p;
}

std::optional<absl::StatusOr<v1::SandboxPlacement>> ScaleUnit::Replay(const v1::CreateSandboxRequest& request) const {
  if (request.request_id().empty()) return std::nullopt;
  RequestRecord record;
  {
    absl::MutexLock lock(&requests_mu_);
    auto it = requests_.find(request.request_id());
    if (it == requests_.end()) return std::nullopt;
    record = it->second;
  }
  return ReplayRecord(request.request_id(), record, RequestFingerprint(request));
}

}  // namespace flotilla::scheduler
