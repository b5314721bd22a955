/*
 * The Redis backend: one index shared by many mhfilter processes on many
 * machines, in a Redis Cluster or a single Redis (cluster.c talks to it).
 * --db redis://host:port[,host:port...][/namespace]; the namespace, "mhf"
 * by default, lets several indexes share a cluster.
 *
 * Keys (NS is the namespace; codec.c has their bytes and the values'):
 *
 *   {NS}:meta   the parameter records (meta_write), "key=value" lines in
 *               one string (metatext_put), created with SET NX so that two
 *               processes starting at once agree;
 *   {NS}:seq    the last document number handed out (INCRBY): the global
 *               order of documents;
 *   {NS}:floor  documents below it were expired by --max-docs;
 *   {NS}:docs   documents kept, roughly (see redis_stats);
 *   NS:d:N      document N (rval_encode): a state byte ('P' pending, 'K'
 *               kept), the document record, the encoded text;
 *   NS:b:HEX    a band bucket: the numbers of the documents under band key
 *               HEX, 8 bytes big-endian each, in the order they came.
 *   {NS}:undelivered
 *               the delivery marks (layout 4; see below): a sorted set of
 *               ranges of documents whose output may not be written;
 *   {NS}:order  the last ticket given (layout 4; see Concurrency);
 *   {NS}:tickets
 *               the tickets of recent batches: a sorted set of members
 *               FIRST:END:TICKET:TIME scored by FIRST.
 *
 * The {NS} keys share one hash slot; documents and buckets spread over all
 * of them, so the work spreads over the masters.
 *
 * A batch, in round trips (each one pipelined to every node at once):
 *
 *   1. INCRBY {NS}:seq: the batch's document numbers; GET {NS}:order,
 *      the last ticket given so far;
 *   2. SET NS:d:N for each record, state 'P' (pending), with a one-hour
 *      expiry so that a crashed writer's records go away;
 *   3. per band key APPEND our number; then the batch's ticket
 *      (ticket_script); then GET the buckets that held more than our
 *      entry after our APPEND, or every bucket if a ticket was given
 *      between our GET of {NS}:order and ours;
 *   4. GET the candidates' records; the tickets of those still pending;
 *      wait (polling, bounded) for those with a smaller ticket than ours
 *      to be decided;
 *   5. at commit: kept records become 'K' (SET whole, with the retention
 *      expiry), the others are deleted and their bucket entries removed
 *      (a small Lua script per bucket), the delivery marks written; then
 *      WAIT for a replica when the masters have one.  Only then are
 *      verdicts reported.
 *
 * Concurrency.  A record is a duplicate only of a kept document, and a
 * kept document is never dropped, so two writers never both drop a pair.
 * To never both keep one either, writers order their batches by ticket,
 * taken once the batch's APPENDs are all done, and a batch reads what it
 * needs of the buckets after its ticket: so of two batches that share a
 * bucket, the one with the larger ticket always sees the other's entry.
 * Either the other batch's ticket was given before we read {NS}:order,
 * so its APPENDs were done before ours and our APPEND's reply (the
 * bucket's length) shows them; or it was given between that and our
 * ticket, and we read every bucket again after our ticket.  A pending
 * candidate with a smaller ticket is waited for (waits go to smaller
 * tickets only, so they cannot form a cycle); one with a larger ticket,
 * or none yet (lookup_tickets; it is read again first, in case it was
 * decided meanwhile), is passed over: its batch sees this one.  What can
 * still keep both: a writer that stalls or dies holding pending records
 * for PENDING_WAIT (it is passed over), and a failover that loses writes
 * not yet replicated (the batch's APPENDs, its ticket).  A ticket stays
 * until the writer's next commit (its batch was decided by then), or an
 * hour for a writer that died.  mhfilter(1) documents this and
 * tests/e2e/redis.bats counts the pairs kept twice with three writers.
 *
 * Delivery marks (layout 4), the same guarantee as lmdbmarks.c's "Undelivered
 * ranges" and "Several writers": {NS}:undelivered is a sorted set of the
 * ranges of document numbers whose output may not have been written, one
 * member "FIRST:END:OWNER" each (codec.c: rud_encode), scored by FIRST.
 * With INDEX_TRACK a commit adds its batch's range in the same round trip
 * as its documents; once the source has written the batch's output
 * (index_delivered) a later commit removes every range that starts inside
 * it (ZREMRANGEBYSCORE: the pieces that replays cut out of it included),
 * and cuts each replay, an earlier document written again, out of its
 * range (cut_script).  Numbers are handed out by one counter, so a range
 * holds no other writer's documents and ranges never overlap.  Each
 * process keeps in memory the ranges it committed (mine: redis_own) and
 * those of them not delivered yet (pend), and answers for its own
 * documents from there.
 *
 * Whether another range's owner still runs: OWNER is the first document
 * of the writer's first range, a number no other writer can take, and the
 * writer names every connection it makes "mhfilter:NS:OWNER" (CLIENT
 * SETNAME, cluster_set_name) before that range is written.  A writer is
 * running while the master of {NS} lists a connection of that name
 * (CLIENT LIST): Redis drops the connection of a process that dies, kill
 * -9 included, as soon as its kernel closes the socket, so this is the
 * lock of lmdbmarks.c's owners.lock, across machines.  A copy in a running
 * writer's range is seen (that writer writes it, or dies first and then
 * whoever meets it next replays it); in a stopped writer's range it is a
 * replay.  Both lists are read once per batch, at the first copy that
 * needs them: a batch of no copies of earlier documents pays nothing.
 *
 * Retention: --retain sets each kept document's expiry (Redis deletes it);
 * --max-docs advances {NS}:floor and deletes the documents below it, a
 * bounded number per batch.  Bucket entries of documents that are gone are
 * removed when a lookup meets them.
 */

#include "config.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>
#include <jansson.h>

#include "mhfilter.h"

#define NS_DEFAULT	"mhf"
#define NS_MAX		64
#define EXEC_TIMEOUT	30.0	/* seconds of retries (?timeout=) */
#define PENDING_TTL	3600	/* seconds a pending record lives */
#define PENDING_WAIT	90.0	/* seconds to wait for another's decision:
				   more than a writer's own retries */
#define CLEAN_MAX	1024	/* stale bucket entries removed per batch */
#define REPLICA_WAIT_MS	2000	/* WAIT for one replica, when there is one */

#define ST_PENDING	RVAL_PENDING
#define ST_KEPT		RVAL_KEPT
#define ST_GONE		0	/* read back missing: its entries go */
#define ST_PASSED	1	/* pending too long: passed over, kept */
#define ST_CLEANED	2	/* gone, and its entries queued for removal */
#define BUCKET_MAX	1024	/* entries read from one band bucket */
#define EXPIRE_ROUND	10000	/* documents expired per round trip */
#define UD_KEY		"undelivered"	/* {NS}:undelivered */
#define TICKET_LATER	UINT64_MAX	/* a batch with no ticket yet */
#define TICKET_AGE	3600		/* seconds a dead writer's ticket stays */
#define OWNER_NAME	"mhfilter:"	/* connections: mhfilter:NS:OWNER */

