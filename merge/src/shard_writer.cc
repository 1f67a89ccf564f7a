#include "shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace flotilla::merge {
namespace {

uint64_t Numel(const PlannedTensor& t) {
  uint64_t n = 1;
  for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
  return n;
}

uint64_t Bytes(const PlannedTensor& t) { return Numel(t) * inference::DTypeSize(t.dtype); }

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("write ", path));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

ShardWriter::ShardWriter(std::string dir, std::vector<PlannedTensor> plan, uint64_t max_shard_bytes)
    : dir_(std::move(dir)), plan_(std::move(plan)) {
  size_t shard = 0;
  uint64_t in_shard = 0;
  for (const PlannedTensor& t : plan_) {
    const uint64_t b = Bytes(t);
    if (in_shard > 0 && in_shard + b > max_shard_bytes) {
      ++shard;
      in_shard = 0;
    }
    in_shard += b;
    shard_of_.push_back(shard);
  }
  const size_t shards = plan_.empty() ? 1 : shard + 1;
  for (size_t s = 0; s < shards; ++s) {
    paths_.push_back(shards == 1 ? (std::filesystem::path(dir_) / "model.safetensors").string()
                                 : (std::filesystem::path(dir_) /
                                    absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, shards))
                                       .string());
  }
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ShardWriter::OpenShard(size_t shard) {
  if (fd_ >= 0) {
    if (::close(fd_) != 0) return ErrnoStatus(absl::StrCat("close ", paths_[open_shard_]));
    fd_ = -1;
  }
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (shard_of_[i] != shard) continue;
    const uint64_t b = Bytes(plan_[i]);
    header[plan_[i].name] = {{"dtype", inference::DTypeName(plan_[i].dtype)},
                             {"shape", plan_[i].shape},
                             {"data_offsets", {offset, offset + b}}};
    offset += b;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  const std::string& path = paths_[shard];
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return ErrnoStatus(absl::StrCat("create ", path));
  open_shard_ = shard;
  const uint64_t hlen = h.size();
  RETURN_IF_ERROR(WriteAll(fd_, &hlen, 8, path));
  RETURN_IF_ERROR(WriteAll(fd_, h.data(), h.size(), path));
  bytes_written_ += 8 + h.size();
  return absl::OkStatus();
}

absl::Status ShardWriter::Append(const float* values, size_t count) {
  while (count > 0) {
    if (tensor_ >= plan_.size()) return absl::InternalError("shard writer: more values than the plan holds");
    const PlannedTensor& t = plan_[tensor_];
    if (open_shard_ != shard_of_[tensor_]) RETURN_IF_ERROR(OpenShard(shard_of_[tensor_]));
    const uint64_t left = Numel(t) - written_in_tensor_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, count));
    if (t.dtype == inference::DType::kF32) {
      RETURN_IF_ERROR(WriteAll(fd_, values, n * 4, paths_[open_shard_]));
    } else {
      constexpr size_t kChunk = 1 << 20;
      for (size_t done = 0; done < n; done += kChunk) {
        const size_t c = std::min(kChunk, n - done);
        bf16_.resize(c);
        for (size_t i = 0; i < c; ++i) bf16_[i] = inference::F32ToBf16(values[done + i]);
        RETURN_IF_ERROR(WriteAll(fd_, bf16_.data(), c * 2, paths_[open_shard_]));
      }
    }
    bytes_written_ += n * inference::DTypeSize(t.dtype);
    values += n;
    count -= n;
    written_in_tensor_ += n;
    if (written_in_tensor_ == Numel(t)) {
      ++tensor_;
      written_in_tensor_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish() {
  // Zero-sized tensors at the end take no Append call.
  while (tensor_ < plan_.size() && Numel(plan_[tensor_]) == 0) {
    if (open_shard_ != shard_of_[tensor_]) RETURN_IF_ERROR(OpenShard(shard_of_[tensor_]));
    ++tensor_;
  }
  if (tensor_ != plan_.size()) {
    return absl::InternalError(absl::StrCat("shard writer: tensor '", plan_[tensor_].name, "' not fully written"));
  }
  if (plan_.empty()) RETURN_IF_ERROR(OpenShard(0));
  if (fd_ >= 0) {
    if (::close(fd_) != 0) return ErrnoStatus(absl::StrCat("close ", paths_[open_shard_]));
    fd_ = -1;
  }
  if (paths_.size() > 1) {
    nlohmann::json index;
    uint64_t total = 0;
    for (size_t i = 0; i < plan_.size(); ++i) {
      total += Bytes(plan_[i]);
      index["weight_map"][plan_[i].name] = std::filesystem::path(paths_[shard_of_[i]]).filename().string();
    }
    index["metadata"] = {{"total_size", total}};
    const std::string path = (std::filesystem::path(dir_) / "model.safetensors.index.json").string();
    std::ofstream out(path);
    out << index.dump(2) << "\n";
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::merge
