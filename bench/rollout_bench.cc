#include "rollout_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine_gpu_bench.h"
#include "flotilla/admission/in_flight_sizing.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/clock.h"
#include "flotilla/common/metrics.h"
#include "flotilla/common/progress.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/safetensors.h"
#include "flotilla/inference/tokenizer.h"
#include "flotilla/node/node_agent.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/trainer_bridge/rollout_controller.h"
#include "flotilla/trainer_bridge/rollout_runner.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "rollout_mode.h"
#include "weights.h"

namespace flotilla::bench {
namespace {

using trainer_bridge::DatasetConfig;
using trainer_bridge::RolloutConfig;
using trainer_bridge::RolloutController;
using trainer_bridge::RolloutRunner;
using trainer_bridge::RunnerOptions;

inference::ModelConfig BenchModel() {
  inference::ModelConfig c;
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.n_experts = 4;
  c.top_k = 2;
  c.expert_hidden = 32;
  c.max_context = 4200;
  return c;
}

// Random weights (uniform with the given std; norms 1) written as bf16 safetensors. A fast
// generator: the GPU model has hundreds of millions of parameters.
absl::Status WriteRandomModel(const inference::ModelConfig& c, const std::string& path, uint64_t seed, float stddev) {
  inference::ModelWeights w;
  w.config = c;
  std::vector<inference::TensorToWrite> out;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  const float half_width = stddev * std::sqrt(3.0f);
  for (const inference::TensorSlot& slot : inference::TensorSlots(w)) {
    int64_t n = 1;
    for (int64_t d : slot.shape) n *= d;
    slot.dst->resize(static_cast<size_t>(n));
    const bool is_norm = slot.name.find("norm") != std::string::npos;
    for (float& x : *slot.dst) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const float u = static_cast<float>(state >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      x = is_norm ? 1.0f : (2.0f * u - 1.0f) * half_width;
    }
    out.push_back({slot.name, slot.shape, slot.dst->data(), inference::DType::kBF16});
  }
  return inference::WriteSafetensors(path, out);
}

// The same length for a sample index in every mode.
uint32_t LengthOf(const RolloutBenchOptions& o, uint64_t sample) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull ^ (sample + 1) * 0xBF58476D1CE4E5B9ull);
  std::lognormal_distribution<double> d(std::log(o.median), o.sigma);
  return static_cast<uint32_t>(std::clamp<double>(std::round(d(rng)), 1.0, o.cap));
}


// The engine's decode step on the idle engine: at one row and at a step's whole batch, each
// timed over 32 lockstep steps (RunDecode). Between the two a step costs a + b * rows.
struct StepCost {
  double one_row_ms = 0;
  double full_ms = 0;
  uint32_t full_rows = 0;
};

absl::StatusOr<StepCost> MeasureStepCost(inference::Engine& engine, uint32_t rows) {
  constexpr int kPrompt = 16, kNew = 33;
  StepCost c;
  c.full_rows = rows;
  for (auto [batch, ms] : {std::pair<uint32_t, double*>{1, &c.one_row_ms}, {rows, &c.full_ms}}) {
    const DecodeRun run = RunDecode(&engine, "bench", static_cast<int>(batch), kPrompt, kNew);
    if (run.seconds <= 0) return absl::InternalError(absl::StrCat("timing the decode step at ", batch, " rows failed"));
    *ms = 1000.0 * run.seconds / (kNew - 1);
  }
  return c;
}

