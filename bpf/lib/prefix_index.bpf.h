/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The prefix index: fl_prefix (LPM trie), its hash mirror fl_prefix_hash and the
 * list of lengths present, fl_prefix_lens (see FL_IDX_PREFIX_HASH in abi.h).
 * Included by netfault and by the benchmark's helper programs, which share the
 * maps by pin name, so both price the same lookup. fl_prefix_bloom filters
 * the hash probes. */
#ifndef FAULTLINE_PREFIX_INDEX_BPF_H
#define FAULTLINE_PREFIX_INDEX_BPF_H

#include "faultline/abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FL_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_lpm_key);
	__type(value, struct fl_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_prefix SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FL_MAX_PREFIXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fl_lpm_key); /* addr masked to prefixlen */
	__type(value, struct fl_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_prefix_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_prefix_lens);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_prefix_lens SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FL_PREFIX_BLOOM_BLOCKS);
	__uint(map_flags, BPF_F_MMAPABLE); /* userspace sets and clears bits in place */
	__type(key, __u32);
	__type(value, struct fl_exact_bloom_block);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fl_prefix_bloom SEC(".maps");

/* Whether fl_prefix_bloom may hold (len, masked address m); 1 when unsure. */
static __always_inline int fl_prefix_may_hold(__u32 len, const __u32 *m)
{
	struct fl_exact_bloom_block *blk;
	__u32 h, block;

	h = fl_prefix_bloom_hash(len, m[0], m[1], m[2], m[3]);
	block = h / FL_EXACT_BLOOM_BLOCK_BITS;
	blk = bpf_map_lookup_elem(&fl_prefix_bloom, &block);
	if (!blk)
		return 1;
	return (blk->w[(h / 64) % (FL_EXACT_BLOOM_BLOCK_BITS / 64)] >> (h % 64)) & 1;
}

/* The mask of 32-bit word w (0..3, network order) of an address cut to len bits. */
static __always_inline __u32 fl_word_mask(__u32 len, __u32 w)
{
	__u32 lo = w * 32;

	if (len <= lo)
		return 0;
	if (len >= lo + 32)
		return 0xffffffff;
	return bpf_htonl(0xffffffffU << (32 - (len - lo)));
}

/* The bucket of the longest prefix holding a, or NULL: a few hash probes while
 * the control vouches for the mirror, else one trie walk. */
static __always_inline struct fl_bucket *fl_prefix_find(const struct fl_addr *a, __u32 index)
{
	struct fl_lpm_key lk;
	__u32 w[4];

	__builtin_memcpy(w, a->b, sizeof(w));
	if (index & FL_IDX_PREFIX_HASH) {
		struct fl_prefix_lens *pl;
		__u32 zero = 0, i;

		pl = bpf_map_lookup_elem(&fl_prefix_lens, &zero);
		if (pl) {
			__u32 n = pl->n;

			for (i = 0; i < FL_PREFIX_HASH_LENS; i++) {
				struct fl_bucket *b;
				__u32 len, m[4];

				if (i >= n)
					break;
				len = pl->len[i];
				m[0] = w[0] & fl_word_mask(len, 0);
				m[1] = w[1] & fl_word_mask(len, 1);
				m[2] = w[2] & fl_word_mask(len, 2);
				m[3] = w[3] & fl_word_mask(len, 3);
				if (!fl_prefix_may_hold(len, m))
					continue;
				lk.prefixlen = len;
				__builtin_memcpy(lk.addr.b, m, sizeof(m));
				b = bpf_map_lookup_elem(&fl_prefix_hash, &lk);
				if (b)
					return b;
			}
			return NULL;
		}
	}
	lk.prefixlen = 128;
	__builtin_memcpy(lk.addr.b, w, sizeof(w));
	return bpf_map_lookup_elem(&fl_prefix, &lk);
}

#endif
