#include "flotilla/worker/sandbox_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace flotilla::worker {
namespace {

absl::Status FromGrpc(const grpc::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("sandbox ", std::string(what), ": ", s.error_message()));
}

}  // namespace

SandboxClient::SandboxClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::NodeAgent::NewStub(std::move(channel))) {}

absl::StatusOr<std::string> SandboxClient::Create(const v1::CreateRequest& request) {
  grpc::ClientContext ctx;
  v1::CreateResponse resp;
  absl::Status st = FromGrpc(stub_->Create(&ctx, request, &resp), "create");
  if (!st.ok()) return st;
  return resp.sandbox_id();
}

absl::StatusOr<ExecOutcome> SandboxClient::Exec(const v1::ExecRequest& request,
                                                const std::function<void(std::string_view)>& on_stdout) {
  grpc::ClientContext ctx;
  auto reader = stub_->Exec(&ctx, request);
  ExecOutcome out;
  bool exited = false;
  v1::ExecChunk chunk;
  while (reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case v1::ExecChunk::kStdout:
        out.output += chunk.stdout();
        if (on_stdout) on_stdout(chunk.stdout());
        break;
      case v1::ExecChunk::kStderr:
        out.output += chunk.stderr();
        break;
      case v1::ExecChunk::kExit:
        exited = true;
        out.exit_code = chunk.exit().exit_code();
        out.signal = chunk.exit().signal();
        out.reason = chunk.exit().reason();
        out.detail = chunk.exit().detail();
        out.wall_ms = chunk.exit().wall_ms();
        break;
      default:
        break;
    }
  }
  absl::Status st = FromGrpc(reader->Finish(), "exec");
  if (!st.ok()) return st;
  if (!exited) return absl::InternalError("sandbox exec: the stream ended without an exit record");
  return out;
}

absl::Status SandboxClient::PutFile(const std::string& sandbox_id, const std::string& path,
                                    std::string_view content, uint32_t mode) {
  grpc::ClientContext ctx;
  v1::PutFileRequest req;
  req.set_sandbox_id(sandbox_id);
  req.set_path(path);
  req.set_content(std::string(content));
  req.set_mode(mode);
  v1::PutFileResponse resp;
  return FromGrpc(stub_->PutFile(&ctx, req, &resp), absl::StrCat("put ", path));
}

absl::StatusOr<std::string> SandboxClient::GetFile(const std::string& sandbox_id,
                                                   const std::string& path, uint64_t max_bytes) {
  grpc::ClientContext ctx;
  v1::GetFileRequest req;
  req.set_sandbox_id(sandbox_id);
  req.set_path(path);
  req.set_max_bytes(max_bytes);
  v1::GetFileResponse resp;
  absl::Status st = FromGrpc(stub_->GetFile(&ctx, req, &resp), absl::StrCat("get ", path));
  if (!st.ok()) return st;
  return resp.content();
}

absl::Status SandboxClient::Destroy(const std::string& sandbox_id) {
  grpc::ClientContext ctx;
  v1::SandboxRef req;
  req.set_sandbox_id(sandbox_id);
  v1::Empty resp;
  return FromGrpc(stub_->Destroy(&ctx, req, &resp), "destroy");
}

}  // namespace flotilla::worker
