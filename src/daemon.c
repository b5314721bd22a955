/*
 * Daemon mode: records from many socket clients, one writer.
 *
 *   clients --records--> one batch --filter_batch (one commit)--> output
 *           <--replies--                                     file, if any
 *
 * Every client sends records in the format of the command line (-f, -z)
 * and gets one reply line for each, in its own order (the protocol is in
 * mhfilter(1), PROTOCOL; PROTOCOL_VERSION in mhfilter.h).  Records of all
 * clients go into one batch, which closes when it holds --batch records or
 * 64 MiB, or --batch-delay after its first record arrived; filter_batch then
 * decides and commits it in one LMDB write transaction, and only then are
 * its records written to the output file and its replies queued: an answer
 * "unique" is never sent for a record the index could lose.  filter_batch
 * runs in the event loop: it is the only writer, and while it runs nothing
 * else needs doing.
 *
 * Backpressure: a client whose unread replies pass REPLY_HIGH is not read
 * until they fall to REPLY_LOW, and its input buffer holds at most one
 * record (--max-bytes), so memory stays bounded by the clients' count
 * whatever they do.  A client that breaks a limit (an over-long record,
 * idle too long, one too many) gets an "error" line and is disconnected:
 * its pending replies first, then the error, then a half-close, and its
 * further input is read and dropped for a few seconds so that the error
 * line is not lost to a reset.
 *
 * Clients are freed only from their own callbacks or from the reap event,
 * never from inside another client's callback, which may be running a
 * batch that touches every client.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "mhfilter.h"

#define BATCH_BYTES	(64U << 20)	/* a batch also closes at this size */
#define REPLY_HIGH	(256 * 1024)	/* stop reading a client above this */
#define REPLY_LOW	(64 * 1024)	/* and read it again below this */
#define LINGER_SECS	5		/* read and drop after an error line */
#define DRAIN_SECS	10		/* at exit, for clients to read replies */
#define STATUS_SECS	1.0		/* systemd STATUS= at most this often */
#define COMMAND		"#mhfilter "	/* a record starting so is a command */
#define COMMAND_MAX	256
#define KEEP_BYTES	(64 * 1024)	/* record memory kept between batches */
#define SOCKNAME_MAX	192		/* "unix:" and a path, or tcp: */

/* What a client connection is doing. */
#define C_READING	0	/* taking records */
#define C_CLOSING	1	/* answering its last records, then closing */
#define C_LINGER	2	/* half-closed after an error: dropping input */

struct client {
	struct daemon		*d;
	struct bufferevent	*bev;
	uint64_t		 conn;		/* connection number, from 1 */
	char			 peer[80];
	uint64_t		 recno;		/* records read, from 1 */
	size_t			 pending;	/* batch slots not answered */
	size_t			 scanned;	/* input known to hold no delim */
	int			 state;		/* C_* */
	int			 eof;		/* it half-closed: no more input */
	int			 throttled;	/* not read: replies unread */
	int			 finish;	/* close it from the reap event */
	int			 admitted;	/* counts for --max-clients */
	char			*last;		/* error line to end with */
	int			 last_sent;	/* queued: half-close, linger */
	TAILQ_ENTRY(client)	 entry;
};
TAILQ_HEAD(clients, client);

/* What a batch slot holds besides its record and verdict. */
#define S_RECORD	0
#define S_STATS		1
#define S_VERSION	2
struct dslot {
	struct client	*c;		/* NULL once the client is gone */
	int		 type;		/* S_* */
	char		*cause;		/* why a record is malformed */
};

struct listener {
	struct evconnlistener	*ev;
	char			*name;
	char			*unlink;	/* socket file made by us */
};

struct dstats {
	uint64_t	 records;
	uint64_t	 unique;
	uint64_t	 replayed;
	uint64_t	 duplicates;
	uint64_t	 empty;
	uint64_t	 invalid;
	uint64_t	 too_long;
	uint64_t	 failed;	/* answered "error ... index" */
	uint64_t	 batches;
	double		 batch_seconds;
	double		 batch_max;
	double		 batch_last;
	uint64_t	 connections;
	uint64_t	 rejected;
};

struct daemon {
	const struct daemon_opts *o;
	struct index		*ix;
	struct filter		*f;
	struct event_base	*base;
	struct output		*out;
	int			 outfd;
	struct listener		*ls;
	size_t			 nls;
	struct event		*resume;	/* listen again (EMFILE) */
	struct evhttp		*http;
	struct clients		 clients;
	size_t			 nclients;
	size_t			 nadmitted;	/* not refused as busy */
	uint64_t		 run;		/* first docid of this run */

	struct record		*recs;		/* the open batch */
	struct verdict		*vs;
	struct dslot		*slots;
	size_t			 n;
	size_t			 bytes;

	struct event		*batch_ev;
	struct event		*reap_ev;
	struct event		*drain_ev;
	struct event		*watchdog_ev;
	struct event		*sig_ev[5];

	struct dstats		 st;
	int			 failing;	/* the last batch failed */
	int			 stopping;
	int			 status;	/* exit status */
	double			 started;
	double			 status_sent;
	struct buf		 line;		/* scratch for reply lines */
};

/* One statistic, for STATS, SIGUSR1 and /metrics alike. */
struct dstat {
	const char	*name;
	const char	*help;
	int		 counter;	/* a Prometheus counter, else a gauge */
	double		 value;
};
#define NSTATS		32

static int	daemon_listen(struct daemon *, const char *, char **);
static int	daemon_listen_unix(struct daemon *, const char *, char **);
static int	daemon_listen_tcp(struct daemon *, const char *, char **);
static int	daemon_activated(struct daemon *, char **);
static int	daemon_http(struct daemon *, char **);
static int	daemon_http_bind(struct daemon *, char **);
static int	daemon_add_listener(struct daemon *, int, const char *,
		    const char *, char **);
static void	daemon_sockname(int, char *, size_t);
static void	daemon_accept(struct evconnlistener *, evutil_socket_t,
		    struct sockaddr *, int, void *);
static void	daemon_accept_error(struct evconnlistener *, void *);
static void	daemon_flush(struct daemon *);
static void	daemon_batch_timer(evutil_socket_t, short, void *);
static void	daemon_reap(evutil_socket_t, short, void *);
static void	daemon_drain_timer(evutil_socket_t, short, void *);
static void	daemon_watchdog(evutil_socket_t, short, void *);
static void	daemon_signal(evutil_socket_t, short, void *);
static void	daemon_stop(struct daemon *, const char *);
static void	daemon_close_listeners(struct daemon *);
static int	daemon_open_output(struct daemon *, char **);
static int	daemon_open_log(struct daemon *, char **);
static size_t	daemon_stats(struct daemon *, struct dstat *);
static void	daemon_stats_line(struct daemon *, struct buf *, int);
static void	daemon_status(struct daemon *, int);
static void	daemon_metrics(struct evhttp_request *, void *);
static void	daemon_healthz(struct evhttp_request *, void *);
static void	daemon_notfound(struct evhttp_request *, void *);

