/*
 * Daemon mode: records from many socket clients, through the pipeline.
 *
 *   clients --records--> a batch --pipeline (decide, commit)--> output
 *           <--replies--                                       file, if any
 *
 * Every client sends records in the format of the command line (-f, -z)
 * and gets one reply line for each, in its own order (the protocol is in
 * mhfilter(1), PROTOCOL; PROTOCOL_VERSION in mhfilter.h).  Records of all
 * clients go into one batch (the pipeline's group commit, pipeline_add),
 * which is submitted when it holds --batch records or 64 MiB, or
 * --batch-delay after its first record arrived.  The pipeline's writer
 * thread decides and commits it in one transaction while this thread goes
 * on reading clients into the next; once it is committed, its records are
 * written to the output file and its replies queued (daemon_deliver,
 * called from the pipeline's notification): an answer "unique" is never
 * sent for a record the index could lose.
 * This thread does socket I/O only: records are parsed in phase 1 by the
 * worker threads, as in the file stream.
 *
 * Backpressure: a client whose unread replies pass REPLY_HIGH is not read
 * until they fall to REPLY_LOW, and its input buffer holds at most one
 * record (--max-bytes), so memory stays bounded by the clients' count
 * whatever they do.  When every batch is in flight, the clients are not
 * read: their records wait in the kernel's socket buffers, not in ours
 * (reading them into evbuffers up to --max-bytes each cost more than the
 * daemon's whole lead), until a batch is delivered.  An over-long record
 * is answered "error ID too-long" and its bytes dropped as they come
 * (client_toolong).  A client that breaks a limit (idle too long, one too
 * many, an over-long record or a malformed one under --on-bad-input=fail)
 * gets an "error" line and is disconnected: its pending replies first,
 * then the error, then a half-close, and its further input is read and
 * dropped for a few seconds so that the error line is not lost to a
 * reset.
 *
 * Clients are freed only from their own callbacks or from the reap event,
 * never from inside another client's callback.  A client that goes away
 * with records in flight is kept, detached, until they are delivered.
 *
 * Delivery (--db): a client's records of a batch are marked delivered, as
 * the stream marks a batch whose output is written, once the client has
 * taken its replies (struct dmark, one for each client's part of a batch,
 * or one for the batch where its documents cannot be told apart by
 * record, and a client's list of cmarks): a client that acks ("#mhfilter
 * ack", as --connect does) says so itself ("#mhfilter taken N") once it
 * wrote their records; for any other, its socket took them
 * (client_taken).  Records whose replies never went (the client went
 * away, the daemon was killed) stay undelivered: they are answered unique
 * again, as replays, when they come back; those whose replies went are
 * "seen" then, in this run or after a restart (filter.c).
 */

#include "config.h"

#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <arpa/inet.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
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

#define REPLY_HIGH	(256 * 1024)	/* stop reading a client above this */
#define REPLY_LOW	(64 * 1024)	/* and read it again below this */
#define LINGER_SECS	5		/* read and drop after an error line */
#define ACK_MARKS_MAX	16384		/* batches a client that acks may owe:
					   more than --connect-window's
					   default records */
#define ACK_PATIENCE	30		/* s, at least, that such a client may
					   owe them without a word */
/* Refused clients held to be told "busy" and linger: a burst's worth. */
#define REFUSED_MAX(max) ((size_t)((max) > 256 ? (max) : 256))
#define DRAIN_SECS	10		/* at exit, for clients to read replies */
#define UNACKED_SECS	2.0		/* for a TCP peer that closes to
					   acknowledge its last replies */
#define STATUS_SECS	1.0		/* systemd STATUS= at most this often */
#define HANDSHAKE_SECS	30.0		/* for a TLS handshake, at most (and at
					   most --idle-timeout) */
#define COMMAND		"#mhfilter "	/* a record starting so is a command */
#define UNKNOWN_COMMAND	"unknown command (use '#mhfilter stats', 'version', " \
			"'pairs', 'groups', 'ack' or, after 'ack', 'taken N')"
#define COMMAND_MAX	256
#define ID_PREFIX	4096		/* an over-long record's id is here */
#define SOCKNAME_MAX	192		/* "unix:" and a path, tcp:, tls: */
#define READ_MAX	(256 * 1024)	/* bytes read from a client at once */

/* What a client connection is doing. */
#define C_READING	0	/* taking records */
#define C_CLOSING	1	/* answering its last records, then closing */
#define C_LINGER	2	/* half-closed after an error: dropping input */

/* A batch's delivery marks, given once every client has its replies. */
struct dmark {
	struct plmarks		*m;
	size_t			 waiting;	/* clients, and the deliverer */
	int			 lost;		/* a reply will never go */
	int			 gone;		/* a part whose client went away
						   (daemon_deliver) */
};
/* A client's part in a dmark: its replies end at byte upto. */
struct cmark {
	struct dmark		*dm;
	uint64_t		 upto;
	TAILQ_ENTRY(cmark)	 entry;
};
TAILQ_HEAD(cmarks, cmark);

struct client {
	struct daemon		*d;
	struct bufferevent	*bev;
	uint64_t		 added;		/* reply bytes queued, ever */
	uint64_t		 taken;		/* of them, taken (client_taken) */
	int			 acking;	/* it says so ("#mhfilter ack") */
	uint64_t		 acked;		/* of them, it said it wrote
						   ("#mhfilter taken N") */
	double			 owing;		/* since then, or since it
						   began to owe (marks) */
	size_t			 nmarks;	/* in marks */
	int			 outq;		/* its socket's SIOCOUTQ says what
						   the peer has yet to take */
	int			 reset;		/* the socket failed: the peer
						   took nothing more */
	struct event		*recheck;	/* client_recheck */
	struct event		*handshake;	/* client_handshake_late */
	struct cmarks		 marks;		/* batches its replies end */
	struct evbuffer_cb_entry *drain;	/* client_drained */
	int			 tls;		/* accepted on a tls: listener */
	int			 tls_up;	/* the handshake is done */
	int			 tls_done;	/* close_notify sent, or broken */
	uint64_t		 conn;		/* connection number, from 1 */
	struct dmark		*part;		/* its part of batch part_seq's
						   marks (daemon_part) */
	uint64_t		 part_seq;
	char			 peer[80];
	uint64_t		 recno;		/* records read, from 1 */
	size_t			 pending;	/* batch slots not answered */
	size_t			 scanned;	/* input known to hold no delim */
	int			 state;		/* C_* */
	int			 eof;		/* it half-closed: no more input */
	int			 ended;		/* client_ended told the filter */
	int			 throttled;	/* not read: replies unread */
	int			 waiting;	/* not read: no batch free */
	int			 discarding;	/* inside an over-long record */
	int			 finish;	/* close it from the reap event */
	double			 unacked;	/* since then, closing, its last
						   replies not acknowledged
						   (client_finish), or 0 */
	int			 admitted;	/* counts for --max-clients */
	int			 gone;		/* closed; pending > 0 */
	char			*last;		/* error line to end with */
	int			 last_sent;	/* queued: half-close, linger */
	int			 want;		/* WANT_*: asked by commands */
	TAILQ_ENTRY(client)	 entry;
};
TAILQ_HEAD(clients, client);

/*
 * What a batch slot (struct plslot, its owner the client) holds: its tag
 * is an S_* and the client's WANT_* when it was read.
 */
#define S_RECORD	0
#define S_STATS		1
#define S_VERSION	2
#define S_PAIRS		3
#define S_GROUPS	4
#define S_UNKNOWN	5	/* a command that is not one */
#define S_TOOLONG	6	/* an over-long record: raw is its reply */
#define S_ACK		7	/* "ack": the client says what it took */
#define SLOT_TAG(type, want)	((type) | (want) << 4)
#define SLOT_TYPE(tag)		((tag) & 0xf)
#define SLOT_WANT(tag)		((tag) >> 4)

/* What a client asked its duplicates' replies to say besides the match. */
#define WANT_PAIRS	0x1	/* every match at -t or above ("pairs") */
#define WANT_GROUPS	0x2	/* the group ("groups") */

struct listener {
	struct evconnlistener	*ev;
	char			*name;
	char			*unlink;	/* socket file made by us */
	int			 tls;		/* a tls: listener */
};

struct daemon {
	const struct daemon_opts *o;
	const struct pipeline_opts *po;
	struct pipeline		*p;
	struct event_base	*base;
	struct output		*out;
	int			 outfd;
	struct listener		*ls;
	size_t			 nls;
	const struct tlsmod	*tm;		/* the TLS module, if loaded */
	struct ssl_ctx_st	*tls;		/* for new TLS connections */
	struct event		*resume;	/* listen again (EMFILE) */
	struct metrics		*metrics;	/* --http, or systemd's */
	struct clients		 clients;
	size_t			 nclients;
	size_t			 nadmitted;	/* not refused as busy */
	uint64_t		 run;		/* first docid of this run */
	uint64_t		 delivered;	/* batches, for daemon_part */
	struct dmark		**parts;	/* this batch's (daemon_part) */
	size_t			 nparts;
	size_t			 partsize;

	int			 stalled;	/* no batch free: clients wait */

	struct event		*batch_ev;
	struct event		*notify_ev;
	struct event		*reap_ev;
	struct event		*drain_ev;
	struct event		*watchdog_ev;
	struct event		*sig_ev[5];

	uint64_t		 received;	/* records */
	uint64_t		 connections;
	uint64_t		 rejected;
	uint64_t		 tls_refused;	/* failed TLS handshakes */
	int			 failing;	/* the last batch failed */
	int			 stopping;
	int			 status;	/* exit status */
	double			 started;
	double			 status_sent;
	struct buf		 line;		/* scratch for reply lines */
};

