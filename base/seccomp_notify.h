// What every seccomp user-notification supervisor does to its notify fd.
#pragma once

namespace faultline {

// Linux 6.6: the notify fd's waker and waiter trade one CPU instead of waking
// each other across CPUs: the caller waits for our answer, so its CPU is free
// while we work, and an inter-processor wake-up costs tens of microseconds on
// a VM. Older kernels refuse the flag and wake across CPUs, as before.
void prefer_sync_wake_up(int notify_fd);

}  // namespace faultline
