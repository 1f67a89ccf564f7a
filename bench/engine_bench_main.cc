// Standalone `flotilla bench engine` for machines that have only the inference libraries.
#include <cstdlib>
#include <cstring>

#include "engine_bench.h"
#include "engine_gpu_bench.h"

int main(int argc, char** argv) {
  flotilla::bench::EngineBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    // --gpu-hf [LAYERS [prefill]]: only the Hugging Face qwen3_moe decode step and 32k
    // prefill (hf_gpu_bench.cc); with `prefill`, only the prefill.
    if (std::strcmp(argv[i], "--gpu-hf") == 0) {
      const bool prefill_only = i + 2 < argc && std::strcmp(argv[i + 2], "prefill") == 0;
      return flotilla::bench::RunHfGpuBench(i + 1 < argc ? std::atoi(argv[i + 1]) : 10, prefill_only);
    }
    if (std::strcmp(argv[i], "--gpu-only") == 0) o.cpu = false;
    if (std::strcmp(argv[i], "--cpu-only") == 0) o.gpu = false;
    if (std::strcmp(argv[i], "--gpu-forward-only") == 0) {
      o.cpu = false;
      o.gpu_forward_only = true;
    }
  }
  return flotilla::bench::RunEngineBench(o);
}
