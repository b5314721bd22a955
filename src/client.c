/*
 * The client (--connect ADDR): the files, or standard input, read as the
 * stream reads them (input.c), sent to a daemon (mhfilter --listen), and
 * the daemon's reply to each record written as the stream would write the
 * record: the same bytes for the same verdicts (output.c).
 *
 *   input --records--> window (held until answered) --> socket
 *   output <--(output.c)-- verdicts <--reply lines (PROTOCOL)-- socket
 *
 * One thread and poll(2).  Records are sent ahead of their replies, up
 * to a window of CLIENT_WINDOW records (--connect-window) and
 * CLIENT_WINDOW_BYTES bytes; each record's bytes are kept until its
 * reply comes, then written, in input order.  Records the daemon cannot
 * be sent are decided here as the stream decides them: a record over
 * --max-bytes (the daemon would drop the connection), a blank line of
 * tsv or jsonl (no record), a record that would read as a daemon command.
 *
 * A connection that ends (the daemon restarted, "busy", "idle",
 * "shutdown", a batch that failed to commit) is made again, and the
 * records sent on it but not answered are sent again, in order, on the
 * new one: the daemon's feed semantics (mhfilter(1), Feeds, replays and
 * crashes) answer one whose first answer was lost as a replay (unique),
 * one answered and taken before as seen.  Failed attempts in a row are
 * bounded (--connect-retries), with a backoff doubling from
 * RETRY_FIRST_MS to RETRY_MAX_MS; a reply resets the count.
 *
 * Each connection starts with the command "#mhfilter ack", and for -p,
 * --clusters and --group "#mhfilter pairs" and "#mhfilter groups", whose
 * replies come first; a duplicate's reply then carries every match and
 * its group.  With "ack" the daemon counts a reply delivered only once
 * the client says "#mhfilter taken N" (N: reply bytes taken on the
 * connection), which it does once it wrote, and synced, the records they
 * answer (client_tell), and before it closes, after the daemon's error
 * line too (client_end): a client killed between a reply and its record's
 * output gets the record as a replay when run again.
 *
 * Records without an id of their own (-f line, JSON Lines without the
 * --id-field) get RUN:CONN:NUMBER from the daemon.  The client keeps, for
 * each of its connections, which of its records each NUMBER was, and
 * writes a match that names one of them as the stream would name it: by
 * its record number (record_idstr).
 *
 * TLS (tls:HOST:PORT) is the TLS module's (tls.c: tlsmod's client
 * functions), so that this program does not link OpenSSL.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mhfilter.h"

#define CLIENT_WINDOW_BYTES (64U << 20) /* record bytes held, unanswered */
#define SEND_CHUNK	(256 * 1024)	/* queued for the socket at once */
#define READ_CHUNK	(256 * 1024)
#define RETRY_FIRST_MS	100
#define RETRY_MAX_MS	5000
#define CONNECT_SECS	10		/* a connect or a TLS handshake */
#define COMMAND		"#mhfilter "

/* A record of the window. */
struct crec {
	struct record	 r;
	struct verdict	 v;
	int		 local;		/* decided here, never sent */
	uint64_t	 k;		/* its number on the connection */
	uint64_t	 conn;		/* the connection that answered it */
	uint64_t	 upto;		/* its reply ends there (rbytes) */
};

/* Which record each of a connection's numbers was: runs of (k, recno). */
struct connmap {
	char		*prefix;	/* "RUN:CONN:", once a reply said it */
	struct u64vec	 runs;		/* k, recno pairs */
};

struct client {
	const struct client_opts	*o;
	const struct pipeline_opts	*po;
	struct input			*in;
	struct output			*out;
	int				 senddelim;
	uint64_t			 recno;
	int				 eof;
	int				 status;	/* the first error's */
	uint64_t			 skipped_files;

	/* The window: records [head, tail), a ring of cap. */
	struct crec			*ring;
	uint64_t			 cap;
	uint64_t			 head;		/* oldest not written */
	uint64_t			 ans;		/* next awaiting a reply */
	uint64_t			 sent;		/* next to send */
	uint64_t			 tail;
	size_t				 held;		/* raw bytes held */
	struct rawrec			 big;		/* mail over --max-message */
	int				 havebig;

	/* The connection. */
	int				 fd;		/* -1: none */
	const struct tlsmod		*tm;
	struct ssl_ctx_st		*ctx;
	struct ssl_st			*ssl;
	int				 tls_want;	/* POLLIN or POLLOUT */
	struct buf			 obuf;
	size_t				 ooff;
	struct buf			 ibuf;
	uint64_t			 nsent;		/* on this connection */
	int				 pairs;		/* ask for every match */
	int				 groups;	/* ask for groups */
	int				 acks;		/* command replies due */
	int				 ack_due;	/* "ack" is (the first) */
	int				 acking;	/* the daemon takes
							   "taken N" */
	uint64_t			 conns;		/* connections made */
	uint64_t			 rbytes;	/* reply bytes read */
	uint64_t			 done;		/* of them, of records
							   written */
	uint64_t			 told;		/* "taken" said so */
	int				 outfail;	/* the output failed */
	char				*ending;	/* the daemon's last line,
							   to tell before closing */
	int				 ending_counted;
	struct connmap			*maps;		/* one a connection */
	size_t				 nmaps;
	unsigned			 fails;		/* in a row */
	double				 retry_at;	/* not before */
	char				*why;		/* the last failure */
	int				 giveup;	/* retrying cannot help */
	int				 abort;		/* the daemon cannot be
							   used: stop */
	struct buf			 idbuf;
};

static volatile sig_atomic_t	 stop_signal;

static void	client_signal(int);
static int	client_parse_addr(const char *, int *, char **, char **,
		    char **, char **);
static int	client_connect(struct client *);
static int	client_open(struct client *, char **);
static int	client_handshake(struct client *, char **);
static void	client_close(struct client *);
static void	client_command(struct client *, const char *);
static int	client_tell(struct client *);
static void	client_done(struct client *, const struct crec *);
static void	client_tell_last(struct client *);
static void	client_end(struct client *);
static void	client_extra(struct client *, struct verdict *, const char *,
		    const char *);
