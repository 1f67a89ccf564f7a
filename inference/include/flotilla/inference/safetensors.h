// Reading and writing safetensors files: an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw data. Reads F32, BF16, F16 and
// F8_E4M3 (e4m3fn, DeepSeek-V3's block-scaled weights); writes F32 and BF16.
//
// SafetensorsFile maps the file read-only; its tensors point into that mapping and stay valid
// for the object's lifetime. Not copyable; thread-safe for concurrent reads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla::inference {

enum class DType { kF32, kBF16, kF16, kF8E4M3 };
const char* DTypeName(DType d);
size_t DTypeSize(DType d);

struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping; not necessarily aligned
  size_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Opens and validates the header: every range inside the file, sizes matching shapes.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: f32 values, stored as `dtype` (BF16 rounds to nearest even).
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  DType dtype = DType::kF32;
};
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// bf16 <-> f32 conversions shared by the loaders.
inline float Bf16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float F16ToF32(uint16_t h);
float F8E4M3ToF32(uint8_t b);  // e4m3fn: no infinities, 0x7f/0xff are NaN
// Element i of a tensor of any readable dtype, widened to f32.
float ElementAsF32(const TensorView& t, size_t i);

}  // namespace flotilla::inference
