// Standalone `flotilla bench engine` for machines that have only the inference libraries.
#include <cstring>

#include "engine_bench.h"

int main(int argc, char** argv) {
  flotilla::bench::EngineBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu-only") == 0) o.cpu = false;
    if (std::strcmp(argv[i], "--cpu-only") == 0) o.gpu = false;
    if (std::strcmp(argv[i], "--gpu-forward-only") == 0) {
      o.cpu = false;
      o.gpu_forward_only = true;
    }
  }
  return flotilla::bench::RunEngineBench(o);
}
