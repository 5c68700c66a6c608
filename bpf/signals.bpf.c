// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Kernel signals for guardrails: TCP retransmits and resets, per network
 * namespace and per destination, as per-CPU counters. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "faultline/signals_abi.h"
#include "lib/consts.bpf.h"
#include "lib/helpers.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* netns inode */
	__type(value, struct fl_sig_counts);
} fl_sig_ns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct fl_sig_key);
	__type(value, struct fl_sig_counts);
} fl_sig_dst SEC(".maps");

static __always_inline void bump(const struct sock *sk, enum fl_sig_event ev)
{
	struct fl_sig_counts zero = {}, *c;
	struct fl_sig_key k = {};
	__u16 family;

	if (!sk)
		return;
	k.netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET) {
		fl_addr_from_v4(&k.daddr, BPF_CORE_READ(sk, __sk_common.skc_daddr));
	} else if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&k.daddr, sk, __sk_common.skc_v6_daddr);
	} else {
		return;
	}
	for (int i = 0; i < 2; i++) {
		void *map = i == 0 ? (void *)&fl_sig_ns : (void *)&fl_sig_dst;
		void *key = i == 0 ? (void *)&k.netns : (void *)&k;

		c = fl_lookup_or_init(map, key, &zero);
		if (!c)
			continue;
		if (ev == FL_SIG_RETRANSMIT)
			c->retransmits++;
		else if (ev == FL_SIG_RESET_SENT)
			c->resets_sent++;
		else
			c->resets_received++;
	}
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(fl_sig_retx, const struct sock *sk)
{
	bump(sk, FL_SIG_RETRANSMIT);
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(fl_sig_rst_tx, const struct sock *sk)
{
	bump(sk, FL_SIG_RESET_SENT);
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(fl_sig_rst_rx, struct sock *sk)
{
	bump(sk, FL_SIG_RESET_RECEIVED);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
