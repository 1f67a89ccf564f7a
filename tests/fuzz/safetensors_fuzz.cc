// Safetensors files (checkpoints come from outside): SafetensorsFile::Open validates the
// 8-byte length, the JSON header and every tensor's byte range against the file. The input is
// the whole file, served from a memfd so no file system is touched.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "flotilla/inference/safetensors.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

FLOTILLA_FUZZ_TARGET(safetensors_header) {
  static const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  FUZZ_CHECK(::pwrite(fd, data, size, 0) == static_cast<ssize_t>(size));
  auto file = flotilla::inference::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (!file.ok()) return;
  for (const auto& [name, t] : (*file)->tensors()) {
    // The shape describes exactly the tensor's bytes, computed without overflow.
    unsigned __int128 elements = 1;
    for (int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0);
      elements *= static_cast<uint64_t>(d);
      if (elements > (static_cast<unsigned __int128>(1) << 64)) elements = static_cast<unsigned __int128>(1) << 64;
    }
    FUZZ_CHECK(elements * flotilla::inference::DTypeSize(t.dtype) == t.nbytes);
    // Every byte of every tensor lies inside the file: reading them must not fault.
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < t.nbytes; ++i) sum = sum + t.data[i];
    (void)sum;
  }
}