// The most the asynchronous mode can gain on this engine with this workload. The synchronous
// mode generates each step's samples whole, its rows falling as they finish, then trains; the
// asynchronous one at best keeps every step full (cost per token at the whole batch) and hides
// the trainer's step behind generation. Both over the samples the synchronous mode trains on
// (their lengths are LengthOf's); switches and sandboxes are left out of both. A step whose cost
// hardly grows with its rows (a GPU) makes the synchronous tail expensive and the bound high; a
// step that costs in proportion to its rows (a small model on CPU cores) keeps it near 1.
double AsyncVsSyncBound(const RolloutBenchOptions& o, const StepCost& c, double train_s) {
  const double per_row = c.full_rows > 1 ? (c.full_ms - c.one_row_ms) / (c.full_rows - 1) : c.one_row_ms;
  const double fixed = std::max(0.0, c.one_row_ms - per_row);
  const uint32_t per_step = o.prompts_per_step * o.group_size;
  double sync_ms = 0, tokens = 0;
  for (uint32_t step = 0; step < o.steps; ++step) {
    std::vector<uint32_t> lengths(per_step);
    for (uint32_t i = 0; i < per_step; ++i) lengths[i] = LengthOf(o, static_cast<uint64_t>(step) * per_step + i);
    std::sort(lengths.begin(), lengths.end());
    uint32_t done = 0;
    for (uint32_t i = 0; i < per_step; ++i) {
      sync_ms += (lengths[i] - done) * (fixed + per_row * (per_step - i));
      done = lengths[i];
      tokens += lengths[i];
    }
    sync_ms += 1000.0 * train_s;
  }
  const double async_ms = std::max(tokens * c.full_ms / std::max<uint32_t>(1, c.full_rows), 1000.0 * train_s * o.steps);
  return sync_ms / std::max(async_ms, 1e-9);
}

// Sandbox creates the embedded node answered with a reset sandbox of its warm pool.
double ReusedSandboxes(MetricsRegistry& metrics) {
  return metrics.GetCounter("flotilla_node_sandboxes_reused_total", "", {{"class", "best_effort"}}).value() +
         metrics.GetCounter("flotilla_node_sandboxes_reused_total", "", {{"class", "latency_sensitive"}}).value();
}

// The mean of a histogram family over all its labels, in milliseconds, read from the registry's
// Prometheus text (0 when it has no observations).
double MeanMillis(const MetricsRegistry& registry, const std::string& family) {
  double sum = 0, count = 0;
  std::istringstream text(registry.RenderPrometheus());
  for (std::string line; std::getline(text, line);) {
    for (auto [suffix, total] : {std::pair<const char*, double*>{"_sum", &sum}, {"_count", &count}}) {
      const std::string name = family + suffix;
      if (line.starts_with(name) && (line[name.size()] == '{' || line[name.size()] == ' ')) {
        *total += std::atof(line.c_str() + line.rfind(' ') + 1);
      }
    }
  }
  return count > 0 ? 1000.0 * sum / count : 0.0;
}

// Admission sized for the in-flight bound: every sample holds a sandbox while it waits for the
// model, so the node must admit `in_flight` of them at once, and the placement engines'
// prediction must too (admission::SizeForInFlight). Each sample's sandbox names its memory
// (trainer_bridge::SandboxTaskOf: 64 MiB), so that is its charge, not the default.
absl::Status SizeAdmission(uint32_t in_flight, admission::AdmissionConfig* a) {
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  admission::ResourceVector capacity;
  capacity.memory_bytes = memory;
  capacity.cpu_millicores = static_cast<uint32_t>(cores * 1000);
  capacity.slots = node::NodeAgentOptions{}.slots_capacity;
  const uint64_t charge = trainer_bridge::SandboxTaskOf(trainer_bridge::Task{}).memory_bytes;
  ASSIGN_OR_RETURN(*a, admission::SizeForInFlight(*a, in_flight, charge, capacity));
  return absl::OkStatus();
}


// The host's busy CPU time so far (every core, from /proc/stat's first line), in seconds;
// 0 where it cannot be read.
double HostBusySeconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return 0;
  return static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