static struct client *client_new(struct daemon *, int, const char *);
static void	client_free(struct client *);
static void	client_read(struct bufferevent *, void *);
static void	client_write(struct bufferevent *, void *);
static void	client_event(struct bufferevent *, short, void *);
static void	client_process(struct client *);
static void	client_take(struct client *, size_t, size_t);
static void	client_command(struct client *, const char *, size_t);
static void	client_fail(struct client *, const char *, const char *,
		    const char *, ...) __attribute__((format(printf, 4, 5)));
static void	client_settle(struct client *);
static void	client_finish(struct client *);
static void	client_reply(struct client *, const struct buf *);
static void	client_id(struct client *, struct buf *);
static void	reply_verdict(struct daemon *, struct buf *, size_t);
static void	reply_error(struct buf *, const char *, size_t, const char *,
		    const char *);
static void	reply_command(struct daemon *, struct buf *, int);

/*
 * Parse a duration: a number with an optional unit, us, ms, s (the
 * default), m, h or d, between lo and hi seconds.
 */
int
daemon_parse_time(const char *s, double lo, double hi, double *out,
    char **cause)
{
	static const struct {
		const char	*unit;
		double		 secs;
	} units[] = {
		{ "", 1 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 },
		{ "m", 60 }, { "h", 3600 }, { "d", 86400 }
	};
	char	*end;
	double	 v;
	size_t	 i;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(v) || v < 0) {
		xasprintf(cause, "'%s' is not a duration (such as 5ms, 2s or "
		    "10m)", s);
		return (-1);
	}
	for (i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(end, units[i].unit) == 0)
			break;
	}
	if (i == sizeof units / sizeof units[0]) {
		xasprintf(cause, "'%s': unknown unit '%s' (use us, ms, s, m, "
		    "h or d)", s, end);
		return (-1);
	}
	v *= units[i].secs;
	if (v < lo || v > hi) {
		xasprintf(cause, "'%s' is out of range (%gs to %gs)", s, lo,
		    hi);
		return (-1);
	}
	*out = v;
	return (0);
}

/* A printable name for a socket's own address, "unix:PATH" or "tcp:H:P". */
static void
daemon_sockname(int fd, char *out, size_t len)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl = sizeof ss;
	char			 host[INET6_ADDRSTRLEN], port[16];

	memset(&ss, 0, sizeof ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1) {
		snprintf(out, len, "fd %d", fd);
		return;
	}
	if (ss.ss_family == AF_UNIX) {
		struct sockaddr_un *sun = (struct sockaddr_un *)&ss;

		if (sl <= sizeof(sa_family_t))
			snprintf(out, len, "unix:(unnamed)");
		else if (sun->sun_path[0] == '\0')
			snprintf(out, len, "unix:@%.*s",
			    (int)(sl - sizeof(sa_family_t) - 1),
			    sun->sun_path + 1);
		else
			snprintf(out, len, "unix:%s", sun->sun_path);
		return;
	}
	if (getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port,
	    sizeof port, NI_NUMERICHOST|NI_NUMERICSERV) != 0) {
		snprintf(out, len, "fd %d", fd);
		return;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, len, "tcp:[%s]:%s", host, port);
	else
		snprintf(out, len, "tcp:%s:%s", host, port);
}

/* Serve the protocol on a listening socket. */
static int
daemon_add_listener(struct daemon *d, int fd, const char *name,
    const char *unlinkpath, char **cause)
{
	struct listener	*l;

	evutil_make_socket_nonblocking(fd);
	d->ls = xreallocarray(d->ls, d->nls + 1, sizeof *d->ls);
	l = &d->ls[d->nls];
	/* Backlog 0: the socket is already listening. */
	l->ev = evconnlistener_new(d->base, daemon_accept, d,
	    LEV_OPT_CLOSE_ON_FREE, 0, fd);
	if (l->ev == NULL) {
		xasprintf(cause, "%s: cannot listen", name);
		close(fd);
		return (-1);
	}
	evconnlistener_set_error_cb(l->ev, daemon_accept_error);
	l->name = xstrdup(name);
	l->unlink = unlinkpath != NULL ? xstrdup(unlinkpath) : NULL;
	d->nls++;
	log_info("listening on %s", name);
	return (0);
}

/*
 * Listen on a unix socket.  A socket file left by a process that died is
 * replaced; one that a live process answers on is not.
 */
static int
daemon_listen_unix(struct daemon *d, const char *path, char **cause)
{
	struct sockaddr_un	 sun;
	struct stat		 st;
	char			 name[SOCKNAME_MAX];
	int			 fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (*path == '\0' || strlen(path) >= sizeof sun.sun_path) {
		xasprintf(cause, "--listen unix:%s: the path must have 1 to "
		    "%zu bytes", path, sizeof sun.sun_path - 1);
		return (-1);
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			xasprintf(cause, "--listen unix:%s: the file exists "
			    "and is not a socket", path);
			return (-1);
		}
		if ((fd = socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0)) == -1)
			goto fail;
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0) {
			close(fd);
			xasprintf(cause, "--listen unix:%s: another process "
			    "is listening on it", path);
			return (-1);
		}
		close(fd);
		if (errno != ECONNREFUSED && errno != ENOENT)
			goto fail;
		if (unlink(path) == -1 && errno != ENOENT)
			goto fail;
		log_debug("removed the stale socket %s", path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0)) == -1)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    listen(fd, SOMAXCONN) == -1) {
		close(fd);
		goto fail;
	}
	snprintf(name, sizeof name, "unix:%s", path);
	return (daemon_add_listener(d, fd, name, path, cause));

fail:
	xasprintf(cause, "--listen unix:%s: %s", path, strerror(errno));
	return (-1);
}

/* Listen on every address a TCP host:port resolves to (port 0: any). */
static int
daemon_listen_tcp(struct daemon *d, const char *spec, char **cause)
{
	struct addrinfo	 hints, *res, *ai;
	char		*host, *port, name[SOCKNAME_MAX];
	int		 fd, on = 1, rc, bound = 0, errsv = 0;

	host = xstrdup(spec);
	if ((port = strrchr(host, ':')) == NULL || port[1] == '\0') {
		xasprintf(cause, "--listen tcp:%s: use tcp:HOST:PORT", spec);
		free(host);
		return (-1);
	}
	*port++ = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(*host == '\0' || strcmp(host, "*") == 0 ? NULL :
	    host, port, &hints, &res);
	if (rc != 0) {
		xasprintf(cause, "--listen tcp:%s: %s", spec,
		    gai_strerror(rc));
		free(host);
		return (-1);
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd == -1) {
			errsv = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on,
			    sizeof on);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
		    listen(fd, SOMAXCONN) == -1) {
			errsv = errno;
			close(fd);
			continue;
		}
		daemon_sockname(fd, name, sizeof name);
		if (daemon_add_listener(d, fd, name, NULL, cause) != 0) {
			freeaddrinfo(res);
			free(host);
			return (-1);
		}
		bound++;
	}
	freeaddrinfo(res);
	free(host);
	if (bound == 0) {
		xasprintf(cause, "--listen tcp:%s: %s", spec,
		    strerror(errsv != 0 ? errsv : EADDRNOTAVAIL));
		return (-1);
	}
	return (0);
}

