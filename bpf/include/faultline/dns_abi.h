/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Host rules learned from DNS answers: the watched names an applied scope's
 * ingress program matches questions against, and the addresses it learns;
 * shared by sockaddr.bpf.c, the parser twin (bpf/lib/dns_parse.h) and userspace. */
#ifndef FAULTLINE_DNS_ABI_H
#define FAULTLINE_DNS_ABI_H

#include "faultline/sockaddr_abi.h"

#define FL_DNS_MAX_WATCH 8192    /* watched names of both generations of one scope */
#define FL_DNS_MAX_LEARNED 16384 /* learned addresses of one scope (LRU) */
#define FL_DNS_LEARN_SLOTS 4     /* names one address is learned under at once */
#define FL_DNS_TTL_MIN_DEFAULT 30
#define FL_DNS_TTL_MAX_DEFAULT 3600

/* A watched name: the hash of a name (fl_dns_hash of the wire form, labels
 * lowercased), exact (wild 0: the name itself) or as a suffix (wild 1: every
 * name strictly below it, a rule `*.suffix`), in one generation. */
struct fl_dns_watch_key {
	__u64 hash;
	__u32 gen;
	__u8 wild;
	__u8 pad[3];
};

/* The host rules of one watched name, as the tries hold address rules (rule
 * ids share the scope's counter space), and the scope's TTL clamp. */
struct fl_dns_watch {
	struct fl_sa_bucket deny;
	struct fl_sa_bucket allow;
	__u32 ttl_min; /* seconds */
	__u32 ttl_max;
};

/* One name an address was learned under, until expires_ns (CLOCK_BOOTTIME). */
struct fl_dns_learn_slot {
	__u64 hash;
	__u64 expires_ns; /* 0: empty slot */
	__u8 wild;
	__u8 pad[7];
};

/* Keyed by the address (struct fl_addr, IPv4-mapped). */
struct fl_dns_learned {
	struct fl_dns_learn_slot n[FL_DNS_LEARN_SLOTS];
};

/* Per CPU counters of the learning program. */
struct fl_dns_stats {
	__u64 answers;     /* DNS responses seen (UDP, source port 53) */
	__u64 matched;     /* of them, a question a watched name matches */
	__u64 malformed;   /* matched, refused as malformed: nothing learned */
	__u64 learned;     /* address entries written */
	__u64 expired;     /* learned entries found expired at a connect, deleted */
};

#ifdef __cplusplus
static_assert(sizeof(struct fl_dns_watch_key) == 16, "fl_dns_watch_key");
static_assert(sizeof(struct fl_dns_watch) == 216, "fl_dns_watch");
static_assert(sizeof(struct fl_dns_learned) == 96, "fl_dns_learned");
static_assert(sizeof(struct fl_dns_stats) == 40, "fl_dns_stats");
#endif

#endif /* FAULTLINE_DNS_ABI_H */
