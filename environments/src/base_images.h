// The base images a FROM line may name, and their debootstrapped root filesystems.
//
// Known names (a "docker.io/" or "docker.io/library/" prefix is ignored):
//
//   FROM                                        built as
//   debian:<suite>[-slim], debian:<suite>-<date> debootstrap --variant=minbase <suite>
//   debian:<major>[.<minor>][-slim]              the suite of that major (11 bullseye,
//                                                12 bookworm, 13 trixie)
//   debian, debian:latest, debian:stable[-slim]  trixie (what the tags name today)
//   python:3.11[.<patch>][-slim][-bookworm]      bookworm + python3 python3-pip python3-venv
//                                                python-is-python3 (Debian's Python 3.11), with
//                                                pip allowed to install system-wide as in the image
//   buildpack-deps:bookworm-curl                 bookworm + ca-certificates curl wget gnupg
//   buildpack-deps:bookworm-scm                  the above + git openssh-client procps
//   buildpack-deps:bookworm                      the above + build-essential autoconf automake
//                                                libtool pkg-config
//
// Debian's own images are debootstrap minbase too, so "debian:*" differs from Docker's only by
// the mirror's package versions. Anything else (ubuntu, alpine, python:3.12, a registry path)
// is refused with the name: it would need packages or a C library these mirrors do not have.
// A suite also has to be served by one of this machine's apt sources.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::environments {

struct BaseSpec {
  std::string suite;                  // "bookworm"
  std::vector<std::string> packages;  // installed over the debootstrapped suite
  bool pip_system_wide = false;       // remove the EXTERNALLY-MANAGED marker (PEP 668)
};

// nullopt when `name` is not a known Debian-based image (it may still be a local tag or stage).
std::optional<BaseSpec> KnownBase(const std::string& name);

// Makes the debootstrapped base of `suite` (once per suite, variant and mirror; later calls
// return at once) under <store_dir>/images/. Returns its top ("dir:<rootfs>") and file bytes.
struct BaseRoot {
  std::string top;
  uint64_t bytes = 0;
  bool built_now = false;
};
absl::StatusOr<BaseRoot> EnsureDebianBase(const std::string& store_dir, const std::string& suite,
                                          const std::function<void(std::string_view)>& progress);

// The shell command that turns the debootstrapped suite into `spec` ("" when nothing to add).
std::string BaseSetupCommand(const BaseSpec& spec);

}  // namespace flotilla::environments
