// The enforcers' steps that a sandboxed process takes on itself, for a process that shares no
// memory with the runtime that prepared them (a sandbox init cloned by a zygote): each takes
// what the runtime prepared as plain bytes and returns 0 or an errno value.
//
// All are async-signal-safe (no allocation, no locks: fit for a child between clone and exec)
// and built over libc alone (the flotilla_policies_child library): the static flotilla-zygote
// executable links them without the policy model. The runtime's side is in landlock.h
// (LandlockPlan::encoded()), seccomp.h (SeccompProgram) and apparmor.h (LoadedAppArmorProfile).
#pragma once

#include <linux/filter.h>

#include <cstddef>

namespace flotilla::policies {

// Restricts the calling thread (and what it execs) for good with the Landlock plan `data`
// (LandlockPlan::encoded()): sets no_new_privs, creates the ruleset, adds the rules, calls
// landlock_restrict_self. EINVAL, before anything is applied, when `data` is not a whole
// encoding. `failed_step` (optional) names the failing system call.
int ApplyEncodedLandlockPlan(const char* data, size_t len, const char** failed_step = nullptr) noexcept;

// Sets no_new_privs and loads the seccomp program of `count` instructions; when it uses
// notify, sends the listener fd over the unix socket `listener_socket` (SCM_RIGHTS) and closes
// it here. EINVAL for 0 or more than BPF_MAXINSNS instructions.
int InstallSeccompFilterInChild(const sock_filter* insns, size_t count, bool uses_notify,
                                int listener_socket) noexcept;

// Asks AppArmor to confine the next execve() under `profile_name` (writes "exec <name>" to
// /proc/self/attr/apparmor/exec, or /proc/self/attr/exec on older kernels). ENOENT: no
// AppArmor here.
int ChangeAppArmorProfileOnExec(const char* profile_name) noexcept;
// Moves the calling process under `profile_name` now ("changeprofile <name>"); its later
// children inherit the profile. Must come before no_new_privs (AppArmor refuses the change
// afterwards).
int ChangeAppArmorProfileNow(const char* profile_name) noexcept;

}  // namespace flotilla::policies
