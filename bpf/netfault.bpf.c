// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Packet faults at TCX/clsact: parse, find the fault that applies, act, count. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "faultline/abi.h"
#include "lib/consts.bpf.h"
#include "lib/helpers.bpf.h"
#include "lib/packet_parse.bpf.h"
#include "lib/prefix_index.bpf.h"

/* Set by the loader before load: one program instance per network namespace. */
const volatile __u32 fl_netns_ino = 0;
const volatile __u32 fl_egress_drop = FL_EGRESS_DROP_REDIRECT;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_control);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_control SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_fault);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_faults SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FL_MAX_EXACT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_addr);
	__type(value, struct fl_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_EXACT_BLOOM_BLOCKS);
	__uint(map_flags, BPF_F_MMAPABLE); /* userspace sets and clears bits in place */
	__type(key, __u32);
	__type(value, struct fl_exact_bloom_block);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_exact_bloom SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FL_MAX_DNS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_dns_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_dns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_fault_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_budget);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_rng);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_rng SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FL_DROP_REASON_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_loss_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_loss_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_MAX_FAULTS);
	__type(key, __u32);
	__type(value, struct fl_rate_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_rate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_DIST_MAX);
	__type(key, __u32);
	__type(value, struct fl_dist_table);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_dist SEC(".maps");

/* Userspace bookkeeping kept beside the data path so that every piece of state
 * is pinned in one place and readable from any shell: what each fault is, and
 * where programs are attached. The programs never read these. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FL_MAX_FAULTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct fl_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_meta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_attach_key);
	__type(value, struct fl_attach_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_attach SEC(".maps");

/* Scratch space for the DNS name: too large for the 512-byte stack. */
struct dns_scratch {
	__u8 raw[FL_DNS_NAME_MAX];
	struct fl_dns_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dns_scratch);
} fl_dns_scratch SEC(".maps");

static __always_inline int masked_eq(const struct fl_addr *a, const struct fl_addr *want,
				     const struct fl_addr *mask)
{
	const __u32 *x = (const __u32 *)a->b, *w = (const __u32 *)want->b,
		    *m = (const __u32 *)mask->b;

	return ((x[0] & m[0]) == w[0]) && ((x[1] & m[1]) == w[1]) &&
	       ((x[2] & m[2]) == w[2]) && ((x[3] & m[3]) == w[3]);
}

/* Every scope field of the fault, except the index key that found it. */
static __always_inline int applies(const struct fl_fault *f, const struct fl_pkt *p,
				   struct __sk_buff *skb, __u8 dir, __u64 now)
{
	if (now >= f->expires_ns) /* inactive (0) or past: the in-kernel deadman */
		return 0;
	if (f->netns_ino != fl_netns_ino || !(f->dir_mask & dir))
		return 0;
	if (f->ifindex && f->ifindex != skb->ifindex)
		return 0;
	if (f->proto) {
		if (f->proto == IPPROTO_ICMP) {
			if (p->proto != IPPROTO_ICMP && p->proto != IPPROTO_ICMPV6)
				return 0;
		} else if (f->proto != p->proto) {
			return 0;
		}
	}
	if (f->port_hi && (p->rport < f->port_lo || p->rport > f->port_hi))
		return 0;
	if ((f->flags & FL_F_MATCH_LOCAL) && !masked_eq(&p->local, &f->local_addr, &f->local_mask))
		return 0;
	if ((f->flags & FL_F_MATCH_REMOTE) &&
	    !masked_eq(&p->remote, &f->remote_addr, &f->remote_mask))
		return 0;
	if (f->cgroup_id && (dir != FL_DIR_EGRESS || bpf_skb_cgroup_id(skb) != f->cgroup_id))
		return 0;
	return 1;
}

/* A fault with a delayed start is inert until then: as if it were not there,
 * so a later fault in the same bucket may apply instead. */
static __always_inline int started(const struct fl_fault *f, __u32 slot, __u64 now)
{
	struct fl_budget *b;

	if (!(f->flags & FL_F_BUDGET))
		return 1;
	b = bpf_map_lookup_elem(&fl_budget, &slot);
	return !b || now >= b->start_ns;
}

