/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The DNS answer parser: one C core compiled into sockaddr.bpf.c (the kernel's
 * learning program) and into userspace (the libFuzzer twin and the tests), so
 * both sides read every message the same way. No BPF helper in the core: each
 * loop is a step function driven by FL_DNS_LOOP (bpf_loop in the kernel, so
 * the verifier checks a step once rather than every iteration; a for loop in
 * userspace), and every buffer index is masked to its array.
 *
 * What it accepts (RFC 1035 4.1): a response (QR 1), opcode QUERY, RCODE
 * NOERROR, exactly one question of class IN, at most FL_DNS_MAX_ANSWERS answer
 * records. It walks the answer section only: A and AAAA records whose owner is
 * the question's name or the target of a CNAME met before them (a CNAME chain
 * inside the message, in order), class IN. Names may be compressed: a pointer
 * must point backwards, before the piece of name that holds it, and not into
 * the header, so a chain of pointers always ends; at most FL_DNS_MAX_HOPS of
 * them. Labels longer than 63 (the 0x40 and 0x80 label types) and names longer
 * than 255 bytes are malformed. Anything malformed or cut short anywhere in
 * the walked part: nothing is returned (all or nothing). */
#ifndef FAULTLINE_DNS_PARSE_H
#define FAULTLINE_DNS_PARSE_H

#include "faultline/dns_abi.h"

#define FL_DNS_BUF 1024          /* bytes of a message read; a power of two */
#define FL_DNS_NAME_STEPS 300    /* bytes and pointers of one name: 255 + hops + 1, rounded up */
#define FL_DNS_MAX_HOPS 16
#define FL_DNS_MAX_ANSWERS 32    /* more answer records: refused (oversized) */
#define FL_DNS_MAX_ADDRS 16      /* addresses kept from one answer */
#define FL_DNS_CHAIN 8           /* names of one CNAME chain, the question's included */
#define FL_DNS_LABELS 128        /* labels of a name of 255 bytes, at most 127 */

#define FL_DNS_HASH_SEED 0xcbf29ce484222325ULL /* FNV-1a, 64 bit */
#define FL_DNS_HASH_PRIME 0x100000001b3ULL

/* One name being read. */
struct fl_dns_name_state {
	__u32 pos;    /* next byte to read */
	__u32 end;    /* the offset after the name where it was written */
	__u32 piece;  /* start of the piece of name being read (pointers go below it) */
	__u32 out;    /* bytes in name */
	__u32 rem;    /* bytes left of the current label */
	__u32 nlab;
	__u32 hops;
	__u32 ended;  /* end is set (the first pointer, or the root) */
	__u32 done;
	__u32 err;
	__u64 hash;
	__u32 k;      /* hashing: offset in the label */
	__s32 li;     /* hashing: the label */
};

/* One answer section being walked. */
struct fl_dns_walk_state {
	__u32 pos;
	__u32 count;
	__u32 err;
	__u32 pad;
};

/* The parser's memory: per CPU in the kernel (a map value), anything in userspace. */
struct fl_dns_scratch {
	__u8 msg[FL_DNS_BUF];
	__u8 name[256];               /* the last name read: wire form, lowercased, no root */
	__u8 lab[FL_DNS_LABELS];      /* offset of each label's length byte in name */
	__u64 suffix[FL_DNS_LABELS];  /* question: hash of labels i.. (0: the whole name) */
	__u64 chain[FL_DNS_CHAIN];
	struct fl_addr addr[FL_DNS_MAX_ADDRS];
	__u32 ttl[FL_DNS_MAX_ADDRS];
	__u32 len;   /* bytes in msg */
	__u32 qlabels;
	__u32 naddrs;
	__u32 nchain;
	/* The loops' state lives here, not on the stack: to the verifier a map
	 * value is unknown, so each step of a bpf_loop looks the same and is
	 * checked once, where counters on the stack (known constants) would make
	 * every iteration a new state. */
	struct fl_dns_name_state ns;
	struct fl_dns_walk_state ws;
};

