/*
 * The Redis backend's operations on the whole index, most of them a scan
 * of the namespace (redis_scan): --export (redis_each), --remove,
 * --info and --check; and the counts, the retention and the parameters
 * of an empty index (--import: redis_adopt).
 *
 * Retention: --retain sets each kept document's expiry (Redis deletes it);
 * --max-docs advances {NS}:floor and deletes the documents below it, a
 * bounded number per batch.  Bucket entries of documents that are gone are
 * removed when a lookup meets them.
 */

#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "mhfilter.h"
#include "redisint.h"

#define EXPIRE_ROUND	10000	/* documents expired per round trip */

/*
 * Delete the document KEYS[1] if its state is one of the bytes of ARGV[1];
 * returns 1 if so.
 */
static const char expire_script[] =
    "local v = redis.call('GETRANGE', KEYS[1], 0, 0)\n"
    "if v ~= '' and string.find(ARGV[1], v, 1, true) then\n"
    "  redis.call('DEL', KEYS[1]) return 1\n"
    "end\n"
    "return 0\n";

/* Raise {NS}:floor to ARGV[1] if it is lower; returns the old floor. */
static const char floor_script[] =
    "local f = tonumber(redis.call('GET', KEYS[1]) or '1')\n"
    "if tonumber(ARGV[1]) > f then redis.call('SET', KEYS[1], ARGV[1]) end\n"
    "return f\n";

static int	redis_scan(struct redis *, int, int (*)(struct redis *,
		    uint64_t, const char *, size_t, void *), void *, char **);

/* Documents kept (roughly: key expiry does not count down). */
int
redis_stats(struct index *base, struct index_stats *st, char **cause)
{
	struct redis	*r = (struct redis *)base;
	uint64_t	 docs;

	memset(st, 0, sizeof *st);
	if (get_counter(r, "docs", &docs, cause) != 0)
		return (INDEX_ERROR);
	st->docs = docs;
	st->roundtrips = cluster_roundtrips(r->c);
	st->rereads = r->rereads;
	st->reread = r->reread;
	st->waits = r->waits;
	return (0);
}

/*
 * Retention.  max_age is applied at commit as each kept document's expiry
 * (remembered here); max_docs advances the floor over the oldest numbers,
 * at most budget documents a call.
 */
int
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
			queue_eval(r, expire_script, &r->key, "KG", 2);
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
 * GET the values of ids (document numbers, or band keys for kind 'b') in
 * one pipeline and call fn for each, as redis_scan does.
 */
static int
scan_get(struct redis *r, int kind, const struct u64vec *ids,
    int (*fn)(struct redis *, uint64_t, const char *, size_t, void *),
    void *arg, char **cause)
{
	const redisReply	*rp;
	char			*val;
	size_t			 i;
	int			 rc = 0;

	cluster_reset(r->c);
	for (i = 0; i < ids->n; i++) {
		if (kind == 'b')
			band_key(r, ids->v[i], &r->key);
		else
			doc_key(r, ids->v[i], &r->key);
		q1(r, &r->key, "GET");
	}
	if (ids->n != 0 && cluster_exec(r->c, cause) != 0)
		return (redis_fail(r, cause));
	for (i = 0; i < ids->n && rc == 0; i++) {
		rp = cluster_reply(r->c, i);
		if (rp->type == REDIS_REPLY_NIL)
			continue;	/* gone meanwhile */
		if (rp->type != REDIS_REPLY_STRING) {
			rc = fn(r, ids->v[i], NULL, 0, arg);
			continue;
		}
		val = xmalloc(rp->len + 1);
		memcpy(val, rp->str, rp->len);
		rc = fn(r, ids->v[i], val, rp->len, arg);
		free(val);
	}
	cluster_reset(r->c);
	return (rc);
}

/*
 * Call fn for every document record (kind 'd', or 'o' for oldest first)
 * or band bucket (kind 'b') of the namespace, with its number or band key
 * (a SCAN of every master, then GETs in blocks; in order, the numbers of
 * all documents first, 8 bytes each).  A value that is not a string is
 * given as NULL.  fn returns 0 to go on, else stops the scan with that
 * value.
 */