/* Whether the fault may inject once more, called once the fault has decided to
 * act (fl_take_ticket: at most max however many CPUs race). A ticket whose
 * action then fails (a corrupt on a packet with no payload, a duplicate the
 * clone refuses) is spent all the same: the cap may be reached with fewer
 * faults done. */
static __always_inline int claim(const struct fl_fault *f, __u32 slot)
{
	struct fl_budget *b;

	if (!(f->flags & FL_F_BUDGET))
		return 1;
	b = bpf_map_lookup_elem(&fl_budget, &slot);
	if (!b)
		return 1;
	return fl_take_ticket(&b->claimed, b->max, &b->reached_ns);
}

static __always_inline struct fl_fault *pick(const struct fl_bucket *b, const struct fl_pkt *p,
					     struct __sk_buff *skb, __u8 dir, __u64 now,
					     __u32 *slot)
{
	for (int i = 0; i < FL_BUCKET_SLOTS; i++) {
		struct fl_fault *f;
		__u32 s;

		if (i >= b->n)
			break;
		s = b->slot[i];
		f = bpf_map_lookup_elem(&fl_faults, &s);
		if (f && applies(f, p, skb, dir, now) && started(f, s, now)) {
			*slot = s;
			return f;
		}
	}
	return NULL;
}

/* The two passes over the query name run under bpf_loop so the verifier checks
 * each step once instead of unrolling up to 255 iterations per path. */
struct scan_ctx {
	struct dns_scratch *s;
	__u32 end; /* offset of the current length byte */
	__u32 n;   /* bytes loaded */
	int bad;
};

static long scan_label(__u32 i, void *data)
{
	struct scan_ctx *c = data;
	__u8 l = c->s->raw[c->end & (FL_DNS_NAME_MAX - 1)];

	if (l == 0)
		return 1;
	if (l > 63) { /* a compression pointer or a reserved type: not a plain query */
		c->bad = 1;
		return 1;
	}
	c->end += l + 1;
	if (c->end >= c->n) {
		c->bad = 1;
		return 1;
	}
	return 0;
}

struct rev_ctx {
	struct dns_scratch *s;
	__u32 dotted;   /* length of "www.example.com" */
	__u32 next_sep; /* wire offset of the next length byte */
};

static long reverse_byte(__u32 i, void *data)
{
	struct rev_ctx *c = data;
	__u32 w = i + 1; /* wire offset; dotted offset is w - 1 */
	__u8 ch = c->s->raw[w & (FL_DNS_NAME_MAX - 1)];

	if (w == c->next_sep) {
		c->next_sep = w + ch + 1;
		ch = '.';
	} else if (ch >= 'A' && ch <= 'Z') {
		ch += 'a' - 'A';
	}
	c->s->key.name[(c->dotted - w) & (FL_DNS_NAME_MAX - 1)] = ch;
	return 0;
}

/* The query name, lowercased and reversed with a trailing dot, as an LPM key:
 * "3www7Example3com0" becomes "moc.elpmaxe.www." */
static __noinline struct fl_dns_key *dns_key(struct __sk_buff *skb, __u32 payload_off)
{
	struct scan_ctx sc = {};
	struct rev_ctx rc = {};
	struct dns_scratch *s;
	__u32 zero = 0, qoff, n;
	__u8 hdr[4];

	if (!skb || !payload_off)
		return NULL;
	if (bpf_skb_load_bytes(skb, payload_off, hdr, sizeof(hdr)))
		return NULL;
	if (hdr[2] & 0x80) /* QR set: a response, not a query */
		return NULL;
	s = bpf_map_lookup_elem(&fl_dns_scratch, &zero);
	if (!s)
		return NULL;
	qoff = payload_off + 12;
	if (skb->len <= qoff)
		return NULL;
	/* n + 1 bytes are loaded; n is re-bounded in the register that feeds the
	 * helper, since clang may otherwise pass an unclamped copy and the verifier
	 * then rejects a possibly negative or zero size. */
	n = skb->len - qoff - 1;
	if (n > FL_DNS_NAME_MAX - 2)
		n = FL_DNS_NAME_MAX - 2;
	asm volatile("%[n] &= 0xff" : [n] "+r"(n));
	if (bpf_skb_load_bytes(skb, qoff, s->raw, n + 1))
		return NULL;

	sc.s = s;
	sc.n = n + 1;
	bpf_loop(128, scan_label, &sc, 0);
	if (sc.bad || sc.end < 2)
		return NULL;

	rc.s = s;
	rc.dotted = sc.end - 1;
	rc.next_sep = s->raw[0] + 1;
	bpf_loop(rc.dotted, reverse_byte, &rc, 0);
	s->key.name[rc.dotted & (FL_DNS_NAME_MAX - 1)] = '.';
	s->key.prefixlen = (rc.dotted + 1) * 8;
	return &s->key;
}

