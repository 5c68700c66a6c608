/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The policy, scope test and counters both syscall fault programs share
 * (syscall_lsm.bpf.c and syscall_override.bpf.c). BPF side only (it defines
 * maps): include after vmlinux.h and bpf_helpers.h. */
#ifndef FAULTLINE_SYSCALL_SCOPE_H
#define FAULTLINE_SYSCALL_SCOPE_H

#include "faultline/syscall_abi.h"
#include "lib/helpers.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_sc_policy);
} fl_sc_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fl_sc_stats);
} fl_sc_stats SEC(".maps");

/* The policy if the current task is in its scope for op and the fault has not
 * expired, else NULL. Cheap tests first: some hooks fire on every read(). */
static __always_inline struct fl_sc_policy *fl_sc_in_scope(__u32 op)
{
	__u32 zero = 0;
	struct fl_sc_policy *p = bpf_map_lookup_elem(&fl_sc_policy, &zero);

	if (!p || !p->armed || !(p->ops & FL_SC_BIT(op)))
		return NULL;
	if (p->target_tgid && (bpf_get_current_pid_tgid() >> 32) != p->target_tgid)
		return NULL;
	if (p->cgroup_id && bpf_get_current_ancestor_cgroup_id(p->cgroup_level) != p->cgroup_id)
		return NULL;
	/* The in-kernel deadman: the fault ends on time even if faultctl is stuck. */
	if (bpf_ktime_get_boot_ns() >= p->expires_ns)
		return NULL;
	return p;
}

static __always_inline struct fl_sc_stats *fl_sc_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&fl_sc_stats, &zero);
}

/* -err as a return value the verifier can bound. Since 6.12 (found on Debian 13's
 * 6.12 under make vmtest) the verifier refuses an LSM program unless it proves
 * R0 within [-MAX_ERRNO, 0], and it does not carry bounds through a negation: a
 * plain -(int)err, err a u32 from the map, fails the load with "At program exit
 * the register R0 has smin=0 smax=4294967295 should have been in [-4095, 0]".
 * Two separate compares on the result bound it; the barriers keep clang from
 * moving the first onto err or folding both into one check on another register. Userspace only
 * stores errnos 1..4095; anything else turns into -EPERM (1). */
static __always_inline int fl_sc_errno_ret(__u32 err)
{
	int r = -(int)err;

	asm volatile("" : "+r"(r));
	if (r > 0)
		r = -1;
	asm volatile("" : "+r"(r));
	if (r < -4095)
		r = -1;
	return r;
}

/* Counts the call and draws: the errno to return (negative), or 0 to let it pass. */
static __always_inline int fl_sc_draw(struct fl_sc_policy *p, __u32 op)
{
	struct fl_sc_stats *st = fl_sc_counters();

	if (op >= FL_SC_OP_MAX)
		return 0;
	if (st)
		st->seen[op]++;
	/* Unseeded: the LSM and override programs draw with bpf_get_prandom_u32. */
	if (!fl_call_turn(&p->budget, p->prob, NULL))
		return 0;
	if (st)
		st->injected[op]++;
	return fl_sc_errno_ret(p->err);
}

#endif /* FAULTLINE_SYSCALL_SCOPE_H */