absl::StatusOr<ModeResult> RunMode(const RolloutBenchOptions& o, inference::Engine& engine, worker::SandboxClient& sandboxes,
                   const std::string& weights, uint32_t eta, double train_s, MetricsRegistry* metrics) {
  RolloutConfig rc;
  rc.group_size = o.group_size;
  rc.groups_per_step = o.prompts_per_step;
  rc.max_in_flight = o.prompts_per_step * o.group_size;
  rc.staleness = eta;
  rc.length_bias.enabled = false;
  RolloutController controller(rc, {DatasetConfig{"longtail", "builtin:copy", "longtail", 1, 0}}, {},
                               SystemClock::Get());
  // The trainer takes `steps` batches; as in an experiment, no group past them is dispatched.
  controller.SetGroupBudget(static_cast<uint64_t>(o.steps) * o.prompts_per_step);
  std::map<std::string, std::unique_ptr<trainer_bridge::TaskSource>> tasks;
  tasks["longtail"] = std::move(*trainer_bridge::TaskSource::Open("builtin:copy?len=8", o.seed));
  RunnerOptions ro;
  ro.model = "bench";
  ro.seed = o.seed;
  ro.experiment = absl::StrCat("bench-eta", eta);
  ro.sandbox_policy = "no-network";
  ro.episodes = rc.max_in_flight;
  ro.routing_width = engine.Config("bench").ok() ? engine.Config("bench")->routing_width() : 0;
  ro.forced_length = [&o](uint64_t s) { return LengthOf(o, s); };
  ro.metrics = metrics;
  RolloutRunner runner(ro, engine, controller, std::move(tasks), sandboxes, nullptr, SystemClock::Get());
  if (absl::Status s = engine.UpdateWeights("bench", weights, 0); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("resetting the weights to version 0: ", s.message()));
  }
  controller.SetPolicyVersion(0);
  Stopwatch total;
  const double busy_before = HostBusySeconds();
  ModeResult r;
  if (absl::Status s = runner.Start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("starting the rollout runner: ", s.message()));
  }
  ProgressBar bar({.label = absl::StrFormat("bench rollout eta=%d", eta), .total = o.steps, .plain_interval_s = 0});
  // The trainer publishes each version and goes on to its next batch; the bridge's switch
  // (stage the file while generating, then interrupt, commit, resume) runs beside it, as a
  // PublishWeights call does beside the batch stream. One switch at a time: publishing the
  // next version first waits for the previous switch. The synchronous mode (eta = 0) still
  // dispatches nothing of step k+1 before version k+1 is committed.
  std::mutex mu;
  std::thread publisher;
  auto publish = [&](int64_t version) {
    auto sw = runner.SwitchWeights(weights, version);
    std::lock_guard<std::mutex> l(mu);
    if (!sw.ok()) {
      std::cerr << "bench rollout: switch to version " << version << " failed: " << sw.status() << "\n";
      return;
    }
    r.stall_ms_mean += sw->stall_ms / o.steps;
    r.stall_ms_max = std::max(r.stall_ms_max, sw->stall_ms);
    r.stage_ms_mean += sw->stage_ms / o.steps;
    r.prefill_on_resume += sw->prefilled_on_resume;
  };
  Stopwatch step_clock;
  for (uint32_t step = 0; step < o.steps; ++step) {
    auto groups = runner.TakeGroups(o.prompts_per_step, nullptr);
    for (const auto& g : groups) {
      for (const trainer_bridge::RolloutSample& s : g) r.consumed_tokens += s.GeneratedTokens();
    }
    Stopwatch busy;
    std::this_thread::sleep_for(std::chrono::duration<double>(train_s));
    r.trainer_busy_s += busy.ElapsedMillis() / 1000.0;
    if (publisher.joinable()) publisher.join();
    publisher = std::thread(publish, static_cast<int64_t>(step) + 1);
    r.step_s.push_back(step_clock.ElapsedMillis() / 1000.0);
    step_clock.Reset();
    bar.Update(step + 1);
  }
  if (publisher.joinable()) publisher.join();
  bar.Finish();
  r.seconds = total.ElapsedMillis() / 1000.0;
  r.host_busy_cores = (HostBusySeconds() - busy_before) / std::max(1e-9, r.seconds);
  runner.Stop();
  const trainer_bridge::RunnerStats st = runner.Stats();
  r.tokens = st.tokens_generated;
  r.samples = st.samples_completed;
  r.sandboxes = st.sandboxes;
  r.sandbox_ms = st.sandbox_ms;
  r.sandbox_create_ms = st.sandbox_create_ms;
  r.sandbox_release_ms = st.sandbox_release_ms;
  r.episode_ms = st.sandboxed_episode_ms;
  r.failed = st.failed_samples;
  r.cancelled = st.cancelled_samples;
  return r;
}