#ifdef __bpf__
/* The scratch map's value: defined by the program that includes this. */
static __always_inline struct fl_dns_scratch *fl_dns_scratch_get(void);
#define FL_DNS_S(ctx) fl_dns_scratch_get()
#define FL_DNS_LOOP(n, fn, s) bpf_loop((n), (fn), NULL, 0)
/* x masked to an index below n (a power of two), the mask kept: the compiler
 * drops a mask it can prove redundant after a bound check, and an older
 * verifier (6.1) may have lost that check's bound through a stack spill. */
#define FL_DNS_IDX(x, n)                          \
	({                                        \
		__u32 fl_idx_ = (__u32)(x);       \
		asm volatile("" : "+r"(fl_idx_)); \
		fl_idx_ & ((n) - 1);              \
	})
#define FL_DNS_STEP static __attribute__((noinline)) long
#define FL_DNS_INLINE static __always_inline
#else
#define FL_DNS_S(ctx) ((struct fl_dns_scratch *)(ctx))
#define FL_DNS_LOOP(n, fn, s)                                        \
	do {                                                         \
		for (__u64 fl_i_ = 0; fl_i_ < (__u64)(n); fl_i_++) { \
			if ((fn)(fl_i_, (s)))                        \
				break;                               \
		}                                                    \
	} while (0)
#define FL_DNS_IDX(x, n) ((__u32)(x) & ((n) - 1))
#define FL_DNS_STEP static long
#define FL_DNS_INLINE static inline
#endif

FL_DNS_INLINE __u8 fl_dns_at(const struct fl_dns_scratch *s, __u32 off)
{
	return s->msg[FL_DNS_IDX(off, FL_DNS_BUF)];
}

FL_DNS_INLINE __u32 fl_dns_u16(const struct fl_dns_scratch *s, __u32 off)
{
	return ((__u32)fl_dns_at(s, off) << 8) | fl_dns_at(s, off + 1);
}

FL_DNS_INLINE __u32 fl_dns_u32(const struct fl_dns_scratch *s, __u32 off)
{
	return (fl_dns_u16(s, off) << 16) | fl_dns_u16(s, off + 2);
}

/* One byte or one pointer of a name. */
FL_DNS_STEP fl_dns_name_step(__u64 i, void *ctx)
{
	struct fl_dns_scratch *s = FL_DNS_S(ctx);
	struct fl_dns_name_state *st;
	__u32 c;

	(void)i;
	if (!s)
		return 1;
	st = &s->ns;
	if (st->done)
		return 1;
	if (st->pos >= s->len || st->pos >= FL_DNS_BUF)
		goto bad;
	c = fl_dns_at(s, st->pos);
	if (st->rem) {
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		s->name[st->out & 255] = (__u8)c;
		st->out++;
		st->pos++;
		st->rem--;
		return 0;
	}
	if (c == 0) {
		if (!st->ended)
			st->end = st->pos + 1;
		st->done = 1;
		return 1;
	}
	if ((c & 0xc0) == 0xc0) {
		__u32 ptr;

		if (st->pos + 1 >= s->len)
			goto bad;
		ptr = ((c & 0x3f) << 8) | fl_dns_at(s, st->pos + 1);
		if (!st->ended) {
			st->end = st->pos + 2;
			st->ended = 1;
		}
		/* Backwards only, below the piece that holds the pointer: each
		 * hop lands strictly lower, so no chain of pointers loops. */
		if (ptr >= st->piece || ptr < 12 || ++st->hops > FL_DNS_MAX_HOPS)
			goto bad;
		st->pos = ptr;
		st->piece = ptr;
		return 0;
	}
	if (c & 0xc0)
		goto bad; /* label types 0x40 and 0x80: a "label" over 63 */
	/* the wire name with its root byte is at most 255 */
	if (st->out + 1 + c + 1 > 255 || st->nlab >= FL_DNS_LABELS - 1)
		goto bad;
	s->lab[FL_DNS_IDX(st->nlab, FL_DNS_LABELS)] = (__u8)st->out;
	st->nlab++;
	s->name[st->out & 255] = (__u8)c;
	st->out++;
	st->pos++;
	st->rem = c;
	return 0;
bad:
	st->err = 1;
	st->done = 1;
	return 1;
}