static int	daemon_listen(struct daemon *, const char *, char **);
static int	daemon_has_listener(struct daemon *, const char *);
static int	daemon_listen_unix(struct daemon *, const char *, char **);
static int	daemon_listen_tcp(struct daemon *, const char *, int,
		    char **);
static int	daemon_resolve(const char *, struct addrinfo **, char **);
static int	daemon_loopback(const struct sockaddr *);
static void	daemon_tls_reload(struct daemon *);
static int	daemon_activated(struct daemon *, char **);
static int	daemon_http(struct daemon *, char **);
static int	daemon_http_bind(struct daemon *, char **);
static int	daemon_add_listener(struct daemon *, int, const char *,
		    const char *, int, char **);
static void	daemon_sockname(int, char *, size_t);
static void	daemon_accept(struct evconnlistener *, evutil_socket_t,
		    struct sockaddr *, int, void *);
static void	daemon_accept_error(struct evconnlistener *, void *);
static void	daemon_deliver(void *, struct plbatch *);
static struct dmark	*daemon_part(struct daemon *, struct client *);
static void	daemon_notified(evutil_socket_t, short, void *);
static void	daemon_batch_timer(evutil_socket_t, short, void *);
static void	daemon_reap(evutil_socket_t, short, void *);
static void	daemon_drain_timer(evutil_socket_t, short, void *);
static void	daemon_watchdog(evutil_socket_t, short, void *);
static void	daemon_signal(evutil_socket_t, short, void *);
static void	daemon_stop(struct daemon *, const char *);
static void	daemon_close_listeners(struct daemon *, int);
static int	daemon_open_output(struct daemon *, char **);
static int	daemon_open_log(struct daemon *, char **);
static void	daemon_stats(void *, struct mstats *);
static const char *daemon_health(void *);
static void	daemon_stats_line(struct daemon *, struct buf *, int);
static void	daemon_status(struct daemon *, int);

static struct client *client_new(struct daemon *, int, const char *, int);
static void	client_close_notify(struct client *);
static void	client_ended(struct client *);
static int	client_polled(struct client *, short);
static uint64_t	client_taken(struct client *);
static void	client_linger_read(struct client *);
static void	client_recheck(evutil_socket_t, short, void *);
static void	client_tls_failed(struct client *);
static void	client_handshake_late(evutil_socket_t, short, void *);
static void	daemon_refuse(struct daemon *, int, int);
static void	client_free(struct client *);
static void	client_read(struct bufferevent *, void *);
static void	client_write(struct bufferevent *, void *);
static void	client_event(struct bufferevent *, short, void *);
static void	client_process(struct client *);
static size_t	client_fill(struct client *, size_t);
static int	client_take(struct client *, size_t, size_t);
static int	client_toolong(struct client *, size_t, size_t, size_t);
static int	daemon_ready(struct daemon *);
static void	daemon_opened(void *);
static void	daemon_record_id(void *, struct record *);
static void	daemon_where(void *, const struct record *, char *, size_t);
static void	client_command(struct client *, const char *, size_t);
static void	client_fail(struct client *, const char *, const char *,
		    const char *, ...) __attribute__((format(printf, 4, 5)));
static void	client_settle(struct client *);
static void	client_finish(struct client *);
static void	client_reply(struct client *, const struct buf *);
static void	client_marks(struct client *, int);
static void	client_unmark(struct client *, struct cmark *, int);
static void	client_acked(struct client *, uint64_t);
static int	client_patient(const struct client *);
static double	ack_patience(const struct daemon *);
static void	client_stuck(const struct client *);
static void	client_drained(struct evbuffer *,
		    const struct evbuffer_cb_info *, void *);
static void	client_id(struct client *, struct buf *);
static void	reply_verdict(struct buf *, const struct record *,
		    const struct verdict *, int);
static void	reply_error(struct buf *, const char *, size_t, const char *,
		    const char *);
static void	reply_command(struct daemon *, struct buf *, int);

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
    const char *unlinkpath, int tls, char **cause)
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
	l->tls = tls;
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
	return (daemon_add_listener(d, fd, name, path, 0, cause));

fail:
	xasprintf(cause, "--listen unix:%s: %s", path, strerror(errno));
	return (-1);
}

/*
 * Resolve the HOST:PORT of a tcp: or tls: listener (spec is "tcp:..." or
 * "tls:..."; an empty HOST or "*" is every address, [V6] an IPv6 one).
 * Returns 0 with the addresses in *res, or -1 with a cause.
 */
static int
daemon_resolve(const char *spec, struct addrinfo **res, char **cause)
{
	struct addrinfo	 hints;
	char		*host, *port;
	int		 rc;

	host = xstrdup(spec + 4);
	if ((port = strrchr(host, ':')) == NULL || port[1] == '\0') {
		xasprintf(cause, "--listen %s: use %.3s:HOST:PORT", spec, spec);
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
	    host, port, &hints, res);
	free(host);
	if (rc != 0) {
		xasprintf(cause, "--listen %s: %s", spec, gai_strerror(rc));
		return (-1);
	}
	return (0);
}

/* Whether an address is a loopback one: 127.0.0.0/8 or ::1. */
static int
daemon_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in	*sin;
	const struct sockaddr_in6	*sin6;
	const uint8_t			*b;

	if (sa->sa_family == AF_INET) {
		sin = (const struct sockaddr_in *)sa;
		return ((ntohl(sin->sin_addr.s_addr) >> 24) == 127);
	}
	if (sa->sa_family != AF_INET6)
		return (0);
	sin6 = (const struct sockaddr_in6 *)sa;
	if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
		return (1);
	b = sin6->sin6_addr.s6_addr;
	return (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && b[12] == 127);
}

/*
 * Check the --listen addresses before anything starts: a plaintext tcp:
 * listener on an address other than loopback needs --trusted-network
 * (records and replies would cross the network in clear, and anyone there
 * could query the index); a tls: one needs --tls-cert and --tls-key, and
 * those need a tls: listener or sockets from systemd (one named tls).
 * Returns 0, or -1 with a cause.
 */
int
daemon_check_listen(const struct daemon_opts *o, char **cause)
{
	struct addrinfo	*res, *ai;
	size_t		 i, ntls = 0;
	int		 open;

	for (i = 0; i < o->nlisten; i++) {
		if (strncmp(o->listen[i], "tls:", 4) == 0)
			ntls++;
		if (strncmp(o->listen[i], "unix:", 5) == 0) {
			if (o->listen[i][5] == '\0' || strlen(o->listen[i]) -
			    5 >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
				xasprintf(cause, "--listen %s: the path must "
				    "have 1 to %zu bytes", o->listen[i],
				    sizeof(((struct sockaddr_un *)0)->sun_path) -
				    1);
				return (-1);
			}
			continue;
		}
		if (strncmp(o->listen[i], "tcp:", 4) != 0 &&
		    strncmp(o->listen[i], "tls:", 4) != 0) {
			xasprintf(cause, "--listen %s: use unix:PATH, "
			    "tcp:HOST:PORT or tls:HOST:PORT", o->listen[i]);
			return (-1);
		}
		/* An address that does not resolve is a usage error too. */
		if (daemon_resolve(o->listen[i], &res, cause) != 0)
			return (-1);
		if (strncmp(o->listen[i], "tls:", 4) == 0 ||
		    o->trusted_network) {
			freeaddrinfo(res);
			continue;
		}
		for (open = 0, ai = res; ai != NULL; ai = ai->ai_next)
			open |= !daemon_loopback(ai->ai_addr);
		freeaddrinfo(res);
		if (open) {
			xasprintf(cause, "--listen %s: refused: plaintext TCP "
			    "beyond loopback lets anyone on the network read "
			    "the records and query the index; use "
			    "tls:HOST:PORT with --tls-cert and --tls-key (and "
			    "--tls-client-ca), or say --trusted-network",
			    o->listen[i]);
			return (-1);
		}
	}
	if (ntls > 0 && (o->tls.cert == NULL || o->tls.key == NULL)) {
		xasprintf(cause, "--listen tls:...: needs --tls-cert and "
		    "--tls-key");
		return (-1);
	}
	/* (Sockets from systemd named tls are checked when taken.) */
	if (ntls == 0 && notify_listen_count() <= 0 && (o->tls.cert != NULL ||
	    o->tls.key != NULL || o->tls.client_ca != NULL)) {
		xasprintf(cause, "--tls-cert, --tls-key and --tls-client-ca "
		    "go with --listen tls:HOST:PORT");
		return (-1);
	}
	if ((o->tls.cert == NULL) != (o->tls.key == NULL)) {
		xasprintf(cause, "--tls-cert and --tls-key go together");
		return (-1);
	}
	return (daemon_check_http(o->http, o->trusted_network, cause));
}

/*
 * Check --http HOST:PORT (none: 0).  The metrics have no authentication:
 * beyond loopback, without --trusted-network, that is said (it is not
 * refused: they hold counters, not records).  0, or -1 and a cause.
 */
int
daemon_check_http(const char *spec, int trusted, char **cause)
{
	struct addrinfo	 hints, *res, *ai;
	char		*host, port[8];
	uint64_t	 p;
	int		 open = 0, rc;

	if (spec == NULL)
		return (0);
	if (metrics_parse(spec, &host, &p, cause) != 0)
		return (-1);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(port, sizeof port, "%u", (unsigned)p);
	rc = getaddrinfo(*host == '\0' ? "127.0.0.1" : host, port, &hints,
	    &res);
	free(host);
	if (rc != 0) {
		xasprintf(cause, "--http %s: %s", spec, gai_strerror(rc));
		return (-1);
	}
	for (ai = res; ai != NULL; ai = ai->ai_next)
		open |= !daemon_loopback(ai->ai_addr);
	freeaddrinfo(res);
	if (open && !trusted)
		log_warnx("--http %s: /metrics and /healthz have no "
		    "authentication: anyone on the network may read them "
		    "(bind 127.0.0.1, or say --trusted-network)", spec);
	return (0);
}

