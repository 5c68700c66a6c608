// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Socket-layer egress policy, errno injection, transparent redirect and
 * per-destination accounting for one cgroup: connect/sendmsg/socket/bind hooks
 * decide, getpeername/recvmsg hide a redirect, cgroup_skb counts bytes. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "faultline/sockaddr_abi.h"
#include "faultline/dns_abi.h"
#include "lib/consts.bpf.h"
#include "lib/helpers.bpf.h"
#include "lib/skb_header.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_sa_policy);
} fl_sa_policy SEC(".maps");

/* The injection draw's seeded generator (--seed): one state shared by every CPU,
 * not one per CPU as for packets. A process's calls may move between CPUs, and
 * one stream in call order is what replays them; calls racing on two CPUs may
 * read the same state, and their order was not reproducible anyway. Read only
 * with FL_SA_SEEDED. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_rng);
} fl_sa_rng SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FL_SA_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_sa_key);
	__type(value, struct fl_sa_bucket);
} fl_sa_deny SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FL_SA_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_sa_key);
	__type(value, struct fl_sa_bucket);
} fl_sa_allow SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} fl_sa_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_sa_stats);
} fl_sa_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FL_SA_MAX_FLOWS);
	__type(key, struct fl_flow_key);
	__type(value, struct fl_flow);
} fl_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FL_SA_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_sa_key);
	__type(value, struct fl_sa_redir_bucket);
} fl_sa_redirect SEC(".maps");

/* The original destination of each redirected connect, for getpeername(). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fl_sa_orig);
} fl_sa_orig SEC(".maps");

/* Redirected TCP connections by (client, target), for the proxy that accepts
 * them: the one way for it to learn where the client asked to go. Filled at
 * connect time by fl_sockops, taken (deleted) by the proxy; LRU, so connections
 * no proxy accepted age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FL_SA_MAX_REDIR_CONNS);
	__type(key, struct fl_sa_conn_key);
	__type(value, struct fl_sa_orig);
} fl_sa_conns SEC(".maps");

/* An unconnected UDP socket may send to several redirected destinations, so the
 * source a reply comes from is mapped back per (socket, target), not per socket. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FL_SA_MAX_REDIR_REPLIES);
	__type(key, struct fl_sa_reply_key);
	__type(value, struct fl_sa_reply);
} fl_sa_replies SEC(".maps");

/* Set by the loader before load: whether cgroup_skb programs may call the task
 * helpers (bpf_get_current_pid_tgid, bpf_get_current_comm). Kernel 6.1 refuses
 * them there; the verifier skips the branches this constant rules out. */
const volatile __u32 fl_skb_task_helpers = 1;

/* Hits per allow/deny rule, indexed by rule id; the loader sizes it to the rule
 * list (an id past the end is not counted). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fl_sa_rule_hits SEC(".maps");

/* An applied policy (faultctl policy apply) is kept in two generations: the
 * policy value, both tries and the rule counters of each, side by side. Every
 * hook reads the live generation from fl_sa_gen once, first, and takes all of
 * them from that generation, so the one write that flips fl_sa_gen switches
 * every hook of every applied scope at once (the map is shared by all of them);
 * userspace builds the other generation beside the live one before the flip
 * and deletes the old one after an RCU grace period. The tries are inner maps
 * so that each generation is sized to its policy. Set by the loader before
 * load; a guard's, a syscall fault's and top's instances read the single maps
 * above and never these (the verifier drops the branch). */
const volatile __u32 fl_sa_generations = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fl_sa_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fl_sa_policy);
} fl_sa_gpolicy SEC(".maps");

/* The inner map templates give sizes, not BTF types: userspace creates each
 * generation's maps without BTF, and 6.1 compares an inner map with the
 * template field by field, BTF-derived ones included (its timer offset), so a
 * template with BTF would refuse them (EINVAL). */
struct fl_sa_gtrie {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1); /* each generation's own is sized to its policy */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(struct fl_sa_key));
	__uint(value_size, sizeof(struct fl_sa_bucket));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct fl_sa_gtrie);
} fl_sa_gdeny SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct fl_sa_gtrie);
} fl_sa_gallow SEC(".maps");

