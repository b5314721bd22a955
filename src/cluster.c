/*
 * A synchronous, pipelined Redis Cluster client over hiredis, for the Redis
 * index backend; a single Redis (cluster support disabled) is a cluster of
 * one node that owns every slot.
 *
 * hiredis 0.14 has no cluster support and Debian has no hiredis-cluster
 * package, so the routing is done here: the slot map from CLUSTER SLOTS,
 * key_slot (CRC16 with hash tags), MOVED and ASK.
 *
 * Commands are queued, formatted once into one buffer, each routed by the
 * hash slot of its key.  cluster_exec then makes attempts until every
 * command has a final reply: an attempt appends every pending command to
 * its node's context, writes every node's buffer and only then reads the
 * replies, node by node, so that a batch costs one round trip per node and
 * the nodes work in parallel.  A redirection or a transient error leaves a
 * command pending for the next attempt; attempts go on, with backoff, until
 * the deadline.
 *
 * Delivery is at least once: a command whose connection broke before its
 * reply came may have run, and it is sent again.  hiredis writes with
 * write(2), so the program must ignore SIGPIPE.
 *
 * Authentication: with cluster_auth's credentials every connection, to a
 * seed, a node of the slot map, a MOVED or ASK target or the same node
 * again after a failure, starts with AUTH.  A refused AUTH, and NOAUTH or
 * NOPERM in any reply, are not transient: the next call fails at once
 * with "authentication failed" and the node's address (never the
 * password), so that nothing is written.
 *
 * A name (cluster_set_name), when there is one, is given to every
 * connection with CLIENT SETNAME, after AUTH: the Redis backend names its
 * connections after the writer, so that other writers can tell from
 * CLIENT LIST whether it is still running (redis.c, "Delivery marks").
 */

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis.h>

#include "mhfilter.h"

#define CLUSTER_SLOTS		16384
#define CLUSTER_BACKOFF_MIN	0.01	/* seconds, doubled to the max */
#define CLUSTER_BACKOFF_MAX	1.0
#define CLUSTER_SOCKET_MAX	5.0	/* socket timeout: a hung node fails */
#define CLUSTER_SOCKET_MIN	0.1	/* even when the deadline is near */
#define CLUSTER_REDIRECTS	5	/* immediate retries, then backoff */
#define CLUSTER_REFRESH		60.0	/* seconds between map reads */

#define ASKING_CMD		"*1\r\n$6\r\nASKING\r\n"

/* What an attempt asks of the next one. */
#define ATT_REDIRECT		0x1	/* MOVED or ASK: retry at once */
#define ATT_BACKOFF		0x2	/* transient error: back off, retry */
#define ATT_WAITFAIL		0x4	/* WAIT fell short: give up */

/* A node: a master, an ASK target or a node asked for the slot map. */
struct cnode {
	char		*host;
	int		 port;
	redisContext	*ctx;		/* NULL until needed, or after errors */
	double		 tv;		/* the socket timeout set on ctx */
	int		 replicas;	/* from CLUSTER SLOTS or ROLE */
	int		 warned;	/* this episode of errors was logged */
	int		 alone;		/* writes unconfirmed for want of a
					   replica: logged */
	unsigned	 mark;		/* scratch for cluster_gc, _masters */

	/* The current attempt. */
	size_t		*sent;		/* indices of the commands, in order */
	size_t		 nsent;
	size_t		 sentsize;
	int		 waitn;		/* WAIT n was appended; 0: none */
	int		 trouble;	/* a transient error was met */
};

/* A queued command. */
struct ccmd {
	size_t		 off;		/* its RESP form in the wire buffer */
	size_t		 len;
	unsigned	 slot;
	int		 asking;	/* this attempt: sent after ASKING */
	struct cnode	*ask;		/* the next attempt goes there */
	redisReply	*reply;		/* final reply; NULL while pending */
	int		 reads;		/* only reads: needs no WAIT */
};

struct cluster {
	struct cluster_addr *seeds;
	size_t		 nseeds;
	double		 timeout;	/* seconds, for one cluster_exec */
	int		 is_cluster;

	struct cnode	**nodes;	/* every node known */
	size_t		 nnodes;
	struct cnode	**slots;	/* CLUSTER_SLOTS: the owner, or NULL */
	struct cnode	**scratch;	/* CLUSTER_SLOTS: a map being read */
	struct cnode	**masters;	/* owners, in the order of their */
	unsigned	*mfirst;	/* lowest slot */
	unsigned	 nmasters;
	int		 mapdirty;	/* masters must be recomputed */
	int		 refresh;	/* re-read the map before sending */
	double		 refreshed;	/* when it was last read */

	struct buf	 wire;		/* the queued commands, formatted */
	struct ccmd	*cmds;
	size_t		 ncmds;
	size_t		 cmdsize;

	int		 wait_replicas;	/* cluster_wait */
	int		 had_replicas;	/* a master had one, in some map */
	int		 wait_ms;
	uint64_t	 roundtrips;
	char		*lasterr;	/* the last transient error */
	char		*authfail;	/* AUTH refused: give up */
	char		*name;		/* CLIENT SETNAME, or NULL */
};

/* cluster_auth's credentials, for every connection. */
static char	*auth_user;
static char	*auth_pass;

static unsigned	 crc16(const char *, size_t);
static int	 cluster_split(const char *, size_t, char **, int *,
		     const char **);
static int	 cluster_port(const char *, size_t, int *);
static void	 cluster_sleep(double);
static char	*cluster_head(char *, char, size_t);
static void	 cluster_format(struct buf *, int, const char **,
		     const size_t *);
static size_t	 cluster_push(struct cluster *, unsigned, int, const char **,
		     const size_t *);
static struct cnode *cluster_node(struct cluster *, const char *, int);
static void	 node_close(struct cnode *);
static void	 node_free(struct cnode *);
static void	 node_trouble(struct cluster *, struct cnode *, const char *);
static void	 node_fail(struct cluster *, struct cnode *);
static int	 node_connect(struct cluster *, struct cnode *, double);
static int	 node_auth(struct cluster *, struct cnode *);
static int	 node_name(struct cluster *, struct cnode *);
static int	 node_denied(struct cluster *, struct cnode *,
		     const redisReply *);