/*
 * Listen on every address the HOST:PORT of a tcp: or tls: spec resolves
 * to (port 0: any); tls says which.
 */
static int
daemon_listen_tcp(struct daemon *d, const char *spec, int tls, char **cause)
{
	struct addrinfo	*res, *ai;
	char		 name[SOCKNAME_MAX];
	int		 fd, on = 1, bound = 0, errsv = 0;

	if (daemon_resolve(spec, &res, cause) != 0)
		return (-1);
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
		if (tls)
			memcpy(name, "tls", 3);		/* was "tcp" */
		if (daemon_add_listener(d, fd, name, NULL, tls, cause) != 0) {
			freeaddrinfo(res);
			return (-1);
		}
		bound++;
	}
	freeaddrinfo(res);
	if (bound == 0) {
		xasprintf(cause, "--listen %s: %s", spec,
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
		return (daemon_listen_tcp(d, spec, 0, cause));
	if (strncmp(spec, "tls:", 4) == 0)
		return (daemon_listen_tcp(d, spec, 1, cause));
	xasprintf(cause, "--listen %s: use unix:PATH, tcp:HOST:PORT or "
	    "tls:HOST:PORT", spec);
	return (-1);
}

/*
 * Take the sockets systemd passed (socket activation).  One named "http"
 * (FileDescriptorName=http) serves /metrics, those named "tls" the
 * protocol in TLS (with --tls-cert), the others the protocol.
 */
static int
daemon_activated(struct daemon *d, char **cause)
{
	struct notify_fd	*fds;
	char			 name[SOCKNAME_MAX];
	size_t			 n, i;
	int			 on, tls, rv = 0;
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
			if (daemon_http(d, cause) != 0) {
				rv = -1;
				continue;
			}
			if (metrics_accept(d->metrics, fds[i].fd) != 0) {
				xasprintf(cause, "%s: cannot serve HTTP", name);
				rv = -1;
				continue;
			}
			log_info("serving HTTP on %s (from systemd)", name);
			continue;
		}
		tls = strcmp(fds[i].name, "tls") == 0;
		if (tls && d->tls == NULL) {
			xasprintf(cause, "%s: a socket named tls (from systemd) "
			    "needs --tls-cert and --tls-key", name);
			close(fds[i].fd);
			rv = -1;
			continue;
		}
		if (tls && strncmp(name, "tcp:", 4) == 0)
			memcpy(name, "tls", 3);		/* was "tcp" */
		if (strlen(name) + 16 <= sizeof name)
			strcat(name, " (from systemd)");
		if (daemon_add_listener(d, fds[i].fd, name, NULL, tls,
		    cause) != 0)
			rv = -1;
	}
	for (i = 0; i < n; i++)
		free(fds[i].name);
	free(fds);
	return (rv);
}

/*
 * Is there a listener on the address spec names: 1 from systemd (its name
 * is the socket's own address, then " (from systemd)"), 2 one of an
 * earlier --listen, 0 none.
 */
static int
daemon_has_listener(struct daemon *d, const char *spec)
{
	size_t	 i, n = strlen(spec);

	for (i = 0; i < d->nls; i++) {
		if (strncmp(d->ls[i].name, spec, n) == 0 &&
		    (d->ls[i].name[n] == '\0' || d->ls[i].name[n] == ' '))
			return (d->ls[i].name[n] == ' ' ? 1 : 2);
	}
	return (0);
}

/* Make the HTTP server of /metrics and /healthz (metrics.c), once. */
static int
daemon_http(struct daemon *d, char **cause)
{
	struct metrics_src	 src = { daemon_stats, daemon_health, d };

	if (d->metrics == NULL &&
	    (d->metrics = metrics_new(d->base, &src, cause)) == NULL)
		return (-1);
	return (0);
}

/* Serve HTTP on --http HOST:PORT. */
static int
daemon_http_bind(struct daemon *d, char **cause)
{
	char	 name[SOCKNAME_MAX];

	if (daemon_http(d, cause) != 0 || metrics_bind(d->metrics, d->o->http,
	    name, sizeof name, cause) != 0)
		return (-1);
	log_info("serving HTTP on %s", name);
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
	size_t		 i;
	int		 tls = 0;

	for (i = 0; i < d->nls; i++) {
		if (d->ls[i].ev == l)
			tls = d->ls[i].tls;
	}
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

	if (d->nclients - d->nadmitted >= REFUSED_MAX(d->o->max_clients)) {
		/* Too many refused ones still lingering: say so briefly. */
		daemon_refuse(d, fd, tls);
		return;
	}
	c = client_new(d, fd, peer, tls);
	if (d->nadmitted >= d->o->max_clients) {
		d->rejected++;
		if (now_seconds() - warned >= 10) {
			warned = now_seconds();
			log_warnx("connection %" PRIu64 " from %s refused: "
			    "already %" PRIu64 " clients (--max-clients)",
			    c->conn, peer, d->o->max_clients);
		}
		client_fail(c, NULL, "busy", "too many clients (--max-clients "
		    "%" PRIu64 ")", d->o->max_clients);
		return;
	}
	c->admitted = 1;
	d->nadmitted++;
	log_debug("connection %" PRIu64 " from %s", c->conn, c->peer);
}

/*
 * Refuse a connection when even the refused ones are too many to hold:
 * the busy line written at once (a new socket's buffer takes it), the
 * write side shut, and what the client sent so far read, so that closing
 * does not reset the connection (a reset can destroy the line unread).
 * A TLS client could not read a plaintext line: it is only closed.
 */
static void
daemon_refuse(struct daemon *d, int fd, int tls)
{
	struct buf	 b = { 0 };
	char		 msg[80], drop[4096];
	int		 i;

	d->rejected++;
	if (tls) {
		close(fd);
		return;
	}
	snprintf(msg, sizeof msg, "too many clients (--max-clients %" PRIu64
	    ")", d->o->max_clients);
	reply_error(&b, NULL, 0, "busy", msg);
	(void)send(fd, b.data, b.len, MSG_DONTWAIT|MSG_NOSIGNAL);
	buf_free(&b);
	shutdown(fd, SHUT_WR);
	for (i = 0; i < 16 && recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0;
	    i++)
		;
	close(fd);
}

/* The time a TLS client has for its handshake: --idle-timeout, at most. */
static double
handshake_secs(const struct daemon *d)
{
	double	 secs = d->o->idle_timeout;

	return (secs > 0 && secs < HANDSHAKE_SECS ? secs : HANDSHAKE_SECS);
}

/*
 * Make a client for an accepted connection.  On a tls: listener its
 * bufferevent is an OpenSSL one, with the current context: the rest of
 * the client's code is the same for every transport.
 */
static struct client *
client_new(struct daemon *d, int fd, const char *peer, int tls)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sslen;
	struct client		*c;
	struct timeval		 tv;
	double			 secs;

	c = xcalloc(1, sizeof *c);
	c->d = d;
	c->conn = ++d->connections;
	memset(&ss, 0, sizeof ss);
	sslen = sizeof ss;
	c->outq = getsockname(fd, (struct sockaddr *)&ss, &sslen) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6 ||
	    ss.ss_family == AF_UNIX);
	TAILQ_INIT(&c->marks);
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	evutil_make_socket_nonblocking(fd);
	if ((c->tls = tls))
		c->bev = d->tm->accept(d->tls, d->base, fd);
	else
		c->bev = bufferevent_socket_new(d->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		fatalx("bufferevent_socket_new failed");
	bufferevent_setcb(c->bev, client_read, client_write, client_event, c);
	c->drain = evbuffer_add_cb(bufferevent_get_output(c->bev),
	    client_drained, c);
	if ((c->recheck = evtimer_new(d->base, client_recheck, c)) == NULL)
		fatalx("evtimer_new failed");
	/* At most one record (and its delimiter) waits unread. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, d->po->max_bytes + 1);
	bufferevent_set_max_single_read(c->bev, READ_MAX);
	bufferevent_setwatermark(c->bev, EV_WRITE, REPLY_LOW, 0);
	if (d->o->idle_timeout > 0) {
		tv.tv_sec = (time_t)d->o->idle_timeout;
		tv.tv_usec = (suseconds_t)((d->o->idle_timeout - tv.tv_sec) *
		    1e6);
		bufferevent_set_timeouts(c->bev, &tv, &tv);
	}
	/*
	 * A handshake has a bound of its own: the bufferevent's timeouts
	 * wait for records, and do not fire while it goes on, so clients
	 * that connect and never finish one held --max-clients' places.
	 */
	if (c->tls) {
		if ((c->handshake = evtimer_new(d->base, client_handshake_late,
		    c)) == NULL)
			fatalx("evtimer_new failed");
		secs = handshake_secs(d);
		tv.tv_sec = (time_t)secs;
		tv.tv_usec = (suseconds_t)((secs - tv.tv_sec) * 1e6);
		evtimer_add(c->handshake, &tv);
	}
	bufferevent_enable(c->bev, EV_READ|EV_WRITE);
	TAILQ_INSERT_TAIL(&d->clients, c, entry);
	d->nclients++;
	return (c);
}

/*
 * Close a connection and forget the client; with records in flight it is
 * kept, detached, until daemon_deliver has them.
 */
