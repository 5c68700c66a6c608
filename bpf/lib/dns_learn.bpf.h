/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Host rules of an applied policy, part of sockaddr.bpf.c (included there,
 * after the decision helpers): fl_dns_ingress learns addresses from the DNS
 * answers the scope's sockets receive, host_match() judges a connect or
 * sendmsg by them. Only applied instances (fl_sa_generations) use them.
 *
 * Why in the kernel: cgroup_skb/ingress runs when the answer is delivered to
 * the socket, before the application can read it, so its first connect after
 * the lookup finds the address already learned; no userspace in the loop. */
#ifndef FAULTLINE_DNS_LEARN_BPF_H
#define FAULTLINE_DNS_LEARN_BPF_H

#include "lib/dns_parse.h"

/* Watched names of both generations, written by apply (key carries the generation). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FL_DNS_MAX_WATCH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_dns_watch_key);
	__type(value, struct fl_dns_watch);
} fl_dns_watch SEC(".maps");

/* Learned addresses: LRU, so a flood of answers cannot grow it past its size. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FL_DNS_MAX_LEARNED);
	__type(key, struct fl_addr);
	__type(value, struct fl_dns_learned);
} fl_dns_learn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_dns_scratch);
} fl_dns_scr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_dns_stats);
} fl_dns_stats SEC(".maps");

static __always_inline struct fl_dns_scratch *fl_dns_scratch_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fl_dns_scr, &zero);
}

static __always_inline struct fl_dns_stats *dns_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fl_dns_stats, &zero);
}

/* The first rule of the asked verdict among the names the address was learned
 * under, in the live generation; -1 if none. An entry whose every name has
 * expired is deleted here (and ignored). */
static __always_inline int host_match(const struct sa_view *v, const struct fl_addr *a, __u16 port, __u8 proto,
				      int deny)
{
	struct fl_dns_learned *l;
	__u64 now;
	int live = 0;

	if (!fl_sa_generations || !(v->p->flags & FL_SA_HAS_HOSTS))
		return -1;
	l = bpf_map_lookup_elem(&fl_dns_learn, a);
	if (!l)
		return -1;
	now = bpf_ktime_get_boot_ns();
	for (int i = 0; i < FL_DNS_LEARN_SLOTS; i++) {
		struct fl_dns_watch_key k;
		struct fl_dns_watch *w;
		struct fl_sa_bucket *b;

		if (l->n[i].expires_ns <= now)
			continue;
		live = 1;
		__builtin_memset(&k, 0, sizeof(k));
		k.hash = l->n[i].hash;
		k.gen = v->gen;
		k.wild = l->n[i].wild;
		w = bpf_map_lookup_elem(&fl_dns_watch, &k);
		if (!w)
			continue; /* a name the live policy no longer has */
		b = deny ? &w->deny : &w->allow;
		for (int j = 0; j < FL_SA_RULE_SLOTS; j++) {
			struct fl_sa_rule *r;

			if (j >= b->n)
				break;
			r = &b->r[j];
			if (r->proto && r->proto != proto)
				continue;
			if (r->port_hi && (port < r->port_lo || port > r->port_hi))
				continue;
			return r->id;
		}
	}
	if (!live) {
		struct fl_dns_stats *st = dns_stats();

		if (!bpf_map_delete_elem(&fl_dns_learn, a) && st)
			st->expired++;
	}
	return -1;
}

/* The watched names a question matches: its whole name exactly, and each
 * strict suffix as a wildcard (`*.suffix`). Per CPU in a map, like the
 * parser's scratch: to the verifier its fields are unknown, so each step of a
 * loop over it looks the same and is checked once. */
struct dns_match {
	__u64 hash[FL_DNS_LEARN_SLOTS];
	__u8 wild[FL_DNS_LEARN_SLOTS];
	__u32 n;
	__u32 gen;
	__u32 ttl_min;
	__u32 ttl_max;
	__u64 now;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct dns_match);
} fl_dns_mscr SEC(".maps");

static __always_inline struct dns_match *dns_match_get(void) {
  __u32 zero = 0;

  return bpf_map_lookup_elem(&fl_dns_mscr, &zero);
}

static __attribute__((noinline)) long dns_match_step(__u64 i, void *ctx) {
  struct fl_dns_scratch *s = fl_dns_scratch_get();
  struct dns_match *m = dns_match_get();
  struct fl_dns_watch_key k;
  struct fl_dns_watch *w;

  (void)ctx;
  if (!s || !m || i >= s->qlabels || m->n >= FL_DNS_LEARN_SLOTS) return 1;
  __builtin_memset(&k, 0, sizeof(k));
  k.hash = s->suffix[FL_DNS_IDX(i, FL_DNS_LABELS)];
  k.gen = m->gen;
  k.wild = i > 0;
  w = bpf_map_lookup_elem(&fl_dns_watch, &k);
  if (!w) return 0;
  m->hash[FL_DNS_IDX(m->n, FL_DNS_LEARN_SLOTS)] = k.hash;
  m->wild[FL_DNS_IDX(m->n, FL_DNS_LEARN_SLOTS)] = k.wild;
  m->ttl_min = w->ttl_min;
  m->ttl_max = w->ttl_max;
  m->n++;
  return 0;
}