/* Hashing one byte: the labels are taken last to first (each label as it is
 * written, its length byte first), so the hash of every suffix of labels is a
 * state on the way to the whole name's: suffix[i] = labels i..n-1. */
FL_DNS_STEP fl_dns_hash_step(__u64 i, void *ctx)
{
	struct fl_dns_scratch *s = FL_DNS_S(ctx);
	struct fl_dns_name_state *st;
	__u32 at, span;

	(void)i;
	if (!s)
		return 1;
	st = &s->ns;
	if (st->li < 0)
		return 1;
	at = s->lab[FL_DNS_IDX((__u32)st->li, FL_DNS_LABELS)];
	span = (__u32)s->name[at & 255] + 1;
	st->hash = (st->hash ^ s->name[(at + st->k) & 255]) * FL_DNS_HASH_PRIME;
	st->k++;
	if (st->k >= span) {
		s->suffix[FL_DNS_IDX((__u32)st->li, FL_DNS_LABELS)] = st->hash;
		st->k = 0;
		st->li--;
	}
	return 0;
}

/* Reads the name at off into s->name (and s->lab) and hashes it into
 * s->suffix[0..nlab-1]. Returns the offset after the name where it is written,
 * or 0 if it is malformed or cut short. The root name (no label) is refused:
 * no rule names it. */
FL_DNS_INLINE __u32 fl_dns_read_name(struct fl_dns_scratch *s, __u32 off, __u32 *nlab)
{
	struct fl_dns_name_state *st = &s->ns;

	__builtin_memset(st, 0, sizeof(*st));
	st->pos = off;
	st->piece = off;
	FL_DNS_LOOP(FL_DNS_NAME_STEPS, fl_dns_name_step, s);
	if (st->err || !st->done || st->nlab == 0 || st->nlab >= FL_DNS_LABELS || st->out > 255)
		return 0;
	st->hash = FL_DNS_HASH_SEED;
	st->li = (__s32)st->nlab - 1;
	st->k = 0;
	FL_DNS_LOOP(256, fl_dns_hash_step, s);
	if (st->li >= 0)
		return 0;
	*nlab = st->nlab;
	return st->end;
}

/* The header and the question. Returns the offset of the answer section, or 0
 * if this is no response the parser takes; s->suffix and s->qlabels then hold
 * the question's hashes. */
FL_DNS_INLINE __u32 fl_dns_question(struct fl_dns_scratch *s, __u32 *ancount)
{
	__u32 flags, off, nlab = 0;

	if (s->len < 12 || s->len > FL_DNS_BUF)
		return 0;
	flags = fl_dns_u16(s, 2);
	if (!(flags & 0x8000) || ((flags >> 11) & 0xf) != 0 || (flags & 0xf) != 0)
		return 0;
	if (fl_dns_u16(s, 4) != 1)
		return 0;
	*ancount = fl_dns_u16(s, 6);
	off = fl_dns_read_name(s, 12, &nlab);
	if (!off || off + 4 > s->len)
		return 0;
	if (fl_dns_u16(s, off + 2) != 1) /* class IN */
		return 0;
	s->qlabels = nlab;
	s->chain[0] = s->suffix[0];
	s->nchain = 1;
	s->naddrs = 0;
	return off + 4;
}

FL_DNS_INLINE int fl_dns_in_chain(const struct fl_dns_scratch *s, __u64 h)
{
	for (int i = 0; i < FL_DNS_CHAIN; i++) {
		if ((__u32)i >= s->nchain)
			break;
		if (s->chain[i] == h)
			return 1;
	}
	return 0;
}

