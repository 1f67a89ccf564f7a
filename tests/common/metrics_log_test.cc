#include "flotilla/common/metrics_log.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "gtest/gtest.h"

namespace flotilla {
namespace {

std::string TempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("metrics_log_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(MetricsLogTest, AppendsOneLinePerStepAndReadsThemBack) {
  std::string path = TempPath("a/b/metrics.jsonl");
  std::filesystem::remove(path);
  auto log = MetricsLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Append({1, 1000, {{"reward_mean", 0.25}, {"staleness_mean", 1.5}}}).ok());
  ASSERT_TRUE((*log)->Append({2, 2000, {{"reward_mean", 0.5}, {"bad", std::nan("")}}}).ok());
  auto lines = ReadMetricsLog(path);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[0].step, 1);
  EXPECT_EQ((*lines)[0].unix_ms, 1000);
  EXPECT_EQ((*lines)[0].values.at("staleness_mean"), 1.5);
  EXPECT_EQ((*lines)[1].values.at("reward_mean"), 0.5);
  EXPECT_EQ((*lines)[1].values.count("bad"), 0u);  // NaN is not JSON: dropped
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, R"({"step":1,"unix_ms":1000,"reward_mean":0.25,"staleness_mean":1.5})");
}

TEST(MetricsLogTest, ReopeningAppendsAndACutLastLineIsSkipped) {
  std::string path = TempPath("cut.jsonl");
  std::filesystem::remove(path);
  {
    auto log = MetricsLog::Open(path);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Append({1, 0, {{"x", 1}}}).ok());
  }
  {
    auto log = MetricsLog::Open(path);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Append({2, 0, {{"x", 2}}}).ok());
  }
  std::ofstream(path, std::ios::app) << R"({"step":3,"x")";  // a crash mid-append
  auto lines = ReadMetricsLog(path);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].step, 2);
}

TEST(MetricsLogTest, MalformedLineIsAnErrorNamingFileAndLine) {
  std::string path = TempPath("bad.jsonl");
  std::ofstream(path) << "{\"step\":1}\n{\"step\":\"two\"}\n";
  auto lines = ReadMetricsLog(path);
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(lines.status().message().find(path + ":2:"), std::string::npos) << lines.status();
}

TEST(MetricsLogTest, MissingFileIsAnEmptyLog) {
  auto lines = ReadMetricsLog(TempPath("never-written.jsonl"));
  ASSERT_TRUE(lines.ok());
  EXPECT_TRUE(lines->empty());
}

}  // namespace
}  // namespace flotilla