/* Listen on one --listen address. */
static int
daemon_listen(struct daemon *d, const char *spec, char **cause)
{
	if (strncmp(spec, "unix:", 5) == 0)
		return (daemon_listen_unix(d, spec + 5, cause));
	if (strncmp(spec, "tcp:", 4) == 0)
		return (daemon_listen_tcp(d, spec + 4, cause));
	xasprintf(cause, "--listen %s: use unix:PATH or tcp:HOST:PORT", spec);
	return (-1);
}

/*
 * Take the sockets systemd passed (socket activation).  One named "http"
 * (FileDescriptorName=http) serves /metrics; the others the protocol.
 */
static int
daemon_activated(struct daemon *d, char **cause)
{
	struct notify_fd	*fds;
	char			 name[SOCKNAME_MAX];
	size_t			 n, i;
	int			 on, rv = 0;
	socklen_t		 len;

	n = notify_listen_fds(&fds);
	for (i = 0; i < n; i++) {
		on = 0;
		len = sizeof on;
		if (rv != 0) {
			close(fds[i].fd);
			continue;
		}
		if (getsockopt(fds[i].fd, SOL_SOCKET, SO_ACCEPTCONN, &on,
		    &len) == -1 || !on) {
			xasprintf(cause, "LISTEN_FDS: descriptor %d is not a "
			    "listening socket", fds[i].fd);
			close(fds[i].fd);
			rv = -1;
			continue;
		}
		daemon_sockname(fds[i].fd, name, sizeof name);
		if (strcmp(fds[i].name, "http") == 0) {
			if (d->http == NULL && daemon_http(d, cause) != 0) {
				rv = -1;
				continue;
			}
			evutil_make_socket_nonblocking(fds[i].fd);
			if (evhttp_accept_socket_with_handle(d->http,
			    fds[i].fd) == NULL) {
				xasprintf(cause, "%s: cannot serve HTTP", name);
				rv = -1;
				continue;
			}
			log_info("serving HTTP on %s (from systemd)", name);
			continue;
		}
		if (strlen(name) + 16 <= sizeof name)
			strcat(name, " (from systemd)");
		if (daemon_add_listener(d, fds[i].fd, name, NULL, cause) != 0)
			rv = -1;
	}
	for (i = 0; i < n; i++)
		free(fds[i].name);
	free(fds);
	return (rv);
}

/* Make the HTTP server: /metrics and /healthz. */
static int
daemon_http(struct daemon *d, char **cause)
{
	if (d->http != NULL)
		return (0);
	if ((d->http = evhttp_new(d->base)) == NULL) {
		xasprintf(cause, "cannot make the HTTP server");
		return (-1);
	}
	evhttp_set_allowed_methods(d->http, EVHTTP_REQ_GET|EVHTTP_REQ_HEAD);
	evhttp_set_timeout(d->http, 30);
	evhttp_set_max_headers_size(d->http, 16384);
	evhttp_set_max_body_size(d->http, 16384);
	evhttp_set_cb(d->http, "/metrics", daemon_metrics, d);
	evhttp_set_cb(d->http, "/healthz", daemon_healthz, d);
	evhttp_set_gencb(d->http, daemon_notfound, d);
	return (0);
}

/* Serve HTTP on --http HOST:PORT. */
static int
daemon_http_bind(struct daemon *d, char **cause)
{
	struct evhttp_bound_socket	*bs;
	char				*host, *port, *why;
	char				 name[SOCKNAME_MAX];
	uint64_t			 p;

	if (daemon_http(d, cause) != 0)
		return (-1);
	host = xstrdup(d->o->http);
	if ((port = strrchr(host, ':')) == NULL) {
		xasprintf(cause, "--http %s: use HOST:PORT", d->o->http);
		free(host);
		return (-1);
	}
	if (parse_uint(port + 1, 0, 65535, &p, &why) != 0) {
		xasprintf(cause, "--http %s: port %s", d->o->http, why);
		free(why);
		free(host);
		return (-1);
	}
	*port = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	bs = evhttp_bind_socket_with_handle(d->http,
	    *host == '\0' ? "0.0.0.0" : host, p);
	if (bs == NULL) {
		xasprintf(cause, "--http %s: cannot listen: %s", d->o->http,
		    strerror(errno));
		free(host);
		return (-1);
	}
	free(host);
	daemon_sockname(evhttp_bound_socket_get_fd(bs), name, sizeof name);
	log_info("serving HTTP on %s", name + 4);	/* without "tcp:" */
	return (0);
}

/* Listen again after running out of descriptors. */
static void
daemon_resume(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;
	size_t		 i;

	for (i = 0; i < d->nls; i++)
		evconnlistener_enable(d->ls[i].ev);
}

/*
 * Accepting failed: log it (at most every 10 s) and keep listening.  Out
 * of descriptors, the connection stays in the backlog and the listener
 * stays readable, so listening would spin: stop for a second instead.
 */
static void
daemon_accept_error(struct evconnlistener *l, void *arg)
{
	struct daemon	*d = arg;
	static double	 warned;
	double		 now = now_seconds();
	struct timeval	 tv = { 1, 0 };
	int		 err = EVUTIL_SOCKET_ERROR();
	size_t		 i;

	if (now - warned >= 10) {
		warned = now;
		log_warn("accept");
	}
	if (err != EMFILE && err != ENFILE && err != ENOBUFS &&
	    err != ENOMEM)
		return;
	for (i = 0; i < d->nls; i++)
		evconnlistener_disable(d->ls[i].ev);
	if (d->resume == NULL &&
	    (d->resume = evtimer_new(d->base, daemon_resume, d)) == NULL)
		fatalx("out of memory");
	evtimer_add(d->resume, &tv);
}

/* A new connection: a client, unless there are too many already. */
static void
daemon_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct daemon	*d = arg;
	struct client	*c;
	char		 peer[80], host[INET6_ADDRSTRLEN], port[16];
	static double	 warned;

	if (d->stopping) {
		close(fd);
		return;
	}
	if (sa->sa_family == AF_UNIX)
		snprintf(peer, sizeof peer, "unix");
	else if (getnameinfo(sa, salen, host, sizeof host, port, sizeof port,
	    NI_NUMERICHOST|NI_NUMERICSERV) == 0)
		snprintf(peer, sizeof peer, "%s:%s", host, port);
	else
		snprintf(peer, sizeof peer, "?");

	if (d->nclients >= 2 * (size_t)d->o->max_clients) {
		/* Not even room to say so. */
		close(fd);
		d->st.rejected++;
		return;
	}
	c = client_new(d, fd, peer);
	if (d->nadmitted >= d->o->max_clients) {
		d->st.rejected++;
		if (now_seconds() - warned >= 10) {
			warned = now_seconds();
			log_warnx("connection %" PRIu64 " from %s refused: "
			    "already %u clients (--max-clients)", c->conn, peer,
			    d->o->max_clients);
		}
		client_fail(c, NULL, "busy", "too many clients (--max-clients "
		    "%u)", d->o->max_clients);
		return;
	}
	c->admitted = 1;
	d->nadmitted++;
	log_debug("connection %" PRIu64 " from %s", c->conn, c->peer);
}

