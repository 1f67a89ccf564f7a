// Experiment YAML errors, the trajectory store round trip, task sources and teacher mapping.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "flotilla/trainer_bridge/experiment_config.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/trainer_bridge/teacher_registry.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "flotilla/worker/token_span.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

constexpr char kGood[] = R"(name: exp
policy:
  model: {vocab_size: 272, n_layers: 1}
datasets:
  - {name: add, source: "builtin:arith?ops=+&max=9", weight: 2, max_in_flight: 16}
  - {name: sub, source: "builtin:arith?ops=-", domain: math}
rollout: {group_size: 4, max_in_flight: 32, staleness: 2}
effort: {levels: [10, 90], k0: 0.2}
teachers:
  - {name: t1, domains: [math], model_config: t1.json, weights: t1.safetensors}
trainer: {loss: opd, time_limit: 5m, lr_schedule: linear, teacher_steps: 40}
)";

constexpr char kDatasets[] = "name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\n";

TEST(ExperimentConfigTest, ParsesAndResolvesPaths) {
  auto c = ParseExperimentConfig(kGood, "exp.yaml", "/base");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "exp");
  EXPECT_EQ(c->state_dir, "/base/runs/exp");
  EXPECT_EQ(c->policy.model_json, R"({"vocab_size":272,"n_layers":1})");
  ASSERT_EQ(c->datasets.size(), 2u);
  EXPECT_EQ(c->datasets[0].weight, 2.0);
  EXPECT_EQ(c->datasets[0].max_in_flight, 16u);
  EXPECT_EQ(c->datasets[1].domain, "math");
  EXPECT_EQ(c->rollout.group_size, 4u);
  EXPECT_EQ(c->rollout.staleness, 2u);
  EXPECT_EQ(c->effort.levels, (std::vector<uint32_t>{10, 90}));
  EXPECT_EQ(c->teachers[0].model_config, "/base/t1.json");
  EXPECT_TRUE(c->teachers[0].full_vocab);
  EXPECT_EQ(c->trainer.time_limit_ms, 300000);
  EXPECT_EQ(c->trainer.lr_schedule, "linear");
  EXPECT_EQ(c->trainer.teacher_steps, 40u);
  EXPECT_EQ(c->trainer.ppo_epochs, 1u);
  EXPECT_EQ(c->trainer.minibatches, 1u);
}

TEST(ExperimentConfigTest, UpdatesPerStepErrorsNameFileLineAndField) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  std::vector<Case> cases = {
      {std::string(kDatasets) + "trainer:\n  ppo_epochs: 0\n", "x.yaml:6: trainer.ppo_epochs: must be in 1..64, got 0"},
      {std::string(kDatasets) + "trainer:\n  ppo_epochs: 65\n", "x.yaml:6: trainer.ppo_epochs: must be in 1..64, got 65"},
      {std::string(kDatasets) + "trainer:\n  minibatches: 0\n", "x.yaml:6: trainer.minibatches: must be in 1..65536, got 0"},
      {std::string(kDatasets) + "trainer:\n  minibatches: two\n", "x.yaml:6: trainer.minibatches: expected an integer, got 'two'"},
      {std::string(kDatasets) + "rollout: {group_size: 4, groups_per_step: 2}\ntrainer:\n  minibatches: 9\n",
       "x.yaml:7: trainer.minibatches: must be <= the samples in a batch (rollout.group_size x "
       "rollout.groups_per_step = 8), got 9"},
      {std::string(kDatasets) + "teachers:\n  - {name: t, domains: [a]}\ntrainer:\n  loss: opd\n  ppo_epochs: 2\n",
       "x.yaml:9: trainer.ppo_epochs: loss 'opd' makes one update per step; ppo_epochs and minibatches must be 1"},
      {std::string(kDatasets) + "trainer:\n  kl_coef: -0.1\n", "x.yaml:6: trainer.kl_coef: must be >= 0"},
      {std::string(kDatasets) + "teachers:\n  - {name: t, domains: [a]}\ntrainer:\n  loss: opd\n  kl_coef: 0.1\n",
       "x.yaml:9: trainer.kl_coef: applies to loss 'grpo' only"},
  };
  for (const auto& c : cases) {
    auto r = ParseExperimentConfig(c.yaml, "x.yaml", "");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos) << r.status();
  }
}

