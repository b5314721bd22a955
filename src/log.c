/*
 * Messages on stderr, prefixed with the program name.  log_warn adds
 * strerror(errno), log_warnx does not (OpenSMTPD's convention); neither
 * changes errno.  fatal and fatalx are for bugs and exhausted resources only.
 *
 * Levels: errors and warnings are always written, log_info too (the daemon's
 * start, stop and statistics), log_debug only with -v.  When stderr is
 * connected to the journal (systemd sets JOURNAL_STREAM to its device and
 * inode), each line starts with its syslog priority, "<3>" for an error
 * that ends the program (log_errx), "<4>" for a warning and so on, which
 * journald strips and records as the message's priority.  In a --log-file
 * (log_open) each line starts with its time, as RFC 3339 in UTC, since no
 * journal stamps it.  Control bytes in a message (of an id, a file name)
 * are written escaped: \x1b.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mhfilter.h"

/* syslog(3) priorities, for the journal. */
#define PRI_ERR		3
#define PRI_WARNING	4
#define PRI_INFO	6
#define PRI_DEBUG	7

static const char *log_name = "mhfilter";
static int	 log_verbosity;
static int	 log_journal;	/* stderr is the journal: add priorities */
static int	 log_stamp;	/* stderr is a --log-file: add the time */
static volatile int log_progress; /* a progress line ends stderr, unended */

static void	log_vwrite(int, int, const char *, va_list);

/*
 * Set the name messages start with, and see whether stderr is the journal.
 * Call again after stderr changes (--log-file).
 */
void
log_init(const char *name)
{
	struct stat	 st;
	const char	*js;
	unsigned long long dev, ino;
	int		 errsv = errno;

	log_name = name;
	log_journal = 0;
	js = getenv("JOURNAL_STREAM");
	if (js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		log_journal = 1;
	errno = errsv;
}

/*
 * Log to path (--log-file), appended, from now on: it becomes the
 * standard error, and log_init looks again (no longer the journal).  The
 * daemon calls it again on SIGHUP (logrotate).  0, or -1 and a cause.
 */
int
log_open(const char *path, char **cause)
{
	int	 fd;

	fd = open(path, O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0666);
	if (fd == -1) {
		xasprintf(cause, "--log-file %s: %s", path, strerror(errno));
		return (-1);
	}
	fflush(stderr);
	if (dup2(fd, STDERR_FILENO) == -1) {
		xasprintf(cause, "--log-file %s: %s", path, strerror(errno));
		close(fd);
		return (-1);
	}
	close(fd);
	log_init(log_name);
	log_stamp = 1;
	return (0);
}

/* Is log_debug writing (-v)? */
int
log_debugging(void)
{
	return (log_verbosity > 0);
}

/* Set how much is logged: 0 (the default) or more for log_debug. */
void
log_verbose(int v)
{
	log_verbosity = v;
}

/*
 * Copy s to out (size len) with its control bytes as \xHH: an id or a
 * file name may hold an escape sequence for the terminal, or a newline
 * that would forge another message.
 */
void
log_escape(const char *s, char *out, size_t len)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 o = 0;

	for (; *u != '\0' && o + 5 < len; u++) {
		if (*u < 0x20 || *u == 0x7f)
			o += snprintf(out + o, len - o, "\\x%02x", *u);
		else
			out[o++] = *u;
	}
	out[o] = '\0';
}

/* Write one message, with strerror(errsv) when errsv is not 0. */
static void
log_vwrite(int pri, int errsv, const char *fmt, va_list ap)
{
	char	 raw[1024], msg[4 * sizeof raw], prefix[32] = "";
	struct tm tm;
	time_t	 t;

	vsnprintf(raw, sizeof raw, fmt, ap);
	log_escape(raw, msg, sizeof msg);
	/* A message does not run on from a progress line: it clears it. */
	if (log_progress) {
		log_progress = 0;
		fputs("\r\033[K", stderr);
	}
	if (log_journal)
		snprintf(prefix, sizeof prefix, "<%d>", pri);
	else if (log_stamp) {
		t = time(NULL);
		gmtime_r(&t, &tm);
		strftime(prefix, sizeof prefix, "%Y-%m-%dT%H:%M:%SZ ", &tm);
	}
	if (errsv != 0)
		fprintf(stderr, "%s%s: %s: %s\n", prefix, log_name, msg,
		    strerror(errsv));
	else
		fprintf(stderr, "%s%s: %s\n", prefix, log_name, msg);
}

/*
 * A progress line was drawn on stderr without its newline (on), or ended
 * (off): the next message clears it first.
 */
void
log_progress_line(int on)
{
	log_progress = on;
}

/* Warn, adding the reason errno gives. */
void
log_warn(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(PRI_WARNING, errsv, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Report an error that ends the program (priority err). */
void
log_errx(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(PRI_ERR, 0, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Warn. */
void
log_warnx(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(PRI_WARNING, 0, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Report something worth knowing in normal operation (daemon events). */
void
log_info(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(PRI_INFO, 0, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Report details, with -v only. */
void
log_debug(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	if (log_verbosity < 1)
		return;
	va_start(ap, fmt);
	log_vwrite(PRI_DEBUG, 0, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Report errno's reason and exit. */
void
fatal(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(PRI_ERR, errsv, fmt, ap);
	va_end(ap);
	exit(EXIT_ERROR);
}

/* Report and exit. */
void
fatalx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vwrite(PRI_ERR, 0, fmt, ap);
	va_end(ap);
	exit(EXIT_ERROR);
}