/* Make a client for an accepted connection. */
static struct client *
client_new(struct daemon *d, int fd, const char *peer)
{
	struct client	*c;
	struct timeval	 tv;

	c = xcalloc(1, sizeof *c);
	c->d = d;
	c->conn = ++d->st.connections;
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	evutil_make_socket_nonblocking(fd);
	c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		fatalx("bufferevent_socket_new failed");
	bufferevent_setcb(c->bev, client_read, client_write, client_event, c);
	/* At most one record (and its delimiter) waits unread. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, d->o->max_bytes + 1);
	bufferevent_setwatermark(c->bev, EV_WRITE, REPLY_LOW, 0);
	if (d->o->idle_timeout > 0) {
		tv.tv_sec = (time_t)d->o->idle_timeout;
		tv.tv_usec = (suseconds_t)((d->o->idle_timeout - tv.tv_sec) *
		    1e6);
		bufferevent_set_timeouts(c->bev, &tv, &tv);
	}
	bufferevent_enable(c->bev, EV_READ|EV_WRITE);
	TAILQ_INSERT_TAIL(&d->clients, c, entry);
	d->nclients++;
	return (c);
}

/* Close a connection and forget the client (its batch slots stay). */
static void
client_free(struct client *c)
{
	struct daemon	*d = c->d;
	size_t		 i;

	for (i = 0; i < d->n; i++) {
		if (d->slots[i].c == c)
			d->slots[i].c = NULL;
	}
	log_debug("connection %" PRIu64 " closed after %" PRIu64 " records",
	    c->conn, c->recno);
	TAILQ_REMOVE(&d->clients, c, entry);
	d->nclients--;
	if (c->admitted)
		d->nadmitted--;
	bufferevent_free(c->bev);
	free(c->last);
	free(c);
	if (d->stopping && d->nclients == 0)
		event_base_loopexit(d->base, NULL);
}

/* The id of this client's current record: RUN:CONN:RECNO. */
static void
client_id(struct client *c, struct buf *b)
{
	char	 id[80];

	snprintf(id, sizeof id, "%" PRIu64 ":%" PRIu64 ":%" PRIu64,
	    c->d->run, c->conn, c->recno);
	b->len = 0;
	buf_append(b, id, strlen(id));
}

/* Queue a reply line. */
static void
client_reply(struct client *c, const struct buf *b)
{
	evbuffer_add(bufferevent_get_output(c->bev), b->data, b->len);
}

/*
 * The client broke a limit: after its pending replies it gets the line
 * "error ID CODE MESSAGE" and the connection is closed.  id NULL is "-".
 */
static void
client_fail(struct client *c, const char *id, const char *code,
    const char *fmt, ...)
{
	struct buf	 b = { 0 };
	va_list		 ap;
	char		 msg[256];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	reply_error(&b, id, id != NULL ? strlen(id) : 0, code, msg);
	buf_append(&b, "", 1);
	free(c->last);
	c->last = xstrdup(b.data);
	buf_free(&b);
	log_debug("connection %" PRIu64 ": %s: %s", c->conn, code, msg);
	c->state = C_CLOSING;
	bufferevent_disable(c->bev, EV_READ);
	client_settle(c);
}

/*
 * After replies were queued, or the client's state changed: throttle it,
 * or, when it is closing and everything is answered, send its last line
 * and have it closed once the output is written.
 */
static void
client_settle(struct client *c)
{
	struct evbuffer	*out = bufferevent_get_output(c->bev);

	if (c->state == C_READING) {
		if (!c->throttled && evbuffer_get_length(out) > REPLY_HIGH) {
			c->throttled = 1;
			bufferevent_disable(c->bev, EV_READ);
			log_debug("connection %" PRIu64 ": not reading its "
			    "replies; paused", c->conn);
		}
		if (c->eof && c->pending == 0 &&
		    evbuffer_get_length(bufferevent_get_input(c->bev)) == 0)
			c->state = C_CLOSING;
	}
	if (c->state != C_CLOSING || c->pending != 0 || c->finish)
		return;
	if (c->last != NULL && !c->last_sent) {
		evbuffer_add(out, c->last, strlen(c->last));
		c->last_sent = 1;
	}
	/* client_write is now called when everything is written. */
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	if (evbuffer_get_length(out) == 0) {
		c->finish = 1;
		event_active(c->d->reap_ev, EV_TIMEOUT, 1);
	}
}

/*
 * Everything answered and written: close, after an error line first
 * half-closing and dropping what the client still sends for a while.
 */
static void
client_finish(struct client *c)
{
	struct timeval	 tv = { LINGER_SECS, 0 };
	struct evbuffer	*in = bufferevent_get_input(c->bev);

	c->finish = 0;
	if (!c->last_sent || c->eof) {
		client_free(c);
		return;
	}
	c->state = C_LINGER;
	shutdown(bufferevent_getfd(c->bev), SHUT_WR);
	evbuffer_drain(in, evbuffer_get_length(in));
	bufferevent_set_timeouts(c->bev, &tv, NULL);
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	bufferevent_enable(c->bev, EV_READ);
}

/* Close the clients whose last bytes were written. */
static void
daemon_reap(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;
	struct client	*c, *next;

	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->finish)
			client_finish(c);
	}
}

/* Input arrived. */
static void
client_read(struct bufferevent *bev, void *arg)
{
	struct client	*c = arg;
	struct evbuffer	*in = bufferevent_get_input(bev);

	if (c->state == C_LINGER) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	client_process(c);
}

/* Output was written down to the low-water mark. */
static void
client_write(struct bufferevent *bev, void *arg)
{
	struct client	*c = arg;
	size_t		 left = evbuffer_get_length(bufferevent_get_output(bev));

	if (c->state == C_READING && c->throttled && left <= REPLY_LOW) {
		c->throttled = 0;
		log_debug("connection %" PRIu64 ": reading again", c->conn);
		if (!c->d->stopping)
			bufferevent_enable(bev, EV_READ);
		client_process(c);	/* records already buffered */
		return;
	}
	if (c->state == C_CLOSING && c->pending == 0 && left == 0 &&
	    !c->finish)
		client_finish(c);
}

