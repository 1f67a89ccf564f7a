// A short `flotilla bench soak`: sandboxes churned and chat sessions served for a few seconds
// leave nothing behind. The bench's own ten-minute figure at 200 sandboxes and 64 sessions is in
// bench/RESULTS.md; this keeps the accounting it rests on (fds, private mounts, cgroups under
// its prefix, BPF links, KV pages) checked in CI.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/daemon_process.h"

namespace flotilla::bench {
namespace {

TEST(SoakTest, ShortChurnLeavesNothingBehind) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  const std::string command = flotilla::testing::FlotillaBinary() + "-full" +
                              " bench soak --seconds 6 --warmup 2 --sandboxes 8 --sessions 4 --max-tokens 4"
                              " --state-dir /var/tmp 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << out;

  std::map<std::string, double> figures;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.first.starts_with("soak.") && absl::SimpleAtod(kv.second, &v)) figures[kv.first] = v;
  }
  ASSERT_EQ(figures.count("soak.leaked_bpf_links"), 1u) << out;
  EXPECT_GT(figures["soak.sandbox_cycles"], 0) << out;
  EXPECT_GT(figures["soak.chat_requests"], 0) << out;
  for (const char* leak : {"soak.leaked_fds", "soak.leaked_mounts", "soak.leaked_cgroups", "soak.leaked_bpf_links",
                           "soak.leaked_kv_pages", "soak.cgroups_after_close"}) {
    EXPECT_EQ(figures[leak], 0) << leak << "\n" << out;
  }
}

}  // namespace
}  // namespace flotilla::bench
