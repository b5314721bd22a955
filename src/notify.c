/*
 * systemd integration without libsystemd: the two documented interfaces,
 * each a few lines.
 *
 * sd_notify(3): state changes ("READY=1", "STOPPING=1", "STATUS=...",
 * "WATCHDOG=1") are datagrams sent to the AF_UNIX socket named by
 * $NOTIFY_SOCKET, a path, or an abstract name when it starts with '@'.
 * Without the variable nothing is sent.
 *
 * sd_listen_fds(3): a socket-activated service inherits its listening
 * sockets as file descriptors 3, 4, ... ($LISTEN_FDS of them), meant for
 * the process whose pid is $LISTEN_PID, with optional names in
 * $LISTEN_FDNAMES (colon-separated, from FileDescriptorName=).
 */

#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhfilter.h"

#define LISTEN_FDS_START	3
#define LISTEN_FDS_MAX		64

/*
 * Send one notification, printf-style ("READY=1\nSTATUS=...").  Returns 1
 * if sent, 0 without $NOTIFY_SOCKET, -1 on an error (logged once: a
 * broken notification socket must not stop the service).
 */
int
notify_send(const char *fmt, ...)
{
	static int		 warned;
	struct sockaddr_un	 sun;
	const char		*path;
	socklen_t		 len;
	va_list			 ap;
	char			 msg[1024];
	int			 fd, n;

	if ((path = getenv("NOTIFY_SOCKET")) == NULL || *path == '\0')
		return (0);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if ((path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof sun.sun_path) {
		if (!warned++)
			log_warnx("NOTIFY_SOCKET %s: not a socket path", path);
		return (-1);
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (path[0] == '@')
		sun.sun_path[0] = '\0';	/* abstract: no terminating NUL */
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path);

	if ((fd = socket(AF_UNIX, SOCK_DGRAM|SOCK_CLOEXEC, 0)) == -1) {
		if (!warned++)
			log_warn("NOTIFY_SOCKET: socket");
		return (-1);
	}
	n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL,
	    (struct sockaddr *)&sun, len);
	if (n == -1 && !warned++)
		log_warn("NOTIFY_SOCKET %s", path);
	close(fd);
	return (n == -1 ? -1 : 1);
}

/*
 * How many sockets systemd passed to this process: 0 unless $LISTEN_PID is
 * our pid and $LISTEN_FDS a sensible count.
 */
int
notify_listen_count(void)
{
	const char	*s;
	char		*end;
	unsigned long	 pid, n;

	if ((s = getenv("LISTEN_PID")) == NULL)
		return (0);
	errno = 0;
	pid = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' ||
	    pid != (unsigned long)getpid())
		return (0);
	if ((s = getenv("LISTEN_FDS")) == NULL)
		return (0);
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || n > LISTEN_FDS_MAX)
		return (0);
	return ((int)n);
}

/*
 * Take the sockets systemd passed: each made close-on-exec, with its name
 * from $LISTEN_FDNAMES ("" when absent).  The variables are then removed,
 * as sd_listen_fds(1) does, so that nothing else takes them.  Returns the
 * count; *fds is an array of that many, or NULL.
 */
size_t
notify_listen_fds(struct notify_fd **fds)
{
	const char	*names;
	char		*copy, *p, *name;
	int		 n, i, flags;

	*fds = NULL;
	if ((n = notify_listen_count()) <= 0) {
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_FDNAMES");
		return (0);
	}
	*fds = xcalloc(n, sizeof **fds);
	names = getenv("LISTEN_FDNAMES");
	p = copy = xstrdup(names != NULL ? names : "");
	for (i = 0; i < n; i++) {
		(*fds)[i].fd = LISTEN_FDS_START + i;
		if ((flags = fcntl((*fds)[i].fd, F_GETFD)) != -1)
			fcntl((*fds)[i].fd, F_SETFD, flags | FD_CLOEXEC);
		name = p != NULL ? strsep(&p, ":") : NULL;
		(*fds)[i].name = xstrdup(name != NULL ? name : "");
	}
	free(copy);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return (n);
}

/*
 * The watchdog interval systemd asks for ($WATCHDOG_USEC, for this process
 * when $WATCHDOG_PID is set), or 0.
 */
uint64_t
notify_watchdog_usec(void)
{
	const char	*s;
	char		*end;
	unsigned long long v;

	if ((s = getenv("WATCHDOG_PID")) != NULL &&
	    strtoul(s, NULL, 10) != (unsigned long)getpid())
		return (0);
	if ((s = getenv("WATCHDOG_USEC")) == NULL)
		return (0);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0')
		return (0);
	return (v);
}