/* Remove the 8-byte entries given as ARGV from the bucket KEYS[1]. */
static const char remove_script[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v then return 0 end\n"
    "local drop, out, n = {}, {}, 0\n"
    "for i = 1, #ARGV do drop[ARGV[i]] = true end\n"
    "for i = 1, #v, 8 do\n"
    "  local e = string.sub(v, i, i + 7)\n"
    "  if drop[e] then n = n + 1 else out[#out + 1] = e end\n"
    "end\n"
    "if n == 0 then return 0 end\n"
    "if #out == 0 then redis.call('DEL', KEYS[1])\n"
    "else redis.call('SET', KEYS[1], table.concat(out)) end\n"
    "return n\n";

/* Delete the document KEYS[1] if its state is ARGV[1]; returns 1 if so. */
static const char expire_script[] =
    "local v = redis.call('GETRANGE', KEYS[1], 0, 0)\n"
    "if v == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end\n"
    "return 0\n";

/*
 * Cut each document ARGV[i] out of its range in the sorted set KEYS[1]
 * ({NS}:undelivered): the range becomes the pieces before and after it,
 * with the same owner.  Returns how many were cut.  Numbers stay strings
 * or go through %d: Lua's own conversion would print large ones as
 * 1e+15.
 */
static const char cut_script[] =
    "local n = 0\n"
    "for i = 1, #ARGV do\n"
    "  local d = tonumber(ARGV[i])\n"
    "  local r = redis.call('ZRANGE', KEYS[1], ARGV[i], '-inf', 'BYSCORE',\n"
    "    'REV', 'LIMIT', 0, 1)[1]\n"
    "  local f, e, o\n"
    "  if r then f, e, o = string.match(r, '^(%d+):(%d+):(%d+)$') end\n"
    "  if f and d < tonumber(e) then\n"
    "    redis.call('ZREM', KEYS[1], r)\n"
    "    if tonumber(f) < d then\n"
    "      redis.call('ZADD', KEYS[1], f, f .. ':' .. ARGV[i] .. ':' .. o)\n"
    "    end\n"
    "    if d + 1 < tonumber(e) then\n"
    "      local g = string.format('%d', d + 1)\n"
    "      redis.call('ZADD', KEYS[1], g, g .. ':' .. e .. ':' .. o)\n"
    "    end\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

/*
 * Give up the ranges of KEYS[1] that start in [ARGV[i], ARGV[i + 1]], for
 * each pair i: their owner becomes 0, a stopped writer's to everyone.
 */
static const char abandon_script[] =
    "for i = 1, #ARGV, 2 do\n"
    "  local rs = redis.call('ZRANGE', KEYS[1], ARGV[i], ARGV[i + 1],\n"
    "    'BYSCORE')\n"
    "  for _, m in ipairs(rs) do\n"
    "    local f, e = string.match(m, '^(%d+):(%d+):%d+$')\n"
    "    if f then\n"
    "      redis.call('ZREM', KEYS[1], m)\n"
    "      redis.call('ZADD', KEYS[1], f, f .. ':' .. e .. ':0')\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return 0\n";

/*
 * The batch [ARGV[1], ARGV[2]) has appended all its bucket entries: give
 * it the next ticket ({NS}:order, KEYS[1]) and record it in KEYS[2]
 * ({NS}:tickets), member FIRST:END:TICKET:TIME scored FIRST, at once, so
 * that a ticket is visible from the moment it exists.  Tickets older than
 * ARGV[4] (seconds, ARGV[3] being now) go: their writers died.
 */
static const char ticket_script[] =
    "local t = redis.call('INCRBY', KEYS[1], 1)\n"
    "for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
    "  local at = tonumber(string.match(m, ':(%d+)$'))\n"
    "  if not at or at < tonumber(ARGV[3]) - tonumber(ARGV[4]) then\n"
    "    redis.call('ZREM', KEYS[2], m)\n"
    "  end\n"
    "end\n"
    "redis.call('ZADD', KEYS[2], ARGV[1],\n"
    "  ARGV[1] .. ':' .. ARGV[2] .. ':' .. string.format('%d', t) .. ':' ..\n"
    "  ARGV[3])\n"
    "return t\n";

/* Raise {NS}:floor to ARGV[1] if it is lower; returns the old floor. */
static const char floor_script[] =
    "local f = tonumber(redis.call('GET', KEYS[1]) or '1')\n"
    "if tonumber(ARGV[1]) > f then redis.call('SET', KEYS[1], ARGV[1]) end\n"
    "return f\n";

/* A record of the prepared batch. */
struct rslot {
	uint64_t	 docid;		/* 0: not pending */
	int		 kept;		/* index_insert was called for it */
	int		 flags;		/* DOC_*, as inserted */
	int64_t		 time;
	const uint64_t	*keys;
	size_t		 first;		/* its entries in found */
	size_t		 n;
};

/* A document read in this batch (or written by it). */
struct rdoc {
	uint64_t	 docid;
	int		 state;		/* ST_*, or 0: gone */
	size_t		 off;		/* its value in cache */
	size_t		 len;
	uint64_t	 ticket;	/* its batch's, pending: 0 not asked,
					   TICKET_LATER none (after ours) */
};

/* A bucket entry of a document that is gone, to remove. */
struct stale {
	uint64_t	 key;
	uint64_t	 docid;
};

/* An insertion that was not prepared (--import): done at commit. */
struct later {
	size_t		 off;		/* value (state, record, text) in lbuf */
	size_t		 len;
	int64_t		 time;
	uint64_t	 keys[];
};

struct redis {
	struct index	 base;		/* first: what index.c sees */
	int		 format;	/* as opened (2 read-only, else 3) */
	struct cluster	*c;
	char		*ns;
	char		*hosts;

	struct rslot	*slots;
	size_t		 nslots, slotsize;
	uint64_t	 first_doc;	/* the batch's numbers */
	uint64_t	 seq_seen;	/* the counter's highest value seen */
	size_t		*own;		/* number - first_doc -> its slot */
	size_t		 nown, ownsize;
	struct u64vec	 found;		/* bucket entries, by slot */

	struct rdoc	*docs;		/* read or written this batch */
	size_t		 ndocs, docsize;
	size_t		*ht;		/* docid -> docs index + 1 */
	size_t		 htsize;
	struct buf	 cache;		/* their values */

	struct stale	*stale;
	size_t		 nstale, stalesize;
	struct later	**later;
	size_t		 nlater, latersize;
	struct buf	 lbuf;

	struct textenc	*te;		/* for unprepared insertions */
	struct retention ret;		/* from index_expire, for commit */
	uint64_t	 floor;		/* documents below were expired */
	int64_t		 now;
	uint32_t	*sig;
	struct buf	 key, val;	/* scratch */
	uint64_t	 waits;		/* pending candidates waited for */
	uint64_t	 timeouts;	/* ... in vain */
	uint64_t	 ticket;	/* the batch's place in the order of
					   appends, or 0 (see the top) */
	uint64_t	 order0;	/* the last ticket before our appends */
	uint64_t	 tprev;		/* the first document of our last
					   ticket's batch, or 0 */

	/* Delivery marks (see the top of the file). */
	uint64_t	 owner;		/* our ranges', or 0: none yet */
	struct u64vec	 mine;		/* [first, end) pairs we committed */
	struct u64vec	 pend;		/* those not delivered yet */
	struct u64vec	 dranges;	/* delivered: for the next commit */
	struct u64vec	 dreplays;
	struct u64vec	 aranges;	/* abandoned: first, last pairs */
	int		 uread;		/* uranges read in this batch */
	struct u64vec	 uranges;	/* first, end, owner: every range */
	int		 wread;		/* writers read in this batch */
	struct u64vec	 writers;	/* the owners running, sorted */
};

static int	redis_fail(struct redis *, char **);
static int	reserve_docs(struct redis *, size_t, uint64_t *, char **);
static void	doc_key(struct redis *, uint64_t, struct buf *);
static void	band_key(struct redis *, uint64_t, struct buf *);
static void	ns_key(struct redis *, const char *, struct buf *);
static size_t	q1(struct redis *, const struct buf *, const char *);
static size_t	q2(struct redis *, const struct buf *, const char *,
		    const char *, size_t);
static void	cache_reset(struct redis *);
static struct rdoc *cache_find(struct redis *, uint64_t);
static struct rdoc *cache_add(struct redis *, uint64_t, int, const char *,
		    size_t);
static int	fetch_docs(struct redis *, const uint64_t *, size_t,
		    char **);
static int	take_owner(struct redis *, uint64_t, char **);
static void	queue_zrem(struct redis *, const char *, uint64_t, uint64_t);
static int	redis_scan(struct redis *, int, int (*)(struct redis *,
		    uint64_t, const char *, size_t, void *), void *, char **);

/* {NS}:what, one of the namespace's own keys. */
static void
ns_key(struct redis *r, const char *what, struct buf *k)
{
	rkey_ns(k, r->ns, what);
}

/* NS:d:N, a document. */
static void
doc_key(struct redis *r, uint64_t docid, struct buf *k)
{
	rkey_doc(k, r->ns, docid);
}

/* NS:b:HEX, a band bucket. */
static void
band_key(struct redis *r, uint64_t key, struct buf *k)
{
	rkey_band(k, r->ns, key);
}

/* Queue a one-argument command on key k. */
static size_t
q1(struct redis *r, const struct buf *k, const char *cmd)
{
	const char	*argv[2] = { cmd, k->data };
	size_t		 len[2] = { strlen(cmd), k->len };

	return (cluster_queue(r->c, k->data, k->len, 2, argv, len));
}

/* Queue a two-argument command on key k: cmd k v. */
static size_t
q2(struct redis *r, const struct buf *k, const char *cmd, const char *v,
    size_t vlen)
{
	const char	*argv[3] = { cmd, k->data, v };
	size_t		 len[3] = { strlen(cmd), k->len, vlen };

	return (cluster_queue(r->c, k->data, k->len, 3, argv, len));
}

/* A failed cluster_exec: its cause, with the index named. */
static int
redis_fail(struct redis *r, char **cause)
{
	char	*c = *cause;

	xasprintf(cause, "index %s: %s", r->base.path, c);
	free(c);
	cluster_reset(r->c);
	return (INDEX_ERROR);
}

/* A reply that is an error: the cause.  Returns -1 for convenience. */
static int
reply_error(struct redis *r, const redisReply *rp, const char *what,
    char **cause)
{
	xasprintf(cause, "index %s: %s: %s", r->base.path, what,
	    rp == NULL ? "no reply" : rp->type == REDIS_REPLY_ERROR ?
	    rp->str : "unexpected reply");
	cluster_reset(r->c);
	return (INDEX_ERROR);
}

/* Fail on the first error reply among replies [from, to). */
static int
replies_ok(struct redis *r, size_t from, size_t to, const char *what,
    char **cause)
{
	const redisReply	*rp;

	for (; from < to; from++) {
		rp = cluster_reply(r->c, from);
		if (rp == NULL || rp->type == REDIS_REPLY_ERROR)
			return (reply_error(r, rp, what, cause));
	}
	return (0);
}

/* Take n document numbers from the shared counter; *first is the first. */
static int
reserve_docs(struct redis *r, size_t n, uint64_t *first, char **cause)
{
	const redisReply	*rp;
	char			 num[32];
	long long		 last;

	snprintf(num, sizeof num, "%zu", n);
	ns_key(r, "seq", &r->key);
	q2(r, &r->key, "INCRBY", num, strlen(num));
	/* The last ticket given, before any of our appends (see the top). */
	ns_key(r, "order", &r->key);
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_INTEGER)
		return (reply_error(r, rp, "numbering", cause));
	last = rp->integer;
	*first = (uint64_t)last - n + 1;
	rp = cluster_reply(r->c, 1);
	r->order0 = 0;
	if (rp->type == REDIS_REPLY_STRING)
		r->order0 = strtoull(rp->str, NULL, 10);
	else if (rp->type != REDIS_REPLY_NIL)
		return (reply_error(r, rp, "reading the tickets", cause));
	cluster_reset(r->c);
	/*
	 * The counter only grows: a number we were given, or saw at open,
	 * handed out again means the namespace's keys were lost (a Redis
	 * restarted without persistence, a FLUSHALL) or replaced.  Going on
	 * would take the empty index for a new one and write every earlier
	 * document again as new.
	 */
	if (last <= 0 || *first <= r->seq_seen) {
		xasprintf(cause, "index %s: its document counter went back from "
		    "%" PRIu64 " to %" PRIu64 ": the index was lost (a Redis "
		    "restarted without persistence?) or replaced; stopping",
		    r->base.path, r->seq_seen, *first - 1);
		return (INDEX_ERROR);
	}
	r->seq_seen = *first + n - 1;
	return (0);
}

/* The documents cache of a batch: an array and an open-addressed table. */
static void
cache_reset(struct redis *r)
{
	r->ndocs = 0;
	r->cache.len = 0;
	if (r->ht != NULL)
		memset(r->ht, 0, r->htsize * sizeof *r->ht);
	buf_trim(&r->cache);
}

static struct rdoc *
cache_find(struct redis *r, uint64_t docid)
{
	size_t	 h, i;

	if (r->htsize == 0)
		return (NULL);
	h = (docid * 0x9e3779b97f4a7c15ULL) >> 20;
	for (i = 0; i < r->htsize; i++) {
		h &= r->htsize - 1;
		if (r->ht[h] == 0)
			return (NULL);
		if (r->docs[r->ht[h] - 1].docid == docid)
			return (&r->docs[r->ht[h] - 1]);
		h++;
	}
	return (NULL);
}

static void
cache_insert(struct redis *r, size_t idx)
{
	size_t	 h;

	h = (r->docs[idx].docid * 0x9e3779b97f4a7c15ULL) >> 20;
	for (;; h++) {
		h &= r->htsize - 1;
		if (r->ht[h] == 0) {
			r->ht[h] = idx + 1;
			return;
		}
	}
}

/* Add (or replace) a document's value in the cache. */
static struct rdoc *
cache_add(struct redis *r, uint64_t docid, int state, const char *v,
    size_t len)
{
	struct rdoc	*d;
	size_t		 i;

	if ((d = cache_find(r, docid)) == NULL) {
		if (2 * (r->ndocs + 1) > r->htsize) {
			r->htsize = r->htsize ? 2 * r->htsize : 1024;
			free(r->ht);
			r->ht = xcalloc(r->htsize, sizeof *r->ht);
			for (i = 0; i < r->ndocs; i++)
				cache_insert(r, i);
		}
		if (r->ndocs == r->docsize) {
			r->docsize = r->docsize ? 2 * r->docsize : 1024;
			r->docs = xreallocarray(r->docs, r->docsize,
			    sizeof *r->docs);
		}
		d = &r->docs[r->ndocs];
		d->docid = docid;
		d->ticket = 0;
		cache_insert(r, r->ndocs++);
	}
	d->state = state;
	d->off = r->cache.len;
	d->len = len;
	buf_append(&r->cache, v, len);
	return (d);
}

/* Parse redis://host:port[,host:port...][/ns][?timeout=SECONDS]. */
static int
parse_url(const char *url, char **hosts, char **ns, double *timeout,
    char **cause)
{
	const char	*h = url + strlen("redis://"), *slash, *q;
	char		*c;
	size_t		 i;

	*timeout = EXEC_TIMEOUT;
	if ((q = strchr(h, '?')) == NULL)
		q = h + strlen(h);
	else if (strncmp(q, "?timeout=", 9) != 0 ||
	    parse_double(q + 9, 0.1, 86400, timeout, &c) != 0) {
		if (strncmp(q, "?timeout=", 9) == 0)
			free(c);
		xasprintf(cause, "%s: the only option is ?timeout=SECONDS "
		    "(0.1 to 86400)", url);
		return (INDEX_ERROR);
	}
	if ((slash = memchr(h, '/', q - h)) == NULL) {
		*hosts = xstrndup(h, q - h);
		*ns = xstrdup(NS_DEFAULT);
	} else {
		*hosts = xstrndup(h, slash - h);
		*ns = slash + 1 < q ? xstrndup(slash + 1, q - slash - 1) :
		    xstrdup(NS_DEFAULT);
	}
	if (**hosts == '\0') {
		xasprintf(cause, "%s: no host (redis://HOST:PORT[/NS])", url);
		goto fail;
	}
	for (i = 0; (*ns)[i] != '\0'; i++) {
		if (!isalnum((unsigned char)(*ns)[i]) && (*ns)[i] != '_' &&
		    (*ns)[i] != '-' && (*ns)[i] != '.')
			break;
	}
	if ((*ns)[i] != '\0' || i > NS_MAX) {
		xasprintf(cause, "%s: the namespace may have up to %d letters, "
		    "digits, '_', '-' and '.'", url, NS_MAX);
		goto fail;
	}
	return (0);
fail:
	free(*hosts);
	free(*ns);
	*hosts = *ns = NULL;
	return (INDEX_ERROR);
}

/* GET a {NS} counter; 0 when it does not exist. */
static int
get_counter(struct redis *r, const char *what, uint64_t *v, char **cause)
{
	const redisReply	*rp;
	char			*c;

	ns_key(r, what, &r->key);
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type == REDIS_REPLY_NIL)
		*v = 0;
	else if (rp->type == REDIS_REPLY_STRING && rp->str[0] == '-')
		*v = 0;		/* "docs" counts down below 0 at times */
	else if (rp->type == REDIS_REPLY_STRING) {
		if (parse_uint(rp->str, 0, INT64_MAX, v, &c) != 0) {
			free(c);
			return (reply_error(r, rp, what, cause));
		}
	} else
		return (reply_error(r, rp, what, cause));
	cluster_reset(r->c);
	return (0);
}

