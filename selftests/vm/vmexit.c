/* fl-vmexit CODE: ends the VM through qemu's isa-debug-exit device, which makes
 * qemu exit with (CODE << 1) | 1. The kernel has no /dev/port: use the I/O port. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/io.h>

int main(int argc, char **argv)
{
	unsigned int code = argc > 1 ? (unsigned int)atoi(argv[1]) : 0;

	if (ioperm(0xf4, 4, 1) != 0) {
		perror("ioperm");
		return 1;
	}
	outl(code, 0xf4);
	return 1; /* not reached when the device is there */
}
