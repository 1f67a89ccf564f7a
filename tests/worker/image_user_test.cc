// The image's USER resolved against its /etc/passwd and /etc/group, and the exec it makes.
#include "flotilla/worker/image_user.h"

#include "gtest/gtest.h"

namespace flotilla::worker {
namespace {

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# a comment\n"
    "writer:x:2001:2001::/home/writer:/bin/bash\n"
    "svc:x:999:998::/nonexistent:/usr/sbin/nologin\n";
constexpr const char* kGroup =
    "root:x:0:\n"
    "writer:x:2001:\n"
    "svc:x:998:\n"
    "editors:x:2100:writer,svc\n"
    "audio:x:29:writer\n";

TEST(ImageUserTest, ResolvesNamesNumbersAndGroups) {
  struct Case {
    std::string user;
    uint32_t uid, gid;
    std::vector<uint32_t> groups;
    std::string name, home;
  };
  for (const Case& c : std::vector<Case>{
           {"writer", 2001, 2001, {2100, 29}, "writer", "/home/writer"},
           {"2001", 2001, 2001, {2100, 29}, "writer", "/home/writer"},
           {"writer:editors", 2001, 2100, {29}, "writer", "/home/writer"},
           {"svc:0", 999, 0, {2100}, "svc", "/nonexistent"},
           {"4242", 4242, 4242, {}, "", "/"},
           {"4242:7", 4242, 7, {}, "", "/"}}) {
    auto u = ResolveImageUser(c.user, kPasswd, kGroup);
    ASSERT_TRUE(u.ok()) << c.user << ": " << u.status();
    EXPECT_EQ(u->uid, c.uid) << c.user;
    EXPECT_EQ(u->gid, c.gid) << c.user;
    EXPECT_EQ(u->groups, c.groups) << c.user;
    EXPECT_EQ(u->name, c.name) << c.user;
    EXPECT_EQ(u->home, c.home) << c.user;
  }
}

TEST(ImageUserTest, ErrorsNameTheFileLineAndField) {
  struct Case {
    std::string user, passwd, group;
    absl::StatusCode code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"deploy", kPasswd, kGroup, absl::StatusCode::kNotFound,
            "USER deploy: no such user in the image's /etc/passwd"},
           {"writer:staff", kPasswd, kGroup, absl::StatusCode::kNotFound,
            "USER writer:staff: no such group in the image's /etc/group"},
           {"writer", "root:x:0:0:root:/root:/bin/bash\nwriter:x:abc:1::/h:/bin/sh\n", "", absl::StatusCode::kInvalidArgument,
            "/etc/passwd:2: uid: 'abc' is not a number"},
           {"writer", "writer:x:1\n", "", absl::StatusCode::kInvalidArgument, "/etc/passwd:1: expected 7 fields, got 3"},
           {"writer", kPasswd, "editors:x:zz:writer\n", absl::StatusCode::kInvalidArgument,
            "/etc/group:1: gid: 'zz' is not a number"}}) {
    auto u = ResolveImageUser(c.user, c.passwd, c.group);
    ASSERT_FALSE(u.ok()) << c.user;
    EXPECT_EQ(u.status().code(), c.code) << c.user;
    EXPECT_EQ(u.status().message(), c.message) << c.user;
  }
  EXPECT_TRUE(IsRootUser(""));
  EXPECT_TRUE(IsRootUser("0:0"));
  EXPECT_FALSE(IsRootUser("writer"));
}

TEST(ImageUserTest, RunAsUserWrapsTheCommandInSetpriv) {
  auto u = ResolveImageUser("writer", kPasswd, kGroup);
  ASSERT_TRUE(u.ok());
  v1::ExecRequest req;
  req.add_argv("bash");
  req.add_argv("-lc");
  req.add_argv("id");
  (*req.mutable_env())["HOME"] = "/root";
  (*req.mutable_env())["PATH"] = "/bin";
  RunAsUser(*u, &req);
  std::vector<std::string> argv(req.argv().begin(), req.argv().end());
  EXPECT_EQ(argv, (std::vector<std::string>{"setpriv", "--reuid=2001", "--regid=2001", "--groups=2100,29", "--",
                                            "bash", "-lc", "id"}));
  EXPECT_EQ(req.env().at("HOME"), "/home/writer");
  EXPECT_EQ(req.env().at("USER"), "writer");
  EXPECT_EQ(req.env().at("PATH"), "/bin");

  auto bare = ResolveImageUser("4242", kPasswd, kGroup);
  ASSERT_TRUE(bare.ok());
  v1::ExecRequest r2;
  r2.add_argv("true");
  RunAsUser(*bare, &r2);
  EXPECT_EQ(r2.argv(3), "--clear-groups");
  EXPECT_EQ(r2.env().at("HOME"), "/");
  EXPECT_EQ(r2.env().at("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(r2.env().count("USER"), 0u);
}

}  // namespace
}  // namespace flotilla::worker