/* The i-th address of the answer, learned under every matched name.
 *
 * A global function (not static): the verifier checks it once, on its own,
 * with i unknown, and its callers see only an unknown return value. As a
 * static callback of bpf_loop it was checked in its caller's state, once per
 * combination of the slot each name took (constants on the stack), and since
 * 6.7 the verifier re-walks a callback until its states converge: that
 * product reached the 1M-instruction limit on one 6.18 build (issue 24).
 *
 * The entry is updated in place, slot by slot, not copied and replaced: the
 * stack copy is what made the states differ. A connect on another CPU may see
 * a slot half written: a slot being taken over gets its expiry cleared first,
 * so it is ignored (never matched under a wrong name) until complete. */
__attribute__((noinline)) int fl_dns_learn_one(__u32 i) {
  struct fl_dns_scratch *s = fl_dns_scratch_get();
  struct dns_match *m = dns_match_get();
  struct fl_dns_learned *l;
  struct fl_dns_stats *st;
  struct fl_addr a;
  __u64 ttl, exp;

  if (!s || !m || i >= s->naddrs || i >= FL_DNS_MAX_ADDRS) return 1;
  a = s->addr[FL_DNS_IDX(i, FL_DNS_MAX_ADDRS)];
  ttl = s->ttl[FL_DNS_IDX(i, FL_DNS_MAX_ADDRS)];
  if (ttl < m->ttl_min) ttl = m->ttl_min;
  if (ttl > m->ttl_max) ttl = m->ttl_max;
  exp = m->now + ttl * 1000000000ULL;
  l = bpf_map_lookup_elem(&fl_dns_learn, &a);
  if (!l) {
    struct fl_dns_learned empty;

    __builtin_memset(&empty, 0, sizeof(empty));
    bpf_map_update_elem(&fl_dns_learn, &a, &empty, BPF_NOEXIST);
    l = bpf_map_lookup_elem(&fl_dns_learn, &a);
    if (!l) return 0;
  }
  for (int j = 0; j < FL_DNS_LEARN_SLOTS; j++) {
    int slot = -1, oldest = 0;

    if (j >= m->n) break;
    for (int k = 0; k < FL_DNS_LEARN_SLOTS; k++) {
      if (l->n[k].hash == m->hash[j] && l->n[k].wild == m->wild[j]) {
        slot = k;
        break;
      }
      if (l->n[k].expires_ns < l->n[oldest].expires_ns) oldest = k;
    }
    if (slot < 0) {
      /* an empty or expired slot, else the one to expire first */
      slot = oldest;
      l->n[slot].expires_ns = 0;
      l->n[slot].hash = m->hash[j];
      l->n[slot].wild = m->wild[j];
    }
    l->n[slot].expires_ns = exp;
  }
  st = dns_stats();
  if (st) st->learned++;
  return 0;
}

static __attribute__((noinline)) long dns_learn_step(__u64 i, void *ctx) {
  (void)ctx;
  return fl_dns_learn_one((__u32)i) ? 1 : 0;
}

/* The UDP payload of a response from port 53, or 0. */
static __always_inline __u32 dns_payload(struct __sk_buff *skb, __u32 *len)
{
	__u32 l4, end;
	struct udphdr ubuf, *u;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr buf, *ip = fl_skb_header(skb, 0, sizeof(buf), &buf);

		if (!ip || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3fff)))
			return 0; /* fragments are not parsed */
		l4 = ip->ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr buf, *ip6 = fl_skb_header(skb, 0, sizeof(buf), &buf);

		if (!ip6 || ip6->nexthdr != IPPROTO_UDP)
			return 0; /* extension headers are not walked */
		l4 = sizeof(*ip6);
	} else {
		return 0;
	}
	u = fl_skb_header(skb, l4, sizeof(ubuf), &ubuf);
	if (!u || u->source != bpf_htons(53))
		return 0;
	end = l4 + bpf_ntohs(u->len);
	if (end > skb->len)
		end = skb->len;
	if (end < l4 + sizeof(*u))
		return 0;
	*len = end - l4 - sizeof(*u);
	return l4 + sizeof(*u);
}

SEC("cgroup_skb/ingress")
int fl_dns_ingress(struct __sk_buff *skb)
{
	struct fl_dns_scratch *s;
	struct fl_dns_stats *st;
	struct fl_sa_policy *p;
        struct dns_match *m;
        __u32 zero = 0, *live, off, len = 0, ancount = 0, q, gen;

        if (!fl_sa_generations)
		return 1;
	live = bpf_map_lookup_elem(&fl_sa_gen, &zero);
	if (!live)
		return 1;
        gen = *live;
        p = bpf_map_lookup_elem(&fl_sa_gpolicy, &gen);
        if (!p || !p->armed || !(p->flags & FL_SA_HAS_HOSTS))
		return 1;
	off = dns_payload(skb, &len);
	if (!off || len < 12)
		return 1;
	s = fl_dns_scratch_get();
	st = dns_stats();
        m = dns_match_get();
        if (!s || !st || !m) return 1;
        __builtin_memset(m, 0, sizeof(*m));
        m->gen = gen;
        if (len > FL_DNS_BUF)
		len = FL_DNS_BUF; /* the rest is not read: records past it count as cut short */
	if (bpf_skb_load_bytes(skb, off, s->msg, len))
		return 1;
	s->len = len;
	st->answers++;
	q = fl_dns_question(s, &ancount);
	if (!q)
		return 1;
        bpf_loop(FL_DNS_LABELS, dns_match_step, NULL, 0);
        if (!m->n) return 1;
        st->matched++;
	if (fl_dns_answers(s, q, ancount)) {
		st->malformed++;
		return 1;
	}
        m->now = bpf_ktime_get_boot_ns();
        bpf_loop(FL_DNS_MAX_ADDRS, dns_learn_step, NULL, 0);
        return 1;
}

#endif /* FAULTLINE_DNS_LEARN_BPF_H */
