// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Helper programs for fl_bench_progrun, run with BPF_PROG_TEST_RUN only.
 *
 * flb_stage_*: the netfault egress path cut after each step (control map, parse,
 * exact-address lookup, prefix lookup as netfault makes it: hash probes per
 * length or the trie, lib/prefix_index.bpf.h) on the same pinned maps, so the cost of
 * each step is the difference between two neighbours. The parse is netfault's
 * own, from lib/packet_parse.bpf.h.
 *
 * flb_rand_dst: writes a random destination address into the packet, then tail
 * calls whatever sits in flb_next[0] (the real netfault program, or an empty
 * one for the baseline). Every run then looks up a different key, which is what
 * a real mix of destinations does to the caches; PROG_TEST_RUN with one packet
 * only ever looks up one hot key. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "faultline/abi.h"
#include "lib/consts.bpf.h"
#include "lib/helpers.bpf.h"
#include "lib/packet_parse.bpf.h"
#include "lib/prefix_index.bpf.h"

/* The netfault maps this object shares, found by pin name (definitions must
 * match bpf/netfault.bpf.c for libbpf to reuse them). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_control);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_control SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FL_MAX_EXACT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_addr);
	__type(value, struct fl_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} flb_next SEC(".maps");

/* Random destinations are drawn from the gaps of the benchmark's CIDR set
 * (10.0.0.0/24, 10.0.2.0/24, ... every other /24 from 10.0.0.0, 10k of them):
 * 10.0.(2k+1).x never matches, walks the prefix trie to full depth, and never
 * collides with the exact-address set (10.128.0.0 upwards). */
#define FLB_CIDR_COUNT 10000

/* level 1: control map; 2: + parse (IP and L4, as netfault's handle() runs
 * them); 3: + exact lookup; 4: + prefix lookup. Level 9 is level 2 plus a
 * bpf_ktime_get_boot_ns(), to price the clock. */
static __always_inline int stage(struct __sk_buff *skb, int level)
{
	struct fl_pkt p = {};
	struct fl_control *ctl;
	__u32 zero = 0;
	__u64 now;
	int l4;

	ctl = bpf_map_lookup_elem(&fl_control, &zero);
	if (!ctl || !ctl->armed)
		return TC_PASS;
	if (skb->mark & ctl->dup_mark)
		return TC_PASS;
	if (level < 2)
		return TC_PASS;
	l4 = fl_parse_ip(skb, &p, FL_DIR_EGRESS);
	if (l4 == FL_PARSE_NOT_IP)
		return TC_PASS;
	if (l4 == FL_PARSE_L4)
		fl_parse_l4(skb, &p, FL_DIR_EGRESS);
	/* In netfault any field the parse fills may be read later, so every write
	 * stays; here clang would drop those a level does not read, and price a
	 * smaller parse. */
	asm volatile("" : : "r"(&p) : "memory");
	if (level == 9) {
		now = bpf_ktime_get_boot_ns();
		return now == 1 ? 2 : TC_PASS;
	}
	if (level < 3)
		return p.rport == 1 ? 2 : TC_PASS; /* keeps the parse alive */
	if (bpf_map_lookup_elem(&fl_exact, &p.remote))
		return 2;
	if (level < 4)
		return TC_PASS;
	if (fl_prefix_find(&p.remote, ctl->index))
		return 2;
	return TC_PASS;
}

SEC("tc")
int flb_stage_ctl(struct __sk_buff *skb)
{
	return stage(skb, 1);
}

SEC("tc")
int flb_stage_parse(struct __sk_buff *skb)
{
	return stage(skb, 2);
}

SEC("tc")
int flb_stage_exact(struct __sk_buff *skb)
{
	return stage(skb, 3);
}

SEC("tc")
int flb_stage_prefix(struct __sk_buff *skb)
{
	return stage(skb, 4);
}

SEC("tc")
int flb_stage_parse_clock(struct __sk_buff *skb)
{
	return stage(skb, 9);
}

/* Level 2 by hand, with bare direct packet access: IPv4 without options, no
 * copy for headers outside the linear area, no IPv6. The floor under the real
 * parse, so that the difference prices what its generality costs. */
SEC("tc")
int flb_stage_parse_direct(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct fl_pkt p = {};
	struct fl_control *ctl;
	struct iphdr *ip;
	__u16 *ports;
	__u32 zero = 0;

	ctl = bpf_map_lookup_elem(&fl_control, &zero);
	if (!ctl || !ctl->armed)
		return TC_PASS;
	if (skb->mark & ctl->dup_mark)
		return TC_PASS;
	if (bpf_ntohs(skb->protocol) != ETH_P_IP)
		return TC_PASS;
	ip = data + ETH_HLEN;
	if ((void *)(ip + 1) > end || ip->ihl != 5)
		return TC_PASS;
	fl_addr_from_v4(&p.remote, ip->daddr);
	fl_addr_from_v4(&p.local, ip->saddr);
	p.proto = ip->protocol;
	ports = (void *)(ip + 1);
	if ((void *)(ports + 2) > end)
		return TC_PASS;
	p.lport = bpf_ntohs(ports[0]);
	p.rport = bpf_ntohs(ports[1]);
	return p.rport == 1 ? 2 : TC_PASS;
}

SEC("tc")
int flb_rand_dst(struct __sk_buff *skb)
{
	__u32 r = bpf_get_prandom_u32();
	__u32 host = ((r % FLB_CIDR_COUNT) << 9) | 0x100 | (r >> 24);
	__be32 daddr = bpf_htonl(0x0a000000 | host);

	/* No checksum fix-up: nothing past the program reads it. */
	bpf_skb_store_bytes(skb, ETH_HLEN + 16, &daddr, sizeof(daddr), 0);
	bpf_tail_call(skb, &flb_next, 0);
	return TC_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
