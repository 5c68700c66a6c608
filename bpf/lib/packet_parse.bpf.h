/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The tc programs' packet parser: addresses by direction, protocol and ports of
 * an Ethernet frame, with every header read in place (fl_skb_header()).
 * netfault.bpf.c runs it on each packet, and bench/bench_progs.bpf.c includes
 * it so that the benchmark prices this parser and no copy of it. BPF side only:
 * include after vmlinux.h and bpf_helpers.h. */
#ifndef FAULTLINE_PACKET_PARSE_BPF_H
#define FAULTLINE_PACKET_PARSE_BPF_H

#include <bpf/bpf_endian.h>
#include "faultline/abi.h"
#include "lib/consts.bpf.h"
#include "lib/helpers.bpf.h"
#include "lib/skb_header.h"

#define IP_OFFSET 0x1FFF  /* iphdr.frag_off: the fragment offset bits */
#define IP6_OFFSET 0xFFF8 /* frag_hdr.frag_off: the fragment offset bits */

struct fl_pkt {
	struct fl_addr remote;
	struct fl_addr local;
	__u32 l4_off;      /* from skb->data */
	__u32 payload_off; /* first byte after the L4 header; 0 if unknown */
	__u16 rport;
	__u16 lport;
	__u8 proto;
};

/* The first bytes of a TCP or UDP header: ports, and TCP's data offset. */
struct fl_l4_head {
	__be16 source;
	__be16 dest;
	__u8 seq_ack[8];
	__u8 doff; /* TCP: header length in 32-bit words, high nibble */
};

#define FL_L4_PORTS_LEN 4
#define FL_L4_TCP_LEN 13 /* through the data offset byte */

static __always_inline void fl_parse_l4(struct __sk_buff *skb, struct fl_pkt *p, __u8 dir)
{
	__u32 l4_off = p->l4_off;
	struct fl_l4_head buf, *l4;
	__u32 hlen;

	switch (p->proto) {
	case IPPROTO_TCP:
		/* A segment cut before its data offset yields no ports either. */
		l4 = fl_skb_header(skb, l4_off, FL_L4_TCP_LEN, &buf);
		if (!l4)
			return;
		hlen = (l4->doff >> 4) * 4;
		break;
	case IPPROTO_UDP:
		l4 = fl_skb_header(skb, l4_off, FL_L4_PORTS_LEN, &buf);
		if (!l4)
			return;
		hlen = 8;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		p->payload_off = l4_off + 8;
		return;
	default:
		return;
	}
	if (dir == FL_DIR_EGRESS) {
		p->lport = bpf_ntohs(l4->source);
		p->rport = bpf_ntohs(l4->dest);
	} else {
		p->rport = bpf_ntohs(l4->source);
		p->lport = bpf_ntohs(l4->dest);
	}
	p->payload_off = l4_off + hlen;
	return;
}

#define FL_PARSE_NOT_IP (-1) /* not an IP packet we understand: never touched */
#define FL_PARSE_NO_L4 0     /* addresses and protocol; no L4 header to read */
#define FL_PARSE_L4 1        /* and an L4 header at p->l4_off, for fl_parse_l4() */

/* Fills remote/local by direction, the protocol and where L4 starts. Headers
 * are read in place (see fl_skb_header()); each pointer is done with before the
 * next header is fetched. */
static __always_inline int fl_parse_ip(struct __sk_buff *skb, struct fl_pkt *p, __u8 dir)
{
	__u16 proto = bpf_ntohs(skb->protocol);

	if (proto == ETH_P_IP) {
		struct iphdr buf, *ip;

		ip = fl_skb_header(skb, ETH_HLEN, sizeof(*ip), &buf);
		if (!ip)
			return FL_PARSE_NOT_IP;
		if (dir == FL_DIR_EGRESS) {
			fl_addr_from_v4(&p->remote, ip->daddr);
			fl_addr_from_v4(&p->local, ip->saddr);
		} else {
			fl_addr_from_v4(&p->remote, ip->saddr);
			fl_addr_from_v4(&p->local, ip->daddr);
		}
		p->proto = ip->protocol;
		p->l4_off = ETH_HLEN + ip->ihl * 4;
		/* Only the first fragment carries the L4 header. */
		if (bpf_ntohs(ip->frag_off) & IP_OFFSET)
			return FL_PARSE_NO_L4;
		return FL_PARSE_L4;
	}
	if (proto == ETH_P_IPV6) {
		struct ipv6hdr buf, *ip6;
		__u8 nexthdr;
		__u32 off;

		ip6 = fl_skb_header(skb, ETH_HLEN, sizeof(*ip6), &buf);
		if (!ip6)
			return FL_PARSE_NOT_IP;
		if (dir == FL_DIR_EGRESS) {
			__builtin_memcpy(p->remote.b, &ip6->daddr, 16);
			__builtin_memcpy(p->local.b, &ip6->saddr, 16);
		} else {
			__builtin_memcpy(p->remote.b, &ip6->saddr, 16);
			__builtin_memcpy(p->local.b, &ip6->daddr, 16);
		}
		nexthdr = ip6->nexthdr;
		off = ETH_HLEN + sizeof(*ip6);
		/* Walk a bounded number of extension headers. */
		for (int i = 0; i < 4; i++) {
			/* next header, length; a fragment header's offset follows */
			__u8 ebuf[4], *ext;

			if (nexthdr != IPPROTO_HOPOPTS && nexthdr != IPPROTO_ROUTING &&
			    nexthdr != IPPROTO_DSTOPTS && nexthdr != IPPROTO_FRAGMENT)
				break;
			if (nexthdr == IPPROTO_FRAGMENT) {
				ext = fl_skb_header(skb, off, 4, ebuf);
				if (!ext)
					return FL_PARSE_NOT_IP;
				nexthdr = ext[0];
				off += 8;
				if (((ext[2] << 8) | ext[3]) & IP6_OFFSET) { /* not the first fragment */
					p->proto = nexthdr;
					p->l4_off = off;
					return FL_PARSE_NO_L4;
				}
				continue;
			}
			/* The others give their length in 8-octet units, not counting the first 8. */
			ext = fl_skb_header(skb, off, 2, ebuf);
			if (!ext)
				return FL_PARSE_NOT_IP;
			nexthdr = ext[0];
			off += (ext[1] + 1) * 8;
		}
		p->proto = nexthdr;
		p->l4_off = off;
		return FL_PARSE_L4;
	}
	return FL_PARSE_NOT_IP;
}

#endif /* FAULTLINE_PACKET_PARSE_BPF_H */