static void	redis_close(struct index *);
static void	redis_abort(struct index *);

/*
 * --redis-password-file: read the credentials every Redis connection
 * authenticates with (cluster_auth), one line: "password" (the default
 * user's, requirepass) or "user password" (an ACL user).  Returns 0, or
 * -1 with a cause that never holds the password.
 */
static int
redis_password_file(const char *path, char **cause)
{
	FILE		*f;
	struct stat	 st;
	char		 line[1024], *sp;
	size_t		 len;
	int		 rv = -1;

	if ((f = fopen(path, "re")) == NULL) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return (-1);
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & S_IROTH))
		log_warnx("--redis-password-file %s is readable by every user",
		    path);
	if (fgets(line, sizeof line, f) == NULL) {
		xasprintf(cause, "%s: %s", path, ferror(f) ? strerror(errno) :
		    "empty (one line: password, or user password)");
		goto out;
	}
	len = strcspn(line, "\r\n");
	if (line[len] == '\0' && len == sizeof line - 1) {
		xasprintf(cause, "%s: the line is over %zu bytes", path,
		    sizeof line - 2);
		goto out;
	}
	line[len] = '\0';
	sp = strchr(line, ' ');
	if (len == 0 || line[0] == ' ' || (sp != NULL &&
	    (sp[1] == '\0' || strchr(sp + 1, ' ') != NULL))) {
		xasprintf(cause, "%s: expected one line: password, or user "
		    "and password separated by one space", path);
		goto out;
	}
	if (sp != NULL) {
		*sp = '\0';
		cluster_auth(line, sp + 1);
	} else
		cluster_auth(NULL, line);
	rv = 0;
out:
	explicit_bzero(line, sizeof line);
	fclose(f);
	return (rv);
}

/* A Redis index may exist wherever the URL points: only opening tells. */
static int
redis_exists(const char *path, uint64_t *size)
{
	(void)path;
	*size = 0;
	return (1);
}

/*
 * Connect, and create or check the parameter records.  The arguments are
 * index_open's.
 */
static int
redis_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	struct redis		*r;
	const redisReply	*rp;
	struct metatext		 m;
	struct buf		 text = { 0 };
	uint64_t		 seq;
	double			 timeout;
	char			 stored[16];
	int			 rc, old, rv = INDEX_ERROR;

	r = xcalloc(1, sizeof *r);
	r->base.flags = flags;
	r->base.p = *p;
	r->base.path = xstrdup(path);
	if (parse_url(path, &r->hosts, &r->ns, &timeout, cause) != 0)
		goto fail;
	if ((r->c = cluster_connect(r->hosts, timeout, cause)) == NULL)
		goto fail;
	cluster_wait(r->c, 1, REPLICA_WAIT_MS);

	/* The parameters: create them if there are none (SET NX). */
	ns_key(r, "meta", &r->key);
	if (!(flags & INDEX_RDONLY)) {
		const char	*argv[4];
		size_t		 len[4];

		m.out = &text;
		meta_write(p, MHF_REDIS_FORMAT, time(NULL), metatext_put, &m);
		argv[0] = "SET";
		len[0] = 3;
		argv[1] = r->key.data;
		len[1] = r->key.len;
		argv[2] = text.data;
		len[2] = text.len;
		argv[3] = "NX";
		len[3] = 2;
		cluster_queue(r->c, r->key.data, r->key.len, 4, argv, len);
	}
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0) {
		redis_fail(r, cause);
		goto fail;
	}
	if (!(flags & INDEX_RDONLY) &&
	    replies_ok(r, 0, 1, "writing the parameters", cause) != 0)
		goto fail;
	rp = cluster_reply(r->c, (flags & INDEX_RDONLY) ? 0 : 1);
	if (rp->type == REDIS_REPLY_NIL) {
		xasprintf(cause, "%s is an empty index", path);
		goto fail;
	}
	if (rp->type != REDIS_REPLY_STRING) {
		reply_error(r, rp, "reading the parameters", cause);
		goto fail;
	}
	m.s = rp->str;
	m.len = rp->len;
	/*
	 * Layouts 2 and 3 are read as they are (2 has no LZ4 texts, neither
	 * has delivery marks, which means everything was delivered), and
	 * upgraded by a writable open, which rewrites the "format" line
	 * alone, so that an older mhfilter refuses the index instead of
	 * finding texts it cannot decode or writing without marks.
	 */
	old = 0;
	if (metatext_get(&m, "format", stored, sizeof stored) == 0 &&
	    (strcmp(stored, "2") == 0 || strcmp(stored, "3") == 0))
		old = stored[0] - '0';
	r->format = old && (flags & INDEX_RDONLY) ? old : MHF_REDIS_FORMAT;
	if ((rc = meta_read(&r->base.p, old ? old : MHF_REDIS_FORMAT, given,
	    path, metatext_get, &m, cause)) != 0) {
		rv = rc;
		goto fail;
	}
	if (old && !(flags & INDEX_RDONLY)) {
		text.len = 0;
		metatext_set_format(&m, MHF_REDIS_FORMAT, &text);
		cluster_reset(r->c);
		q2(r, &r->key, "SET", text.data, text.len);
		if (cluster_exec(r->c, cause) != 0) {
			redis_fail(r, cause);
			goto fail;
		}
		if (replies_ok(r, 0, 1, "upgrading the parameters",
		    cause) != 0)
			goto fail;
		log_info("%s: upgraded from Redis index format %d to %d", path,
		    old, MHF_REDIS_FORMAT);
	}
	cluster_reset(r->c);
	if (get_counter(r, "seq", &seq, cause) != 0)
		goto fail;
	r->base.run_doc = seq + 1;
	r->seq_seen = seq;
	r->sig = xcalloc(r->base.p.perms, sizeof *r->sig);
	buf_free(&text);
	*p = r->base.p;
	*ixp = &r->base;
	return (0);
fail:
	buf_free(&text);
	redis_close(&r->base);
	return (rv);
}

static void
redis_close(struct index *base)
{
	struct redis	*r = (struct redis *)base;
	size_t		 i;
	char		*cause;

	if (r == NULL)
		return;
	if (r->c != NULL && r->tprev != 0) {
		/* Our last ticket, which nobody needs now (best effort). */
		cluster_reset(r->c);
		queue_zrem(r, "tickets", r->tprev, r->tprev);
		if (cluster_exec(r->c, &cause) != 0)
			free(cause);
	}
	if (r->c != NULL)
		cluster_close(r->c);
	for (i = 0; i < r->nlater; i++)
		free(r->later[i]);
	free(r->later);
	buf_free(&r->lbuf);
	free(r->slots);
	free(r->own);
	u64vec_free(&r->found);
	free(r->docs);
	free(r->ht);
	buf_free(&r->cache);
	free(r->stale);
	free(r->sig);
	u64vec_free(&r->mine);
	u64vec_free(&r->pend);
	u64vec_free(&r->dranges);
	u64vec_free(&r->dreplays);
	u64vec_free(&r->aranges);
	u64vec_free(&r->uranges);
	u64vec_free(&r->writers);
	textenc_free(r->te);
	buf_free(&r->key);
	buf_free(&r->val);
	free(r->ns);
	free(r->hosts);
	free(r->base.path);
	free(r);
}

/* Forget the batch. */
static void
batch_reset(struct redis *r)
{
	size_t	 i;

	r->nslots = 0;
	r->nown = 0;
	r->first_doc = 0;
	r->found.n = 0;
	u64vec_trim(&r->found);
	r->nstale = 0;
	for (i = 0; i < r->nlater; i++)
		free(r->later[i]);
	r->nlater = 0;
	r->lbuf.len = 0;
	buf_trim(&r->lbuf);
	r->uread = r->wread = 0;
	r->ticket = 0;
	cache_reset(r);
	cluster_reset(r->c);
}

static int
redis_begin(struct index *base, char **cause)
{
	struct redis	*r = (struct redis *)base;

	(void)cause;
	batch_reset(r);
	r->now = time(NULL);
	r->floor = 0;
	return (0);
}

/* The pending record a prepared slot writes: state, record, text. */
static void
slot_value(struct redis *r, const struct ixdoc *d, int64_t when,
    struct buf *out)
{
	out->len = 0;
	rval_encode(out, ST_PENDING, r->base.p.perms, d->sig, d->id, d->idlen,
	    d->flags, when, r->base.p.texts ? d->enc : NULL, d->enclen);
}

/* Is docid one of this batch's? */
static struct rslot *
own_slot(struct redis *r, uint64_t docid)
{
	if (docid < r->first_doc || docid - r->first_doc >= r->nown)
		return (NULL);
	return (&r->slots[r->own[docid - r->first_doc]]);
}

/*
 * Read the records of the given documents into the cache (rounds 4 and
 * 4b).  A record that is gone is cached as state 0.
 */
