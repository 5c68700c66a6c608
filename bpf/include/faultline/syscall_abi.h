/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Syscall errno injection in the kernel (BPF LSM and kprobe override): shared by
 * syscall_lsm.bpf.c, syscall_override.bpf.c and userspace. */
#ifndef FAULTLINE_SYSCALL_ABI_H
#define FAULTLINE_SYSCALL_ABI_H

#include "faultline/abi.h"

/* Operations the LSM rung can fail, one LSM hook each. */
enum fl_sc_op {
	FL_SC_OPEN = 0,    /* lsm/file_open: open, openat, openat2, creat */
	FL_SC_EXEC = 1,    /* lsm/bprm_check_security: execve, execveat */
	FL_SC_CONNECT = 2, /* lsm/socket_connect: connect on IPv4/IPv6 sockets */
	FL_SC_READ = 3,    /* lsm/file_permission with MAY_READ: read, readv, pread64, ... */
	FL_SC_WRITE = 4,   /* lsm/file_permission with MAY_WRITE: write, writev, pwrite64, ... */
	FL_SC_UNLINK = 5,  /* lsm/inode_unlink: unlink, unlinkat */
	FL_SC_ANY = 6,     /* kprobe override: whatever syscall the program is attached to */
	FL_SC_OP_MAX,
};
#define FL_SC_BIT(op) (1U << (op))

/* fl_sc_policy.flags */
#define FL_SC_SKIP_LOADER (1U << 0) /* let the dynamic loader's files (*.so*, ld.so.cache) through */

/* One run of `faultctl run syscall` gets one private instance with this policy. */
struct fl_sc_policy {
	__u64 expires_ns;  /* CLOCK_BOOTTIME; the programs pass everything after it */
	__u64 cgroup_id;   /* scope: this cgroup v2 and its descendants; 0 = any */
	__u32 cgroup_level; /* depth of cgroup_id below the root (for the ancestor lookup) */
	__u32 target_tgid; /* scope: one process; 0 = any */
	__u32 ops;         /* FL_SC_BIT() set of operations to fail */
	__u32 prob;        /* P(fail) scaled to 2^32 - 1 */
	__u32 err;         /* errno to return (positive) */
	__u32 flags;       /* FL_SC_* */
	__u32 armed;       /* 0: pass everything (kill switch) */
	__u32 pad;
	struct fl_call_budget budget; /* --after, --max-injections, --start-after */
};

/* Per-CPU counters, per operation. */
struct fl_sc_stats {
	__u64 seen[FL_SC_OP_MAX];     /* calls in scope for a listed operation */
	__u64 injected[FL_SC_OP_MAX]; /* calls failed */
};

#ifdef __cplusplus
static_assert(sizeof(struct fl_sc_policy) == 96, "fl_sc_policy");
static_assert(sizeof(struct fl_sc_stats) == 16 * FL_SC_OP_MAX, "fl_sc_stats");
#endif

#endif /* FAULTLINE_SYSCALL_ABI_H */
