// Address prefixes, port ranges and the --allow flag syntax.
#include <arpa/inet.h>

#include <charconv>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/policies/policy.h"

namespace flotilla::policies {
namespace {

bool ParseUint(std::string_view s, uint32_t max, uint32_t* out) {
  if (s.empty()) return false;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > max) return false;
  *out = v;
  return true;
}

absl::Status BadCidr(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat("bad CIDR '", std::string(text), "'"));
}

}  // namespace

absl::StatusOr<Cidr> Cidr::Parse(std::string_view text) {
  std::string_view addr_part = text;
  std::string_view len_part;
  bool has_len = false;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    addr_part = text.substr(0, slash);
    len_part = text.substr(slash + 1);
    has_len = true;
  }
  std::string addr_str(addr_part);
  Cidr c;
  in_addr v4{};
  in6_addr v6{};
  uint32_t len = 0;
  if (inet_pton(AF_INET, addr_str.c_str(), &v4) == 1) {
    if (has_len && !ParseUint(len_part, 32, &len)) return BadCidr(text);
    if (!has_len) len = 32;
    c.ipv4 = true;
    c.addr[10] = 0xff;
    c.addr[11] = 0xff;
    std::memcpy(&c.addr[12], &v4, 4);
    c.prefix_len = static_cast<uint8_t>(96 + len);
  } else if (inet_pton(AF_INET6, addr_str.c_str(), &v6) == 1) {
    if (has_len && !ParseUint(len_part, 128, &len)) return BadCidr(text);
    if (!has_len) len = 128;
    std::memcpy(c.addr.data(), &v6, 16);
    c.prefix_len = static_cast<uint8_t>(len);
  } else {
    return BadCidr(text);
  }
  for (int bit = c.prefix_len; bit < 128; ++bit) {
    if (c.addr[bit / 8] & (0x80 >> (bit % 8))) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CIDR '", std::string(text), "': host bits set beyond /", len));
    }
  }
  return c;
}

bool Cidr::Contains(const Cidr& other) const {
  if (other.prefix_len < prefix_len) return false;
  for (int bit = 0; bit < prefix_len; ++bit) {
    uint8_t mask = 0x80 >> (bit % 8);
    if ((addr[bit / 8] & mask) != (other.addr[bit / 8] & mask)) return false;
  }
  return true;
}

std::string Cidr::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  if (ipv4) {
    inet_ntop(AF_INET, &addr[12], buf, sizeof(buf));
    return absl::StrCat(buf, "/", prefix_len - 96);
  }
  inet_ntop(AF_INET6, addr.data(), buf, sizeof(buf));
  return absl::StrCat(buf, "/", prefix_len);
}

absl::StatusOr<PortRange> ParsePortRange(std::string_view text) {
  PortRange r;
  uint32_t lo = 0;
  uint32_t hi = 0;
  size_t dash = text.find('-');
  bool ok = dash == std::string_view::npos
                ? ParseUint(text, 65535, &lo) && (hi = lo, true)
                : ParseUint(text.substr(0, dash), 65535, &lo) &&
                      ParseUint(text.substr(dash + 1), 65535, &hi);
  if (!ok || lo > hi || lo == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port '", std::string(text), "' (use 1..65535 or LO-HI)"));
  }
  r.lo = static_cast<uint16_t>(lo);
  r.hi = static_cast<uint16_t>(hi);
  return r;
}

absl::StatusOr<NetworkRule> ParseAllowFlag(std::string_view text) {
  std::string_view cidr_part = text;
  std::string_view port_part;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return BadCidr(text);
    cidr_part = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return BadCidr(text);
      port_part = rest.substr(1);
    }
  } else if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    if (text.find(':', colon + 1) != std::string_view::npos) {
      // A bare IPv6 address: no port (write "[addr/len]:port" to give one).
      cidr_part = text;
    } else {
      cidr_part = text.substr(0, colon);
      port_part = text.substr(colon + 1);
    }
  }
  NetworkRule rule;
  auto cidr = Cidr::Parse(cidr_part);
  if (!cidr.ok()) return cidr.status();
  rule.cidr = *cidr;
  if (port_part.empty()) {
    rule.ports.push_back(PortRange{});
  } else {
    auto r = ParsePortRange(port_part);
    if (!r.ok()) return r.status();
    rule.ports.push_back(*r);
  }
  return rule;
}

}  // namespace flotilla::policies
