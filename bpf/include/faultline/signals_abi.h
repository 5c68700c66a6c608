/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Kernel signal counters shared by signals.bpf.c and the guardrail. */
#ifndef FAULTLINE_SIGNALS_ABI_H
#define FAULTLINE_SIGNALS_ABI_H

#include "faultline/abi.h"

/* What signals.bpf.c counts: one tracepoint each, one field of fl_sig_counts each. */
enum fl_sig_event {
	FL_SIG_RETRANSMIT = 0,      /* tcp_retransmit_skb: retransmits */
	FL_SIG_RESET_SENT = 1,      /* tcp_send_reset: resets_sent */
	FL_SIG_RESET_RECEIVED = 2,  /* tcp_receive_reset: resets_received */
};

struct fl_sig_key {
	__u32 netns;          /* network namespace inode (ns.inum; st_ino of /proc/PID/ns/net) */
	struct fl_addr daddr; /* the socket's remote address */
};

struct fl_sig_counts {
	__u64 retransmits;
	__u64 resets_sent;
	__u64 resets_received;
};

#ifdef __cplusplus
static_assert(sizeof(struct fl_sig_key) == 20, "fl_sig_key");
static_assert(sizeof(struct fl_sig_counts) == 24, "fl_sig_counts");
#endif

#endif /* FAULTLINE_SIGNALS_ABI_H */