TEST(ExperimentConfigTest, ParsesUpdatesPerStep) {
  auto c = ParseExperimentConfig(std::string(kDatasets) +
                                     "rollout: {group_size: 4, groups_per_step: 2}\n"
                                     "trainer: {ppo_epochs: 3, minibatches: 8}\n",
                                 "x.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trainer.ppo_epochs, 3u);
  EXPECT_EQ(c->trainer.minibatches, 8u);
  EXPECT_EQ(c->trainer.kl_coef, 0.0);
}

TEST(ExperimentConfigTest, ParsesKlCoefAndWarmup) {
  auto c = ParseExperimentConfig(std::string(kDatasets) + "trainer: {kl_coef: 0.05, lr_schedule: warmup-linear}\n",
                                 "x.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trainer.kl_coef, 0.05);
  EXPECT_EQ(c->trainer.lr_schedule, "warmup-linear");
}

TEST(ExperimentConfigTest, ParsesScaffoldTemplates) {
  auto c = ParseExperimentConfig(std::string(kDatasets) +
                                     "scaffold: mini\nsystem_template: \"One ```bash block.\"\n"
                                     "instance_template: \"{{task}}\"\n",
                                 "x.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->system_template, "One ```bash block.");
  EXPECT_EQ(c->instance_template, "{{task}}");
  auto plain = ParseExperimentConfig(std::string(kDatasets) + "scaffold: mini\n", "x.yaml", "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->system_template, "");
  EXPECT_EQ(plain->instance_template, "");
}

TEST(ExperimentConfigTest, ErrorsNameFileLineAndField) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  std::vector<Case> cases = {
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s, weight: 0}\n",
       "x.yaml:4: datasets[0].weight: must be > 0"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\nrollout:\n  group_size: 8\n  max_in_flight: 4\n",
       "x.yaml:7: rollout.max_in_flight: must be >= group_size (8)"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets: []\n", "x.yaml:3: datasets: at least one dataset is required"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\neffort: {levels: [0]}\n",
       "x.yaml:5: effort.levels[0]: must be in 1..100, got 0"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\ntrainer: {loss: opd}\n",
       "teachers: trainer.loss 'opd' needs at least one teacher"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\nrolout: {}\n", "x.yaml:5: rolout"},
      {"name: x\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\ntrainer:\n  lr_schedule: cosine\n",
       "x.yaml:6: trainer.lr_schedule: must be 'constant', 'linear' or 'warmup-linear', got 'cosine'"},
      {"name: x\nscaffold: swe\npolicy: {model: {a: 1}}\ndatasets:\n  - {name: a, source: s}\n",
       "x.yaml:2: scaffold: unknown scaffold 'swe' (single-turn, mini, terminal or pi)"},
      {std::string(kDatasets) + "system_template: Be brief.\n",
       "x.yaml:5: system_template: the single-turn scaffold has no text of its own (use system_prompt)"},
      {std::string(kDatasets) + "scaffold: mini\ninstance_template: Solve it.\n",
       "x.yaml:6: instance_template: must contain {{task}}, where the task's instruction goes"},
      {std::string(kDatasets) + "scaffold: mini\nsystem_template: \"\"\n",
       "x.yaml:6: system_template: must not be empty (leave it out for the scaffold's own text)"},
      {std::string(kDatasets) + "scaffold: pi\nsystem_template: Be brief.\n",
       "x.yaml:6: system_template: pi writes its own texts; only mini and terminal take one"},
  };
  for (const auto& c : cases) {
    auto r = ParseExperimentConfig(c.yaml, "x.yaml", "");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos) << r.status();
  }
}

TEST(TaskSourceTest, ArithIsDeterministicAndChecked) {
  auto a = TaskSource::Open("builtin:arith?ops=*&max=5", 3);
  auto b = TaskSource::Open("builtin:arith?ops=*&max=5", 3);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 20; ++i) {
    Task x = (*a)->Next(), y = (*b)->Next();
    EXPECT_EQ(x.prompt, y.prompt);
    int l = x.prompt[0] - '0', r = x.prompt[2] - '0';
    EXPECT_EQ(x.answer, std::to_string(l * r));
  }
  EXPECT_EQ(TaskSource::Open("builtin:arith?ops=/", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskSource::Open("builtin:nope", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskSource::Open("/nonexistent.jsonl", 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(TaskSourceTest, AFolderIsDrawnInPassesEachTaskPreparedOnce) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string folder = std::string(src == nullptr ? "." : src) + "/examples/tasks";
  std::set<std::string> all;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (e.is_directory()) all.insert(e.path().filename().string());
  }
  ASSERT_EQ(all.size(), 18u);
  std::map<std::string, int> prepared;
  auto source = TaskSource::Open(folder, 9, [&](worker::TerminalTask* t) -> absl::Status {
    prepared[t->name] += 1;
    t->image = "sha256:" + t->name;  // what a build sets, seen by every sample of the task
    return absl::OkStatus();
  });
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(prepared.size(), 18u);
  for (const auto& [name, n] : prepared) EXPECT_EQ(n, 1) << name;
  // Two passes: every task once in each, in two different orders.
  std::vector<std::string> first, second;
  for (int i = 0; i < 18; ++i) first.push_back((*source)->Next().terminal.name);
  for (int i = 0; i < 18; ++i) {
    Task t = (*source)->Next();
    EXPECT_EQ(t.terminal.image, "sha256:" + t.terminal.name);
    second.push_back(t.terminal.name);
  }
  EXPECT_EQ(std::set<std::string>(first.begin(), first.end()), all);
  EXPECT_EQ(std::set<std::string>(second.begin(), second.end()), all);
  EXPECT_NE(first, second);
  // A task that cannot be readied fails the source, naming it.
  auto failed = TaskSource::Open(folder + "/hello-file", 9, [](worker::TerminalTask* t) -> absl::Status {
    return absl::FailedPreconditionError("task " + t->name + ": building its environment: no base");
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "task hello-file: building its environment: no base");
}

TEST(ExperimentConfigTest, AnAgentCliScaffoldRunsOnlyOverTaskFolders) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string tasks = std::string(src == nullptr ? "." : src) + "/examples/tasks";
  const std::string head = "name: p\nscaffold: pi\npolicy: {model: {vocab_size: 272}}\n";
  auto ok = ParseExperimentConfig(head + "datasets:\n  - {name: t, source: \"" + tasks + "\"}\n", "e.yaml", "/");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->scaffold, "pi");
  EXPECT_TRUE(IsAgentCliScaffold(ok->scaffold));
  EXPECT_FALSE(IsAgentCliScaffold("mini"));
  auto bad = ParseExperimentConfig(head + "datasets:\n  - {name: a, source: \"builtin:arith\"}\n", "e.yaml", "/");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "e.yaml: datasets[0].source: 'builtin:arith' is not a task folder; scaffold 'pi' runs only over task folders");
}

TEST(TaskSourceTest, ArithSplitsHoldOutAFixedFifth) {
  auto train = TaskSource::Open("builtin:arith?ops=+&max=9&split=train", 5);
  auto held = TaskSource::Open("builtin:arith?ops=+&max=9&split=heldout", 5);
  ASSERT_TRUE(train.ok() && held.ok());
  std::set<std::string> train_seen, held_seen;
  for (int i = 0; i < 2000; ++i) {
    Task t = (*train)->Next(), h = (*held)->Next();
    int ta = t.prompt[0] - '0', tb = t.prompt[2] - '0', ha = h.prompt[0] - '0', hb = h.prompt[2] - '0';
    EXPECT_NE((ta + 2 * tb) % 5, 0) << t.prompt;
    EXPECT_EQ((ha + 2 * hb) % 5, 0) << h.prompt;
    EXPECT_EQ(h.answer, std::to_string(ha + hb));
    train_seen.insert(t.prompt);
    held_seen.insert(h.prompt);
  }
  EXPECT_EQ(train_seen.size(), 80u);  // every question of the split comes up
  EXPECT_EQ(held_seen.size(), 20u);
  EXPECT_EQ(TaskSource::Open("builtin:arith?split=test", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// A worker trajectory as a session records it: the task, a reply of three tokens over three
// policy versions, the scaffold's answer, and a last one-token reply.
v1::Trajectory Record(uint64_t id, uint64_t group, double reward) {
  v1::Trajectory t;
  t.set_id("exp/s" + std::to_string(id));
  t.set_experiment("exp");
  t.set_group_id("g" + std::to_string(group));
  t.set_dataset("add");
  t.set_task("arith:1+2=");
  t.set_effort(40);
  t.set_reward(reward);
  t.set_status(v1::OK);
  (*t.mutable_metrics())["turns"] = 2;
  (*t.mutable_metrics())["tool_calls"] = 1;
  v1::Segment* seg = t.add_segments();
  worker::AppendContextTokens(seg->add_turns()->mutable_tokens(), std::vector<int32_t>{256, 259, 49});
  v1::Turn* reply = seg->add_turns();
  reply->set_role(v1::Turn::ASSISTANT);
  for (int i = 0; i < 3; ++i) {
    worker::AppendGeneratedToken(reply->mutable_tokens(), 51 + i, -0.25f * i, i, std::vector<int32_t>{i, i + 1});
  }
  worker::AppendContextTokens(seg->add_turns()->mutable_tokens(), std::vector<int32_t>{10, 11});
  v1::Turn* last = seg->add_turns();
  last->set_role(v1::Turn::ASSISTANT);
  worker::AppendGeneratedToken(last->mutable_tokens(), 60, -1.0f, 2, std::vector<int32_t>{3, 0});
  return t;
}

TEST(TrajectoryStoreTest, GroupsSurviveReopenAndConsumptionIsDurable) {
  testing::TempDir dir;
  {
    auto store = ExperimentStore::Open(dir.file("t.db"), "exp");
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutGroup({Record(0, 0, 1), Record(1, 0, 0)}).ok());
    ASSERT_TRUE((*store)->PutGroup({Record(2, 1, 1), Record(3, 1, 1)}).ok());
    // An episode still running: saved by its session, no group yet.
    v1::Trajectory running = Record(4, 2, 0);
    running.clear_group_id();
    running.set_status(v1::TRAJECTORY_STATUS_UNSPECIFIED);
    ASSERT_TRUE((*store)->trajectories().Put(running).ok());
    ASSERT_TRUE((*store)->MarkConsumed({0}, 1).ok());
    ASSERT_TRUE((*store)->SaveCounters(5, {{"add", 5}}).ok());
    ASSERT_TRUE((*store)->SavePolicy(4, "/w/4.safetensors").ok());
  }
  auto store = ExperimentStore::Open(dir.file("t.db"), "exp");
  ASSERT_TRUE(store.ok());
  auto groups = (*store)->LoadUnconsumed();
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u);
  const RolloutSample& s = (*groups)[0][0];
  EXPECT_EQ(s.id, 2u);
  EXPECT_EQ(s.group, 1u);
  EXPECT_EQ(s.prompt, (std::vector<int32_t>{256, 259, 49}));
  EXPECT_EQ(s.completion, (std::vector<int32_t>{51, 52, 53, 10, 11, 60}));
  EXPECT_EQ(s.loss_mask, (std::vector<uint8_t>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(s.logprobs, (std::vector<float>{0.0f, -0.25f, -0.5f, 0.0f, 0.0f, -1.0f}));
  EXPECT_EQ(s.versions, (std::vector<int64_t>{0, 1, 2, -1, -1, 2}));
  EXPECT_EQ(s.routing, (std::vector<int32_t>{0, 1, 1, 2, 2, 3, -1, -1, -1, -1, 3, 0}));
  EXPECT_EQ(s.routing_width, 2u);
  EXPECT_EQ(s.turn_starts, (std::vector<uint32_t>{0, 3, 6, 8}));
  EXPECT_EQ(s.segments, 3u);  // versions 0, 1, 2 (the last reply continues version 2)
  EXPECT_EQ(s.GeneratedTokens(), 4u);
  EXPECT_EQ(s.turns, 2u);
  EXPECT_EQ(s.tool_calls, 1u);
  EXPECT_EQ(s.effort, 40u);
  auto st = (*store)->LoadState();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->groups_dispatched, 5u);
  EXPECT_EQ(st->groups_by_dataset.at("add"), 5u);
  EXPECT_EQ(st->policy_version, 4);
  EXPECT_EQ(st->weights_path, "/w/4.safetensors");
  EXPECT_EQ(st->step, 1);
  EXPECT_EQ(*(*store)->CountTrajectories(), 5);
  EXPECT_EQ(*(*store)->Rewards(), (std::vector<double>{1, 0, 1, 1}));  // the running episode is not a sample yet
  auto fig = (*store)->Figures();
  ASSERT_TRUE(fig.ok());
  EXPECT_EQ(fig->samples, 4);
  EXPECT_EQ(fig->turns_mean, 2.0);
  EXPECT_EQ(fig->tool_calls_mean, 1.0);
}

TEST(TrajectoryStoreTest, AnAgentCliSessionIdNamesItsSample) {
  v1::Trajectory t = Record(7, 3, 1);
  t.set_id("pi-rl.s7");  // a safe id: the CLI's API key binds its requests to it
  auto s = ExperimentStore::FromTrajectory(t);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, 7u);
  EXPECT_EQ(s->group, 3u);
}

TEST(TrajectoryStoreTest, ARecordThatIsNoSampleIsDataLoss) {
  v1::Trajectory t = Record(0, 0, 1);
  t.set_id("exp/x0");
  EXPECT_EQ(ExperimentStore::FromTrajectory(t).status().code(), absl::StatusCode::kDataLoss);
  t.set_id("exp.sx");
  EXPECT_EQ(ExperimentStore::FromTrajectory(t).status().code(), absl::StatusCode::kDataLoss);
  t = Record(0, 0, 1);
  t.mutable_segments(0)->mutable_turns(1)->mutable_tokens()->add_experts(7);  // a routing row cut short
  EXPECT_EQ(ExperimentStore::FromTrajectory(t).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TeacherRegistryTest, ResolvesDatasetBeforeDomainAndSwitchesActiveSet) {
  std::vector<TeacherConfig> teachers;
  for (int i = 0; i < 48; ++i) {
    TeacherConfig t;
    t.name = "t" + std::to_string(i);
    t.domains = {"d" + std::to_string(i % 24)};
    teachers.push_back(t);
  }
  teachers[47].domains = {"ds5"};
  std::vector<DatasetConfig> datasets = {{"ds5", "builtin:arith", "d5", 1, 0}, {"ds7", "builtin:arith", "d7", 1, 0}};
  TeacherRegistry reg(teachers, datasets);
  EXPECT_EQ(reg.size(), 48u);
  EXPECT_EQ(reg.Resolve("ds5")->name, "t47");  // a teacher named for the dataset wins
  EXPECT_EQ(reg.Resolve("ds7")->name, "t7");   // first listed for the domain
  ASSERT_TRUE(reg.SetActive({"t31", "t47"}).ok());
  EXPECT_EQ(reg.Resolve("ds7")->name, "t31");  // d7 is also t31's domain
  EXPECT_EQ(reg.Resolve("d3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.SetActive({"t1", "nope"}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.Active(), (std::vector<std::string>{"t31", "t47"}));  // unchanged by the failure
}

}  // namespace
}  // namespace flotilla::trainer_bridge
