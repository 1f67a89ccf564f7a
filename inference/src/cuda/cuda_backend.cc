// The CUDA backend: bf16 weights, activations and KV pages; f32 accumulation (cuBLAS with
// 32-bit compute) and an f32 residual stream. Same function as the CPU backend within bf16
// rounding. Dense products through cuBLAS; norms, RoPE, paged attention, the router and the
// expert dispatch through the kernels of ops.cuh.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/ops.cuh"
#include "cuda/hf_upload.h"
#include "cuda/upload.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/hf_config.h"
#include "flotilla/inference/safetensors.h"
#include "hf_checkpoint.h"
#include "parallel_chunks.h"

namespace flotilla::inference {
namespace {

using cuda::DeviceBuffer;

using cuda::DeviceLayer;
using cuda::DeviceWeights;
using cuda::Part;
using cuda::PartOf;
using cuda::UploadBf16;
using cuda::UploadF32;
using cuda::UploadOne;

class CudaBackend final : public ModelBackend {
 public:
  // `hf`: a Hugging Face family's config (cuda::HfCudaSupports says which), of
  // which `c` is the summary; null for Flotilla's format.
  CudaBackend(const ModelConfig& c, uint32_t page_tokens, uint32_t num_pages, const HfConfig* hf = nullptr)
      : c_(c), page_tokens_(page_tokens), num_pages_(num_pages) {
    kvd_ = c.n_kv_heads * c.head_dim;
    page_elems_ = static_cast<size_t>(c.n_layers) * 2 * page_tokens * kvd_;
    sliding_.assign(c.n_layers, false);
    for (int l : c.sliding_layers) sliding_[l] = true;
    moe_layer_.assign(c.n_layers, true);
    if (hf != nullptr) {
      hf_ = std::make_unique<HfConfig>(*hf);
      moe_layer_ = hf->moe_layer;
      qk_norm_ = hf->qk_norm == QkNorm::kPerHead;
      qk_full_ = hf->qk_norm == QkNorm::kFull;
      shared_hidden_ = hf->shared_intermediate_size;
      mla_ = hf->mla;
      grouped_router_ = hf->router == Router::kSigmoidGrouped;
      renormalize_ = hf->norm_topk_prob;
      dense_hidden_ = hf->intermediate_size;
    }
    n_moe_ = static_cast<int>(std::count(moe_layer_.begin(), moe_layer_.end(), true));
    const char* mode = std::getenv("FLOTILLA_CUDA_MOE");
    // The device-planned path (no host round trip per layer) is opt-in: on the H200 it measured
    // slower than cuBLAS's grouped GEMM after one small copy of the routing (bench/RESULTS.md).
    device_moe_ = mode != nullptr && std::string(mode) == "device" &&
                  cuda::MoeGemmSupports(2 * c.expert_hidden, c.d_model) &&
                  cuda::MoeGemmSupports(c.d_model, c.expert_hidden) && c.n_experts <= 256;
    const char* route = std::getenv("FLOTILLA_CUDA_ROUTE");
    fused_route_ = !device_moe_ && !grouped_router_ && cuda::MoeRouteSupports(c.d_model, c.n_experts, c.top_k) &&
                   (route == nullptr || std::string(route) != "separate");
  }
  ~CudaBackend() override {
    for (const auto& [rows, t] : profile_totals_) {
      std::fprintf(stderr,
                   "cuda profile rows=%d forwards=%.0f ms/forward: qkv_rope=%.3f attention=%.3f out_proj=%.3f "
                   "router_shared_plan=%.3f experts=%.3f combine=%.3f\n",
                   rows, t[6], t[0] / t[6], t[1] / t[6], t[2] / t[6], t[3] / t[6], t[4] / t[6], t[5] / t[6]);
    }
    for (cudaEvent_t e : marks_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (routing_ready_ != nullptr) cudaEventDestroy(routing_ready_);
    if (stage_stream_ != nullptr) cudaStreamDestroy(stage_stream_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }

  absl::Status Init() {
    CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stage_stream_, cudaStreamNonBlocking));
    RETURN_IF_ERROR(pages_.Reserve(static_cast<size_t>(num_pages_) * page_elems_ * 2));
    std::vector<double> inv(c_.head_dim / 2);
    for (int i = 0; i < c_.head_dim / 2; ++i) inv[i] = std::pow(static_cast<double>(c_.rope_theta), -2.0 * i / c_.head_dim);
    if (hf_ != nullptr) {
      double factor = 1.0;
      hf_->RopeTables(&inv, &factor);
      rope_scale_ = static_cast<float>(factor);  // yarn's factor on cos/sin (1 for the other types)
      const double scale = hf_->attention_scale() * std::sqrt(static_cast<double>(c_.head_dim));
      mla_shape_ = {hf_->num_heads, hf_->qk_nope_head_dim, hf_->qk_rope_head_dim, hf_->v_head_dim, hf_->rope_interleave,
                    static_cast<float>(scale)};
    }
    rope_half_ = static_cast<int>(inv.size());
    RETURN_IF_ERROR(inv_freq_.Reserve(inv.size() * sizeof(double)));
    CUDA_RETURN_IF_ERROR(cudaMemcpy(inv_freq_.as<void>(), inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }

  const char* name() const override { return "cuda"; }
  const ModelConfig& config() const override { return c_; }
  uint32_t page_tokens() const override { return page_tokens_; }
  uint32_t num_pages() const override { return num_pages_; }
  size_t page_bytes() const override { return page_elems_ * 2; }

  absl::Status SetWeights(std::shared_ptr<const ModelWeights> w) override;
  absl::Status StageWeights(std::shared_ptr<const ModelWeights> w) override;
  absl::StatusOr<std::shared_ptr<const void>> CommitWeights() override;
  bool StagesFromFile() const override { return true; }
  absl::Status StageWeightsFromFile(const SafetensorsFile& file) override;
  absl::Status SetRandomWeights(uint64_t seed, float stddev) override;
  // Uploads a Hugging Face folder's tensors (a backend made with `hf` only).
  absl::Status LoadHf(const HfCheckpoint& ckpt);
  absl::Status Forward(const StepInput& in, StepOutput* out) override;
  bool SamplesOnDevice() const override { return device_sampling_ && cuda::SampleRowsSupports(c_.vocab_size); }

  absl::Status ReadPage(int32_t page, uint8_t* dst) override {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, pages_.as<uint8_t>() + static_cast<size_t>(page) * page_bytes(), page_bytes(), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }
  absl::Status WritePage(int32_t page, const uint8_t* src) override {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(pages_.as<uint8_t>() + static_cast<size_t>(page) * page_bytes(), src, page_bytes(), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }

 private:
  // C[M, N] (f32 or bf16) = A[M, K] (bf16) * W[N, K]^T (bf16) (+ C when beta = 1).
  absl::Status Gemm(const void* a, const void* w, void* c, cudaDataType ctype, int m, int n, int k, float beta) {
    if (m == 0) return absl::OkStatus();
    const float alpha = 1.0f;
    CUBLAS_RETURN_IF_ERROR(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k,
                                        a, CUDA_R_16BF, k, &beta, c, ctype, n, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T*> Ws(DeviceBuffer& b, size_t count) {
    RETURN_IF_ERROR(b.Reserve(std::max<size_t>(count, 1) * sizeof(T)));
    return b.as<T>();
  }
  // The MoE block of `layer` on xn_ (already normed unless fused_route_) into x_; leaves xn_ =
  // x_ normed by next_norm (the next layer's attention norm; null after the last layer).
  // `slot`: the layer's place among the MoE layers (its routing's rows in experts_).
  absl::Status Moe(const DeviceLayer& L, int layer, int slot, int T, const float* next_norm);
  // A dense layer's MLP (s13, s2 of hidden dense_hidden_) on the FFN-normed xn_, added to x_;
  // then xn_ = x_ normed by next_norm (when not null).
  absl::Status DenseMlp(const DeviceLayer& L, int T, const float* next_norm);

  // The routing and dispatch of the separate kernels (the fallback of fused_route_), with each
  // expert's row count copied back through chosen_host_.
  absl::Status RouteUnfused(const DeviceLayer& L, int T, int slot, int32_t* ex, float* wt,
                            const cuda::MoeGroupOperands& ops, int32_t* plan, void** ptrs, uint16_t* gu, uint16_t* h,
                            std::vector<int32_t>* counts);
  // Whether this step's MoE layers take the fused routing (not while replaying).
  bool FusedRoute() const { return fused_route_ && replay_dev_ == nullptr; }
  // Waits until the dispatch kernel has written `ticket` after the counts into counts_host_.
  absl::Status WaitForCounts(int32_t ticket, std::vector<int32_t>* counts);
  // The same MoE with the dispatch planned on the device: no host round trip in the layer.
  absl::Status MoeOnDevice(const DeviceLayer& L, int T, const int32_t* ex, const float* wt, const float* next_norm);
  absl::Status AllocateWeights(DeviceWeights* w);
  // Converts and uploads the tensors named in `src` into `dw` on stage_stream_.
  absl::Status UploadWeights(const std::map<std::string, Part>& src, DeviceWeights* dw);
  absl::Status StageFrom(const std::map<std::string, Part>& src);
  // x += the shared experts applied to xn_ (gu and h: workspaces of at least T rows).
  absl::Status SharedExperts(const DeviceLayer& L, int T, uint16_t* gu, uint16_t* h);
  // A Hugging Face family's shared expert (qwen2_moe: hidden shared_hidden_, behind the sigmoid
  // gate of L.shared_gate when it has one) on xn_, added to x_; own workspaces.
  absl::Status HfSharedExpert(const DeviceLayer& L, int T);
  // The router's choice from its logits rl (T x E): softmax top-k, or DeepSeek-V3's grouped
  // sigmoid routing with L's score bias; or, replaying, the MoE layer `slot`'s experts of the
  // step's replay_dev_ with the router's weights for them.
  cudaError_t Choose(const DeviceLayer& L, const float* rl, int T, int slot, int32_t* ex, float* wt) const;
  // DeepSeek-V3's latent attention up to the attention kernel: from xn_ the heads' queries into
  // q, and their keys and values into the pages of `layer`.
  absl::Status LatentAttentionInputs(const DeviceLayer& L, int layer, int T, const int32_t* positions,
                                     const int32_t* row_seq, const float* rot, const cuda::KvGeometry& kv, uint16_t* q);

  ModelConfig c_;
  uint32_t page_tokens_, num_pages_;
  int kvd_ = 0;
  size_t page_elems_ = 0;
  std::vector<bool> sliding_;
  // The Hugging Face semantics (Flotilla's format: every layer MoE, no q/k norm, renormalised
  // top-k weights).
  std::unique_ptr<HfConfig> hf_;
  std::vector<bool> moe_layer_;
  int n_moe_ = 0;
  bool qk_norm_ = false;
  bool qk_full_ = false;  // OLMoE: one q/k norm over the whole projection
  int shared_hidden_ = 0;  // a Hugging Face family's shared expert's hidden size (0: none)
  bool mla_ = false;       // DeepSeek-V3's latent attention
  bool grouped_router_ = false;
  // The step's replayed experts on the device (rows x MoE layers x top_k, StepInput's layout),
  // null when the router chooses.
  const int32_t* replay_dev_ = nullptr;
  DeviceBuffer replay_buf_;
  cuda::MlaShape mla_shape_{};
  int rope_half_ = 0;      // rotations per position (head_dim / 2; the latent attention: rope / 2)
  float rope_scale_ = 1.0f;
  bool renormalize_ = true;
  int dense_hidden_ = 0;
  absl::Status RefuseHf(const char* what) const {
    return absl::UnimplementedError(absl::StrCat("cuda backend of a Hugging Face checkpoint (", hf_->model_type, "): ",
                                                 what, " takes Flotilla-format weights; load the folder again"));
  }
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<DeviceWeights> w_;
  // The second set StageWeights fills while steps run on w_; with upload_staging_ and
  // stage_stream_, touched only by StageWeights, CommitWeights and SetWeights.
  std::unique_ptr<DeviceWeights> staged_;
  cudaStream_t stage_stream_ = nullptr;
  DeviceBuffer pages_, inv_freq_;
  // Per-step workspaces.
  DeviceBuffer step_dev_;
  cuda::PinnedBuffer step_host_;
  DeviceBuffer x_, xn_, qkv_, q_, o_, rlogits_, experts_, weights_, xe_, gu_, h_, y_, plan_dev_;
  DeviceBuffer shared_gu_, shared_h_, shared_gate_;
  DeviceBuffer latent_f32_, latent_bf16_, k_rope_, kv_b_out_;
  cuda::PinnedBuffer chosen_host_;
  // The fused routing (cuda::LaunchMoeRoute) where the shapes allow it: each expert's row count
  // reaches the host through mapped memory, followed by a ticket the host spins on.
  bool fused_route_ = false;
  DeviceBuffer block_counts_, rot_;
  cuda::PinnedBuffer counts_host_{cudaHostAllocMapped};
  int32_t route_ticket_ = 0;
  cuda::PinnedBuffer routing_host_;  // the step's routing of every layer, copied once
  cuda::PinnedBuffer upload_staging_;  // weight conversion, reused by every upload
  cudaEvent_t routing_ready_ = nullptr;  // the router's choices have reached the host
  bool grouped_ok_ = true;
  bool device_moe_ = false;
  // FLOTILLA_CUDA_PROFILE: events at phase boundaries of each layer (q/k/v product, norms and
  // RoPE; the attention kernel; output product and norm; router, shared experts and the host's
  // dispatch plan; routed experts; combine), summed per batch size and printed when the
  // backend is destroyed.
  static constexpr int kMarks = 7;
  void Mark(int layer, int phase) {
    if (!profile_) return;
    auto& ev = marks_[static_cast<size_t>(layer) * kMarks + phase];
    if (ev == nullptr) cudaEventCreate(&ev);
    cudaEventRecord(ev, nullptr);
  }
  void CollectProfile(int rows) {
    if (!profile_) return;
    auto& t = profile_totals_[rows];
    for (int l = 0; l < c_.n_layers; ++l) {
      for (int p = 0; p + 1 < kMarks; ++p) {
        float ms = 0;
        cudaEventElapsedTime(&ms, marks_[l * kMarks + p], marks_[l * kMarks + p + 1]);
        t[p] += ms;
      }
    }
    t[kMarks - 1] += 1;
  }
  bool profile_ = std::getenv("FLOTILLA_CUDA_PROFILE") != nullptr;
  std::vector<cudaEvent_t> marks_ = std::vector<cudaEvent_t>(static_cast<size_t>(c_.n_layers) * kMarks, nullptr);
  std::map<int, std::array<double, kMarks>> profile_totals_;
  DeviceBuffer hn_rows_, logits_, sampled_dev_;
  cuda::PinnedBuffer sampled_host_;
  // FLOTILLA_CUDA_SAMPLE=host keeps sampling on the host (for comparison runs).
  bool device_sampling_ = [] {
    const char* m = std::getenv("FLOTILLA_CUDA_SAMPLE");
    return m == nullptr || std::string(m) != "host";
  }();
};

absl::Status CudaBackend::UploadWeights(const std::map<std::string, Part>& src, DeviceWeights* dw) {
  const size_t D = c_.d_model, F = c_.expert_hidden;
  cuda::PinnedBuffer* st = &upload_staging_;
  cudaStream_t s = stage_stream_;
  auto at = [&](const std::string& name) -> const Part& { return src.at(name); };
  RETURN_IF_ERROR(UploadOne(&dw->embed, at("embed.weight"), st, s));
  dw->tied = c_.tie_embeddings;
  if (!dw->tied) RETURN_IF_ERROR(UploadOne(&dw->head, at("lm_head.weight"), st, s));
  RETURN_IF_ERROR(UploadF32(&dw->norm, at("norm.weight"), s));
  dw->layers.resize(c_.n_layers);
  for (int l = 0; l < c_.n_layers; ++l) {
    const std::string p = absl::StrCat("layers.", l, ".");
    DeviceLayer& d = dw->layers[l];
    RETURN_IF_ERROR(UploadF32(&d.attn_norm, at(p + "attn_norm.weight"), s));
    RETURN_IF_ERROR(UploadF32(&d.ffn_norm, at(p + "ffn_norm.weight"), s));
    const Part& q = at(p + "attn.wq");
    const Part& k = at(p + "attn.wk");
    const Part& v = at(p + "attn.wv");
    RETURN_IF_ERROR(UploadBf16(&d.wqkv, {q, k, v}, {q.size, k.size, v.size}, st, s));
    RETURN_IF_ERROR(UploadOne(&d.wo, at(p + "attn.wo"), st, s));
    RETURN_IF_ERROR(UploadOne(&d.router, at(p + "moe.router"), st, s));
    RETURN_IF_ERROR(UploadBf16(&d.w13, {at(p + "moe.experts.w1"), at(p + "moe.experts.w3")}, {F * D, F * D}, st, s));
    RETURN_IF_ERROR(UploadOne(&d.w2, at(p + "moe.experts.w2"), st, s));
    if (c_.n_shared_experts > 0) {
      RETURN_IF_ERROR(UploadBf16(&d.s13, {at(p + "moe.shared.w1"), at(p + "moe.shared.w3")}, {F * D, F * D}, st, s));
      RETURN_IF_ERROR(UploadOne(&d.s2, at(p + "moe.shared.w2"), st, s));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::StageFrom(const std::map<std::string, Part>& src) {
  staged_.reset();  // an earlier staged set goes first: at most two sets on the device
  auto dw = std::make_unique<DeviceWeights>();
  RETURN_IF_ERROR(UploadWeights(src, dw.get()));
  staged_ = std::move(dw);
  return absl::OkStatus();
}

absl::Status CudaBackend::StageWeights(std::shared_ptr<const ModelWeights> w) {
  if (hf_ != nullptr) return RefuseHf("StageWeights");
  std::map<std::string, Part> src;
  // TensorSlots names every vector; it needs a mutable object but changes nothing here.
  for (const TensorSlot& slot : TensorSlots(const_cast<ModelWeights&>(*w))) src[slot.name] = PartOf(*slot.dst);
  return StageFrom(src);
}

absl::Status CudaBackend::StageWeightsFromFile(const SafetensorsFile& file) {
  if (hf_ != nullptr) return RefuseHf("StageWeightsFromFile");
  std::map<std::string, Part> src;
  for (const auto& [name, t] : file.tensors()) src[name] = {t.data, t.dtype, static_cast<size_t>(t.numel())};
  return StageFrom(src);
}

absl::StatusOr<std::shared_ptr<const void>> CudaBackend::CommitWeights() {
  if (staged_ == nullptr) return absl::FailedPreconditionError("no weights staged");
  // Steps run on the default stream, which waits for nothing on stage_stream_: every staged
  // copy was synchronised before StageWeights returned.
  std::unique_ptr<DeviceWeights> old = std::exchange(w_, std::move(staged_));
  return std::shared_ptr<const void>(std::move(old));
}

absl::Status CudaBackend::SetWeights(std::shared_ptr<const ModelWeights> w) {
  RETURN_IF_ERROR(StageWeights(std::move(w)));
  return CommitWeights().status();
}

absl::Status CudaBackend::LoadHf(const HfCheckpoint& ckpt) {
  auto dw = std::make_unique<DeviceWeights>();
  RETURN_IF_ERROR(cuda::UploadHfWeights(*hf_, ckpt, dw.get(), &upload_staging_, stage_stream_));
  w_ = std::move(dw);
  return absl::OkStatus();
}

absl::Status CudaBackend::AllocateWeights(DeviceWeights* dw) {
  const size_t D = c_.d_model, F = c_.expert_hidden, V = c_.vocab_size, E = c_.n_experts;
  const size_t S = c_.n_shared_experts, hd = c_.head_dim, H = c_.n_heads, KVH = c_.n_kv_heads;
  RETURN_IF_ERROR(dw->embed.Reserve(V * D * 2));
  dw->tied = c_.tie_embeddings;
  if (!dw->tied) RETURN_IF_ERROR(dw->head.Reserve(V * D * 2));
  RETURN_IF_ERROR(dw->norm.Reserve(D * 4));
  const size_t I = dense_hidden_;
  dw->layers.resize(c_.n_layers);
  for (int l = 0; l < c_.n_layers; ++l) {
    DeviceLayer& d = dw->layers[l];
    RETURN_IF_ERROR(d.attn_norm.Reserve(D * 4));
    RETURN_IF_ERROR(d.ffn_norm.Reserve(D * 4));
    if (qk_norm_ || qk_full_) {
      RETURN_IF_ERROR(d.q_norm.Reserve((qk_full_ ? H : 1) * hd * 4));
      RETURN_IF_ERROR(d.k_norm.Reserve((qk_full_ ? KVH : 1) * hd * 4));
    }
    RETURN_IF_ERROR(d.wqkv.Reserve((H + 2 * KVH) * hd * D * 2));
    RETURN_IF_ERROR(d.wo.Reserve(D * H * hd * 2));
    if (!moe_layer_[l]) {
      RETURN_IF_ERROR(d.s13.Reserve(2 * I * D * 2));
      RETURN_IF_ERROR(d.s2.Reserve(D * I * 2));
      continue;
    }
    RETURN_IF_ERROR(d.router.Reserve(E * D * 2));
    RETURN_IF_ERROR(d.w13.Reserve(E * 2 * F * D * 2));
    RETURN_IF_ERROR(d.w2.Reserve(E * D * F * 2));
    if (S > 0) {
      RETURN_IF_ERROR(d.s13.Reserve(S * 2 * F * D * 2));
      RETURN_IF_ERROR(d.s2.Reserve(S * D * F * 2));
    }
    if (shared_hidden_ > 0) {
      const size_t Is = shared_hidden_;
      RETURN_IF_ERROR(d.s13.Reserve(2 * Is * D * 2));
      RETURN_IF_ERROR(d.s2.Reserve(D * Is * 2));
      if (hf_->shared_expert_gate) RETURN_IF_ERROR(d.shared_gate.Reserve(D * 2));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::SetRandomWeights(uint64_t seed, float stddev) {
  if (mla_ || grouped_router_ || (hf_ != nullptr && hf_->qkv_bias)) {
    return absl::UnimplementedError(absl::StrCat("cuda backend: random weights of model_type '", hf_->model_type,
                                                 "' are not supported (load a checkpoint folder)"));
  }
  auto dw = std::make_unique<DeviceWeights>();
  RETURN_IF_ERROR(AllocateWeights(dw.get()));
  uint64_t s = seed * 1000;
  auto bf = [&](DeviceBuffer& b) { return cuda::LaunchRandomBf16(b.as<uint16_t>(), static_cast<int64_t>(b.bytes() / 2), ++s, 0.0f, stddev, nullptr); };
  auto f32 = [&](DeviceBuffer& b) { return cuda::LaunchRandomF32(b.as<float>(), static_cast<int64_t>(b.bytes() / 4), ++s, 1.0f, 0.1f, nullptr); };
  CUDA_RETURN_IF_ERROR(bf(dw->embed));
  if (!dw->tied) CUDA_RETURN_IF_ERROR(bf(dw->head));
  CUDA_RETURN_IF_ERROR(f32(dw->norm));
  for (DeviceLayer& d : dw->layers) {
    for (DeviceBuffer* b : {&d.wqkv, &d.wo, &d.router, &d.w13, &d.w2, &d.s13, &d.s2, &d.shared_gate}) {
      if (b->bytes() > 0) CUDA_RETURN_IF_ERROR(bf(*b));
    }
    CUDA_RETURN_IF_ERROR(f32(d.attn_norm));
    CUDA_RETURN_IF_ERROR(f32(d.ffn_norm));
    if (qk_norm_ || qk_full_) {
      CUDA_RETURN_IF_ERROR(f32(d.q_norm));
      CUDA_RETURN_IF_ERROR(f32(d.k_norm));
    }
  }
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  w_ = std::move(dw);
  return absl::OkStatus();
}

absl::Status CudaBackend::Moe(const DeviceLayer& L, int layer, int slot, int T, const float* next_norm) {
  const int D = c_.d_model, E = c_.n_experts, F = c_.expert_hidden, K = c_.top_k;
  const size_t N = static_cast<size_t>(T) * K;
  int32_t* ex = experts_.as<int32_t>() + static_cast<size_t>(slot) * N;
  ASSIGN_OR_RETURN(float* wt, Ws<float>(weights_, static_cast<size_t>(T) * K));
  if (device_moe_) {
    ASSIGN_OR_RETURN(float* rl, Ws<float>(rlogits_, static_cast<size_t>(T) * E));
    RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.router.as<void>(), rl, CUDA_R_32F, T, E, D, 0.0f));
    CUDA_RETURN_IF_ERROR(Choose(L, rl, T, slot, ex, wt));
    return MoeOnDevice(L, T, ex, wt, next_norm);
  }
  ASSIGN_OR_RETURN(uint16_t* xe, Ws<uint16_t>(xe_, N * D));
  ASSIGN_OR_RETURN(uint16_t* gu, Ws<uint16_t>(gu_, std::max<size_t>(N, T) * 2 * F));
  ASSIGN_OR_RETURN(uint16_t* h, Ws<uint16_t>(h_, std::max<size_t>(N, T) * F));
  ASSIGN_OR_RETURN(uint16_t* y, Ws<uint16_t>(y_, N * D));
  // Device plan layout: 6 pointer arrays of E entries, then offsets[E + 1], src[N], inv[N].
  const size_t ptr_words = 6 * static_cast<size_t>(E) * sizeof(void*) / 4;
  ASSIGN_OR_RETURN(int32_t* plan, Ws<int32_t>(plan_dev_, ptr_words + (E + 1) + 2 * N));
  void** ptrs_dev = reinterpret_cast<void**>(plan);
  int32_t* inv_dev = plan + ptr_words + E + 1 + N;
  const size_t w13_stride = static_cast<size_t>(2) * F * D, w2_stride = static_cast<size_t>(D) * F;
  const cuda::MoeGroupOperands ops{L.w13.as<uint16_t>(), static_cast<int64_t>(w13_stride), L.w2.as<uint16_t>(),
                                   static_cast<int64_t>(w2_stride), xe, gu, h, y, D, F};
  // cuBLAS's grouped product takes each expert's row count from the host: the one wait of the
  // layer. Everything else of the dispatch (the plan, the gather, the products' pointer arrays)
  // is made on the device, and the shared experts are queued behind it, so the device has
  // that work while the host waits for the counts and launches.
  std::vector<int32_t> counts;
  if (FusedRoute()) {
    RETURN_IF_ERROR(counts_host_.Reserve((E + 1) * sizeof(int32_t)));
    ASSIGN_OR_RETURN(int32_t* block_counts, Ws<int32_t>(block_counts_, static_cast<size_t>(cuda::MoeRouteBlocks(T) + 1) * E));
    const int32_t ticket = ++route_ticket_;
    const cuda::MoeRouteArgs args{x_.as<float>(), L.ffn_norm.as<float>(), L.router.as<uint16_t>(), T, D, E, K,
                                  c_.norm_eps, xn_.as<uint16_t>(), ex, wt, block_counts, ops,
                                  plan + ptr_words, plan + ptr_words + E + 1, inv_dev, ptrs_dev,
                                  counts_host_.device_as<int32_t>(), ticket, nullptr, renormalize_};
    CUDA_RETURN_IF_ERROR(cuda::LaunchMoeRoute(args));
    RETURN_IF_ERROR(SharedExperts(L, T, gu, h));
    RETURN_IF_ERROR(WaitForCounts(ticket, &counts));
  } else {
    RETURN_IF_ERROR(RouteUnfused(L, T, slot, ex, wt, ops, plan + ptr_words, ptrs_dev, gu, h, &counts));
  }
  std::vector<int32_t> offsets(E + 1, 0);
  std::vector<int> active;
  for (int e = 0; e < E; ++e) {
    offsets[e + 1] = offsets[e] + counts[e];
    if (counts[e] > 0) active.push_back(e);
  }
  const int G = static_cast<int>(active.size());
  Mark(layer, 4);
  bool done = false;
  if (grouped_ok_ && G > 0) {
    std::vector<cublasOperation_t> ta(G, CUBLAS_OP_T), tb(G, CUBLAS_OP_N);
    std::vector<int> m13(G, 2 * F), m2(G, D), n(G), k13(G, D), k2(G, F), ld13(G, D), ld2(G, F);
    std::vector<int> ldc13(G, 2 * F), ldc2(G, D), size(G, 1);
    std::vector<float> alpha(G, 1.0f), beta(G, 0.0f);
    for (int g = 0; g < G; ++g) n[g] = counts[active[g]];
    cublasStatus_t s1 = cublasGemmGroupedBatchedEx(
        cublas_, ta.data(), tb.data(), m13.data(), n.data(), k13.data(), alpha.data(),
        const_cast<const void* const*>(ptrs_dev + 0 * E), CUDA_R_16BF, ld13.data(),
        const_cast<const void* const*>(ptrs_dev + 1 * E), CUDA_R_16BF, ld13.data(), beta.data(),
        ptrs_dev + 2 * E, CUDA_R_16BF, ldc13.data(), G, size.data(), CUBLAS_COMPUTE_32F);
    if (s1 == CUBLAS_STATUS_SUCCESS) {
      CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMul(gu, static_cast<int>(N), F, h, nullptr));
      CUBLAS_RETURN_IF_ERROR(cublasGemmGroupedBatchedEx(
          cublas_, ta.data(), tb.data(), m2.data(), n.data(), k2.data(), alpha.data(),
          const_cast<const void* const*>(ptrs_dev + 3 * E), CUDA_R_16BF, ld2.data(),
          const_cast<const void* const*>(ptrs_dev + 4 * E), CUDA_R_16BF, ld2.data(), beta.data(),
          ptrs_dev + 5 * E, CUDA_R_16BF, ldc2.data(), G, size.data(), CUBLAS_COMPUTE_32F));
      done = true;
    } else {
      grouped_ok_ = false;
      std::fprintf(stderr, "cuda backend: grouped GEMM unavailable (cublas status %d); one GEMM per expert\n",
                   static_cast<int>(s1));
    }
  }
  if (!done) {
    for (int e : active) {
      const int n = counts[e];
      RETURN_IF_ERROR(Gemm(xe + static_cast<size_t>(offsets[e]) * D, L.w13.as<uint16_t>() + e * w13_stride,
                           gu + static_cast<size_t>(offsets[e]) * 2 * F, CUDA_R_16BF, n, 2 * F, D, 0.0f));
    }
    CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMul(gu, static_cast<int>(N), F, h, nullptr));
    for (int e : active) {
      const int n = counts[e];
      RETURN_IF_ERROR(Gemm(h + static_cast<size_t>(offsets[e]) * F, L.w2.as<uint16_t>() + e * w2_stride,
                           y + static_cast<size_t>(offsets[e]) * D, CUDA_R_16BF, n, D, F, 0.0f));
    }
  }
  Mark(layer, 5);
  CUDA_RETURN_IF_ERROR(cuda::LaunchCombine(y, inv_dev, wt, T, K, D, x_.as<float>(), next_norm, c_.norm_eps,
                                           xn_.as<uint16_t>(), nullptr));
  return absl::OkStatus();
}

absl::Status CudaBackend::RouteUnfused(const DeviceLayer& L, int T, int slot, int32_t* ex, float* wt,
                                       const cuda::MoeGroupOperands& ops, int32_t* plan, void** ptrs,
                                       uint16_t* gu, uint16_t* h, std::vector<int32_t>* counts) {
  const int D = c_.d_model, E = c_.n_experts, K = c_.top_k;
  const size_t N = static_cast<size_t>(T) * K;
  ASSIGN_OR_RETURN(float* rl, Ws<float>(rlogits_, static_cast<size_t>(T) * E));
  RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.router.as<void>(), rl, CUDA_R_32F, T, E, D, 0.0f));
  CUDA_RETURN_IF_ERROR(Choose(L, rl, T, slot, ex, wt));
  RETURN_IF_ERROR(chosen_host_.Reserve(N * 4));
  int32_t* chosen = chosen_host_.as<int32_t>();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(chosen, ex, N * 4, cudaMemcpyDeviceToHost, nullptr));
  if (routing_ready_ == nullptr) CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&routing_ready_, cudaEventDisableTiming));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(routing_ready_, nullptr));
  int32_t* offsets = plan;
  int32_t* src = plan + E + 1;
  int32_t* inv = src + N;
  CUDA_RETURN_IF_ERROR(cuda::LaunchMoePlan(ex, T, K, E, offsets, src, inv, &ops, ptrs, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchGatherRows(xn_.as<uint16_t>(), src, static_cast<int>(N), D, ops.xe, nullptr));
  RETURN_IF_ERROR(SharedExperts(L, T, gu, h));
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(routing_ready_));
  counts->assign(E, 0);
  for (size_t i = 0; i < N; ++i) ++(*counts)[chosen[i]];
  return absl::OkStatus();
}

absl::Status CudaBackend::WaitForCounts(int32_t ticket, std::vector<int32_t>* counts) {
  const int E = c_.n_experts;
  const volatile int32_t* mapped = counts_host_.as<int32_t>();
  for (uint32_t spins = 1; mapped[E] != ticket; ++spins) {
    // Now and then, whether the stream failed or drained without writing the ticket.
    if (spins % 4096 == 0) {
      const cudaError_t q = cudaStreamQuery(nullptr);
      if (q == cudaSuccess && mapped[E] != ticket) return absl::InternalError("cuda backend: routing counts never arrived");
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        return absl::InternalError(absl::StrCat("cuda backend: routing failed: ", cudaGetErrorString(q)));
      }
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  counts->resize(E);
  for (int e = 0; e < E; ++e) (*counts)[e] = mapped[e];
  return absl::OkStatus();
}

absl::Status CudaBackend::DenseMlp(const DeviceLayer& L, int T, const float* next_norm) {
  const int D = c_.d_model, I = dense_hidden_;
  ASSIGN_OR_RETURN(uint16_t* gu, Ws<uint16_t>(gu_, static_cast<size_t>(T) * 2 * I));
  ASSIGN_OR_RETURN(uint16_t* h, Ws<uint16_t>(h_, static_cast<size_t>(T) * I));
  RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.s13.as<void>(), gu, CUDA_R_16BF, T, 2 * I, D, 0.0f));
  CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMul(gu, T, I, h, nullptr));
  RETURN_IF_ERROR(Gemm(h, L.s2.as<void>(), x_.as<float>(), CUDA_R_32F, T, D, I, 1.0f));
  if (next_norm != nullptr) {
    CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(x_.as<float>(), next_norm, nullptr, xn_.as<uint16_t>(), T, D, c_.norm_eps, nullptr));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::SharedExperts(const DeviceLayer& L, int T, uint16_t* gu, uint16_t* h) {
  if (shared_hidden_ > 0) return HfSharedExpert(L, T);
  const int D = c_.d_model, F = c_.expert_hidden;
  const size_t w13_stride = static_cast<size_t>(2) * F * D, w2_stride = static_cast<size_t>(D) * F;
  for (int s = 0; s < c_.n_shared_experts; ++s) {
    RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.s13.as<uint16_t>() + s * w13_stride, gu, CUDA_R_16BF, T, 2 * F, D, 0.0f));
    CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMul(gu, T, F, h, nullptr));
    RETURN_IF_ERROR(Gemm(h, L.s2.as<uint16_t>() + s * w2_stride, x_.as<float>(), CUDA_R_32F, T, D, F, 1.0f));
  }
  return absl::OkStatus();
}

