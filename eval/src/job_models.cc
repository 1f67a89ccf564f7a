#include "flotilla/eval/job_models.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/worker/remote_chat.h"

namespace flotilla::eval {
namespace {

std::string Sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!(absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-')) c = '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.empty() ? "model" : out;
}

std::string LabelOf(const JobModel& m) {
  if (m.prefix.empty()) return "default";
  if (!worker::IsEndpointUrl(m.prefix)) {
    std::string p = m.prefix;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return Sanitize(p.substr(p.rfind('/') + 1));
  }
  std::string rest = m.prefix.substr(m.prefix.find("://") + 3);
  if (absl::EndsWith(rest, "/v1")) rest.resize(rest.size() - 3);
  return Sanitize(m.endpoint_model.empty() ? rest : absl::StrCat(rest, "-", m.endpoint_model));
}

}  // namespace

absl::StatusOr<std::vector<JobModel>> ParseJobModels(const std::vector<std::string>& args,
                                                     const std::string& endpoint_model) {
  std::vector<JobModel> out;
  std::set<std::string> seen_args, labels;
  for (const std::string& arg : args) {
    if (!seen_args.insert(arg).second) return absl::InvalidArgumentError(absl::StrCat("-m ", arg, ": given twice"));
    JobModel m{.arg = arg, .prefix = arg, .endpoint_model = "", .label = ""};
    if (worker::IsEndpointUrl(arg)) {
      m.endpoint_model = endpoint_model;
      if (size_t hash = arg.find('#'); hash != std::string::npos) {
        m.prefix = arg.substr(0, hash);
        m.endpoint_model = arg.substr(hash + 1);
        if (m.endpoint_model.empty()) {
          return absl::InvalidArgumentError(absl::StrCat("-m ", arg, ": empty model name after '#'"));
        }
      }
    }
    const std::string base = LabelOf(m);
    m.label = base;
    for (int n = 2; !labels.insert(m.label).second; ++n) m.label = absl::StrCat(base, "-", n);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace flotilla::eval
