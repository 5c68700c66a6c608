/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The contract between the BPF programs and userspace: plain, fixed-width, padded. */
#ifndef FAULTLINE_ABI_H
#define FAULTLINE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Capacity. Fault slots index arrays, so a slot fits in a __u16 bucket entry. */
#define FL_MAX_FAULTS 16384
#define FL_MAX_EXACT (1 << 20)   /* exact /32 and /128 targets (flowdrop lists) */
#define FL_MAX_PREFIXES 65536    /* CIDR targets */
#define FL_MAX_DNS 4096          /* blocked domains */
#define FL_BUCKET_SLOTS 8        /* faults that may overlap on one address */
#define FL_DNS_NAME_MAX 256      /* LPM keys carry at most 256 bytes of data */
#define FL_DIST_SIZE 4096        /* samples per delay distribution table */
#define FL_DIST_SHIFT 10         /* one jitter unit (sigma) is 1 << 10 in table units */
#define FL_RATE_HORIZON_NS 2000000000ULL /* EDT: drop what would leave > 2 s late */

/* Default skb->mark bit that tags our own duplicate so it is not duplicated again. */
#define FL_DEFAULT_DUP_MARK 0x10000000U

enum fl_kind {
	FL_KIND_NONE = 0,
	FL_KIND_LOSS = 1,
	FL_KIND_PARTITION = 2,
	FL_KIND_FLOWDROP = 3,
	FL_KIND_CORRUPT = 4,
	FL_KIND_DUPLICATE = 5,
	FL_KIND_DNS = 6,
	FL_KIND_LATENCY = 7,
	FL_KIND_BANDWIDTH = 8,
	FL_KIND_MAX,
};

enum fl_dir {
	FL_DIR_EGRESS = 1,
	FL_DIR_INGRESS = 2,
};

enum fl_loss_model {
	FL_LOSS_UNIFORM = 0,     /* independent draws (with optional correlation) */
	FL_LOSS_GE = 1,          /* Gilbert-Elliott two-state Markov model */
};

enum fl_dist {
	FL_DIST_UNIFORM = 0,
	FL_DIST_NORMAL = 1,
	FL_DIST_PARETO = 2,
	FL_DIST_MAX,
};

/* Why a packet was dropped; each has a per-CPU counter in fl_reasons. */
enum fl_drop_reason {
	FL_DROP_NONE = 0,
	FL_DROP_LOSS = 1,
	FL_DROP_PARTITION = 2,
	FL_DROP_FLOWDROP = 3,
	FL_DROP_DNS = 4,
	FL_DROP_RATE_HORIZON = 5,
	FL_DROP_REASON_MAX,
};

/* How an egress drop is carried out; chosen per attachment at load time. */
enum fl_egress_drop {
	/* TCX maps STOLEN to NEXT, so a silent drop is a redirect to an ifindex
	 * that cannot exist: the qdisc layer reports success, the skb is freed. */
	FL_EGRESS_DROP_REDIRECT = 0,
	/* clsact + cls_bpf honours TC_ACT_STOLEN: silent, like netem. */
	FL_EGRESS_DROP_STOLEN = 1,
};

/* fl_fault.flags */
#define FL_F_MATCH_LOCAL (1U << 0)   /* check local_addr/local_mask */
#define FL_F_MATCH_REMOTE (1U << 1)  /* check remote_addr/remote_mask (DNS faults) */
#define FL_F_BUDGET (1U << 2)        /* fl_budget holds a cap and/or a delayed start */
#define FL_F_SEEDED (1U << 3)        /* draws come from the fault's fl_rng state (--seed) */

/* Addresses are 16 bytes; IPv4 is stored IPv4-mapped (::ffff:a.b.c.d). */
struct fl_addr {
	__u8 b[16];
};

struct fl_lpm_key {
	__u32 prefixlen; /* in bits over the 16-byte mapped address */
	struct fl_addr addr;
};

/* The faults that apply to one address or prefix, most specific first. A CIDR
 * bucket also lists the faults of every shorter prefix that covers it, so one
 * longest-prefix lookup finds every candidate. plen[i] is the prefix length
 * through which slot[i] applies: equal to the key's own length for an owner. */
struct fl_bucket {
	__u16 slot[FL_BUCKET_SLOTS];
	__u8 plen[FL_BUCKET_SLOTS];
	__u8 n;
	__u8 pad[7];
};