/* A shared array, not per CPU: the kernel refuses BPF_F_INNER_MAP (an inner
 * map of any size) on per-CPU arrays, so the hits are added atomically. */
struct fl_sa_ghits_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* BPF_F_INNER_MAP: each generation's is sized to its rules */
	__uint(map_flags, BPF_F_INNER_MAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u64));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct fl_sa_ghits_inner);
} fl_sa_ghits SEC(".maps");

/* The maps one call is decided with: the instance's own, or those of the live
 * generation of an applied policy. */
struct sa_view {
	struct fl_sa_policy *p;
	__u32 gen; /* the live generation (applied instances) */
	void *deny;
	void *allow;
	void *hits; /* NULL: not counted */
};

/* The scope's policy if it applies to this call, else NULL. The precise clock
 * is the dearest thing on this path (a TSC read, slow under a hypervisor), so
 * it is read only for a policy that can expire; a guard's or top's cannot. */
static __always_inline struct fl_sa_policy *policy_in(int from_skb, struct sa_view *v)
{
	__u32 zero = 0;
	struct fl_sa_policy *p;

	if (fl_sa_generations) {
		__u32 *live = bpf_map_lookup_elem(&fl_sa_gen, &zero);
		__u32 g;

		if (!live)
			return NULL;
		void *deny, *allow;

		g = *live;
		v->gen = g;
		p = bpf_map_lookup_elem(&fl_sa_gpolicy, &g);
		deny = bpf_map_lookup_elem(&fl_sa_gdeny, &g);
		allow = bpf_map_lookup_elem(&fl_sa_gallow, &g);
		/* A generation with a policy has both of its tries in place; a
		 * slot without them (deleted, or never filled) judges nothing. */
		if (!deny || !allow)
			return NULL;
		v->deny = deny;
		v->allow = allow;
		v->hits = bpf_map_lookup_elem(&fl_sa_ghits, &g);
	} else {
		p = bpf_map_lookup_elem(&fl_sa_policy, &zero);
		v->deny = &fl_sa_deny;
		v->allow = &fl_sa_allow;
		v->hits = &fl_sa_rule_hits;
	}
	v->p = p;
	if (!p || !p->armed)
		return NULL;
	if (p->expires_ns != FL_SA_NO_EXPIRY && bpf_ktime_get_boot_ns() >= p->expires_ns)
		return NULL;
	if (from_skb && !fl_skb_task_helpers)
		return p; /* no process filter on packets there: the cgroup is the scope */
	if (p->target_tgid && (bpf_get_current_pid_tgid() >> 32) != p->target_tgid)
		return NULL;
	return p;
}

static __always_inline struct fl_rng *seeded(const struct fl_sa_policy *p)
{
	__u32 zero = 0;

	return (p->flags & FL_SA_SEEDED) ? bpf_map_lookup_elem(&fl_sa_rng, &zero) : NULL;
}

static __always_inline struct fl_sa_policy *policy(struct sa_view *v)
{
	return policy_in(0, v);
}

/* A flow's last-seen stamp: coarse (a jiffy), and no TSC read (see policy_in()). */
static __always_inline __u64 stamp(void)
{
	return bpf_ktime_get_coarse_ns();
}

static __always_inline struct fl_sa_stats *stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fl_sa_stats, &zero);
}