static int
redis_scan(struct redis *r, int kind, int (*fn)(struct redis *, uint64_t,
    const char *, size_t, void *), void *arg, char **cause)
{
	const redisReply	*rp, *keys;
	struct buf		 pat = { 0 }, cursor = { 0 };
	struct u64vec		 ids = { 0 }, all = { 0 }, block = { 0 };
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
					u64vec_push(kind == 'o' ? &all : &ids,
					    id);
			}
			if (ids.n != 0)
				rc = scan_get(r, kind, &ids, fn, arg, cause);
		} while (rc == 0 && strcmp(cursor.data, "0") != 0);
	}
	if (kind == 'o' && rc == 0) {
		sort_u64(all.v, all.n, &ids);
		for (i = 0; i < all.n && rc == 0; i += 1000) {
			block.v = all.v + i;
			block.n = all.n - i < 1000 ? all.n - i : 1000;
			rc = scan_get(r, kind, &block, fn, arg, cause);
		}
	}
	buf_free(&pat);
	buf_free(&cursor);
	u64vec_free(&ids);
	u64vec_free(&all);
	return (rc);
}

/*
 * Decode a scanned value, its group into *group (may be NULL); returns
 * where its text begins, or 0 if it is not a kept document's.
 */
static size_t
scan_decode(struct redis *r, const char *v, size_t len, struct docinfo *d,
    uint64_t *group)
{
	size_t	 n;
	int	 state;

	if ((n = rval_decode(v, len, r->base.p.perms, r->sig, d,
	    &state, group)) == 0)
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

	if (scan_decode(r, v, len, &d, NULL) == 0 || d.idlen != rm->idlen ||
	    memcmp(d.id, rm->id, rm->idlen) != 0)
		return (0);
	u64vec_push(&rm->found, docid);
	doc_bands(r, &rm->keys);
	return (0);
}

/* Remove every document with this id (a scan: there is no id index). */
int
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
	uint64_t		 group;
	size_t			 n;
	int			 state;

	if (docid > ns->seq)
		problem(ns, "document %" PRIu64 ": numbered past {%s}:seq "
		    "(%" PRIu64 ")", docid, r->ns, ns->seq);
	/* Pending: the state byte alone (layout 4: and the record). */
	if (v != NULL && len >= 1 && v[0] == ST_PENDING) {
		u64vec_push(&ns->pending, docid);
		return (0);
	}
	if (v == NULL || (n = rval_decode(v, len, r->base.p.perms, r->sig,
	    &d, &state, &group)) == 0 || state != ST_KEPT) {
		problem(ns, "document %" PRIu64 ": corrupt record", docid);
		return (0);
	}
	if (group >= docid)
		problem(ns, "document %" PRIu64 ": its group (%" PRIu64 ") is "
		    "not an earlier document", docid, group);
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
int
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
int
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

	if ((n = scan_decode(r, v, len, &d, &r->each_group)) == 0)
		return (0);
	if (r->base.p.texts && text_decode((const unsigned char *)v + n,
	    len - n, &text) < 0)
		return (0);
	d.docid = docid;
	r->each_doc = docid;		/* for redis_group */
	rc = es->fn(es->arg, &d, r->base.p.texts ? &text : NULL, es->cause);
	r->each_doc = 0;
	buf_free(&text);
	return (rc);
}

/*
 * Call fn for every kept document, oldest first (an export's groups name
 * earlier documents); stop at its first non-zero return, and return it.
 */
int
redis_each(struct index *base, index_each_fn fn, void *arg, char **cause)
{
	struct redis	*r = (struct redis *)base;
	struct eachscan	 es = { fn, arg, cause };

	return (redis_scan(r, 'o', each_one, &es, cause));
}

/* Rewrite the parameters of an index that holds no documents yet. */
int
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
