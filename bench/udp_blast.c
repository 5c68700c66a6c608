/* fl_bench_udp_blast: the per-datagram probe of the policy throughput bench
 * (scripts/bench-policy.sh). Sends SIZE-byte UDP datagrams with sendto() on an
 * unconnected socket, so every datagram passes the cgroup sendmsg hook as well
 * as the netfilter OUTPUT chain, for SECONDS, and prints the datagrams sent per
 * second of wall time and per second of this process's CPU time (user +
 * system: the send path, hooks and rules included, without the time other
 * processes of a shared machine took the CPU); or, with --sink, receives and
 * discards them until killed.
 *
 *   fl_bench_udp_blast --dst IP --port PORT [--seconds S] [--size BYTES]
 *   fl_bench_udp_blast --sink --port PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
	       (double)u.ru_stime.tv_usec / 1e6;
}

static int usage(void)
{
	fprintf(stderr, "usage: fl_bench_udp_blast --dst IP --port PORT [--seconds S] [--size BYTES]\n"
			"       fl_bench_udp_blast --sink --port PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *dst = NULL;
	int port = 0, sink = 0, size = 64;
	double seconds = 2;
	struct sockaddr_in sa;
	char buf[65536];
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sink"))
			sink = 1;
		else if (!strcmp(argv[i], "--dst") && i + 1 < argc)
			dst = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = atoi(argv[++i]);
		else
			return usage();
	}
	if (port <= 0 || port > 65535 || (!sink && !dst) || size < 1 || size > (int)sizeof(buf) || seconds <= 0)
		return usage();
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	if (sink) {
		int big = 8 << 20;

		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			perror("bind");
			return 1;
		}
		for (;;)
			(void)!recv(fd, buf, sizeof(buf), 0);
	}
	if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1)
		return usage();
	memset(buf, 0x5a, (size_t)size);
	unsigned long long sent = 0, failed = 0;
	double start = now_s(), end = start + seconds, t = start, cpu0 = cpu_s(), cpu;
	/* The clock is read once per 256 datagrams: its cost stays out of the figure. */
	while (t < end) {
		for (int i = 0; i < 256; i++) {
			if (sendto(fd, buf, (size_t)size, 0, (struct sockaddr *)&sa, sizeof(sa)) == size)
				sent++;
			else
				failed++;
		}
		t = now_s();
	}
	cpu = cpu_s() - cpu0;
	printf("%.0f %.0f\n", (double)sent / (t - start), cpu > 0 ? (double)sent / cpu : 0);
	if (failed)
		fprintf(stderr, "fl_bench_udp_blast: %llu sends failed (last: %s)\n", failed, strerror(errno));
	return 0;
}
