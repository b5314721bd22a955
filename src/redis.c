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
 *   NS:d:N      document N (rval_encode): a state byte ('K' kept, 'G'
 *               kept in an earlier document's group, whose number
 *               follows), the document record, the encoded text; or 'P'
 *               alone, pending (layout 4 wrote the record after it);
 *   NS:b:HEX    a band bucket: the numbers of the documents under band key
 *               HEX, 8 bytes big-endian each, in the order they came.
 *   {NS}:undelivered
 *               the delivery marks (layout 4; see redismarks.c): a
 *               sorted set of ranges of documents whose output may not
 *               be written;
 *   {NS}:order  the last ticket given (layout 4; see Concurrency);
 *   {NS}:tickets
 *               the tickets of recent batches: a sorted set of members
 *               FIRST:END:TICKET:OWNER:TIME scored by FIRST, OWNER the
 *               writer's (redismarks.c; older writers left it out);
 *   {NS}:filters
 *               the filters of the last FILTER_KEEP tickets' band keys
 *               (layout 5): a hash, ticket -> Bloom filter.
 *
 * The {NS} keys share one hash slot; documents and buckets spread over all
 * of them, so the work spreads over the masters.
 *
 * A batch, in round trips (each one pipelined to every node at once):
 *
 *   1. INCRBY {NS}:seq: the batch's document numbers;
 *   2. SET NS:d:N for each record to 'P' (pending: the state byte
 *      alone, all that others read of it), with a one-hour expiry so
 *      that a crashed writer's records go away; GET
 *      {NS}:order, the last ticket given so far;
 *   3. per band key APPEND our number; then, in one round trip, the
 *      batch's ticket (ticket_script, with a filter of the batch's band
 *      keys) and GET of the buckets that held more than our entry after
 *      our APPEND; and if tickets were given between our GET of
 *      {NS}:order and ours, in a round trip of its own, GET of those
 *      buckets again and of the ones their filters may hold (every
 *      bucket, when a filter is missing or there are many);
 *   4. GET the candidates' records; the tickets of those still pending;
 *      wait (polling, bounded) for those with a smaller ticket than ours
 *      to be decided, unless their writer has stopped;
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
 * ticket, and we read again after our ticket every bucket that its
 * filter (a Bloom filter of its band keys: no false negatives) may hold,
 * and every one we had read.  A pending
 * candidate with a smaller ticket is waited for (waits go to smaller
 * tickets only, so they cannot form a cycle); one with a larger ticket,
 * or none yet (lookup_tickets; it is read again first, in case it was
 * decided meanwhile), is passed over: its batch sees this one.  A writer
 * that died (its owner has no connection left: redismarks.c) will never
 * decide its pending records, so they are passed over once that is seen,
 * in about two seconds.  What can still keep both: a writer that stalls, or is cut off
 * from Redis, holding pending records for PENDING_WAIT (it is passed
 * over), and a failover that loses writes not yet replicated (the
 * batch's APPENDs, its ticket).  A ticket stays until the writer's next
 * commit (its batch was decided by then), or an hour for a writer that
 * died.  mhfilter(1) documents this and
 * tests/e2e/redis.bats counts the pairs kept twice with three writers.
 *
 * Opening and closing (the URL, the password file, the parameter
 * records and their upgrade) are redisopen.c's, the delivery marks and
 * their owners redismarks.c's, the operations on the whole index
 * (--export, --remove, --info, --check, retention, --import's
 * parameters) rediscan.c's; the four files share struct redis
 * (redisint.h).
 */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "mhfilter.h"
#include "redisint.h"

#define PENDING_TTL	3600	/* seconds a pending record lives */
#define PENDING_WAIT	90.0	/* seconds to wait for another's decision:
				   more than a writer's own retries */
#define OWNER_CHECK	1.0	/* seconds between looks at whether the
				   writers waited for still run */
#define CLEAN_MAX	1024	/* stale bucket entries removed per batch */

#define ST_GONE		0	/* read back missing: its entries go */
#define ST_PASSED	1	/* pending too long: passed over, kept */
#define ST_CLEANED	2	/* gone, and its entries queued for removal */
#define BUCKET_MAX	INDEX_BUCKET_MAX	/* entries read from one band bucket */
#define TICKET_LATER	UINT64_MAX	/* a batch with no ticket yet */
#define TICKET_AGE	3600		/* seconds a dead writer's ticket stays */
#define FILTER_BITS	16	/* a ticket's filter: bits a band key, */
#define FILTER_MAXBITS	(1U << 22)	/* at most (else none: read all) */
#define FILTER_KEEP	64	/* tickets whose filters are kept */
#define FILTER_MAX	32	/* filters read; more tickets: read all */
#define LATER_TOKEN	(1ULL << 63)	/* an unprepared insertion's number,
					   before it has one (redis_insert) */

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

/*
 * The batch [ARGV[1], ARGV[2]) has appended all its bucket entries: give
 * it the next ticket ({NS}:order, KEYS[1]) and record it in KEYS[2]
 * ({NS}:tickets), member FIRST:END:TICKET:OWNER:TIME scored FIRST (OWNER
 * is ARGV[9]), at once, so that a ticket is visible from the moment it
 * exists.  TIME comes last, where writers that wrote no OWNER read it too.
 * Tickets older than ARGV[4] (seconds, ARGV[3] being now) go: their
 * writers died.  ARGV[6] is the filter of the batch's band keys
 * (batch_filter; empty: none), kept in KEYS[3] ({NS}:filters) under the
 * ticket for the next FILTER_KEEP tickets.  Returns the ticket, the number of tickets given
 * since ARGV[5] (the last one the batch read before its appends) and, if
 * there are FILTER_MAX or fewer, their filters ("" for one not kept).
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
    "  ARGV[9] .. ':' .. ARGV[3])\n"
    "if ARGV[6] ~= '' then\n"
    "  redis.call('HSET', KEYS[3], string.format('%d', t), ARGV[6])\n"
    "end\n"
    "redis.call('HDEL', KEYS[3], string.format('%d', t - ARGV[7]))\n"
    "local o = tonumber(ARGV[5])\n"
    "local out = { t, t - 1 - o }\n"
    "if t - 1 - o <= tonumber(ARGV[8]) then\n"
    "  for i = o + 1, t - 1 do\n"
    "    out[#out + 1] = redis.call('HGET', KEYS[3],\n"
    "      string.format('%d', i)) or ''\n"
    "  end\n"
    "end\n"
    "return out\n";

/* A record of the prepared batch. */
struct rslot {
	uint64_t	 docid;		/* 0: not pending */
	int		 kept;		/* index_insert was called for it */
	int		 flags;		/* DOC_*, as inserted */
	int64_t		 time;
	const uint64_t	*keys;
	size_t		 first;		/* its entries in found */
	size_t		 n;
	uint64_t	 group;		/* its group's first document, or 0 */
};

/* A document read in this batch (or written by it). */
struct rdoc {
	uint64_t	 docid;
	int		 state;		/* ST_*, or 0: gone */
	size_t		 off;		/* its value in cache */
	size_t		 len;
	uint64_t	 ticket;	/* its batch's, pending: 0 not asked,
					   TICKET_LATER none (after ours) */
	uint64_t	 owner;		/* its batch's writer, or 0: unknown */
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
	uint64_t	 token;		/* in tokdoc */
	uint64_t	 group;		/* a number or a token, or 0 */
	uint64_t	 keys[];
};

static int	reserve_docs(struct redis *, size_t, uint64_t *, char **);
static int	redis_reserve_run(struct index *, char **);
static void	cache_reset(struct redis *);
static struct rdoc *cache_find(struct redis *, uint64_t);
static struct rdoc *cache_add(struct redis *, uint64_t, int, const char *,
		    size_t);
static int	fetch_docs(struct redis *, const uint64_t *, size_t,
		    char **);

/* {NS}:what, one of the namespace's own keys. */
void
ns_key(struct redis *r, const char *what, struct buf *k)
{
	rkey_ns(k, r->ns, what);
}

/* NS:d:N, a document. */
void
doc_key(struct redis *r, uint64_t docid, struct buf *k)
{
	rkey_doc(k, r->ns, docid);
}

/* NS:b:HEX, a band bucket. */
void
band_key(struct redis *r, uint64_t key, struct buf *k)
{
	rkey_band(k, r->ns, key);
}

/* Queue a one-argument command on key k. */
size_t
q1(struct redis *r, const struct buf *k, const char *cmd)
{
	const char	*argv[2] = { cmd, k->data };
	size_t		 len[2] = { strlen(cmd), k->len };

	return (cluster_queue(r->c, k->data, k->len, 2, argv, len));
}

/* Queue a two-argument command on key k: cmd k v. */
size_t
q2(struct redis *r, const struct buf *k, const char *cmd, const char *v,
    size_t vlen)
{
	const char	*argv[3] = { cmd, k->data, v };
	size_t		 len[3] = { strlen(cmd), k->len, vlen };

	return (cluster_queue(r->c, k->data, k->len, 3, argv, len));
}

/* A failed cluster_exec: its cause, with the index named. */
int
redis_fail(struct redis *r, char **cause)
{
	char	*c = *cause;

	xasprintf(cause, "index %s: %s", r->base.path, c);
	free(c);
	cluster_reset(r->c);
	return (INDEX_ERROR);
}

/* A reply that is an error: the cause.  Returns -1 for convenience. */
int
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
int
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

/*
 * Take a document number from the shared counter for this process alone
 * and make it run_doc (index_reserve_run).
 */
static int
redis_reserve_run(struct index *base, char **cause)
{
	struct redis	*r = (struct redis *)base;
	uint64_t	 docid;

	if (reserve_docs(r, 1, &docid, cause) != 0)
		return (INDEX_ERROR);
	r->base.run_doc = docid;
	return (0);
}

/* Take n document numbers from the shared counter; *first is the first. */
static int
reserve_docs(struct redis *r, size_t n, uint64_t *first, char **cause)
{
	const redisReply	*rp;
	char			 num[32];
	long long		 last;

	if (r->base.flags & INDEX_LOST) {
		xasprintf(cause, "index %s was lost (its document counter "
		    "went back, above): not used again", r->base.path);
		return (INDEX_ERROR);
	}
	snprintf(num, sizeof num, "%zu", n);
	ns_key(r, "seq", &r->key);
	q2(r, &r->key, "INCRBY", num, strlen(num));
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	rp = cluster_reply(r->c, 0);
	if (rp->type != REDIS_REPLY_INTEGER)
		return (reply_error(r, rp, "numbering", cause));
	last = rp->integer;
	*first = (uint64_t)last - n + 1;
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
		/*
		 * For good: this INCRBY moved the counter on, so that the
		 * next batch's numbers would pass the test above.
		 */
		r->base.flags |= INDEX_LOST;
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
		d->owner = 0;
		cache_insert(r, r->ndocs++);
	}
	d->state = state;
	d->off = r->cache.len;
	d->len = len;
	buf_append(&r->cache, v, len);
	return (d);
}

