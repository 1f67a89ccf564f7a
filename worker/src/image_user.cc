#include "flotilla/worker/image_user.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace flotilla::worker {
namespace {

struct Entry {
  std::vector<std::string> fields;
  int line = 0;
};

std::vector<Entry> Lines(const std::string& text) {
  std::vector<Entry> out;
  int n = 0;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    ++n;
    if (l.empty() || l[0] == '#') continue;
    out.push_back({absl::StrSplit(l, ':'), n});
  }
  return out;
}

absl::StatusOr<uint32_t> Number(const std::string& file, const Entry& e, size_t index, const char* field) {
  uint32_t v = 0;
  if (e.fields.size() <= index || !absl::SimpleAtoi(e.fields[index], &v)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.line, ": ", field, ": '",
                                                   e.fields.size() > index ? e.fields[index] : "", "' is not a number"));
  }
  return v;
}

}  // namespace

bool IsRootUser(const std::string& user) {
  return user.empty() || user == "root" || user == "0" || user == "root:root" || user == "0:0";
}

absl::StatusOr<ImageUser> ResolveImageUser(const std::string& user, const std::string& passwd,
                                           const std::string& group) {
  std::vector<std::string> parts = absl::StrSplit(user, absl::MaxSplits(':', 1));
  const std::string who = parts[0];
  const std::string grp = parts.size() > 1 ? parts[1] : "";
  ImageUser u;
  uint32_t numeric = 0;
  const bool is_number = absl::SimpleAtoi(who, &numeric);
  bool found = false;
  for (const Entry& e : Lines(passwd)) {
    if (e.fields.size() < 7) {
      return absl::InvalidArgumentError(absl::StrCat("/etc/passwd:", e.line, ": expected 7 fields, got ", e.fields.size()));
    }
    absl::StatusOr<uint32_t> uid = Number("/etc/passwd", e, 2, "uid");
    if (!uid.ok()) return uid.status();
    if (is_number ? *uid != numeric : e.fields[0] != who) continue;
    absl::StatusOr<uint32_t> gid = Number("/etc/passwd", e, 3, "gid");
    if (!gid.ok()) return gid.status();
    u.uid = *uid;
    u.gid = *gid;
    u.name = e.fields[0];
    u.home = e.fields[5].empty() ? "/" : e.fields[5];
    found = true;
    break;
  }
  if (!found) {
    if (!is_number) {
      return absl::NotFoundError(absl::StrCat("USER ", user, ": no such user in the image's /etc/passwd"));
    }
    u.uid = numeric;
    u.gid = numeric;
  }
  std::vector<Entry> groups = Lines(group);
  if (!grp.empty()) {
    uint32_t g = 0;
    if (absl::SimpleAtoi(grp, &g)) {
      u.gid = g;
    } else {
      bool group_found = false;
      for (const Entry& e : groups) {
        if (e.fields.size() < 3 || e.fields[0] != grp) continue;
        absl::StatusOr<uint32_t> gid = Number("/etc/group", e, 2, "gid");
        if (!gid.ok()) return gid.status();
        u.gid = *gid;
        group_found = true;
        break;
      }
      if (!group_found) {
        return absl::NotFoundError(absl::StrCat("USER ", user, ": no such group in the image's /etc/group"));
      }
    }
  }
  if (!u.name.empty()) {
    for (const Entry& e : groups) {
      if (e.fields.size() < 4) continue;
      for (absl::string_view member : absl::StrSplit(e.fields[3], ',', absl::SkipEmpty())) {
        if (member != u.name) continue;
        absl::StatusOr<uint32_t> gid = Number("/etc/group", e, 2, "gid");
        if (!gid.ok()) return gid.status();
        if (*gid != u.gid) u.groups.push_back(*gid);
      }
    }
  }
  return u;
}

void RunAsUser(const ImageUser& u, v1::ExecRequest* req) {
  std::vector<std::string> argv = {"setpriv", absl::StrCat("--reuid=", u.uid), absl::StrCat("--regid=", u.gid)};
  argv.push_back(u.groups.empty() ? "--clear-groups" : absl::StrCat("--groups=", absl::StrJoin(u.groups, ",")));
  argv.push_back("--");
  for (const std::string& a : req->argv()) argv.push_back(a);
  req->clear_argv();
  for (std::string& a : argv) req->add_argv(std::move(a));
  auto& env = *req->mutable_env();
  if (env.empty()) {
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    env["TERM"] = "dumb";
  }
  env["HOME"] = u.home;
  if (!u.name.empty()) env["USER"] = u.name;
}

}  // namespace flotilla::worker
