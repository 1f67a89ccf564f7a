#include "flotilla/inference/hf_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "flotilla/common/status.h"
#include "hf_checkpoint.h"
#include "hf_weights.h"
#include "thread_pool.h"

namespace flotilla::inference {

HfModel::~HfModel() = default;

const HfConfig& HfModel::config() const { return weights_->config; }

absl::StatusOr<std::unique_ptr<HfModel>> HfModel::Load(const std::string& dir) {
  ASSIGN_OR_RETURN(HfConfig config, HfConfig::FromDir(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<HfCheckpoint> ckpt, HfCheckpoint::Open(dir));
  std::unique_ptr<HfModel> m(new HfModel());
  ASSIGN_OR_RETURN(m->weights_, HfWeights::Load(config, *ckpt));
  return m;
}

absl::StatusOr<HfScore> HfModel::Score(const std::vector<int32_t>& ids, const std::vector<int32_t>& replay,
                                       int threads) const {
  const HfConfig& c = weights_->config;
  const int n = static_cast<int>(ids.size());
  if (n == 0) return absl::InvalidArgumentError("no token ids to score");
  if (n > c.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(n, " tokens exceed the model's context of ",
                                                   c.max_position_embeddings, " (max_position_embeddings)"));
  }
  constexpr uint32_t kPageTokens = 16;
  const uint32_t pages = (static_cast<uint32_t>(n) + kPageTokens - 1) / kPageTokens;
  const uint64_t page_bytes =
      uint64_t(c.num_layers) * kPageTokens * c.kv_heads() * (c.k_head_dim() + c.v_dim()) * sizeof(float);
  ThreadPool pool(std::max(1, threads));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> backend,
                   CreateHfCpuBackend(weights_, kPageTokens, page_bytes * pages, &pool));
  StepInput in;
  in.tokens = ids;
  in.positions.resize(n);
  std::iota(in.positions.begin(), in.positions.end(), 0);
  in.row_seq.assign(n, 0);
  in.seq_pages.emplace_back(pages);
  std::iota(in.seq_pages[0].begin(), in.seq_pages[0].end(), 0);
  in.logit_rows.resize(n - 1);
  std::iota(in.logit_rows.begin(), in.logit_rows.end(), 0);
  in.replay_experts = replay;
  StepOutput out;
  RETURN_IF_ERROR(backend->Forward(in, &out));
  HfScore s;
  s.experts = std::move(out.experts);
  const int V = c.vocab_size;
  for (int t = 0; t + 1 < n; ++t) {
    const float* lg = &out.logits[static_cast<size_t>(t) * V];
    const int best = static_cast<int>(std::max_element(lg, lg + V) - lg);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(lg[v]) - lg[best]);
    s.logprob.push_back(static_cast<float>(static_cast<double>(lg[ids[t + 1]]) - lg[best] - std::log(sum)));
    s.top1.push_back(best);
  }
  return s;
}

}  // namespace flotilla::inference
