/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* UAPI constants the programs share. vmlinux.h carries the kernel's types and
 * enums from BTF, never a #define, so these are spelled out once here. BPF side
 * only: include after vmlinux.h. */
#ifndef FAULTLINE_CONSTS_BPF_H
#define FAULTLINE_CONSTS_BPF_H

/* linux/if_ether.h */
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

/* linux/socket.h */
#define AF_INET 2
#define AF_INET6 10

/* linux/in6.h: ICMPv6, and the IPv6 extension headers a parser steps over */
#define IPPROTO_HOPOPTS 0   /* hop-by-hop options */
#define IPPROTO_ROUTING 43  /* routing header */
#define IPPROTO_FRAGMENT 44 /* fragment header */
#define IPPROTO_ICMPV6 58
#define IPPROTO_DSTOPTS 60  /* destination options */

/* linux/pkt_cls.h: what a tc program returns */
/* lo is ifindex 1 in every network namespace (LOOPBACK_IFINDEX). */
#define LOOPBACK_IFINDEX 1

#define TC_PASS (-1) /* TC_ACT_UNSPEC / TCX_NEXT: let the next program decide */
#define TC_SHOT 2
#define TC_STOLEN 4

#endif /* FAULTLINE_CONSTS_BPF_H */