/* End of input, an error, or a timeout on a connection. */
static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct client	*c = arg;
	struct evbuffer	*out = bufferevent_get_output(bev);

	if (what & BEV_EVENT_ERROR) {
		log_debug("connection %" PRIu64 ": %s", c->conn,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		client_free(c);
		return;
	}
	if (c->state == C_LINGER) {
		client_free(c);		/* EOF, or it lingered long enough */
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/* Answer what it sent, then close. */
		c->eof = 1;
		client_process(c);
		client_settle(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING)) {
		log_debug("connection %" PRIu64 ": replies not read for "
		    "%.0f s; closed", c->conn, c->d->o->idle_timeout);
		client_free(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING)) {
		/* Waiting for its answers is not being idle. */
		if (c->state != C_READING || c->pending != 0 ||
		    evbuffer_get_length(out) != 0) {
			if (c->state == C_READING && !c->throttled)
				bufferevent_enable(bev, EV_READ);
			return;
		}
		client_fail(c, NULL, "idle", "nothing received for %g s "
		    "(--idle-timeout)", c->d->o->idle_timeout);
	}
}

/*
 * Take the complete records in the client's input, as long as it may be
 * read.  At the end of its input the rest is a last record without a
 * delimiter, as in a file.
 */
static void
client_process(struct client *c)
{
	struct daemon		*d = c->d;
	struct evbuffer		*in = bufferevent_get_input(c->bev);
	struct evbuffer_ptr	 p;
	char			 delim = d->o->delim;
	size_t			 len, reclen, dlen;

	while (c->state == C_READING && !c->throttled && !d->stopping) {
		if ((len = evbuffer_get_length(in)) == 0)
			break;
		if (c->scanned > len)
			c->scanned = 0;
		evbuffer_ptr_set(in, &p, c->scanned, EVBUFFER_PTR_SET);
		p = evbuffer_search(in, &delim, 1, &p);
		if (p.pos == -1) {
			c->scanned = len;
			if (len <= d->o->max_bytes && !c->eof)
				break;	/* wait for the rest */
			reclen = len;
			dlen = 0;
		} else {
			reclen = p.pos;
			dlen = 1;
		}
		c->scanned = 0;
		if (reclen > d->o->max_bytes) {
			c->recno++;
			d->st.records++;
			d->st.too_long++;
			client_id(c, &d->line);
			buf_append(&d->line, "", 1);
			evbuffer_drain(in, len);
			client_fail(c, d->line.data, "too-long", "record of "
			    "%s%zu bytes is over --max-bytes %" PRIu64,
			    p.pos == -1 && !c->eof ? "more than " : "", reclen,
			    d->o->max_bytes);
			break;
		}
		client_take(c, reclen, dlen);
		client_settle(c);
	}
	if (c->state == C_READING && c->eof)
		client_settle(c);
}

/*
 * Move one record (len bytes and a delimiter of dlen) from the client's
 * input into the batch, or answer it if it is a command.
 */
static void
client_take(struct client *c, size_t len, size_t dlen)
{
	struct daemon	*d = c->d;
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	struct record	*r;
	struct dslot	*s;
	char		 cmd[COMMAND_MAX], *cause;
	size_t		 i;

	if (len >= sizeof COMMAND - 1) {
		evbuffer_copyout(in, cmd, sizeof COMMAND - 1);
		if (memcmp(cmd, COMMAND, sizeof COMMAND - 1) == 0) {
			i = len < sizeof cmd ? len : sizeof cmd - 1;
			evbuffer_remove(in, cmd, i);
			evbuffer_drain(in, len - i + dlen);
			client_command(c, cmd + sizeof COMMAND - 1,
			    len < sizeof cmd ? i - (sizeof COMMAND - 1) :
			    (size_t)-1);
			return;
		}
	}

	i = d->n++;
	r = &d->recs[i];
	s = &d->slots[i];
	record_reset(r);
	buf_reserve(&r->raw, len + 1);
	evbuffer_remove(in, r->raw.data, len);
	r->raw.len = len;
	evbuffer_drain(in, dlen);
	c->recno++;
	c->pending++;
	d->st.records++;
	r->recno = c->recno;
	r->line = c->recno;
	verdict_reset(&d->vs[i]);
	s->c = c;
	s->type = S_RECORD;
	free(s->cause);
	s->cause = NULL;
	if (record_parse_timed(r, d->o->format, d->o->text_field,
	    d->o->id_field, d->o->time_field, &cause) != 0) {
		d->vs[i].kind = V_BAD;
		s->cause = cause;
		d->st.invalid++;
		if (!d->o->quiet)
			log_debug("connection %" PRIu64 ", record %" PRIu64
			    ": %s", c->conn, c->recno, cause);
		if (d->o->policy == POLICY_FAIL) {
			c->state = C_CLOSING;	/* after its reply */
			bufferevent_disable(c->bev, EV_READ);
		}
	}
	if (r->id.len == 0)
		client_id(c, &r->id);

	d->bytes += len;
	if (d->n == 1) {
		struct timeval tv;

		tv.tv_sec = (time_t)d->o->batch_delay;
		tv.tv_usec = (suseconds_t)((d->o->batch_delay - tv.tv_sec) *
		    1e6);
		evtimer_add(d->batch_ev, &tv);
	}
	if (d->n >= d->o->batch || d->bytes >= BATCH_BYTES)
		daemon_flush(d);
}

/*
 * A command line: "#mhfilter stats" or "#mhfilter version".  Answered in
 * order: at once if nothing of the client's is pending, else after its
 * batch.  len (size_t)-1: too long to be a command.
 */
static void
client_command(struct client *c, const char *cmd, size_t len)
{
	struct daemon	*d = c->d;
	struct buf	 b = { 0 };
	struct dslot	*s;
	int		 type;

	while (len != (size_t)-1 && len > 0 && (cmd[len - 1] == '\r' ||
	    cmd[len - 1] == ' '))
		len--;
	if (len == 5 && strncasecmp(cmd, "stats", 5) == 0)
		type = S_STATS;
	else if (len == 7 && strncasecmp(cmd, "version", 7) == 0)
		type = S_VERSION;
	else {
		/* Unknown: say so, in order, like a malformed record. */
		type = -1;
	}
	if (c->pending == 0) {
		if (type == -1)
			reply_error(&b, NULL, 0, "command", "unknown command "
			    "(use '#mhfilter stats' or '#mhfilter version')");
		else
			reply_command(d, &b, type);
		client_reply(c, &b);
		buf_free(&b);
		return;
	}
	s = &d->slots[d->n];
	record_reset(&d->recs[d->n]);
	verdict_reset(&d->vs[d->n]);
	d->vs[d->n].kind = V_BAD;	/* nothing for the filter */
	s->c = c;
	s->type = type;
	free(s->cause);
	s->cause = NULL;
	if (type == -1) {
		s->type = S_RECORD;
		s->cause = xstrdup("unknown command (use '#mhfilter stats' or "
		    "'#mhfilter version')");
		d->recs[d->n].recno = 0;	/* not a record: id "-" */
	}
	c->pending++;
	if (++d->n >= d->o->batch)
		daemon_flush(d);
}

