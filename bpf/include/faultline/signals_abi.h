/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Kernel signal counters shared by signals.bpf.c and the guardrail. */
#ifndef FAULTLINE_SIGNALS_ABI_H
#define FAULTLINE_SIGNALS_ABI_H

#include "faultline/abi.h"

struct fl_sig_key {
	__u32 netns;
	struct fl_addr daddr;
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

#endif
