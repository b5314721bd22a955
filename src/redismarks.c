/*
 * The Redis backend's delivery marks ({NS}:undelivered) and their owners
 * (the names of the writers' connections), for a stream with --replay
 * undelivered.
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
 * Every writer takes an owner, --replay undelivered or not, and writes it
 * with its batches' tickets: a batch waiting for another's pending
 * records asks the same question, to pass over at once those of a writer
 * that died (redis.c, wait_pending).  Just after a failover a running
 * writer may have no connection to the new master yet: a writer is taken
 * for stopped when two looks a second apart find none, and the answer is
 * kept STOPPED_KEEP seconds, then asked again, since a wrong one kept for
 * good would let it and us keep pairs twice for the rest of the run.
 */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "mhfilter.h"
#include "redisint.h"

#define OWNER_NAME	"mhfilter:"	/* connections: mhfilter:NS:OWNER */
#define STOPPED_KEEP	60.0	/* seconds a writer is known stopped */

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
void
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
int
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
int
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

/* Did this process insert docid (committed, or in the open batch)? */
int
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

/* Is the writer owner known to have stopped (find_stopped)? */
int
redis_stopped(struct redis *r, uint64_t owner)
{
	double	 now = now_seconds();
	size_t	 i;

	for (i = 0; i + 1 < r->stopped.n; i += 2)
		if (r->stopped.v[i] == owner)
			return ((double)r->stopped.v[i + 1] / 1e3 > now);
	return (0);
}

/*
 * Which of these owners (of pending records waited for; sorted, each
 * once) have stopped: those the master of {NS} had no connection of at
 * this look and at the one before (*suspects, a second earlier: one look
 * could come just after a failover, before a running writer
 * reconnected).  They are kept in r->stopped, owner and until when
 * (milliseconds), with a warning; *suspects becomes those missing at
 * this look alone, sorted.  Returns how many were found stopped, or
 * INDEX_ERROR.
 */
int
find_stopped(struct redis *r, const struct u64vec *owners,
    struct u64vec *suspects, char **cause)
{
	struct u64vec	 missing = { 0 };
	uint64_t	 until, owner;
	size_t		 i, j, found = 0;

	if (read_writers(r, &r->writers, cause) != 0)
		return (INDEX_ERROR);
	r->wread = 1;
	until = (uint64_t)((now_seconds() + STOPPED_KEEP) * 1e3);
	for (i = 0; i < owners->n; i++) {
		owner = owners->v[i];
		if (owner_in(&r->writers, owner) || redis_stopped(r, owner))
			continue;
		if (!owner_in(suspects, owner)) {
			u64vec_push(&missing, owner);
			continue;
		}
		/* Seen stopped before, and its minute over: renewed. */
		for (j = 0; j + 1 < r->stopped.n; j += 2)
			if (r->stopped.v[j] == owner)
				break;
		if (j + 1 < r->stopped.n)
			r->stopped.v[j + 1] = until;
		else {
			u64vec_push(&r->stopped, owner);
			u64vec_push(&r->stopped, until);
			log_warnx("index %s: writer %" PRIu64 " has stopped; "
			    "its pending records are passed over",
			    r->base.path, owner);
		}
		found++;
	}
	u64vec_free(suspects);
	*suspects = missing;
	return ((int)found);
}

/*
 * Is docid in an undelivered range whose output may never be written?
 * 1, 0, or INDEX_ERROR.  One of ours is, until we deliver it; another
 * writer's is once that writer has stopped (or gave up the range: owner
 * 0).
 */
int
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
void
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
void
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