/* One answer record. */
FL_DNS_STEP fl_dns_answer_step(__u64 i, void *ctx)
{
	struct fl_dns_scratch *s = FL_DNS_S(ctx);
	struct fl_dns_walk_state *w;
	__u32 off, type, klass, ttl, rdlen, rdata, nlab = 0;
	__u64 owner;

	if (!s)
		return 1;
	w = &s->ws;
	if (i >= w->count)
		return 1;
	off = fl_dns_read_name(s, w->pos, &nlab);
	if (!off || off + 10 > s->len)
		goto bad;
	owner = s->suffix[0];
	type = fl_dns_u16(s, off);
	klass = fl_dns_u16(s, off + 2);
	ttl = fl_dns_u32(s, off + 4);
	rdlen = fl_dns_u16(s, off + 8);
	rdata = off + 10;
	if (rdata + rdlen > s->len)
		goto bad;
	w->pos = rdata + rdlen;
	if (klass != 1 || !fl_dns_in_chain(s, owner))
		return 0;
	if (ttl > 0x7fffffff) /* RFC 2181 8: treated as 0 */
		ttl = 0;
	if (type == 1 || type == 28) { /* A, AAAA */
		__u32 n = s->naddrs;
		struct fl_addr *a;

		if (rdlen != (type == 1 ? 4u : 16u))
			goto bad;
		if (n >= FL_DNS_MAX_ADDRS)
			return 0; /* kept: the first FL_DNS_MAX_ADDRS */
		a = &s->addr[FL_DNS_IDX(n, FL_DNS_MAX_ADDRS)];
		__builtin_memset(a, 0, sizeof(*a));
		if (type == 1) {
			a->b[10] = 0xff;
			a->b[11] = 0xff;
			for (int j = 0; j < 4; j++)
				a->b[12 + j] = fl_dns_at(s, rdata + j);
		} else {
			for (int j = 0; j < 16; j++)
				a->b[j] = fl_dns_at(s, rdata + j);
		}
		s->ttl[FL_DNS_IDX(n, FL_DNS_MAX_ADDRS)] = ttl;
		s->naddrs = n + 1;
	} else if (type == 5) { /* CNAME: its target joins the chain */
		__u32 end = fl_dns_read_name(s, rdata, &nlab);

		if (end != rdata + rdlen)
			goto bad;
		if (s->nchain < FL_DNS_CHAIN) {
			s->chain[FL_DNS_IDX(s->nchain, FL_DNS_CHAIN)] = s->suffix[0];
			s->nchain++;
		}
	}
	return 0;
bad:
	w->err = 1;
	return 1;
}

/* The answer section from off: fills s->addr and s->ttl (s->naddrs of them).
 * Returns 0, or -1 if the section is malformed or cut short (s->naddrs is then
 * 0: all or nothing). */
FL_DNS_INLINE int fl_dns_answers(struct fl_dns_scratch *s, __u32 off, __u32 ancount)
{
	struct fl_dns_walk_state *w = &s->ws;

	__builtin_memset(w, 0, sizeof(*w));
	s->naddrs = 0;
	if (ancount > FL_DNS_MAX_ANSWERS)
		return -1;
	w->pos = off;
	w->count = ancount;
	FL_DNS_LOOP(FL_DNS_MAX_ANSWERS, fl_dns_answer_step, s);
	if (w->err) {
		s->naddrs = 0;
		return -1;
	}
	return 0;
}

/* The hash of a name as written in a policy ("api.example.com", lowercase,
 * no trailing dot): the same as fl_dns_read_name gives its wire form. For
 * userspace: the apply writes watched names with it. */
#ifndef __bpf__
static inline __u64 fl_dns_hash_text(const char *name, unsigned long len)
{
	__u64 h = FL_DNS_HASH_SEED;
	unsigned long end = len;

	while (end > 0) {
		unsigned long start = end;

		while (start > 0 && name[start - 1] != '.')
			start--;
		h = (h ^ (__u8)(end - start)) * FL_DNS_HASH_PRIME;
		for (unsigned long j = start; j < end; j++) {
			__u8 c = (__u8)name[j];

			if (c >= 'A' && c <= 'Z')
				c += 'a' - 'A';
			h = (h ^ c) * FL_DNS_HASH_PRIME;
		}
		end = start > 0 ? start - 1 : 0;
		if (start == 0)
			break;
	}
	return h;
}
#endif

#endif /* FAULTLINE_DNS_PARSE_H */
