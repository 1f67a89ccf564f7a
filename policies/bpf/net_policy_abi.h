// The layout shared by the BPF network programs and the user-space loader.
#pragma once

#ifdef __cplusplus
#include <cstdint>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
#endif

#define FLOTILLA_MAX_PORT_RANGES 16
#define FLOTILLA_RULE_DENY 1u
// 64 bits of cgroup id, then 128 bits of address.
#define FLOTILLA_KEY_BITS (64 + 128)

struct flotilla_rule_key {
  __u32 prefixlen;   // 64 + address prefix bits
  __u8 data[24];     // cgroup id (host order), IPv6 address (network order)
};

struct flotilla_port_range {
  __u16 lo;
  __u16 hi;
};

struct flotilla_rule_value {
  __u32 flags;       // FLOTILLA_RULE_DENY
  __u32 nranges;
  struct flotilla_port_range ranges[FLOTILLA_MAX_PORT_RANGES];
};
