/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Small helpers that more than one program needs. BPF side only: include after
 * vmlinux.h and bpf_helpers.h. */
#ifndef FAULTLINE_HELPERS_BPF_H
#define FAULTLINE_HELPERS_BPF_H

#include <bpf/bpf_endian.h>
#include "faultline/abi.h"

/* An IPv4 address as struct fl_addr holds it: IPv4-mapped, ::ffff:a.b.c.d. */
static __always_inline void fl_addr_from_v4(struct fl_addr *a, __be32 ip)
{
	__u32 *w = (__u32 *)a->b;

	w[0] = 0;
	w[1] = 0;
	w[2] = bpf_htonl(0x0000ffff);
	w[3] = ip;
}

/* True with probability prob / (2^32 - 1), the scale of every probability in
 * the ABI. 2^32 - 1 means always: a draw of exactly that value must not fail
 * one call in 2^32. */
static __always_inline int fl_chance(__u32 prob)
{
	return prob == 0xFFFFFFFFU || bpf_get_prandom_u32() < prob;
}

/* 32 random bits: from a fault's seeded state (--seed) when it has one, else
 * from the kernel's generator. xorshift64*, the same step as SeededRandom in
 * base/seeded_random.h. The state is per CPU, so no other CPU races the
 * read-modify-write; a program is not preempted by itself on one CPU. */
static __always_inline __u32 fl_draw(struct fl_rng *r)
{
	__u64 x;

	if (!r)
		return bpf_get_prandom_u32();
	x = r->state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->state = x;
	return (__u32)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

/* fl_chance() with the fault's generator: "always" consumes no draw. */
static __always_inline int fl_chance_rng(struct fl_rng *r, __u32 prob)
{
	return prob == 0xFFFFFFFFU || fl_draw(r) < prob;
}

/* One injection more under a cap of max (0 = no cap), counted in *claimed.
 * Increment first, compare after: each CPU gets a distinct ticket from the
 * atomic add, so tickets 0..max-1 inject and every later one passes; at most
 * max injections happen however many CPUs race. The last ticket stamps
 * *reached_ns. Shared by the packet faults' fl_budget and the syscall faults'
 * fl_call_budget. */
static __always_inline int fl_take_ticket(__u64 *claimed, __u64 max, __u64 *reached_ns)
{
	__u64 ticket;

	if (!max)
		return 1;
	ticket = __sync_fetch_and_add(claimed, 1);
	if (ticket >= max)
		return 0;
	if (ticket + 1 == max)
		*reached_ns = bpf_ktime_get_boot_ns();
	return 1;
}

/* Whether a syscall fault fails this matching call: inert before start_ns, then
 * the first `after` calls pass, then the draw (from r, a seeded generator, when
 * given), then the cap. Each atomic add hands out a distinct ticket, so exactly
 * `after` calls pass and at most `max` fail however many CPUs call at once. */
static __always_inline int fl_call_turn(struct fl_call_budget *b, __u32 prob, struct fl_rng *r)
{
	if (b->start_ns && bpf_ktime_get_boot_ns() < b->start_ns)
		return 0;
	if (b->after && __sync_fetch_and_add(&b->seen, 1) < b->after)
		return 0;
	if (!fl_chance_rng(r, prob))
		return 0;
	return fl_take_ticket(&b->claimed, b->max, &b->reached_ns);
}

/* For a caller that has already missed key: creates its entry from init and
 * returns the entry the map holds. BPF_NOEXIST, so that when another CPU
 * creates it first, that entry stands. NULL when the map is full. */
static __always_inline void *fl_create_and_lookup(void *map, const void *key, const void *init)
{
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/* The entry under key, created from init if there is none yet. */
static __always_inline void *fl_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	return v ? v : fl_create_and_lookup(map, key, init);
}

#endif /* FAULTLINE_HELPERS_BPF_H */