static int
fetch_docs(struct redis *r, const uint64_t *ids, size_t n, char **cause)
{
	const redisReply	*rp;
	struct rdoc		*d;
	size_t			 i;

	cluster_reset(r->c);
	for (i = 0; i < n; i++) {
		doc_key(r, ids[i], &r->key);
		q1(r, &r->key, "GET");
	}
	if (n == 0)
		return (0);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	for (i = 0; i < n; i++) {
		rp = cluster_reply(r->c, i);
		if (rp->type == REDIS_REPLY_NIL)
			cache_add(r, ids[i], ST_GONE, NULL, 0);
		else if (rp->type == REDIS_REPLY_STRING && rp->len > 1 &&
		    rp->str[0] == ST_PENDING && (d = cache_find(r,
		    ids[i])) != NULL && d->state == ST_PENDING)
			continue;	/* polled again: nothing new */
		else if (rp->type == REDIS_REPLY_STRING && rp->len > 1 &&
		    (rp->str[0] == ST_PENDING || rp->str[0] == ST_KEPT))
			cache_add(r, ids[i], rp->str[0], rp->str, rp->len);
		else {
			xasprintf(cause, "index %s: document %" PRIu64 " is "
			    "corrupt", r->base.path, ids[i]);
			cluster_reset(r->c);
			return (INDEX_ERROR);
		}
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * Round 2: the batch's records, pending, under the numbers from
 * first_doc on (a read-only run only notes its records' keys and times).
 */
static int
write_pending(struct redis *r, const struct ixdoc *docs, size_t n,
    char **cause)
{
	struct rslot	*s;
	uint64_t	 docid = r->first_doc;
	size_t		 i;
	int		 rdonly = r->base.flags & INDEX_RDONLY;

	for (i = 0; i < n; i++) {
		s = &r->slots[i];
		if (!docs[i].pending)
			continue;
		s->keys = docs[i].keys;
		s->time = docs[i].time != 0 ? docs[i].time : r->now;
		if (rdonly) {
			s->docid = UINT64_MAX;
			continue;
		}
		r->own[r->nown++] = i;
		s->docid = docid++;
		slot_value(r, &docs[i], s->time, &r->val);
		cache_add(r, s->docid, ST_PENDING, r->val.data, r->val.len);
		doc_key(r, s->docid, &r->key);
		{
			const char	*argv[5] = { "SET", r->key.data,
					    r->val.data, "EX", "3600" };
			size_t		 len[5] = { 3, r->key.len, r->val.len,
					    2, 4 };

			cluster_queue(r->c, r->key.data, r->key.len, 5, argv,
			    len);
		}
	}
	if (rdonly)
		return (0);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	if (replies_ok(r, 0, r->nown, "writing documents", cause) != 0)
		return (INDEX_ERROR);
	cluster_reset(r->c);
	return (0);
}

/*
 * A bucket read in round 3, into the slot's entries in found: every
 * document but the slot's own, at most BUCKET_MAX, each once (an APPEND
 * may have been retried).
 */
static int
take_bucket(struct redis *r, const struct rslot *s, const redisReply *rp,
    struct u64vec *scratch, char **cause)
{
	uint64_t	 docid;
	size_t		 e, k = r->found.n, m, w;

	if (rp->type == REDIS_REPLY_NIL)
		return (0);
	if (rp->type != REDIS_REPLY_STRING || rp->len % 8)
		return (reply_error(r, rp, "band lookup", cause));
	for (e = 0; e + 8 <= rp->len && r->found.n - k < BUCKET_MAX; e += 8) {
		docid = get_be64((unsigned char *)rp->str + e);
		if (docid == s->docid || docid == 0)
			continue;
		u64vec_push(&r->found, docid);
	}
	if (r->found.n - k > 1) {
		sort_u64(r->found.v + k, r->found.n - k, scratch);
		for (m = w = k + 1; m < r->found.n; m++)
			if (r->found.v[m] != r->found.v[w - 1])
				r->found.v[w++] = r->found.v[m];
		r->found.n = w;
	}
	return (0);
}

/*
 * Round 3b: the batch's ticket, once every entry of it is appended
 * (ticket_script): r->ticket.
 */
static int
take_ticket(struct redis *r, char **cause)
{
	const redisReply	*rp;
	struct buf		 k2 = { 0 };
	char			 f[24], e[24], now[24], age[24];
	const char		*argv[9];
	size_t			 len[9];
	int			 i;

	ns_key(r, "order", &r->key);
	rkey_ns(&k2, r->ns, "tickets");
	snprintf(f, sizeof f, "%" PRIu64, r->first_doc);
	snprintf(e, sizeof e, "%" PRIu64, r->first_doc + r->nown);
	snprintf(now, sizeof now, "%lld", (long long)time(NULL));
	snprintf(age, sizeof age, "%d", TICKET_AGE);
	argv[0] = "EVAL";
	argv[1] = ticket_script;
	argv[2] = "2";
	argv[3] = r->key.data;
	argv[4] = k2.data;
	argv[5] = f;
	argv[6] = e;
	argv[7] = now;
	argv[8] = age;
	len[3] = r->key.len;
	len[4] = k2.len;
	for (i = 0; i < 9; i++)
		if (i != 3 && i != 4)
			len[i] = strlen(argv[i]);
	cluster_reset(r->c);
	cluster_queue(r->c, r->key.data, r->key.len, 9, argv, len);
	buf_free(&k2);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_INTEGER || rp->integer <= 0)
		return (reply_error(r, rp, "ticket", cause));
	r->ticket = (uint64_t)rp->integer;
	cluster_reset(r->c);
	return (0);
}

/*
 * The tickets of the batches of these pending documents, into the cache:
 * that of the member of {NS}:tickets whose range holds it, or
 * TICKET_LATER when there is none (a batch given its ticket after ours,
 * or not yet: see the top of the file).
 */
static int
lookup_tickets(struct redis *r, const uint64_t *ids, size_t n,
    char **cause)
{
	const redisReply	*rp;
	uint64_t		 v[4];
	const char		*p, *end;
	char			 num[24];
	size_t			 i, f;

	cluster_reset(r->c);
	ns_key(r, "tickets", &r->key);
	for (i = 0; i < n; i++) {
		const char	*argv[8] = { "ZRANGE", r->key.data, num, "-inf",
				    "BYSCORE", "REV", "LIMIT", "0" };
		size_t		 len[9];
		const char	*argv9[9];

		snprintf(num, sizeof num, "%" PRIu64, ids[i]);
		memcpy(argv9, argv, sizeof argv);
		argv9[8] = "1";
		for (f = 0; f < 9; f++)
			len[f] = f == 1 ? r->key.len : strlen(argv9[f]);
		cluster_queue(r->c, r->key.data, r->key.len, 9, argv9, len);
	}
	if (n != 0 && cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	for (i = 0; i < n; i++) {
		rp = cluster_reply(r->c, i);
		if (rp->type != REDIS_REPLY_ARRAY)
			return (reply_error(r, rp, "ticket lookup", cause));
		cache_find(r, ids[i])->ticket = TICKET_LATER;
		if (rp->elements == 0 ||
		    rp->element[0]->type != REDIS_REPLY_STRING)
			continue;
		/* FIRST:END:TICKET:TIME */
		p = rp->element[0]->str;
		end = p + rp->element[0]->len;
		for (f = 0; f < 4 && p < end; f++, p++) {
			for (v[f] = 0; p < end && *p >= '0' && *p <= '9'; p++)
				v[f] = v[f] * 10 + (uint64_t)(*p - '0');
			if (p < end && *p != ':')
				break;
		}
		if (f == 4 && v[0] <= ids[i] && ids[i] < v[1] && v[2] != 0)
			cache_find(r, ids[i])->ticket = v[2];
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * Round 3: append to each bucket, then read back those that hold more
 * than our own entry (APPEND's reply, the bucket's length after it,
 * says), in a second round trip: a unique document's buckets are mostly
 * its own, and a GET of each would be half of Redis's work.  Of two
 * writers on one bucket the later APPEND sees the earlier entry, which
 * is what the concurrency argument (the top of the file) needs.  A
 * read-only run reads every bucket.  Between the two, the batch takes its
 * ticket (take_ticket).
 */
static int
read_buckets(struct redis *r, size_t n, char **cause)
{
	const redisReply *rp;
	struct rslot	*s;
	struct u64vec	 scratch = { 0 };
	unsigned	 b = r->base.p.bands, j;
	unsigned char	 be[8], *need = NULL;
	size_t		 i, k, q;
	int		 rdonly = r->base.flags & INDEX_RDONLY, rc = 0;

	if (!rdonly) {
		for (i = 0; i < n; i++) {
			s = &r->slots[i];
			if (s->docid == 0)
				continue;
			put_be64(be, s->docid);
			for (j = 0; j < b; j++) {
				band_key(r, s->keys[j], &r->key);
				q2(r, &r->key, "APPEND", (char *)be, 8);
			}
		}
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		need = xmalloc(cluster_queued(r->c) + 1);
		for (k = 0; k < cluster_queued(r->c); k++) {
			rp = cluster_reply(r->c, k);
			if (rp == NULL || rp->type != REDIS_REPLY_INTEGER) {
				free(need);
				return (reply_error(r, rp, "band append",
				    cause));
			}
			need[k] = rp->integer > 8;
		}
		cluster_reset(r->c);
		if (r->nown != 0 && take_ticket(r, cause) != 0) {
			free(need);
			return (INDEX_ERROR);
		}
		/*
		 * Tickets given between our reading of the order and ours:
		 * those batches may have appended after we did, so every
		 * bucket is read again, after our ticket.
		 */
		if (r->ticket > r->order0 + 1)
			memset(need, 1, k);
	}
	for (i = k = 0; i < n; i++) {
		s = &r->slots[i];
		if (s->docid == 0)
			continue;
		for (j = 0; j < b; j++, k++) {
			if (need != NULL && !need[k])
				continue;
			band_key(r, s->keys[j], &r->key);
			q1(r, &r->key, "GET");
		}
	}
	if (cluster_queued(r->c) != 0 && cluster_exec(r->c, cause) != 0) {
		free(need);
		return (redis_fail(r, cause));
	}
	for (i = k = q = 0; i < n && rc == 0; i++) {
		s = &r->slots[i];
		if (s->docid == 0)
			continue;
		s->first = r->found.n;
		for (j = 0; j < b && rc == 0; j++, k++) {
			if (need == NULL || need[k])
				rc = take_bucket(r, s, cluster_reply(r->c,
				    q++), &scratch, cause);
		}
		s->n = r->found.n - s->first;
	}
	free(need);
	u64vec_free(&scratch);
	if (rc != 0)
		return (rc);
	cluster_reset(r->c);
	return (0);
}

/*
 * Round 4b: the candidates still pending of other writers.  Their
 * tickets first: one with a smaller ticket than ours is waited for (its
 * writer decides it without waiting for us); one with none is read once
 * more, and passed over if still pending (its batch took its ticket
 * after ours, so it will see this batch's entries); one with a larger
 * ticket is passed over.  want is scratch.
 */
static int
wait_pending(struct redis *r, struct u64vec *want, char **cause)
{
	struct rdoc	*d;
	double		 deadline, pause;
	size_t		 i, k;

	if (r->ticket == 0)
		return (0);		/* read-only: nobody waits for us */
	want->n = 0;
	for (i = 0; i < r->ndocs; i++) {
		d = &r->docs[i];
		if (d->state == ST_PENDING && d->ticket == 0 &&
		    own_slot(r, d->docid) == NULL)
			u64vec_push(want, d->docid);
	}
	if (want->n != 0 && lookup_tickets(r, want->v, want->n, cause) != 0)
		return (INDEX_ERROR);
	k = 0;
	for (i = 0; i < want->n; i++)
		if (cache_find(r, want->v[i])->ticket == TICKET_LATER)
			want->v[k++] = want->v[i];
	want->n = k;
	if (k != 0 && fetch_docs(r, want->v, want->n, cause) != 0)
		return (INDEX_ERROR);

	deadline = now_seconds() + PENDING_WAIT;
	pause = 0.001;
	for (;;) {
		want->n = 0;
		for (i = 0; i < r->ndocs; i++) {
			d = &r->docs[i];
			if (d->state == ST_PENDING && d->ticket != 0 &&
			    d->ticket < r->ticket &&
			    own_slot(r, d->docid) == NULL)
				u64vec_push(want, d->docid);
		}
		if (want->n == 0)
			return (0);
		if (now_seconds() > deadline) {
			/* A writer that died: treat them as gone. */
			for (k = 0; k < want->n; k++)
				cache_find(r, want->v[k])->state = ST_PASSED;
			r->timeouts += want->n;
			log_warnx("index %s: %zu candidates still pending "
			    "after %.0f s; passed over", r->base.path, want->n,
			    PENDING_WAIT);
			return (0);
		}
		r->waits += want->n;
		usleep(pause * 1e6);
		if (pause < 0.05)
			pause *= 2;
		if (fetch_docs(r, want->v, want->n, cause) != 0)
			return (INDEX_ERROR);
	}
}

/*
 * The whole batch's writes and lookups, in four rounds (see the top of
 * the file).  Afterwards every candidate of every record is in the cache,
 * decided (kept or gone) unless it belongs to this batch.
 */
static int
redis_prepare(struct index *base, const struct ixdoc *docs, size_t n,
    char **cause)
{
	struct redis		*r = (struct redis *)base;
	struct u64vec		 want = { 0 };
	size_t			 i, k, np = 0;
	uint64_t		 docid;
	int			 rdonly = r->base.flags & INDEX_RDONLY, rc;

	if (n > r->slotsize) {
		r->slotsize = n;
		r->slots = xreallocarray(r->slots, n, sizeof *r->slots);
	}
	r->nslots = n;
	for (i = 0; i < n; i++) {
		memset(&r->slots[i], 0, sizeof r->slots[i]);
		np += docs[i].pending != 0;
	}
	if (np == 0)
		return (0);
	if (np > r->ownsize) {
		r->ownsize = np;
		r->own = xreallocarray(r->own, np, sizeof *r->own);
	}

	/* 1. Numbers for the batch; 2. the records; 3. the buckets. */
	r->first_doc = UINT64_MAX;
	if (!rdonly && reserve_docs(r, np, &r->first_doc, cause) != 0)
		return (INDEX_ERROR);
	/* Our connections are named before anything of ours is written. */
	if (!rdonly && (r->base.flags & INDEX_TRACK) && r->owner == 0 &&
	    take_owner(r, r->first_doc, cause) != 0)
		return (INDEX_ERROR);
	if ((rc = write_pending(r, docs, n, cause)) != 0 ||
	    (rc = read_buckets(r, n, cause)) != 0)
		return (rc);

	/* 4. The candidates' records, but for this batch's own. */
	for (k = 0; k < r->found.n; k++) {
		docid = r->found.v[k];
		if (own_slot(r, docid) == NULL &&
		    cache_find(r, docid) == NULL) {
			cache_add(r, docid, ST_GONE, NULL, 0);	/* once */
			u64vec_push(&want, docid);
		}
	}
	if ((rc = fetch_docs(r, want.v, want.n, cause)) == 0)
		rc = wait_pending(r, &want, cause);
	u64vec_free(&want);
	return (rc);
}

/*
 * The candidates of a prepared record; unprepared lookups (INDEX_NOSLOT)
 * read the buckets now.
 */
static int
redis_candidates(struct index *base, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	struct redis		*r = (struct redis *)base;
	const redisReply	*rp;
	struct rslot		*s;
	unsigned		 j;
	size_t			 e;

	if (slot != INDEX_NOSLOT && slot < r->nslots &&
	    r->slots[slot].docid != 0) {
		s = &r->slots[slot];
		for (e = 0; e < s->n; e++)
			u64vec_push(out, r->found.v[s->first + e]);
		return (0);
	}
	cluster_reset(r->c);
	for (j = 0; j < r->base.p.bands; j++) {
		band_key(r, keys[j], &r->key);
		q1(r, &r->key, "GET");
	}
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	for (j = 0; j < r->base.p.bands; j++) {
		rp = cluster_reply(r->c, j);
		if (rp->type == REDIS_REPLY_NIL)
			continue;
		if (rp->type != REDIS_REPLY_STRING || rp->len % 8)
			return (reply_error(r, rp, "band lookup", cause));
		for (e = 0; e + 8 <= rp->len; e += 8)
			u64vec_push(out, get_be64((unsigned char *)rp->str + e));
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * A document as a candidate: kept ones only.  One of this batch counts
 * once index_insert has kept it; another writer's pending one that was
 * not waited for is passed over (INDEX_GONE), as is one that is gone, and
 * its bucket entries are then removed at commit.
 */
static int
redis_doc(struct index *base, uint64_t docid, struct docinfo *d,
    char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct rdoc	*rd;
	struct rslot	*s;
	size_t		 len;
	int		 state;

	if ((rd = cache_find(r, docid)) == NULL) {
		if (fetch_docs(r, &docid, 1, cause) != 0)
			return (INDEX_ERROR);
		rd = cache_find(r, docid);
	}
	if ((s = own_slot(r, docid)) != NULL) {
		if (!s->kept)
			return (INDEX_GONE);
	} else if (rd->state != ST_KEPT)
		return (INDEX_GONE);
	len = rval_decode(r->cache.data + rd->off, rd->len, r->base.p.perms,
	    r->sig, d, &state);
	if (len == 0) {
		xasprintf(cause, "index %s: document %" PRIu64 " is corrupt",
		    r->base.path, docid);
		return (INDEX_ERROR);
	}
	d->docid = docid;
	if (s != NULL)
		d->flags = s->flags;
	return (0);
}

/* A document's text, from its record. */
static int
redis_text(struct index *base, uint64_t docid, struct buf *out,
    char **cause)
{
	struct redis		*r = (struct redis *)base;
	struct docinfo		 d;
	struct rdoc		*rd;
	size_t			 len;
	int			 rc, state;

	if ((rc = redis_doc(base, docid, &d, cause)) != 0) {
		if (rc == INDEX_GONE)
			xasprintf(cause, "index %s: document %" PRIu64 " is "
			    "gone", r->base.path, docid);
		return (INDEX_ERROR);
	}
	rd = cache_find(r, docid);
	len = rval_decode(r->cache.data + rd->off, rd->len, r->base.p.perms,
	    NULL, &d, &state);
	if ((rc = text_decode((const unsigned char *)r->cache.data + rd->off +
	    len, rd->len - len, out)) < 0) {
		xasprintf(cause, "index %s: text of document %" PRIu64 " is "
		    "corrupt", r->base.path, docid);
		return (INDEX_ERROR);
	}
	return (rc);
}

/*
 * Keep a document.  A prepared one is already written: it is marked kept
 * at commit.  Another (--import) is written whole at commit.
 */
static int
redis_insert(struct index *base, size_t slot, const uint64_t *keys,
    const uint32_t *sig, const char *id, size_t idlen, const char *text,
    size_t textlen, const char *enc, size_t enclen, int flags, int64_t when,
    char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct later	*l;
	struct buf	 tbuf = { 0 };

	if (idlen > UINT32_MAX) {
		xasprintf(cause, "id too long");
		return (INDEX_ERROR);
	}
	if (slot != INDEX_NOSLOT && slot < r->nslots &&
	    r->slots[slot].docid != 0 && r->slots[slot].docid != UINT64_MAX) {
		r->slots[slot].kept = 1;
		r->slots[slot].flags = flags;
		return (0);
	}
	if (when == 0)
		when = r->now;
	if (r->base.p.texts && enc == NULL) {
		if (r->te == NULL)
			r->te = textenc_create();
		textenc_encode(r->te, text, textlen, flags, &tbuf);
		enc = tbuf.data;
		enclen = tbuf.len;
	}
	l = xmalloc(sizeof *l + r->base.p.bands * sizeof *keys);
	memcpy(l->keys, keys, r->base.p.bands * sizeof *keys);
	l->time = when;
	l->off = r->lbuf.len;
	rval_encode(&r->lbuf, ST_KEPT, r->base.p.perms, sig, id, idlen, flags,
	    when, r->base.p.texts ? enc : NULL, enclen);
	l->len = r->lbuf.len - l->off;
	if (r->nlater == r->latersize) {
		r->latersize = r->latersize ? 2 * r->latersize : 64;
		r->later = xreallocarray(r->later, r->latersize,
		    sizeof *r->later);
	}
	r->later[r->nlater++] = l;
	buf_free(&tbuf);
	return (0);
}

/*
 * Queue EVAL of a script on key k with one argument.  Redis caches the
 * compiled script by its hash, so sending the text costs only bytes.
 */
static void
queue_eval(struct redis *r, const char *script, const struct buf *k,
    const char *arg, size_t arglen)
{
	const char	*argv[5] = { "EVAL", script, "1", k->data, arg };
	size_t		 len[5] = { 4, strlen(script), 1, k->len, arglen };

	cluster_queue(r->c, k->data, k->len, 5, argv, len);
}

/* Queue the removal of one entry from one bucket. */
static void
queue_unlink(struct redis *r, uint64_t key, uint64_t docid)
{
	unsigned char	 be[8];

	put_be64(be, docid);
	band_key(r, key, &r->key);
	queue_eval(r, remove_script, &r->key, (char *)be, 8);
}

/* SET a kept document's record, with its expiry under --retain. */
static void
queue_set(struct redis *r, const struct buf *k, const struct buf *v,
    int64_t when)
{
	const char	*argv[5] = { "SET", k->data, v->data, "EXAT", NULL };
	size_t		 len[5] = { 3, k->len, v->len, 4, 0 };
	char		 at[32];

	if (r->ret.max_age != 0) {
		snprintf(at, sizeof at, "%lld",
		    (long long)(when + r->ret.max_age));
		argv[4] = at;
		len[4] = strlen(at);
		cluster_queue(r->c, k->data, k->len, 5, argv, len);
	} else
		cluster_queue(r->c, k->data, k->len, 3, argv, len);
}

/* Is docid in one of the [first, end) pairs of v (in order, apart)? */
static int
pairs_has(const struct u64vec *v, uint64_t docid)
{
	size_t	 lo = 0, hi = v->n / 2, mid;

	while (lo < hi) {		/* the last pair starting <= docid */
		mid = lo + (hi - lo) / 2;
		if (v->v[2 * mid] <= docid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo > 0 && docid < v->v[2 * (lo - 1) + 1]);
}

/* Append [first, end), past every pair of v, to v (merged if adjacent). */
static void
pairs_add(struct u64vec *v, uint64_t first, uint64_t end)
{
	if (v->n > 0 && v->v[v->n - 1] == first) {
		v->v[v->n - 1] = end;
		return;
	}
	u64vec_push(v, first);
	u64vec_push(v, end);
}

/* Take [first, end) out of the pairs of v. */
static void
pairs_cut(struct u64vec *v, uint64_t first, uint64_t end)
{
	struct u64vec	 out = { 0 };
	uint64_t	 a, b;
	size_t		 i;

	for (i = 0; i + 1 < v->n; i += 2) {
		a = v->v[i];
		b = v->v[i + 1];
		if (b <= first || a >= end) {
			pairs_add(&out, a, b);
			continue;
		}
		if (a < first)
			pairs_add(&out, a, first);
		if (end < b)
			pairs_add(&out, end, b);
	}
	u64vec_free(v);
	*v = out;
}

/*
 * Remove every member of the sorted set {NS}:what scored in [first, last]:
 * undelivered ranges that start there (ranges never overlap: those within
 * a range of ours are its pieces), or a batch's ticket.
 */
static void
queue_zrem(struct redis *r, const char *what, uint64_t first, uint64_t last)
{
	char		 lo[24], hi[24];
	const char	*argv[4] = { "ZREMRANGEBYSCORE", NULL, lo, hi };
	size_t		 len[4] = { 16, 0, 0, 0 };

	ns_key(r, what, &r->key);
	argv[1] = r->key.data;
	len[1] = r->key.len;
	len[2] = (size_t)snprintf(lo, sizeof lo, "%" PRIu64, first);
	len[3] = (size_t)snprintf(hi, sizeof hi, "%" PRIu64, last);
	cluster_queue(r->c, r->key.data, r->key.len, 4, argv, len);
}

/*
 * Become the owner of undelivered ranges, the first of which starts at
 * first: name every connection after it before the range is written.
 */
static int
take_owner(struct redis *r, uint64_t first, char **cause)
{
	char	*name, *c;

	xasprintf(&name, OWNER_NAME "%s:%" PRIu64, r->ns, first);
	if (cluster_set_name(r->c, name, cause) != 0) {
		free(name);
		c = *cause;
		xasprintf(cause, "index %s: %s (naming the connections after "
		    "this writer: see mhfilter(1), SECURITY)", r->base.path, c);
		free(c);
		return (INDEX_ERROR);
	}
	free(name);
	r->owner = first;
	return (0);
}

/* Queue EVAL of script on {NS}:undelivered with the numbers v as ARGV. */
static void
queue_eval_nums(struct redis *r, const char *script, const uint64_t *v,
    size_t n)
{
	const char	**argv;
	size_t		 *len, i;
	char		 (*num)[24];

	argv = xreallocarray(NULL, n + 4, sizeof *argv);
	len = xreallocarray(NULL, n + 4, sizeof *len);
	num = xreallocarray(NULL, n, sizeof *num);
	ns_key(r, UD_KEY, &r->key);
	argv[0] = "EVAL";
	argv[1] = script;
	argv[2] = "1";
	argv[3] = r->key.data;
	len[0] = 4;
	len[1] = strlen(script);
	len[2] = 1;
	len[3] = r->key.len;
	for (i = 0; i < n; i++) {
		len[i + 4] = (size_t)snprintf(num[i], sizeof num[i], "%" PRIu64,
		    v[i]);
		argv[i + 4] = num[i];
	}
	cluster_queue(r->c, r->key.data, r->key.len, (int)(n + 4), argv, len);
	free(argv);
	free(len);
	free(num);
}

/*
 * In the commit: the batch's range [first, end) as undelivered (none when
 * first == end), the ranges delivered since removed, the replays
 * delivered since cut out of theirs, the ranges abandoned since given up.
 */
static int
queue_marks(struct redis *r, uint64_t first, uint64_t end, char **cause)
{
	char	 lo[24];
	size_t	 i;

	if (first != end) {
		if (r->owner == 0 && take_owner(r, first, cause) != 0)
			return (INDEX_ERROR);
		ns_key(r, UD_KEY, &r->key);
		rud_encode(&r->val, first, end, r->owner);
		snprintf(lo, sizeof lo, "%" PRIu64, first);
		{
			const char	*argv[4] = { "ZADD", r->key.data, lo,
					    r->val.data };
			size_t		 len[4] = { 4, r->key.len, strlen(lo),
					    r->val.len };

			cluster_queue(r->c, r->key.data, r->key.len, 4, argv,
			    len);
		}
	}
	for (i = 0; i + 1 < r->dranges.n; i += 2)
		queue_zrem(r, UD_KEY, r->dranges.v[i], r->dranges.v[i + 1] - 1);
	if (r->dreplays.n != 0)
		queue_eval_nums(r, cut_script, r->dreplays.v, r->dreplays.n);
	if (r->aranges.n != 0)
		queue_eval_nums(r, abandon_script, r->aranges.v,
		    r->aranges.n);
	return (0);
}

/*
 * Round 5: mark the kept records, delete the others and their bucket
 * entries, write the unprepared insertions, remove stale entries met.
 */
static int
commit_batch(struct index *base, char **cause)
{
	struct redis		*r = (struct redis *)base;
	struct rslot		*s;
	struct rdoc		*rd;
	struct later		*l;
	unsigned		 b = r->base.p.bands, j;
	unsigned char		 be[8];
	size_t			 i, e, nclean = 0;
	uint64_t		 kept = 0, docid, first = 0, end = 0;
	char			 num[32];

	cluster_reset(r->c);
	for (i = 0; i < r->nslots; i++) {
		s = &r->slots[i];
		if (s->docid == 0 || s->docid == UINT64_MAX)
			continue;
		doc_key(r, s->docid, &r->key);
		/* Expired by --max-docs in this very batch: as if not kept. */
		if (s->kept && s->docid >= r->floor) {
			/*
			 * The whole record again, not a SETRANGE of its
			 * state: idempotent, and it restores a record lost
			 * with a master that failed before replicating it.
			 */
			rd = cache_find(r, s->docid);
			r->val.len = 0;
			buf_append(&r->val, r->cache.data + rd->off, rd->len);
			rval_mark(r->val.data, ST_KEPT, s->flags);
			queue_set(r, &r->key, &r->val, s->time);
			kept++;
			first = r->first_doc;
			end = r->first_doc + r->nown;
			continue;
		}
		q1(r, &r->key, "DEL");
		for (j = 0; j < b; j++)
			queue_unlink(r, s->keys[j], s->docid);
	}

	/* Entries of documents found gone (expired, removed, dead). */
	for (i = 0; i < r->nslots && nclean < CLEAN_MAX &&
	    !(r->base.flags & INDEX_RDONLY); i++) {
		s = &r->slots[i];
		if (s->docid == 0)
			continue;
		for (e = 0; e < s->n; e++) {
			docid = r->found.v[s->first + e];
			rd = cache_find(r, docid);
			if (rd == NULL || rd->state != ST_GONE ||
			    own_slot(r, docid) != NULL)
				continue;
			/* The bucket is one of the slot's b keys: try all. */
			for (j = 0; j < b; j++)
				queue_unlink(r, s->keys[j], docid);
			rd->state = ST_CLEANED;		/* once */
			nclean++;
		}
	}

	if (r->base.flags & INDEX_RDONLY)
		goto send;

	/* Unprepared insertions (--import): number them, then write. */
	if (r->nlater != 0) {
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		if (replies_ok(r, 0, cluster_queued(r->c), "commit", cause) != 0)
			return (INDEX_ERROR);
		cluster_reset(r->c);
		if (reserve_docs(r, r->nlater, &docid, cause) != 0)
			return (INDEX_ERROR);
		for (i = 0; i < r->nlater; i++, docid++) {
			l = r->later[i];
			doc_key(r, docid, &r->key);
			r->val.len = 0;
			buf_append(&r->val, r->lbuf.data + l->off, l->len);
			queue_set(r, &r->key, &r->val, l->time);
		}
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		if (replies_ok(r, 0, cluster_queued(r->c), "insert", cause) != 0)
			return (INDEX_ERROR);
		cluster_reset(r->c);
		docid -= r->nlater;
		for (i = 0; i < r->nlater; i++, docid++) {
			put_be64(be, docid);
			for (j = 0; j < b; j++) {
				band_key(r, r->later[i]->keys[j], &r->key);
				q2(r, &r->key, "APPEND", (char *)be, 8);
			}
		}
		kept += r->nlater;
	}
	if (kept != 0) {
		snprintf(num, sizeof num, "%" PRIu64, kept);
		ns_key(r, "docs", &r->key);
		q2(r, &r->key, "INCRBY", num, strlen(num));
	}
	if (!(r->base.flags & INDEX_TRACK))
		first = end = 0;
	if (queue_marks(r, first, end, cause) != 0)
		return (INDEX_ERROR);
	/*
	 * Our last batch's ticket: its documents were decided by its commit,
	 * which has completed, so nobody can find one of them pending and
	 * need its ticket any more.  This batch's stays until the next.
	 */
	if (r->tprev != 0)
		queue_zrem(r, "tickets", r->tprev, r->tprev);
send:
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	if (replies_ok(r, 0, cluster_queued(r->c), "commit", cause) != 0)
		return (INDEX_ERROR);
	cluster_reset(r->c);
	if (r->nown != 0 && !(r->base.flags & INDEX_RDONLY))
		pairs_add(&r->mine, r->first_doc, r->first_doc + r->nown);
	if (first != end)
		pairs_add(&r->pend, first, end);
	r->base.batch_first = first;
	r->base.batch_end = end;
	r->dranges.n = r->dreplays.n = r->aranges.n = 0;
	if (!(r->base.flags & INDEX_RDONLY))
		r->tprev = r->ticket != 0 ? r->first_doc : 0;
	batch_reset(r);
	return (0);
}

/*
 * Commit; when that fails part-way, undo the batch (best effort) so that
 * no record is left kept that was never reported, nor pending for others
 * to wait for.
 */
static int
redis_commit(struct index *base, char **cause)
{
	int	 rc;

	if ((rc = commit_batch(base, cause)) != 0)
		redis_abort(base);
	return (rc);
}

/*
 * Give up the batch: delete its pending records at once (best effort), so
 * that other writers need not wait for them to expire.
 */
static void
redis_abort(struct index *base)
{
	struct redis	*r = (struct redis *)base;
	struct rslot	*s;
	unsigned	 j;
	size_t		 i;
	char		*cause = NULL;

	cluster_reset(r->c);
	for (i = 0; i < r->nslots; i++) {
		s = &r->slots[i];
		if (s->docid == 0 || s->docid == UINT64_MAX)
			continue;
		doc_key(r, s->docid, &r->key);
		q1(r, &r->key, "DEL");
		for (j = 0; j < r->base.p.bands; j++)
			queue_unlink(r, s->keys[j], s->docid);
	}
	/* The batch's range, should its commit have written it. */
	if (r->nown != 0 && (r->base.flags & INDEX_TRACK))
		queue_zrem(r, UD_KEY, r->first_doc, r->first_doc);
	if (r->ticket != 0)
		queue_zrem(r, "tickets", r->first_doc, r->first_doc);
	if (cluster_exec(r->c, &cause) != 0) {
		log_warnx("index %s: %s", r->base.path, cause);
		free(cause);
	}
	batch_reset(r);
}

/* Did this process insert docid (committed, or in the open batch)? */
static int
redis_own(struct index *base, uint64_t docid)
{
	struct redis	*r = (struct redis *)base;

	return (own_slot(r, docid) != NULL || pairs_has(&r->mine, docid));
}

/*
 * Read every undelivered range into r->uranges (first, end, owner each,
 * in order of first), once a batch.
 */
static int
read_ranges(struct redis *r, char **cause)
{
	const redisReply	*rp, *m;
	uint64_t		 first, end, owner;
	size_t			 i;

	if (r->uread)
		return (0);
	cluster_reset(r->c);
	ns_key(r, UD_KEY, &r->key);
	{
		const char	*argv[4] = { "ZRANGE", r->key.data, "0", "-1" };
		size_t		 len[4] = { 6, r->key.len, 1, 2 };

		cluster_queue(r->c, r->key.data, r->key.len, 4, argv, len);
	}
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_ARRAY)
		return (reply_error(r, rp, "reading the undelivered ranges",
		    cause));
	r->uranges.n = 0;
	for (i = 0; i < rp->elements; i++) {
		m = rp->element[i];
		if (m->type != REDIS_REPLY_STRING || rud_decode(m->str, m->len,
		    &first, &end, &owner) != 0) {
			xasprintf(cause, "index %s: {%s}:" UD_KEY " holds a "
			    "malformed range (mhfilter --check lists it)",
			    r->base.path, r->ns);
			cluster_reset(r->c);
			return (INDEX_ERROR);
		}
		u64vec_push(&r->uranges, first);
		u64vec_push(&r->uranges, end);
		u64vec_push(&r->uranges, owner);
	}
	cluster_reset(r->c);
	r->uread = 1;
	return (0);
}

/*
 * The owners of the writers running now, sorted, into out: the names
 * "mhfilter:NS:OWNER" in the CLIENT LIST of the master of {NS}.
 */
static int
read_writers(struct redis *r, struct u64vec *out, char **cause)
{
	const redisReply	*rp;
	const char		*argv[4] = { "CLIENT", "LIST", "TYPE", "normal" };
	size_t			 len[4] = { 6, 4, 4, 6 };
	struct buf		 pre = { 0 };
	struct u64vec		 scratch = { 0 };
	const char		*p, *end;
	uint64_t		 v;

	cluster_reset(r->c);
	ns_key(r, UD_KEY, &r->key);
	cluster_queue(r->c, r->key.data, r->key.len, 4, argv, len);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_STRING && rp->type != REDIS_REPLY_STATUS)
		return (reply_error(r, rp, "CLIENT LIST", cause));
	xasprintf((char **)&pre.data, " name=" OWNER_NAME "%s:", r->ns);
	pre.len = strlen(pre.data);
	out->n = 0;
	end = rp->str + rp->len;
	for (p = rp->str; (p = memmem(p, end - p, pre.data, pre.len)) != NULL;) {
		p += pre.len;
		for (v = 0; p < end && *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (uint64_t)(*p - '0');
		if (p == end || *p == ' ' || *p == '\n')
			u64vec_push(out, v);
	}
	sort_u64(out->v, out->n, &scratch);
	u64vec_free(&scratch);
	free(pre.data);
	cluster_reset(r->c);
	return (0);
}

/* Is owner one of the sorted owners in v? */
static int
owner_in(const struct u64vec *v, uint64_t owner)
{
	size_t	 lo = 0, hi = v->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (v->v[mid] == owner)
			return (1);
		if (v->v[mid] < owner)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (0);
}

/*
 * Is docid in an undelivered range whose output may never be written?
 * 1, 0, or INDEX_ERROR.  One of ours is, until we deliver it; another
 * writer's is once that writer has stopped (or gave up the range: owner
 * 0).
 */
static int
redis_undelivered(struct index *base, uint64_t docid, char **cause)
{
	struct redis	*r = (struct redis *)base;
	size_t		 lo = 0, hi, mid;
	uint64_t	 owner;

	if (redis_own(base, docid))
		return (pairs_has(&r->pend, docid));
	if (read_ranges(r, cause) != 0)
		return (INDEX_ERROR);
	hi = r->uranges.n / 3;
	while (lo < hi) {		/* the last range starting <= docid */
		mid = lo + (hi - lo) / 2;
		if (r->uranges.v[3 * mid] <= docid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || docid >= r->uranges.v[3 * (lo - 1) + 1])
		return (0);
	if ((owner = r->uranges.v[3 * (lo - 1) + 2]) == 0)
		return (1);
	if (!r->wread) {
		if (read_writers(r, &r->writers, cause) != 0)
			return (INDEX_ERROR);
		r->wread = 1;
	}
	return (!owner_in(&r->writers, owner));
}

/*
 * The output of these ranges of ours, and of these replays, was written:
 * forget them now, and in Redis at the next commit (kept until one
 * succeeds).
 */
static void
redis_delivered(struct index *base, const uint64_t *ranges, size_t nranges,
    const uint64_t *replays, size_t nreplays)
{
	struct redis	*r = (struct redis *)base;
	size_t		 i;

	if (r->base.flags & INDEX_RDONLY)
		return;
	for (i = 0; i < nranges; i++) {
		u64vec_push(&r->dranges, ranges[2 * i]);
		u64vec_push(&r->dranges, ranges[2 * i + 1]);
		pairs_cut(&r->pend, ranges[2 * i], ranges[2 * i + 1]);
	}
	for (i = 0; i < nreplays; i++) {
		u64vec_push(&r->dreplays, replays[i]);
		pairs_cut(&r->pend, replays[i], replays[i] + 1);
	}
}

/*
 * The output of these ranges of ours will never be written (a daemon's
 * client went away first): at the next commit they lose their owner, so
 * that whoever meets them replays them.  We keep them as undelivered, and
 * replay them ourselves.
 */
static void
redis_abandoned(struct index *base, const uint64_t *ranges, size_t nranges)
{
	struct redis	*r = (struct redis *)base;
	size_t		 i;

	if (r->base.flags & INDEX_RDONLY)
		return;
	for (i = 0; i < nranges; i++) {
		u64vec_push(&r->aranges, ranges[2 * i]);
		u64vec_push(&r->aranges, ranges[2 * i + 1] - 1);
	}
}

/* Documents kept (roughly: key expiry does not count down). */
static int
redis_stats(struct index *base, struct index_stats *st, char **cause)
{
	struct redis	*r = (struct redis *)base;
	uint64_t	 docs;

	memset(st, 0, sizeof *st);
	if (get_counter(r, "docs", &docs, cause) != 0)
		return (INDEX_ERROR);
	st->docs = docs;
	st->roundtrips = cluster_roundtrips(r->c);
	return (0);
}

/*
 * Retention.  max_age is applied at commit as each kept document's expiry
 * (remembered here); max_docs advances the floor over the oldest numbers,
 * at most budget documents a call.
 */
static int
redis_expire(struct index *base, const struct retention *ret, int64_t now,
    uint64_t budget, uint64_t *removed, char **cause)
{
	struct redis		*r = (struct redis *)base;
	const redisReply	*rp;
	uint64_t		 seq, floor, target, end, d;
	char			 num[32];

	(void)now;
	*removed = 0;
	r->ret = *ret;
	if (ret->max_docs == 0)
		return (0);
	if (get_counter(r, "seq", &seq, cause) != 0 ||
	    get_counter(r, "floor", &floor, cause) != 0)
		return (INDEX_ERROR);
	if (floor == 0)
		floor = 1;
	r->floor = floor;
	if (seq < ret->max_docs || seq - ret->max_docs + 1 <= floor)
		return (0);
	target = seq - ret->max_docs + 1;
	if (target - floor > budget)
		target = floor + budget;

	/*
	 * In rounds of EXPIRE_ROUND numbers: kept documents only (another
	 * writer's pending ones are its own to decide, and this batch's
	 * are dropped at commit), then the floor.
	 */
	for (; floor < target; floor = end) {
		end = target - floor > EXPIRE_ROUND ? floor + EXPIRE_ROUND :
		    target;
		cluster_reset(r->c);
		for (d = floor; d < end; d++) {
			doc_key(r, d, &r->key);
			queue_eval(r, expire_script, &r->key, "K", 1);
		}
		ns_key(r, "floor", &r->key);
		snprintf(num, sizeof num, "%" PRIu64, end);
		queue_eval(r, floor_script, &r->key, num, strlen(num));
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		for (d = 0; d <= end - floor; d++) {
			rp = cluster_reply(r->c, d);
			if (rp->type == REDIS_REPLY_ERROR)
				return (reply_error(r, rp, "expire", cause));
			if (d < end - floor && rp->type == REDIS_REPLY_INTEGER)
				*removed += rp->integer;
		}
		cluster_reset(r->c);
		r->floor = end;
	}
	if (*removed != 0) {
		ns_key(r, "docs", &r->key);
		snprintf(num, sizeof num, "-%" PRIu64, *removed);
		q2(r, &r->key, "INCRBY", num, strlen(num));
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		cluster_reset(r->c);
	}
	return (0);
}

/*
 * The band key of a bucket key of the namespace (NS:b:HEX, 16 lower-case
 * hex digits) into *key: 0, or -1 if k is not one.
 */
static int
bucket_of(struct redis *r, const char *k, size_t len, uint64_t *key)
{
	size_t	 nl = strlen(r->ns), i;
	int	 c;

	if (len != nl + 3 + 16 || memcmp(k, r->ns, nl) != 0 ||
	    memcmp(k + nl, ":b:", 3) != 0)
		return (-1);
	for (*key = 0, i = nl + 3; i < len; i++) {
		c = (unsigned char)k[i];
		if (c >= '0' && c <= '9')
			*key = *key << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*key = *key << 4 | (uint64_t)(c - 'a' + 10);
		else
			return (-1);
	}
	return (0);
}

/*
 * Call fn for every document record (kind 'd') or band bucket (kind 'b')
 * of the namespace, with its number or band key (a SCAN of every master,
 * then GETs in blocks).  A value that is not a string is given as NULL.
 * fn returns 0 to go on, else stops the scan with that value.
 */
static int
redis_scan(struct redis *r, int kind, int (*fn)(struct redis *, uint64_t,
    const char *, size_t, void *), void *arg, char **cause)
{
	const redisReply	*rp, *keys;
	struct buf		 pat = { 0 }, cursor = { 0 };
	struct u64vec		 ids = { 0 };
	char			*val;
	unsigned		 m, nm = cluster_masters(r->c);
	size_t			 i;
	uint64_t		 id;
	int			 rc = 0;

	buf_append(&pat, r->ns, strlen(r->ns));
	buf_append(&pat, kind == 'b' ? ":b:*" : ":d:*", 5);
	for (m = 0; m < nm && rc == 0; m++) {
		cursor.len = 0;
		buf_append(&cursor, "0", 2);
		do {
			const char	*argv[6] = { "SCAN", cursor.data,
					    "MATCH", pat.data, "COUNT",
					    "1000" };
			size_t		 len[6] = { 4, strlen(cursor.data), 5,
					    strlen(pat.data), 5, 4 };

			cluster_reset(r->c);
			cluster_queue_node(r->c, m, 6, argv, len);
			if (cluster_exec(r->c, cause) != 0) {
				rc = redis_fail(r, cause);
				break;
			}
			rp = cluster_reply(r->c, 0);
			if (rp->type != REDIS_REPLY_ARRAY ||
			    rp->elements != 2) {
				rc = reply_error(r, rp, "scan", cause);
				break;
			}
			cursor.len = 0;
			buf_append(&cursor, rp->element[0]->str,
			    rp->element[0]->len + 1);
			keys = rp->element[1];
			ids.n = 0;
			for (i = 0; i < keys->elements; i++) {
				if (kind == 'b' ? bucket_of(r,
				    keys->element[i]->str,
				    keys->element[i]->len, &id) == 0 :
				    (id = rkey_docid(keys->element[i]->str,
				    keys->element[i]->len, r->ns)) != 0)
					u64vec_push(&ids, id);
			}
			cluster_reset(r->c);
			for (i = 0; i < ids.n; i++) {
				if (kind == 'b')
					band_key(r, ids.v[i], &r->key);
				else
					doc_key(r, ids.v[i], &r->key);
				q1(r, &r->key, "GET");
			}
			if (ids.n != 0 && cluster_exec(r->c, cause) != 0) {
				rc = redis_fail(r, cause);
				break;
			}
			for (i = 0; i < ids.n && rc == 0; i++) {
				rp = cluster_reply(r->c, i);
				if (rp->type == REDIS_REPLY_NIL)
					continue;	/* gone meanwhile */
				if (rp->type != REDIS_REPLY_STRING) {
					rc = fn(r, ids.v[i], NULL, 0, arg);
					continue;
				}
				val = xmalloc(rp->len + 1);
				memcpy(val, rp->str, rp->len);
				rc = fn(r, ids.v[i], val, rp->len, arg);
				free(val);
			}
			cluster_reset(r->c);
		} while (rc == 0 && strcmp(cursor.data, "0") != 0);
	}
	buf_free(&pat);
	buf_free(&cursor);
	u64vec_free(&ids);
	return (rc);
}

/*
 * Decode a scanned value; returns where its text begins, or 0 if it is not
 * a kept document's.
 */
static size_t
scan_decode(struct redis *r, const char *v, size_t len, struct docinfo *d)
{
	size_t	 n;
	int	 state;

	if ((n = rval_decode(v, len, r->base.p.perms, r->sig, d,
	    &state)) == 0)
		return (0);
	return (state == ST_KEPT ? n : 0);
}

/* Append the band keys of the signature last decoded (r->sig) to out. */
static void
doc_bands(struct redis *r, struct u64vec *out)
{
	uint64_t	 keys[MHF_MAX_PERMS];
	unsigned	 j;

	lsh_keys(r->sig, r->base.p.bands, r->base.p.rows, r->base.p.seed,
	    keys);
	for (j = 0; j < r->base.p.bands; j++)
		u64vec_push(out, keys[j]);
}

struct removal {
	const char	*id;
	size_t		 idlen;
	struct u64vec	 found;
	struct u64vec	 keys;		/* their band keys */
};

static int
remove_one(struct redis *r, uint64_t docid, const char *v, size_t len,
    void *arg)
{
	struct removal	*rm = arg;
	struct docinfo	 d;

	if (scan_decode(r, v, len, &d) == 0 || d.idlen != rm->idlen ||
	    memcmp(d.id, rm->id, rm->idlen) != 0)
		return (0);
	u64vec_push(&rm->found, docid);
	doc_bands(r, &rm->keys);
	return (0);
}

/* Remove every document with this id (a scan: there is no id index). */
static int
redis_remove(struct index *base, const char *id, size_t idlen,
    uint64_t *removed, char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct removal	 rm = { id, idlen, { 0 }, { 0 } };
	unsigned	 b = r->base.p.bands, j;
	size_t		 i;
	char		 num[32];
	int		 rc;

	*removed = 0;
	if ((rc = redis_scan(r, 'd', remove_one, &rm, cause)) == 0 &&
	    rm.found.n != 0) {
		cluster_reset(r->c);
		for (i = 0; i < rm.found.n; i++) {
			doc_key(r, rm.found.v[i], &r->key);
			q1(r, &r->key, "DEL");
			for (j = 0; j < b; j++)
				queue_unlink(r, rm.keys.v[i * b + j],
				    rm.found.v[i]);
		}
		ns_key(r, "docs", &r->key);
		snprintf(num, sizeof num, "-%zu", rm.found.n);
		q2(r, &r->key, "INCRBY", num, strlen(num));
		if (cluster_exec(r->c, cause) != 0)
			rc = redis_fail(r, cause);
		else
			*removed = rm.found.n;
		cluster_reset(r->c);
	}
	u64vec_free(&rm.found);
	u64vec_free(&rm.keys);
	return (rc);
}

/*
 * What --info and --check learn from a scan of the namespace: documents
 * first, then buckets, then the delivery marks.  f is --check's report
 * (NULL for --info).
 */
struct nsscan {
	FILE			*f;
	uint64_t		*problems;
	struct index_info	*in;
	uint64_t		 seq;
	struct u64vec		 pending;	/* those pending */
	struct u64vec		 ids, keys;	/* kept ones' bands (check) */
	uint64_t		 entries;	/* bucket entries */
};

/* A --check problem line (the first 100 are shown). */
static void
problem(struct nsscan *ns, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void
problem(struct nsscan *ns, const char *fmt, ...)
{
	va_list	 ap;

	if (ns->f == NULL || ++*ns->problems > 100)
		return;
	fputs("problem: ", ns->f);
	va_start(ap, fmt);
	vfprintf(ns->f, fmt, ap);
	va_end(ap);
	fputc('\n', ns->f);
}

/* One document of the scan. */
static int
scan_doc(struct redis *r, uint64_t docid, const char *v, size_t len,
    void *arg)
{
	struct nsscan		*ns = arg;
	struct index_info	*in = ns->in;
	struct docinfo		 d;
	size_t			 n;
	int			 state;

	if (docid > ns->seq)
		problem(ns, "document %" PRIu64 ": numbered past {%s}:seq "
		    "(%" PRIu64 ")", docid, r->ns, ns->seq);
	if (v == NULL || (n = rval_decode(v, len, r->base.p.perms, r->sig,
	    &d, &state)) == 0) {
		problem(ns, "document %" PRIu64 ": corrupt record", docid);
		return (0);
	}
	if (state == ST_PENDING) {
		u64vec_push(&ns->pending, docid);
		return (0);
	}
	in->docs++;
	in->docs_bytes += n;
	in->texts_bytes += len - n;
	if (in->oldest == 0 || d.time < in->oldest)
		in->oldest = d.time;
	if (d.time > in->newest)
		in->newest = d.time;
	if (ns->f != NULL) {
		doc_bands(r, &ns->keys);
		for (n = 0; n < r->base.p.bands; n++)
			u64vec_push(&ns->ids, docid);
	}
	return (0);
}

/* One band bucket of the scan: 8-byte document numbers. */
static int
scan_bucket(struct redis *r, uint64_t key, const char *v, size_t len,
    void *arg)
{
	struct nsscan	*ns = arg;
	uint64_t	 docid;
	size_t		 e;

	if (v == NULL || len == 0 || len % 8 != 0) {
		problem(ns, "band bucket %016" PRIx64 ": not a list of 8-byte "
		    "document numbers", key);
		return (0);
	}
	ns->entries += len / 8;
	ns->in->bands_bytes += len;
	for (e = 0; e < len; e += 8) {
		docid = get_be64((const unsigned char *)v + e);
		if (docid == 0 || docid > ns->seq) {
			problem(ns, "band bucket %016" PRIx64 ": document "
			    "%" PRIu64 " cannot exist (past {%s}:seq)", key,
			    docid, r->ns);
			break;
		}
	}
	return (0);
}

/* Sum used_memory over the masters (INFO memory): *bytes. */
static int
masters_memory(struct redis *r, uint64_t *bytes, char **cause)
{
	const redisReply	*rp;
	const char		*argv[2] = { "INFO", "memory" }, *p;
	size_t			 len[2] = { 4, 6 };
	unsigned		 m, nm = cluster_masters(r->c);

	*bytes = 0;
	cluster_reset(r->c);
	for (m = 0; m < nm; m++)
		cluster_queue_node(r->c, m, 2, argv, len);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	for (m = 0; m < nm; m++) {
		rp = cluster_reply(r->c, m);
		if (rp->type != REDIS_REPLY_STRING)
			return (reply_error(r, rp, "INFO memory", cause));
		if ((p = strstr(rp->str, "used_memory:")) != NULL)
			*bytes += strtoull(p + 12, NULL, 10);
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * The undelivered ranges with their scores (ZRANGE WITHSCORES): how many,
 * and with --check, each well formed, scored by its first document, below
 * {NS}:seq and apart from the one before.
 */
static int
scan_ranges(struct redis *r, struct nsscan *ns, char **cause)
{
	const redisReply	*rp, *m, *sc;
	uint64_t		 first, end, owner, last = 0;
	size_t			 i;
	char			 num[24];

	cluster_reset(r->c);
	ns_key(r, UD_KEY, &r->key);
	{
		const char	*argv[5] = { "ZRANGE", r->key.data, "0", "-1",
				    "WITHSCORES" };
		size_t		 len[5] = { 6, r->key.len, 1, 2, 10 };

		cluster_queue(r->c, r->key.data, r->key.len, 5, argv, len);
	}
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_ARRAY || rp->elements % 2 != 0) {
		if (rp->type == REDIS_REPLY_ERROR)
			problem(ns, "{%s}:" UD_KEY ": %s", r->ns, rp->str);
		cluster_reset(r->c);
		return (0);
	}
	ns->in->undelivered = rp->elements / 2;
	for (i = 0; i + 1 < rp->elements; i += 2) {
		m = rp->element[i];
		sc = rp->element[i + 1];
		if (m->type != REDIS_REPLY_STRING || rud_decode(m->str, m->len,
		    &first, &end, &owner) != 0) {
			problem(ns, "undelivered range \"%.40s\": malformed",
			    m->type == REDIS_REPLY_STRING ? m->str : "?");
			continue;
		}
		snprintf(num, sizeof num, "%" PRIu64, first);
		if (sc->type != REDIS_REPLY_STRING || strcmp(sc->str, num) != 0)
			problem(ns, "undelivered range [%" PRIu64 ", %" PRIu64
			    "): scored %s", first, end, sc->type ==
			    REDIS_REPLY_STRING ? sc->str : "?");
		else if (end > ns->seq + 1 || owner > ns->seq)
			problem(ns, "undelivered range [%" PRIu64 ", %" PRIu64
			    ") of %" PRIu64 ": past {%s}:seq", first, end,
			    owner, r->ns);
		else if (first < last)
			problem(ns, "undelivered range [%" PRIu64 ", %" PRIu64
			    ") overlaps the one before", first, end);
		else
			last = end;
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * Scan the namespace for --info and --check: counts into ns->in, and with
 * ns->f the problems of the documents, buckets and marks.
 */
static int
scan_namespace(struct redis *r, struct nsscan *ns, char **cause)
{
	struct index_info *in = ns->in;

	if (get_counter(r, "seq", &ns->seq, cause) != 0 ||
	    redis_scan(r, 'd', scan_doc, ns, cause) != 0)
		return (INDEX_ERROR);
	if (redis_scan(r, 'b', scan_bucket, ns, cause) != 0 ||
	    scan_ranges(r, ns, cause) != 0 ||
	    masters_memory(r, &in->memory, cause) != 0)
		return (INDEX_ERROR);
	in->pending = ns->pending.n;
	in->band_entries = ns->entries;
	in->size = in->docs_bytes + in->texts_bytes + in->bands_bytes;
	in->remote = 1;
	return (0);
}

static void
nsscan_free(struct nsscan *ns)
{
	u64vec_free(&ns->pending);
	u64vec_free(&ns->ids);
	u64vec_free(&ns->keys);
}

/* What --info prints: counted by a scan of the namespace. */
static int
redis_info(struct index *base, struct index_info *in, char **cause)
{
	struct redis		*r = (struct redis *)base;
	struct nsscan		 ns = { 0 };
	const redisReply	*rp;
	struct metatext		 m;
	char			 v[32];
	uint64_t		 created;
	int			 rc;

	memset(in, 0, sizeof *in);
	in->p = r->base.p;
	in->format = r->format;
	ns_key(r, "meta", &r->key);
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type == REDIS_REPLY_STRING) {
		m.s = rp->str;
		m.len = rp->len;
		if (metatext_get(&m, "created", v, sizeof v) == 0 &&
		    meta_number(v, INT64_MAX, &created) == 0)
			in->created = (int64_t)created;
	}
	cluster_reset(r->c);
	ns.in = in;
	rc = scan_namespace(r, &ns, cause);
	in->next_doc = ns.seq + 1;
	nsscan_free(&ns);
	return (rc);
}

/*
 * Pending documents must expire (a writer that dies leaves them for an
 * hour): one without an expiry would hold up every writer that meets it.
 */
static int
check_pending(struct redis *r, struct nsscan *ns, char **cause)
{
	const redisReply	*rp;
	size_t			 i, at, n;

	for (at = 0; at < ns->pending.n; at += n) {
		n = ns->pending.n - at < 4096 ? ns->pending.n - at : 4096;
		cluster_reset(r->c);
		for (i = 0; i < n; i++) {
			doc_key(r, ns->pending.v[at + i], &r->key);
			q1(r, &r->key, "TTL");
		}
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		for (i = 0; i < n; i++) {
			rp = cluster_reply(r->c, i);
			if (rp->type == REDIS_REPLY_INTEGER &&
			    rp->integer == -1)
				problem(ns, "document %" PRIu64 ": pending "
				    "and without an expiry",
				    ns->pending.v[at + i]);
		}
	}
	cluster_reset(r->c);
	return (0);
}

/* Every kept document's band keys, from its signature, must list it. */
static int
check_listed(struct redis *r, struct nsscan *ns, char **cause)
{
	const redisReply	*rp;
	size_t			 i, e, at, n;
	int			 hit;

	for (at = 0; at < ns->ids.n; at += n) {
		n = ns->ids.n - at < 4096 ? ns->ids.n - at : 4096;
		cluster_reset(r->c);
		for (i = 0; i < n; i++) {
			band_key(r, ns->keys.v[at + i], &r->key);
			q1(r, &r->key, "GET");
		}
		if (cluster_exec(r->c, cause) != 0)
			return (redis_fail(r, cause));
		for (i = 0; i < n; i++) {
			rp = cluster_reply(r->c, i);
			hit = 0;
			for (e = 0; rp->type == REDIS_REPLY_STRING &&
			    e + 8 <= rp->len && !hit; e += 8)
				hit = get_be64((unsigned char *)rp->str + e) ==
				    ns->ids.v[at + i];
			if (!hit)
				problem(ns, "document %" PRIu64 ": missing "
				    "from band bucket %016" PRIx64,
				    ns->ids.v[at + i], ns->keys.v[at + i]);
		}
	}
	cluster_reset(r->c);
	return (0);
}

/*
 * --check: every document record decodes and is numbered below
 * {NS}:seq, a pending one expires, a kept one is in each of its buckets;
 * every bucket is a list of 8-byte numbers below {NS}:seq (entries of
 * documents gone are not problems: lookups remove them); the undelivered
 * ranges are well formed and apart.
 */
static int
redis_check(struct index *base, FILE *f, uint64_t *problems, char **cause)
{
	struct redis		*r = (struct redis *)base;
	struct index_info	 in = { 0 };
	struct nsscan		 ns = { 0 };
	int			 rc;

	*problems = 0;
	ns.f = f;
	ns.problems = problems;
	ns.in = &in;
	if ((rc = scan_namespace(r, &ns, cause)) == 0 &&
	    (rc = check_pending(r, &ns, cause)) == 0)
		rc = check_listed(r, &ns, cause);
	nsscan_free(&ns);
	if (rc != 0)
		return (rc);
	if (*problems > 100)
		fprintf(f, "problems not shown: %" PRIu64 "\n",
		    *problems - 100);
	fprintf(f, "documents: %" PRIu64 "\n", in.docs);
	fprintf(f, "band_entries: %" PRIu64 "\n", in.band_entries);
	fprintf(f, "pending: %" PRIu64 "\n", in.pending);
	fprintf(f, "undelivered_ranges: %" PRIu64 "\n", in.undelivered);
	fprintf(f, "problems: %" PRIu64 "\n", *problems);
	return (0);
}

/* What redis_each's scan calls. */
struct eachscan {
	index_each_fn	 fn;
	void		*arg;
	char		**cause;
};

/* One document of redis_each: kept ones whose text decodes. */
static int
each_one(struct redis *r, uint64_t docid, const char *v, size_t len,
    void *arg)
{
	struct eachscan	*es = arg;
	struct docinfo	 d;
	struct buf	 text = { 0 };
	size_t		 n;
	int		 rc;

	if ((n = scan_decode(r, v, len, &d)) == 0)
		return (0);
	if (r->base.p.texts && text_decode((const unsigned char *)v + n,
	    len - n, &text) < 0)
		return (0);
	d.docid = docid;
	rc = es->fn(es->arg, &d, r->base.p.texts ? &text : NULL, es->cause);
	buf_free(&text);
	return (rc);
}

/*
 * Call fn for every kept document, in no particular order; stop at its
 * first non-zero return, and return it.
 */
static int
redis_each(struct index *base, index_each_fn fn, void *arg, char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct eachscan	 es = { fn, arg, cause };

	return (redis_scan(r, 'd', each_one, &es, cause));
}

/* Rewrite the parameters of an index that holds no documents yet. */
static int
redis_adopt(struct index *base, const struct index_params *want,
    char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct metatext	 m;
	struct buf	 text = { 0 };
	uint64_t	 seq;

	if (get_counter(r, "seq", &seq, cause) != 0)
		return (INDEX_ERROR);
	if (seq != 0) {
		xasprintf(cause, "import: %s already holds documents made "
		    "with other parameters than the export's", r->base.path);
		return (INDEX_ERROR);
	}
	params_take(&r->base.p, want);
	m.out = &text;
	meta_write(&r->base.p, MHF_REDIS_FORMAT, time(NULL), metatext_put,
	    &m);
	ns_key(r, "meta", &r->key);
	q2(r, &r->key, "SET", text.data, text.len);
	buf_free(&text);
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	cluster_reset(r->c);
	free(r->sig);
	r->sig = xcalloc(r->base.p.perms, sizeof *r->sig);
	return (0);
}

const struct index_ops redis_ops = {
	.name = "Redis",
	.exists = redis_exists,
	.open = redis_open,
	.close = redis_close,
	.begin = redis_begin,
	.prepare = redis_prepare,
	.commit = redis_commit,
	.abort = redis_abort,
	.candidates = redis_candidates,
	.doc = redis_doc,
	.text = redis_text,
	.insert = redis_insert,
	.stats = redis_stats,
	.expire = redis_expire,
	.remove = redis_remove,
	.info = redis_info,
	.check = redis_check,
	.compact = NULL,
	.no_compact = "Redis manages its own memory",
	.each = redis_each,
	.adopt = redis_adopt,
	.undelivered = redis_undelivered,
	.delivered = redis_delivered,
	.abandoned = redis_abandoned,
	.own = redis_own,
	.password_file = redis_password_file,
};