/* GET a {NS} counter; 0 when it does not exist. */
int
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

static void	redis_abort(struct index *);

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
	r->glast = NULL;
	r->llast = NULL;
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
struct rslot *
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
		else if (rp->type == REDIS_REPLY_STRING && rp->len >= 1 &&
		    rp->str[0] == ST_PENDING && (d = cache_find(r,
		    ids[i])) != NULL && d->state == ST_PENDING)
			continue;	/* polled again: nothing new */
		else if (rp->type == REDIS_REPLY_STRING && rp->len >= 1 &&
		    rp->str[0] == ST_PENDING)
			cache_add(r, ids[i], ST_PENDING, rp->str, rp->len);
		else if (rp->type == REDIS_REPLY_STRING && rp->len > 1 &&
		    rp->str[0] == ST_KEPT)
			cache_add(r, ids[i], ST_KEPT, rp->str, rp->len);
		else if (rp->type == REDIS_REPLY_STRING && rp->len > 9 &&
		    rp->str[0] == RVAL_GROUPED)
			cache_add(r, ids[i], ST_KEPT, rp->str, rp->len);
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
 * first_doc on (a read-only run only notes its records' keys and times),
 * and the last ticket given (GET {NS}:order), as late as can be before
 * our first APPEND, so that fewer tickets fall between it and ours (see
 * the top of the file).
 */
static int
write_pending(struct redis *r, const struct ixdoc *docs, size_t n,
    char **cause)
{
	const redisReply *rp;
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
		/*
		 * The whole value stays in the cache for the commit; Redis
		 * gets the state byte alone, all that others read of a
		 * pending document.
		 */
		slot_value(r, &docs[i], s->time, &r->val);
		cache_add(r, s->docid, ST_PENDING, r->val.data, r->val.len);
		doc_key(r, s->docid, &r->key);
		{
			const char	*argv[5] = { "SET", r->key.data,
					    r->val.data, "EX", "3600" };
			size_t		 len[5] = { 3, r->key.len, 1, 2, 4 };

			cluster_queue(r->c, r->key.data, r->key.len, 5, argv,
			    len);
		}
	}
	if (rdonly)
		return (0);
	ns_key(r, "order", &r->key);
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	if (replies_ok(r, 0, r->nown, "writing documents", cause) != 0)
		return (INDEX_ERROR);
	rp = cluster_reply(r->c, r->nown);
	r->order0 = 0;
	if (rp->type == REDIS_REPLY_STRING)
		r->order0 = strtoull(rp->str, NULL, 10);
	else if (rp->type != REDIS_REPLY_NIL)
		return (reply_error(r, rp, "reading the tickets", cause));
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

/* Bit t (0 to 2) of band key k in a filter of bits bits (a power of 2). */
static uint64_t
filter_bit(uint64_t k, unsigned t, uint64_t bits)
{
	static const uint64_t	 mul[3] = { 1, 0x9e3779b97f4a7c15ULL,
				    0xc2b2ae3d27d4eb4fULL };

	return (((k << (21 * t)) | (k >> (64 - 21 * t) % 64)) * mul[t] &
	    (bits - 1));
}

static void
set_bit(struct buf *f, uint64_t i)
{
	((unsigned char *)f->data)[i / 8] |= 1U << (i % 8);
}

static int
get_bit(const char *f, uint64_t i)
{
	return ((((const unsigned char *)f)[i / 8] >> (i % 8)) & 1);
}

/*
 * The filter of the batch's band keys for its ticket: a Bloom filter of
 * FILTER_BITS bits a key (a power of two), three bits a key, out of the
 * key itself (band keys are hashes already).  Another batch that took its
 * ticket while this one was appending reads again only the buckets whose
 * keys the filter may hold.  Empty when the batch is too big for one.
 */
static void
batch_filter(struct redis *r, size_t n, struct buf *f)
{
	struct rslot	*s;
	uint64_t	 bits = 64;
	unsigned	 b = r->base.p.bands, j, t;
	size_t		 i;

	f->len = 0;
	while (bits < (uint64_t)r->nown * b * FILTER_BITS)
		bits *= 2;
	if (bits > FILTER_MAXBITS)
		return;
	buf_reserve(f, bits / 8);
	memset(f->data, 0, bits / 8 + 1);
	f->len = bits / 8;
	for (i = 0; i < n; i++) {
		s = &r->slots[i];
		if (s->docid == 0)
			continue;
		for (j = 0; j < b; j++)
			for (t = 0; t < 3; t++)
				set_bit(f, filter_bit(s->keys[j], t, bits));
	}
}

/*
 * Round 3b: queue the batch's ticket (ticket_script) with its filter, to
 * be sent once every entry of the batch is appended; ticket_reply reads
 * it.
 */
static void
queue_ticket(struct redis *r, size_t n)
{
	struct buf	 k2 = { 0 }, k3 = { 0 }, f = { 0 };
	char		 fi[24], e[24], now[24], age[24], o[24], keep[8],
			 max[8], own[24];
	const char	*argv[15];
	size_t		 len[15];
	int		 i;

	ns_key(r, "order", &r->key);
	rkey_ns(&k2, r->ns, "tickets");
	rkey_ns(&k3, r->ns, "filters");
	batch_filter(r, n, &f);
	snprintf(fi, sizeof fi, "%" PRIu64, r->first_doc);
	snprintf(e, sizeof e, "%" PRIu64, r->first_doc + r->nown);
	snprintf(now, sizeof now, "%lld", (long long)time(NULL));
	snprintf(age, sizeof age, "%d", TICKET_AGE);
	snprintf(o, sizeof o, "%" PRIu64, r->order0);
	snprintf(keep, sizeof keep, "%d", FILTER_KEEP);
	snprintf(max, sizeof max, "%d", FILTER_MAX);
	snprintf(own, sizeof own, "%" PRIu64, r->owner);
	argv[0] = "EVAL";
	argv[1] = ticket_script;
	argv[2] = "3";
	argv[3] = r->key.data;
	argv[4] = k2.data;
	argv[5] = k3.data;
	argv[6] = fi;
	argv[7] = e;
	argv[8] = now;
	argv[9] = age;
	argv[10] = o;
	argv[11] = f.data != NULL ? f.data : "";
	argv[12] = keep;
	argv[13] = max;
	argv[14] = own;
	for (i = 0; i < 15; i++)
		if (i != 11)		/* the filter is bytes */
			len[i] = strlen(argv[i]);
	len[3] = r->key.len;
	len[4] = k2.len;
	len[5] = k3.len;
	len[11] = f.len;
	cluster_queue(r->c, r->key.data, r->key.len, 15, argv, len);
	buf_free(&k2);
	buf_free(&k3);
	buf_free(&f);
}

/*
 * The reply to queue_ticket: r->ticket, and into need (one byte a bucket
 * of the batch, as read_buckets numbers them) the buckets to read again
 * after it: none when no ticket was given since the batch read the
 * order, those the given tickets' filters may hold, or every one when a
 * filter is missing or there are too many.  *all says the last.
 */
static int
ticket_reply(struct redis *r, const redisReply *rp, size_t n,
    unsigned char *need, size_t nneed, int *all, char **cause)
{
	const redisReply *f;
	struct rslot	*s;
	uint64_t	 bits;
	unsigned	 b = r->base.p.bands, j, t;
	size_t		 i, k, x;

	/* ACL refusals name only the script's line: name its commands. */
	if (rp != NULL && rp->type == REDIS_REPLY_ERROR &&
	    strstr(rp->str, "can't run this command") != NULL)
		return (reply_error(r, rp, "ticket (a script of INCRBY, "
		    "ZRANGE, ZREM, ZADD, HSET, HGET and HDEL)", cause));
	if (rp == NULL || rp->type != REDIS_REPLY_ARRAY || rp->elements < 2 ||
	    rp->element[0]->type != REDIS_REPLY_INTEGER ||
	    rp->element[0]->integer <= 0 ||
	    rp->element[1]->type != REDIS_REPLY_INTEGER)
		return (reply_error(r, rp, "ticket", cause));
	r->ticket = (uint64_t)rp->element[0]->integer;
	*all = 0;
	if (rp->element[1]->integer <= 0)
		return (0);
	*all = rp->elements != 2 + (size_t)rp->element[1]->integer;
	for (x = 2; x < rp->elements && !*all; x++) {
		f = rp->element[x];
		if (f->type != REDIS_REPLY_STRING || f->len < 8 ||
		    (f->len & (f->len - 1)) != 0)
			*all = 1;
	}
	if (*all)
		return (0);
	for (x = 2; x < rp->elements; x++) {
		f = rp->element[x];
		bits = (uint64_t)f->len * 8;
		for (i = k = 0; i < n; i++) {
			s = &r->slots[i];
			if (s->docid == 0)
				continue;
			for (j = 0; j < b && k < nneed; j++, k++) {
				for (t = 0; t < 3; t++)
					if (!get_bit(f->str, filter_bit(
					    s->keys[j], t, bits)))
						break;
				if (t == 3)
					need[k] = 1;
			}
		}
	}
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
	struct rdoc		*d;
	uint64_t		 v[5];
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
		d = cache_find(r, ids[i]);
		d->ticket = TICKET_LATER;
		d->owner = 0;
		if (rp->elements == 0 ||
		    rp->element[0]->type != REDIS_REPLY_STRING)
			continue;
		/* FIRST:END:TICKET:OWNER:TIME, or FIRST:END:TICKET:TIME */
		p = rp->element[0]->str;
		end = p + rp->element[0]->len;
		for (f = 0; f < 5 && p < end; f++, p++) {
			for (v[f] = 0; p < end && *p >= '0' && *p <= '9'; p++)
				v[f] = v[f] * 10 + (uint64_t)(*p - '0');
			if (p < end && *p != ':')
				break;
		}
		if (f >= 4 && v[0] <= ids[i] && ids[i] < v[1] && v[2] != 0) {
			d->ticket = v[2];
			if (f == 5)
				d->owner = v[3];
		}
	}
	cluster_reset(r->c);
	return (0);
}

