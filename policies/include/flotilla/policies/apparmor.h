// AppArmor: one profile per sandbox, generated as text from the policy and loaded with
// apparmor_parser where the host has AppArmor enabled.
//
// The profile denies mount/umount/pivot_root, ptrace and signals to processes outside the
// profile, writes to /proc/sys, /sys and /proc/sysrq-trigger, raw and packet sockets, module
// loading and the hidden paths; allows reads beneath read_only paths and writes beneath
// read_write paths. Paths are in-sandbox paths as the process sees them after pivot_root.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/policies/child_enforcement.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {

// True when /sys/module/apparmor/parameters/enabled reads "Y".
bool AppArmorEnabled();
// The apparmor_parser executable, or NotFound.
absl::StatusOr<std::string> FindAppArmorParser();

// The profile text. `profile_name` must be a safe id ([A-Za-z0-9._-]); InvalidArgument else.
absl::StatusOr<std::string> RenderAppArmorProfile(const Policy& policy, std::string_view profile_name);

// Compiles `profile_text` with apparmor_parser without touching the kernel (syntax and
// semantic check only). NotFound when apparmor_parser is not installed; InvalidArgument
// with the parser's message when the profile is rejected.
absl::Status CheckAppArmorProfile(std::string_view profile_text);

// In the sandboxed process: ChangeAppArmorProfileOnExec and ChangeAppArmorProfileNow
// (child_enforcement.h).

// A profile loaded into the kernel; destruction unloads it (apparmor_parser -R). Not copyable;
// thread-compatible.
class LoadedAppArmorProfile {
 public:
  // FailedPrecondition when AppArmor is not enabled on this host.
  static absl::StatusOr<std::unique_ptr<LoadedAppArmorProfile>> Load(std::string profile_name,
                                                                    std::string profile_text);
  ~LoadedAppArmorProfile();
  LoadedAppArmorProfile(const LoadedAppArmorProfile&) = delete;
  LoadedAppArmorProfile& operator=(const LoadedAppArmorProfile&) = delete;

  // The name to pass to aa_change_onexec / write to /proc/self/attr/apparmor/exec.
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  LoadedAppArmorProfile(std::string name, std::string text)
      : name_(std::move(name)), text_(std::move(text)) {}
  std::string name_;
  std::string text_;
};

}  // namespace flotilla::policies
