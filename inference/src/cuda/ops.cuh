// Launchers of the CUDA backend's own kernels, one op per .cu file. Plain C++ signatures so the
// host code (compiled by the C++ compiler) never sees device types: bf16 buffers travel as
// uint16_t*. Every launcher enqueues on `stream` and returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flotilla::inference::cuda {

// x[r, :] = float(table[tokens[r], :])
cudaError_t LaunchEmbed(const int32_t* tokens, const uint16_t* table, float* x, int rows, int dim,
                        cudaStream_t stream);

// y[i, :] = bf16(x[src[i], :] * rsqrt(mean(x^2) + eps) * w); src null: identity.
cudaError_t LaunchRmsNorm(const float* x, const float* w, const int32_t* src, uint16_t* y, int rows,
                          int dim, float eps, cudaStream_t stream);

// In place on qkv (bf16, rows x (H + 2 KVH) * hd): each of the H query and KVH key heads of a
// row = bf16(head * rsqrt(mean(head^2) + eps) * w), w = q_w or k_w (f32, head_dim): the q/k
// RMSNorm of the Qwen3 families, before RoPE.
cudaError_t LaunchQkNorm(uint16_t* qkv, int rows, int n_heads, int n_kv_heads, int head_dim, const float* q_w,
                         const float* k_w, float eps, cudaStream_t stream);

// OLMoE's q/k RMSNorm, in place on qkv (bf16, rows x row_width): the first q_dim values of a
// row (the whole query projection) normalised with q_w (f32, q_dim), the next k_dim (the keys)
// with k_w (f32, k_dim).
cudaError_t LaunchQkNormFull(uint16_t* qkv, int rows, int q_dim, int k_dim, int row_width, const float* q_w,
                             const float* k_w, float eps, cudaStream_t stream);

// y[r, c] += b[c] for rows x cols: bf16 y (rounded once after the sum), or f32 y.
cudaError_t LaunchBiasAdd(uint16_t* y, const float* b, int rows, int cols, cudaStream_t stream);
cudaError_t LaunchBiasAddF32(float* y, const float* b, int rows, int cols, cudaStream_t stream);

// Paged KV geometry shared by the RoPE/KV-write and attention kernels.
struct KvGeometry {
  uint16_t* pages;          // num_pages x page_elems (bf16)
  const int32_t* table;     // n_seqs x table_stride page ids
  int table_stride;
  int page_tokens;
  int n_layers;
  int kv_dim;               // n_kv_heads * head_dim
};

// rot[r, i] = scale * (cos, sin) of positions[r] * inv_freq[i] (f32 pairs, rows x half; computed
// in double): the step's rotations, made once and read by every layer's LaunchRopeKvWrite.
// `scale`: yarn's attention factor on cos and sin (1 for the other rope types).
cudaError_t LaunchRopeTable(const int32_t* positions, const double* inv_freq, int rows, int half, float* rot,
                            cudaStream_t stream, float scale = 1.0f);

// From qkv (bf16, rows x (H + 2 KVH) * hd): rotates q and k (rotate-half RoPE, rotations from
// LaunchRopeTable), writes q as bf16 and k, v into their pages at (layer, position).
cudaError_t LaunchRopeKvWrite(const uint16_t* qkv, const int32_t* positions, const int32_t* row_seq,
                              const float* rot, KvGeometry kv, int layer, int rows,
                              int n_heads, int n_kv_heads, int head_dim, uint16_t* q_out,
                              cudaStream_t stream);

// DeepSeek-V3's latent attention heads (mla_rope_kv.cu): from q (bf16, rows x heads x (nope +
// rope)), the shared key rotation k_rope (bf16, rows x rope) and the decompressed kv_b (bf16, rows
// x heads x (nope + v)), writes q_out (q with its rope part rotated, all times q_scale) and each
// head's K [nope | rotated k_rope] and V [v | zeros] (width nope + rope, the pages' head width)
// at (layer, position). Rotations from LaunchRopeTable (rope / 2 of them).
struct MlaShape {
  int heads, nope, rope, v;
  bool interleave;     // rotate pairs (2i, 2i+1) instead of halves
  float q_scale;
};
cudaError_t LaunchMlaRopeKvWrite(const uint16_t* q, const uint16_t* k_rope, const uint16_t* kv_b,
                                 const int32_t* positions, const int32_t* row_seq, const float* rot, KvGeometry kv,
                                 int layer, int rows, const MlaShape& shape, uint16_t* q_out, cudaStream_t stream);