inference::ModelConfig GpuBenchModel() {
  inference::ModelConfig c;
  c.n_layers = 4;
  c.d_model = 2048;
  c.n_heads = 16;
  c.n_kv_heads = 4;
  c.head_dim = 128;
  c.n_experts = 16;
  c.top_k = 2;
  c.n_shared_experts = 1;
  c.expert_hidden = 1024;
  c.max_context = 4200;
  return c;
}

int RunRolloutBench(const RolloutBenchOptions& o) {
  std::string dir = o.work_dir;
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / absl::StrCat("flotilla-rollout-bench-", getpid())).string();
  std::filesystem::create_directories(dir);
  const bool gpu = o.backend == "cuda";
  const inference::ModelConfig model = gpu ? GpuBenchModel() : BenchModel();
  std::string weights = dir + "/bench.safetensors";
  if (absl::Status s = WriteRandomModel(model, weights, 3, gpu ? 0.02f : 0.05f); !s.ok()) {
    std::cerr << "bench rollout: writing the random model failed: " << s << "\n";
    return 1;
  }
  // The embedded default: the scheduler, its in-process node agent (every sample's sandbox comes
  // from the scheduler's front door) and the engine.
  app::PlatformOptions po;
  po.worker.state_dir = dir + "/state";
  po.worker.serve_model = false;
  // Samples' sandboxes idle while the model writes: the node admits the whole in-flight bound.
  if (absl::Status s = SizeAdmission(o.prompts_per_step * o.group_size, &po.admission); !s.ok()) {
    std::cerr << "bench rollout: sizing the node's admission: " << s << "\n";
    return 1;
  }
  inference::EngineOptions& eo = po.worker.engine;
  eo.backend = o.backend;
  eo.threads = o.threads;
  eo.max_batch = o.prompts_per_step * o.group_size;
  // Room for every sample of eta + 1 steps at the length cap would be far more than is ever
  // live; the GPU gets enough for the in-flight bound at 4,200 tokens each.
  eo.kv_memory_bytes = gpu ? 24ull << 30 : 4ull << 30;
  eo.max_step_tokens = 8192;
  // FLOTILLA_BENCH_OVERLAP=0|1 forces EngineOptions::overlap_delivery (comparison runs).
  if (const char* overlap = std::getenv("FLOTILLA_BENCH_OVERLAP")) eo.overlap_delivery = std::atoi(overlap);
  if (o.metrics_overhead && !gpu) eo.kv_memory_bytes = 512ull << 20;  // two engines, one after the other
  auto platform = app::EmbeddedPlatform::Start(po);
  if (!platform.ok()) {
    std::cerr << "bench rollout: platform set-up failed: " << platform.status() << "\n";
    return 1;
  }
  inference::Engine& engine = (*platform)->worker().engine();
  if (absl::Status s = engine.LoadModel("bench", model, weights, 0); !s.ok()) {
    std::cerr << "bench rollout: loading the model failed: " << s << "\n";
    return 1;
  }
  // What a switch pays to read and install new weights, timed alone on the idle engine.
  Stopwatch load;
  if (absl::Status s = engine.UpdateWeights("bench", weights, 0); !s.ok()) {
    std::cerr << "bench rollout: reloading the model failed: " << s << "\n";
    return 1;
  }
  const double load_ms = load.ElapsedMillis();
  // Calibration: one median-length group on the idle engine is the trainer's step time.
  Stopwatch cal;
  std::vector<std::thread> threads;
  std::vector<absl::Status> calibrated(o.group_size);
  for (uint32_t i = 0; i < o.group_size; ++i) {
    threads.emplace_back([&, i] {
      inference::GenerateRequest req;
      req.model = "bench";
      req.prompt = {inference::kBos, inference::kUser, 'h', 'i', inference::kEndTurn, inference::kAssistant};
      req.sampling.max_new_tokens = static_cast<uint32_t>(o.median);
      req.sampling.stop_tokens = {-1};
      req.sampling.seed = i;
      calibrated[i] = engine.GenerateBlocking(req).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : calibrated) {
    if (!s.ok()) {
      std::cerr << "bench rollout: the calibration group failed: " << s << "\n";
      return 1;
    }
  }
  double train_s = cal.ElapsedMillis() / 1000.0;
  std::cerr << absl::StrFormat("bench rollout: trainer step = one median group = %.3fs\n", train_s);

  if (o.metrics_overhead) {
    (*platform)->Stop();  // each measured run gets its own platform
    platform->reset();
    int code = RunMetricsOverhead(o, po, model, weights, train_s);
    std::error_code ec;
    if (o.work_dir.empty()) std::filesystem::remove_all(dir, ec);
    return code;
  }
  absl::StatusOr<StepCost> step_cost = MeasureStepCost(engine, o.prompts_per_step * o.group_size);
  if (!step_cost.ok()) {
    std::cerr << "bench rollout: " << step_cost.status() << "\n";
    return 1;
  }
  MetricsRegistry& registry = (*platform)->metrics();
  const double reused0 = ReusedSandboxes(registry);
  absl::StatusOr<ModeResult> sync_run = RunMode(o, engine, (*platform)->sandboxes(), weights, 0, train_s);
  if (!sync_run.ok()) {
    std::cerr << "bench rollout: the synchronous mode: " << sync_run.status() << "\n";
    return 1;
  }
  ModeResult& sync = *sync_run;
  const double reused1 = ReusedSandboxes(registry);
  const sandbox::RuntimeTimings after_sync = (*platform)->node()->runtime().Timings();
  absl::StatusOr<ModeResult> async_run = RunMode(o, engine, (*platform)->sandboxes(), weights, o.eta, train_s);
  if (!async_run.ok()) {
    std::cerr << "bench rollout: the asynchronous mode: " << async_run.status() << "\n";
    return 1;
  }
  ModeResult& async = *async_run;
  sync.reused = static_cast<uint64_t>(reused1 - reused0);
  async.reused = static_cast<uint64_t>(ReusedSandboxes(registry) - reused1);
  auto idle = [](const ModeResult& m) { return m.seconds > 0 ? 1.0 - m.trainer_busy_s / m.seconds : 0.0; };
  std::cout << absl::StrFormat("rollout.backend=%s\nrollout.model_params=%d\n", o.backend, model.parameter_count());
  std::cout << absl::StrFormat("rollout.steps=%d\nrollout.prompts_per_step=%d\nrollout.group_size=%d\n", o.steps,
                               o.prompts_per_step, o.group_size);
  std::cout << absl::StrFormat("rollout.trainer_step_s=%.3f\n", train_s);
  std::cout << absl::StrFormat("rollout.sync_seconds=%.2f\nrollout.async_seconds=%.2f\n", sync.seconds, async.seconds);
  std::cout << absl::StrFormat("rollout.sync_tokens_per_s=%.0f\nrollout.async_tokens_per_s=%.0f\n",
                               sync.tokens / std::max(sync.seconds, 1e-9), async.tokens / std::max(async.seconds, 1e-9));
  // The same work: the modes take the same number of steps, but not the same tokens. The
  // asynchronous mode hands the trainer the groups that finished first (shorter ones) and ends
  // with a step's worth of samples in flight, partly generated and thrown away, while the
  // synchronous mode trains on every group it dispatched. So the figure is the rate of the work
  // the trainer got: generated tokens of the groups it took, per second of the run.
  const double sync_rate = sync.consumed_tokens / std::max(sync.seconds, 1e-9);
  const double async_rate = async.consumed_tokens / std::max(async.seconds, 1e-9);
  std::cout << absl::StrFormat("rollout.sync_consumed_tokens=%d\nrollout.async_consumed_tokens=%d\n",
                               sync.consumed_tokens, async.consumed_tokens);
  std::cout << absl::StrFormat("rollout.sync_consumed_tokens_per_s=%.0f\nrollout.async_consumed_tokens_per_s=%.0f\n",
                               sync_rate, async_rate);
  std::cout << absl::StrFormat("rollout.async_vs_sync=%.2f\n", async_rate / std::max(sync_rate, 1e-9));
  std::cout << absl::StrFormat("rollout.engine_step_ms_1row=%.3f\nrollout.engine_step_ms_full=%.3f\nrollout.engine_full_rows=%d\n",
                               step_cost->one_row_ms, step_cost->full_ms, step_cost->full_rows);
  std::cout << absl::StrFormat("rollout.async_vs_sync_bound=%.2f\n", AsyncVsSyncBound(o, *step_cost, train_s));
  // The earlier figure: seconds for the same number of steps, whatever their tokens.
  std::cout << absl::StrFormat("rollout.async_vs_sync_seconds=%.2f\n", sync.seconds / std::max(async.seconds, 1e-9));
  // A run's first and last steps hold its ramp (the first batch waits for whole groups) and
  // its drain (the last groups' long samples decode with few others); the median step is the
  // steady state a long run approaches.
  for (const auto& [name, m] : {std::pair<const char*, const ModeResult*>{"sync", &sync}, {"async", &async}}) {
    std::vector<double> steps = m->step_s;
    if (steps.empty()) continue;
    std::cout << absl::StrFormat("rollout.%s.first_step_s=%.2f\nrollout.%s.last_step_s=%.2f\n", name, steps.front(), name,
                                 steps.back());
    std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
    std::cout << absl::StrFormat("rollout.%s.median_step_s=%.2f\n", name, steps[steps.size() / 2]);
  }
  std::cout << absl::StrFormat("rollout.trainer_idle_fraction.sync=%.3f\nrollout.trainer_idle_fraction.async=%.3f\n",
                               idle(sync), idle(async));
  std::cout << absl::StrFormat("rollout.switch_stall_ms=%.2f\nrollout.switch_stall_ms_max=%.2f\n", async.stall_ms_mean,
                               async.stall_ms_max);
  std::cout << absl::StrFormat("rollout.switch_stage_ms=%.2f\n", async.stage_ms_mean);
  std::cout << absl::StrFormat("rollout.weight_load_ms=%.2f\n", load_ms);
  std::cout << absl::StrFormat("rollout.prefill_tokens_on_resume=%d\n", async.prefill_on_resume + sync.prefill_on_resume);
  // Every sample is a worker episode in a sandbox the scheduler placed: what acquiring and
  // releasing it (a create and a destroy, or a reset sandbox of the node's warm pool handed
  // over and given back) costs against the sample's whole wall time, as the sample saw it. The
  // destroy is handed to the runner's releasers (ScaffoldOptions::release): its own time,
  // off the samples' path, is rollout.{sync,async}.sandbox_release_ms.
  const double episode_ms = sync.episode_ms + async.episode_ms;
  std::cout << absl::StrFormat("rollout.samples=%d\nrollout.sandboxes=%d\nrollout.failed_samples=%d\n",
                               sync.samples + async.samples, sync.sandboxes + async.sandboxes, sync.failed + async.failed);
  std::cout << absl::StrFormat("rollout.cancelled_samples=%d\n", sync.cancelled + async.cancelled);
  std::cout << absl::StrFormat("rollout.sandboxes_reused=%d\n", sync.reused + async.reused);
  std::cout << absl::StrFormat("rollout.sandbox_ms_per_sample=%.2f\n",
                               (sync.sandbox_ms + async.sandbox_ms) / std::max<double>(1, sync.sandboxes + async.sandboxes));
  std::cout << absl::StrFormat("rollout.sandbox_overhead_frac=%.4f\n",
                               episode_ms > 0 ? (sync.sandbox_ms + async.sandbox_ms) / episode_ms : 0.0);
  for (const auto& [name, m] : {std::pair<const char*, const ModeResult*>{"sync", &sync}, {"async", &async}}) {
    const double n = std::max<double>(1, m->sandboxes);
    std::cout << absl::StrFormat("rollout.%s.sandbox_create_ms=%.2f\nrollout.%s.sandbox_destroy_ms=%.2f\n", name,
                                 m->sandbox_create_ms / n, name, (m->sandbox_ms - m->sandbox_create_ms) / n);
    std::cout << absl::StrFormat("rollout.%s.sandbox_release_ms=%.2f\n", name, m->sandbox_release_ms / n);
    std::cout << absl::StrFormat("rollout.%s.sandbox_overhead_frac=%.4f\n", name,
                                 m->episode_ms > 0 ? m->sandbox_ms / m->episode_ms : 0.0);
    std::cout << absl::StrFormat("rollout.%s.host_busy_cores=%.2f\n", name, m->host_busy_cores);
  }
  // A sample's create and destroy as the scheduler's front door and the node agent saw them
  // (both modes): what the sample's figure adds on top of them is the gRPC hops.
  std::cout << absl::StrFormat("rollout.scheduler.placement_ms=%.2f\n",
                               MeanMillis(registry, "flotilla_scheduler_placement_latency_seconds"));
  std::cout << absl::StrFormat("rollout.node_agent.create_ms=%.2f\nrollout.node_agent.destroy_ms=%.2f\n",
                               MeanMillis(registry, "flotilla_node_sandbox_create_seconds"),
                               MeanMillis(registry, "flotilla_node_sandbox_destroy_seconds"));
  // Where the node's sandbox time went (both modes): mean milliseconds per run of each phase.
  const sandbox::RuntimeTimings t = (*platform)->node()->runtime().Timings();
  for (const auto& [name, phase] : std::vector<std::pair<const char*, sandbox::PhaseTiming>>{
           {"create_warm", t.create_warm}, {"create_waited", t.create_waited}, {"create_cold", t.create_cold},
           {"destroy", t.destroy}, {"reset_queued", t.reset_queued}, {"reset_exit", t.reset_exit},
           {"reset_start", t.reset_start},
           {"pool_grow", t.pool_grow}, {"start_layer", t.start_layer}, {"start_spawn", t.start_spawn},
           {"start_setup", t.start_setup}}) {
    std::cout << absl::StrFormat("rollout.node.%s_ms=%.2f\nrollout.node.%s_runs=%d\n", name,
                                 phase.ms / std::max<double>(1, phase.count), name, phase.count);
  }
  // Creates that waited for a reset, or started a sandbox of their own, in each mode.
  std::cout << absl::StrFormat("rollout.node.sync.create_waited_runs=%d\nrollout.node.sync.create_cold_runs=%d\n",
                               after_sync.create_waited.count, after_sync.create_cold.count);
  std::cout << absl::StrFormat("rollout.node.sync.reset_queued_ms=%.2f\nrollout.node.sync.reset_exit_ms=%.2f\n"
                               "rollout.node.sync.reset_start_ms=%.2f\n",
                               after_sync.reset_queued.ms / std::max<double>(1, after_sync.reset_queued.count),
                               after_sync.reset_exit.ms / std::max<double>(1, after_sync.reset_exit.count),
                               after_sync.reset_start.ms / std::max<double>(1, after_sync.reset_start.count));
  std::cout << absl::StrFormat("rollout.node.async.create_waited_runs=%d\nrollout.node.async.create_cold_runs=%d\n",
                               t.create_waited.count - after_sync.create_waited.count,
                               t.create_cold.count - after_sync.create_cold.count);
  (*platform)->Stop();
  platform->reset();  // its node's sandboxes (pooled ones too) go before their state dir
  std::error_code ec;
  if (o.work_dir.empty()) std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace flotilla::bench