static void	 node_push(struct cnode *, size_t);
static void	 node_unanswer(struct cluster *, struct cnode *);
static void	 cluster_alone(struct cluster *, struct cnode *, int);
static int	 cluster_install(struct cluster *, struct cnode *,
		     const redisReply *);
static int	 cluster_fetch(struct cluster *, struct cnode *, double);
static void	 cluster_role(struct cluster *, struct cnode *);
static void	 cluster_single(struct cluster *, struct cnode *);
static void	 cluster_refresh(struct cluster *, double);
static void	 cluster_gc(struct cluster *);
static void	 cluster_update(struct cluster *);
static int	 cluster_transient(const char *);
static int	 cluster_classify(struct cluster *, struct cnode *,
		     struct ccmd *, redisReply *);
static void	 cluster_waitcause(struct cnode *, const redisReply *,
		     char **);
static int	 cluster_read(struct cluster *, struct cnode *, char **);
static int	 cluster_attempt(struct cluster *, double, char **);

/*
 * CRC16-XMODEM (polynomial 0x1021, initial value 0), the table of the Redis
 * Cluster specification's crc16.c.  It is written out rather than computed
 * at start-up so that key_slot needs no initialisation and no lock; the
 * known answers in tests/unit/test_cluster.c pin it.
 */
static const uint16_t crc16tab[256] = {
	0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
	0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
	0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
	0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
	0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
	0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
	0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
	0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
	0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
	0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
	0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
	0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
	0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
	0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
	0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
	0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
	0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
	0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
	0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
	0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
	0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
	0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
	0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
	0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
	0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
	0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
	0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
	0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
	0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
	0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
	0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
	0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

/* The CRC16-XMODEM of len bytes. */
static unsigned
crc16(const char *p, size_t len)
{
	unsigned	 crc = 0;
	size_t		 i;

	for (i = 0; i < len; i++)
		crc = ((crc << 8) ^
		    crc16tab[((crc >> 8) ^ (unsigned char)p[i]) & 0xff]) &
		    0xffff;
	return (crc);
}

/*
 * The hash slot of a key: if it holds a '{' followed later by a '}' with at
 * least one byte between them, only the bytes between the first '{' and the
 * first '}' after it are hashed (a hash tag); otherwise the whole key.
 */
unsigned
key_slot(const char *key, size_t len)
{
	const char	*open, *close;

	open = memchr(key, '{', len);
	if (open != NULL) {
		close = memchr(open + 1, '}', len - (open + 1 - key));
		if (close != NULL && close > open + 1)
			return (crc16(open + 1, close - open - 1) &
			    (CLUSTER_SLOTS - 1));
	}
	return (crc16(key, len) & (CLUSTER_SLOTS - 1));
}

/* A decimal TCP port of len bytes, 1 to 65535.  Returns 0 or -1. */
static int
cluster_port(const char *s, size_t len, int *port)
{
	size_t	 i;
	int	 p = 0;

	if (len == 0 || len > 5)
		return (-1);
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (-1);
		p = p * 10 + (s[i] - '0');
	}
	if (p < 1 || p > 65535)
		return (-1);
	*port = p;
	return (0);
}

/*
 * Split one address of len bytes, "host:port" (a name or an IPv4 address)
 * or "[IPv6]:port", into a new string and a port.  Returns 0, or -1 with
 * why it is wrong in *why.
 */
static int
cluster_split(const char *s, size_t len, char **host, int *port,
    const char **why)
{
	const char	*h, *end = s + len, *colon;
	size_t		 hlen, i;

	if (len == 0) {
		*why = "empty";
		return (-1);
	}
	if (s[0] == '[') {
		h = s + 1;
		colon = memchr(h, ']', len - 1);
		if (colon == NULL || colon == h) {
			*why = "expected [IPv6 address]:port";
			return (-1);
		}
		hlen = colon - h;
		for (i = 0; i < hlen; i++) {
			if (!isxdigit((unsigned char)h[i]) && h[i] != ':' &&
			    h[i] != '.') {
				*why = "bad character in the IPv6 address";
				return (-1);
			}
		}
		colon++;
		if (colon == end || *colon != ':') {
			*why = "no :port";
			return (-1);
		}
	} else {
		h = s;
		if ((colon = memchr(s, ':', len)) == NULL) {
			*why = "no :port";
			return (-1);
		}
		hlen = colon - h;
		if (memchr(colon + 1, ':', end - colon - 1) != NULL) {
			*why = "more than one ':' (an IPv6 address needs [])";
			return (-1);
		}
		if (hlen == 0) {
			*why = "no host";
			return (-1);
		}
		for (i = 0; i < hlen; i++) {
			if (!isalnum((unsigned char)h[i]) && h[i] != '.' &&
			    h[i] != '-' && h[i] != '_') {
				*why = "bad character in the host name";
				return (-1);
			}
		}
	}
	if (cluster_port(colon + 1, end - colon - 1, port) != 0) {
		*why = "the port is not a number from 1 to 65535";
		return (-1);
	}
	*host = xstrndup(h, hlen);
	return (0);
}

/*
 * Parse a list of seed addresses, "host:port[,host:port...]".  Returns 0
 * with a new array in *addrs (*n entries), or -1 with a cause.
 */