static __always_inline void emit_in(int from_skb, __u8 op, __u8 verdict, __u32 rule,
				    const struct fl_addr *a, __u16 port, __u8 proto, __u64 bytes)
{
	struct fl_sa_event *e = bpf_ringbuf_reserve(&fl_sa_events, sizeof(*e), 0);
	struct fl_sa_stats *st;

	if (!e) {
		st = stats();
		if (st)
			st->events_lost++;
		return;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->bytes = bytes;
	e->pid = from_skb && !fl_skb_task_helpers ? 0 : bpf_get_current_pid_tgid() >> 32;
	e->rule = rule;
	e->port = port;
	e->op = op;
	e->verdict = verdict;
	e->proto = proto;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	if (a)
		e->addr = *a;
	else
		__builtin_memset(&e->addr, 0, sizeof(e->addr));
	if (from_skb && !fl_skb_task_helpers)
		__builtin_memset(e->comm, 0, sizeof(e->comm));
	else
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void emit(__u8 op, __u8 verdict, __u32 rule, const struct fl_addr *a,
				 __u16 port, __u8 proto, __u64 bytes)
{
	emit_in(0, op, verdict, rule, a, port, proto, bytes);
}

/* The first rule in the bucket whose port range and protocol match. */
static __always_inline int match(void *trie, const struct fl_addr *a, __u16 port, __u8 proto)
{
	struct fl_sa_key k = { .prefixlen = 128, .addr = *a };
	struct fl_sa_bucket *b = bpf_map_lookup_elem(trie, &k);

	if (!b)
		return -1;
	for (int i = 0; i < FL_SA_RULE_SLOTS; i++) {
		struct fl_sa_rule *r;

		if (i >= b->n)
			break;
		r = &b->r[i];
		if (r->proto && r->proto != proto)
			continue;
		if (r->port_hi && (port < r->port_lo || port > r->port_hi))
			continue;
		return r->id;
	}
	return -1;
}

#include "lib/dns_learn.bpf.h"

/* v4 hooks may read only user_ip4 and v6 hooks only user_ip6, so the family is
 * a constant of each entry point, not a runtime branch. */
static __always_inline void sa_addr(struct bpf_sock_addr *ctx, struct fl_addr *a, int v6)
{
	__u32 *w = (__u32 *)a->b;

	if (!v6) {
		fl_addr_from_v4(a, ctx->user_ip4);
	} else {
		w[0] = ctx->user_ip6[0];
		w[1] = ctx->user_ip6[1];
		w[2] = ctx->user_ip6[2];
		w[3] = ctx->user_ip6[3];
	}
}

/* The other direction: only the family's own words are written (see sa_addr). */
static __always_inline void sa_set(struct bpf_sock_addr *ctx, const struct fl_addr *a, __u16 port_be, int v6)
{
	const __u32 *w = (const __u32 *)a->b;

	if (!v6) {
		ctx->user_ip4 = w[3];
	} else {
		ctx->user_ip6[0] = w[0];
		ctx->user_ip6[1] = w[1];
		ctx->user_ip6[2] = w[2];
		ctx->user_ip6[3] = w[3];
	}
	ctx->user_port = port_be;
}

static __always_inline int addr_eq(const struct fl_addr *x, const struct fl_addr *y)
{
	const __u32 *a = (const __u32 *)x->b, *b = (const __u32 *)y->b;

	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static __always_inline int is_v4(const struct fl_addr *a)
{
	const __u32 *w = (const __u32 *)a->b;

	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

/* The first redirect rule covering the destination whose ports, protocol and
 * family fit. The family check keeps an IPv6 rule as wide as ::/0 from sending
 * an IPv4-mapped destination to an IPv6 target a v4 hook cannot write. */
static __always_inline struct fl_sa_redir_rule *redirect_rule(const struct fl_addr *a, __u16 port, __u8 proto)
{
	struct fl_sa_key k = { .prefixlen = 128, .addr = *a };
	struct fl_sa_redir_bucket *b = bpf_map_lookup_elem(&fl_sa_redirect, &k);
	__u8 v4 = is_v4(a);

	if (!b)
		return NULL;
	for (int i = 0; i < FL_SA_REDIR_SLOTS; i++) {
		struct fl_sa_redir_rule *r;

		if (i >= b->n)
			break;
		r = &b->r[i];
		if (r->proto && r->proto != proto)
			continue;
		if (r->port_hi && (port < r->port_lo || port > r->port_hi))
			continue;
		if (r->v4 != v4)
			continue;
		return r;
	}
	return NULL;
}

/* A call the verdict lets through goes to the target of the redirect rule that
 * covers it. What the application asked for is written down first (connect:
 * the socket's storage, for getpeername; UDP: the reply map, for recvmsg), and
 * if it cannot be, the call is not redirected: a redirect the application can
 * see through is worse than none. sendmsg fires per datagram, so a datagram is
 * reported only when it starts a (socket, target, original) triple. */
static __always_inline void redirect(struct bpf_sock_addr *ctx, struct fl_sa_policy *p, struct fl_sa_stats *st,
				     __u8 op, int v6, const struct fl_addr *a, __u16 port, __u8 proto)
{
	struct fl_sa_redir_rule *r;
	__u16 target_port;
	int fresh = 1;

	if (!(p->flags & FL_SA_REDIRECT))
		return;
	/* The proxy's own connections upstream: sent where they asked to go. */
	if (p->exempt_mark && ctx->sk && ctx->sk->mark == p->exempt_mark)
		return;
	r = redirect_rule(a, port, proto);
	if (!r)
		return;
	target_port = bpf_htons(r->target_port);
	if (op == FL_OP_CONNECT) {
		struct fl_sa_orig *o = bpf_sk_storage_get(&fl_sa_orig, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

		if (!o)
			return;
		o->orig = *a;
		o->orig_port = ctx->user_port;
		o->target = r->target;
		o->target_port = target_port;
	}
	if (proto == IPPROTO_UDP) {
		struct fl_sa_reply_key rk;
		struct fl_sa_reply rv;
		struct fl_sa_reply *old;

		__builtin_memset(&rk, 0, sizeof(rk));
		__builtin_memset(&rv, 0, sizeof(rv));
		rk.cookie = bpf_get_socket_cookie(ctx);
		rk.target = r->target;
		rk.target_port = target_port;
		rv.orig = *a;
		rv.orig_port = ctx->user_port;
		old = bpf_map_lookup_elem(&fl_sa_replies, &rk);
		if (op == FL_OP_SENDMSG && old && old->orig_port == rv.orig_port && addr_eq(&old->orig, a))
			fresh = 0;
		else if (bpf_map_update_elem(&fl_sa_replies, &rk, &rv, BPF_ANY) && op == FL_OP_SENDMSG)
			return;
	}
	st->redirected++;
	if ((p->flags & FL_SA_EVENTS) && fresh)
		emit(op, FL_V_REDIRECT, r->id, a, port, proto, 0);
	sa_set(ctx, &r->target, target_port, v6);
}

static __always_inline int fail_with(__u32 err)
{
	bpf_set_retval(-(int)err);
	return 0;
}

/* Errno injection first (a syscall fault), then the policy: deny rules, then
 * allow rules, then the default. Returns 1 to let the call proceed. */
static __always_inline int decide(struct bpf_sock_addr *ctx, __u8 op, int v6)
{
	struct sa_view v;
	struct fl_sa_policy *p = policy(&v);
	struct fl_sa_stats *st;
	struct fl_addr a;
	__u16 port;
	__u8 proto;
	__u32 type;
	int rule, denied;

	if (!p)
		return 1;
	st = stats();
	if (!st)
		return 1;
	sa_addr(ctx, &a, v6);
	port = bpf_ntohs(ctx->user_port);
	/* The verifier accepts only a whole 4-byte read of bpf_sock_addr.type. The
	 * empty asm hides the value from clang, so it stays that one load, made
	 * here, rather than a narrower or repeated read of ctx where the result is
	 * used. (clang 14 happens to emit the same load without it.) */
	type = ctx->type;
	asm volatile("" : "+r"(type));
	proto = type == SOCK_STREAM ? IPPROTO_TCP : type == SOCK_DGRAM ? IPPROTO_UDP : 0;

	if ((p->inject_ops & FL_OP_BIT(op)) && fl_call_turn(&p->inject_budget, p->inject_prob, seeded(p))) {
		st->injected++;
		if (p->flags & FL_SA_EVENTS)
			emit(op, FL_V_INJECT, FL_SA_RULE_DEFAULT, &a, port, proto, 0);
		return fail_with(p->inject_errno);
	}
	rule = -1;
	denied = 0;
	if (p->flags & FL_SA_POLICY) {
		if (p->flags & FL_SA_HAS_DENY)
			rule = match(v.deny, &a, port, proto);
		if (rule < 0)
			rule = host_match(&v, &a, port, proto, 1);
		denied = rule >= 0;
		if (!denied) {
			if (p->flags & FL_SA_HAS_ALLOW)
				rule = match(v.allow, &a, port, proto);
			if (rule < 0)
				rule = host_match(&v, &a, port, proto, 0);
			if (rule < 0)
				denied = !(p->flags & FL_SA_DEFAULT_ALLOW);
		}
		if (rule >= 0) {
			__u32 id = rule;
			__u64 *hits = v.hits ? bpf_map_lookup_elem(v.hits, &id) : NULL;

			if (hits)
				__sync_fetch_and_add(hits, 1);
		}
	}
	/* A connect that goes ahead (allowed, or only monitored) opens a flow. */
	if (op == FL_OP_CONNECT && (!denied || !(p->flags & FL_SA_ENFORCE))) {
		struct fl_flow_key fk = { .addr = a, .port = port, .proto = proto };
		/* Only an allow rule exempts a flow from the exfil cap; in
		 * monitor mode a deny rule's match goes ahead, capped. */
		struct fl_flow init = { .allowed = !denied && rule >= 0 };
		struct fl_flow *f = fl_lookup_or_init(&fl_flows, &fk, &init);

		if (f) {
			__sync_fetch_and_add(&f->connects, 1);
			f->last_seen_ns = stamp();
			f->allowed = !denied && rule >= 0;
		}
	}
	if (!(p->flags & FL_SA_POLICY)) {
		/* accounting only (faultctl top) */
	} else if (!denied) {
		st->allowed++;
		/* UDP sendmsg fires per datagram: report only connects. */
		if ((p->flags & FL_SA_EVENTS) && op == FL_OP_CONNECT)
			emit(op, FL_V_ALLOW, rule >= 0 ? rule : FL_SA_RULE_DEFAULT, &a, port, proto, 0);
	} else if (!(p->flags & FL_SA_ENFORCE)) {
		st->would_deny++;
		if (p->flags & FL_SA_EVENTS)
			emit(op, FL_V_WOULD_DENY, rule >= 0 ? rule : FL_SA_RULE_DEFAULT, &a, port, proto, 0);
	} else {
		st->denied++;
		if (p->flags & FL_SA_EVENTS)
			emit(op, FL_V_DENY, rule >= 0 ? rule : FL_SA_RULE_DEFAULT, &a, port, proto, 0);
		return fail_with(p->deny_errno ? p->deny_errno : 1 /* EPERM */);
	}
	/* The call goes ahead (a monitored would-deny too: it reaches the target,
	 * never the destination the operator chose to redirect away from). */
	redirect(ctx, p, st, op, v6, &a, port, proto);
	return 1;
}

SEC("cgroup/connect4")
int fl_connect4(struct bpf_sock_addr *ctx)
{
	return decide(ctx, FL_OP_CONNECT, 0);
}

SEC("cgroup/connect6")
int fl_connect6(struct bpf_sock_addr *ctx)
{
	return decide(ctx, FL_OP_CONNECT, 1);
}

SEC("cgroup/sendmsg4")
int fl_sendmsg4(struct bpf_sock_addr *ctx)
{
	return decide(ctx, FL_OP_SENDMSG, 0);
}

SEC("cgroup/sendmsg6")
int fl_sendmsg6(struct bpf_sock_addr *ctx)
{
	return decide(ctx, FL_OP_SENDMSG, 1);
}

/* getpeername() on a redirected socket reports what the application asked for,
 * as long as the socket is still connected to the target it was sent to (a UDP
 * socket may connect again, elsewhere). This does not look at the policy: once
 * disarmed, sockets already redirected still are, and still hide it. */
static __always_inline int restore_peer(struct bpf_sock_addr *ctx, int v6)
{
	struct fl_sa_orig *o = bpf_sk_storage_get(&fl_sa_orig, ctx->sk, 0, 0);
	struct fl_addr peer;

	if (!o)
		return 1;
	sa_addr(ctx, &peer, v6);
	if (ctx->user_port == o->target_port && addr_eq(&peer, &o->target))
		sa_set(ctx, &o->orig, o->orig_port, v6);
	return 1;
}

SEC("cgroup/getpeername4")
int fl_getpeername4(struct bpf_sock_addr *ctx)
{
	return restore_peer(ctx, 0);
}

SEC("cgroup/getpeername6")
int fl_getpeername6(struct bpf_sock_addr *ctx)
{
	return restore_peer(ctx, 1);
}

/* recvmsg() on a UDP socket: a datagram from a redirect target this socket sent
 * to reads as coming from the original destination. */
static __always_inline int restore_source(struct bpf_sock_addr *ctx, int v6)
{
	struct fl_sa_reply_key k;
	struct fl_sa_reply *r;

	__builtin_memset(&k, 0, sizeof(k));
	sa_addr(ctx, &k.target, v6);
	k.target_port = ctx->user_port;
	k.cookie = bpf_get_socket_cookie(ctx);
	r = bpf_map_lookup_elem(&fl_sa_replies, &k);
	if (r)
		sa_set(ctx, &r->orig, r->orig_port, v6);
	return 1;
}

/* A redirected TCP connect has picked its source address and port: file the
 * connection under (client, target), where the proxy will look it up when it
 * accepts. TCP_CONNECT_CB runs before the SYN leaves, so the entry is there
 * before the proxy can see the connection. */
SEC("sockops")
int fl_sockops(struct bpf_sock_ops *ctx)
{
	struct fl_sa_conn_key k;
	struct fl_sa_orig *o;
	struct bpf_sock *sk;

	if (ctx->op != BPF_SOCK_OPS_TCP_CONNECT_CB)
		return 1;
	sk = ctx->sk;
	if (!sk)
		return 1;
	o = bpf_sk_storage_get(&fl_sa_orig, sk, 0, 0);
	if (!o)
		return 1;
	__builtin_memset(&k, 0, sizeof(k));
	if (ctx->family == AF_INET) {
		fl_addr_from_v4(&k.client, ctx->local_ip4);
	} else {
		__u32 *w = (__u32 *)k.client.b;

		w[0] = ctx->local_ip6[0];
		w[1] = ctx->local_ip6[1];
		w[2] = ctx->local_ip6[2];
		w[3] = ctx->local_ip6[3];
	}
	k.client_port = bpf_htons((__u16)ctx->local_port);
	k.target = o->target;
	k.target_port = o->target_port;
	bpf_map_update_elem(&fl_sa_conns, &k, o, BPF_ANY);
	return 1;
}

SEC("cgroup/recvmsg4")
int fl_recvmsg4(struct bpf_sock_addr *ctx)
{
	return restore_source(ctx, 0);
}

SEC("cgroup/recvmsg6")
int fl_recvmsg6(struct bpf_sock_addr *ctx)
{
	return restore_source(ctx, 1);
}

/* bind only takes errno injection: a policy is about where traffic goes. */
static __always_inline int bind_hook(struct bpf_sock_addr *ctx)
{
	struct sa_view v;
	struct fl_sa_policy *p = policy(&v);
	struct fl_sa_stats *st;

	if (!p || !(p->inject_ops & FL_OP_BIT(FL_OP_BIND)) || !fl_call_turn(&p->inject_budget, p->inject_prob, seeded(p)))
		return 1;
	st = stats();
	if (st)
		st->injected++;
	if (p->flags & FL_SA_EVENTS)
		emit(FL_OP_BIND, FL_V_INJECT, FL_SA_RULE_DEFAULT, NULL, bpf_ntohs(ctx->user_port), 0, 0);
	return fail_with(p->inject_errno);
}

SEC("cgroup/bind4")
int fl_bind4(struct bpf_sock_addr *ctx)
{
	return bind_hook(ctx);
}

SEC("cgroup/bind6")
int fl_bind6(struct bpf_sock_addr *ctx)
{
	return bind_hook(ctx);
}

SEC("cgroup/sock_create")
int fl_sock_create(struct bpf_sock *ctx)
{
	struct sa_view v;
	struct fl_sa_policy *p = policy(&v);
	struct fl_sa_stats *st;

	if (!p || !(p->inject_ops & FL_OP_BIT(FL_OP_SOCKET)))
		return 1;
	if (ctx->family != AF_INET && ctx->family != AF_INET6)
		return 1; /* leave unix and netlink sockets alone */
	if (!fl_call_turn(&p->inject_budget, p->inject_prob, seeded(p)))
		return 1;
	st = stats();
	if (st)
		st->injected++;
	if (p->flags & FL_SA_EVENTS)
		emit(FL_OP_SOCKET, FL_V_INJECT, FL_SA_RULE_DEFAULT, NULL, 0, ctx->protocol, 0);
	return fail_with(p->inject_errno);
}

/* cgroup_skb sees the IP header at offset 0. */
static __always_inline int flow_of(struct __sk_buff *skb, int egress, struct fl_flow_key *k)
{
	__u32 l4;
	__be16 pbuf[2], *ports;

	__builtin_memset(k, 0, sizeof(*k));
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr buf, *ip = fl_skb_header(skb, 0, sizeof(buf), &buf);

		if (!ip)
			return -1;
		fl_addr_from_v4(&k->addr, egress ? ip->daddr : ip->saddr);
		k->proto = ip->protocol;
		l4 = ip->ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr buf, *ip6 = fl_skb_header(skb, 0, sizeof(buf), &buf);

		if (!ip6)
			return -1;
		__builtin_memcpy(k->addr.b, egress ? &ip6->daddr : &ip6->saddr, 16);
		k->proto = ip6->nexthdr;
		l4 = sizeof(*ip6);
	} else {
		return -1;
	}
	if (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP) {
		ports = fl_skb_header(skb, l4, sizeof(pbuf), pbuf);
		if (ports)
			k->port = bpf_ntohs(egress ? ports[1] : ports[0]);
	}
	return 0;
}

SEC("cgroup_skb/egress")
int fl_skb_egress(struct __sk_buff *skb)
{
	struct sa_view v;
	struct fl_sa_policy *p = policy_in(1, &v);
	struct fl_flow_key k;
	struct fl_flow *f;

	if (!p || flow_of(skb, 1, &k))
		return 1;
	f = bpf_map_lookup_elem(&fl_flows, &k);
	if (!f) {
		struct fl_flow init = {};

		/* Not seen at connect (UDP, or a socket made before us): ask the
		 * allow rules once, so the cap spares allowed destinations. */
		init.allowed = (p->flags & FL_SA_HAS_ALLOW) && match(v.allow, &k.addr, k.port, k.proto) >= 0;
		f = fl_create_and_lookup(&fl_flows, &k, &init);
		if (!f)
			return 1;
	}
	f->last_seen_ns = stamp();
	if (p->exfil_cap && !f->allowed) {
		if (f->capped || f->bytes_out + skb->len > p->exfil_cap) {
			struct fl_sa_stats *st = stats();
			int enforce = p->flags & FL_SA_ENFORCE;

			/* One event when the cap is first crossed. */
			if (!__sync_lock_test_and_set(&f->capped, 1))
				emit_in(1, FL_OP_EGRESS, enforce ? FL_V_EXFIL : FL_V_WOULD_EXFIL, FL_SA_RULE_DEFAULT,
					&k.addr, k.port, k.proto, f->bytes_out);
			/* Monitor mode reports the crossing and blocks nothing. */
			if (enforce) {
				if (st)
					st->exfil_dropped++;
				return 0;
			}
		}
	}
	__sync_fetch_and_add(&f->bytes_out, skb->len);
	__sync_fetch_and_add(&f->packets_out, 1);
	return 1;
}

SEC("cgroup_skb/ingress")
int fl_skb_ingress(struct __sk_buff *skb)
{
	struct sa_view v;
	struct fl_flow_key k;
	struct fl_flow *f;

	if (!policy_in(1, &v) || flow_of(skb, 0, &k))
		return 1;
	f = bpf_map_lookup_elem(&fl_flows, &k);
	if (!f)
		return 1; /* count only destinations the cgroup reached out to */
	__sync_fetch_and_add(&f->bytes_in, skb->len);
	__sync_fetch_and_add(&f->packets_in, 1);
	f->last_seen_ns = stamp();
	return 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
