/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Reading packet headers in tc and cgroup_skb programs. BPF side only: include
 * after vmlinux.h and bpf_helpers.h. */
#ifndef FAULTLINE_SKB_HEADER_H
#define FAULTLINE_SKB_HEADER_H

/* The len bytes at off (from skb->data: the Ethernet header at tc, the IP header
 * in cgroup_skb), in place when they lie in the linear area (nearly every
 * packet), else copied into buf by bpf_skb_load_bytes, which also reads paged
 * data. NULL exactly when bpf_skb_load_bytes would fail (the packet ends before
 * off + len, or off is past 64k), so a short packet parses as it always did.
 * Like the kernel's skb_header_pointer(); a fallback copy rather than
 * bpf_skb_pull_data(), which would rewrite the skb (unclone, linearise) for a
 * packet most likely left alone. The pointer is only read until the next call:
 * nothing in between may change the packet. */
static __always_inline void *fl_skb_header(struct __sk_buff *skb, __u32 off, __u32 len, void *buf)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	void *h;

	if (off > 0xffff)
		return NULL;
	h = data + off;
	if (h + len <= end)
		return h;
	if (bpf_skb_load_bytes(skb, off, buf, len))
		return NULL;
	return buf;
}

#endif /* FAULTLINE_SKB_HEADER_H */
