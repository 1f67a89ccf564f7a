// flotilla_merge_bench [--gb G] [--method M] [--dir D]: peak resident memory of merging two
// synthetic checkpoints of at least G GiB each (bench/RESULTS.md). Prints name=value lines.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "merge_bench.h"

int main(int argc, char** argv) {
  flotilla::bench::MergeBenchOptions o;
  o.dir = (std::filesystem::temp_directory_path() / "flotilla-merge-bench").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--gb")) {
      o.bytes_each = static_cast<uint64_t>(std::atof(argv[i + 1]) * (1ull << 30));
    } else if (!std::strcmp(argv[i], "--method")) {
      o.method = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--dir")) {
      o.dir = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: flotilla_merge_bench [--gb G] [--method M] [--dir D]\n");
      return 2;
    }
  }
  auto r = flotilla::bench::RunMergeMemoryBench(o);
  if (!r.ok()) {
    std::fprintf(stderr, "merge bench: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  std::printf("merge_method=%s\n", o.method.c_str());
  std::printf("merge_checkpoint_bytes_each=%llu\n", static_cast<unsigned long long>(r->bytes_each));
  std::printf("merge_layers=%d\n", r->layers);
  std::printf("merge_largest_tensor_bytes=%llu\n", static_cast<unsigned long long>(r->largest_tensor_bytes));
  std::printf("merge_output_bytes=%llu\n", static_cast<unsigned long long>(r->output_bytes));
  std::printf("merge_peak_rss_mib=%.1f\n", static_cast<double>(r->peak_rss_bytes) / 1048576.0);
  std::printf("merge_seconds=%.2f\n", r->merge_seconds);
  return 0;
}