static void
client_free(struct client *c)
{
	struct daemon	*d = c->d;

	log_debug("connection %" PRIu64 " closed after %" PRIu64 " records",
	    c->conn, c->recno);
	TAILQ_REMOVE(&d->clients, c, entry);
	d->nclients--;
	if (c->admitted)
		d->nadmitted--;
	client_ended(c);
	/*
	 * What it took is delivered; what it did not never will be.  Seen
	 * before a TLS close_notify is sent: its bytes would be in the
	 * socket's send queue, which over TCP says the replies are not yet
	 * taken.
	 */
	client_marks(c, 0);
	client_close_notify(c);
	evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->drain);
	client_marks(c, 1);
	event_free(c->recheck);
	c->recheck = NULL;
	if (c->handshake != NULL) {
		event_free(c->handshake);
		c->handshake = NULL;
	}
	bufferevent_free(c->bev);	/* and its TLS state */
	c->bev = NULL;
	free(c->last);
	c->last = NULL;
	if (c->pending > 0)
		c->gone = 1;
	else
		free(c);
	if (d->stopping && d->nclients == 0)
		event_base_loopexit(d->base, NULL);
}

/*
 * The client ended, or closed its side, with records or replies it has
 * not taken: the filter is told once (pipeline_owner_ended), so that a
 * record it sent, sent again by another client before its batch's marks
 * are known, is a replay there rather than seen.
 */
static void
client_ended(struct client *c)
{
	if (c->ended || (c->pending == 0 && TAILQ_EMPTY(&c->marks)))
		return;
	c->ended = 1;
	pipeline_owner_ended(c->d->p, c->conn);
}

/* Does the client's socket say one of what (POLLHUP, POLLERR) now? */
static int
client_polled(struct client *c, short what)
{
	struct pollfd	 pfd;

	memset(&pfd, 0, sizeof pfd);
	pfd.fd = bufferevent_getfd(c->bev);
	pfd.events = POLLOUT;
	return (poll(&pfd, 1, 0) == 1 && (pfd.revents & what));
}

/* The id of this client's current record: RUN:CONN:RECNO. */
static void
client_id(struct client *c, struct buf *b)
{
	record_connid(b, c->d->run, c->conn, c->recno);
}

/* Queue a reply line. */
static void
client_reply(struct client *c, const struct buf *b)
{
	evbuffer_add(bufferevent_get_output(c->bev), b->data, b->len);
	c->added += b->len;
}

/*
 * A reply of the batch will never go: the filter is told at once, the
 * index once the batch's other clients are done (dmark_done).
 */
static void
dmark_lose(struct daemon *d, struct dmark *dm)
{
	if (dm->lost)
		return;
	dm->lost = 1;
	pipeline_marks_losing(d->p, dm->m);
}

/*
 * One of a batch's clients has its replies written (lost: never will):
 * the last one gives the batch's marks to the pipeline, or, when a reply
 * was lost, gives them as lost, so that its records stay undelivered and
 * are replays to whoever meets them next, this daemon or another process.
 */
static void
dmark_done(struct daemon *d, struct dmark *dm, int lost)
{
	if (lost)
		dmark_lose(d, dm);
	if (--dm->waiting > 0)
		return;
	if (dm->m->ranges.n == 0 && dm->m->replays.n == 0)
		pipeline_marks_free(dm->m);	/* a part with nothing */
	else if (dm->lost)
		pipeline_marks_lose(d->p, dm->m);
	else
		pipeline_marks_give(d->p, dm->m);
	free(dm);
}

/*
 * Has the peer taken every byte written to c's socket?  Its send queue
 * says (SIOCOUTQ): over TCP what the peer's host has not acknowledged,
 * over a unix socket what the peer has not read.  A queue emptied by a
 * failure says nothing: a TCP peer killed answers with a reset, and a
 * unix peer that closes with replies unread leaves the socket in error
 * (ECONNRESET), the kernel having thrown them away; once a read took that
 * error, c->reset keeps it.  The queue is asked first, the error after:
 * a closing unix peer sets the error before it empties the queue.
 */
static int
client_sock_empty(struct client *c)
{
	int	 queued;

	if (!c->outq || c->reset)
		return (0);
	return (ioctl(bufferevent_getfd(c->bev), SIOCOUTQ, &queued) == 0 &&
	    queued == 0 && !client_polled(c, POLLERR));
}

/*
 * The reply bytes the client has taken: out of the output buffer, and out
 * of the socket as well (client_sock_empty).  A socket that took bytes is
 * not a client that took them: a client killed while its replies were on
 * their way, or waited unread in its socket, had its records counted
 * delivered, and sent again, seen, never written.  A client that acks
 * ("#mhfilter ack", as --connect does) says itself what it took, once its
 * records are written: nothing else counts.
 */
static uint64_t
client_taken(struct client *c)
{
	uint64_t	 drained;

	if (c->acking) {
		if (c->acked > c->taken)
			c->taken = c->acked < c->added ? c->acked : c->added;
		return (c->taken);
	}
	if (c->bev == NULL)
		return (c->taken);
	drained = c->added -
	    evbuffer_get_length(bufferevent_get_output(c->bev));
	if (drained > c->taken && client_sock_empty(c))
		c->taken = drained;
	return (c->taken);
}

/* How long a client's marks wait before the socket is asked again. */
#define TAKEN_RECHECK_MS	10

/*
 * The batches whose replies c has taken (client_taken); with lost, all the
 * others as lost (it is closing).  Replies that left the output buffer and
 * not yet the socket are looked at again shortly (the output buffer's
 * draining calls again for the rest).
 */
static void
client_marks(struct client *c, int lost)
{
	struct cmark	*cm;
	struct timeval	 tv;
	uint64_t	 taken;

	taken = client_taken(c);
	while ((cm = TAILQ_FIRST(&c->marks)) != NULL) {
		if (cm->upto > taken && !lost)
			break;
		client_unmark(c, cm, cm->upto > taken);
	}
	if (!lost && c->outq && !c->acking && c->bev != NULL &&
	    c->recheck != NULL &&
	    !TAILQ_EMPTY(&c->marks) && !evtimer_pending(c->recheck, NULL) &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		tv.tv_sec = 0;
		tv.tv_usec = TAKEN_RECHECK_MS * 1000;
		evtimer_add(c->recheck, &tv);
	}
}

/* The socket's send queue may have emptied: see what is delivered. */
static void
client_recheck(evutil_socket_t fd, short what, void *arg)
{
	struct client	*c = arg;

	(void)fd;
	(void)what;
	if (c->unacked != 0)
		client_finish(c);	/* waiting to close (may free c) */
	else
		client_marks(c, 0);
}

/*
 * Is c, closing, a client whose replies (some of them) wait in its
 * socket's send queue, not yet taken by a peer that is still there?  Over
 * TLS its peer's close_notify ends its input, and the last replies were
 * often still on their way; a unix client that shut its side reads them
 * after: counted not taken at once, they were lost, and each item of a
 * feed sent again was a replay.
 */
static int
client_unacked(struct client *c)
{
	int	 queued;

	if (!c->outq || c->acking)
		return (0);
	client_marks(c, 0);
	return (!TAILQ_EMPTY(&c->marks) &&
	    ioctl(bufferevent_getfd(c->bev), SIOCOUTQ, &queued) == 0 &&
	    queued > 0 && !client_polled(c, POLLERR|POLLHUP));
}

/* Bytes of replies left the output buffer: see what is delivered. */
static void
client_drained(struct evbuffer *out, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)out;
	if (info->n_deleted > 0)
		client_marks(arg, 0);
}

/* A reply of batch dm is queued for c: its part ends here now. */
static void
client_mark(struct client *c, struct dmark *dm)
{
	struct cmark	*cm = TAILQ_LAST(&c->marks, cmarks);

	if (cm == NULL || cm->dm != dm) {
		if (cm == NULL)
			c->owing = now_seconds();
		cm = xcalloc(1, sizeof *cm);
		cm->dm = dm;
		dm->waiting++;
		TAILQ_INSERT_TAIL(&c->marks, cm, entry);
		c->nmarks++;
	}
	cm->upto = c->added;
	/*
	 * One that acks and does not (a client gone wrong) would hold every
	 * batch's marks: past ACK_MARKS_MAX the oldest are lost, their
	 * records replays when they come again.
	 */
	if (c->acking && c->nmarks > ACK_MARKS_MAX)
		client_unmark(c, TAILQ_FIRST(&c->marks), 1);
}

/* Its part in a batch's marks ends: taken, or lost. */
static void
client_unmark(struct client *c, struct cmark *cm, int lost)
{
	TAILQ_REMOVE(&c->marks, cm, entry);
	c->nmarks--;
	dmark_done(c->d, cm->dm, lost);
	free(cm);
}

/* It said it took n bytes of replies ("#mhfilter taken N"). */
static void
client_acked(struct client *c, uint64_t n)
{
	if (n > c->acked) {
		c->acked = n;
		c->owing = now_seconds();
	}
	client_marks(c, 0);
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

	c->finish = 0;
	/* One that acks may yet say which replies it wrote. */
	if ((!c->last_sent && !(c->acking && !TAILQ_EMPTY(&c->marks))) ||
	    c->eof) {
		/* Over TCP, for the peer to acknowledge them, a while. */
		if (client_unacked(c) && (c->unacked == 0 ||
		    now_seconds() - c->unacked < UNACKED_SECS)) {
			if (c->unacked == 0)
				c->unacked = now_seconds();
			tv.tv_sec = 0;
			tv.tv_usec = TAKEN_RECHECK_MS * 1000;
			evtimer_add(c->recheck, &tv);
			return;
		}
		client_free(c);
		return;
	}
	/*
	 * One that acks may be slow to say what it took: as patient as
	 * with one connected (client_patient), but for the daemon's stop.
	 */
	if (c->acking && !TAILQ_EMPTY(&c->marks)) {
		tv.tv_sec = (time_t)ack_patience(c->d);
		tv.tv_usec = 0;
	}
	c->state = C_LINGER;
	client_close_notify(c);
	shutdown(bufferevent_getfd(c->bev), SHUT_WR);
	client_linger_read(c);
	bufferevent_set_timeouts(c->bev, &tv, NULL);
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	bufferevent_enable(c->bev, EV_READ);
}