// o[r, h, :] = softmax(q k^T / sqrt(hd)) v over positions [lo, pos] of row r's sequence.
cudaError_t LaunchPagedAttention(const uint16_t* q, const int32_t* positions, const int32_t* row_seq,
                                 KvGeometry kv, int layer, int rows, int n_heads, int n_kv_heads,
                                 int head_dim, int window, int max_context, uint16_t* o,
                                 cudaStream_t stream);

// The same attention for head_dim 128, one block per (row, KV head) reading each K/V row once
// for the query heads that share it. Needs n_heads / n_kv_heads in {1, 2, 4, 8}.
// LaunchPagedAttention picks it when it applies and the batch fills the chip.
bool GqaAttentionSupports(int n_heads, int n_kv_heads, int head_dim, int kv_dim);
cudaError_t LaunchGqaAttention(const uint16_t* q, const int32_t* positions, const int32_t* row_seq,
                               KvGeometry kv, int layer, int rows, int n_heads, int n_kv_heads,
                               int head_dim, int window, uint16_t* o, cudaStream_t stream);

// The same on the tensor cores (gqa_attention_mma.cu), what LaunchGqaAttention runs.
cudaError_t LaunchGqaAttentionMma(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                                  int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                                  cudaStream_t stream);

// The same attention for prefill chunks (gqa_prefill_flash.cu): one block per KV head and run of
// up to 256 / G consecutive rows of one sequence, each K/V tile read once for the run. Any row
// layout is correct; it pays off when rows come in runs (the backend's choice). Needs G <= 16
// with 16 % G == 0.
// GqaPrefillSupports: as GqaAttentionSupports, and no FLOTILLA_CUDA_ATTN kernel forced.
bool GqaPrefillSupports(int n_heads, int n_kv_heads, int head_dim, int kv_dim);
cudaError_t LaunchGqaPrefill(const uint16_t* q, const int32_t* positions, const int32_t* row_seq, KvGeometry kv,
                             int layer, int rows, int n_heads, int n_kv_heads, int window, uint16_t* o,
                             cudaStream_t stream);

// Router: p = softmax(logits[r]); experts[r] = top_k(p) descending (ties: lower id); weights =
// p at those experts, renormalised to sum 1 when `renormalize` (norm_topk_prob).
cudaError_t LaunchRouterTopK(const float* logits, int rows, int n_experts, int top_k,
                             int32_t* experts, float* weights, cudaStream_t stream, bool renormalize = true);

// DeepSeek-V3's sigmoid router with grouped top-k (router_grouped.cu): experts chosen by
// sigmoid(logits) + bias within the topk_group best of n_group groups; weights the sigmoid
// scores, renormalised when `renormalize`, times `scaling`. Needs n_experts <= 256.
cudaError_t LaunchRouterGrouped(const float* logits, const float* bias, int rows, int n_experts, int top_k,
                                int n_group, int topk_group, bool renormalize, float scaling, int32_t* experts,
                                float* weights, cudaStream_t stream);

// Routing replay (router_replay.cu): row r uses the top_k experts at replay + r * stride, with
// the router's weights for them (softmax, or `sigmoid` as DeepSeek-V3: then the renormalised
// weights times `scaling`), as the CPU backends do.
cudaError_t LaunchRouterReplay(const float* logits, const int32_t* replay, int stride, int rows, int n_experts,
                               int top_k, bool sigmoid, bool renormalize, float scaling, int32_t* experts,
                               float* weights, cudaStream_t stream);

// Expert dispatch: gather rows by expert, SwiGLU activation, weighted combine back.
cudaError_t LaunchGatherRows(const uint16_t* x, const int32_t* src, int n, int dim, uint16_t* out,
                             cudaStream_t stream);
// h[i, f] = bf16(silu(gu[i, f]) * gu[i, F + f]) for gu of shape n x 2F (bf16).
cudaError_t LaunchSiluMul(const uint16_t* gu, int n, int hidden, uint16_t* h, cudaStream_t stream);
// The same times sigmoid(gate[i]) (f32, one per row): qwen2_moe's gated shared expert. A null
// gate: LaunchSiluMul.
cudaError_t LaunchSiluMulGate(const uint16_t* gu, int n, int hidden, const float* gate, uint16_t* h,
                              cudaStream_t stream);
// x[r, :] += sum_k weights[r, k] * y[inv[r * K + k], :]   (y bf16); with norm_w, then also
// xn = the RMS norm of the updated x (as LaunchRmsNorm): the next layer's input, in the same pass.
cudaError_t LaunchCombine(const uint16_t* y, const int32_t* inv, const float* weights, int rows,
                          int top_k, int dim, float* x, const float* norm_w, float eps, uint16_t* xn,
                          cudaStream_t stream);

