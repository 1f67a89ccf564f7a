// `flotilla model logprobs --model DIR --ids 5,17,42,...`: teacher-forced scoring of a Hugging
// Face checkpoint folder on the CPU (f32). One line per position t in [0, n-1):
//   t=<t> next=<ids[t+1]> logprob=<log p(ids[t+1] | ids[0..t])> top1=<argmax>
// With --routing, each line also gives the experts of position t in every MoE layer
// (experts=a,b|c,d: layers separated by '|', selection order within a layer).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "flotilla/inference/hf_model.h"

namespace flotilla::cli {
namespace {

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--ids: '", std::string(part), "' is not a token id"));
    }
    ids.push_back(id);
  }
  if (ids.size() < 2) return absl::InvalidArgumentError("--ids: needs at least two ids");
  return ids;
}

int RunLogprobs(const std::string& dir, const std::string& ids_text, bool routing, int threads) {
  auto ids = ParseIds(ids_text);
  if (!ids.ok()) {
    std::cerr << "flotilla model logprobs: " << ids.status().message() << "\n";
    return 2;
  }
  auto model = inference::HfModel::Load(dir);
  if (!model.ok()) {
    std::cerr << "flotilla model logprobs: " << model.status().message() << "\n";
    return 1;
  }
  auto score = (*model)->Score(*ids, {}, threads);
  if (!score.ok()) {
    std::cerr << "flotilla model logprobs: " << score.status().message() << "\n";
    return 1;
  }
  const inference::HfConfig& c = (*model)->config();
  const int M = c.num_moe_layers(), K = c.top_k;
  std::string out;
  for (size_t t = 0; t < score->logprob.size(); ++t) {
    absl::StrAppendFormat(&out, "t=%d next=%d logprob=%.6f top1=%d", t, (*ids)[t + 1], score->logprob[t],
                          score->top1[t]);
    if (routing && M > 0) {
      out += " experts=";
      for (int m = 0; m < M; ++m) {
        for (int k = 0; k < K; ++k) {
          absl::StrAppend(&out, k > 0 ? "," : (m > 0 ? "|" : ""), score->experts[(t * M + m) * K + k]);
        }
      }
    }
    out += "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void AddModelLogprobsVerb(CLI::App& model, int* exit_code) {
  CLI::App* cmd = model.add_subcommand("logprobs", "Teacher-forced log-probs of token ids (f32, CPU)");
  struct Args {
    std::string dir;
    std::string ids;
    bool routing = false;
    int threads = 1;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->dir, "Hugging Face checkpoint folder (config.json, model.safetensors[.index.json])")
      ->required();
  cmd->add_option("--ids", a->ids, "comma-separated token ids")->required();
  cmd->add_flag("--routing", a->routing, "also print each position's experts in every MoE layer");
  cmd->add_option("--threads", a->threads, "attention threads")->check(CLI::Range(1, 256));
  cmd->callback([a, exit_code] { *exit_code = RunLogprobs(a->dir, a->ids, a->routing, a->threads); });
}

}  // namespace flotilla::cli