/*
 * End a TLS connection properly (close_notify) when its handshake is done,
 * it did not fail and everything queued was written: the client then
 * knows the replies were not cut short.  Nothing for plaintext.
 */
static void
client_close_notify(struct client *c)
{
	if (!c->tls || !c->tls_up || c->tls_done ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) != 0)
		return;
	c->tls_done = 1;
	c->d->tm->close_notify(c->bev);
}

/*
 * A TLS client refused before its handshake was done: counted, and said
 * at most every 10 s (else with -v only), so that a flood says little.
 */
static void
client_tls_refused(struct client *c, const char *what)
{
	static double	 warned;

	c->d->tls_refused++;
	if (now_seconds() - warned >= 10) {
		warned = now_seconds();
		log_warnx("connection %" PRIu64 " from %s: %s", c->conn,
		    c->peer, what);
	} else
		log_debug("connection %" PRIu64 " from %s: %s", c->conn,
		    c->peer, what);
}

/*
 * A TLS connection failed: in the handshake (a plaintext client, no
 * certificate or one not signed by --tls-client-ca, expired, an old
 * protocol) or later.  Logged (a handshake failure at most every 10 s,
 * since anyone who can connect can cause one) and closed.
 */
static void
client_tls_failed(struct client *c)
{
	char		 why[256], what[300];

	c->d->tm->failure(c->bev,
	    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()), why,
	    sizeof why);
	c->tls_done = 1;
	if (c->tls_up)
		log_debug("connection %" PRIu64 ": TLS: %s", c->conn, why);
	else {
		snprintf(what, sizeof what, "TLS handshake failed: %s", why);
		client_tls_refused(c, what);
	}
	client_free(c);
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

	if (c->state == C_LINGER) {
		client_linger_read(c);
		return;
	}
	client_process(c);
}

/*
 * Input while lingering is dropped, but for what a client that acks says
 * it took ("#mhfilter taken N"): the records it wrote before the error
 * line are delivered.
 */
static void
client_linger_read(struct client *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->bev);
	struct evbuffer_ptr	 p;
	char			 delim = (char)c->d->po->delim;
	char			 cmd[COMMAND_MAX];
	size_t			 len;
	uint64_t		 n;

	while (c->acking) {
		p = evbuffer_search(in, &delim, 1, NULL);
		len = evbuffer_get_length(in);
		if (p.pos == -1) {
			/* What cannot be a command is dropped to its end. */
			if (len >= sizeof cmd) {
				evbuffer_drain(in, len);
				c->discarding = 1;
			}
			return;
		}
		if (!c->discarding && (size_t)p.pos < sizeof cmd) {
			evbuffer_copyout(in, cmd, p.pos);
			if ((size_t)p.pos >= sizeof COMMAND - 1 &&
			    memcmp(cmd, COMMAND, sizeof COMMAND - 1) == 0 &&
			    daemon_taken(cmd + sizeof COMMAND - 1, p.pos -
			    (sizeof COMMAND - 1), &n))
				client_acked(c, n);
		}
		c->discarding = 0;
		evbuffer_drain(in, p.pos + 1);
	}
	evbuffer_drain(in, evbuffer_get_length(in));
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

/*
 * Is c a client that acks, owes "taken" for replies it was sent, and has
 * said nothing of them for less than --idle-timeout, or ACK_PATIENCE if
 * that is longer?  Its output may be slow (a pipe's reader, a disk's
 * sync): a timeout spares it.  Past that it is stuck, and would hold its
 * connection, and a --max-clients place, until the daemon stops.
 */
static int
client_patient(const struct client *c)
{
	if (!c->acking || TAILQ_EMPTY(&c->marks))
		return (0);
	/*
	 * The timeout that asks was armed by the read that set owing: a
	 * moment's slack, or it would be spared once more, a whole
	 * --idle-timeout longer.
	 */
	return (now_seconds() - c->owing < ack_patience(c->d) - 0.5);
}

/* How long a client that acks may owe "taken" without a word. */
static double
ack_patience(const struct daemon *d)
{
	return (d->o->idle_timeout > ACK_PATIENCE ? d->o->idle_timeout :
	    ACK_PATIENCE);
}

/* Say that a client that owed "taken" is closed as stuck (above). */
static void
client_stuck(const struct client *c)
{
	if (!c->acking || TAILQ_EMPTY(&c->marks))
		return;
	log_warnx("connection %" PRIu64 " from %s: no word of its replies "
	    "for %.0f s: closed, their records replays when they come again",
	    c->conn, c->peer, now_seconds() - c->owing);
}

/* A TLS client that has not finished its handshake in time: closed. */
static void
client_handshake_late(evutil_socket_t fd, short what, void *arg)
{
	struct client	*c = arg;
	char		 why[64];

	(void)fd;
	(void)what;
	if (c->tls_up)
		return;
	snprintf(why, sizeof why, "no TLS handshake in %g s: closed",
	    handshake_secs(c->d));
	client_tls_refused(c, why);
	client_free(c);
}

/* End of input, an error, or a timeout on a connection. */
static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct client	*c = arg;
	struct evbuffer	*out = bufferevent_get_output(bev);
	char		 desc[320];

	if (what & BEV_EVENT_CONNECTED) {
		/* A TLS handshake is done. */
		c->tls_up = 1;
		evtimer_del(c->handshake);
		c->d->tm->describe(c->bev, desc, sizeof desc);
		log_debug("connection %" PRIu64 ": %s", c->conn, desc);
		return;
	}
	if ((what & BEV_EVENT_ERROR) && c->tls) {
		client_tls_failed(c);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		log_debug("connection %" PRIu64 ": %s", c->conn,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		c->reset = 1;	/* (client_sock_empty) */
		client_free(c);
		return;
	}
	if (c->state == C_LINGER) {
		/* EOF, or it lingered long enough. */
		if (what & BEV_EVENT_TIMEOUT)
			client_stuck(c);
		client_free(c);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/*
		 * Answer what it sent, then close.  At the end of a TLS
		 * stream libevent stops writing too: the replies still go.
		 */
		if (c->tls)
			bufferevent_enable(bev, EV_WRITE);
		c->eof = 1;
		/*
		 * A client killed ends its input as one that only shuts
		 * its side (and reads on) does; a unix socket's hang up
		 * tells them apart at once, TCP only a reply that fails
		 * (client_free).
		 */
		if (client_polled(c, POLLHUP|POLLERR))
			client_ended(c);
		client_process(c);
		client_settle(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING)) {
		/* One that acks may be slow to take them: see below. */
		if (client_patient(c)) {
			bufferevent_enable(bev, EV_WRITE);
			return;
		}
		/* (One that acks and owes them is said so, once.) */
		if (!c->acking || TAILQ_EMPTY(&c->marks))
			log_debug("connection %" PRIu64 ": replies not read "
			    "for %.0f s; closed", c->conn,
			    c->d->o->idle_timeout);
		client_stuck(c);
		client_free(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING)) {
		/*
		 * Waiting for its answers is not being idle, nor is a
		 * client that acks and has yet to say it took its replies
		 * (its output may be slow): it would lose their marks.
		 */
		if (c->state != C_READING || c->pending != 0 ||
		    evbuffer_get_length(out) != 0 || client_patient(c)) {
			if (c->state == C_READING && !c->throttled)
				bufferevent_enable(bev, EV_READ);
			return;
		}
		client_stuck(c);
		client_fail(c, NULL, "idle", "nothing received for %g s "
		    "(--idle-timeout)", c->d->o->idle_timeout);
	}
}

/*
 * A TLS client's input, len bytes, needs more: take what OpenSSL already
 * holds decrypted (tls.c: tls_read_pending), up to the read high-water
 * mark, since libevent would wait for the socket; returns how much.
 */
static size_t
client_fill(struct client *c, size_t len)
{
	uint64_t	 high = c->d->po->max_bytes + 1;

	if (!c->tls || !c->tls_up || c->tls_done || len >= high)
		return (0);
	return (c->d->tm->read_pending(c->bev, high - len));
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
	char			 delim = d->po->delim;
	size_t			 len, reclen, dlen;

	while (c->state == C_READING && !c->throttled && !d->stopping) {
		if ((len = evbuffer_get_length(in)) == 0) {
			if (client_fill(c, len) > 0)
				continue;
			break;
		}
		if (c->discarding) {
			/* The rest of an over-long record, up to its end. */
			p = evbuffer_search(in, &delim, 1, NULL);
			evbuffer_drain(in, p.pos == -1 ? len : (size_t)p.pos + 1);
			c->discarding = p.pos == -1;
			continue;
		}
		if (c->scanned > len)
			c->scanned = 0;
		evbuffer_ptr_set(in, &p, c->scanned, EVBUFFER_PTR_SET);
		p = evbuffer_search(in, &delim, 1, &p);
		if (p.pos == -1) {
			c->scanned = len;
			if (len <= d->po->max_bytes && !c->eof) {
				if (client_fill(c, len) > 0)
					continue;
				break;	/* wait for the rest */
			}
			reclen = len;
			dlen = 0;
		} else {
			reclen = p.pos;
			dlen = 1;
		}
		c->scanned = 0;
		if (reclen > d->po->max_bytes) {
			if (!client_toolong(c, len, reclen, dlen)) {
				c->waiting = 1;	/* as below */
				bufferevent_disable(c->bev, EV_READ);
				break;
			}
			client_settle(c);
			continue;
		}
		if (!client_take(c, reclen, dlen)) {
			/*
			 * Every batch is in flight: stop reading it (its
			 * records wait in the kernel, not in our memory)
			 * until one is delivered (daemon_notified).
			 */
			c->waiting = 1;
			bufferevent_disable(c->bev, EV_READ);
			break;
		}
		client_settle(c);
	}
	if (c->state == C_READING && c->eof)
		client_settle(c);
}

