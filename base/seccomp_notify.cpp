// SECCOMP_IOCTL_NOTIF_SET_FLAGS, named here when the uapi headers are older.
#include "base/seccomp_notify.h"

#include <linux/seccomp.h>
#include <sys/ioctl.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

namespace faultline {

void prefer_sync_wake_up(int notify_fd) {
  (void)::ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

}  // namespace faultline
