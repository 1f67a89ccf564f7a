// Named address lists: the package mirrors of the machine's apt configuration, and loopback.
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {
namespace {

namespace fs = std::filesystem;

// "http://user@host:80/debian" -> "host"; "" for URIs without a network host (file:, cdrom:).
std::string HostOfUri(std::string_view uri) {
  size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return "";
  std::string_view rest = uri.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('/'));
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    return close == std::string_view::npos ? "" : std::string(rest.substr(1, close - 1));
  }
  rest = rest.substr(0, rest.find(':'));
  return absl::AsciiStrToLower(std::string(rest));
}

void AddHost(std::string host, std::vector<std::string>* out) {
  if (host.empty()) return;
  if (std::find(out->begin(), out->end(), host) == out->end()) out->push_back(std::move(host));
}

// One-line style: "deb [arch=amd64 signed-by=...] URI suite components...".
void ParseListFile(const std::string& text, std::vector<std::string>* out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string> tok = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (tok.empty() || (tok[0] != "deb" && tok[0] != "deb-src")) continue;
    size_t i = 1;
    if (i < tok.size() && absl::StartsWith(tok[i], "[")) {
      while (i < tok.size() && !absl::EndsWith(tok[i], "]")) ++i;
      ++i;
    }
    if (i < tok.size()) AddHost(HostOfUri(tok[i]), out);
  }
}

// deb822 style: paragraphs of "Field: value" with continuation lines; "Enabled: no" skips one.
void ParseSourcesFile(const std::string& text, std::vector<std::string>* out) {
  std::vector<std::string> paragraphs = absl::StrSplit(text, "\n\n");
  for (const auto& para : paragraphs) {
    std::vector<std::string> uris;
    bool enabled = true;
    std::string field;
    for (absl::string_view raw : absl::StrSplit(para, '\n')) {
      std::string line(raw);
      if (line.empty() || line[0] == '#') continue;
      std::string value;
      if (line[0] == ' ' || line[0] == '\t') {
        value = line;  // continuation of `field`
      } else {
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        field = absl::AsciiStrToLower(std::string(absl::StripAsciiWhitespace(line.substr(0, colon))));
        value = line.substr(colon + 1);
      }
      value = std::string(absl::StripAsciiWhitespace(value));
      if (field == "uris") {
        for (absl::string_view u : absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
          uris.emplace_back(u);
        }
      } else if (field == "enabled") {
        enabled = absl::AsciiStrToLower(value) != "no";
      }
    }
    if (!enabled) continue;
    for (const auto& u : uris) AddHost(HostOfUri(u), out);
  }
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::vector<Cidr>> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("package_mirrors: cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::vector<Cidr> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    char buf[NI_MAXHOST];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
      continue;
    }
    std::string text(buf);
    text = text.substr(0, text.find('%'));  // drop an IPv6 zone index
    auto c = Cidr::Parse(text);
    if (c.ok() && std::find(out.begin(), out.end(), *c) == out.end()) out.push_back(*c);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AptSourceHosts(const std::string& apt_root) {
  std::vector<std::string> hosts;
  fs::path etc_apt = fs::path(apt_root) / "etc/apt";
  if (fs::exists(etc_apt / "sources.list")) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(etc_apt / "sources.list"));
    ParseListFile(text, &hosts);
  }
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(etc_apt / "sources.list.d", ec)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // apt reads them in lexical order
  for (const auto& f : files) {
    std::string ext = f.extension().string();
    if (ext != ".list" && ext != ".sources") continue;
    ASSIGN_OR_RETURN(std::string text, ReadFile(f));
    if (ext == ".list") ParseListFile(text, &hosts);
    else ParseSourcesFile(text, &hosts);
  }
  return hosts;
}

absl::StatusOr<std::vector<Cidr>> ResolveNamedList(std::string_view name,
                                                   const PolicyLoadOptions& options) {
  std::vector<Cidr> out;
  if (name == "loopback") {
    for (const char* t : {"127.0.0.0/8", "::1/128"}) out.push_back(*Cidr::Parse(t));
    return out;
  }
  if (name != "package_mirrors") {
    return absl::NotFoundError(absl::StrCat("unknown address list '", std::string(name),
                                            "' (known: package_mirrors, loopback)"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> hosts, AptSourceHosts(options.apt_root));
  for (const auto& host : hosts) {
    auto literal = Cidr::Parse(host);  // a mirror given by address
    if (literal.ok()) {
      out.push_back(*literal);
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<Cidr> addrs, ResolveHost(host));
    for (const auto& c : addrs) {
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  return out;
}

}  // namespace flotilla::policies