/* Queue a GET of every bucket of the batch whose need is set (all: NULL). */
static void
queue_buckets(struct redis *r, size_t n, const unsigned char *need)
{
	struct rslot	*s;
	unsigned	 b = r->base.p.bands, j;
	size_t		 i, k;

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
}

/*
 * Round 3: append to each bucket, then read back those that hold more
 * than our own entry (APPEND's reply, the bucket's length after it,
 * says), in a second round trip that also takes the batch's ticket: a
 * unique document's buckets are mostly its own, and a GET of each would
 * be half of Redis's work.  Of two writers on one bucket the later APPEND
 * sees the earlier entry, which is what the concurrency argument (the top
 * of the file) needs.  When tickets were given between our reading of
 * the order and our own, the buckets their filters may hold are read
 * again in a third round trip, after our ticket, with those read in the
 * second.  A read-only run reads every bucket.
 */
static int
read_buckets(struct redis *r, size_t n, char **cause)
{
	const redisReply *rp;
	struct rslot	*s;
	struct u64vec	 scratch = { 0 };
	unsigned	 b = r->base.p.bands, j;
	unsigned char	 be[8], *need = NULL, *again = NULL;
	size_t		 i, k, q = 0, nk = 0;
	int		 rdonly = r->base.flags & INDEX_RDONLY, rc = 0, all = 1;

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
		/*
		 * The ticket is queued first: the buckets' replies follow
		 * its.  The reads may run before it on other masters, which
		 * is right for every batch whose ticket came before our
		 * reading of the order (its entries were appended before
		 * ours, and our APPEND's reply showed them).
		 */
		if (r->nown != 0) {
			queue_ticket(r, n);
			q = 1;
		}
		nk = k;
	}
	queue_buckets(r, n, need);
	if (cluster_queued(r->c) != 0 && cluster_exec(r->c, cause) != 0) {
		free(need);
		return (redis_fail(r, cause));
	}
	if (q != 0) {
		again = xcalloc(nk + 1, 1);
		if ((rc = ticket_reply(r, cluster_reply(r->c, 0), n, again, nk,
		    &all, cause)) != 0) {
			free(again);
			free(need);
			return (rc);
		}
	}
	/*
	 * Tickets given between our reading of the order and ours: those
	 * batches may have appended after we did, and the reads above may
	 * have run before our ticket, so the buckets that their filters
	 * may hold (or every one, if a filter is missing), and those read
	 * above, are read again, now that our ticket is given.
	 */
	if (r->ticket > r->order0 + 1) {
		r->rereads++;
		cluster_reset(r->c);
		for (k = 0; k < nk && !all; k++)
			need[k] |= again[k];
		if (all) {
			free(need);
			need = NULL;
		}
		q = 0;
		queue_buckets(r, n, need);
		r->reread += cluster_queued(r->c);
		if (cluster_queued(r->c) != 0 &&
		    cluster_exec(r->c, cause) != 0) {
			free(again);
			free(need);
			return (redis_fail(r, cause));
		}
	}
	free(again);
	for (i = k = 0; i < n && rc == 0; i++) {
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
 *
 * A writer that died never decides: once a wait has lasted OWNER_CHECK,
 * and every OWNER_CHECK after, the writers waited for are looked for
 * among those running (find_stopped); the pending records of one missing
 * at two looks in a row, or known stopped, are passed over at once.
 * Records of a writer that wrote no owner with its ticket are waited for
 * up to PENDING_WAIT, as are those of one that runs but does not decide
 * (stalled, or cut off from Redis).
 */
static int
wait_pending(struct redis *r, struct u64vec *want, char **cause)
{
	struct rdoc	*d;
	struct u64vec	 owners = { 0 }, suspects = { 0 }, scratch = { 0 };
	double		 start, deadline, check, pause;
	uint64_t	 owner;
	size_t		 i, k;
	int		 first = 1, rc;

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

	start = now_seconds();
	deadline = start + PENDING_WAIT;
	check = start + OWNER_CHECK;
	pause = 0.001;
	for (rc = 0; rc == 0;) {
		want->n = 0;
		for (i = 0; i < r->ndocs; i++) {
			d = &r->docs[i];
			if (d->state != ST_PENDING || d->ticket == 0 ||
			    d->ticket >= r->ticket ||
			    own_slot(r, d->docid) != NULL)
				continue;
			if (d->owner != 0 && redis_stopped(r, d->owner))
				d->state = ST_PASSED;	/* never decided */
			else
				u64vec_push(want, d->docid);
		}
		if (want->n == 0)
			break;
		if (first)
			r->waits += want->n;
		first = 0;
		if (now_seconds() > deadline) {
			/* A writer that stalled: treat them as gone. */
			for (k = 0; k < want->n; k++)
				cache_find(r, want->v[k])->state = ST_PASSED;
			r->timeouts += want->n;
			log_warnx("index %s: %zu candidates still pending "
			    "after %.0f s; passed over", r->base.path, want->n,
			    PENDING_WAIT);
			break;
		}
		if (now_seconds() >= check) {
			owners.n = 0;
			for (k = 0; k < want->n; k++)
				if ((owner = cache_find(r,
				    want->v[k])->owner) != 0)
					u64vec_push(&owners, owner);
			u64_sort_unique(&owners, &scratch);
			if (owners.n != 0 && (rc = find_stopped(r, &owners,
			    &suspects, cause)) < 0)
				break;
			check = now_seconds() + OWNER_CHECK;
			if (rc > 0) {
				rc = 0;
				continue;	/* some of want were theirs */
			}
		}
		usleep(pause * 1e6);
		if (pause < 0.05)
			pause *= 2;
		rc = fetch_docs(r, want->v, want->n, cause);
	}
	u64vec_free(&owners);
	u64vec_free(&suspects);
	u64vec_free(&scratch);
	return (rc < 0 ? INDEX_ERROR : 0);
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
	/*
	 * Our connections are named before anything of ours is written:
	 * the delivery marks' owner, and our tickets' (redismarks.c).
	 */
	if (!rdonly && r->owner == 0 &&
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
	    r->sig, d, &state, NULL);
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
	    NULL, &d, &state, NULL);
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
	r->glast = NULL;
	r->llast = NULL;
	if (slot != INDEX_NOSLOT && slot < r->nslots &&
	    r->slots[slot].docid != 0 && r->slots[slot].docid != UINT64_MAX) {
		r->slots[slot].kept = 1;
		r->slots[slot].flags = flags;
		r->glast = &r->slots[slot];
		r->base.last_doc = r->glast->docid;
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
	l->group = 0;
	l->token = r->tokdoc.n;
	u64vec_push(&r->tokdoc, 0);
	r->base.last_doc = LATER_TOKEN | l->token;
	r->llast = l;
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
 * The first document of docid's group: a document of this batch's from
 * its slot, the one an export is at from the scan, another from its value
 * (read by this batch, or now), RVAL_GROUPED's number or its own.
 */
static int
redis_group(struct index *base, uint64_t docid, uint64_t *group,
    char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct rslot	*s;
	struct rdoc	*rd;
	const char	*v;

	*group = docid;
	if ((s = own_slot(r, docid)) != NULL) {
		if (s->group != 0)
			*group = s->group;
		return (0);
	}
	if (docid == r->each_doc) {
		if (r->each_group != 0)
			*group = r->each_group;
		return (0);
	}
	if ((rd = cache_find(r, docid)) == NULL) {
		if (fetch_docs(r, &docid, 1, cause) != 0)
			return (INDEX_ERROR);
		rd = cache_find(r, docid);
	}
	v = r->cache.data + rd->off;
	if (rd->state != ST_KEPT || rd->len < 9 || v[0] != RVAL_GROUPED)
		return (0);
	if ((*group = get_be64((const unsigned char *)v + 1)) == 0 ||
	    *group >= docid) {
		xasprintf(cause, "index %s: the group of document %" PRIu64
		    " is damaged", r->base.path, docid);
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * The document the last insert added is a duplicate in group (a number,
 * or an unprepared insertion's token, numbered at commit).
 */
static int
redis_set_group(struct index *base, uint64_t group, char **cause)
{
	struct redis	*r = (struct redis *)base;

	(void)cause;
	if (r->glast != NULL && group < r->glast->docid)
		r->glast->group = group;
	else if (r->llast != NULL) {
		if ((group & LATER_TOKEN) && (group & ~LATER_TOKEN) <
		    r->tokdoc.n && r->tokdoc.v[group & ~LATER_TOKEN] != 0)
			group = r->tokdoc.v[group & ~LATER_TOKEN];
		r->llast->group = group;
	}
	return (0);
}

/*
 * Queue EVAL of a script on key k with one argument.  Redis caches the
 * compiled script by its hash, so sending the text costs only bytes.
 */
void
queue_eval(struct redis *r, const char *script, const struct buf *k,
    const char *arg, size_t arglen)
{
	const char	*argv[5] = { "EVAL", script, "1", k->data, arg };
	size_t		 len[5] = { 4, strlen(script), 1, k->len, arglen };

	cluster_queue(r->c, k->data, k->len, 5, argv, len);
}

/* Queue the removal of one entry from one bucket. */
void
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
	uint64_t		 kept = 0, docid, first = 0, end = 0, g;
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
			rval_keep(&r->val, r->cache.data + rd->off, rd->len,
			    s->flags, s->group);
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
		for (i = 0; i < r->nlater; i++)
			r->tokdoc.v[r->later[i]->token] = docid + i;
		for (i = 0; i < r->nlater; i++, docid++) {
			l = r->later[i];
			doc_key(r, docid, &r->key);
			g = l->group;
			if (g & LATER_TOKEN)
				g = (g & ~LATER_TOKEN) < r->tokdoc.n ?
				    r->tokdoc.v[g & ~LATER_TOKEN] : 0;
			r->val.len = 0;
			rval_keep(&r->val, r->lbuf.data + l->off, l->len, -1,
			    g < docid ? g : 0);
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
	.group = redis_group,
	.set_group = redis_set_group,
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
	.reserve_run = redis_reserve_run,
};
