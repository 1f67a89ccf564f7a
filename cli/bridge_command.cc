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
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/shutdown_signals.h"
#include "flotilla/proto/trainer.grpc.pb.h"
#include "flotilla/trainer_bridge/experiment_config.h"

namespace flotilla::cli {
namespace {

int Serve(const std::string& experiment, const std::string& listen, int threads, const std::string& env_store,
          const std::string& agents_dir, const DaemonMetricsFlags& metrics_flags) {
  ShutdownSignals signals;  // before the engine's, sandbox's and gRPC's threads exist
  auto cfg = trainer_bridge::LoadExperimentConfig(experiment);
  if (!cfg.ok()) {
    std::cerr << "bridge: " << cfg.status().message() << "\n";
    return 2;
  }
  // The embedded default, wired where `flotilla run` wires it: the scheduler and its in-process
  // node agent (every sample's sandbox from the scheduler's front door), the engine, the one
  // trajectory store and the experiment's trainer bridge; only the trainer is external.
  app::PlatformOptions po = app::ExperimentPlatformOptions(*cfg);
  auto images = SetExperimentEnvironments(*cfg, env_store, agents_dir, &po.experiment_options);
  if (!images.ok()) {
    std::cerr << "bridge: " << images.status().message() << "\n";
    return 2;
  }
  po.image_dir = *images;  // folder tasks' built environments
  po.worker.engine.threads = threads;
  po.experiment_options.listen = listen;
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "bridge: " << platform.status().message() << "\n";
    return 1;
  }
  // The engine's, the node agent's, the scheduler's and the bridge's figures.
  auto metrics_server = ServeDaemonMetrics("bridge", metrics_flags, (*platform)->metrics());
  if (!metrics_server.ok()) {
    std::cerr << "bridge: " << metrics_server.status().message() << "\n";
    return 2;
  }
  std::cout << "bridge: listening on " << (*platform)->experiment()->address() << std::endl;
  signals.Wait();
  (*platform)->Stop();
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
