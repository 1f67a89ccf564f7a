// flotilla worker: serve the OpenAI/Anthropic APIs for scaffolds, or run one scaffold session.
//
//   flotilla worker [--listen ADDR]                      serve (default 127.0.0.1:8000; /metrics too)
//   flotilla worker run --scaffold mini --task DIR       one session; prints the trajectory
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "task_environment.h"
#include "flotilla/app/embedded_node.h"
#include "flotilla/app/embedded_worker.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/terminal_task.h"
#include "embedded_worker_flags.h"
#include "flotilla/common/shutdown_signals.h"

namespace flotilla::cli {

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<app::EmbeddedWorkerOptions>();
  opts->http_address = "127.0.0.1:8000";
  CLI::App* w = app.add_subcommand("worker", "Run the worker (OpenAI/Anthropic endpoints, scaffolds)");
  w->add_option("--listen", opts->http_address, "HTTP address (HOST:PORT or unix:PATH)");
  AddEmbeddedWorkerFlags(w, *opts);

  struct RunArgs {
    std::string task, node, agent_dir;
    std::string env_store = "/var/lib/flotilla";
    worker::ScaffoldOptions scaffold;
    uint64_t seed = 0;
  };
  auto run = std::make_shared<RunArgs>();
  CLI::App* r = w->add_subcommand("run", "Run one scaffold session on a task and store its trajectory");
  r->add_option("--scaffold", run->scaffold.scaffold,
                "mini, terminal, or pi (the Pi coding agent CLI in the sandbox; needs --agent-dir)")
      ->required();
  r->add_option("--agent-dir", run->agent_dir, "for external agents: the host folder the CLI is installed in (npm --prefix)");
  r->add_option("--task", run->task, "task folder (Terminal-Bench 1.x or 2.x layout)")->required();
  r->add_option("--agent", run->scaffold.agent, "model, reference (the task's solution) or none");
  r->add_option("--node", run->node, "node agent gRPC address; default: an embedded node in this process");
  r->add_option("--max-steps", run->scaffold.max_steps, "agent turns at most");
  r->add_option("--max-tokens", run->scaffold.max_tokens, "tokens per model turn");
  r->add_option("--policy", run->scaffold.policy_name, "sandbox policy name");
  r->add_option("--seed", run->seed, "sampling seed");
  r->add_option("--env-store", run->env_store, "where task environments are built (flotilla env)");

  r->callback([opts, run, exit_code] {
    auto task = worker::LoadTerminalTask(run->task);
    if (!task.ok()) {
      std::cerr << "flotilla worker run: " << task.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    if (!task->dockerfile.empty()) {
      environments::EnvBuilder builder(CliEnvBuilderOptions(run->env_store));
      absl::Status env = PrepareTaskEnvironment(builder, &*task, [](std::string_view l) { std::cerr << l << "\n"; });
      if (!env.ok()) {
        std::cerr << "flotilla worker run: " << env.message() << "\n";
        *exit_code = 1;
        return;
      }
    }
    app::EmbeddedWorkerOptions eo = *opts;
    const bool external = run->scaffold.scaffold == "pi";
    eo.http_address = external ? "127.0.0.1:0" : "";
    eo.scaffold = run->scaffold.scaffold;
    auto w = app::EmbeddedWorker::Start(eo);
    if (!w.ok()) {
      std::cerr << "flotilla worker run: " << w.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::unique_ptr<app::EmbeddedNode> node;
    std::shared_ptr<grpc::Channel> channel;
    if (run->node.empty()) {
      auto started = app::EmbeddedNode::Start(eo.state_dir + "/sandboxes", "flotilla-worker", run->env_store);
      if (!started.ok()) {
        std::cerr << "flotilla worker run: embedded node: " << started.status().message() << "\n";
        *exit_code = 1;
        return;
      }
      node = std::move(*started);
      channel = node->channel();
    } else {
      channel = grpc::CreateChannel(run->node, grpc::InsecureChannelCredentials());
    }
    worker::SandboxClient sandbox(channel);
    if (external) {
      if (run->agent_dir.empty()) {
        std::cerr << "flotilla worker run: --agent-dir: required for --scaffold pi\n";
        *exit_code = 2;
        return;
      }
      std::string addr = (*w)->http_address();
      int port = std::stoi(addr.substr(addr.rfind(':') + 1));
      const int context = (*w)->config().max_context;
      auto spec = worker::PiAgentSpec(run->agent_dir, context, static_cast<int>(run->scaffold.max_tokens));
      auto ran = worker::RunExternalAgent((*w)->service(), sandbox, port, spec, task->instruction,
                                          task->agent_timeout_ms);
      if (!ran.ok()) {
        std::cerr << "flotilla worker run: " << ran.status().message() << "\n";
        *exit_code = 1;
        return;
      }
      std::cout << ran->output << "\ntrajectory " << ran->session_id << " stored in " << (*w)->store().path()
                << " (pi exited " << ran->exit_code << ", " << ran->connections << " connections)" << std::endl;
      return;
    }
    worker::ScaffoldOptions so = run->scaffold;
    so.experiment = opts->experiment;
    so.seed = run->seed;
    auto result = worker::RunScaffold((*w)->service(), sandbox, *task, so);
    if (!result.ok()) {
      std::cerr << "flotilla worker run: " << result.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << "trajectory " << result->trajectory_id << " stored in " << (*w)->store().path()
              << " (status " << v1::TrajectoryStatus_Name(result->status) << ", reward " << result->reward
              << ", " << result->detail << ")" << std::endl;
  });

  w->callback([w, opts, exit_code] {
    if (!w->get_subcommands().empty()) return;
    ShutdownSignals signals;  // before the worker's threads exist, so they inherit the mask
    // The engine's and the worker's figures, at /metrics of the worker's one HTTP server.
    MetricsRegistry metrics;
    app::EmbeddedWorkerOptions wo = *opts;
    wo.engine.metrics = &metrics;
    wo.dashboard.metrics = &metrics;
    auto worker = app::EmbeddedWorker::Start(wo);
    if (!worker.ok()) {
      std::cerr << "flotilla worker: " << worker.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << "flotilla worker: serving on http://" << (*worker)->http_address()
              << "/v1 (trajectories in " << (*worker)->store().path() << "; metrics at /metrics)" << std::endl;
    signals.Wait();
  });
}

}  // namespace flotilla::cli