cudaError_t CudaBackend::Choose(const DeviceLayer& L, const float* rl, int T, int slot, int32_t* ex, float* wt) const {
  if (replay_dev_ != nullptr) {
    const int K = c_.top_k;
    return cuda::LaunchRouterReplay(rl, replay_dev_ + static_cast<size_t>(slot) * K, n_moe_ * K, T, c_.n_experts, K,
                                    grouped_router_, renormalize_, grouped_router_ ? hf_->routed_scaling_factor : 1.0f,
                                    ex, wt, nullptr);
  }
  if (!grouped_router_) return cuda::LaunchRouterTopK(rl, T, c_.n_experts, c_.top_k, ex, wt, nullptr, renormalize_);
  return cuda::LaunchRouterGrouped(rl, L.score_bias.as<float>(), T, c_.n_experts, c_.top_k, hf_->n_group,
                                   hf_->topk_group, renormalize_, hf_->routed_scaling_factor, ex, wt, nullptr);
}

absl::Status CudaBackend::LatentAttentionInputs(const DeviceLayer& L, int layer, int T, const int32_t* positions,
                                                const int32_t* row_seq, const float* rot, const cuda::KvGeometry& kv,
                                                uint16_t* q) {
  const int D = c_.d_model, H = mla_shape_.heads, kd = c_.head_dim, r = hf_->kv_lora_rank, rq = hf_->q_lora_rank;
  const int rope = mla_shape_.rope, kvb_w = H * (mla_shape_.nope + mla_shape_.v);
  const size_t latent = static_cast<size_t>(T) * std::max(r, rq);
  // Sized once for both latents before any use: the queued products read them in stream order.
  ASSIGN_OR_RETURN(float* lat, Ws<float>(latent_f32_, latent));
  ASSIGN_OR_RETURN(uint16_t* lat_n, Ws<uint16_t>(latent_bf16_, latent));
  ASSIGN_OR_RETURN(uint16_t* k_rope, Ws<uint16_t>(k_rope_, static_cast<size_t>(T) * rope));
  ASSIGN_OR_RETURN(uint16_t* kv_b, Ws<uint16_t>(kv_b_out_, static_cast<size_t>(T) * kvb_w));
  uint16_t* q_raw = qkv_.as<uint16_t>();  // T x H kd of the T x 3 H kd workspace
  if (rq > 0) {
    RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.q_a.as<void>(), lat, CUDA_R_32F, T, rq, D, 0.0f));
    if (L.q_a_bias.bytes() > 0) CUDA_RETURN_IF_ERROR(cuda::LaunchBiasAddF32(lat, L.q_a_bias.as<float>(), T, rq, nullptr));
    CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(lat, L.q_a_norm.as<float>(), nullptr, lat_n, T, rq, c_.norm_eps, nullptr));
    RETURN_IF_ERROR(Gemm(lat_n, L.wqkv.as<void>(), q_raw, CUDA_R_16BF, T, H * kd, rq, 0.0f));
  } else {
    RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.wqkv.as<void>(), q_raw, CUDA_R_16BF, T, H * kd, D, 0.0f));
  }
  RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.kv_a.as<void>(), lat, CUDA_R_32F, T, r, D, 0.0f));
  if (L.kv_a_bias.bytes() > 0) CUDA_RETURN_IF_ERROR(cuda::LaunchBiasAddF32(lat, L.kv_a_bias.as<float>(), T, r, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(lat, L.kv_a_norm.as<float>(), nullptr, lat_n, T, r, c_.norm_eps, nullptr));
  RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.kv_pe.as<void>(), k_rope, CUDA_R_16BF, T, rope, D, 0.0f));
  if (L.kv_pe_bias.bytes() > 0) CUDA_RETURN_IF_ERROR(cuda::LaunchBiasAdd(k_rope, L.kv_pe_bias.as<float>(), T, rope, nullptr));
  RETURN_IF_ERROR(Gemm(lat_n, L.kv_b.as<void>(), kv_b, CUDA_R_16BF, T, kvb_w, r, 0.0f));
  CUDA_RETURN_IF_ERROR(
      cuda::LaunchMlaRopeKvWrite(q_raw, k_rope, kv_b, positions, row_seq, rot, kv, layer, T, mla_shape_, q, nullptr));
  return absl::OkStatus();
}

