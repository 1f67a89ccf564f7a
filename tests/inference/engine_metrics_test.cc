// The engine's Prometheus figures move as it works: tokens, steps, step time, KV pages,
// interrupts, the weight version and the swap stall.
#include <map>
#include <regex>
#include <string>

#include "flotilla/common/metrics.h"
#include "flotilla/inference/engine.h"
#include "gtest/gtest.h"
#include "test_model.h"
#include "testing/temp_dir.h"

namespace flotilla::inference::testing {
namespace {

// The value of one sample line `name{labels} value` in Prometheus text (-1 when absent).
double Sample(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(EngineMetricsTest, FiguresMoveAsTheEngineWorks) {
  flotilla::testing::TempDir dir;
  ModelConfig config = TinyConfig();
  ASSERT_TRUE(WriteRandomModel(dir.file("v1.safetensors"), config, 1, 0.1f).ok());
  ASSERT_TRUE(WriteRandomModel(dir.file("v2.safetensors"), config, 2, 0.1f).ok());
  MetricsRegistry registry;
  EngineOptions opts;
  opts.threads = 2;
  opts.kv_memory_bytes = 8 << 20;
  opts.metrics = &registry;
  auto engine = Engine::Create(opts);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->LoadModel("student", config, dir.file("v1.safetensors"), 1).ok());

  std::string before = registry.RenderPrometheus();
  EXPECT_EQ(Sample(before, "flotilla_engine_decode_tokens_total"), 0);
  EXPECT_EQ(Sample(before, "flotilla_engine_kv_pages{state=\"used\"}"), 0);
  EXPECT_GT(Sample(before, "flotilla_engine_kv_pages{state=\"free\"}"), 0);
  EXPECT_EQ(Sample(before, "flotilla_engine_weight_version{model=\"student\"}"), 1);

  GenerateRequest req;
  req.prompt = {1, 2, 3, 4, 5, 6, 7};
  req.sampling.max_new_tokens = 5;
  req.sampling.stop_tokens = {-1};
  req.keep_state = true;
  auto gen = (*engine)->GenerateBlocking(req);
  ASSERT_TRUE(gen.ok()) << gen.status();
  ASSERT_TRUE((*engine)->UpdateWeights("student", dir.file("v2.safetensors"), 2).ok());

  std::string after = registry.RenderPrometheus();
  EXPECT_EQ(Sample(after, "flotilla_engine_decode_tokens_total"), 4);  // the first of 5 comes from prefill
  EXPECT_EQ(Sample(after, "flotilla_engine_prefill_tokens_total"), 7);
  double steps = Sample(after, "flotilla_engine_steps_total");
  EXPECT_GE(steps, 5);
  EXPECT_EQ(Sample(after, "flotilla_engine_step_seconds_count"), steps);
  EXPECT_GT(Sample(after, "flotilla_engine_step_seconds_sum"), 0);
  EXPECT_GT(Sample(after, "flotilla_engine_kv_pages{state=\"used\"}"), 0);  // the kept sequence
  EXPECT_EQ(Sample(after, "flotilla_engine_weight_version{model=\"student\"}"), 2);
  EXPECT_EQ(Sample(after, "flotilla_engine_weight_swap_stall_seconds_count"), 1);
  EXPECT_EQ(Sample(after, "flotilla_engine_batch_size"), 0);
  EXPECT_EQ(Sample(after, "flotilla_engine_interrupts_total"), 0);

  engine->reset();
  // The engine is gone; so are the figures it reported at scrape time.
  std::string gone = registry.RenderPrometheus();
  EXPECT_EQ(gone.find("flotilla_engine_decode_tokens_total"), std::string::npos);
  EXPECT_NE(gone.find("flotilla_engine_step_seconds_count"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::inference::testing