/*
 * The record at the start of the client's input, len bytes of it there,
 * is over --max-bytes: reclen bytes and a delimiter of dlen, or, without
 * one (dlen 0) and before the end of the input, more than reclen.  It is
 * counted and answered "error ID too-long" in its place among the
 * client's replies.  Under --on-bad-input=fail the client is then
 * disconnected; otherwise the connection goes on after the record, whose
 * bytes are dropped as they arrive (c->discarding) up to its delimiter,
 * never held whole.  pass is skip here, as in a stream (pipeline_screen):
 * passing it would need it whole.  Returns 0, the input untouched, when
 * the reply must wait behind the client's pending records and no batch is
 * free to hold its place.
 */
static int
client_toolong(struct client *c, size_t len, size_t reclen, size_t dlen)
{
	struct daemon	*d = c->d;
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	struct record	*r;
	struct buf	 b = { 0 };
	char		 msg[128];
	size_t		 idlen = len < ID_PREFIX ? len : ID_PREFIX;
	int		 more = dlen == 0 && !c->eof;

	if (d->po->policy != POLICY_FAIL && c->pending > 0 && !daemon_ready(d))
		return (0);
	c->recno++;
	d->received++;
	pipeline_count_alone(d->p, V_TOOLONG, 0);
	/* Its own id if its first bytes say it, else a number. */
	d->line.len = 0;
	if (record_prefix_id((const char *)evbuffer_pullup(in, idlen), idlen,
	    d->po->format, d->po->id_field, &d->line) != 0)
		client_id(c, &d->line);
	/* Cut short, it is known to be longer than the bound, no more. */
	snprintf(msg, sizeof msg, "record of %s%" PRIu64 " bytes is over "
	    "--max-bytes %" PRIu64, more ? "more than " : "", more ?
	    d->po->max_bytes : (uint64_t)reclen, d->po->max_bytes);
	if (d->po->policy == POLICY_FAIL) {
		buf_append(&d->line, "", 1);
		evbuffer_drain(in, len);
		client_fail(c, d->line.data, "too-long", "%s", msg);
		return (1);
	}
	log_debug("connection %" PRIu64 ": too-long: %s", c->conn, msg);
	evbuffer_drain(in, more ? len : reclen + dlen);
	c->discarding = more;
	reply_error(&b, d->line.data, d->line.len, "too-long", msg);
	if (c->pending == 0)
		client_reply(c, &b);
	else {
		/* After its earlier records' replies, in a batch's slot. */
		if ((r = pipeline_add_empty(d->p, c, SLOT_TAG(S_TOOLONG,
		    0))) == NULL)
			fatalx("client_toolong: no batch");
		buf_append(&r->raw, b.data, b.len);
		c->pending++;
		pipeline_added(d->p);
	}
	buf_free(&b);
	return (1);
}

/*
 * Is there a batch to take a record into (pipeline_ready)?  When every
 * batch is in flight, the clients wait (daemon_notified resumes them).
 */
static int
daemon_ready(struct daemon *d)
{
	if (pipeline_ready(d->p))
		return (1);
	d->stalled = 1;
	return (0);
}

/* A batch was opened: its delay starts. */
static void
daemon_opened(void *arg)
{
	struct daemon	*d = arg;
	struct timeval	 tv;

	tv.tv_sec = (time_t)d->o->batch_delay;
	tv.tv_usec = (suseconds_t)((d->o->batch_delay - tv.tv_sec) * 1e6);
	evtimer_add(d->batch_ev, &tv);
}

/* The id of a client's record without one: RUN:CONN:RECNO (a worker). */
static void
daemon_record_id(void *arg, struct record *r)
{
	struct daemon	*d = arg;

	record_connid(&r->id, d->run, r->owner, r->line);
}

/* Where a client's record came from, for the log. */
static void
daemon_where(void *arg, const struct record *r, char *where, size_t len)
{
	snprintf(where, len, "connection %" PRIu64 ", record %" PRIu64,
	    r->owner, r->line);
}

/*
 * Move one record (len bytes and a delimiter of dlen) from the client's
 * input into the batch, or answer it if it is a command.  Returns 0, with
 * the record left in the input, when there is no batch to put it in.
 */
static int
client_take(struct client *c, size_t len, size_t dlen)
{
	struct daemon	*d = c->d;
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	struct record	*r;
	char		 cmd[COMMAND_MAX];
	size_t		 i, clen;
	uint64_t	 n;

	if (len >= sizeof COMMAND - 1) {
		evbuffer_copyout(in, cmd, sizeof COMMAND - 1);
		if (memcmp(cmd, COMMAND, sizeof COMMAND - 1) == 0) {
			i = len < sizeof cmd ? len : sizeof cmd - 1;
			clen = len < sizeof cmd ? i - (sizeof COMMAND - 1) :
			    (size_t)-1;
			/* "taken N": no reply, no batch: it acts now. */
			evbuffer_copyout(in, cmd, i);
			if (c->acking && daemon_taken(cmd + sizeof COMMAND - 1,
			    clen, &n)) {
				evbuffer_drain(in, len + dlen);
				client_acked(c, n);
				return (1);
			}
			if (c->pending > 0 && !daemon_ready(d))
				return (0);
			evbuffer_drain(in, len + dlen);
			client_command(c, cmd + sizeof COMMAND - 1, clen);
			return (1);
		}
	}
	/*
	 * A blank line of TSV or JSON Lines (record_blank): no record, no
	 * reply (made contiguous only when it starts as one, which a record
	 * does not).
	 */
	if (d->po->delim == '\n' && format_get(d->po->format)->blank != NULL &&
	    (len == 0 ||
	    (evbuffer_copyout(in, cmd, 1) == 1 && strchr(" \t\r", *cmd) !=
	    NULL))) {
		if (record_blank(len > 0 ? (const char *)evbuffer_pullup(in,
		    len) : "", len, d->po->format)) {
			evbuffer_drain(in, len + dlen);
			c->recno++;	/* ids stay line numbers */
			pipeline_counts(d->p)->blank++;
			return (1);
		}
	}
	r = pipeline_add(d->p, c, SLOT_TAG(S_RECORD, c->want), len,
	    len + dlen);
	if (r == NULL) {
		d->stalled = 1;
		return (0);
	}
	evbuffer_remove(in, r->raw.data, len);
	evbuffer_drain(in, dlen);
	c->recno++;
	c->pending++;
	d->received++;
	r->recno = c->recno;
	r->line = c->recno;
	r->owner = c->conn;
	r->pairs = (c->want & WANT_PAIRS) != 0;
	pipeline_added(d->p);
	return (1);
}

/*
 * What a command line asks, from cmd, the len bytes after "#mhfilter "
 * ((size_t)-1: too long to be a command): an S_* other than S_RECORD, or
 * -1 for none known.  Trailing spaces and a CR are allowed.
 */
int
daemon_command(const char *cmd, size_t len)
{
	while (len != (size_t)-1 && len > 0 && (cmd[len - 1] == '\r' ||
	    cmd[len - 1] == ' '))
		len--;
	if (len == 5 && strncasecmp(cmd, "stats", 5) == 0)
		return (S_STATS);
	if (len == 7 && strncasecmp(cmd, "version", 7) == 0)
		return (S_VERSION);
	if (len == 5 && strncasecmp(cmd, "pairs", 5) == 0)
		return (S_PAIRS);
	if (len == 6 && strncasecmp(cmd, "groups", 6) == 0)
		return (S_GROUPS);
	if (len == 3 && strncasecmp(cmd, "ack", 3) == 0)
		return (S_ACK);
	return (-1);
}

/*
 * Is the command (as daemon_command has it) "taken N", N decimal: with N
 * into *n.  It has no reply: see client_take.
 */
