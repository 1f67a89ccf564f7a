// Token sampling on the device for any vocabulary size: the host sampler's algorithm
// (sampler.cc) over the whole row, so only each row's token, its logprob and its top list leave
// the device. One block per logit row reads the row from global memory in three passes:
//   1. the largest logit (float), as LogSoftmax;
//   2. the normaliser: the sum in double of exp(double(l - max)), so lse = max + float(log(sum));
//   3. per warp, over its own contiguous segment of ids in tiles of 32: the logprobs
//      lp = l - lse (float, the host's values bit for bit), each thread's best entries (the top
//      list and the greedy argmax: larger first, ties to the lower id, as TopK and max_element),
//      and for a temperature row the weights exp(lp / T - max lp / T) in double (products kept
//      out of fused multiply-adds, as the host rounds them), summed per tile and per segment.
// The draw u = rng * total then walks the segment sums, the chosen segment's tile sums and that
// tile's weights in id order, as the host walks its CDF one weight at a time.
// Exactness: every value the host compares is computed as the host computes it (CUDA's double
// exp is within 1 ulp of glibc's); only the order of the double sums differs (the host adds in
// id order), which moves the normaliser and the CDF by about 1e-16 relative. A row's result
// differs from SampleToken's only when lse's float rounding or the draw lands that close to a
// boundary: of order 1e-9 per row for the logprobs, far less for the draw.
#include <cfloat>

#include "ops.cuh"

namespace flotilla::inference::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kListed = 32;  // best entries each thread keeps: top lists up to this long merge in one pass