/* Whether fl_exact may hold the address: its filter bit, when userspace vouches
 * for the filter. An array lookup is inlined by the verifier; the hash lookup
 * it saves costs ~20 ns even on a hot key. */
static __always_inline int exact_may_hold(__u32 index, const struct fl_addr *a)
{
	const __u32 *w = (const __u32 *)a->b;
	struct fl_exact_bloom_block *blk;
	__u32 h, block;

	if (!(index & FL_IDX_EXACT_FILTER))
		return 1;
	h = fl_exact_bloom_hash(w[0], w[1], w[2], w[3]);
	block = h / FL_EXACT_BLOOM_BLOCK_BITS;
	blk = bpf_map_lookup_elem(&fl_exact_bloom, &block);
	if (!blk)
		return 1;
	return (blk->w[(h / 64) % (FL_EXACT_BLOOM_BLOCK_BITS / 64)] >> (h % 64)) & 1;
}

/* The index bits of the control map skip lookups that cannot hit; exact is
 * exact_may_hold() of the remote address. The clock is read only once an index
 * entry is found:
 * bpf_ktime_get_boot_ns() costs more than the lookups on some VMs, and most
 * packets match nothing. */
static __always_inline struct fl_fault *find(struct __sk_buff *skb, __u32 index, int exact,
					     const struct fl_pkt *p, __u8 dir, __u32 *slot)
{
	struct fl_bucket *b;
	struct fl_fault *f;

	if (!(index & FL_IDX_NO_DNS) && p->proto == IPPROTO_UDP &&
	    ((dir == FL_DIR_EGRESS && p->rport == 53) || (dir == FL_DIR_INGRESS && p->lport == 53))) {
		struct fl_dns_key *k = dns_key(skb, p->payload_off);
		__u32 *s;

		if (k && (s = bpf_map_lookup_elem(&fl_dns, k))) {
			__u32 ds = *s;

			__u64 now = bpf_ktime_get_boot_ns();

			f = bpf_map_lookup_elem(&fl_faults, &ds);
			if (f && applies(f, p, skb, dir, now) && started(f, ds, now)) {
				*slot = ds;
				return f;
			}
		}
	}
	if (exact) {
		b = bpf_map_lookup_elem(&fl_exact, &p->remote);
		if (b && (f = pick(b, p, skb, dir, bpf_ktime_get_boot_ns(), slot)))
			return f;
	}
	if (index & FL_IDX_NO_PREFIX)
		return NULL;
	b = fl_prefix_find(&p->remote, index);
	if (b)
		return pick(b, p, skb, dir, bpf_ktime_get_boot_ns(), slot);
	return NULL;
}

/* Correlated loss repeats the last decision with P(correlation), else draws anew,
 * so the mean loss stays at prob while bursts lengthen to 1/((1-c)(1-p)).
 * Gilbert-Elliott moves between good and bad first, then draws that state's loss. */
static __always_inline int decide_loss(const struct fl_fault *f, __u32 slot, struct fl_rng *r)
{
	struct fl_loss_state *st = bpf_map_lookup_elem(&fl_loss_state, &slot);
	int drop;

	if (!st)
		return fl_chance_rng(r, f->prob);
	if (f->loss_model == FL_LOSS_GE) {
		if (st->ge_bad) {
			if (fl_chance_rng(r, f->ge_r))
				st->ge_bad = 0;
		} else if (fl_chance_rng(r, f->ge_p)) {
			st->ge_bad = 1;
		}
		drop = fl_chance_rng(r, st->ge_bad ? f->ge_loss_bad : f->ge_loss_good);
	} else if (f->correlation && fl_chance_rng(r, f->correlation)) {
		drop = st->last_drop;
	} else {
		drop = fl_chance_rng(r, f->prob);
	}
	st->last_drop = drop;
	return drop;
}