int
cluster_parse_hosts(const char *hosts, struct cluster_addr **addrs,
    size_t *n, char **cause)
{
	struct cluster_addr	*a = NULL;
	const char		*p = hosts, *comma, *why;
	size_t			 na = 0, len;
	char			*host;
	int			 port;

	*addrs = NULL;
	*n = 0;
	if (*hosts == '\0') {
		xasprintf(cause, "no Redis address given");
		return (-1);
	}
	for (;;) {
		if ((comma = strchr(p, ',')) != NULL)
			len = comma - p;
		else
			len = strlen(p);
		if (cluster_split(p, len, &host, &port, &why) != 0) {
			xasprintf(cause, "bad Redis address \"%.*s\" in \"%s\":"
			    " %s", (int)len, p, hosts, why);
			cluster_free_hosts(a, na);
			return (-1);
		}
		a = xreallocarray(a, na + 1, sizeof *a);
		a[na].host = host;
		a[na].port = port;
		na++;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	*addrs = a;
	*n = na;
	return (0);
}

/* Free what cluster_parse_hosts returned. */
void
cluster_free_hosts(struct cluster_addr *a, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(a[i].host);
	free(a);
}

/*
 * Parse a redirection, "MOVED 3999 127.0.0.1:6381" or "ASK 3999 host:port"
 * (len bytes, the error reply without its '-').  The endpoint is split at
 * its last ':' since Redis writes IPv6 addresses without brackets; it may
 * be empty (the node that replied) or "?" (unknown).  Returns CLUSTER_MOVED
 * or CLUSTER_ASK with the slot, a new host string and the port, or 0 when
 * the message is not a well-formed redirection.
 */
int
cluster_parse_redirect(const char *msg, size_t len, unsigned *slot,
    char **host, int *port)
{
	const char	*p, *end = msg + len, *sp, *colon;
	unsigned	 s = 0;
	int		 kind, digits = 0;

	if (len > 6 && memcmp(msg, "MOVED ", 6) == 0) {
		kind = CLUSTER_MOVED;
		p = msg + 6;
	} else if (len > 4 && memcmp(msg, "ASK ", 4) == 0) {
		kind = CLUSTER_ASK;
		p = msg + 4;
	} else
		return (0);
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		s = s * 10 + (*p - '0');
		if (++digits > 5)
			return (0);
	}
	if (digits == 0 || s >= CLUSTER_SLOTS || p == end || *p != ' ')
		return (0);
	sp = ++p;
	if (memchr(sp, ' ', end - sp) != NULL)
		return (0);
	for (colon = NULL; p < end; p++) {
		if (*p == ':')
			colon = p;
	}
	if (colon == NULL || cluster_port(colon + 1, end - colon - 1,
	    port) != 0)
		return (0);
	*slot = s;
	*host = xstrndup(sp, colon - sp);
	return (kind);
}

/* Sleep for secs seconds (less if a signal comes). */
static void
cluster_sleep(double secs)
{
	struct timespec	 ts;

	if (secs <= 0)
		return;
	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

/* The number of decimal digits of n. */
static size_t
dec_digits(size_t n)
{
	size_t	 d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return (d);
}

/* Write a RESP header, c then n in decimal then CRLF, at p; past it. */
static char *
cluster_head(char *p, char c, size_t n)
{
	size_t	 d = dec_digits(n), i;

	*p++ = c;
	for (i = d; i > 0; i--) {
		p[i - 1] = (char)('0' + n % 10);
		n /= 10;
	}
	p += d;
	*p++ = '\r';
	*p++ = '\n';
	return (p);
}

/*
 * Append a command in RESP form: hiredis copies it into a context as it is,
 * once per attempt.  argvlen NULL means C strings, as in hiredis.  Its
 * length is counted first and the bytes written in place: a batch queues
 * tens of thousands of commands of a few short arguments.
 */
static void
cluster_format(struct buf *b, int argc, const char **argv,
    const size_t *argvlen)
{
	size_t	 len, total;
	char	*p;
	int	 i;

	total = 3 + dec_digits((size_t)argc);
	for (i = 0; i < argc; i++) {
		len = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
		total += 5 + dec_digits(len) + len;
	}
	buf_reserve(b, total);
	p = cluster_head(b->data + b->len, '*', (size_t)argc);
	for (i = 0; i < argc; i++) {
		len = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
		p = cluster_head(p, '$', len);
		memcpy(p, argv[i], len);
		p += len;
		*p++ = '\r';
		*p++ = '\n';
	}
	b->len += total;
	b->data[b->len] = '\0';
}

/*
 * Does a command only read?  A pipeline of reads alone is not followed by
 * WAIT, so reads go on while a replica is down.
 */
static int
cluster_readonly(const char *name, size_t len)
{
	static const struct {
		const char	*name;
		size_t		 len;
	} reads[] = {
#define R(s) { s, sizeof s - 1 }
		R("GET"), R("GETRANGE"), R("STRLEN"), R("EXISTS"), R("TTL"),
		R("SCAN"), R("DBSIZE"), R("INFO"), R("PING"), R("ROLE"),
		R("ZRANGE"), R("ZCARD"), R("CLIENT"), R("MEMORY")
#undef R
	};
	size_t	 i;

	for (i = 0; i < sizeof reads / sizeof reads[0]; i++)
		if (reads[i].len == len &&
		    reads[i].name[0] == (name[0] & ~0x20) &&
		    strncasecmp(reads[i].name, name, len) == 0)
			return (1);
	return (0);
}

/* Queue a command for a slot; returns its index. */
static size_t
cluster_push(struct cluster *c, unsigned slot, int argc, const char **argv,
    const size_t *argvlen)
{
	struct ccmd	*cmd;

	if (argc < 1)
		fatalx("%s: no arguments", __func__);
	if (c->ncmds == c->cmdsize) {
		c->cmdsize = c->cmdsize ? 2 * c->cmdsize : 64;
		c->cmds = xreallocarray(c->cmds, c->cmdsize, sizeof *c->cmds);
	}
	cmd = &c->cmds[c->ncmds];
	memset(cmd, 0, sizeof *cmd);
	cmd->off = c->wire.len;
	cluster_format(&c->wire, argc, argv, argvlen);
	cmd->len = c->wire.len - cmd->off;
	cmd->slot = slot;
	cmd->reads = cluster_readonly(argv[0], argvlen != NULL ? argvlen[0] :
	    strlen(argv[0]));
	return (c->ncmds++);
}

/* Find a node by address, adding it (unconnected) if it is new. */
static struct cnode *
cluster_node(struct cluster *c, const char *host, int port)
{
	struct cnode	*n;
	size_t		 i;

	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		if (n->port == port && strcmp(n->host, host) == 0)
			return (n);
	}
	n = xcalloc(1, sizeof *n);
	n->host = xstrdup(host);
	n->port = port;
	c->nodes = xreallocarray(c->nodes, c->nnodes + 1, sizeof *c->nodes);
	c->nodes[c->nnodes++] = n;
	return (n);
}

/* Drop a node's connection. */
static void
node_close(struct cnode *n)
{
	if (n->ctx != NULL) {
		redisFree(n->ctx);
		n->ctx = NULL;
	}
}

/* Free a node. */
static void
node_free(struct cnode *n)
{
	node_close(n);
	free(n->sent);
	free(n->host);
	free(n);
}

/*
 * Note a transient error on a node: it becomes the cause if the deadline
 * passes, it is logged once per episode, and the map is read again.
 */
