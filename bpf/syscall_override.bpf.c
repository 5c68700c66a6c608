// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Errno injection on any syscall: a kprobe on the syscall's entry function that
 * returns the errno with bpf_override_return instead of running it. Needs
 * CONFIG_BPF_KPROBE_OVERRIDE (and so CONFIG_FUNCTION_ERROR_INJECTION); the same
 * program is attached to every listed syscall, with the same scope as the LSM rung. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "lib/syscall_scope.h"

/* No target in the section: userspace attaches it with bpf_program__attach_ksyscall
 * per syscall name, which resolves the architecture's entry prefix (__x64_sys_...). */
SEC("ksyscall")
int fl_sc_override(struct pt_regs *ctx)
{
	struct fl_sc_policy *p = fl_sc_in_scope(FL_SC_ANY);
	int err;

	if (!p)
		return 0;
	err = fl_sc_draw(p, FL_SC_ANY);
	if (err)
		bpf_override_return(ctx, (__u64)(long)err);
	return 0;
}

/* "GPL", not "Dual BSD/GPL" like the packet and socket objects: this object is
 * built on bpf_override_return(), a GPL-only helper, so it is offered under the
 * GPL alone. "Dual BSD/GPL" would load as well: the kernel counts it as
 * GPL-compatible. */
char LICENSE[] SEC("license") = "GPL";
