// The streaming bound, small: merging two ~336 MB synthetic checkpoints (plus the base) by TIES
// must peak at no more than 1.5 GiB scaled by the inputs' size against 2 GiB (about 246 MB),
// the bound the bench (flotilla_merge_bench, bench/RESULTS.md) checks at full size. A merge
// that held a whole model would need over 1 GB here.
#include "flotilla/merge/merge.h"
#include "gtest/gtest.h"
#include "merge_bench.h"
#include "testing/temp_dir.h"

namespace flotilla::merge {
namespace {

TEST(MergeMemoryTest, TiesPeakStaysProportionalToTheBound) {
  flotilla::testing::TempDir dir;
  bench::MergeBenchOptions o;
  o.dir = dir.file("bench");
  o.bytes_each = 300ull << 20;
  o.method = "ties";
  auto r = bench::RunMergeMemoryBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->bytes_each, 300ull << 20);
  EXPECT_GE(r->output_bytes, r->bytes_each);
  const double bound = 1.5 * (1ull << 30) * static_cast<double>(r->bytes_each) / static_cast<double>(2ull << 30);
  EXPECT_LE(static_cast<double>(r->peak_rss_bytes), bound)
      << "peak " << r->peak_rss_bytes / 1048576 << " MiB for inputs of " << r->bytes_each / 1048576 << " MiB";
}

}  // namespace
}  // namespace flotilla::merge
