// The CUDA backend's factory in builds without CUDA.
#include "backend.h"

namespace flotilla::inference {

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(const ModelConfig&, uint32_t, uint64_t) {
  return absl::UnimplementedError("this build has no CUDA backend (built without a CUDA toolkit)");
}

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateHfCudaBackend(const HfConfig&, const HfCheckpoint*, uint32_t,
                                                                  uint64_t) {
  return absl::UnimplementedError("this build has no CUDA backend (built without a CUDA toolkit)");
}

}  // namespace flotilla::inference