/* Append "error TAB ID TAB CODE TAB MESSAGE" and a newline. */
static void
reply_error(struct buf *b, const char *id, size_t idlen, const char *code,
    const char *msg)
{
	buf_append(b, "error\t", 6);
	if (id == NULL)
		buf_append(b, "-", 1);
	else
		output_field(b, id, idlen);
	buf_append(b, "\t", 1);
	buf_append(b, code, strlen(code));
	buf_append(b, "\t", 1);
	output_field(b, msg, strlen(msg));
	buf_append(b, "\n", 1);
}

/* Append the reply line of batch slot i (a record). */
static void
reply_verdict(struct daemon *d, struct buf *b, size_t i)
{
	const struct record	*r = &d->recs[i];
	const struct verdict	*v = &d->vs[i];
	char			 sim[32];

	switch (v->kind) {
	case V_UNIQUE:
		buf_append(b, "unique\t", 7);
		output_field(b, r->id.data, r->id.len);
		if (v->replay)
			buf_append(b, "\treplay", 7);
		break;
	case V_DUPLICATE:
		buf_append(b, "duplicate\t", 10);
		output_field(b, r->id.data, r->id.len);
		buf_append(b, "\t", 1);
		output_field(b, v->match.data, v->match.len);
		snprintf(sim, sizeof sim, "\t%.4f", v->sim);
		buf_append(b, sim, strlen(sim));
		break;
	case V_EMPTY:
		buf_append(b, "empty\t", 6);
		output_field(b, r->id.data, r->id.len);
		break;
	default:
		/* Not decided: reply_error is called instead. */
		fatalx("reply_verdict: verdict %d", v->kind);
	}
	buf_append(b, "\n", 1);
}

/* Append the reply to a command: "stats" or "version" and key=value. */
static void
reply_command(struct daemon *d, struct buf *b, int type)
{
	char	 v[256];

	if (type == S_STATS) {
		daemon_stats_line(d, b, '\t');
		return;
	}
	snprintf(v, sizeof v, "version\tprotocol=%d\tmhfilter=%s\t"
	    "index_format=%d\tscheme=%d\n", PROTOCOL_VERSION, PACKAGE_VERSION,
	    MHF_INDEX_FORMAT, MHF_SCHEME);
	buf_append(b, v, strlen(v));
}

/*
 * Close the batch: decide and commit it in one transaction, write its
 * records to the output file, then queue every reply.
 */
static void
daemon_flush(struct daemon *d)
{
	struct client	*c, *next;
	struct dslot	*s;
	struct verdict	*v;
	char		*cause = NULL, *outcause = NULL;
	double		 t0, dt;
	size_t		 i, n = d->n;
	int		 rc;

	evtimer_del(d->batch_ev);
	if (n == 0)
		return;
	t0 = now_seconds();
	rc = filter_batch(d->f, d->ix, d->recs, d->vs, n, &cause);
	dt = now_seconds() - t0;
	d->st.batches++;
	d->st.batch_seconds += dt;
	d->st.batch_last = dt;
	if (dt > d->st.batch_max)
		d->st.batch_max = dt;
	if (rc != 0) {
		if (!d->failing)
			log_warnx("a batch of %zu records failed: %s", n,
			    cause);
		else
			log_debug("a batch of %zu records failed: %s", n,
			    cause);
		d->failing = 1;
	} else if (d->failing) {
		log_info("batches are committed again");
		d->failing = 0;
	}

	/* Count, and write the committed records out. */
	for (i = 0; i < n && rc == 0; i++) {
		s = &d->slots[i];
		v = &d->vs[i];
		if (s->type != S_RECORD || d->recs[i].recno == 0)
			continue;
		switch (v->kind) {
		case V_UNIQUE:
			d->st.unique++;
			d->st.replayed += v->replay;
			break;
		case V_DUPLICATE:
			d->st.duplicates++;
			break;
		case V_EMPTY:
			d->st.empty++;
			break;
		}
		if (d->out == NULL || outcause != NULL ||
		    (v->kind == V_BAD && d->o->policy != POLICY_PASS))
			continue;
		output_record(d->out, &d->recs[i], v, &outcause);
	}
	if (d->out != NULL && rc == 0 && outcause == NULL)
		output_flush(d->out, &outcause);

	/* Answer. */
	for (i = 0; i < n; i++) {
		s = &d->slots[i];
		if ((c = s->c) == NULL)
			continue;	/* it went away */
		d->line.len = 0;
		if (s->type != S_RECORD)
			reply_command(d, &d->line, s->type);
		else if (d->recs[i].recno == 0)
			reply_error(&d->line, NULL, 0, "command", s->cause);
		else if (d->vs[i].kind == V_BAD)
			reply_error(&d->line, d->recs[i].id.data,
			    d->recs[i].id.len, "invalid", s->cause);
		else if (rc != 0) {
			reply_error(&d->line, d->recs[i].id.data,
			    d->recs[i].id.len, "index", cause);
			d->st.failed++;
		} else
			reply_verdict(d, &d->line, i);
		client_reply(c, &d->line);
		c->pending--;
	}
	for (i = 0; i < n; i++) {
		/* Big records' memory goes, or slots would hoard it. */
		if (d->recs[i].raw.size > KEEP_BYTES ||
		    d->recs[i].text.size > KEEP_BYTES)
			record_free(&d->recs[i]);
	}
	d->n = 0;
	d->bytes = 0;
	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		client_settle(c);
	}
	free(cause);
	daemon_status(d, 0);
	if (outcause != NULL) {
		/* The index holds what the output lacks: stop here. */
		log_warnx("output %s: %s", d->o->output, outcause);
		free(outcause);
		d->status = EXIT_ERROR;
		daemon_stop(d, "an output error");
	}
}

/* The batch's delay is over. */
static void
daemon_batch_timer(evutil_socket_t fd, short events, void *arg)
{
	daemon_flush(arg);
}

