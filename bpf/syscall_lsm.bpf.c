// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Syscall errno injection through BPF LSM hooks, one hook per operation, for one
 * scope (a cgroup or a process): open, exec, connect, read/write, unlink. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "lib/consts.bpf.h"
#include "lib/syscall_scope.h"

#define MAY_WRITE 0x2
#define MAY_READ 0x4
#define FMODE_EXEC 0x20
#define __FMODE_EXEC 0x20 /* the open flag that asks for FMODE_EXEC */
#define NAME_MAX_READ 64

/* The dynamic loader's files: "*.so", "*.so.N..." and ld.so.cache/ld.so.preload
 * (which contain ".so."). Failing them stops a program before its main(), which
 * tests nothing an operator cares about; userspace asks for this skip unless
 * --include-loader. Only the last path component is looked at. */
static __always_inline int loader_file(struct file *file)
{
	char name[NAME_MAX_READ];
	const unsigned char *p = BPF_CORE_READ(file, f_path.dentry, d_name.name);

	if (bpf_probe_read_kernel_str(name, sizeof(name), p) <= 0)
		return 0;
	for (int i = 0; i < NAME_MAX_READ - 3; i++) {
		if (name[i] == 0)
			break;
		if (name[i] == '.' && name[i + 1] == 's' && name[i + 2] == 'o' &&
		    (name[i + 3] == 0 || name[i + 3] == '.'))
			return 1;
	}
	return 0;
}

static __always_inline int file_op(struct file *file, __u32 op)
{
	struct fl_sc_policy *p = fl_sc_in_scope(op);

	if (!p)
		return 0;
	if ((p->flags & FL_SC_SKIP_LOADER) && loader_file(file))
		return 0;
	return fl_sc_draw(p, op);
}

/* An earlier LSM's verdict (ret) always stands; we only ever add a failure. */

SEC("lsm/file_open")
int BPF_PROG(fl_sc_open, struct file *file, int ret)
{
	if (ret)
		return ret;
	/* execve opens the binary and its ELF interpreter through this hook too:
	 * that is the exec operation, not an open. Such opens carry __FMODE_EXEC in
	 * f_flags on every kernel; newer ones also mark f_mode with FMODE_EXEC. */
	if ((file->f_flags & __FMODE_EXEC) || (file->f_mode & FMODE_EXEC))
		return 0;
	return file_op(file, FL_SC_OPEN);
}

SEC("lsm/file_permission")
int BPF_PROG(fl_sc_perm, struct file *file, int mask, int ret)
{
	if (ret)
		return ret;
	/* rw_verify_area asks for one of the two; readdir also asks MAY_READ. */
	if (mask & MAY_WRITE)
		return file_op(file, FL_SC_WRITE);
	if (mask & MAY_READ)
		return file_op(file, FL_SC_READ);
	return 0;
}

SEC("lsm/bprm_check_security")
int BPF_PROG(fl_sc_exec, struct linux_binprm *bprm, int ret)
{
	struct fl_sc_policy *p;

	if (ret)
		return ret;
	p = fl_sc_in_scope(FL_SC_EXEC);
	return p ? fl_sc_draw(p, FL_SC_EXEC) : 0;
}

SEC("lsm/socket_connect")
int BPF_PROG(fl_sc_connect, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	struct fl_sc_policy *p;
	__u16 family;

	if (ret)
		return ret;
	p = fl_sc_in_scope(FL_SC_CONNECT);
	if (!p)
		return 0;
	/* Leave unix and netlink sockets alone, like the cgroup hooks do. */
	family = address->sa_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	return fl_sc_draw(p, FL_SC_CONNECT);
}

SEC("lsm/inode_unlink")
int BPF_PROG(fl_sc_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	struct fl_sc_policy *p;

	if (ret)
		return ret;
	p = fl_sc_in_scope(FL_SC_UNLINK);
	return p ? fl_sc_draw(p, FL_SC_UNLINK) : 0;
}

/* "GPL", not "Dual BSD/GPL" like the packet and socket objects: this object is
 * built on GPL-only kernel interfaces (the kernel loads a BPF LSM program only
 * under a GPL-compatible licence, see bpf_lsm_verify_prog(), and
 * bpf_probe_read_kernel_str() is a GPL-only helper), so it is offered under
 * the GPL alone. "Dual BSD/GPL" would load as well: the kernel counts it as
 * GPL-compatible. */
char LICENSE[] SEC("license") = "GPL";
