#include "test_sandbox.h"

#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"

namespace flotilla::synth {

absl::StatusOr<std::unique_ptr<TestSandbox>> TestSandbox::Start(worker::SandboxClient& sandboxes,
                                                                const std::string& top) {
  v1::CreateRequest c;
  c.set_image(top.rfind("dir:", 0) == 0 ? top.substr(4) : top);
  c.set_policy_name("no-network");
  (*c.mutable_labels())["role"] = "synth";
  c.mutable_resources()->set_memory_bytes(2ull << 30);
  c.mutable_resources()->set_disk_bytes(4ull << 30);
  // The synthesizer waits on every suite run (one sandbox at a time, on its critical path), so
  // they run as ordinary processes at the synthesizer's own priority (`nice -n 10 flotilla
  // synth` stays nice 10). Best effort would make them SCHED_IDLE: on a shared host with any
  // background load (nice 19 fuzzers) they starve, a libmd task took 475 s that way.
  c.set_execution_class(v1::LATENCY_SENSITIVE);
  ASSIGN_OR_RETURN(std::string id, sandboxes.Create(c));
  return std::unique_ptr<TestSandbox>(new TestSandbox(sandboxes, std::move(id)));
}

TestSandbox::~TestSandbox() {
  if (absl::Status destroyed = sandboxes_.Destroy(id_); !destroyed.ok()) {
    FLOG(warn, "synth: sandbox not destroyed", {{"sandbox", id_}, {"error", std::string(destroyed.message())}});
  }
}

absl::StatusOr<ShellRun> TestSandbox::Run(const std::string& script, uint32_t timeout_ms) {
  v1::ExecRequest ex;
  ex.set_sandbox_id(id_);
  for (const char* a : {"/bin/bash", "-c"}) ex.add_argv(a);
  ex.add_argv(script);
  auto& env = *ex.mutable_env();
  env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env["HOME"] = "/root";
  env["LANG"] = "C.UTF-8";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  ex.set_cwd("/app");
  ex.set_timeout_ms(timeout_ms);
  ex.set_output_limit_bytes(64ull << 20);
  ASSIGN_OR_RETURN(worker::ExecOutcome r, sandboxes_.Exec(ex));
  ShellRun out;
  out.exit_code = r.exit_code;
  out.timed_out = r.reason == v1::TIMEOUT;
  out.output = std::move(r.output);
  out.seconds = r.wall_ms / 1000.0;
  return out;
}

absl::Status TestSandbox::Put(const std::string& path, const std::string& content, uint32_t mode) {
  return sandboxes_.PutFile(id_, path, content, mode);
}

absl::StatusOr<std::string> TestSandbox::Get(const std::string& path) {
  return sandboxes_.GetFile(id_, path, 256ull << 20);
}

}  // namespace flotilla::synth