int
daemon_taken(const char *cmd, size_t len, uint64_t *n)
{
	uint64_t	 v = 0;
	size_t		 i;

	while (len != (size_t)-1 && len > 0 && (cmd[len - 1] == '\r' ||
	    cmd[len - 1] == ' '))
		len--;
	if (len == (size_t)-1 || len < 7 || strncasecmp(cmd, "taken ", 6) != 0)
		return (0);
	for (i = 6; i < len; i++) {
		if (cmd[i] < '0' || cmd[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return (0);
		v = v * 10 + (uint64_t)(cmd[i] - '0');
	}
	*n = v;
	return (1);
}

/*
 * A command line: "#mhfilter stats", "version", "pairs" or "groups" (the
 * last two take effect for the records after them).  Answered in order:
 * at once if nothing of the client's is pending, else after its batch.
 * len (size_t)-1: too long to be a command.
 */
static void
client_command(struct client *c, const char *cmd, size_t len)
{
	struct daemon	*d = c->d;
	struct buf	 b = { 0 };
	int		 type;

	/* Unknown (-1): say so, in order, like a malformed record. */
	type = daemon_command(cmd, len);
	if (type == S_PAIRS)
		c->want |= WANT_PAIRS;
	else if (type == S_GROUPS)
		c->want |= WANT_GROUPS;
	else if (type == S_ACK)
		c->acking = 1;
	if (c->pending == 0) {
		if (type == -1)
			reply_error(&b, NULL, 0, "command", UNKNOWN_COMMAND);
		else
			reply_command(d, &b, type);
		client_reply(c, &b);
		buf_free(&b);
		return;
	}
	/* Nothing for the filter; client_take made sure there is room. */
	if (pipeline_add_empty(d->p, c, SLOT_TAG(type == -1 ? S_UNKNOWN :
	    type, 0)) == NULL)
		fatalx("client_command: no batch");
	c->pending++;
	pipeline_added(d->p);
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

/*
 * Append a record's pairs ("pairs"): "pair=SIM:ID" for each match, and
 * under containment "pair-held=SIM:ID" for each earlier document the
 * record holds, in the order --pairs writes them.
 */
static void
reply_pairs(struct buf *b, const struct verdict *v)
{
	char	 sim[32];
	size_t	 i;

	for (i = 0; i < v->npairs; i++) {
		snprintf(sim, sizeof sim, "\t%s=%.4f:", v->pairs[i].contains ?
		    "pair-held" : "pair", v->pairs[i].sim);
		buf_append(b, sim, strlen(sim));
		output_field(b, v->pairs[i].id.data, v->pairs[i].id.len);
	}
}

/*
 * Append the reply line of a decided record, with the fields its client
 * asked for (want: WANT_*).
 */
static void
reply_verdict(struct buf *b, const struct record *r, const struct verdict *v,
    int want)
{
	char	 sim[32];

	switch (v->kind) {
	case V_UNIQUE:
		buf_append(b, "unique\t", 7);
		output_field(b, r->id.data, r->id.len);
		if (v->replay)
			buf_append(b, "\treplay", 7);
		if (v->contains.len > 0) {
			snprintf(sim, sizeof sim, "\tcontains=%.4f:",
			    v->contains_sim);
			buf_append(b, sim, strlen(sim));
			output_field(b, v->contains.data, v->contains.len);
		}
		if (want & WANT_PAIRS)
			reply_pairs(b, v);
		break;
	case V_DUPLICATE:
		buf_append(b, "duplicate\t", 10);
		output_field(b, r->id.data, r->id.len);
		buf_append(b, "\t", 1);
		output_field(b, v->match.data, v->match.len);
		snprintf(sim, sizeof sim, "\t%.4f", v->sim);
		buf_append(b, sim, strlen(sim));
		if (v->seen)
			buf_append(b, "\tseen", 5);
		if (want & WANT_GROUPS) {
			buf_append(b, "\tgroup=", 7);
			output_field(b, v->group.data, v->group.len);
		}
		if (want & WANT_PAIRS)
			reply_pairs(b, v);
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

/*
 * Append the reply to a command: "stats" or "version" and key=value, or
 * the command's name ("pairs", "groups").
 */
static void
reply_command(struct daemon *d, struct buf *b, int type)
{
	char	 v[256];

	if (type == S_STATS) {
		daemon_stats_line(d, b, '\t');
		return;
	}
	if (type == S_PAIRS || type == S_GROUPS || type == S_ACK) {
		snprintf(v, sizeof v, "%s\n", type == S_PAIRS ? "pairs" :
		    type == S_GROUPS ? "groups" : "ack");
		buf_append(b, v, strlen(v));
		return;
	}
	snprintf(v, sizeof v, "version\tprotocol=%d\tmhfilter=%s\t"
	    "index_format=%d\tscheme=%d\n", PROTOCOL_VERSION, PACKAGE_VERSION,
	    MHF_INDEX_FORMAT, MHF_SCHEME);
	buf_append(b, v, strlen(v));
}


/* Batches were decided: deliver them (daemon_deliver answers). */
static void
daemon_notified(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;
	struct client	*c, *next;

	if (pipeline_deliver(d->p, 0) == 0)
		return;
	if (!d->stalled)
		return;
	/* A batch is free again: take what the clients sent meanwhile. */
	d->stalled = 0;
	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (!c->waiting)
			continue;
		c->waiting = 0;
		if (c->state != C_READING)
			continue;
		if (!c->throttled && !d->stopping)
			bufferevent_enable(c->bev, EV_READ);
		client_process(c);
	}
}

/* The reply line of slot i of a delivered batch. */
static void
daemon_reply(struct daemon *d, struct plbatch *b, size_t i,
    struct client *c, struct buf *line)
{
	int			 tag = b->slots[i].tag;
	const struct record	*r = &b->recs[i];
	const struct verdict	*v = &b->vs[i];
	const char		*why;

	line->len = 0;
	if (SLOT_TYPE(tag) == S_UNKNOWN)
		reply_error(line, NULL, 0, "command", UNKNOWN_COMMAND);
	else if (SLOT_TYPE(tag) == S_TOOLONG)
		buf_append(line, r->raw.data, r->raw.len);
	else if (SLOT_TYPE(tag) != S_RECORD)
		reply_command(d, line, SLOT_TYPE(tag));
	else if (b->rc != 0) {
		why = b->rc == PL_FAILED ? b->cause : "not decided: the server "
		    "stopped after an error";
		reply_error(line, r->id.data, r->id.len, b->rc == PL_FAILED ?
		    "index" : "shutdown", why);
	} else if (v->kind == V_UNCHECKED)
		reply_error(line, r->id.data, r->id.len, "unchecked", v->error);
	else if (v->error != NULL &&
	    (v->kind == V_BAD || v->kind == V_SKIP)) {
		reply_error(line, r->id.data, r->id.len, "invalid", v->error);
		if (d->po->policy == POLICY_FAIL && c->state == C_READING) {
			/* Its later records are not read (pipeline_screen). */
			c->state = C_CLOSING;
			bufferevent_disable(c->bev, EV_READ);
		}
	} else
		reply_verdict(line, r, v, SLOT_WANT(tag));
}

/*
 * A batch was committed (or failed) and its records written: queue every
 * reply, in each client's order (pipeline_deliver, in this thread).
 */
static void
daemon_deliver(void *arg, struct plbatch *b)
{
	struct daemon	*d = arg;
	struct client	*c, *next;
	struct dmark	*dm = NULL, *part = NULL;
	struct plmarks	*m;
	char		*cause;
	size_t		 i;
	int		 record, split = 0;

	if (b->rc != PL_DROPPED)
		metrics_batch(d->metrics, b->seconds);
	if (b->rc == PL_FAILED) {
		if (!d->failing)
			log_warnx("a batch of %zu records failed: %s", b->n,
			    b->cause);
		else
			log_debug("a batch of %zu records failed: %s", b->n,
			    b->cause);
		d->failing = 1;
	} else if (b->rc == 0 && d->failing) {
		log_info("batches are committed again");
		d->failing = 0;
	}
	/*
	 * The batch's marks wait for its replies to be written: each
	 * client's part apart (daemon_part), so that one that goes away
	 * without its replies loses its records alone; as a whole where its
	 * documents cannot be told apart by record.
	 */
	d->delivered++;
	if ((m = pipeline_marks_of(d->p, b, &cause)) != NULL) {
		if ((split = pipeline_marks_split(b)))
			pipeline_marks_free(m);
		else {
			dm = xcalloc(1, sizeof *dm);
			dm->m = m;
			dm->waiting = 1;  /* until every reply is queued */
		}
	} else if (cause != NULL) {
		log_warnx("%s", cause);	/* not marked: answered again */
		free(cause);
	}
	for (i = 0; i < b->n; i++) {
		c = b->slots[i].owner;
		record = SLOT_TYPE(b->slots[i].tag) == S_RECORD;
		if (split && record) {
			part = daemon_part(d, c);
			pipeline_marks_add(part->m, b, i);
		}
		if (c->gone) {
			if (split && record)
				part->gone = 1;	/* its replies never go */
			else if (dm != NULL && record)
				dmark_lose(d, dm);
			if (--c->pending == 0)
				free(c);	/* it went away */
			continue;
		}
		c->pending--;
		if (record && b->recs[i].recno != 0 &&
		    b->vs[i].kind == V_SKIP && b->vs[i].error == NULL)
			continue;	/* after its bad record, under fail */
		daemon_reply(d, b, i, c, &d->line);
		client_reply(c, &d->line);
		if (split && record)
			client_mark(c, part);
		else if (dm != NULL)
			client_mark(c, dm);
	}
	if (dm != NULL)
		dmark_done(d, dm, 0);
	for (i = 0; i < d->nparts; i++) {
		if (d->parts[i]->gone)
			dmark_lose(d, d->parts[i]);
		dmark_done(d, d->parts[i], 0);
	}
	d->nparts = 0;
	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		client_settle(c);
	}
	daemon_status(d, 0);
	if (pipeline_status(d->p) != EXIT_OK && !d->stopping) {
		/*
		 * The index holds what the output lacks, or it was lost:
		 * stop here.
		 */
		d->status = EXIT_ERROR;
		daemon_stop(d, b->rc == PL_FAILED ? "an index error" :
		    "an output error");
	}
}

/*
 * Client c's part of the marks of the batch being delivered: made at its
 * first record, waiting for the deliverer (daemon_deliver) and for c.
 */
static struct dmark *
daemon_part(struct daemon *d, struct client *c)
{
	struct dmark	*dm;

	if (c->part_seq == d->delivered && c->part != NULL)
		return (c->part);
	dm = xcalloc(1, sizeof *dm);
	dm->m = xcalloc(1, sizeof *dm->m);
	dm->waiting = 1;
	if (d->nparts == d->partsize) {
		d->partsize = d->partsize ? 2 * d->partsize : 16;
		d->parts = xreallocarray(d->parts, d->partsize,
		    sizeof *d->parts);
	}
	d->parts[d->nparts++] = dm;
	c->part = dm;
	c->part_seq = d->delivered;
	return (dm);
}

/* The batch's delay is over. */
static void
daemon_batch_timer(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;

	pipeline_due(d->p);
}

/*
 * The statistics, named as in /metrics without the mhfilter_ prefix: the
 * records received, the pipeline's (metrics.c), then the daemon's own.
 */
static void
daemon_stats(void *arg, struct mstats *st)
{
	struct daemon	*d = arg;

#define S(nm, cnt, val, hlp)	mstats_add(st, nm, NULL, cnt, MS_BOTH,	\
	(double)(val), hlp)
	mstats_add(st, "records", NULL, 1, MS_LINE, (double)d->received,
	    "Records received.");
	mstats_pipeline(st, d->p, now_seconds() - d->started);
	S("clients", 0, d->nclients, "Connected clients.");
	S("connections", 1, d->connections, "Connections accepted.");
	S("rejected", 1, d->rejected, "Connections refused "
	    "(--max-clients).");
	S("tls_refused", 1, d->tls_refused, "TLS handshakes that failed "
	    "(plaintext, no or a refused client certificate).");
	mstats_add(st, "uptime_seconds", NULL, 0, MS_LINE,
	    now_seconds() - d->started, "Seconds since the daemon started.");
#undef S
}

/* /healthz: well while batches commit and it is not stopping. */
static const char *
daemon_health(void *arg)
{
	struct daemon	*d = arg;

	if (d->stopping)
		return ("stopping");
	if (d->failing)
		return ("the last batch failed to commit");
	return (NULL);
}

/* "stats" and key=value pairs separated by sep, and a newline. */
static void
daemon_stats_line(struct daemon *d, struct buf *b, int sep)
{
	struct mstats	 st;

	st.n = 0;
	daemon_stats(d, &st);
	mstats_line(&st, b, sep);
}

/* Tell systemd how things are, at most once a STATUS_SECS unless forced. */
static void
daemon_status(struct daemon *d, int force)
{
	const struct pl_counts	*ct = pipeline_counts(d->p);
	double			 now = now_seconds();

	if (!force && now - d->status_sent < STATUS_SECS)
		return;
	d->status_sent = now;
	notify_send("STATUS=%zu clients, %" PRIu64 " records, %" PRIu64
	    " unique, %" PRIu64 " duplicates", d->nclients, d->received,
	    ct->unique, ct->duplicates);
}

/* Tell systemd the service is alive. */
static void
daemon_watchdog(evutil_socket_t fd, short events, void *arg)
{
	notify_send("WATCHDOG=1");
}

/*
 * Remove the listeners (and our socket files) and, with http, the HTTP
 * server, which a stop leaves to answer 503 while clients drain.
 */
static void
daemon_close_listeners(struct daemon *d, int http)
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
	if (http) {
		metrics_free(d->metrics);
		d->metrics = NULL;
	}
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
	daemon_close_listeners(d, 0);
	pipeline_flush(d->p);
	for (c = TAILQ_FIRST(&d->clients); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == C_LINGER) {
			/* One that acks may yet say what it took. */
			if (!c->acking || TAILQ_EMPTY(&c->marks))
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

/* Clients did not take their last replies in time: stop waiting. */
static void
daemon_drain_timer(evutil_socket_t fd, short events, void *arg)
{
	struct daemon	*d = arg;

	log_warnx("%zu clients did not take their last replies in %d s: "
	    "their records are answered again when they come back (replays)",
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
			d->out = output_open(STDOUT_FILENO, d->po->mode,
			    d->po->format, d->po->framing, d->po->delim);
		d->outfd = STDOUT_FILENO;
		pipeline_set_output(d->p, d->out, d->o->output);
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
	d->out = output_open(fd, d->po->mode, d->po->format, d->po->framing,
	    d->po->delim);
	pipeline_set_output(d->p, d->out, d->o->output);
	return (0);
}

/* Open (or reopen) --log-file as the standard error (log.c). */
static int
daemon_open_log(struct daemon *d, char **cause)
{
	if (d->o->log_file == NULL)
		return (0);
	return (log_open(d->o->log_file, cause));
}

/*
 * SIGHUP: read the TLS certificate, key and client CA again (rotation
 * without a restart).  New connections get the new context; those already
 * connected keep theirs.  If the files are bad, the old context stays.
 */
static void
daemon_tls_reload(struct daemon *d)
{
	struct ssl_ctx_st	*ctx;
	char			*cause;

	if (d->tls == NULL)
		return;
	if ((ctx = d->tm->context(&d->o->tls, &cause)) == NULL) {
		log_warnx("SIGHUP: %s; the TLS certificate in use stays",
		    cause);
		free(cause);
		return;
	}
	d->tm->context_free(d->tls);	/* connections hold a reference */
	d->tls = ctx;
	log_info("SIGHUP: TLS certificate and key reloaded from %s",
	    d->o->tls.cert);
}

/* SIGTERM, SIGINT, SIGHUP, SIGUSR1. */
static void
daemon_signal(evutil_socket_t sig, short events, void *arg)
{
	struct daemon	*d = arg;
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
		daemon_tls_reload(d);
		notify_send("READY=1");
		break;
	case SIGUSR1:
		mstats_log(daemon_stats, d);
		daemon_status(d, 1);
		break;
	}
}

/*
 * Run the daemon until SIGTERM or SIGINT: EXIT_OK then, EXIT_ERROR when it
 * cannot start or its output fails.  The pipeline is the caller's to free.
 */
int
daemon_run(const struct daemon_opts *o, struct pipeline *p)
{
	static const int	 sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	struct daemon		 dd, *d = &dd;
	struct plsource		 src = { daemon_opened, daemon_record_id,
				    daemon_where, &dd };
	struct sigaction	 sa;
	struct client		*c;
	struct timeval		 tv;
	uint64_t		 wd;
	char			*cause = NULL;
	size_t			 i;

	memset(d, 0, sizeof *d);
	d->o = o;
	d->p = p;
	d->po = pipeline_options(p);
	d->outfd = -1;
	d->run = index_run_start(pipeline_index(p));
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
	    daemon_open_output(d, &cause) != 0)
		goto fail;
	if (o->tls.cert != NULL &&
	    ((d->tm = tls_module(&cause)) == NULL ||
	    (d->tls = d->tm->context(&o->tls, &cause)) == NULL))
		goto fail;
	if (daemon_activated(d, &cause) != 0)
		goto fail;
	for (i = 0; i < o->nlisten; i++) {
		switch (daemon_has_listener(d, o->listen[i])) {
		case 1:
			/* The configuration names the unit's socket too. */
			log_info("--listen %s: systemd passed this socket: "
			    "serving it", o->listen[i]);
			continue;
		case 2:
			log_warnx("--listen %s: given twice: served once",
			    o->listen[i]);
			continue;
		}
		if (daemon_listen(d, o->listen[i], &cause) != 0)
			goto fail;
	}
	if (o->http != NULL && daemon_http_bind(d, &cause) != 0)
		goto fail;
	if (d->nls == 0) {
		xasprintf(&cause, "nothing to listen on (use --listen)");
		goto fail;
	}

	pipeline_set_deliver(p, daemon_deliver, d);
	pipeline_set_source(p, &src, o->batch_delay);
	pipeline_defer_marks(p);
	d->notify_ev = event_new(d->base, pipeline_notify_fd(p),
	    EV_READ|EV_PERSIST, daemon_notified, d);
	event_add(d->notify_ev, NULL);
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
	    "%g ms", index_path(pipeline_index(p)), PROTOCOL_VERSION,
	    d->po->batch, o->batch_delay * 1000);
	notify_send("READY=1\nSTATUS=ready, %zu listeners", d->nls);
	event_base_dispatch(d->base);

	/* The loop ended: by daemon_stop, or a second signal. */
	pipeline_flush(p);
	pipeline_finish(p);	/* every reply queued */
	while ((c = TAILQ_FIRST(&d->clients)) != NULL)
		client_free(c);
	daemon_close_listeners(d, 1);
	if (o->stats)
		mstats_log(daemon_stats, d);
	log_info("stopped after %" PRIu64 " records in %" PRIu64
	    " connections", d->received, d->connections);
	pipeline_set_deliver(p, NULL, NULL);
	pipeline_set_source(p, NULL, 0);
	pipeline_set_output(p, NULL, NULL);
	buf_free(&d->line);
	free(d->parts);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		event_free(d->sig_ev[i]);
	event_free(d->notify_ev);
	event_free(d->batch_ev);
	event_free(d->reap_ev);
	event_free(d->drain_ev);
	if (d->watchdog_ev != NULL)
		event_free(d->watchdog_ev);
	output_close(d->out);
	if (d->outfd > STDERR_FILENO)
		close(d->outfd);
	if (d->tls != NULL)
		d->tm->context_free(d->tls);
	event_base_free(d->base);
	return (d->status);

fail:
	log_errx("%s", cause);
	free(cause);
	daemon_close_listeners(d, 1);
	pipeline_set_output(p, NULL, NULL);
	output_close(d->out);
	if (d->outfd > STDERR_FILENO)
		close(d->outfd);
	if (d->tls != NULL)
		d->tm->context_free(d->tls);
	event_base_free(d->base);
	return (EXIT_ERROR);
}