static void
node_trouble(struct cluster *c, struct cnode *n, const char *msg)
{
	free(c->lasterr);
	xasprintf(&c->lasterr, "redis %s:%d: %s", n->host, n->port, msg);
	if (!n->warned) {
		log_warnx("%s; retrying", c->lasterr);
		n->warned = 1;
	}
	n->trouble = 1;
	c->refresh = 1;
}

/*
 * A node's connection failed (refused, reset, closed, timed out or out of
 * step): note why and drop it.  Call right after the failing hiredis call.
 */
static void
node_fail(struct cluster *c, struct cnode *n)
{
	const char	*msg;
	int		 errsv = errno;

	if (n->ctx->err == REDIS_ERR_IO &&
	    (errsv == EAGAIN || errsv == EWOULDBLOCK))
		msg = "timed out";
	else if (n->ctx->errstr[0] != '\0')
		msg = n->ctx->errstr;
	else
		msg = "connection error";
	node_trouble(c, n, msg);
	node_close(n);
}

/*
 * Connect to a node if it is not connected, and set its socket timeout:
 * min(timeout, 5 s), less when the deadline is nearer.  Returns 0 or -1.
 */
static int
node_connect(struct cluster *c, struct cnode *n, double deadline)
{
	struct timeval	 tv;
	redisContext	*ctx;
	double		 t, left;

	t = c->timeout < CLUSTER_SOCKET_MAX ? c->timeout : CLUSTER_SOCKET_MAX;
	left = deadline - now_seconds();
	if (left < t)
		t = left;
	if (t < CLUSTER_SOCKET_MIN)
		t = CLUSTER_SOCKET_MIN;
	tv.tv_sec = (time_t)t;
	tv.tv_usec = (suseconds_t)((t - tv.tv_sec) * 1e6);

	if (n->ctx == NULL) {
		ctx = redisConnectWithTimeout(n->host, n->port, tv);
		if (ctx == NULL)
			fatalx("redisConnectWithTimeout: out of memory");
		if (ctx->err != 0) {
			node_trouble(c, n, ctx->errstr);
			redisFree(ctx);
			return (-1);
		}
		n->ctx = ctx;
		n->tv = -1;
		redisEnableKeepAlive(ctx);	/* connections last months */
		if (node_auth(c, n) != 0 || node_name(c, n) != 0)
			return (-1);
	}
	if (t != n->tv) {
		if (redisSetTimeout(n->ctx, tv) != REDIS_OK) {
			node_fail(c, n);
			return (-1);
		}
		n->tv = t;
	}
	return (0);
}

/*
 * Set the credentials of every later connection: a password, with an ACL
 * user or (user NULL) for the default user; pass NULL for none.
 */
void
cluster_auth(const char *user, const char *pass)
{
	if (auth_pass != NULL)
		explicit_bzero(auth_pass, strlen(auth_pass));
	free(auth_user);
	free(auth_pass);
	auth_user = user != NULL ? xstrdup(user) : NULL;
	auth_pass = pass != NULL ? xstrdup(pass) : NULL;
}

/*
 * Authenticate a new connection, if there are credentials.  Returns 0, or
 * -1 after a broken connection (transient) or a refusal (c->authfail).
 */
static int
node_auth(struct cluster *c, struct cnode *n)
{
	redisReply	*r;

	if (auth_pass == NULL)
		return (0);
	if (auth_user != NULL)
		r = redisCommand(n->ctx, "AUTH %s %s", auth_user, auth_pass);
	else
		r = redisCommand(n->ctx, "AUTH %s", auth_pass);
	if (r == NULL) {
		node_fail(c, n);
		return (-1);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		/* Redis's message names neither the password nor the user. */
		if (c->authfail == NULL)
			xasprintf(&c->authfail, "redis %s:%d: authentication "
			    "failed%s%s: %s", n->host, n->port,
			    auth_user != NULL ? " for user " : "",
			    auth_user != NULL ? auth_user : "", r->str);
		freeReplyObject(r);
		node_close(n);
		return (-1);
	}
	freeReplyObject(r);
	return (0);
}

/*
 * Give a new connection the cluster's name, if it has one.  Returns 0, or
 * -1 after a broken connection (transient) or a refusal (c->authfail: an
 * ACL without CLIENT SETNAME).
 */
static int
node_name(struct cluster *c, struct cnode *n)
{
	redisReply	*r;

	if (c->name == NULL)
		return (0);
	if ((r = redisCommand(n->ctx, "CLIENT SETNAME %s", c->name)) == NULL) {
		node_fail(c, n);
		return (-1);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		if (c->authfail == NULL)
			xasprintf(&c->authfail, "redis %s:%d: CLIENT SETNAME: "
			    "%s", n->host, n->port, r->str);
		freeReplyObject(r);
		node_close(n);
		return (-1);
	}
	freeReplyObject(r);
	return (0);
}

/*
 * Name every connection, those open now and those made later (CLIENT
 * SETNAME; name has no spaces).  Returns 0, or -1 with a cause when a
 * node refuses (a connection that broke is named when it is made again).
 */
int
cluster_set_name(struct cluster *c, const char *name, char **cause)
{
	size_t	 i;

	free(c->name);
	c->name = xstrdup(name);
	for (i = 0; i < c->nnodes; i++) {
		if (c->nodes[i]->ctx != NULL)
			(void)node_name(c, c->nodes[i]);
		if (c->authfail != NULL) {
			*cause = xstrdup(c->authfail);
			return (-1);
		}
	}
	return (0);
}

/*
 * Whether an error reply says the connection lacks credentials (NOAUTH)
 * or permissions (NOPERM): then c->authfail is set, and it is not retried.
 */
static int
node_denied(struct cluster *c, struct cnode *n, const redisReply *r)
{
	if (strncmp(r->str, "NOAUTH", 6) != 0 &&
	    strncmp(r->str, "NOPERM", 6) != 0 &&
	    strncmp(r->str, "WRONGPASS", 9) != 0)
		return (0);
	if (c->authfail == NULL)
		xasprintf(&c->authfail, "redis %s:%d: authentication failed%s: "
		    "%s", n->host, n->port, strncmp(r->str, "NOAUTH", 6) == 0 ?
		    " (a password is needed: --redis-password-file)" : "",
		    r->str);
	return (1);
}

