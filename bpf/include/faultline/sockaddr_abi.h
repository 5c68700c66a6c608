/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Socket-layer policy and errno injection: shared by sockaddr.bpf.c and userspace. */
#ifndef FAULTLINE_SOCKADDR_ABI_H
#define FAULTLINE_SOCKADDR_ABI_H

#include "faultline/abi.h"

#define FL_SA_RULE_SLOTS 8
#define FL_SA_MAX_PREFIXES 1048576 /* per trie; tries are created without preallocation */
#define FL_SA_MAX_RULES 1048576    /* address rules (ids) per scope */
#define FL_SA_MAX_FLOWS 65536
#define FL_SA_REDIR_SLOTS 8
#define FL_SA_MAX_REDIR_REPLIES 16384 /* (socket, target) pairs whose replies are restored */
#define FL_SA_MAX_REDIR_CONNS 65536   /* redirected TCP connections a proxy has not accepted yet */

/* fl_sa_policy.flags */
#define FL_SA_ENFORCE (1U << 0)       /* deny for real; else monitor (count, report) */
#define FL_SA_DEFAULT_ALLOW (1U << 1) /* no rule matched: allow */
#define FL_SA_POLICY (1U << 2)        /* the allow/deny rules apply */
#define FL_SA_EVENTS (1U << 3)        /* report decisions on the ring buffer */
#define FL_SA_REDIRECT (1U << 4)      /* the redirect rules apply */
#define FL_SA_HAS_DENY (1U << 5)      /* the deny trie holds rules (else its lookup is skipped) */
#define FL_SA_HAS_ALLOW (1U << 6)     /* the allow trie holds rules */
#define FL_SA_SEEDED (1U << 7)        /* the injection draw comes from fl_sa_rng (--seed) */
#define FL_SA_HAS_HOSTS (1U << 8)     /* host rules: learned addresses apply (see dns_abi.h) */

/* Operations, for errno injection and events. */
enum fl_sa_op {
	FL_OP_CONNECT = 1,
	FL_OP_SENDMSG = 2,
	FL_OP_SOCKET = 3,
	FL_OP_BIND = 4,
	FL_OP_EGRESS = 5, /* a packet leaving (exfil accounting) */
};
#define FL_OP_BIT(op) (1U << (op))

enum fl_sa_verdict {
	FL_V_ALLOW = 1,      /* a rule or the default allowed it */
	FL_V_DENY = 2,       /* denied (enforce) */
	FL_V_WOULD_DENY = 3, /* monitor mode: would have been denied */
	FL_V_INJECT = 4,     /* errno injected by a syscall fault */
	FL_V_EXFIL = 5,      /* exfil cap reached: egress to the destination dropped */
	FL_V_WOULD_EXFIL = 6, /* monitor mode: the cap was crossed, nothing dropped */
	FL_V_REDIRECT = 7,    /* sent to a redirect rule's target instead */
};

/* One scope (a cgroup) gets one instance of the programs with this policy. */
#define FL_SA_NO_EXPIRY (~0ULL) /* fl_sa_policy.expires_ns of a scope that lives as long as its owner */

struct fl_sa_policy {
	__u64 expires_ns;  /* CLOCK_BOOTTIME; 0 = inactive; FL_SA_NO_EXPIRY: never checked */
	__u64 exfil_cap;   /* bytes to one destination not allowed by a rule; 0 = off */
	__u32 flags;       /* FL_SA_* */
	__u32 deny_errno;  /* errno a denied connect/sendmsg gets (EPERM if 0) */
	__u32 target_tgid; /* 0 = every process of the cgroup */
	__u32 inject_ops;  /* FL_OP_BIT() set of operations to fail */
	__u32 inject_prob; /* P(fail) scaled to 2^32 - 1 */
	__u32 inject_errno;
	__u32 armed;       /* 0: the programs pass everything (kill switch) */
	__u32 exempt_mark; /* a socket with this SO_MARK is never redirected; 0 = none */
	/* Appended: a reader or writer of the shorter layout (a guard's map read by
	 * ID) sees the same first 48 bytes. */
	struct fl_call_budget inject_budget; /* brakes of errno injection */
};

/* The SO_MARK the proxy sets on the connections it opens upstream, so that a
 * redirect to the proxy (exempt_mark) never sends the proxy back to itself. */
#define FL_PROXY_MARK 0x464c5058u /* "FLPX" */

struct fl_sa_key {
	__u32 prefixlen; /* over addr, 0..128 (IPv4-mapped) */
	struct fl_addr addr;
};

struct fl_sa_rule {
	__u16 port_lo; /* 0..0 = any port */
	__u16 port_hi;
	__u8 proto;    /* 0 = any */
	__u8 pad[3];
	__u32 id;      /* index into the userspace rule list, for reporting (< FL_SA_MAX_RULES) */
};