/* The statistics, named as in /metrics without the mhfilter_ prefix. */
static size_t
daemon_stats(struct daemon *d, struct dstat *st)
{
	struct index_stats	 is;
	struct filter_stats	 fs;
	char			*cause;
	size_t			 n = 0;

#define S(nm, cnt, val, hlp) do {					\
	if (n == NSTATS)						\
		fatalx("daemon_stats: more than NSTATS");		\
	st[n].name = nm;						\
	st[n].counter = cnt;						\
	st[n].value = (double)(val);					\
	st[n].help = hlp;						\
	n++;								\
} while (0)
	S("records", 1, d->st.records, "Records received.");
	S("unique", 1, d->st.unique, "Records answered unique, replays "
	    "included.");
	S("replayed", 1, d->st.replayed, "Unique records that were replays.");
	S("duplicates", 1, d->st.duplicates, "Records answered duplicate.");
	S("empty", 1, d->st.empty, "Records with no text to compare.");
	S("invalid", 1, d->st.invalid, "Malformed records.");
	S("too_long", 1, d->st.too_long, "Records over --max-bytes.");
	S("failed", 1, d->st.failed, "Records answered with an index error.");
	S("errors", 1, d->st.invalid + d->st.too_long + d->st.failed,
	    "Records answered with an error.");
	filter_stats(d->f, &fs);
	S("candidates", 1, fs.candidates, "Candidates examined.");
	S("expired", 1, fs.expired, "Documents expired (--retain, "
	    "--max-docs).");
	S("batches", 1, d->st.batches, "Batches committed or failed.");
	S("batch_seconds", 1, d->st.batch_seconds,
	    "Time spent deciding and committing batches.");
	S("batch_seconds_last", 0, d->st.batch_last,
	    "Time the last batch took.");
	S("batch_seconds_max", 0, d->st.batch_max,
	    "Time the slowest batch took.");
	S("clients", 0, d->nclients, "Connected clients.");
	S("connections", 1, d->st.connections, "Connections accepted.");
	S("rejected", 1, d->st.rejected, "Connections refused "
	    "(--max-clients).");
	if (index_stats(d->ix, &is, &cause) == 0) {
		S("index_documents", 0, is.docs, "Documents in the index.");
		S("index_bytes", 0, is.size,
		    "Used size of the index's data file.");
	} else
		free(cause);
	S("uptime_seconds", 0, now_seconds() - d->started,
	    "Seconds since the daemon started.");
#undef S
	return (n);
}

/* "stats" and key=value pairs separated by sep, and a newline. */
static void
daemon_stats_line(struct daemon *d, struct buf *b, int sep)
{
	struct dstat	 st[NSTATS];
	size_t		 i, n;
	char		 v[96];
	char		 c = sep;

	n = daemon_stats(d, st);
	buf_append(b, "stats", 5);
	for (i = 0; i < n; i++) {
		if (st[i].value == floor(st[i].value) && st[i].value < 1e15)
			snprintf(v, sizeof v, "%s=%.0f", st[i].name,
			    st[i].value);
		else
			snprintf(v, sizeof v, "%s=%.6f", st[i].name,
			    st[i].value);
		buf_append(b, &c, 1);
		buf_append(b, v, strlen(v));
	}
	buf_append(b, "\n", 1);
}

/* Tell systemd how things are, at most once a STATUS_SECS unless forced. */
static void
daemon_status(struct daemon *d, int force)
{
	double	 now = now_seconds();

	if (!force && now - d->status_sent < STATUS_SECS)
		return;
	d->status_sent = now;
	notify_send("STATUS=%zu clients, %" PRIu64 " records, %" PRIu64
	    " unique, %" PRIu64 " duplicates", d->nclients, d->st.records,
	    d->st.unique, d->st.duplicates);
}

/* GET /metrics: the statistics in the Prometheus text format. */
static void
daemon_metrics(struct evhttp_request *req, void *arg)
{
	struct daemon	*d = arg;
	struct dstat	 st[NSTATS];
	struct evbuffer	*b;
	size_t		 i, n;

	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	n = daemon_stats(d, st);
	for (i = 0; i < n; i++) {
		evbuffer_add_printf(b, "# HELP mhfilter_%s%s %s\n"
		    "# TYPE mhfilter_%s%s %s\nmhfilter_%s%s %.17g\n",
		    st[i].name, st[i].counter ? "_total" : "", st[i].help,
		    st[i].name, st[i].counter ? "_total" : "",
		    st[i].counter ? "counter" : "gauge",
		    st[i].name, st[i].counter ? "_total" : "", st[i].value);
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* GET /healthz: 200 when batches commit, 503 otherwise. */
static void
daemon_healthz(struct evhttp_request *req, void *arg)
{
	struct daemon	*d = arg;
	struct evbuffer	*b;
	int		 code = 200;
	const char	*msg = "ok\n";

	if (d->stopping) {
		code = 503;
		msg = "stopping\n";
	} else if (d->failing) {
		code = 503;
		msg = "the last batch failed to commit\n";
	}
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add(b, msg, strlen(msg));
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, code == 200 ? "OK" :
	    "Service Unavailable", b);
	evbuffer_free(b);
}

/* Any other path. */
static void
daemon_notfound(struct evhttp_request *req, void *arg)
{
	evhttp_send_error(req, 404, "use /metrics or /healthz");
}

/* Tell systemd the service is alive. */
static void
daemon_watchdog(evutil_socket_t fd, short events, void *arg)
{
	notify_send("WATCHDOG=1");
}

/* Remove the listeners (and our socket files) and the HTTP server. */
static void
daemon_close_listeners(struct daemon *d)
{
	size_t	 i;

	if (d->resume != NULL) {
		event_free(d->resume);
		d->resume = NULL;
	}
	for (i = 0; i < d->nls; i++) {
		evconnlistener_free(d->ls[i].ev);
		if (d->ls[i].unlink != NULL)
			unlink(d->ls[i].unlink);
		free(d->ls[i].name);
		free(d->ls[i].unlink);
	}
	free(d->ls);
	d->ls = NULL;
	d->nls = 0;
	if (d->http != NULL)
		evhttp_free(d->http);
	d->http = NULL;
}

/*
 * Stop: take no more connections or records, finish the batch in flight
 * (commit, answer), tell every client, and leave the loop once they have
 * read their replies, or after DRAIN_SECS.
 */
static void
daemon_stop(struct daemon *d, const char *why)
{
	struct client	*c, *next;
	struct timeval	 tv = { DRAIN_SECS, 0 };

	if (d->stopping)
		return;
	d->stopping = 1;
	log_info("stopping on %s: finishing the batch in flight", why);
	notify_send("STOPPING=1\nSTATUS=stopping on %s", why);
	daemon_close_listeners(d);
	daemon_flush(d);
	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == C_LINGER) {
			client_free(c);
			continue;
		}
		bufferevent_disable(c->bev, EV_READ);
		if (c->state == C_READING) {
			c->throttled = 0;
			if (c->eof && evbuffer_get_length(
			    bufferevent_get_input(c->bev)) == 0)
				c->state = C_CLOSING;
			else
				client_fail(c, NULL, "shutdown", "the server "
				    "is stopping");
		}
		client_settle(c);
	}
	evtimer_add(d->drain_ev, &tv);
	if (d->nclients == 0)
		event_base_loopexit(d->base, NULL);
}

/* Clients did not read their last replies in time: stop waiting. */
static void
daemon_drain_timer(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;

	log_warnx("%zu clients did not read their last replies in %d s",
	    d->nclients, DRAIN_SECS);
	event_base_loopexit(d->base, NULL);
}