/* A blocked domain: the lowercase name reversed ("moc.elpmaxe.") so that
 * "a name or any subdomain of it" becomes a longest-prefix match. */
struct fl_dns_key {
	__u32 prefixlen;
	__u8 name[FL_DNS_NAME_MAX];
};

struct fl_control {
	__u32 armed;      /* 0: every program is a pass-through (kill switch) */
	__u32 generation; /* bumped on every change, for observers */
	__u32 dup_mark;   /* skb->mark bit used to tag duplicates (and packets decided on lo egress) */
	__u32 index;      /* FL_IDX_*: what userspace vouches for about the indexes */
};

/* fl_control.index lets a packet skip lookups that cannot hit. Userspace sets a
 * bit only once the index it speaks for is in that state, and clears it before
 * a fault that needs the lookup is activated. 0 (a control written before the
 * field had a meaning, or a zeroed one) vouches for nothing: every lookup is made. */
#define FL_IDX_EXACT_FILTER (1U << 0) /* fl_exact_bloom has the bit of every fl_exact key */
#define FL_IDX_NO_PREFIX (1U << 1)    /* fl_prefix holds no key */
#define FL_IDX_NO_DNS (1U << 2)       /* fl_dns holds no key */
#define FL_IDX_PREFIX_HASH (1U << 3)  /* fl_prefix_hash mirrors fl_prefix, fl_prefix_lens lists its lengths,
                                       fl_prefix_bloom has the bit of every fl_prefix_hash key */

/* The prefix index without the trie walk. fl_prefix (the LPM trie) stays the
 * one written by faults; fl_prefix_hash holds the same keys, each masked to its
 * length, with the same buckets, and fl_prefix_lens the distinct lengths
 * present, longest first. While the lengths fit in FL_PREFIX_HASH_LENS the
 * program probes the hash once per length, longest first, and the first hit is
 * the trie's longest match (same key, same bucket); a probe is made only when
 * fl_prefix_bloom has the bit of (length, masked address). With more lengths (or a
 * control that does not vouch for the mirror) it walks the trie. A hash probe
 * that misses costs ~10 ns, a filter check ~1, a trie walk over 10k prefixes tens. */
#define FL_PREFIX_HASH_LENS 8

struct fl_prefix_lens {
	__u32 n; /* lengths in len[], 0..FL_PREFIX_HASH_LENS */
	__u8 len[FL_PREFIX_HASH_LENS]; /* over the 16-byte mapped address, descending */
	__u8 pad[4];
};

/* fl_exact_bloom: a one-hash Bloom filter over the fl_exact keys, so that most
 * packets to an address in no fault skip the hash lookup (an inlined array
 * lookup and a few multiplies instead of jhash and a bucket walk). 2^23 bits,
 * 1 MiB: 100k addresses set ~1% of the bits, the full 1M ~11%. A false
 * positive only costs the hash lookup it would have made anyway. The blocks lie
 * back to back (BPF_F_MMAPABLE): bit h is bit h % 64 of 64-bit word h / 64. */
#define FL_EXACT_BLOOM_HASH_BITS 23
#define FL_EXACT_BLOOM_BLOCK_BITS 512 /* one 64-byte cache line per array entry */
#define FL_EXACT_BLOOM_BLOCKS (1U << (FL_EXACT_BLOOM_HASH_BITS - 9))

struct fl_exact_bloom_block {
	__u64 w[FL_EXACT_BLOOM_BLOCK_BITS / 64];
};

/* The filter bit of an address from its four 32-bit words as they lie in memory
 * (both sides run on the same host, so byte order agrees): the first three
 * words folded by two multiplies (for IPv4-mapped addresses they make a
 * constant), the last xored in, then the murmur3 finaliser so that addresses
 * differing in one byte spread over the whole filter. It runs for every packet,
 * so it is kept short. Userspace and the program must compute it bit for bit. */
static inline __u32 fl_exact_bloom_hash(__u32 w0, __u32 w1, __u32 w2, __u32 w3)
{
	__u32 h = ((w0 ^ (w1 * 0x9E3779B1U) ^ w2) * 0x85EBCA77U) ^ w3;

	h ^= h >> 16;
	h *= 0x85EBCA6BU;
	h ^= h >> 13;
	h *= 0xC2B2AE35U;
	h ^= h >> 16;
	return h >> (32 - FL_EXACT_BLOOM_HASH_BITS);
}