/* Add a command to a node's list for this attempt. */
static void
node_push(struct cnode *n, size_t i)
{
	if (n->nsent == n->sentsize) {
		n->sentsize = n->sentsize ? 2 * n->sentsize : 64;
		n->sent = xreallocarray(n->sent, n->sentsize,
		    sizeof *n->sent);
	}
	n->sent[n->nsent++] = i;
}

/*
 * Forget the replies a node gave in this attempt, so that the commands are
 * sent again: their WAIT did not confirm them.
 */
static void
node_unanswer(struct cluster *c, struct cnode *n)
{
	struct ccmd	*cmd;
	size_t		 j;

	for (j = 0; j < n->nsent; j++) {
		cmd = &c->cmds[n->sent[j]];
		if (cmd->reply != NULL) {
			freeReplyObject(cmd->reply);
			cmd->reply = NULL;
		}
	}
}

/*
 * Take the slot map from a CLUSTER SLOTS reply that node from gave: an
 * array of [start, end, master, replica...], each node [host, port, ...].
 * An empty host means from's, "?" an unknown one (the range is skipped).
 * Returns 0, or -1 (and nothing changes) if the reply is malformed or
 * assigns no slot.
 */
static int
cluster_install(struct cluster *c, struct cnode *from, const redisReply *r)
{
	const redisReply	*e, *m;
	struct cnode		*n;
	const char		*host;
	size_t			 i, k;
	long long		 s, start, end;
	int			 any = 0, replicas;

	if (r->type != REDIS_REPLY_ARRAY)
		return (-1);
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER)
			return (-1);
		start = e->element[0]->integer;
		end = e->element[1]->integer;
		if (start < 0 || end >= CLUSTER_SLOTS || start > end)
			return (-1);
		for (k = 2; k < e->elements; k++) {
			m = e->element[k];
			if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
			    (m->element[0]->type != REDIS_REPLY_STRING &&
			    m->element[0]->type != REDIS_REPLY_NIL) ||
			    m->element[1]->type != REDIS_REPLY_INTEGER ||
			    m->element[1]->integer < 1 ||
			    m->element[1]->integer > 65535)
				return (-1);
		}
		if (e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    strcmp(e->element[2]->element[0]->str, "?") != 0)
			any = 1;
	}
	if (!any)
		return (-1);

	memset(c->scratch, 0, CLUSTER_SLOTS * sizeof *c->scratch);
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		m = e->element[2];
		host = from->host;
		if (m->element[0]->type == REDIS_REPLY_STRING &&
		    m->element[0]->len != 0)
			host = m->element[0]->str;
		if (strcmp(host, "?") == 0)
			continue;
		n = cluster_node(c, host, (int)m->element[1]->integer);
		replicas = 0;
		for (k = 3; k < e->elements; k++) {
			m = e->element[k];
			if (m->element[0]->type != REDIS_REPLY_STRING ||
			    strcmp(m->element[0]->str, "?") != 0)
				replicas++;
		}
		n->replicas = replicas;
		if (replicas > 0)
			c->had_replicas = 1;
		start = e->element[0]->integer;
		end = e->element[1]->integer;
		for (s = start; s <= end; s++)
			c->scratch[s] = n;
	}
	if (memcmp(c->slots, c->scratch, CLUSTER_SLOTS * sizeof *c->slots)
	    != 0) {
		memcpy(c->slots, c->scratch, CLUSTER_SLOTS * sizeof *c->slots);
		c->mapdirty = 1;
		cluster_update(c);
		log_debug("redis %s:%d: new slot map, %u masters", from->host,
		    from->port, c->nmasters);
	}
	cluster_gc(c);
	return (0);
}

/*
 * Read the slot map from one node.  Returns 0, 1 if the node is a single
 * Redis (cluster support disabled), or -1.
 */
static int
cluster_fetch(struct cluster *c, struct cnode *n, double deadline)
{
	redisReply	*r;
	int		 rv;

	if (node_connect(c, n, deadline) != 0)
		return (-1);
	if ((r = redisCommand(n->ctx, "CLUSTER SLOTS")) == NULL) {
		node_fail(c, n);
		return (-1);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		rv = -1;
		if (strstr(r->str, "cluster support disabled") != NULL)
			rv = 1;
		else if (!node_denied(c, n, r))
			node_trouble(c, n, r->str);
		freeReplyObject(r);
		return (rv);
	}
	rv = cluster_install(c, n, r);
	freeReplyObject(r);
	if (rv != 0)
		node_trouble(c, n, "CLUSTER SLOTS: no slots assigned, or a "
		    "malformed reply");
	return (rv);
}

/*
 * Count the replicas of a single Redis with ROLE (for WAIT): the third
 * element of a master's reply lists them.  Errors leave the count alone.
 */
static void
cluster_role(struct cluster *c, struct cnode *n)
{
	redisReply	*r;

	if ((r = redisCommand(n->ctx, "ROLE")) == NULL) {
		node_fail(c, n);
		return;
	}
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "master") == 0 &&
	    r->element[2]->type == REDIS_REPLY_ARRAY) {
		n->replicas = (int)r->element[2]->elements;
		if (n->replicas > 0)
			c->had_replicas = 1;
	} else if (r->type == REDIS_REPLY_ARRAY)
		n->replicas = 0;
	freeReplyObject(r);
}

/* Make node n, a single Redis, own every slot; forget the other nodes. */
static void
cluster_single(struct cluster *c, struct cnode *n)
{
	size_t	 i;

	c->is_cluster = 0;
	for (i = 0; i < c->nnodes; i++) {
		if (c->nodes[i] != n)
			node_free(c->nodes[i]);
	}
	c->nodes[0] = n;
	c->nnodes = 1;
	for (i = 0; i < CLUSTER_SLOTS; i++)
		c->slots[i] = n;
	c->mapdirty = 1;
	cluster_role(c, n);
}

/*
 * Read the slot map again, from the first node that answers: connected
 * nodes first, then the others, then the seeds.  On failure the old map
 * stays and the next attempt tries again.  A single Redis has no map, but
 * its replicas are counted again for WAIT.
 */