static __always_inline void count_reason(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&fl_reasons, &reason);

	if (c)
		*c += 1;
}

static __always_inline int drop(struct fl_fault_stats *st, __u32 reason, __u8 dir)
{
	st->dropped++;
	count_reason(reason);
	if (dir == FL_DIR_INGRESS)
		return TC_SHOT;
	if (fl_egress_drop == FL_EGRESS_DROP_STOLEN)
		return TC_STOLEN;
	/* ifindex 0 never exists: the redirect fails after the qdisc layer has
	 * already told the sender "sent", so the loss is silent, like a network's. */
	return bpf_redirect(0, 0);
}

static __always_inline void corrupt(struct __sk_buff *skb, const struct fl_pkt *p,
				    struct fl_fault_stats *st, struct fl_rng *r)
{
	__u32 off, len;
	__u8 byte;

	if (!p->payload_off || skb->len <= p->payload_off)
		return;
	len = skb->len - p->payload_off;
	off = p->payload_off + fl_draw(r) % len;
	if (bpf_skb_load_bytes(skb, off, &byte, 1))
		return;
	byte ^= 1 << (fl_draw(r) & 7);
	/* No checksum fix-up: a receiver that verifies sees a bad checksum, one
	 * whose checksum is computed later (offload) sees the flipped bit. */
	if (bpf_skb_store_bytes(skb, off, &byte, 1, 0) == 0)
		st->corrupted++;
}

static __always_inline void duplicate(struct __sk_buff *skb, struct fl_fault_stats *st,
				      __u32 mark_bit, __u8 dir)
{
	__u32 saved = skb->mark;

	/* The copy comes back through this hook; the mark tells us to let it pass. */
	skb->mark = saved | mark_bit;
	if (bpf_clone_redirect(skb, skb->ifindex, dir == FL_DIR_INGRESS ? BPF_F_INGRESS : 0) == 0)
		st->duplicated++;
	skb->mark = saved;
}

static __always_inline __s64 jitter_sample(const struct fl_fault *f, struct fl_rng *r)
{
	__u32 d = f->dist;
	struct fl_dist_table *t;
	__s16 v;

	if (!f->jitter_ns)
		return 0;
	t = bpf_map_lookup_elem(&fl_dist, &d);
	if (!t)
		return 0;
	v = t->v[fl_draw(r) & (FL_DIST_SIZE - 1)];
	/* Arithmetic shift: BPF has no signed division. */
	return ((__s64)v * (__s64)f->jitter_ns) >> FL_DIST_SHIFT;
}

static __always_inline int delay(struct __sk_buff *skb, const struct fl_fault *f, __u32 slot,
				 struct fl_fault_stats *st, struct fl_rng *r)
{
	__u64 mono = bpf_ktime_get_ns();
	__u64 base = skb->tstamp > mono ? skb->tstamp : mono;

	if (f->kind == FL_KIND_LATENCY) {
		__s64 d = (__s64)f->delay_ns + jitter_sample(f, r);

		if (d <= 0)
			return TC_PASS;
		skb->tstamp = base + d;
	} else {
		struct fl_rate_state *rs = bpf_map_lookup_elem(&fl_rate, &slot);
		__u64 t, cost;

		if (!rs || !f->rate_bps)
			return TC_PASS;
		cost = (__u64)skb->len * 8ULL * 1000000000ULL / f->rate_bps;
		t = rs->next_ns > base ? rs->next_ns : base;
		if (t - mono > FL_RATE_HORIZON_NS)
			return drop(st, FL_DROP_RATE_HORIZON, FL_DIR_EGRESS);
		/* Racy across CPUs by design: a lost update only lets one packet early. */
		rs->next_ns = t + cost;
		skb->tstamp = t;
	}
	st->delayed++;
	return TC_PASS;
}