static void	client_lost(struct client *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static int	client_io(struct client *, int);
static ssize_t	client_sock_read(struct client *, char *, size_t, char **);
static ssize_t	client_sock_write(struct client *, const char *, size_t,
		    char **);
static void	client_fill(struct client *);
static int	client_read_input(struct client *);
static void	client_put(struct buf *, const char *, size_t, char);
static void	client_add_local(struct client *, const struct rawrec *,
		    int, char *);
static int	client_blank(struct client *, const struct rawrec *);
static void	client_replies(struct client *);
static void	client_reply(struct client *, char *, size_t);
static void	client_map_add(struct client *, uint64_t, uint64_t);
static void	client_learn(struct client *, const char *, size_t,
		    uint64_t);
static int	client_match(struct client *, struct buf *);
static int	client_write(struct client *);
static int	client_big(struct client *);
static void	client_warn(struct client *, const struct crec *, int);
static void	client_mail_time(struct client *, struct record *);
static void	unescape(struct buf *, const char *, size_t);

/* Remember the first SIGINT/SIGTERM: stop reading, answer what was read. */
static void
client_signal(int sig)
{
	if (stop_signal == 0)
		stop_signal = sig;
}

/*
 * Split ADDR: unix:PATH, tcp:HOST:PORT or tls:HOST:PORT (an IPv6 address
 * in brackets).  0 with *tls and the parts (the caller frees them), or -1
 * with a cause.
 */
static int
client_parse_addr(const char *addr, int *tls, char **path, char **host,
    char **port, char **cause)
{
	const char	*hp, *colon, *end;

	*path = *host = *port = NULL;
	*tls = 0;
	if (strncmp(addr, "unix:", 5) == 0) {
		if (addr[5] == '\0') {
			xasprintf(cause, "--connect %s: no socket path", addr);
			return (-1);
		}
		if (strlen(addr + 5) >= sizeof ((struct sockaddr_un *)0)->
		    sun_path) {
			xasprintf(cause, "--connect %s: socket path too long",
			    addr);
			return (-1);
		}
		*path = xstrdup(addr + 5);
		return (0);
	}
	if (strncmp(addr, "tcp:", 4) == 0)
		hp = addr + 4;
	else if (strncmp(addr, "tls:", 4) == 0) {
		hp = addr + 4;
		*tls = 1;
	} else {
		xasprintf(cause, "--connect %s: use unix:PATH, tcp:HOST:PORT "
		    "or tls:HOST:PORT", addr);
		return (-1);
	}
	if (*hp == '[') {
		if ((end = strchr(hp, ']')) == NULL || end[1] != ':') {
			xasprintf(cause, "--connect %s: use [ADDRESS]:PORT for "
			    "IPv6", addr);
			return (-1);
		}
		*host = xstrndup(hp + 1, end - hp - 1);
		colon = end + 1;
	} else {
		if ((colon = strrchr(hp, ':')) == NULL || colon == hp) {
			xasprintf(cause, "--connect %s: use HOST:PORT", addr);
			return (-1);
		}
		*host = xstrndup(hp, colon - hp);
	}
	if (colon[1] == '\0' || strspn(colon + 1, "0123456789") !=
	    strlen(colon + 1) || atoi(colon + 1) < 1 ||
	    atoi(colon + 1) > 65535) {
		xasprintf(cause, "--connect %s: the port must be from 1 to "
		    "65535", addr);
		free(*host);
		*host = NULL;
		return (-1);
	}
	*port = xstrdup(colon + 1);
	return (0);
}

/* Is ADDR one --connect takes?  0, or -1 with a cause. */
int
client_check_addr(const char *addr, char **cause)
{
	char	*path, *host, *port;
	int	 tls;

	if (client_parse_addr(addr, &tls, &path, &host, &port, cause) != 0)
		return (-1);
	free(path);
	free(host);
	free(port);
	return (0);
}

/* Wait for fd to be ready for events, up to ms; 1 ready, 0 timed out. */
static int
wait_fd(int fd, short events, int ms)
{
	struct pollfd	 pfd;
	int		 rc;

	pfd.fd = fd;
	pfd.events = events;
	while ((rc = poll(&pfd, 1, ms)) == -1 && errno == EINTR)
		;
	return (rc > 0);
}

/*
 * Open a connection to the address (and its TLS session).  0, or -1 with
 * a cause.
 */
static int
client_open(struct client *c, char **cause)
{
	struct sockaddr_un	 sun;
	struct addrinfo		 hints, *res = NULL, *ai;
	char			*path, *host, *port;
	socklen_t		 len;
	int			 tls, fd = -1, err = 0, one = 1, rc;

	if (client_parse_addr(c->o->addr, &tls, &path, &host, &port,
	    cause) != 0)
		return (-1);
	if (path != NULL) {
		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
		if ((fd = socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0)) == -1)
			fatal("socket");
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
			xasprintf(cause, "%s", strerror(errno));
			close(fd);
			fd = -1;
		}
		free(path);
		if (fd == -1)
			return (-1);
	} else {
		memset(&hints, 0, sizeof hints);
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
			xasprintf(cause, "%s", gai_strerror(rc));
			goto fail;
		}
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype |
			    SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
			if (fd == -1) {
				err = errno;
				continue;
			}
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			if (errno == EINPROGRESS &&
			    wait_fd(fd, POLLOUT, CONNECT_SECS * 1000)) {
				len = sizeof err;
				if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
				    &len) == 0 && err == 0)
					break;
			} else
				err = errno == EINPROGRESS ? ETIMEDOUT : errno;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		if (fd == -1) {
			xasprintf(cause, "%s", strerror(err));
			goto fail;
		}
		/* Records are queued here: the kernel need not wait. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1)
		fatal("fcntl");
	c->fd = fd;
	if (tls && client_handshake(c, cause) != 0) {
		client_close(c);
		goto fail;
	}
	free(host);
	free(port);
	return (0);

fail:
	free(host);
	free(port);
	return (-1);
}

/* The TLS session on the connected socket.  0, or -1 with a cause. */
static int
client_handshake(struct client *c, char **cause)
{
	char	*path, *host, *port;
	double	 until = now_seconds() + CONNECT_SECS;
	int	 tls, rc;

	if (c->tm == NULL) {
		if ((c->tm = tls_module(cause)) == NULL)
			return (-1);
	}
	if (c->ctx == NULL &&
	    (c->ctx = c->tm->client_context(&c->o->tls, cause)) == NULL) {
		/* A bad certificate or key will not get better. */
		c->giveup = 1;
		return (-1);
	}
	if (client_parse_addr(c->o->addr, &tls, &path, &host, &port,
	    cause) != 0)
		return (-1);
	c->ssl = c->tm->client_new(c->ctx, c->fd, host, cause);
	free(host);
	free(port);
	if (c->ssl == NULL)
		return (-1);
	for (;;) {
		rc = c->tm->client_io(c->ssl, TLSC_HANDSHAKE, NULL, 0, cause);
		if (rc > 0)
			return (0);
		if (rc != TLSC_WANT_READ && rc != TLSC_WANT_WRITE) {
			if (rc == 0)
				xasprintf(cause, "TLS handshake: connection "
				    "closed");
			return (-1);
		}
		if (now_seconds() >= until ||
		    !wait_fd(c->fd, rc == TLSC_WANT_READ ? POLLIN : POLLOUT,
		    (int)((until - now_seconds()) * 1000) + 1)) {
			xasprintf(cause, "TLS handshake: timed out");
			return (-1);
		}
	}
}

