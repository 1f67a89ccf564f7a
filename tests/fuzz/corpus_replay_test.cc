// Every fuzz target over every file of its seed corpus (tests/fuzz/corpus/<target>/), which holds
// the inputs that once crashed a target as well: a crash found by fuzzing stays a regression
// test of the normal build. The corpus folders are checked for being there and non-empty, so a
// renamed target cannot silently replay nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace flotilla::fuzz {
namespace {

std::string CorpusDir(const std::string& target) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(src == nullptr ? "." : src) + "/tests/fuzz/corpus/" + target;
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : FuzzTargets()) names.push_back(name);
  return names;
}

class CorpusReplayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusReplayTest, EveryCorpusInputIsHandled) {
  const std::string dir = CorpusDir(GetParam());
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  FuzzFunction fn = FuzzTargets().at(GetParam());
  size_t replayed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(e.path().string());
    fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
  }
  EXPECT_GT(replayed, 0u) << "no seed inputs in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Targets, CorpusReplayTest, ::testing::ValuesIn(TargetNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace flotilla::fuzz