// The host's SequenceRng::Next on a state (the state itself advances on the host).
__device__ double RngNext(uint64_t state) {
  uint64_t z = state + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// Whether (va, a) comes before (vb, b) in the host's order: larger value first, ties lower id.
__device__ bool Before(float va, int a, float vb, int b) { return va > vb || (va == vb && a < b); }

// A warp's sum by xor butterfly: every lane gets the same bits (each step adds the same two
// values, and addition commutes).
__device__ double WarpSum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ float BlockMax(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // scratch may still be read from an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : -FLT_MAX;
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ double BlockSum(double v, double* scratch) {
  v = WarpSum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return WarpSum(lane < kWarps ? scratch[lane] : 0.0);
}

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

// The block's first (value, index) among every thread's candidate; every thread gets it.
__device__ void BlockFirst(float& bv, int& bi, float* sv, int* si) {
  WarpFirst(bv, bi);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  bv = lane < kWarps ? sv[lane] : 0.0f;
  bi = lane < kWarps ? si[lane] : -1;
  WarpFirst(bv, bi);
}

// A thread's best `cap` entries, sorted in the host's order.
struct Listed {
  float v[kListed];
  int id[kListed];
  int n = 0;
  __device__ void Offer(float value, int i, int cap) {
    if (n == cap && !Before(value, i, v[n - 1], id[n - 1])) return;
    int pos = n < cap ? n++ : cap - 1;
    for (; pos > 0 && Before(value, i, v[pos - 1], id[pos - 1]); --pos) {
      v[pos] = v[pos - 1];
      id[pos] = id[pos - 1];
    }
    v[pos] = value;
    id[pos] = i;
  }
};

// The weight of a logprob at temperature 1 / inv_t, as the host rounds it.
__device__ double Weight(float lp, double inv_t, double tmx) { return exp(__dsub_rn(__dmul_rn(lp, inv_t), tmx)); }

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int vocab, const DeviceRowSampling* params, int max_top, int32_t* out) {
  __shared__ double dscratch[kWarps];
  __shared__ double seg_sum[kWarps];
  __shared__ float fscratch[kWarps];
  __shared__ int iscratch[kWarps];
  __shared__ int chosen_seg, drawn;
  __shared__ double u_seg;  // the draw's u left when the chosen segment starts
  const int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* lg = logits + static_cast<int64_t>(r) * vocab;
  const DeviceRowSampling p = params[r];
  const bool greedy = p.temperature <= 0.0f;
  const int k = min(static_cast<int>(p.top_logprobs), min(max_top, vocab));
  const int listed = max(min(k, kListed), greedy ? 1 : 0);

  // Passes 1 and 2: lse as LogSoftmax makes it.
  float m = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) m = fmaxf(m, lg[i]);
  const float mx = BlockMax(m, fscratch);
  double s = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) s += exp(static_cast<double>(lg[i] - mx));
  const float lse = mx + static_cast<float>(log(BlockSum(s, dscratch)));

  // Pass 3: each warp's contiguous segment, a whole number of 32-id tiles.
  const double inv_t = greedy ? 0.0 : 1.0 / static_cast<double>(p.temperature);
  const double tmx = __dmul_rn(mx - lse, inv_t);  // the largest lp / T: lp rounds monotonically in l
  const int seg = ((vocab + kWarps - 1) / kWarps + 31) & ~31;
  const int lo = warp * seg, hi = min(lo + seg, vocab);
  Listed best;
  double sum = 0;
  for (int base = lo; base < hi; base += 32) {
    const int i = base + lane;
    double w = 0;
    if (i < hi) {
      const float lp = lg[i] - lse;
      if (listed > 0) best.Offer(lp, i, listed);
      if (!greedy) w = Weight(lp, inv_t, tmx);
    }
    if (!greedy) sum += WarpSum(w);
  }
  if (lane == 0) seg_sum[warp] = sum;

  // Merge the threads' lists: round j takes the first head; its owner moves past it.
  int32_t* row = out + static_cast<int64_t>(r) * (2 + 2 * max_top);
  int token = -1, head = 0;
  float prev_v = 0;
  int prev_id = -1;
  for (int j = 0; j < listed; ++j) {
    float bv = head < best.n ? best.v[head] : 0.0f;
    int bi = head < best.n ? best.id[head] : -1;
    BlockFirst(bv, bi, fscratch, iscratch);
    if (head < best.n && best.id[head] == bi) ++head;
    if (j == 0) token = bi;
    if (j < k && threadIdx.x == 0) {
      row[2 + j] = bi;
      row[2 + max_top + j] = __float_as_int(bv);
    }
    prev_v = bv;
    prev_id = bi;
  }
  // Top lists longer than the threads keep: one pass over the row per further entry.
  for (int j = listed; j < k; ++j) {
    float bv = 0;
    int bi = -1;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = lg[i] - lse;
      if (Before(prev_v, prev_id, v, i) && (bi < 0 || Before(v, i, bv, bi))) {
        bv = v;
        bi = i;
      }
    }
    BlockFirst(bv, bi, fscratch, iscratch);
    if (threadIdx.x == 0) {
      row[2 + j] = bi;
      row[2 + max_top + j] = __float_as_int(bv);
    }
    prev_v = bv;
    prev_id = bi;
  }

  if (!greedy) {
    // The draw: which segment, then (that segment's warp) which tile, then which id.
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int w = 0; w < kWarps; ++w) total += seg_sum[w];
      double u = __dmul_rn(RngNext(p.rng_state), total);
      chosen_seg = -1;
      drawn = vocab - 1;  // the host's choice when rounding leaves u past the last weight
      for (int w = 0; w < kWarps; ++w) {
        const double before = u;
        u -= seg_sum[w];
        if (u < 0) {
          chosen_seg = w;
          u_seg = before;
          break;
        }
      }
    }
    __syncthreads();
    if (warp == chosen_seg) {
      double u = u_seg;
      int last_positive = -1, found = -1;
      for (int base = lo; base < hi && found < 0; base += 32) {
        const int i = base + lane;
        const double w = i < hi ? Weight(lg[i] - lse, inv_t, tmx) : 0.0;
        const double t = WarpSum(w);
        const unsigned positive = __ballot_sync(0xffffffffu, w > 0);
        if (positive != 0) last_positive = base + 31 - __clz(positive);
        if (u - t >= 0) {
          u -= t;
          continue;
        }
        for (int j = 0; j < 32; ++j) {
          u -= __shfl_sync(0xffffffffu, w, j);
          if (u < 0) {
            found = base + j;
            break;
          }
        }
        if (found < 0) found = last_positive;  // the tile's sum crossed, its walk fell short by rounding
      }
      if (lane == 0) drawn = found >= 0 ? found : last_positive;
    }
    __syncthreads();
    token = drawn;
  }
  if (threadIdx.x == 0) {
    row[0] = token;
    row[1] = __float_as_int(lg[token] - lse);
  }
}

}  // namespace

bool SampleRowsSupports(int vocab) { return vocab > 0; }

cudaError_t LaunchSampleRows(const float* logits, int rows, int vocab, const DeviceRowSampling* params,
                             int max_top, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!SampleRowsSupports(vocab) || max_top < 0) return cudaErrorInvalidValue;
  SampleRowsKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, max_top, out);
  return cudaGetLastError();
}

}  // namespace flotilla::inference::cuda
