// ImageUser: the user a task's commands run as, from its Dockerfile's USER (the builder records
// it in the image's config) resolved against the image's own /etc/passwd and /etc/group, as
// Docker does at run time. The agent's commands, the reference solution and the tests run as
// that user (setpriv inside the sandbox: util-linux, present in every Debian image); the
// scaffold's own bookkeeping (directories, copies) stays root's.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/proto/sandbox.pb.h"

namespace flotilla::worker {

struct ImageUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups (the /etc/group entries naming the user)
  std::string name;              // "" for a numeric uid without a passwd entry
  std::string home = "/";
};

// True for "", "root", "0", "root:root", "0:0": nothing to switch to.
bool IsRootUser(const std::string& user);

// Resolves USER's value ("name", "uid", "name:group", "uid:gid") against the texts of the
// image's /etc/passwd and /etc/group. A name that is not in /etc/passwd is NotFound ("USER
// deploy: no such user in the image's /etc/passwd"); a malformed line InvalidArgument naming
// the file, line and field ("/etc/passwd:3: uid: 'x' is not a number").
absl::StatusOr<ImageUser> ResolveImageUser(const std::string& user, const std::string& passwd,
                                           const std::string& group);

// Makes `req` run as `u`: its argv becomes `setpriv --reuid=U --regid=G --groups=...|
// --clear-groups -- argv...`, and HOME and USER are the user's.
void RunAsUser(const ImageUser& u, v1::ExecRequest* req);

}  // namespace flotilla::worker
