// `flotilla merge CONFIG.yaml --out DIR`: merges checkpoints by a mergekit-like recipe
// (merge/include/flotilla/merge/merge_config.h describes it). Prints a progress line on a
// terminal and ends with
//   merge: method=M tensors=N units=U shards=S bytes=B seconds=T out=DIR
// Exit status 2 for a bad recipe or incompatible parents, 1 for other failures.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "commands.h"
#include "flotilla/common/config.h"
#include "flotilla/merge/merge.h"

namespace flotilla::cli {
namespace {

struct MergeFlags {
  std::string config;
  std::string out;
  std::string max_shard_size = "5G";
  bool overwrite = false;
};

int RunMergeCommand(const MergeFlags& f) {
  auto start = std::chrono::steady_clock::now();
  auto cfg = merge::LoadMergeConfig(f.config);
  if (!cfg.ok()) {
    std::cerr << "merge: " << cfg.status().message() << "\n";
    return 2;
  }
  auto shard = ParseBytes(f.max_shard_size);
  if (!shard.ok() || *shard == 0) {
    std::cerr << "merge: --max-shard-size '" << f.max_shard_size << "': want a size such as 5G or 500M\n";
    return 2;
  }
  merge::MergeOptions opts;
  opts.max_shard_bytes = *shard;
  opts.overwrite = f.overwrite;
  if (isatty(STDERR_FILENO)) {
    opts.progress = [](uint64_t done, uint64_t total) {
      std::fprintf(stderr, "\r\033[Kmerge: %.1f / %.1f MiB (%.0f%%)", done / 1048576.0, total / 1048576.0,
                   total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
    };
  }
  auto r = merge::RunMerge(*cfg, f.out, opts);
  if (opts.progress) std::fprintf(stderr, "\n");
  if (!r.ok()) {
    std::cerr << "merge: " << r.status().message() << "\n";
    const auto code = r.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kFailedPrecondition ? 2 : 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat("merge: method=%s tensors=%d units=%d shards=%d bytes=%d seconds=%.2f out=%s\n",
                               merge::MergeMethodName(cfg->method), r->tensors, r->units, r->shards.size(),
                               r->bytes_written, secs, f.out);
  return 0;
}

}  // namespace

void AddMergeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<MergeFlags>();
  CLI::App* sub = app.add_subcommand("merge", "Merge checkpoints (linear, slerp, task_arithmetic, ties, dare_*, model_stock)");
  sub->add_option("config", flags->config, "merge recipe (YAML)")->required();
  sub->add_option("--out", flags->out, "output model folder")->required();
  sub->add_option("--max-shard-size", flags->max_shard_size, "largest output shard (e.g. 5G, 500M)");
  sub->add_flag("--overwrite", flags->overwrite, "replace a non-empty output folder");
  sub->callback([flags, exit_code] { *exit_code = RunMergeCommand(*flags); });
}

}  // namespace flotilla::cli
