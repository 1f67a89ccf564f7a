// `flotilla bridge`: serve an experiment's TrainerBridge for an external trainer, and talk to a
// running one: `status`, `reconfigure` (dataset mixture, per-dataset concurrency, active
// teachers) without draining.
#include <iostream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "daemon_metrics.h"
#include "task_environment.h"
#include "flotilla/app/embedded_node.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/inference/engine.h"
#include "flotilla/proto/trainer.grpc.pb.h"
#include "flotilla/trainer_bridge/experiment.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::cli {
namespace {

int Serve(const std::string& experiment, const std::string& listen, int threads, const std::string& env_store,
          const std::string& agents_dir, const DaemonMetricsFlags& metrics_flags) {
  ShutdownSignals signals;  // before the engine's, sandbox's and gRPC's threads exist
  // The engine's, the node agent's and the bridge's figures (before them all: they count into it).
  MetricsRegistry metrics;
  auto cfg = trainer_bridge::LoadExperimentConfig(experiment);
  if (!cfg.ok()) {
    std::cerr << "bridge: " << cfg.status().message() << "\n";
    return 2;
  }
  inference::EngineOptions eo;
  eo.threads = threads;
  eo.max_batch = std::max<uint32_t>(64, cfg->rollout.max_in_flight);
  eo.metrics = &metrics;
  auto engine = inference::Engine::Create(eo);
  if (!engine.ok()) {
    std::cerr << "bridge: engine: " << engine.status().message() << "\n";
    return 1;
  }
  trainer_bridge::ExperimentOptions xo;
  xo.listen = listen;
  xo.metrics = &metrics;
  auto images = SetExperimentEnvironments(*cfg, env_store, agents_dir, &xo);
  if (!images.ok()) {
    std::cerr << "bridge: " << images.status().message() << "\n";
    return 2;
  }
  app::EmbeddedNodeOptions no;
  no.state_dir = cfg->state_dir + "/sandbox";
  no.image_dir = *images;  // folder tasks' built environments
  no.cleanup_leftovers = true;
  // Every sample has a sandbox, idle while the model writes: each is charged a fiftieth of a
  // core and 256 MiB unless it asks for more, so the in-flight bound is admitted.
  no.admission.default_cpu_millicores = 20;
  no.admission.default_memory_bytes = 256ull << 20;
  no.metrics = &metrics;
  auto sandbox = app::EmbeddedNode::Start(no);
  if (!sandbox.ok()) {
    std::cerr << "bridge: sandbox: " << sandbox.status().message() << "\n";
    return 1;
  }
  worker::SandboxClient sandboxes((*sandbox)->channel());
  auto exp = trainer_bridge::Experiment::Start(*cfg, **engine, &sandboxes, xo);
  if (!exp.ok()) {
    std::cerr << "bridge: " << exp.status().message() << "\n";
    return 1;
  }
  auto metrics_server = ServeDaemonMetrics("bridge", metrics_flags, metrics);
  if (!metrics_server.ok()) {
    std::cerr << "bridge: " << metrics_server.status().message() << "\n";
    return 2;
  }
  std::cout << "bridge: listening on " << (*exp)->address() << std::endl;
  signals.Wait();
  (*exp)->Stop();
  return 0;
}

std::unique_ptr<v1::TrainerBridge::Stub> Connect(const std::string& address) {
  return v1::TrainerBridge::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

int Status(const std::string& address) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::BridgeStatus st;
  grpc::Status s = Connect(address)->Status(&ctx, v1::StatusRequest(), &st);
  if (!s.ok()) {
    std::cerr << "bridge status: " << s.error_message() << "\n";
    return 1;
  }
  std::cout << "experiment=" << st.experiment() << " version=" << st.policy_version() << " step=" << st.step()
            << " in_flight=" << st.in_flight() << " samples=" << st.samples_completed()
            << " trainer_connected=" << st.trainer_connected() << " suspended=" << st.suspended()
            << " reward=" << st.mean_reward_recent() << "\n";
  for (const auto& d : st.datasets()) {
    std::cout << "dataset " << d.name() << " weight=" << d.weight() << " max_in_flight=" << d.max_in_flight()
              << " in_flight=" << st.in_flight_by_dataset().count(d.name()) << "\n";
  }
  for (const auto& t : st.teachers()) std::cout << "teacher " << t.name() << " active=" << t.active() << "\n";
  return 0;
}

int Reconfigure(const std::string& address, const std::vector<std::string>& datasets, const std::string& teachers,
                bool set_teachers) {
  v1::ReconfigureRequest req;
  for (const auto& spec : datasets) {
    // name=weight[:max_in_flight]
    std::vector<std::string> kv = absl::StrSplit(spec, absl::MaxSplits('=', 1));
    std::vector<std::string> wm = kv.size() == 2 ? absl::StrSplit(kv[1], ':') : std::vector<std::string>{};
    double w = 0;
    uint32_t m = 0;
    if (kv.size() != 2 || wm.empty() || wm.size() > 2 || !absl::SimpleAtod(wm[0], &w) ||
        (wm.size() == 2 && !absl::SimpleAtoi(wm[1], &m))) {
      std::cerr << "bridge reconfigure: --dataset '" << spec << "': expected NAME=WEIGHT[:MAX_IN_FLIGHT]\n";
      return 2;
    }
    auto* d = req.add_datasets();
    d->set_name(kv[0]);
    d->set_weight(w);
    d->set_max_in_flight(m);
  }
  if (set_teachers) {
    req.set_set_teachers(true);
    for (absl::string_view t : absl::StrSplit(teachers, ',', absl::SkipEmpty())) req.add_active_teachers(std::string(t));
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ReconfigureResponse resp;
  grpc::Status s = Connect(address)->Reconfigure(&ctx, req, &resp);
  if (!s.ok()) {
    std::cerr << "bridge reconfigure: " << s.error_message() << "\n";
    return 1;
  }
  for (const auto& d : resp.datasets()) {
    std::cout << "dataset " << d.name() << " weight=" << d.weight() << " max_in_flight=" << d.max_in_flight() << "\n";
  }
  for (const auto& t : resp.active_teachers()) std::cout << "teacher " << t << " active\n";
  return 0;
}

}  // namespace

void AddBridgeCommand(CLI::App& app, int* exit_code) {
  CLI::App* bridge = app.add_subcommand("bridge", "Run or reconfigure the trainer bridge");
  bridge->require_subcommand(1);

  struct ServeFlags {
    std::string experiment, listen;
    int threads = 1;
    std::string env_store = "/var/lib/flotilla";
    std::string agents_dir = "var/agents";
    DaemonMetricsFlags metrics;
  };
  auto sf = std::make_shared<ServeFlags>();
  CLI::App* serve = bridge->add_subcommand("serve", "Serve an experiment's TrainerBridge for an external trainer");
  serve->add_option("experiment", sf->experiment, "experiment YAML")->required();
  serve->add_option("--listen", sf->listen, "address (default: trainer.address)");
  serve->add_option("--engine-threads", sf->threads, "engine CPU threads");
  serve->add_option("--env-store", sf->env_store, "where task environments are built (flotilla env)")
      ->capture_default_str();
  serve->add_option("--agents-dir", sf->agents_dir, "agent CLIs for scaffold: pi")->capture_default_str();
  AddDaemonMetricsFlags(serve, sf->metrics, "127.0.0.1:7402");
  serve->callback([sf, exit_code] {
    *exit_code = Serve(sf->experiment, sf->listen, sf->threads, sf->env_store, sf->agents_dir, sf->metrics);
  });

  auto address = std::make_shared<std::string>();
  CLI::App* status = bridge->add_subcommand("status", "Show a running bridge's state");
  status->add_option("--address", *address, "bridge address")->required();
  status->callback([address, exit_code] { *exit_code = Status(*address); });

  struct ReconfFlags { std::string address; std::vector<std::string> datasets; std::string teachers; };
  auto rf = std::make_shared<ReconfFlags>();
  CLI::App* reconf = bridge->add_subcommand("reconfigure",
                                            "Change the dataset mixture, per-dataset concurrency or active teachers");
  reconf->add_option("--address", rf->address, "bridge address")->required();
  reconf->add_option("--dataset", rf->datasets, "NAME=WEIGHT[:MAX_IN_FLIGHT] (weight 0 keeps the current weight)");
  CLI::Option* t = reconf->add_option("--teachers", rf->teachers, "comma-separated active teacher set");
  reconf->callback([rf, t, exit_code] {
    *exit_code = Reconfigure(rf->address, rf->datasets, rf->teachers, t->count() > 0);
  });
}

}  // namespace flotilla::cli
