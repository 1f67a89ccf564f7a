// The scheduler reaches sandboxes only through the NodeAgent API. This test is built against
// flotilla_scheduler alone, so every public scheduler header below compiles only while none
// of them includes the sandbox runtime's or the node agent's headers (their include folders
// are not on this target's path), and the running process must map none of the kernel
// libraries the runtime needs. The configure step checks the link closure as well
// (flotilla_assert_not_linked in the root CMakeLists.txt).
#include <fstream>
#include <string>

#include "flotilla/scheduler/event_bus.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/scheduler/grpc_node_client.h"
#include "flotilla/scheduler/journal.h"
#include "flotilla/scheduler/metrics.h"
#include "flotilla/common/metrics_server.h"
#include "flotilla/scheduler/node_client.h"
#include "flotilla/scheduler/numa.h"
#include "flotilla/scheduler/placement_engine.h"
#include "flotilla/scheduler/resources.h"
#include "flotilla/scheduler/scale_unit.h"
#include "flotilla/scheduler/scheduler_service.h"
#include "gtest/gtest.h"

#if __has_include("flotilla/sandbox/runtime.h") || __has_include("flotilla/node/node_agent.h")
#error "the scheduler's include path reaches the sandbox runtime or the node agent"
#endif

namespace flotilla::scheduler {
namespace {

TEST(SchedulerLinkClosureTest, MapsNoSandboxKernelLibraries) {
  // Use the scheduler for real, so its code (and whatever it needs) is linked in.
  ScaleUnitOptions options;
  options.engine.admission.memory_warning = 2.0;
  auto unit = ScaleUnit::Open(options, SystemClock::Get(), nullptr, nullptr);
  EXPECT_EQ(unit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unit.status().message(), "memory_warning: must be in (0, 1], got 2");
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    EXPECT_EQ(line.find("libbpf"), std::string::npos) << line;
    EXPECT_EQ(line.find("libseccomp"), std::string::npos) << line;
    EXPECT_EQ(line.find("libelf"), std::string::npos) << line;
  }
  EXPECT_GT(lines, 0);
}

}  // namespace
}  // namespace flotilla::scheduler