/*
 * On lo one packet passes our egress hook and then our ingress hook, and for a
 * fault that covers both directions it can match twice (sent to the target,
 * and received from it, when both ends are the target: 127.0.0.1 without a
 * port). The egress decision is the one that counts: a packet a fault passed on
 * lo egress is tagged, and lo ingress, attached because the fault covers
 * ingress, lets it pass and removes the tag (the check at the top of handle()).
 */
static __always_inline int passed(struct __sk_buff *skb, const struct fl_fault *f,
				  const struct fl_control *ctl, __u8 dir)
{
	if (dir == FL_DIR_EGRESS && skb->ifindex == LOOPBACK_IFINDEX &&
	    (f->dir_mask & FL_DIR_INGRESS))
		skb->mark |= ctl->dup_mark;
	return TC_PASS;
}

static __always_inline int handle(struct __sk_buff *skb, __u8 dir)
{
	__u32 zero = 0, slot = 0;
	struct fl_fault_stats *st;
	struct fl_rng *rng = NULL;
	struct fl_control *ctl;
	struct fl_fault *f;
	struct fl_pkt p = {};
	__u32 index;
	int l4, exact;

	ctl = bpf_map_lookup_elem(&fl_control, &zero);
	if (!ctl || !ctl->armed)
		return TC_PASS;
	if (skb->mark & ctl->dup_mark) {
		skb->mark &= ~ctl->dup_mark;
		return TC_PASS;
	}
	l4 = fl_parse_ip(skb, &p, dir);
	if (l4 == FL_PARSE_NOT_IP)
		return TC_PASS;
	/* The cheapest rejection: no index can lead anywhere from this address, so
	 * the L4 header (ports, the DNS question) does not matter. */
	index = ctl->index;
	exact = exact_may_hold(index, &p.remote);
	if (!exact && (index & FL_IDX_NO_PREFIX) && (index & FL_IDX_NO_DNS))
		return TC_PASS;
	if (l4 == FL_PARSE_L4)
		fl_parse_l4(skb, &p, dir);
	f = find(skb, index, exact, &p, dir, &slot);
	if (!f)
		return TC_PASS;
	st = bpf_map_lookup_elem(&fl_stats, &slot);
	if (!st)
		return TC_PASS;
	st->matched++;
	st->bytes += skb->len;
	/* A seeded fault draws from this CPU's state of its generator; without a
	 * state (never for a seeded fault: the array holds every slot) the kernel's
	 * generator draws. */
	if (f->flags & FL_F_SEEDED)
		rng = bpf_map_lookup_elem(&fl_rng, &slot);

	switch (f->kind) {
	case FL_KIND_LOSS:
		if (decide_loss(f, slot, rng) && claim(f, slot))
			return drop(st, FL_DROP_LOSS, dir);
		break;
	case FL_KIND_PARTITION:
		if (claim(f, slot))
			return drop(st, FL_DROP_PARTITION, dir);
		break;
	case FL_KIND_FLOWDROP:
		if (claim(f, slot))
			return drop(st, FL_DROP_FLOWDROP, dir);
		break;
	case FL_KIND_DNS:
		if (fl_chance_rng(rng, f->prob) && claim(f, slot))
			return drop(st, FL_DROP_DNS, dir);
		break;
	case FL_KIND_CORRUPT:
		if (fl_chance_rng(rng, f->prob) && claim(f, slot))
			corrupt(skb, &p, st, rng);
		break;
	case FL_KIND_DUPLICATE:
		if (fl_chance_rng(rng, f->prob) && claim(f, slot))
			duplicate(skb, st, ctl->dup_mark, dir);
		break;
	case FL_KIND_LATENCY:
	case FL_KIND_BANDWIDTH:
		if (dir == FL_DIR_EGRESS && fl_chance_rng(rng, f->prob) && claim(f, slot))
			return delay(skb, f, slot, st, rng);
		break;
	}
	return passed(skb, f, ctl, dir);
}

SEC("tc")
int fl_egress(struct __sk_buff *skb)
{
	return handle(skb, FL_DIR_EGRESS);
}

SEC("tc")
int fl_ingress(struct __sk_buff *skb)
{
	return handle(skb, FL_DIR_INGRESS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
