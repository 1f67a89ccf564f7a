// ResourceVector: what one sandbox asks for, or what a partition has or has committed, as
// plain figures. The vocabulary of AdmissionLimits; the scheduler's views and the simulator
// use it too (flotilla::scheduler::ResourceVector names the same type). Plain value.
#pragma once

#include <cstdint>

namespace flotilla::admission {

struct ResourceVector {
  uint64_t memory_bytes = 0;
  uint32_t cpu_millicores = 0;
  uint32_t slots = 0;

  ResourceVector& operator+=(const ResourceVector& o) {
    memory_bytes += o.memory_bytes;
    cpu_millicores += o.cpu_millicores;
    slots += o.slots;
    return *this;
  }
  // Saturating subtraction: usage never goes below zero.
  ResourceVector& operator-=(const ResourceVector& o) {
    memory_bytes = memory_bytes > o.memory_bytes ? memory_bytes - o.memory_bytes : 0;
    cpu_millicores = cpu_millicores > o.cpu_millicores ? cpu_millicores - o.cpu_millicores : 0;
    slots = slots > o.slots ? slots - o.slots : 0;
    return *this;
  }
  bool operator==(const ResourceVector&) const = default;
};

}  // namespace flotilla::admission
