#include "flotilla/scheduler_sim/node_reporter.h"

namespace flotilla::scheduler {

NodeReporter::NodeReporter(const NodeReporterOptions& options, SnapshotFn snapshot, UnknownFn on_unknown)
    : link_(options,
            [snapshot = std::move(snapshot)] {
              auto [usage, ids] = snapshot();
              return std::make_pair(ToProto(usage), std::move(ids));
            },
            std::move(on_unknown)) {
  thread_ = std::thread([this] { Loop(); });
}

NodeReporter::~NodeReporter() { Stop(); }

void NodeReporter::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void NodeReporter::Loop() {
  do {
    link_.Step();
    registered_.store(link_.registered());
  } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(link_.interval_ms())));
}

}  // namespace flotilla::scheduler