/* fl_prefix_bloom: the same kind of filter over the fl_prefix_hash keys (length
 * and masked address), 2^20 bits (128 KiB): a hash probe is made only for a
 * length whose bit is set, so a packet that matches no prefix pays a few
 * multiplies and inlined array reads per listed length instead of a hash
 * lookup each. Its blocks are fl_exact_bloom_block, back to back (mmapable). */
#define FL_PREFIX_BLOOM_HASH_BITS 20
#define FL_PREFIX_BLOOM_BLOCKS (1U << (FL_PREFIX_BLOOM_HASH_BITS - 9))

static inline __u32 fl_prefix_bloom_hash(__u32 len, __u32 w0, __u32 w1, __u32 w2, __u32 w3)
{
	return fl_exact_bloom_hash(w0 ^ (len * 0x27D4EB2FU), w1, w2, w3) >>
	       (FL_EXACT_BLOOM_HASH_BITS - FL_PREFIX_BLOOM_HASH_BITS);
}

struct fl_fault {
	__u64 expires_ns;   /* CLOCK_BOOTTIME; 0 = inactive. Ignored once past. */
	__u64 cgroup_id;    /* cgroup v2 id, egress only; 0 = any */
	__u32 netns_ino;    /* the network namespace this fault belongs to */
	__u32 ifindex;      /* 0 = every attached device of that namespace */
	__u8 kind;          /* enum fl_kind */
	__u8 dir_mask;      /* FL_DIR_* bits */
	__u8 proto;         /* IPPROTO_*; 0 = any (ICMP means ICMP or ICMPv6) */
	__u8 loss_model;    /* enum fl_loss_model */
	__u16 port_lo;      /* remote port range; 0..0 = any */
	__u16 port_hi;
	__u32 flags;        /* FL_F_* */
	__u32 prob;         /* P(act) scaled to 2^32 - 1 */
	__u32 correlation;  /* P(repeat previous decision) scaled to 2^32 - 1 */
	__u32 ge_p;         /* Gilbert-Elliott: P(good -> bad) */
	__u32 ge_r;         /*                  P(bad -> good) */
	__u32 ge_loss_bad;  /*                  P(loss | bad)  (1-h) */
	__u32 ge_loss_good; /*                  P(loss | good) (1-k) */
	__u32 dist;         /* enum fl_dist */
	__u64 delay_ns;
	__u64 jitter_ns;
	__u64 rate_bps;     /* bits per second */
	struct fl_addr local_addr;
	struct fl_addr local_mask;
	struct fl_addr remote_addr;
	struct fl_addr remote_mask;
};

/* A fault's injection cap and delayed start (--max-injections, --start-after).
 * A map of its own (fl_budget, indexed by slot like fl_faults) rather than new
 * fl_fault fields: fl_faults keeps its value size, so state pinned by an older
 * faultctl stays readable, and rewriting an fl_fault (deactivation) never
 * resets the counter. Not per-CPU: `claimed` is bumped atomically by every CPU,
 * so at most `max` injections happen in all. Programs read it only for a fault
 * with FL_F_BUDGET, so uncapped faults pay nothing. */
struct fl_budget {
	__u64 max;        /* injections allowed in all; 0 = no cap */
	__u64 claimed;    /* injections asked for; past max, the ones the cap refused */
	__u64 start_ns;   /* CLOCK_BOOTTIME before which the fault is inert; 0 = at once */
	__u64 reached_ns; /* CLOCK_BOOTTIME when injection number max was claimed; 0 = not yet */
};

/* A syscall fault's brakes (--after, --max-injections, --start-after), at the end
 * of the policy of the socket hooks (fl_sa_policy) and of the syscall programs
 * (fl_sc_policy). The counters are bumped atomically by every CPU, so the
 * counts hold exactly however many threads call at once. */
struct fl_call_budget {
	__u64 after;      /* matching calls to let through untouched first; 0 = none */
	__u64 max;        /* injections allowed in all; 0 = no cap */
	__u64 start_ns;   /* CLOCK_BOOTTIME before which every call passes; 0 = at once */
	__u64 seen;       /* matching calls once started (counted only with `after`) */
	__u64 claimed;    /* injections asked for (counted only with `max`); past max, refused */
	__u64 reached_ns; /* CLOCK_BOOTTIME when injection number max was claimed; 0 = not yet */
};