static void
cluster_refresh(struct cluster *c, double deadline)
{
	struct cnode	*n;
	size_t		 i;
	int		 pass;

	c->refresh = 0;
	c->refreshed = now_seconds();
	if (!c->is_cluster) {
		n = c->nodes[0];
		if (c->wait_replicas > 0 && node_connect(c, n, deadline) == 0)
			cluster_role(c, n);
		return;
	}
	for (i = 0; i < c->nnodes; i++)
		c->nodes[i]->mark = 0;	/* not tried yet */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < c->nnodes; i++) {
			n = c->nodes[i];
			if (n->mark || (n->ctx != NULL) != (pass == 0))
				continue;
			n->mark = 1;
			if (cluster_fetch(c, n, deadline) == 0)
				return;
		}
	}
	for (i = 0; i < c->nseeds; i++) {
		n = cluster_node(c, c->seeds[i].host, c->seeds[i].port);
		if (n->mark)
			continue;
		n->mark = 1;
		if (cluster_fetch(c, n, deadline) == 0)
			return;
	}
	c->refresh = 1;
}

/*
 * Free the nodes that own no slot and are no pending command's ASK target
 * (old masters, replicas asked for the map, seeds), so that years of
 * failovers do not pile up nodes.
 */
static void
cluster_gc(struct cluster *c)
{
	size_t	 i, j;

	for (i = 0; i < c->nnodes; i++)
		c->nodes[i]->mark = 0;
	for (i = 0; i < CLUSTER_SLOTS; i++) {
		if (c->slots[i] != NULL)
			c->slots[i]->mark = 1;
	}
	for (i = 0; i < c->ncmds; i++) {
		if (c->cmds[i].ask != NULL)
			c->cmds[i].ask->mark = 1;
	}
	for (i = j = 0; i < c->nnodes; i++) {
		if (c->nodes[i]->mark)
			c->nodes[j++] = c->nodes[i];
		else
			node_free(c->nodes[i]);
	}
	c->nnodes = j;
}

/*
 * Recompute the masters: the nodes owning slots, ordered by the lowest slot
 * each owns, so that master i keeps its number across a failover.
 */
static void
cluster_update(struct cluster *c)
{
	struct cnode	*n;
	size_t		 i;

	if (!c->mapdirty)
		return;
	c->masters = xreallocarray(c->masters, c->nnodes, sizeof *c->masters);
	c->mfirst = xreallocarray(c->mfirst, c->nnodes, sizeof *c->mfirst);
	for (i = 0; i < c->nnodes; i++)
		c->nodes[i]->mark = 0;
	c->nmasters = 0;
	for (i = 0; i < CLUSTER_SLOTS; i++) {
		if ((n = c->slots[i]) == NULL || n->mark)
			continue;
		n->mark = 1;
		c->masters[c->nmasters] = n;
		c->mfirst[c->nmasters++] = i;
	}
	c->mapdirty = 0;
}

/*
 * Connect to the first seed that answers and read the slot map, retrying
 * until the timeout.  Returns NULL with a cause on failure.
 */
struct cluster *
cluster_connect(const char *hosts, double timeout, char **cause)
{
	struct cluster	*c;
	struct cnode	*n;
	double		 deadline, backoff = CLUSTER_BACKOFF_MIN, left;
	size_t		 i;
	int		 rv;

	if (!(timeout > 0)) {
		xasprintf(cause, "Redis timeout must be positive");
		return (NULL);
	}
	c = xcalloc(1, sizeof *c);
	if (cluster_parse_hosts(hosts, &c->seeds, &c->nseeds, cause) != 0) {
		free(c);
		return (NULL);
	}
	c->timeout = timeout;
	c->slots = xcalloc(CLUSTER_SLOTS, sizeof *c->slots);
	c->scratch = xcalloc(CLUSTER_SLOTS, sizeof *c->scratch);
	deadline = now_seconds() + timeout;
	for (;;) {
		for (i = 0; i < c->nseeds; i++) {
			n = cluster_node(c, c->seeds[i].host,
			    c->seeds[i].port);
			rv = cluster_fetch(c, n, deadline);
			if (rv == 0) {
				c->is_cluster = 1;
				goto done;
			}
			if (rv == 1) {
				cluster_single(c, n);
				goto done;
			}
			if (c->authfail != NULL)
				break;
		}
		left = deadline - now_seconds();
		if (c->authfail != NULL) {
			*cause = c->authfail;
			c->authfail = NULL;
			cluster_close(c);
			return (NULL);
		}
		if (left <= 0) {
			xasprintf(cause, "%s (gave up after %g s)",
			    c->lasterr != NULL ? c->lasterr : hosts, timeout);
			cluster_close(c);
			return (NULL);
		}
		cluster_sleep(backoff < left ? backoff : left);
		if ((backoff *= 2) > CLUSTER_BACKOFF_MAX)
			backoff = CLUSTER_BACKOFF_MAX;
	}
done:
	c->refresh = 0;
	c->refreshed = now_seconds();
	for (i = 0; i < c->nnodes; i++)
		c->nodes[i]->warned = 0;
	cluster_update(c);
	log_debug("redis %s: %s, %u masters", hosts,
	    c->is_cluster ? "a cluster" : "a single Redis", c->nmasters);
	return (c);
}

/* Close every connection and free everything. */
void
cluster_close(struct cluster *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	cluster_reset(c);
	for (i = 0; i < c->nnodes; i++)
		node_free(c->nodes[i]);
	free(c->nodes);
	cluster_free_hosts(c->seeds, c->nseeds);
	free(c->slots);
	free(c->scratch);
	free(c->masters);
	free(c->mfirst);
	buf_free(&c->wire);
	free(c->cmds);
	free(c->lasterr);
	free(c->authfail);
	free(c->name);
	free(c);
}

/*
 * Queue a command routed by the slot of key (which need not be one of its
 * arguments); the arguments are copied.  Returns its index.
 */
size_t
cluster_queue(struct cluster *c, const char *key, size_t keylen, int argc,
    const char **argv, const size_t *argvlen)
{
	return (cluster_push(c, key_slot(key, keylen), argc, argv, argvlen));
}

/*
 * Queue a command without a key for master number master.  It is routed by
 * the lowest slot that master owns now, so after a failover it goes to the
 * master that took over.
 */
size_t
cluster_queue_node(struct cluster *c, unsigned master, int argc,
    const char **argv, const size_t *argvlen)
{
	cluster_update(c);
	if (master >= c->nmasters)
		fatalx("%s: master %u of %u", __func__, master, c->nmasters);
	return (cluster_push(c, c->mfirst[master], argc, argv, argvlen));
}

