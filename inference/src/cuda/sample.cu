// Token sampling on the device: the host sampler's algorithm (sampler.cc) step for step, so a
// row draws the token the host would draw from the same logits and RNG state. One block per
// logit row. Every sum whose rounding decides a draw (the log-softmax normaliser, the weights'
// total, the walk down the CDF) runs in double, in id order, on one thread, exactly as on the
// host; the element-wise exponentials run in parallel (CUDA's double exp is within 1 ulp of the
// host's). Products are kept out of fused multiply-adds so they round as the host rounds them.
#include <cfloat>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 256;

// The host's SequenceRng::Next on a state (the state itself advances on the host).
__device__ double RngNext(uint64_t state) {
  uint64_t z = state + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

__device__ float BlockMaxF(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // scratch may still be read from an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? scratch[lane] : -FLT_MAX;
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ double BlockMaxD(double v, double* scratch) {
  for (int off = 16; off > 0; off >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? scratch[lane] : -DBL_MAX;
  for (int off = 16; off > 0; off >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Whether (va, a) comes before (vb, b) in the host's order: larger value first, ties lower id.
__device__ bool Before(float va, int a, float vb, int b) { return va > vb || (va == vb && a < b); }

// Across the warp: the first (value, index) in the host's order (index -1: none).
__device__ void WarpFirst(float& bv, int& bi) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (oi >= 0 && (bi < 0 || Before(ov, oi, bv, bi))) {
      bv = ov;
      bi = oi;
    }
  }
}

// The first entry of lp in the host's order among those after (prev_v, prev_id) (prev_id < 0:
// among all). Every thread gets the answer.
__device__ int BlockFirstAfter(const float* lp, int n, float prev_v, int prev_id, float* sv, int* si) {
  float bv = 0;
  int bi = -1;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = lp[i];
    if (prev_id >= 0 && !Before(prev_v, prev_id, v, i)) continue;
    if (bi < 0 || Before(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  WarpFirst(bv, bi);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  bv = lane < kThreads / 32 ? sv[lane] : 0.0f;
  bi = lane < kThreads / 32 ? si[lane] : -1;
  WarpFirst(bv, bi);
  return bi;
}

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int vocab, const DeviceRowSampling* params, int max_top, int32_t* out) {
  extern __shared__ __align__(8) unsigned char smem[];
  double* w = reinterpret_cast<double*>(smem);
  float* lp = reinterpret_cast<float*>(w + vocab);
  __shared__ double dscratch[kThreads / 32];
  __shared__ float fscratch[kThreads / 32];
  __shared__ int iscratch[kThreads / 32];
  __shared__ double total;
  __shared__ int chosen;
  const int r = blockIdx.x;
  const float* lg = logits + static_cast<int64_t>(r) * vocab;
  const DeviceRowSampling p = params[r];

  // log_softmax, as LogSoftmax: float max, double sum of exp(double(l - max)) in id order.
  float m = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) m = fmaxf(m, lg[i]);
  const float mx = BlockMaxF(m, fscratch);
  for (int i = threadIdx.x; i < vocab; i += kThreads) w[i] = exp(static_cast<double>(lg[i] - mx));
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += w[i];
    total = sum;
  }
  __syncthreads();
  const float lse = mx + static_cast<float>(log(total));
  for (int i = threadIdx.x; i < vocab; i += kThreads) lp[i] = lg[i] - lse;
  __syncthreads();

  if (p.temperature <= 0.0f) {
    // Greedy: the first largest logprob.
    const int t = BlockFirstAfter(lp, vocab, 0.0f, -1, fscratch, iscratch);
    if (threadIdx.x == 0) chosen = t;
  } else {
    const double inv_t = 1.0 / static_cast<double>(p.temperature);
    double dm = -DBL_MAX;
    for (int i = threadIdx.x; i < vocab; i += kThreads) dm = fmax(dm, __dmul_rn(lp[i], inv_t));
    const double tmx = BlockMaxD(dm, dscratch);
    for (int i = threadIdx.x; i < vocab; i += kThreads) w[i] = exp(__dsub_rn(__dmul_rn(lp[i], inv_t), tmx));
    __syncthreads();
    if (threadIdx.x == 0) {
      double sum = 0;
      for (int i = 0; i < vocab; ++i) sum += w[i];
      double u = __dmul_rn(RngNext(p.rng_state), sum);
      int token = vocab - 1;
      for (int i = 0; i < vocab; ++i) {
        u -= w[i];
        if (u < 0) {
          token = i;
          break;
        }
      }
      chosen = token;
    }
  }
  __syncthreads();
  int32_t* row = out + static_cast<int64_t>(r) * (2 + 2 * max_top);
  if (threadIdx.x == 0) {
    row[0] = chosen;
    row[1] = __float_as_int(lp[chosen]);
  }
  // Top logprobs: k rounds, each taking the first entry after the previous one.
  const int k = min(static_cast<int>(p.top_logprobs), min(max_top, vocab));
  float prev_v = 0;
  int prev_id = -1;
  for (int j = 0; j < k; ++j) {
    prev_id = BlockFirstAfter(lp, vocab, prev_v, prev_id, fscratch, iscratch);
    prev_v = lp[prev_id];
    if (threadIdx.x == 0) {
      row[2 + j] = prev_id;
      row[2 + max_top + j] = __float_as_int(prev_v);
    }
  }
}

}  // namespace

bool SampleRowsSupports(int vocab) { return vocab > 0 && vocab <= kMaxSampleVocab; }

cudaError_t LaunchSampleRows(const float* logits, int rows, int vocab, const DeviceRowSampling* params,
                             int max_top, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!SampleRowsSupports(vocab) || max_top < 0) return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(vocab) * (sizeof(double) + sizeof(float));
  static const cudaError_t attr = cudaFuncSetAttribute(SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(size_t{kMaxSampleVocab} * 12));
  if (attr != cudaSuccess) return attr;
  SampleRowsKernel<<<rows, kThreads, smem, stream>>>(logits, vocab, params, max_top, out);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