/* A fault's seeded generator (--seed), one per CPU in the per-CPU map fl_rng,
 * indexed by slot. Userspace writes every possible CPU's state before the fault
 * is active (seeded_state(seed, cpu) in base/seeded_random.h); the programs
 * step it (xorshift64*) per decision, so the same packets on the same CPU get
 * the same decisions. A map of its own, like fl_budget, so fl_faults keeps its
 * layout; read only for a fault with FL_F_SEEDED. `seed` is the same on every
 * CPU, for status to print. */
struct fl_rng {
	__u64 state;
	__u64 seed;
};

struct fl_fault_stats {
	__u64 matched;
	__u64 dropped;
	__u64 corrupted;
	__u64 duplicated;
	__u64 delayed;
	__u64 bytes;
};

/* Per-CPU decision memory for correlated and Gilbert-Elliott loss. */
struct fl_loss_state {
	__u32 last_drop;
	__u32 ge_bad;
};

/* Shared EDT clock of a bandwidth fault. */
struct fl_rate_state {
	__u64 next_ns;
};

struct fl_dist_table {
	__s16 v[FL_DIST_SIZE];
};

/* What a fault is, for status and reaping (userspace only). */
#define FL_META_SPEC_MAX 976
struct fl_meta {
	__u64 created_ns;  /* CLOCK_BOOTTIME */
	__u64 expires_ns;  /* CLOCK_BOOTTIME */
	__u32 owner_pid;   /* the faultctl that applies it; 0 after it is gone */
	__u32 n_exact;     /* index entries it owns, to know what to clean */
	__u32 n_prefix;
	__u32 n_dns;
	__u64 owner_start; /* owner's start time (clock ticks), against pid reuse */
	char spec[FL_META_SPEC_MAX]; /* JSON, NUL-terminated */
};

/* One attached program: a device and direction in a namespace. */
struct fl_attach_key {
	__u32 netns_ino;
	__u32 ifindex;
	__u32 dir;  /* FL_DIR_EGRESS or FL_DIR_INGRESS */
	__u32 pad;
};

enum fl_attach_mode {
	FL_ATTACH_TCX = 1,
	FL_ATTACH_TC = 2,
};

struct fl_attach_val {
	__u32 mode;          /* enum fl_attach_mode */
	__u32 created_clsact; /* we created the clsact qdisc, so we remove it */
	__u32 prog_id;
	__u32 link_id;       /* TCX only */
	__u32 created_fq;    /* we made fq the root qdisc (EDT), so we remove it */
	char ifname[16];
	char netns_path[92]; /* to re-enter for tc detach */
};

#ifdef __cplusplus
static_assert(sizeof(struct fl_addr) == 16, "fl_addr");
static_assert(sizeof(struct fl_lpm_key) == 20, "fl_lpm_key");
static_assert(sizeof(struct fl_bucket) == 32, "fl_bucket");
static_assert(sizeof(struct fl_dns_key) == 260, "fl_dns_key");
static_assert(sizeof(struct fl_control) == 16, "fl_control");
static_assert(sizeof(struct fl_prefix_lens) == 16, "fl_prefix_lens");
static_assert(sizeof(struct fl_exact_bloom_block) == 64, "fl_exact_bloom_block");
static_assert(sizeof(struct fl_fault) == 152, "fl_fault");
static_assert(sizeof(struct fl_fault_stats) == 48, "fl_fault_stats");
static_assert(sizeof(struct fl_budget) == 32, "fl_budget");
static_assert(sizeof(struct fl_rng) == 16, "fl_rng");
static_assert(sizeof(struct fl_call_budget) == 48, "fl_call_budget");
static_assert(sizeof(struct fl_loss_state) == 8, "fl_loss_state");
static_assert(sizeof(struct fl_meta) == 1016, "fl_meta");
static_assert(sizeof(struct fl_attach_key) == 16, "fl_attach_key");
static_assert(sizeof(struct fl_attach_val) == 128, "fl_attach_val");
static_assert(sizeof(struct fl_dist_table) == 2 * FL_DIST_SIZE, "fl_dist_table");
#endif

#endif /* FAULTLINE_ABI_H */
