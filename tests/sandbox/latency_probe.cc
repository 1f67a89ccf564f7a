// Prints the time of each phase of create -> exec /bin/true -> destroy (not a test: a probe to
// run by hand; the benchmark proper is `flotilla bench sandbox`).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "flotilla/common/clock.h"
#include "flotilla/sandbox/runtime.h"
#include "testing/temp_dir.h"

using namespace flotilla::sandbox;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 50;
  flotilla::testing::TempDir dir;
  RuntimeOptions o;
  o.state_dir = dir.path().string();
  o.cgroup_prefix = "flotilla-probe";
  if (const char* z = std::getenv("FLOTILLA_PROBE_ZYGOTE")) o.zygote_binary = z;  // e.g. the `flotilla` binary
  flotilla::Stopwatch open_watch;
  auto rt = Runtime::Open(o);
  if (!rt.ok()) {
    std::fprintf(stderr, "%s\n", rt.status().ToString().c_str());
    return 1;
  }
  std::printf("open_ms=%.2f\n", open_watch.ElapsedMillis());
  if (argc > 2 && std::string(argv[2]) == "idle") {
    // Holds n idle sandboxes at once and reports the host memory they take.
    auto avail = [] {
      FILE* f = std::fopen("/proc/meminfo", "r");
      char line[256];
      long kb = 0;
      while (f && std::fgets(line, sizeof(line), f)) {
        if (std::sscanf(line, "MemAvailable: %ld kB", &kb) == 1) break;
      }
      if (f) std::fclose(f);
      return kb;
    };
    long before = avail();
    flotilla::Stopwatch w;
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      SandboxOptions so;
      so.resources.memory_bytes = 64ull << 20;
      auto cr = (*rt)->Create(so);
      if (!cr.ok()) {
        std::fprintf(stderr, "after %d: %s\n", i, cr.status().ToString().c_str());
        break;
      }
      ids.push_back(cr->id);
    }
    long after = avail();
    double create_s = w.ElapsedMillis() / 1000;
    for (const std::string& id : ids) (void)(*rt)->Destroy(id);
    long released = avail();
    double k = double(std::max<size_t>(1, ids.size()));
    std::printf("idle_sandboxes=%zu create_all_s=%.1f memory_per_idle_sandbox_kb_at_create=%.0f "
                "memory_per_idle_sandbox_kb_at_destroy=%.0f\n",
                ids.size(), create_s, double(before - after) / k, double(released - after) / k);
    return 0;
  }
  std::vector<double> c, e, e2, d, t;
  for (int i = 0; i < n; ++i) {
    SandboxOptions so;
    // "best-effort" as the third argument: the bench's class (SCHED_IDLE).
    so.execution_class = argc > 2 && std::string(argv[2]) == "best-effort" ? ExecutionClass::kBestEffort
                                                                           : ExecutionClass::kLatencySensitive;
    flotilla::Stopwatch w;
    auto cr = (*rt)->Create(so);
    if (!cr.ok()) {
      std::fprintf(stderr, "%s\n", cr.status().ToString().c_str());
      return 1;
    }
    double t1 = w.ElapsedMillis();
    ExecOptions eo;
    eo.argv = {"/bin/true"};
    auto er = (*rt)->Exec(cr->id, eo, nullptr);
    double t2 = w.ElapsedMillis();
    if (!er.ok() || er->exit_code != 0) return 1;
    // A second exec in the same sandbox (not part of the cycle): what the first one pays for
    // a fresh root (cold overlay lookups) shows in the difference.
    flotilla::Stopwatch second;
    auto er2 = (*rt)->Exec(cr->id, eo, nullptr);
    if (!er2.ok() || er2->exit_code != 0) return 1;
    e2.push_back(second.ElapsedMillis());
    w.Reset();
    (void)(*rt)->Destroy(cr->id);
    double t3 = w.ElapsedMillis() + t2;
    c.push_back(t1);
    e.push_back(t2 - t1);
    d.push_back(t3 - t2);
    t.push_back(t3);
  }
  auto p50 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("create_p50_ms=%.3f exec_p50_ms=%.3f destroy_p50_ms=%.3f total_p50_ms=%.3f second_exec_p50_ms=%.3f\n",
              p50(c), p50(e), p50(d), p50(t), p50(e2));
  return 0;
}
