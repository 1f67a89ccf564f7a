// UniqueFd: the one owner type of a file descriptor in Flotilla; closes it on destruction.
// Move-only; not thread-safe (like any value). Header-only and libc-only, so the static sandbox
// zygote can use it too.
#pragma once

#include <unistd.h>

#include <utility>

namespace flotilla {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  // Gives up ownership: the caller closes the returned descriptor.
  [[nodiscard]] int Release() { return std::exchange(fd_, -1); }
  // Closes the owned descriptor (if any) and owns `fd` instead.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace flotilla