/* Open (or reopen, on SIGHUP) the output file. */
static int
daemon_open_output(struct daemon *d, char **cause)
{
	int	 fd;

	if (d->o->output == NULL)
		return (0);
	if (strcmp(d->o->output, "-") == 0) {
		if (d->out == NULL)
			d->out = output_open(STDOUT_FILENO, d->o->mode,
			    d->o->format, d->o->delim);
		d->outfd = STDOUT_FILENO;
		return (0);
	}
	fd = open(d->o->output, O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0666);
	if (fd == -1) {
		xasprintf(cause, "--output %s: %s", d->o->output,
		    strerror(errno));
		return (-1);
	}
	if (d->out != NULL)
		output_close(d->out);	/* flushed after every batch */
	if (d->outfd > STDERR_FILENO)
		close(d->outfd);
	d->outfd = fd;
	d->out = output_open(fd, d->o->mode, d->o->format, d->o->delim);
	return (0);
}

/* Open (or reopen) --log-file as the standard error. */
static int
daemon_open_log(struct daemon *d, char **cause)
{
	int	 fd;

	if (d->o->log_file == NULL)
		return (0);
	fd = open(d->o->log_file, O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0666);
	if (fd == -1) {
		xasprintf(cause, "--log-file %s: %s", d->o->log_file,
		    strerror(errno));
		return (-1);
	}
	fflush(stderr);
	if (dup2(fd, STDERR_FILENO) == -1) {
		xasprintf(cause, "--log-file %s: %s", d->o->log_file,
		    strerror(errno));
		close(fd);
		return (-1);
	}
	close(fd);
	log_init("mhfilter");	/* no longer the journal, if it was */
	return (0);
}

/* SIGTERM, SIGINT, SIGHUP, SIGUSR1. */
static void
daemon_signal(evutil_socket_t sig, short events, void *arg)
{
	struct daemon	*d = arg;
	struct buf	 b = { 0 };
	char		*cause;

	switch (sig) {
	case SIGTERM:
	case SIGINT:
		if (d->stopping) {
			log_warnx("signal %d again: exiting now", (int)sig);
			event_base_loopbreak(d->base);
			break;
		}
		daemon_stop(d, sig == SIGTERM ? "SIGTERM" : "SIGINT");
		break;
	case SIGHUP:
		notify_send("RELOADING=1");
		if (daemon_open_log(d, &cause) != 0 ||
		    daemon_open_output(d, &cause) != 0) {
			log_warnx("SIGHUP: %s", cause);
			free(cause);
		} else
			log_info("SIGHUP: output and log reopened");
		notify_send("READY=1");
		break;
	case SIGUSR1:
		daemon_stats_line(d, &b, ' ');
		b.data[b.len - 1] = '\0';
		log_info("%s", b.data);
		buf_free(&b);
		daemon_status(d, 1);
		break;
	}
}

/*
 * Run the daemon until SIGTERM or SIGINT: EXIT_OK then, EXIT_ERROR when it
 * cannot start or its output fails.  The index is the caller's to close.
 */
int
daemon_run(const struct daemon_opts *o, struct index *ix, struct filter *f)
{
	static const int	 sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	struct daemon		 dd, *d = &dd;
	struct sigaction	 sa;
	struct client		*c;
	struct timeval		 tv;
	struct buf		 b = { 0 };
	uint64_t		 wd;
	char			*cause = NULL;
	size_t			 i;

	memset(d, 0, sizeof *d);
	d->o = o;
	d->ix = ix;
	d->f = f;
	d->outfd = -1;
	d->run = index_run_start(ix);
	d->started = now_seconds();
	TAILQ_INIT(&d->clients);

	/* Write errors are reported, not signals (EPIPE, EFBIG). */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGXFSZ, &sa, NULL);

	if ((d->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if (daemon_open_log(d, &cause) != 0 ||
	    daemon_open_output(d, &cause) != 0 ||
	    daemon_activated(d, &cause) != 0)
		goto fail;
	for (i = 0; i < o->nlisten; i++) {
		if (daemon_listen(d, o->listen[i], &cause) != 0)
			goto fail;
	}
	if (o->http != NULL && daemon_http_bind(d, &cause) != 0)
		goto fail;
	if (d->nls == 0) {
		xasprintf(&cause, "nothing to listen on (use --listen)");
		goto fail;
	}

	d->recs = xcalloc(o->batch, sizeof *d->recs);
	d->vs = xcalloc(o->batch, sizeof *d->vs);
	d->slots = xcalloc(o->batch, sizeof *d->slots);
	d->batch_ev = evtimer_new(d->base, daemon_batch_timer, d);
	d->reap_ev = event_new(d->base, -1, 0, daemon_reap, d);
	d->drain_ev = evtimer_new(d->base, daemon_drain_timer, d);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		d->sig_ev[i] = evsignal_new(d->base, sigs[i], daemon_signal,
		    d);
		evsignal_add(d->sig_ev[i], NULL);
	}
	if ((wd = notify_watchdog_usec()) != 0) {
		wd /= 2;
		tv.tv_sec = wd / 1000000;
		tv.tv_usec = wd % 1000000;
		d->watchdog_ev = event_new(d->base, -1, EV_PERSIST,
		    daemon_watchdog, d);
		evtimer_add(d->watchdog_ev, &tv);
	}

	log_info("ready: index %s, protocol %d, batches of %zu records or "
	    "%g ms", index_path(ix), PROTOCOL_VERSION, o->batch,
	    o->batch_delay * 1000);
	notify_send("READY=1\nSTATUS=ready, %zu listeners", d->nls);
	event_base_dispatch(d->base);

	/* The loop ended: by daemon_stop, or a second signal. */
	daemon_flush(d);
	while ((c = TAILQ_FIRST(&d->clients)) != NULL)
		client_free(c);
	daemon_close_listeners(d);
	if (o->stats) {
		daemon_stats_line(d, &b, ' ');
		b.data[b.len - 1] = '\0';
		log_info("%s", b.data);
		buf_free(&b);
	}
	log_info("stopped after %" PRIu64 " records in %" PRIu64
	    " connections", d->st.records, d->st.connections);
	for (i = 0; i < o->batch; i++) {
		record_free(&d->recs[i]);
		verdict_free(&d->vs[i]);
		free(d->slots[i].cause);
	}
	free(d->recs);
	free(d->vs);
	free(d->slots);
	buf_free(&d->line);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		event_free(d->sig_ev[i]);
	event_free(d->batch_ev);
	event_free(d->reap_ev);
	event_free(d->drain_ev);
	if (d->watchdog_ev != NULL)
		event_free(d->watchdog_ev);
	output_close(d->out);
	if (d->outfd > STDERR_FILENO)
		close(d->outfd);
	event_base_free(d->base);
	return (d->status);

fail:
	log_warnx("%s", cause);
	free(cause);
	daemon_close_listeners(d);
	output_close(d->out);
	if (d->outfd > STDERR_FILENO)
		close(d->outfd);
	event_base_free(d->base);
	return (EXIT_ERROR);
}