/* Whether an error reply is worth retrying after a pause. */
static int
cluster_transient(const char *err)
{
	static const char	*words[] = { "TRYAGAIN", "CLUSTERDOWN",
				    "LOADING", "MASTERDOWN", "READONLY" };
	size_t			 i, len;

	for (i = 0; i < sizeof words / sizeof words[0]; i++) {
		len = strlen(words[i]);
		if (strncmp(err, words[i], len) == 0 &&
		    (err[len] == ' ' || err[len] == '\0'))
			return (1);
	}
	return (0);
}

/*
 * Deal with the reply node n gave to cmd: keep a final one, follow a
 * redirection, or leave cmd pending after a transient error.  Returns the
 * ATT_* flags it implies.
 */
static int
cluster_classify(struct cluster *c, struct cnode *n, struct ccmd *cmd,
    redisReply *r)
{
	struct cnode	*to;
	char		*host;
	unsigned	 slot;
	int		 kind, port;

	if (r->type != REDIS_REPLY_ERROR) {
		cmd->reply = r;
		return (0);
	}
	kind = cluster_parse_redirect(r->str, r->len, &slot, &host, &port);
	if (kind != 0 && strcmp(host, "?") == 0) {
		free(host);
		kind = 0;		/* an unknown endpoint: wait for it */
		node_trouble(c, n, r->str);
		freeReplyObject(r);
		return (ATT_BACKOFF);
	}
	if (kind != 0) {
		to = cluster_node(c, *host != '\0' ? host : n->host, port);
		if (kind == CLUSTER_MOVED) {
			if (c->slots[slot] != to)
				log_debug("redis %s:%d: MOVED %u to %s:%d",
				    n->host, n->port, slot, to->host, to->port);
			c->slots[slot] = to;
			c->mapdirty = 1;
			c->refresh = 1;
		} else {
			log_debug("redis %s:%d: ASK %u at %s:%d", n->host,
			    n->port, slot, to->host, to->port);
			cmd->ask = to;
		}
		free(host);
		freeReplyObject(r);
		return (ATT_REDIRECT);
	}
	if (cluster_transient(r->str) || node_denied(c, n, r)) {
		if (c->authfail == NULL)
			node_trouble(c, n, r->str);
		freeReplyObject(r);
		return (ATT_BACKOFF);
	}
	cmd->reply = r;			/* WRONGTYPE, NOSCRIPT, ERR ... */
	return (0);
}

/* Say why a node's WAIT reply w fell short. */
static void
cluster_waitcause(struct cnode *n, const redisReply *w, char **cause)
{
	if (w->type == REDIS_REPLY_INTEGER)
		xasprintf(cause, "redis %s:%d: write reached %lld of %d "
		    "replicas", n->host, n->port, w->integer, n->waitn);
	else
		xasprintf(cause, "redis %s:%d: WAIT: %s", n->host, n->port,
		    w->type == REDIS_REPLY_ERROR ? w->str : "bad reply");
}

/*
 * Read node n's replies for this attempt, then its WAIT's.  A short WAIT
 * sets *waitcause.  Returns the ATT_* flags.
 */
static int
cluster_read(struct cluster *c, struct cnode *n, char **waitcause)
{
	struct ccmd	*cmd;
	void		*r;
	redisReply	*w;
	size_t		 j;
	int		 flags = 0, errsv;

	for (j = 0; j < n->nsent; j++) {
		cmd = &c->cmds[n->sent[j]];
		if (cmd->asking) {
			if (redisGetReply(n->ctx, &r) != REDIS_OK)
				goto fail;
			freeReplyObject(r);
		}
		if (redisGetReply(n->ctx, &r) != REDIS_OK)
			goto fail;
		flags |= cluster_classify(c, n, cmd, r);
	}
	if (n->waitn > 0) {
		if (redisGetReply(n->ctx, &r) != REDIS_OK)
			goto fail;
		w = r;
		if (w->type != REDIS_REPLY_INTEGER || w->integer < n->waitn) {
			node_unanswer(c, n);
			if (*waitcause == NULL)	/* the first node's */
				cluster_waitcause(n, w, waitcause);
			flags |= ATT_WAITFAIL;
			c->refresh = 1;
		}
		freeReplyObject(w);
	}
	if (!n->trouble && n->warned) {
		log_info("redis %s:%d: working again", n->host, n->port);
		n->warned = 0;
	}
	return (flags);

fail:
	/* Without its WAIT, no reply of this node is confirmed. */
	errsv = errno;
	if (n->waitn > 0)
		node_unanswer(c, n);
	errno = errsv;
	node_fail(c, n);
	return (flags | ATT_BACKOFF);
}

/*
 * Say once when a master takes writes that cannot be confirmed on a
 * replica while the cluster has had replicas (its replica failed, or it
 * took over from its master and has none yet): a failover could lose
 * them.  Said again, as fixed, when it has a replica again.
 */
static void
cluster_alone(struct cluster *c, struct cnode *n, int writes)
{
	if (c->wait_replicas == 0 || !c->had_replicas)
		return;
	if (n->replicas > 0 && n->alone) {
		log_info("redis %s:%d: has a replica again: writes are "
		    "confirmed on it", n->host, n->port);
		n->alone = 0;
	} else if (n->replicas == 0 && writes && !n->alone) {
		log_warnx("redis %s:%d: has no replica: writes to it are not "
		    "confirmed on another node, and a failover could lose "
		    "them (min-replicas-to-write 1 on the masters refuses "
		    "such writes instead)", n->host, n->port);
		n->alone = 1;
	}
}

/*
 * One attempt: route every pending command, append them to their nodes'
 * contexts (with ASKING and WAIT where needed), write every node's buffer,
 * then read the replies node by node.  Returns the ATT_* flags.
 */
