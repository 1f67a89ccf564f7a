// `flotilla sandbox run|cleanup|image build`: one-shot sandboxes, leftover and node-state
// cleanup, and image builds on this host.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "commands.h"
#include "flotilla/common/config.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/sandbox/zygote_main.h"

namespace flotilla::cli {
namespace {

using flotilla::sandbox::ExecOptions;
using flotilla::sandbox::OutputStream;
using flotilla::sandbox::Runtime;
using flotilla::sandbox::RuntimeOptions;
using flotilla::sandbox::SandboxOptions;
using flotilla::sandbox::StopReason;

struct RunFlags {
  std::string state_dir = "/var/lib/flotilla";
  std::string image, policy, memory, disk, timeout, exec_class = "latency_sensitive";
  uint32_t pids = 0;
  std::vector<std::string> allow;
  std::vector<std::string> command;
};

void WriteAll(int fd, std::string_view d) {
  while (!d.empty()) {
    ssize_t n = ::write(fd, d.data(), d.size());
    if (n <= 0) return;
    d.remove_prefix(static_cast<size_t>(n));
  }
}

int RunCommand(const RunFlags& f) {
  auto fail = [](const std::string& msg) {
    std::cerr << "flotilla sandbox run: " << msg << "\n";
    return 125;
  };
  if (f.command.empty()) return fail("no command given (use: flotilla sandbox run [flags] -- CMD [ARGS...])");
  SandboxOptions so;
  so.image = f.image;
  so.policy_name = f.policy;
  so.resources.pids = f.pids;
  if (!f.memory.empty()) {
    auto b = ParseBytes(f.memory);
    if (!b.ok()) return fail("--memory: " + std::string(b.status().message()));
    so.resources.memory_bytes = *b;
  }
  if (!f.disk.empty()) {
    auto b = ParseBytes(f.disk);
    if (!b.ok()) return fail("--disk: " + std::string(b.status().message()));
    so.resources.disk_bytes = *b;
  }
  ExecOptions eo;
  eo.argv = f.command;
  if (!f.timeout.empty()) {
    auto ms = ParseDurationMs(f.timeout);
    if (!ms.ok() || *ms <= 0) return fail("--timeout: bad duration '" + f.timeout + "'");
    eo.timeout_ms = static_cast<uint32_t>(*ms);
  }
  if (f.exec_class == "latency_sensitive") {
    so.execution_class = flotilla::sandbox::ExecutionClass::kLatencySensitive;
  } else if (f.exec_class != "best_effort") {
    return fail("--class: must be best_effort or latency_sensitive, got '" + f.exec_class + "'");
  }
  for (const std::string& a : f.allow) {
    // "CIDR", "CIDR:PORT", or "[v6addr/len]:PORT".
    flotilla::sandbox::NetworkAllow rule;
    std::string port;
    if (!a.empty() && a[0] == '[') {
      size_t close = a.find(']');
      if (close == std::string::npos) return fail("--allow: missing ']' in '" + a + "'");
      rule.cidr = a.substr(1, close - 1);
      if (close + 1 < a.size()) {
        if (a[close + 1] != ':') return fail("--allow: want [CIDR]:PORT, got '" + a + "'");
        port = a.substr(close + 2);
      }
    } else if (size_t colon = a.rfind(':'); colon != std::string::npos && a.find(':') == colon) {
      rule.cidr = a.substr(0, colon);
      port = a.substr(colon + 1);
    } else {
      rule.cidr = a;
    }
    if (!port.empty()) {
      int p = 0;
      if (!absl::SimpleAtoi(port, &p) || p < 0 || p > 65535) return fail("--allow: bad port in '" + a + "'");
      rule.port = static_cast<uint16_t>(p);
    }
    so.extra_allow.push_back(rule);
  }
  RuntimeOptions ro;
  ro.state_dir = f.state_dir;
  ro.keep_cgroup_prefix = true;  // the node's own prefix, shared by every run
  ro.prepare_ahead = false;      // one sandbox: nothing to prepare for a second
  // The static flotilla-zygote next to this binary, where it was built, rather than a fork of
  // this process: its init is cheaper to clone and to tear down, and the whole run measured
  // ~0.5 ms shorter (bench/RESULTS.md). Where it is missing, this process forks as before.
  ro.zygote_binary = flotilla::sandbox::SiblingExecutable("flotilla-zygote");
  auto rt = Runtime::Open(ro);
  if (!rt.ok()) return fail(rt.status().ToString());
  auto created = (*rt)->Create(so);
  if (!created.ok()) return fail(created.status().ToString());
  auto r = (*rt)->Exec(created->id, eo, [](OutputStream s, std::string_view d) {
    WriteAll(s == OutputStream::kStdout ? 1 : 2, d);
  });
  // Closing the runtime destroys the sandbox (nothing of it stays) while the zygote exits.
  rt->reset();
  if (!r.ok()) return fail(r.status().ToString());
  if (r->reason != StopReason::kNone) {
    std::cerr << "flotilla: sandbox stopped the command: " << flotilla::sandbox::StopReasonName(r->reason)
              << (r->detail.empty() ? "" : " (" + r->detail + ")") << "\n";
  }
  if (r->signal != 0) return 128 + r->signal;
  if (r->exit_code < 0) return 125;
  return r->exit_code;
}

int CleanupCommand(const std::string& state_dir) {
  RuntimeOptions ro;
  ro.state_dir = state_dir;
  ro.bpf_pin_dir.clear();  // this runtime only cleans: it pins nothing
  auto rt = Runtime::Open(ro);
  if (!rt.ok()) {
    std::cerr << "flotilla sandbox cleanup: " << rt.status() << "\n";
    return 1;
  }
  auto report = (*rt)->CleanupLeftovers();
  rt->reset();
  absl::Status removed = flotilla::sandbox::RemoveNodeSharedState(RuntimeOptions{});
  if (!report.ok() || !removed.ok()) {
    std::cerr << "flotilla sandbox cleanup: " << (report.ok() ? removed : report.status()) << "\n";
    return 1;
  }
  std::cout << "sandboxes=" << report->sandboxes << " cgroups=" << report->cgroups << " mounts=" << report->mounts
            << " processes=" << report->processes << " pinned_bpf=removed\n";
  return 0;
}

}  // namespace

void AddSandboxCommand(CLI::App& app, int* exit_code) {
  CLI::App* sandbox = app.add_subcommand("sandbox", "Run commands in sandboxes; build images");
  sandbox->require_subcommand(1);

  auto flags = std::make_shared<RunFlags>();
  CLI::App* run = sandbox->add_subcommand("run", "Run a command in a fresh sandbox, then destroy it");
  run->add_option("--state-dir", flags->state_dir, "Runtime state directory");
  run->add_option("--image", flags->image, "Image: a directory, an image name, or a layer id (default: host /usr)");
  run->add_option("--policy", flags->policy, "Policy: a file or a shipped name (default, no-network, build)");
  run->add_option("--memory", flags->memory, "Memory limit (e.g. 512M)");
  run->add_option("--disk", flags->disk, "Writable layer size (e.g. 1G)");
  run->add_option("--pids", flags->pids, "Process limit");
  run->add_option("--timeout", flags->timeout, "Wall-clock limit of the command (e.g. 30s)");
  run->add_option("--class", flags->exec_class, "Execution class: latency_sensitive (default, interactive) or best_effort (SCHED_IDLE)");
  run->add_option("--allow", flags->allow, "Allow network to CIDR:PORT (repeatable)")
      ->allow_extra_args(false);
  run->add_option("command", flags->command, "The command and its arguments (after --)")->required();
  run->callback([flags, exit_code] { *exit_code = RunCommand(*flags); });

  auto cleanup_dir = std::make_shared<std::string>("/var/lib/flotilla");
  CLI::App* cleanup = sandbox->add_subcommand(
      "cleanup", "Remove what dead runtimes left behind, then the node's pinned eBPF network programs");
  cleanup->add_option("--state-dir", *cleanup_dir, "Runtime state directory");
  cleanup->callback([cleanup_dir, exit_code] { *exit_code = CleanupCommand(*cleanup_dir); });

  auto image_dir = std::make_shared<std::string>("/var/lib/flotilla");
  auto image_name = std::make_shared<std::string>();
  auto suite = std::make_shared<std::string>();
  CLI::App* image = sandbox->add_subcommand("image", "Manage sandbox images");
  image->require_subcommand(1);
  CLI::App* build = image->add_subcommand("build", "Build a Debian image with debootstrap");
  build->add_option("name", *image_name, "Image name")->required();
  build->add_option("--suite", *suite, "Debian suite (default: the host's)");
  build->add_option("--state-dir", *image_dir, "Runtime state directory");
  build->callback([image_dir, image_name, suite, exit_code] {
    absl::Status s = flotilla::sandbox::BuildImage(*image_dir, *image_name, *suite,
                                                   [](std::string_view line) { std::cerr << line << "\n"; });
    if (!s.ok()) {
      std::cerr << "flotilla sandbox image build: " << s << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << *image_name << "\n";
  });
}

}  // namespace flotilla::cli
