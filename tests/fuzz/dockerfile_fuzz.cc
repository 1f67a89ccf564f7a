// Dockerfiles of task environments (environments/include/flotilla/environments/dockerfile.h):
// parsed into instructions or refused naming the file and line; each instruction's arguments
// then go through variable expansion and word splitting, as the build does.
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "flotilla/environments/dockerfile.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

FLOTILLA_FUZZ_TARGET(dockerfile) {
  namespace env = flotilla::environments;
  auto df = env::ParseDockerfile(std::string(reinterpret_cast<const char*>(data), size), "Dockerfile");
  if (!df.ok()) {
    FUZZ_CHECK(df.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(df.status().message().find("Dockerfile") != std::string::npos);
    return;
  }
  const std::map<std::string, std::string> vars = {{"HOME", "/root"}, {"PATH", "/usr/bin:/bin"}, {"V", "1.2"}};
  int last_line = 0;
  for (const env::Instruction& in : df->instructions) {
    FUZZ_CHECK(in.line >= 1 && in.line >= last_line);
    last_line = in.line;
    FUZZ_CHECK(!in.keyword.empty() && in.keyword == absl::AsciiStrToUpper(in.keyword));
    if (in.exec_form) {
      for (const std::string& a : in.exec_args) (void)env::ExpandVariables(a, vars);
    } else {
      auto expanded = env::ExpandVariables(in.args, vars);
      if (expanded.ok()) (void)env::SplitWords(*expanded);
    }
  }
}
