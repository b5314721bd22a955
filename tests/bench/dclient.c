/*
 * tests/bench/dclient: the daemon benchmark's client (tests/bench/daemon).
 *
 *   dclient SOCKET FILE...
 *
 * One connection per FILE to the daemon's unix socket, all at once: a
 * thread sends the file (sendfile(2), no copy through this process), then
 * half-closes; another counts the reply lines until the daemon closes.
 * Prints the seconds from the first connection to the last reply, then the
 * replies in all.  A client in Python took half a core of the two that the
 * daemon has, which is not what a producer on another machine costs it.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <err.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct conn {
	const char	*path;		/* the file to send */
	int		 fd;		/* the connection */
	uint64_t	 lines;		/* replies read */
	pthread_t	 sender;
	pthread_t	 reader;
};

/* Send the file, then half-close. */
static void *
send_file(void *arg)
{
	struct conn	*c = arg;
	struct stat	 st;
	off_t		 off = 0;
	ssize_t		 n;
	int		 fd;

	if ((fd = open(c->path, O_RDONLY)) == -1 || fstat(fd, &st) == -1)
		err(1, "%s", c->path);
	while (off < st.st_size) {
		n = sendfile(c->fd, fd, &off, st.st_size - off);
		if (n <= 0)
			err(1, "sendfile %s", c->path);
	}
	close(fd);
	shutdown(c->fd, SHUT_WR);
	return (NULL);
}

/* Count the reply lines until the daemon closes. */
static void *
read_replies(void *arg)
{
	struct conn	*c = arg;
	char		 local[1 << 16];
	ssize_t		 n, i;

	while ((n = read(c->fd, local, sizeof local)) > 0) {
		for (i = 0; i < n; i++)
			c->lines += local[i] == '\n';
	}
	if (n == -1)
		err(1, "read");
	return (NULL);
}

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec + ts.tv_nsec / 1e9);
}

int
main(int argc, char **argv)
{
	struct sockaddr_un	 sun;
	struct conn		*c;
	uint64_t		 total = 0;
	double			 t0;
	int			 i, n = argc - 2, tries;

	if (argc < 3) {
		fprintf(stderr, "usage: dclient SOCKET FILE...\n");
		return (2);
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", argv[1]);
	if ((c = calloc(n, sizeof *c)) == NULL)
		err(1, "calloc");
	t0 = now();
	for (i = 0; i < n; i++) {
		c[i].path = argv[i + 2];
		for (tries = 0;; tries++) {
			if ((c[i].fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
				err(1, "socket");
			if (connect(c[i].fd, (struct sockaddr *)&sun,
			    sizeof sun) == 0)
				break;
			close(c[i].fd);
			if (tries == 3000)
				err(1, "connect %s", argv[1]);
			usleep(10000);	/* the daemon is starting */
		}
		if (i == 0)
			t0 = now();
	}
	for (i = 0; i < n; i++) {
		if (pthread_create(&c[i].reader, NULL, read_replies, &c[i]) ||
		    pthread_create(&c[i].sender, NULL, send_file, &c[i]))
			errx(1, "pthread_create");
	}
	for (i = 0; i < n; i++) {
		pthread_join(c[i].sender, NULL);
		pthread_join(c[i].reader, NULL);
		total += c[i].lines;
	}
	printf("%.3f %llu\n", now() - t0, (unsigned long long)total);
	return (0);
}