/* Rules of one verdict whose prefix covers the key, longest first. */
struct fl_sa_bucket {
	__u8 n;
	__u8 pad[7];
	struct fl_sa_rule r[FL_SA_RULE_SLOTS];
};

/* A redirect rule: destinations it covers go to target instead. The target is
 * of the destination's family (IPv4-mapped for IPv4); userspace refuses a mix. */
struct fl_sa_redir_rule {
	__u16 port_lo; /* 0..0 = any port */
	__u16 port_hi;
	__u8 proto;    /* 0 = any */
	__u8 v4;       /* the target (and so the destination) is IPv4 */
	__u16 id;      /* index into the userspace redirect list, for reporting */
	struct fl_addr target;
	__u16 target_port; /* host order */
	__u8 pad[2];
};

/* Redirect rules whose prefix covers the key, longest first (as fl_sa_bucket). */
struct fl_sa_redir_bucket {
	__u8 n;
	__u8 pad[3];
	struct fl_sa_redir_rule r[FL_SA_REDIR_SLOTS];
};

/* Per socket (sk storage): where the application asked to go and where it was
 * sent, so getpeername() reports the first while the socket is on the second. */
struct fl_sa_orig {
	struct fl_addr orig;
	struct fl_addr target;
	__u16 orig_port;   /* network order, as in bpf_sock_addr */
	__u16 target_port; /* network order */
	__u8 pad[4];
};

/* A redirected TCP connection as the proxy that accepts it sees it: the client
 * (the accepted socket's peer) and the target (its local address), both known
 * once the client's connect has picked its source port. The value is the
 * client socket's fl_sa_orig: where the application asked to go. */
struct fl_sa_conn_key {
	struct fl_addr client;
	struct fl_addr target;
	__u16 client_port; /* network order */
	__u16 target_port; /* network order */
	__u8 pad[4];
};

/* Replies to a redirected unconnected UDP socket: (socket, target) -> original. */
struct fl_sa_reply_key {
	__u64 cookie; /* bpf_get_socket_cookie */
	struct fl_addr target;
	__u16 target_port; /* network order */
	__u8 pad[6];
};

struct fl_sa_reply {
	struct fl_addr orig;
	__u16 orig_port; /* network order */
	__u8 pad[2];
};

struct fl_sa_event {
	__u64 ts_ns;
	__u64 bytes; /* exfil events: bytes sent to the destination so far */
	__u32 pid;
	__u32 rule;  /* FL_SA_RULE_DEFAULT: the default decided */
	__u16 port;
	__u8 op;      /* enum fl_sa_op */
	__u8 verdict; /* enum fl_sa_verdict */
	__u8 proto;
	__u8 pad[3];
	struct fl_addr addr;
	char comm[16];
};

struct fl_flow_key {
	struct fl_addr addr;
	__u16 port;
	__u8 proto;
	__u8 pad;
};

struct fl_flow {
	__u64 connects;
	__u64 bytes_out;
	__u64 bytes_in;
	__u64 packets_out;
	__u64 packets_in;
	__u64 last_seen_ns; /* CLOCK_MONOTONIC_COARSE (a jiffy's resolution, no TSC read) */
	__u32 capped;       /* exfil cap reached; further egress dropped */
	__u32 allowed;      /* an allow rule covers it (exempt from the cap) */
};

struct fl_sa_stats {
	__u64 allowed;
	__u64 denied;
	__u64 would_deny;
	__u64 injected;
	__u64 exfil_dropped;
	__u64 events_lost;
	__u64 redirected; /* connects and datagrams sent to a redirect target */
};

#define FL_SA_RULE_DEFAULT 0xffffffffU

#ifdef __cplusplus
static_assert(sizeof(struct fl_sa_policy) == 96, "fl_sa_policy");
static_assert(sizeof(struct fl_sa_key) == 20, "fl_sa_key");
static_assert(sizeof(struct fl_sa_rule) == 12, "fl_sa_rule");
static_assert(sizeof(struct fl_sa_bucket) == 104, "fl_sa_bucket");
static_assert(sizeof(struct fl_sa_event) == 64, "fl_sa_event");
static_assert(sizeof(struct fl_flow_key) == 20, "fl_flow_key");
static_assert(sizeof(struct fl_flow) == 56, "fl_flow");
static_assert(sizeof(struct fl_sa_stats) == 56, "fl_sa_stats");
static_assert(sizeof(struct fl_sa_redir_rule) == 28, "fl_sa_redir_rule");
static_assert(sizeof(struct fl_sa_redir_bucket) == 228, "fl_sa_redir_bucket");
static_assert(sizeof(struct fl_sa_orig) == 40, "fl_sa_orig");
static_assert(sizeof(struct fl_sa_reply_key) == 32, "fl_sa_reply_key");
static_assert(sizeof(struct fl_sa_conn_key) == 40, "fl_sa_conn_key");
static_assert(sizeof(struct fl_sa_reply) == 20, "fl_sa_reply");
#endif

#endif /* FAULTLINE_SOCKADDR_ABI_H */