absl::Status CudaBackend::HfSharedExpert(const DeviceLayer& L, int T) {
  const int D = c_.d_model, I = shared_hidden_;
  ASSIGN_OR_RETURN(uint16_t* gu, Ws<uint16_t>(shared_gu_, static_cast<size_t>(T) * 2 * I));
  ASSIGN_OR_RETURN(uint16_t* h, Ws<uint16_t>(shared_h_, static_cast<size_t>(T) * I));
  float* gate = nullptr;
  if (L.shared_gate.bytes() > 0) {
    ASSIGN_OR_RETURN(gate, Ws<float>(shared_gate_, static_cast<size_t>(T)));
    RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.shared_gate.as<void>(), gate, CUDA_R_32F, T, 1, D, 0.0f));
  }
  RETURN_IF_ERROR(Gemm(xn_.as<void>(), L.s13.as<void>(), gu, CUDA_R_16BF, T, 2 * I, D, 0.0f));
  CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMulGate(gu, T, I, gate, h, nullptr));
  return Gemm(h, L.s2.as<void>(), x_.as<float>(), CUDA_R_32F, T, D, I, 1.0f);
}

absl::Status CudaBackend::MoeOnDevice(const DeviceLayer& L, int T, const int32_t* ex, const float* wt,
                                      const float* next_norm) {
  const int D = c_.d_model, E = c_.n_experts, F = c_.expert_hidden, K = c_.top_k;
  const size_t N = static_cast<size_t>(T) * K;
  constexpr size_t kPad = 64;  // rows the grouped kernel may read past the end
  ASSIGN_OR_RETURN(int32_t* plan, Ws<int32_t>(plan_dev_, (E + 1) + 2 * N));
  int32_t* offsets = plan;
  int32_t* src = plan + E + 1;
  int32_t* inv = src + N;
  ASSIGN_OR_RETURN(uint16_t* xe, Ws<uint16_t>(xe_, (N + kPad) * D));
  ASSIGN_OR_RETURN(uint16_t* gu, Ws<uint16_t>(gu_, std::max<size_t>(N, T) * 2 * F));
  ASSIGN_OR_RETURN(uint16_t* h, Ws<uint16_t>(h_, (std::max<size_t>(N, T) + kPad) * F));
  ASSIGN_OR_RETURN(uint16_t* y, Ws<uint16_t>(y_, N * D));
  CUDA_RETURN_IF_ERROR(cuda::LaunchMoePlan(ex, T, K, E, offsets, src, inv, nullptr, nullptr, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchGatherRows(xn_.as<uint16_t>(), src, static_cast<int>(N), D, xe, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchMoeGemm(xe, L.w13.as<uint16_t>(), offsets, E, 2 * F, D, gu, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchSiluMul(gu, static_cast<int>(N), F, h, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchMoeGemm(h, L.w2.as<uint16_t>(), offsets, E, D, F, y, nullptr));
  RETURN_IF_ERROR(SharedExperts(L, T, gu, h));
  float* x = x_.as<float>();
  CUDA_RETURN_IF_ERROR(cuda::LaunchCombine(y, inv, wt, T, K, D, x, next_norm, c_.norm_eps, xn_.as<uint16_t>(), nullptr));
  return absl::OkStatus();
}

absl::Status CudaBackend::Forward(const StepInput& in, StepOutput* out) {
  if (!w_) return absl::FailedPreconditionError("cuda backend: no weights loaded");
  const int T = static_cast<int>(in.tokens.size());
  const int D = c_.d_model, H = c_.n_heads, hd = c_.head_dim, KVH = c_.n_kv_heads, V = c_.vocab_size;
  for (int32_t t : in.tokens) {
    if (t < 0 || t >= V) return absl::InvalidArgumentError(absl::StrCat("token id ", t, " outside [0, ", V, ")"));
  }
  // Routing replay: the ids checked as the CPU backends check them, then copied to the device
  // (a blocking copy, before any kernel of the step) for Choose to read.
  replay_dev_ = nullptr;
  if (!in.replay_experts.empty()) {
    const size_t want = static_cast<size_t>(T) * n_moe_ * c_.top_k;
    if (in.replay_experts.size() != want) {
      return absl::InvalidArgumentError(absl::StrCat("replay_experts has ", in.replay_experts.size(),
                                                     " ids, rows x MoE layers x top_k is ", want));
    }
    for (int32_t e : in.replay_experts) {
      if (e < 0 || e >= c_.n_experts) {
        return absl::InvalidArgumentError(absl::StrCat("replayed expert ", e, " outside [0, ", c_.n_experts, ")"));
      }
    }
    ASSIGN_OR_RETURN(int32_t* replay, Ws<int32_t>(replay_buf_, want));
    CUDA_RETURN_IF_ERROR(cudaMemcpy(replay, in.replay_experts.data(), want * 4, cudaMemcpyHostToDevice));
    replay_dev_ = replay;
  }
  // The step's index arrays (tokens, positions, row sequences, page tables as one padded
  // matrix, logit rows) staged in pinned memory and sent in one copy.
  int stride = 1;
  for (const auto& p : in.seq_pages) stride = std::max<int>(stride, static_cast<int>(p.size()));
  const size_t table_ints = in.seq_pages.size() * stride, R = in.logit_rows.size();
  const bool sample = !in.sampling.empty();
  if (sample && (in.sampling.size() != R || !SamplesOnDevice())) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: ", in.sampling.size(), " sampling entries for ", R,
                                                   " logit rows (vocab ", V, ")"));
  }
  // The rows' sampling parameters lead the staging (8-byte aligned), the index arrays follow.
  const size_t sample_ints = sample ? R * sizeof(cuda::DeviceRowSampling) / 4 : 0;
  const size_t ints = sample_ints + 3 * static_cast<size_t>(T) + table_ints + R;
  RETURN_IF_ERROR(step_host_.Reserve(std::max<size_t>(ints, 1) * 4));
  auto* params = reinterpret_cast<cuda::DeviceRowSampling*>(step_host_.as<int32_t>());
  uint32_t max_top = 0;
  for (size_t i = 0; i < in.sampling.size(); ++i) {
    const RowSampling& rs = in.sampling[i];
    params[i] = {rs.temperature, rs.top_logprobs, rs.rng_state};
    max_top = std::max(max_top, std::min<uint32_t>(rs.top_logprobs, static_cast<uint32_t>(V)));
  }
  int32_t* staged = step_host_.as<int32_t>() + sample_ints;
  std::copy(in.tokens.begin(), in.tokens.end(), staged);
  std::copy(in.positions.begin(), in.positions.end(), staged + T);
  std::copy(in.row_seq.begin(), in.row_seq.end(), staged + 2 * T);
  int32_t* table = staged + 3 * T;
  std::fill(table, table + table_ints, 0);
  for (size_t s = 0; s < in.seq_pages.size(); ++s) std::copy(in.seq_pages[s].begin(), in.seq_pages[s].end(), table + s * stride);
  std::copy(in.logit_rows.begin(), in.logit_rows.end(), table + table_ints);
  ASSIGN_OR_RETURN(int32_t* staged_dev, Ws<int32_t>(step_dev_, ints));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staged_dev, step_host_.as<int32_t>(), ints * 4, cudaMemcpyHostToDevice, nullptr));
  const auto* params_dev = reinterpret_cast<const cuda::DeviceRowSampling*>(staged_dev);
  const int32_t* step_dev = staged_dev + sample_ints;
  const int32_t* tokens_dev = step_dev;
  const int32_t* positions_dev = step_dev + T;
  const int32_t* row_seq_dev = step_dev + 2 * T;
  const int32_t* table_dev = step_dev + 3 * T;
  const int32_t* logit_rows_dev = table_dev + table_ints;
  const int qkv_w = (H + 2 * KVH) * hd;
  ASSIGN_OR_RETURN(float* x, Ws<float>(x_, static_cast<size_t>(T) * D));
  ASSIGN_OR_RETURN(uint16_t* xn, Ws<uint16_t>(xn_, static_cast<size_t>(T) * D));
  ASSIGN_OR_RETURN(uint16_t* qkv, Ws<uint16_t>(qkv_, static_cast<size_t>(T) * qkv_w));
  ASSIGN_OR_RETURN(uint16_t* q, Ws<uint16_t>(q_, static_cast<size_t>(T) * H * hd));
  ASSIGN_OR_RETURN(uint16_t* o, Ws<uint16_t>(o_, static_cast<size_t>(T) * H * hd));
  cuda::KvGeometry kv{pages_.as<uint16_t>(), table_dev, stride, static_cast<int>(page_tokens_), c_.n_layers, kvd_};
  ASSIGN_OR_RETURN(float* rot, Ws<float>(rot_, static_cast<size_t>(T) * hd));
  CUDA_RETURN_IF_ERROR(cuda::LaunchEmbed(tokens_dev, w_->embed.as<uint16_t>(), x, T, D, nullptr));
  CUDA_RETURN_IF_ERROR(cuda::LaunchRopeTable(positions_dev, inv_freq_.as<double>(), T, rope_half_, rot, nullptr, rope_scale_));
  const size_t routing_ints = static_cast<size_t>(T) * n_moe_ * c_.top_k;
  RETURN_IF_ERROR(experts_.Reserve(std::max<size_t>(routing_ints, 1) * 4));
  // Layer 0's attention norm; every later one comes out of the previous layer's combine.
  if (c_.n_layers > 0) {
    CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(x, w_->layers[0].attn_norm.as<float>(), nullptr, xn, T, D, c_.norm_eps, nullptr));
  }
  // Rows mostly in runs of one sequence (prefill chunks, 4 rows a sequence or more on average):
  // the attention that reads each K/V tile once per run.
  const bool prefill_runs = T >= 4 * static_cast<int>(in.seq_pages.size()) && cuda::GqaPrefillSupports(H, KVH, hd, kvd_);
  int moe_slot = 0;
  for (int l = 0; l < c_.n_layers; ++l) {
    const DeviceLayer& L = w_->layers[l];
    Mark(l, 0);
    if (mla_) {
      RETURN_IF_ERROR(LatentAttentionInputs(L, l, T, positions_dev, row_seq_dev, rot, kv, q));
    } else {
      RETURN_IF_ERROR(Gemm(xn, L.wqkv.as<void>(), qkv, CUDA_R_16BF, T, qkv_w, D, 0.0f));
      if (L.bqkv.bytes() > 0) CUDA_RETURN_IF_ERROR(cuda::LaunchBiasAdd(qkv, L.bqkv.as<float>(), T, qkv_w, nullptr));
      if (qk_norm_) {
        CUDA_RETURN_IF_ERROR(cuda::LaunchQkNorm(qkv, T, H, KVH, hd, L.q_norm.as<float>(), L.k_norm.as<float>(),
                                                c_.norm_eps, nullptr));
      } else if (qk_full_) {
        CUDA_RETURN_IF_ERROR(cuda::LaunchQkNormFull(qkv, T, H * hd, KVH * hd, qkv_w, L.q_norm.as<float>(),
                                                    L.k_norm.as<float>(), c_.norm_eps, nullptr));
      }
      CUDA_RETURN_IF_ERROR(cuda::LaunchRopeKvWrite(qkv, positions_dev, row_seq_dev, rot, kv, l, T, H, KVH, hd, q, nullptr));
    }
    Mark(l, 1);
    if (prefill_runs) {
      CUDA_RETURN_IF_ERROR(cuda::LaunchGqaPrefill(q, positions_dev, row_seq_dev, kv, l, T, H, KVH,
                                                  sliding_[l] ? c_.sliding_window : 0, o, nullptr));
    } else {
      CUDA_RETURN_IF_ERROR(cuda::LaunchPagedAttention(q, positions_dev, row_seq_dev, kv, l, T, H, KVH, hd,
                                                      sliding_[l] ? c_.sliding_window : 0, c_.max_context, o, nullptr));
    }
    Mark(l, 2);
    // The block's output is added to the f32 residual stream by the product itself (beta = 1).
    RETURN_IF_ERROR(Gemm(o, L.wo.as<void>(), x, CUDA_R_32F, T, D, H * hd, 1.0f));
    if (L.bo.bytes() > 0) CUDA_RETURN_IF_ERROR(cuda::LaunchBiasAddF32(x, L.bo.as<float>(), T, D, nullptr));
    if (!FusedRoute() || !moe_layer_[l]) {
      CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(x, L.ffn_norm.as<float>(), nullptr, xn, T, D, c_.norm_eps, nullptr));
    }
    Mark(l, 3);
    const float* next_norm = l + 1 < c_.n_layers ? w_->layers[l + 1].attn_norm.as<float>() : nullptr;
    if (moe_layer_[l]) {
      RETURN_IF_ERROR(Moe(L, l, moe_slot++, T, next_norm));
    } else {
      RETURN_IF_ERROR(DenseMlp(L, T, next_norm));
      Mark(l, 4);
      Mark(l, 5);
    }
    Mark(l, 6);
  }
  // The routing of every layer ([layer][row][slot] on the device), copied back once with the
  // step's results and reordered to [row][layer][slot] below.
  RETURN_IF_ERROR(routing_host_.Reserve(std::max<size_t>(routing_ints, 1) * 4));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(routing_host_.as<int32_t>(), experts_.as<int32_t>(), routing_ints * 4,
                                       cudaMemcpyDeviceToHost, nullptr));
  out->logits.resize(sample ? 0 : R * static_cast<size_t>(V));
  out->sampled.clear();
  if (R > 0) {
    ASSIGN_OR_RETURN(uint16_t* hn, Ws<uint16_t>(hn_rows_, static_cast<size_t>(R) * D));
    ASSIGN_OR_RETURN(float* lg, Ws<float>(logits_, static_cast<size_t>(R) * V));
    CUDA_RETURN_IF_ERROR(cuda::LaunchRmsNorm(x, w_->norm.as<float>(), logit_rows_dev, hn, static_cast<int>(R), D, c_.norm_eps, nullptr));
    const void* head = w_->tied ? w_->embed.as<void>() : w_->head.as<void>();
    RETURN_IF_ERROR(Gemm(hn, head, lg, CUDA_R_32F, static_cast<int>(R), V, D, 0.0f));
    if (sample) {
      // Tokens, logprobs and top lists in one small copy instead of the logits.
      const size_t per_row = 2 + 2 * static_cast<size_t>(max_top);
      ASSIGN_OR_RETURN(int32_t* drawn, Ws<int32_t>(sampled_dev_, R * per_row));
      CUDA_RETURN_IF_ERROR(cuda::LaunchSampleRows(lg, static_cast<int>(R), V, params_dev, static_cast<int>(max_top), drawn, nullptr));
      RETURN_IF_ERROR(sampled_host_.Reserve(R * per_row * 4));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sampled_host_.as<int32_t>(), drawn, R * per_row * 4, cudaMemcpyDeviceToHost, nullptr));
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
      out->sampled.resize(R);
      for (size_t i = 0; i < R; ++i) {
        const int32_t* row = sampled_host_.as<int32_t>() + i * per_row;
        SampledRow& sr = out->sampled[i];
        sr.token = row[0];
        std::memcpy(&sr.logprob, &row[1], 4);
        const uint32_t k = std::min<uint32_t>(in.sampling[i].top_logprobs, max_top);
        sr.top_ids.assign(row + 2, row + 2 + k);
        sr.top_logprobs.resize(k);
        std::memcpy(sr.top_logprobs.data(), row + 2 + max_top, k * 4);
      }
    } else {
      CUDA_RETURN_IF_ERROR(cudaMemcpy(out->logits.data(), lg, out->logits.size() * 4, cudaMemcpyDeviceToHost));
    }
  } else {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  }
  const int K = c_.top_k, LK = n_moe_ * c_.top_k;
  const size_t N = static_cast<size_t>(T) * K;
  const int32_t* routing = routing_host_.as<int32_t>();
  out->experts.resize(routing_ints);
  for (int l = 0; l < n_moe_; ++l) {
    for (int r = 0; r < T; ++r) {
      for (int k = 0; k < K; ++k) out->experts[static_cast<size_t>(r) * LK + l * K + k] = routing[l * N + r * K + k];
    }
  }
  if (!device_moe_) CollectProfile(T);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(const ModelConfig& config,
                                                                uint32_t page_tokens,
                                                                uint64_t kv_bytes) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return absl::UnavailableError("cuda backend: no CUDA device");
  }
  const uint64_t page_bytes = uint64_t(config.n_layers) * 2 * page_tokens * config.n_kv_heads * config.head_dim * 2;
  const uint64_t pages = kv_bytes / page_bytes;
  if (pages == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_memory_bytes ", kv_bytes, " holds no page of ", page_bytes, " bytes"));
  }
  auto b = std::make_unique<CudaBackend>(config, page_tokens, static_cast<uint32_t>(pages));
  RETURN_IF_ERROR(b->Init());
  return std::unique_ptr<ModelBackend>(std::move(b));
}

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateHfCudaBackend(const HfConfig& hf, const HfCheckpoint* checkpoint,
                                                                  uint32_t page_tokens, uint64_t kv_bytes) {
  RETURN_IF_ERROR(cuda::HfCudaSupports(hf));
  if (page_tokens == 0) return absl::InvalidArgumentError("kv_page_tokens must be > 0");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return absl::UnavailableError("cuda backend: no CUDA device");
  }
  ModelConfig c = HfModelSummary(hf);
  if (hf.sliding_window > 0) {
    c.sliding_window = hf.sliding_window;
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back(l);
  }
  const uint64_t page_bytes = uint64_t(c.n_layers) * 2 * page_tokens * c.n_kv_heads * c.head_dim * 2;
  const uint64_t pages = kv_bytes / page_bytes;
  if (pages == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_memory_bytes ", kv_bytes, " holds no page of ", page_bytes, " bytes"));
  }
  auto b = std::make_unique<CudaBackend>(c, page_tokens, static_cast<uint32_t>(pages), &hf);
  RETURN_IF_ERROR(b->Init());
  if (checkpoint != nullptr) RETURN_IF_ERROR(b->LoadHf(*checkpoint));
  return std::unique_ptr<ModelBackend>(std::move(b));
}

}  // namespace flotilla::inference
