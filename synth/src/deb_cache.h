// Debian packages for an environment, fetched on the host from the machine's own apt
// configuration and installed with dpkg inside the build: environments build fully offline
// (build sandboxes need no network) and from Debian packages only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::synth {

// Downloads `packages` and every dependency (Depends, Pre-Depends; no Recommends) that the
// base root filesystem `base_rootfs` does not have installed, into <cache_root>/<hash of the
// list>/ (done once; a later call finds them). Returns that folder. FailedPrecondition with
// apt's output when a package cannot be resolved or downloaded.
absl::StatusOr<std::string> FetchDebs(const std::vector<std::string>& packages, const std::string& base_rootfs,
                                      const std::string& cache_root);

// Hard-links (or copies) the .deb files of `from` into `to`.
absl::Status LinkDebs(const std::string& from, const std::string& to);

}  // namespace flotilla::synth