// The operands of the routed experts' two grouped products, each expert's rows at
// offsets[e] of the gathered buffers.
struct MoeGroupOperands {
  const uint16_t* w13;  // n_experts x 2F x D
  int64_t w13_stride;
  const uint16_t* w2;   // n_experts x D x F
  int64_t w2_stride;
  uint16_t* xe;         // gathered rows x D
  uint16_t* gu;         // rows x 2F
  uint16_t* h;          // rows x F
  uint16_t* y;          // rows x D
  int dim, hidden;
};

// Device-side dispatch plan from the router's choices (rows x top_k): offsets[e] .. offsets[e+1]
// are expert e's places; src[place] = row; inv[row * top_k + slot] = place. Rows keep their
// order within an expert. With ptrs (and ops), also ptrs[k * n_experts + g] for k = w13, xe,
// gu, w2, h, y of the g-th expert (ascending id) that has rows: the pointer arrays of
// cublasGemmGroupedBatchedEx. Needs n_experts <= 256.
cudaError_t LaunchMoePlan(const int32_t* chosen, int rows, int top_k, int n_experts, int32_t* offsets, int32_t* src,
                          int32_t* inv, const MoeGroupOperands* ops, void** ptrs, cudaStream_t stream);

// The MoE block's routing and dispatch in three launches (moe_route.cu): xn = RMSNorm(x) with
// norm_w (as LaunchRmsNorm); the router's top-k of xn (as LaunchRouterTopK) into experts and
// weights; the plan of LaunchMoePlan (offsets, src, inv and, from ops, ptrs); xn's rows gathered
// into ops.xe at their places; and, with host_counts (a host-mapped array of n_experts + 1, as
// a device pointer), each expert's row count followed by `ticket`, written when the plan is
// known so the host can launch the grouped products without a copy or an event.
// block_counts: a workspace of (MoeRouteBlocks(rows) + 1) * n_experts.
struct MoeRouteArgs {
  const float* x;
  const float* norm_w;
  const uint16_t* router;  // n_experts x dim
  int rows, dim, n_experts, top_k;
  float eps;
  uint16_t* xn;
  int32_t* experts;
  float* weights;
  int32_t* block_counts;
  MoeGroupOperands ops;
  int32_t* offsets;
  int32_t* src;
  int32_t* inv;
  void** ptrs;
  int32_t* host_counts;
  int32_t ticket;
  cudaStream_t stream;
  bool renormalize = true;  // the top-k weights renormalised to sum 1 (as LaunchRouterTopK)
};
bool MoeRouteSupports(int dim, int n_experts, int top_k);
int MoeRouteRowsPerBlock(int rows);
int MoeRouteBlocks(int rows);
cudaError_t LaunchMoeRoute(const MoeRouteArgs& args);

// Grouped expert product without a host round trip: for every expert e,
// out[offsets[e]:offsets[e+1], :] = x[same rows, :] * w[e]^T (w: n_experts x n x k, bf16).
// x must have 64 readable rows past its last one. Needs n % 64 == 0 and k % 16 == 0.
bool MoeGemmSupports(int n, int k);
cudaError_t LaunchMoeGemm(const uint16_t* x, const uint16_t* w, const int32_t* offsets, int n_experts,
                          int n, int k, uint16_t* out, cudaStream_t stream);

// One logit row's sampling on the device (the host sampler's full-distribution and greedy
// paths; nucleus sampling stays on the host). rng_state is the row's SequenceRng state before
// its draw.
struct DeviceRowSampling {
  float temperature;      // <= 0: greedy
  uint32_t top_logprobs;  // how many top entries to report (at most the launch's max_top)
  uint64_t rng_state;
};
bool SampleRowsSupports(int vocab);  // any vocab > 0 (sample.cu reads the row from global memory)
// For each row r of logits (rows x vocab, f32): out[r * (2 + 2 max_top) + ...] = token, then its
// logprob's bits, then max_top top ids and max_top top logprobs' bits (the first
// params[r].top_logprobs of each written), all as the host's SampleToken computes them (up to
// the order of its double sums: sample.cu says when that can matter).
cudaError_t LaunchSampleRows(const float* logits, int rows, int vocab, const DeviceRowSampling* params,
                             int max_top, int32_t* out, cudaStream_t stream);

// Deterministic pseudo-normal init (benchmark models): bf16 out[i] = mean + stddev * N(0,1).
cudaError_t LaunchRandomBf16(uint16_t* out, int64_t n, uint64_t seed, float mean, float stddev,
                             cudaStream_t stream);
cudaError_t LaunchRandomF32(float* out, int64_t n, uint64_t seed, float mean, float stddev,
                            cudaStream_t stream);

}  // namespace flotilla::inference::cuda
