#include "cuda/upload.h"

#include <algorithm>
#include <cstring>

#include "cuda/cuda_check.h"
#include "flotilla/common/status.h"
#include "parallel_chunks.h"

namespace flotilla::inference::cuda {
namespace {

// out[0, n) = bf16 of elements [off, off + n) of p.
void CopyBf16(const Part& p, size_t off, size_t n, uint16_t* out) {
  if (p.dtype == DType::kBF16) {
    std::memcpy(out, p.data + 2 * off, n * 2);
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    float f;
    std::memcpy(&f, p.data + 4 * (off + j), 4);
    out[j] = F32ToBf16(f);
  }
}

// Writes out[0, o1 - o0) = bf16 of output elements [o0, o1) of the interleaving.
void ConvertInterleaved(const std::vector<Part>& parts, const std::vector<size_t>& chunk, size_t per_block,
                        size_t o0, size_t o1, uint16_t* out) {
  size_t block = o0 / per_block, r = o0 % per_block, i = 0;
  while (r >= chunk[i]) r -= chunk[i++];
  for (size_t o = o0; o < o1;) {
    const size_t take = std::min(chunk[i] - r, o1 - o);
    CopyBf16(parts[i], block * chunk[i] + r, take, out + (o - o0));
    o += take;
    r += take;
    if (r == chunk[i]) {
      r = 0;
      if (++i == parts.size()) {
        i = 0;
        ++block;
      }
    }
  }
}

}  // namespace

// Converted slice by slice into the staging buffer, each slice copied on `stream` (a
// non-blocking stream, so a staged upload does not wait for the steps running on the default
// stream, nor they for it).
absl::Status UploadBf16(DeviceBuffer* dst, const std::vector<Part>& parts, const std::vector<size_t>& chunk,
                        PinnedBuffer* staging, cudaStream_t stream) {
  size_t total = 0, per_block = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    total += parts[i].size;
    per_block += chunk[i];
  }
  RETURN_IF_ERROR(dst->Reserve(std::max<size_t>(total, 1) * 2));
  constexpr size_t kSlice = size_t{1} << 25;  // elements: 64 MiB of staging
  const size_t slice = std::min(total, kSlice);
  RETURN_IF_ERROR(staging->Reserve(std::max<size_t>(slice, 1) * 2));
  uint16_t* host = staging->as<uint16_t>();
  for (size_t s0 = 0; s0 < total; s0 += slice) {
    const size_t s1 = std::min(total, s0 + slice);
    ForChunks(s1 - s0, [&](size_t a, size_t b) { ConvertInterleaved(parts, chunk, per_block, s0 + a, s0 + b, host + a); });
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->as<uint16_t>() + s0, host, (s1 - s0) * 2, cudaMemcpyHostToDevice, stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // the staging buffer is reused
  }
  return absl::OkStatus();
}

absl::Status UploadF32(DeviceBuffer* dst, const Part& p, cudaStream_t stream) {
  std::vector<float> v(p.size);
  for (size_t i = 0; i < p.size; ++i) {
    if (p.dtype == DType::kF32) {
      std::memcpy(&v[i], p.data + 4 * i, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, p.data + 2 * i, 2);
      v[i] = Bf16ToF32(b);
    }
  }
  RETURN_IF_ERROR(dst->Reserve(v.size() * 4));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->as<void>(), v.data(), v.size() * 4, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace flotilla::inference::cuda
