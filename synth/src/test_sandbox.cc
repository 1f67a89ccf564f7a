#include "test_sandbox.h"

#include "flotilla/common/status.h"

namespace flotilla::synth {

absl::StatusOr<std::unique_ptr<TestSandbox>> TestSandbox::Start(sandbox::Runtime& runtime, const std::string& top) {
  sandbox::SandboxOptions o;
  o.image = top.rfind("dir:", 0) == 0 ? top.substr(4) : top;
  o.policy_name = "no-network";
  o.labels["role"] = "synth";
  o.resources.memory_bytes = 2ull << 30;
  o.resources.disk_bytes = 4ull << 30;
  ASSIGN_OR_RETURN(sandbox::CreateResult c, runtime.Create(o));
  return std::unique_ptr<TestSandbox>(new TestSandbox(runtime, c.id));
}

TestSandbox::~TestSandbox() { (void)runtime_.Destroy(id_); }

absl::StatusOr<ShellRun> TestSandbox::Run(const std::string& script, uint32_t timeout_ms) {
  sandbox::ExecOptions ex;
  ex.argv = {"/bin/bash", "-c", script};
  ex.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
            {"HOME", "/root"},
            {"LANG", "C.UTF-8"},
            {"PYTHONDONTWRITEBYTECODE", "1"}};
  ex.cwd = "/app";
  ex.timeout_ms = timeout_ms;
  ex.output_limit_bytes = 64ull << 20;
  ShellRun out;
  ASSIGN_OR_RETURN(sandbox::ExecResult r,
                   runtime_.Exec(id_, ex, [&](sandbox::OutputStream, std::string_view d) { out.output.append(d); }));
  out.exit_code = r.exit_code;
  out.timed_out = r.reason == sandbox::StopReason::kTimeout;
  out.seconds = r.wall_ms / 1000.0;
  return out;
}

absl::Status TestSandbox::Put(const std::string& path, const std::string& content, uint32_t mode) {
  return runtime_.PutFile(id_, path, content, mode);
}

absl::StatusOr<std::string> TestSandbox::Get(const std::string& path) {
  ASSIGN_OR_RETURN(sandbox::FileContent f, runtime_.GetFile(id_, path, 256ull << 20));
  return f.content;
}

}  // namespace flotilla::synth
