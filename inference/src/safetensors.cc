#include "flotilla/inference/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "?";
}
size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kF32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kF8E4M3: return 1;
  }
  return 0;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

float F8E4M3ToF32(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, mant = b & 7u;
  float v;
  if (exp == 15 && mant == 7) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -9);
  } else {
    v = std::ldexp(static_cast<float>(mant | 8u), static_cast<int>(exp) - 10);
  }
  return sign ? -v : v;
}

float ElementAsF32(const TensorView& t, size_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      return f;
    }
    case DType::kBF16: case DType::kF16: {
      uint16_t b;
      std::memcpy(&b, t.data + 2 * i, 2);
      return t.dtype == DType::kBF16 ? Bf16ToF32(b) : F16ToF32(b);
    }
    case DType::kF8E4M3: return F8E4M3ToF32(t.data[i]);
  }
  return NAN;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("stat ", path));
    ::close(fd);
    return s;
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated: ", size, " bytes, no header length"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap ", path));
  f->map_ = map;
  f->map_size_ = size;
  const uint8_t* bytes = static_cast<const uint8_t*>(map);
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes, 8);
  if (hlen > size - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated or corrupt: header length ", hlen, " exceeds file size ", size));
  }
  nlohmann::json header = nlohmann::json::parse(bytes + 8, bytes + 8 + hlen, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt header: not a JSON object"));
  }
  const uint8_t* data = bytes + 8 + hlen;
  const size_t data_size = size - 8 - hlen;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": __metadata__ is not an object"));
      for (auto m = v.begin(); m != v.end(); ++m) {
        f->metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      }
      continue;
    }
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "': ", std::string(why)));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      return bad("needs dtype, shape and data_offsets");
    }
    TensorView t;
    if (!v["dtype"].is_string()) return bad("dtype is not a string");
    std::string dt = v["dtype"].get<std::string>();
    if (dt == "F32") {
      t.dtype = DType::kF32;
    } else if (dt == "BF16") {
      t.dtype = DType::kBF16;
    } else if (dt == "F16") {
      t.dtype = DType::kF16;
    } else if (dt == "F8_E4M3") {
      t.dtype = DType::kF8E4M3;
    } else {
      return bad(absl::StrCat("unsupported dtype ", dt, " (want F32, BF16, F16 or F8_E4M3)"));
    }
    if (!v["shape"].is_array()) return bad("shape is not an array");
    for (const auto& s : v["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0) return bad("shape has a non-integer or negative entry");
      t.shape.push_back(s.get<int64_t>());
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return bad("data_offsets must be [begin, end]");
    }
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size) {
      return bad(absl::StrCat("data [", b, ", ", e, ") outside the file's ", data_size,
                              " data bytes (truncated?)"));
    }
    t.data = data + b;
    t.nbytes = e - b;
    if (static_cast<uint64_t>(t.numel()) * DTypeSize(t.dtype) != t.nbytes) {
      return bad(absl::StrCat("shape needs ", t.numel() * DTypeSize(t.dtype), " bytes, data has ", t.nbytes));
    }
    f->tensors_[name] = std::move(t);
  }
  return f;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    uint64_t bytes = static_cast<uint64_t>(n) * DTypeSize(t.dtype);
    header[t.name] = {{"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  uint64_t hlen = h.size();
  out.write(reinterpret_cast<const char*>(&hlen), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const TensorToWrite& t : tensors) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    if (t.dtype == DType::kF32) {
      out.write(reinterpret_cast<const char*>(t.data), n * 4);
    } else {
      std::vector<uint16_t> b(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) b[i] = F32ToBf16(t.data[i]);
      out.write(reinterpret_cast<const char*>(b.data()), n * 2);
    }
  }
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

}  // namespace flotilla::inference
