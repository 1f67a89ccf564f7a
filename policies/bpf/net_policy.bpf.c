// SPDX-License-Identifier: GPL-2.0
// Per-sandbox network policy at the cgroup socket-address hooks.
//
// One LPM trie holds every sandbox's rules: key = (prefix length, cgroup id, IPv6 address, with
// IPv4 as ::ffff:a.b.c.d). A lookup with the caller's cgroup id and the destination address
// finds the longest matching prefix of that sandbox; the destination port must be in the
// entry's port ranges, and an entry marked deny refuses everything. No entry: refused.
// Refusal = return 0 = the syscall fails with EPERM; each refusal bumps the sandbox's counter.
#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "net_policy_abi.h"

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, 65536);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct flotilla_rule_key);
  __type(value, struct flotilla_rule_value);
} flotilla_rules SEC(".maps");

// Entries are created from user space at attach time, so nothing is preallocated: creating a
// preallocated 65536-entry map costs milliseconds in every process that loads these programs.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u64);
  __type(value, __u64);
} flotilla_denials SEC(".maps");

static __always_inline int decide(struct flotilla_rule_key *key, __u64 cgroup_id, __u16 port) {
  struct flotilla_rule_value *v = bpf_map_lookup_elem(&flotilla_rules, key);
  if (v && !(v->flags & FLOTILLA_RULE_DENY)) {
    for (int i = 0; i < FLOTILLA_MAX_PORT_RANGES; i++) {
      if (i >= v->nranges) break;
      if (port >= v->ranges[i].lo && port <= v->ranges[i].hi) return 1;
    }
  }
  __u64 *count = bpf_map_lookup_elem(&flotilla_denials, &cgroup_id);
  if (count) __sync_fetch_and_add(count, 1);
  return 0;
}

static __always_inline void key_init(struct flotilla_rule_key *key, __u64 cgroup_id) {
  key->prefixlen = FLOTILLA_KEY_BITS;
  __builtin_memcpy(key->data, &cgroup_id, 8);
}

static __always_inline int check4(struct bpf_sock_addr *ctx) {
  struct flotilla_rule_key key = {};
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  key_init(&key, cgroup_id);
  key.data[8 + 10] = 0xff;
  key.data[8 + 11] = 0xff;
  __u32 ip = ctx->user_ip4;
  __builtin_memcpy(&key.data[8 + 12], &ip, 4);
  return decide(&key, cgroup_id, bpf_ntohs((__u16)ctx->user_port));
}

static __always_inline int check6(struct bpf_sock_addr *ctx) {
  struct flotilla_rule_key key = {};
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  key_init(&key, cgroup_id);
  __u32 w0 = ctx->user_ip6[0];
  __u32 w1 = ctx->user_ip6[1];
  __u32 w2 = ctx->user_ip6[2];
  __u32 w3 = ctx->user_ip6[3];
  __builtin_memcpy(&key.data[8], &w0, 4);
  __builtin_memcpy(&key.data[12], &w1, 4);
  __builtin_memcpy(&key.data[16], &w2, 4);
  __builtin_memcpy(&key.data[20], &w3, 4);
  return decide(&key, cgroup_id, bpf_ntohs((__u16)ctx->user_port));
}

SEC("cgroup/connect4")
int flotilla_connect4(struct bpf_sock_addr *ctx) { return check4(ctx); }

SEC("cgroup/sendmsg4")
int flotilla_sendmsg4(struct bpf_sock_addr *ctx) { return check4(ctx); }

SEC("cgroup/connect6")
int flotilla_connect6(struct bpf_sock_addr *ctx) { return check6(ctx); }

SEC("cgroup/sendmsg6")
int flotilla_sendmsg6(struct bpf_sock_addr *ctx) { return check6(ctx); }

char LICENSE[] SEC("license") = "GPL";
