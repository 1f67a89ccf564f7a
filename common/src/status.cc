#include "flotilla/common/status.h"

namespace flotilla {

absl::Status ErrnoStatus(std::string_view what, int err) {
  std::string msg = absl::StrCat(std::string(what), ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ESRCH:
      return absl::NotFoundError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
      return absl::InvalidArgumentError(msg);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EAGAIN:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    case ENOSYS:
    case EOPNOTSUPP:
      return absl::UnimplementedError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case EBUSY:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(context), ": ", s.message()));
}

}  // namespace flotilla