/* Close the connection, if any, at once. */
static void
client_close(struct client *c)
{
	if (c->ssl != NULL) {
		c->tm->client_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->obuf.len = 0;
	c->ooff = 0;
	c->ibuf.len = 0;
	c->tls_want = 0;
}

/*
 * The connection ended: close it; what was sent and not answered goes
 * again on the next.  counted: a failure towards --connect-retries (the
 * daemon down, busy or failing), else an ordinary end (idle).
 */
static void
client_lost(struct client *c, int counted, const char *fmt, ...)
{
	va_list	 ap;
	int	 ms;

	client_close(c);
	c->sent = c->ans;
	free(c->why);
	va_start(ap, fmt);
	if (vasprintf(&c->why, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	if (!counted) {
		log_debug("--connect %s: %s", c->o->addr, c->why);
		c->retry_at = 0;
		return;
	}
	c->fails++;
	ms = RETRY_FIRST_MS;
	for (unsigned i = 1; i < c->fails && ms < RETRY_MAX_MS; i++)
		ms *= 2;
	if (ms > RETRY_MAX_MS)
		ms = RETRY_MAX_MS;
	c->retry_at = now_seconds() + ms / 1000.0;
	log_debug("--connect %s: %s; again in %d ms", c->o->addr, c->why, ms);
}

/*
 * Connect, waiting out the backoff and retrying, up to --connect-retries
 * failures in a row.  0, or EXIT_ERROR when they are spent.
 */
static int
client_connect(struct client *c)
{
	struct connmap	*m;
	char		*cause;
	double		 wait;

	for (;;) {
		if (c->giveup || c->fails > c->o->retries) {
			log_warnx("--connect %s: %s; gave up after %u "
			    "attempts", c->o->addr, c->why != NULL ? c->why :
			    "failed", c->fails);
			return (EXIT_ERROR);
		}
		if ((wait = c->retry_at - now_seconds()) > 0)
			wait_fd(-1, 0, (int)(wait * 1000) + 1);
		if (stop_signal && c->ans == c->tail)
			return (0);
		if (client_open(c, &cause) == 0)
			break;
		client_lost(c, 1, "%s", cause);
		free(cause);
	}
	c->nsent = 0;
	c->sent = c->ans;
	/* The commands go first, their replies come first. */
	c->acks = 0;
	c->acking = 0;
	c->conns++;
	c->rbytes = c->done = c->told = 0;
	client_command(c, "ack");
	c->ack_due = 1;
	if (c->pairs)
		client_command(c, "pairs");
	if (c->groups)
		client_command(c, "groups");
	c->maps = xreallocarray(c->maps, c->nmaps + 1, sizeof *c->maps);
	m = &c->maps[c->nmaps++];
	memset(m, 0, sizeof *m);
	log_debug("--connect %s: connected", c->o->addr);
	return (0);
}

/* Queue a command for a new connection; its reply is due first. */
static void
client_command(struct client *c, const char *name)
{
	char	 d = (char)c->senddelim;

	buf_append(&c->obuf, COMMAND, sizeof COMMAND - 1);
	buf_append(&c->obuf, name, strlen(name));
	buf_append(&c->obuf, &d, 1);
	c->acks++;
}

/*
 * Tell a daemon that acks how many bytes of its replies this connection
 * took, once the records they answer are written (and, in a file,
 * synced): it counts them delivered then, not when its socket took them,
 * so that a client killed with replies read, or not yet read, gets them
 * again as replays when it runs again.  0, or an exit status.
 */
static int
client_tell(struct client *c)
{
	char	 line[64], *cause;
	int	 n;

	if (c->fd == -1 || !c->acking || c->done <= c->told || c->outfail)
		return (0);
	if (output_sync(c->out, &cause) != 0) {
		/* Its records may not be there: nothing more is told. */
		log_warnx("%s%s%s", c->o->output != NULL ? c->o->output : "",
		    c->o->output != NULL ? ": " : "", cause);
		free(cause);
		c->outfail = 1;
		return (EXIT_ERROR);
	}
	n = snprintf(line, sizeof line, COMMAND "taken %" PRIu64 "%c",
	    c->done, (char)c->senddelim);
	buf_append(&c->obuf, line, (size_t)n);
	c->told = c->done;
	return (0);
}

/*
 * The daemon ended the connection with an error line (client_reply): once
 * the records answered before it are written, the last "taken", then the
 * end.
 */
static void
client_end(struct client *c)
{
	char	*why = c->ending;

	c->ending = NULL;
	client_tell_last(c);
	if (c->fd != -1)
		client_lost(c, c->ending_counted, "%s", why);
	free(why);
}

/*
 * Before the connection closes: the last "taken", sent as far as the
 * socket takes it within CONNECT_SECS.
 */
static void
client_tell_last(struct client *c)
{
	double		 until = now_seconds() + CONNECT_SECS;
	struct pollfd	 pfd;
	char		*cause, *q, scratch[4096];
	ssize_t		 n;

	/*
	 * Records queued and not sent go no more (sent again on another
	 * connection, if any): the one begun goes to its end, then "taken"
	 * (again, if one queued went with them).
	 */
	q = c->ooff > 0 && c->obuf.data[c->ooff - 1] != (char)c->senddelim ?
	    memchr(c->obuf.data + c->ooff, c->senddelim, c->obuf.len -
	    c->ooff) : NULL;
	c->obuf.len = q != NULL ? (size_t)(q + 1 - c->obuf.data) : c->ooff;
	c->told = 0;
	if (client_tell(c) != 0)
		return;
	/*
	 * The replies still coming are read and dropped meanwhile: a daemon
	 * whose replies wait stops reading.
	 */
	while (c->fd != -1 && c->ooff < c->obuf.len &&
	    now_seconds() < until) {
		n = client_sock_write(c, c->obuf.data + c->ooff,
		    c->obuf.len - c->ooff, &cause);
		if (n == -1) {
			free(cause);	/* gone: it hears nothing more */
			return;
		}
		if (n >= 0) {
			c->ooff += n;
			continue;
		}
		/* TLS may hold replies read from the socket: always try. */
		pfd.fd = c->fd;
		pfd.events = POLLIN | (c->tls_want != 0 ? c->tls_want : POLLOUT);
		if ((poll(&pfd, 1, 100) <= 0 || !(pfd.revents & POLLIN)) &&
		    c->ssl == NULL)
			continue;
		if ((n = client_sock_read(c, scratch, sizeof scratch,
		    &cause)) == -1)
			free(cause);
		if (n == -1 || n == 0)
			return;		/* it closed */
	}
}

/*
 * The fields of a reply after the fixed ones (a unique record's id, a
 * duplicate's similarity), from f to end: "replay", "seen",
 * "contains=SIM:ID", "group=ID", "pair=SIM:ID" and "pair-held=SIM:ID",
 * into v.
 */
static void
client_extra(struct client *c, struct verdict *v, const char *f,
    const char *end)
{
	const char	*p;
	char		*e;
	double		 sim;
	int		 held;

	for (; f < end; f = p + 1) {
		if ((p = memchr(f, '\t', end - f)) == NULL)
			p = end;
		if (p - f == 4 && memcmp(f, "seen", 4) == 0)
			v->seen = 1;
		else if (p - f == 6 && memcmp(f, "replay", 6) == 0)
			v->replay = 1;
		else if (p - f >= 9 && memcmp(f, "contains=", 9) == 0) {
			v->contains_sim = strtod(f + 9, &e);
			if (e >= p || *e != ':')
				continue;
			e++;
			unescape(&v->contains, e, p - e);
			client_match(c, &v->contains);
		} else if (p - f >= 6 && memcmp(f, "group=", 6) == 0) {
			unescape(&v->group, f + 6, p - f - 6);
			client_match(c, &v->group);
		} else if ((held = p - f >= 10 &&
		    memcmp(f, "pair-held=", 10) == 0) ||
		    (p - f >= 5 && memcmp(f, "pair=", 5) == 0)) {
			sim = strtod(f + (held ? 10 : 5), &e);
			if (e >= p || *e != ':')
				continue;
			e++;
			unescape(&c->idbuf, e, p - e);
			client_match(c, &c->idbuf);
			verdict_pair(v, 0, c->idbuf.data, c->idbuf.len, sim);
			v->pairs[v->npairs - 1].contains = held;
		}
	}
}

/* Read from the connection: bytes, 0 at its end, -1 (cause), -2 again. */
static ssize_t
client_sock_read(struct client *c, char *p, size_t len, char **cause)
{
	ssize_t	 n;
	int	 rc;

	if (c->ssl != NULL) {
		rc = c->tm->client_io(c->ssl, TLSC_READ, p, len, cause);
		if (rc == TLSC_WANT_READ || rc == TLSC_WANT_WRITE) {
			c->tls_want = rc == TLSC_WANT_READ ? POLLIN : POLLOUT;
			return (-2);
		}
		return (rc);
	}
	if ((n = read(c->fd, p, len)) == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return (-2);
		xasprintf(cause, "%s", strerror(errno));
	}
	return (n);
}

/* Write to the connection: bytes, -1 (cause), -2 again. */
static ssize_t
client_sock_write(struct client *c, const char *p, size_t len, char **cause)
{
	ssize_t	 n;
	int	 rc;

	if (c->ssl != NULL) {
		rc = c->tm->client_io(c->ssl, TLSC_WRITE, (char *)p, len,
		    cause);
		if (rc == TLSC_WANT_READ || rc == TLSC_WANT_WRITE) {
			c->tls_want = rc == TLSC_WANT_READ ? POLLIN : POLLOUT;
			return (-2);
		}
		if (rc == 0) {
			xasprintf(cause, "connection closed");
			return (-1);
		}
		return (rc);
	}
	if ((n = send(c->fd, p, len, MSG_NOSIGNAL)) == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return (-2);
		xasprintf(cause, "%s", strerror(errno));
	}
	return (n);
}

/* Queue the next records for the socket, up to SEND_CHUNK bytes. */
static void
client_fill(struct client *c)
{
	struct crec	*cr;
	char		 d = (char)c->senddelim;

	if (c->ooff > 0 && c->ooff == c->obuf.len) {
		c->obuf.len = 0;
		c->ooff = 0;
	}
	while (c->sent < c->tail && c->obuf.len - c->ooff < SEND_CHUNK) {
		cr = &c->ring[c->sent % c->cap];
		c->sent++;
		if (cr->local)
			continue;
		cr->k = ++c->nsent;
		client_map_add(c, cr->k, cr->r.recno);
		client_put(&c->obuf, cr->r.raw.data, cr->r.raw.len, d);
		buf_append(&c->obuf, &d, 1);
	}
}

/*
 * Append a record to what is sent, without the delimiter's bytes that it
 * holds: a NUL inside a mail message would end it early, the daemon would
 * answer its two halves and every reply after would be another message's.
 * The daemon judges the message without them; the client writes its own
 * copy, as read.  (A line record never holds its delimiter.)
 */
static void
client_put(struct buf *out, const char *p, size_t len, char d)
{
	const char	*q;

	while ((q = memchr(p, d, len)) != NULL) {
		buf_append(out, p, (size_t)(q - p));
		len -= (size_t)(q - p) + 1;
		p = q + 1;
	}
	buf_append(out, p, len);
}

/*
 * Move bytes both ways as far as the socket lets: send what is queued,
 * read and apply the replies.  0, or -1 when the connection was lost
 * (client_lost says why).
 */
static int
client_io(struct client *c, int readable)
{
	char	*cause;
	ssize_t	 n;

	for (;;) {
		client_fill(c);
		if (c->ooff == c->obuf.len)
			break;
		n = client_sock_write(c, c->obuf.data + c->ooff,
		    c->obuf.len - c->ooff, &cause);
		if (n == -2)
			break;
		if (n < 0) {
			/* The replies already there say more: read them. */
			free(cause);
			break;
		}
		c->ooff += n;
	}
	if (!readable && c->ssl == NULL)
		return (0);
	for (;;) {
		buf_reserve(&c->ibuf, READ_CHUNK);
		n = client_sock_read(c, c->ibuf.data + c->ibuf.len,
		    READ_CHUNK, &cause);
		if (n == -2)
			break;
		if (n == -1 || n == 0) {
			if (n == 0)
				cause = xstrdup("connection closed");
			free(c->ending);
			if (c->ans < c->sent)
				xasprintf(&c->ending, "%s with %" PRIu64
				    " records not answered", cause,
				    c->sent - c->ans);
			else
				c->ending = xstrdup(cause);
			c->ending_counted = c->ans < c->sent;
			free(cause);
			/*
			 * The daemon half-closed (after an error reply, as
			 * --on-bad-input fail): one that acks hears what
			 * was taken first (client_end).
			 */
			if (n == 0 && c->acking)
				return (-1);
			client_end(c);
			return (-1);
		}
		c->ibuf.len += n;
		client_replies(c);
		if (c->fd == -1 || c->ending != NULL)
			return (-1);	/* an error line ended it */
	}
	return (0);
}

/* Take the complete reply lines in the input buffer. */
static void
client_replies(struct client *c)
{
	char	*p = c->ibuf.data, *end = p + c->ibuf.len, *nl;
	size_t	 left;

	while (p < end && (nl = memchr(p, '\n', end - p)) != NULL) {
		c->rbytes += nl + 1 - p;
		client_reply(c, p, nl - p);
		p = nl + 1;
		if (c->fd == -1)
			return;
		if (c->ending != NULL)
			break;		/* no more: the connection ends */
	}
	left = end - p;
	memmove(c->ibuf.data, p, left);
	c->ibuf.len = left;
}

/* Undo output_field's escapes of a reply's field into b. */
static void
unescape(struct buf *b, const char *s, size_t len)
{
	size_t	 i;
	char	 ch;

	b->len = 0;
	for (i = 0; i < len; i++) {
		ch = s[i];
		if (ch == '\\' && i + 1 < len) {
			switch (s[++i]) {
			case 't': ch = '\t'; break;
			case 'n': ch = '\n'; break;
			case 'r': ch = '\r'; break;
			case '0': ch = '\0'; break;
			default: ch = s[i]; break;
			}
		}
		buf_append(b, &ch, 1);
	}
}

/* Record that number k of this connection is record recno. */
static void
client_map_add(struct client *c, uint64_t k, uint64_t recno)
{
	struct u64vec	*runs = &c->maps[c->nmaps - 1].runs;

	if (runs->n >= 2 && k - runs->v[runs->n - 2] ==
	    recno - runs->v[runs->n - 1])
		return;
	u64vec_push(runs, k);
	u64vec_push(runs, recno);
}

/*
 * A reply's id for the record number k of this connection: if it is the
 * daemon's RUN:CONN:k, this connection's prefix is RUN:CONN:.
 */
static void
client_learn(struct client *c, const char *id, size_t len, uint64_t k)
{
	struct connmap	*m = &c->maps[c->nmaps - 1];
	char		 num[32];
	size_t		 nl;

	if (m->prefix != NULL)
		return;
	nl = (size_t)snprintf(num, sizeof num, ":%" PRIu64, k);
	if (len <= nl || memcmp(id + len - nl, num, nl) != 0 ||
	    strspn(id, "0123456789:") < len)
		return;
	m->prefix = xstrndup(id, len - nl + 1);
}

/*
 * A match (or a record's id) that is the daemon's id for one of our
 * records without an id: that record's number, as the stream names it.
 * 1 if it was so.
 */
static int
client_match(struct client *c, struct buf *id)
{
	struct connmap	*m;
	const char	*p;
	char		*end, num[32];
	uint64_t	 k, recno;
	size_t		 i, j, lo, hi, plen;

	if (id->len == 0 || id->len > 64 || strspn(id->data, "0123456789:") <
	    id->len)
		return (0);
	for (i = c->nmaps; i-- > 0; ) {
		m = &c->maps[i];
		if (m->prefix == NULL)
			continue;
		plen = strlen(m->prefix);
		if (id->len <= plen || memcmp(id->data, m->prefix, plen) != 0)
			continue;
		p = id->data + plen;
		errno = 0;
		k = strtoull(p, &end, 10);
		if (errno != 0 || end != id->data + id->len || k == 0)
			return (0);
		/* The last run that starts at k or before (they are in order). */
		lo = 0;
		hi = m->runs.n / 2;
		while (lo < hi) {
			j = lo + (hi - lo) / 2;
			if (m->runs.v[2 * j] <= k)
				lo = j + 1;
			else
				hi = j;
		}
		if (lo == 0)
			return (0);
		j = 2 * (lo - 1);
		recno = m->runs.v[j + 1] + (k - m->runs.v[j]);
		id->len = 0;
		snprintf(num, sizeof num, "%" PRIu64, recno);
		buf_append(id, num, strlen(num));
		return (1);
	}
	return (0);
}

/* Apply one reply line, of the oldest record awaiting one. */
static void
client_reply(struct client *c, char *line, size_t len)
{
	char		*f[6], *end = line + len, *p;
	size_t		 fl[6], nf = 0;
	struct crec	*cr;
	struct verdict	*v;
	int		 counted;

	if (len > 0 && line[len - 1] == '\r')
		end--;
	for (p = line; nf < 6; ) {
		f[nf] = p;
		while (p < end && *p != '\t')
			p++;
		fl[nf] = p - f[nf];
		nf++;
		if (p >= end)
			break;
		p++;
	}
	/* The reply to "ack", first: an older daemon does not know it. */
	if (c->ack_due && fl[0] == 3 && memcmp(f[0], "ack", 3) == 0) {
		c->ack_due = 0;
		c->acking = 1;
		c->acks--;
		return;
	}
	if (c->ack_due && nf >= 3 && fl[0] == 5 &&
	    memcmp(f[0], "error", 5) == 0 && fl[2] == 7 &&
	    memcmp(f[2], "command", 7) == 0) {
		log_debug("--connect %s: the daemon does not take '#mhfilter "
		    "ack': a reply counts delivered once its socket took it",
		    c->o->addr);
		c->ack_due = 0;
		c->acks--;
		return;
	}
	/* The replies to this connection's other commands. */
	if (c->acks > 0) {
		if ((fl[0] == 5 && memcmp(f[0], "pairs", 5) == 0) ||
		    (fl[0] == 6 && memcmp(f[0], "groups", 6) == 0)) {
			c->acks--;
			return;
		}
		if (nf >= 3 && fl[2] == 7 && memcmp(f[2], "command", 7) == 0) {
			log_warnx("--connect %s: the daemon does not know "
			    "'#mhfilter %s', which -p, --clusters and --group "
			    "need (an older version of mhfilter)", c->o->addr,
			    c->pairs && c->acks == 1 + c->groups ? "pairs" :
			    "groups");
			c->status = EXIT_ERROR;
			c->abort = 1;
			client_lost(c, 1, "a command refused");
			return;
		}
	}
	/* The connection's own errors. */
	if (nf >= 3 && fl[0] == 5 && memcmp(f[0], "error", 5) == 0) {
		if ((fl[2] == 4 && memcmp(f[2], "idle", 4) == 0) ||
		    (fl[2] == 4 && memcmp(f[2], "busy", 4) == 0) ||
		    (fl[2] == 8 && memcmp(f[2], "shutdown", 8) == 0) ||
		    (fl[2] == 5 && memcmp(f[2], "index", 5) == 0) ||
		    (fl[2] == 8 && memcmp(f[2], "too-long", 8) == 0) ||
		    (fl[2] == 7 && memcmp(f[2], "command", 7) == 0)) {
			if (fl[2] == 8 && memcmp(f[2], "too-long", 8) == 0) {
				/* Its --max-bytes is below ours. */
				log_warnx("--connect %s: the daemon refused a "
				    "record as too long: give --max-bytes no "
				    "more than the daemon's", c->o->addr);
				c->status = EXIT_ERROR;
				c->abort = 1;
			}
			counted = fl[2] != 4 || memcmp(f[2], "idle", 4) != 0;
			/*
			 * A daemon that acks hears what was taken first
			 * (client_end, once the records are written).
			 */
			if (c->acking) {
				free(c->ending);
				xasprintf(&c->ending, "error %.*s: %.*s",
				    (int)fl[2], f[2], nf > 3 ? (int)fl[3] : 0,
				    nf > 3 ? f[3] : "");
				c->ending_counted = counted;
				return;
			}
			client_lost(c, counted, "error %.*s: %.*s",
			    (int)fl[2], f[2], nf > 3 ? (int)fl[3] : 0,
			    nf > 3 ? f[3] : "");
			return;
		}
	}
	while (c->ans < c->sent && c->ring[c->ans % c->cap].local)
		c->ans++;
	if (c->ans >= c->sent) {
		client_lost(c, 1, "a reply to nothing sent: %.*s", (int)len,
		    line);
		return;
	}
	cr = &c->ring[c->ans % c->cap];
	cr->conn = c->conns;
	cr->upto = c->rbytes;
	v = &cr->v;
	verdict_reset(v);
	if (nf >= 2) {
		client_learn(c, f[1], fl[1], cr->k);
		unescape(&cr->r.id, f[1], fl[1]);
		/* The daemon's id for it: the stream's is its number. */
		if (client_match(c, &cr->r.id))
			cr->r.id.len = 0;
	}
	if (nf >= 2 && fl[0] == 6 && memcmp(f[0], "unique", 6) == 0) {
		v->kind = V_UNIQUE;
		if (nf >= 3)
			client_extra(c, v, f[2], end);
	} else if (nf >= 4 && fl[0] == 9 && memcmp(f[0], "duplicate", 9) == 0) {
		v->kind = V_DUPLICATE;
		unescape(&v->match, f[2], fl[2]);
		client_match(c, &v->match);
		v->sim = strtod(f[3], NULL);
		if (nf >= 5)
			client_extra(c, v, f[4], end);
		if ((c->po->mode & OUT_MODE) == OUT_PAIRS && v->npairs == 0) {
			if (v->pairsize == 0) {
				v->pairs = xcalloc(1, sizeof *v->pairs);
				v->pairsize = 1;
			}
			v->pairs[0].id.len = 0;
			buf_append(&v->pairs[0].id, v->match.data,
			    v->match.len);
			v->pairs[0].sim = v->sim;
			v->npairs = 1;
		}
	} else if (nf >= 2 && fl[0] == 5 && memcmp(f[0], "empty", 5) == 0)
		v->kind = V_EMPTY;
	else if (nf >= 3 && fl[0] == 5 && memcmp(f[0], "error", 5) == 0 &&
	    ((fl[2] == 7 && memcmp(f[2], "invalid", 7) == 0) ||
	    (fl[2] == 9 && memcmp(f[2], "unchecked", 9) == 0))) {
		v->kind = f[2][0] == 'i' ? V_BAD : V_UNCHECKED;
		unescape(&c->idbuf, nf > 3 ? f[3] : "", nf > 3 ? fl[3] : 0);
		v->error = xstrndup(c->idbuf.data != NULL ? c->idbuf.data : "",
		    c->idbuf.len);
	} else {
		log_warnx("--connect %s: a reply not understood: %.*s",
		    c->o->addr, (int)(len > 200 ? 200 : len), line);
		c->status = EXIT_ERROR;
		c->abort = 1;
		client_lost(c, 1, "a reply not understood");
		return;
	}
	/* Progress: the daemon is there. */
	c->fails = 0;
	c->ans++;
}

/*
 * Say what --on-bad-input does with a bad record, as the stream does
 * (pipeline.c: pipeline_warn, pipeline_warn_unchecked).
 */
static void
client_warn(struct client *c, const struct crec *cr, int policy)
{
	const char	*file = cr->r.file != NULL ? cr->r.file : "-";
	const char	*say = cr->v.error != NULL ? cr->v.error : "";

	if (c->po->quiet && policy != POLICY_FAIL)
		return;
	/*
	 * A message "too-large" here is under --max-message (one over it
	 * goes by client_big) but over the --max-bytes the daemon takes:
	 * the limit to raise.
	 */
	if (cr->v.kind == V_UNCHECKED && strcmp(say, "too-large") == 0) {
		log_warnx("%s:%" PRIu64 ": over --max-bytes (%" PRIu64 " bytes, "
		    "the most the daemon takes): passed through unchecked",
		    file, cr->r.line, c->po->max_bytes);
		return;
	}
	if (cr->v.kind == V_UNCHECKED) {
		mail_warn_unchecked(cr->r.file, cr->r.line, cr->v.error);
		return;
	}
	log_warnx("%s:%" PRIu64 ": %s: %s", file, cr->r.line, say,
	    policy == POLICY_SKIP ? "skipped" : policy == POLICY_PASS ?
	    "passed through" : "stopping");
}

/*
 * The date of a message without a From_ line, for the one the output
 * makes (output.c), as the stream has it from parsing the message.
 */
static void
client_mail_time(struct client *c, struct record *r)
{
	struct buf	 text = { 0 }, id = { 0 };
	char		*cause = NULL;

	(void)c;
	(void)mail_extract(r->raw.data, r->raw.len, mail_flags(), &text, &id,
	    &r->time, &cause);
	free(cause);
	buf_free(&text);
	buf_free(&id);
}

/*
 * Record cr is written (or left out, as decided): its reply, if it came on
 * this connection, may be told taken (client_tell).
 */
static void
client_done(struct client *c, const struct crec *cr)
{
	if (!cr->local && cr->conn == c->conns && cr->upto > c->done)
		c->done = cr->upto;
}

/*
 * Write the decided records at the head of the window, in input order.
 * 0, or an exit status (an output error, a bad record under fail).
 */
static int
client_write(struct client *c)
{
	struct crec	*cr;
	char		*cause;
	int		 rc, policy;

	while (c->head < c->tail) {
		cr = &c->ring[c->head % c->cap];
		if (!cr->local && c->head >= c->ans)
			break;
		c->head++;
		if (c->ans < c->head)
			c->ans = c->head;
		if (c->sent < c->ans)
			c->sent = c->ans;
		c->held -= cr->r.raw.len;
		policy = c->po->policy;
		if (cr->v.kind == V_UNCHECKED)
			client_warn(c, cr, policy);
		if (cr->v.kind == V_BAD || cr->v.kind == V_TOOLONG) {
			if (cr->v.kind == V_TOOLONG && policy == POLICY_PASS)
				policy = POLICY_SKIP;
			client_warn(c, cr, policy);
			if (policy == POLICY_FAIL) {
				/*
				 * The records before it are written; it is
				 * decided (invalid), and told taken so.
				 */
				if ((rc = output_flush(c->out, &cause)) != 0)
					goto fail;
				client_done(c, cr);
				return (EXIT_DATA);
			}
			if (policy == POLICY_SKIP) {
				client_done(c, cr);
				continue;
			}
		}
		if (cr->v.kind == V_SKIP) {
			client_done(c, cr);
			continue;
		}
		if (c->po->framing == FRAME_MBOX && cr->r.time == 0 &&
		    !output_mail_from(&cr->r, 1))
			client_mail_time(c, &cr->r);
		if ((rc = output_record(c->out, &cr->r, &cr->v, &cause)) != 0)
			goto fail;
		client_done(c, cr);
	}
	if ((rc = output_flush(c->out, &cause)) != 0)
		goto fail;
	return (0);

fail:
	c->outfail = 1;
	if (rc == OUTPUT_CLOSED)
		return (128 + SIGPIPE);
	if (c->o->output != NULL)
		log_warnx("output %s: %s", c->o->output, cause);
	else
		log_warnx("%s", cause);
	free(cause);
	return (EXIT_ERROR);
}

/* Is this a blank line of TSV or JSON Lines, left out (record_blank)? */
static int
client_blank(struct client *c, const struct rawrec *rr)
{
	return (c->po->delim == '\n' && !rr->toolong &&
	    record_blank(rr->data, rr->len, c->po->format));
}

/* Put a record in the window: sent, or (error) decided here. */
static void
client_add_local(struct client *c, const struct rawrec *rr, int kind,
    char *error)
{
	struct crec	*cr = &c->ring[c->tail % c->cap];

	record_reset(&cr->r);
	verdict_reset(&cr->v);
	cr->local = kind != V_PENDING;
	cr->v.kind = kind;
	cr->v.error = error;
	if (!rr->toolong)
		buf_append(&cr->r.raw, rr->data, rr->len);
	cr->r.recno = ++c->recno;
	cr->r.line = rr->line;
	cr->r.file = rr->file;
	cr->r.whole = rr->whole;
	cr->r.inlen = (rr->toolong ? rr->fulllen : rr->len) + rr->delimited;
	c->held += cr->r.raw.len;
	c->tail++;
}

/*
 * Read records into the window while it has room and the input has them
 * without waiting.  0, or an exit status (a read error, a file skipped
 * under fail).
 */
static int
client_read_input(struct client *c)
{
	struct rawrec	 rr;
	char		*over;
	int		 rc, status;

	while (!c->eof && !c->havebig && !stop_signal &&
	    c->tail - c->head < c->cap && c->held < CLIENT_WINDOW_BYTES &&
	    input_wait(c->in, 0)) {
		if ((rc = input_read(c->in, c->po->policy == POLICY_FAIL, &rr,
		    &c->skipped_files, &over, &status)) == 0) {
			c->eof = 1;
			break;
		}
		if (rc == INPUT_RETRY)
			continue;	/* a signal, a file skipped */
		if (rc == INPUT_STOP)
			return (status);
		if (rr.piece != 0) {
			c->big = rr;
			c->havebig = 1;
			break;
		}
		if (client_blank(c, &rr)) {
			c->recno++;
			continue;
		}
		if (over != NULL)
			client_add_local(c, &rr, V_TOOLONG, over);
		else if ((format_get(c->po->format)->flags & FMT_PIECES) &&
		    rr.len > c->po->max_bytes)
			/*
			 * A message (or WARC record) under --max-message but
			 * over --max-bytes, which the daemon takes no record
			 * over: written through unjudged, as the stream does
			 * one over --max-message, not sent to be refused.
			 */
			client_add_local(c, &rr, V_UNCHECKED,
			    xstrdup("too-large"));
		else if (rr.len >= sizeof COMMAND - 1 &&
		    memcmp(rr.data, COMMAND, sizeof COMMAND - 1) == 0) {
			/* The daemon would take it for a command. */
			client_add_local(c, &rr, V_BAD, xstrdup("a record "
			    "starting '#mhfilter ' cannot be sent (a daemon "
			    "command)"));
		} else
			client_add_local(c, &rr, V_PENDING, NULL);
	}
	return (0);
}

/*
 * A message over --max-message, once every record before it is written:
 * written through unjudged, piece by piece as read, as the stream does
 * (stream.c: stream_big).  0, or an exit status.
 */
static int
client_big(struct client *c)
{
	struct rawrec	 rr = c->big;
	struct record	 r;
	struct verdict	 v;
	char		*cause = NULL;
	int		 first = 1, rc;

	c->havebig = 0;
	memset(&r, 0, sizeof r);
	memset(&v, 0, sizeof v);
	v.kind = V_UNCHECKED;
	v.error = (char *)"too-large";
	r.recno = ++c->recno;
	r.line = rr.line;
	r.file = rr.file;
	r.whole = rr.whole;
	for (;;) {
		r.raw.data = (char *)rr.data;
		r.raw.len = rr.len;
		if ((rc = output_piece(c->out, &r, &v, first, !rr.more,
		    &cause)) != 0 || (rc = output_flush(c->out, &cause)) != 0)
			break;
		if (!rr.more)
			break;
		first = 0;
		rc = input_next_piece(c->in, &rr, &c->skipped_files);
		if (rc == 1)
			continue;
		if (rc == 0)
			break;
		r.raw.len = 0;
		(void)output_piece(c->out, &r, &v, 0, 1, &cause);
		(void)output_flush(c->out, &cause);
		if (rc == MHF_ERROR)
			return (EXIT_ERROR);
		rc = 0;
		break;
	}
	if (rc == OUTPUT_CLOSED)
		return (128 + SIGPIPE);
	if (rc != 0) {
		log_warnx("%s", cause);
		free(cause);
		return (EXIT_ERROR);
	}
	if (!c->po->quiet)
		log_warnx("%s:%" PRIu64 ": over --max-message: passed through "
		    "unchecked", r.file != NULL ? r.file : "-", r.line);
	return (0);
}

/*
 * Filter the files (none: standard input) through the daemon at
 * o->addr, to the output.  Returns the exit status.
 */
int
client_run(const struct client_opts *o, const struct pipeline_opts *po,
    char **files, int nfiles)
{
	struct client		 c;
	struct sigaction	 sa;
	struct pollfd		 pfd;
	uint64_t		 i;
	int			 outfd = STDOUT_FILENO, rc, ms, readable;

	if ((rc = input_output_fd(o->output, NULL, files, nfiles,
	    &outfd)) != 0)
		return (rc);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = client_signal;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	memset(&c, 0, sizeof c);
	c.o = o;
	c.po = po;
	c.fd = -1;
	c.cap = o->window;
	c.ring = xcalloc(c.cap, sizeof *c.ring);
	c.senddelim = po->delim;
	c.pairs = (po->mode & OUT_MODE) == OUT_PAIRS;
	c.groups = (po->mode & OUT_GROUP) || (po->mode & OUT_MODE) ==
	    OUT_CLUSTERS;
	c.in = input_open(files, nfiles, po->framing, po->delim,
	    format_get(po->format)->flags & FMT_PIECES ? po->max_message :
	    po->max_bytes);
	if (format_get(po->format)->flags & FMT_PIECES)
		input_set_pieces(c.in);
	c.out = output_open(outfd, po->mode, po->format, po->framing,
	    po->delim);

	for (;;) {
		if ((rc = client_read_input(&c)) != 0 && c.status == 0) {
			c.status = rc;
			c.eof = 1;	/* answer what was read, then stop */
		}
		if ((rc = client_write(&c)) != 0 ||
		    (rc = client_tell(&c)) != 0) {
			if (c.status == 0 || rc == EXIT_DATA)
				c.status = rc;
			break;
		}
		if (c.ending != NULL)
			client_end(&c);
		if (c.havebig && c.head == c.tail) {
			if ((rc = client_big(&c)) != 0) {
				c.status = rc;
				break;
			}
			continue;
		}
		if (c.head == c.tail && (c.eof || stop_signal))
			break;
		if (c.abort)
			break;
		/* Something to send or to hear: a connection. */
		if (c.fd == -1 && c.ans < c.tail) {
			if ((rc = client_connect(&c)) != 0) {
				c.status = rc;
				break;
			}
			continue;
		}
		if (c.fd != -1) {
			client_fill(&c);
			pfd.fd = c.fd;
			pfd.events = POLLIN;
			if (c.ooff < c.obuf.len)
				pfd.events |= POLLOUT;
			if (c.tls_want != 0)
				pfd.events |= c.tls_want;
			c.tls_want = 0;
			/*
			 * Input to read as well: poll the socket briefly
			 * (input.c's descriptor is its own), else wait.
			 */
			ms = !c.eof && !c.havebig && !stop_signal &&
			    c.tail - c.head < c.cap &&
			    c.held < CLIENT_WINDOW_BYTES ? 0 : -1;
			if (ms == 0 && !(pfd.events & POLLOUT) &&
			    !input_wait(c.in, 0)) {
				/* Nothing in flight: wait for either. */
				readable = !input_wait_or(c.in, c.fd);
				if (readable)
					(void)client_io(&c, 1);
				continue;
			}
			if (ms == 0 && !input_wait(c.in, 0))
				ms = 10;
			readable = 0;
			if (poll(&pfd, 1, ms) > 0)
				readable = (pfd.revents & (POLLIN|POLLHUP|
				    POLLERR)) != 0 || c.ssl != NULL;
			(void)client_io(&c, readable);
			continue;
		}
		/* Nothing to send: wait for input. */
		if (!c.eof && !stop_signal)
			(void)input_wait(c.in, -1);
	}

	if (c.fd != -1) {
		if (!c.outfail)
			client_tell_last(&c);
		if (c.fd != -1 && c.ssl != NULL)
			(void)c.tm->client_io(c.ssl, TLSC_SHUTDOWN, NULL, 0,
			    NULL);
		client_close(&c);
	}
	rc = c.status;
	if (c.skipped_files > 0 && rc == EXIT_OK)
		rc = EXIT_ERROR;
	if (stop_signal && rc == EXIT_OK) {
		log_warnx("interrupted by signal %d: every record read so far "
		    "was answered and written", (int)stop_signal);
		rc = 128 + stop_signal;
	}
	output_close(c.out);
	if (outfd != STDOUT_FILENO && close(outfd) == -1 && rc == EXIT_OK) {
		log_warn("--output %s", o->output);
		rc = EXIT_ERROR;
	}
	input_close(c.in);
	for (i = 0; i < c.cap; i++) {
		record_free(&c.ring[i].r);
		verdict_free(&c.ring[i].v);
	}
	free(c.ring);
	for (i = 0; i < c.nmaps; i++) {
		free(c.maps[i].prefix);
		u64vec_free(&c.maps[i].runs);
	}
	free(c.maps);
	if (c.ctx != NULL)
		c.tm->client_context_free(c.ctx);
	buf_free(&c.obuf);
	buf_free(&c.ibuf);
	buf_free(&c.idbuf);
	free(c.why);
	free(c.ending);
	return (rc);
}