static int
cluster_attempt(struct cluster *c, double deadline, char **waitcause)
{
	struct ccmd	*cmd;
	struct cnode	*n;
	size_t		 i, j;
	int		 flags = 0, done, w;

	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		n->nsent = 0;
		n->waitn = 0;
		n->trouble = 0;
	}
	for (i = 0; i < c->ncmds; i++) {
		cmd = &c->cmds[i];
		if (cmd->reply != NULL)
			continue;
		cmd->asking = (cmd->ask != NULL);
		n = cmd->asking ? cmd->ask : c->slots[cmd->slot];
		cmd->ask = NULL;
		if (n == NULL) {
			free(c->lasterr);
			xasprintf(&c->lasterr, "redis: slot %u is not served",
			    cmd->slot);
			c->refresh = 1;
			flags |= ATT_BACKOFF;
			continue;
		}
		node_push(n, i);
	}

	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		if (n->nsent == 0)
			continue;
		if (node_connect(c, n, deadline) != 0) {
			n->nsent = 0;
			flags |= ATT_BACKOFF;
			continue;
		}
		for (j = 0; j < n->nsent; j++) {
			cmd = &c->cmds[n->sent[j]];
			if ((cmd->asking && redisAppendFormattedCommand(n->ctx,
			    ASKING_CMD, sizeof ASKING_CMD - 1) != REDIS_OK) ||
			    redisAppendFormattedCommand(n->ctx,
			    c->wire.data + cmd->off, cmd->len) != REDIS_OK)
				fatalx("redisAppendFormattedCommand: %s",
				    n->ctx->errstr);
		}
		w = c->wait_replicas < n->replicas ? c->wait_replicas :
		    n->replicas;
		for (j = 0; j < n->nsent; j++)
			if (!c->cmds[n->sent[j]].reads)
				break;
		cluster_alone(c, n, j < n->nsent);
		if (w > 0 && j < n->nsent) {
			if (redisAppendCommand(n->ctx, "WAIT %d %d", w,
			    c->wait_ms) != REDIS_OK)
				fatalx("redisAppendCommand: %s",
				    n->ctx->errstr);
			n->waitn = w;
		}
	}

	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		if (n->nsent == 0)
			continue;
		c->roundtrips++;
		do {
			if (redisBufferWrite(n->ctx, &done) != REDIS_OK) {
				node_fail(c, n);
				n->nsent = 0;
				flags |= ATT_BACKOFF;
				break;
			}
		} while (!done);
	}

	/* Redirections may add nodes: the new ones have nothing sent. */
	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		if (n->nsent != 0)
			flags |= cluster_read(c, n, waitcause);
	}
	return (flags);
}

/*
 * Send every queued command that has no final reply yet, and retry
 * redirected and failed ones until all have one or the timeout passes.
 * Returns 0, or -1 with a cause: the deadline passed, or a WAIT fell short
 * (then the commands it did not confirm are pending again, for another
 * cluster_exec, or the caller may reset and queue them again).
 */
int
cluster_exec(struct cluster *c, char **cause)
{
	double	 deadline, backoff = CLUSTER_BACKOFF_MIN, left;
	char	*waitcause = NULL;
	size_t	 i;
	int	 flags, redirects = 0;

	deadline = now_seconds() + c->timeout;
	free(c->lasterr);
	c->lasterr = NULL;
	for (;;) {
		for (i = 0; i < c->ncmds; i++) {
			if (c->cmds[i].reply == NULL)
				break;
		}
		if (i == c->ncmds)
			return (0);
		/*
		 * Errors and MOVED ask for a new map; so does time, so that
		 * replicas added since are counted for WAIT.
		 */
		if (c->refresh ||
		    now_seconds() - c->refreshed > CLUSTER_REFRESH)
			cluster_refresh(c, deadline);
		flags = cluster_attempt(c, deadline, &waitcause);
		if (c->authfail != NULL) {
			free(waitcause);
			*cause = xstrdup(c->authfail);
			return (-1);
		}
		if (flags & ATT_WAITFAIL) {
			*cause = waitcause;
			return (-1);
		}
		if (!(flags & ATT_BACKOFF) &&
		    (flags == 0 || ++redirects <= CLUSTER_REDIRECTS))
			continue;
		left = deadline - now_seconds();
		if (left <= 0) {
			xasprintf(cause, "%s (gave up after %g s)",
			    c->lasterr != NULL ? c->lasterr :
			    "redis: too many redirections", c->timeout);
			return (-1);
		}
		cluster_sleep(backoff < left ? backoff : left);
		if ((backoff *= 2) > CLUSTER_BACKOFF_MAX)
			backoff = CLUSTER_BACKOFF_MAX;
	}
}

/* The reply to command i, valid until cluster_reset; NULL if none. */
const struct redisReply *
cluster_reply(struct cluster *c, size_t i)
{
	if (i >= c->ncmds)
		fatalx("%s: command %zu of %zu", __func__, i, c->ncmds);
	return (c->cmds[i].reply);
}

/* Commands queued since the last cluster_reset. */
size_t
cluster_queued(struct cluster *c)
{
	return (c->ncmds);
}

/* Free the replies and empty the queue; connections and map stay. */
void
cluster_reset(struct cluster *c)
{
	size_t		 i;
	struct cnode	*n;

	for (i = 0; i < c->ncmds; i++) {
		if (c->cmds[i].reply != NULL)
			freeReplyObject(c->cmds[i].reply);
	}
	c->ncmds = 0;
	if (c->cmdsize * sizeof *c->cmds > TRIM_BYTES) {
		free(c->cmds);
		c->cmds = NULL;
		c->cmdsize = 0;
	}
	buf_trim(&c->wire);
	for (i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		n->nsent = 0;
		if (n->sentsize * sizeof *n->sent > TRIM_BYTES) {
			free(n->sent);
			n->sent = NULL;
			n->sentsize = 0;
		}
	}
}

/*
 * Make every node's pipeline end with WAIT min(replicas, its replicas)
 * timeout_ms; replicas 0 turns it off.  timeout_ms should be under the
 * socket timeout (5 s at most), or a slow WAIT counts as a hung node.
 */
void
cluster_wait(struct cluster *c, int replicas, int timeout_ms)
{
	c->wait_replicas = replicas > 0 ? replicas : 0;
	c->wait_ms = timeout_ms > 0 ? timeout_ms : 0;
}

/* The number of masters in the slot map. */
unsigned
cluster_nodes(struct cluster *c)
{
	cluster_update(c);
	return (c->nmasters);
}

/* The same, as the bound for cluster_queue_node. */
unsigned
cluster_masters(struct cluster *c)
{
	return (cluster_nodes(c));
}

/* Node pipelines sent so far: one per node per attempt. */
uint64_t
cluster_roundtrips(struct cluster *c)
{
	return (c->roundtrips);
}

/* Whether this is a cluster (1) or a single Redis (0). */
int
cluster_is_cluster(struct cluster *c)
{
	return (c->is_cluster);
}
