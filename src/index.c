/*
 * The index: band keys to candidate documents, and the documents
 * themselves.  This file picks a storage backend and dispatches to it
 * through its index_ops; the storage is the backend's:
 *
 *   lmdb.c   an LMDB environment in a directory (the default): one
 *            machine, one writer at a time, a log-structured band index
 *            (lsm.c), checks (lmdbcheck.c), delivery marks (lmdbmarks.c),
 *            formats and seals (lmdbformat.c), a fault guard (lmdbguard.c);
 *   redis.c  a Redis Cluster (or one Redis) shared by many processes on
 *            many machines: --db redis://host:port[,host:port...][/ns].
 *
 * What both store, byte for byte, is codec.c's; export and import are
 * export.c's.  Calls go one way: callers (filter.c, maint.c, export.c) to
 * this file, this file to a backend, a backend to codec.c.
 *
 * The calling sequence for a batch is index_begin, index_prepare (the
 * whole batch, once), then per record index_candidates, index_doc,
 * index_text and index_insert_encoded, then index_commit (or index_abort).
 * The caller reports a verdict only after index_commit succeeds.  What
 * each call returns is in mhfilter.h.
 *
 * Every call into a backend that has a fault guard (index_ops.guard: the
 * LMDB backend's) runs with it armed (GUARDED): LMDB reads a damaged page
 * in place, and a fault or one of its assertions there ends the call with
 * INDEX_ERROR, not the process.
 */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mhfilter.h"

/*
 * Return call's result; with the backend's (ops) fault guard armed around
 * it, if it has one (mhfilter.h: struct index_guard; the jump point must be
 * a frame that outlives the call, so it is here, not in the backend).  ix
 * is the index, or NULL while path is being opened.  An index damaged once
 * is not called again.
 */
#define GUARDED(ops, ix, path, cause, call) do {			\
	const struct index_guard *g_ = (ops)->guard;			\
	sigjmp_buf	 jb_, *prev_;					\
	int		 rv_;						\
									\
	if (g_ == NULL)							\
		return (call);						\
	if ((ix) != NULL && ((ix)->flags & INDEX_DAMAGED))		\
		return (g_->damaged(ix, cause));			\
	prev_ = g_->arm(&jb_);						\
	if (sigsetjmp(jb_, 0) != 0)					\
		return (g_->caught(ix, path, prev_, cause));		\
	rv_ = (call);							\
	g_->arm(prev_);							\
	return (rv_);							\
} while (0)
#define GUARDED_IX(ix, cause, call) \
	GUARDED((ix)->ops, ix, (ix)->path, cause, call)

/* Does path name an index on a server (a redis:// URL)? */
int
index_is_remote(const char *path)
{
	return (path != NULL && strncmp(path, "redis://", 8) == 0);
}

/* The backend of an index path. */
static int	index_no_measure(const char *, int, char **);

static const struct index_ops *
index_backend(const char *path)
{
	return (index_is_remote(path) ? &redis_ops : &lmdb_ops);
}

/*
 * Does --compact apply to the index at path (its backend has a compact)?
 * 0, or -1 with a cause, before anything is opened.
 */
int
index_compactable(const char *path, char **cause)
{
	const struct index_ops	*ops = index_backend(path);

	if (ops->compact != NULL)
		return (0);
	xasprintf(cause, "--compact does not apply to a %s index (%s)",
	    ops->name, ops->no_compact);
	return (-1);
}

/*
 * --redis-password-file: the credentials file, read now by every backend
 * that connects to a server (password_file), for all its connections.  0,
 * or -1 with a cause.
 */
int
index_password_file(const char *path, char **cause)
{
	const struct index_ops	*ops[] = { &lmdb_ops, &redis_ops };
	size_t			 i;

	for (i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		if (ops[i]->password_file != NULL &&
		    ops[i]->password_file(path, cause) != 0)
			return (-1);
	}
	return (0);
}

/*
 * Might path hold an index?  See index_ops.exists; size, when not NULL,
 * gets the bytes of its data file (0 if that has no meaning).
 */
int
index_exists(const char *path, uint64_t *size)
{
	uint64_t	 dummy;

	return (index_backend(path)->exists(path, size != NULL ? size :
	    &dummy));
}

/* The exit status of mhfilter(1) for an index return code. */
int
index_exit_status(int rc)
{
	if (rc >= 0)
		return (EXIT_OK);
	return (rc == INDEX_MISMATCH ? EXIT_MISMATCH : EXIT_ERROR);
}

/* The backend's open, and the index's ops set. */
static int
index_open_ops(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	const struct index_ops	*ops = index_backend(path);
	int			 rc;

	if (index_is_remote(path) && (given & IP_MEASURE) &&
	    p->measure != MEASURE_JACCARD)
		return (index_no_measure(path, p->measure, cause));
	if ((rc = ops->open(ixp, path, flags, p, given, cause)) != 0)
		return (rc);
	(*ixp)->ops = ops;
	if (index_is_remote(path) && (*ixp)->p.measure != MEASURE_JACCARD) {
		rc = index_no_measure(path, (*ixp)->p.measure, cause);
		index_close(*ixp);
		*ixp = NULL;
	}
	return (rc);
}

/*
 * Containment is for LMDB indexes: Redis's removal makes a document's band
 * keys again from its signature, which under containment only its whole
 * text's are.  INDEX_MISMATCH with a cause.
 */
static int
index_no_measure(const char *path, int measure, char **cause)
{
	xasprintf(cause, "%s: --measure %s needs an LMDB index (--db DIR)",
	    path, measure_name(measure));
	return (INDEX_MISMATCH);
}

/*
 * Open the index named by path: a redis:// URL or an LMDB directory (NULL
 * makes a temporary one).
 */
int
index_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	GUARDED(index_backend(path), (struct index *)NULL, path, cause,
	    index_open_ops(ixp, path, flags, p, given, cause));
}

/* Close the index (NULL is allowed). */
void
index_close(struct index *ix)
{
	if (ix != NULL)
		ix->ops->close(ix);
}

/* Start a batch's transaction. */
int
index_begin(struct index *ix, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->begin(ix, cause));
}

/* Tell the backend a batch's records before they are looked up. */
int
index_prepare(struct index *ix, const struct ixdoc *docs, size_t n,
    char **cause)
{
	if (ix->ops->prepare == NULL)
		return (0);
	GUARDED_IX(ix, cause, ix->ops->prepare(ix, docs, n, cause));
}

/* Commit the batch's transaction. */
int
index_commit(struct index *ix, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->commit(ix, cause));
}

/* Throw the batch's transaction away. */
void
index_abort(struct index *ix)
{
	ix->ops->abort(ix);
}

/* The documents sharing the record's band keys, once per band shared. */
int
index_candidates(struct index *ix, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	GUARDED_IX(ix, cause,
	    ix->ops->candidates(ix, slot, keys, out, cause));
}

/* A document's record; its signature stays valid until the next call. */
int
index_doc(struct index *ix, uint64_t docid, struct docinfo *d, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->doc(ix, docid, d, cause));
}

/* A document's normalised text, and its DOC_BYTES flag. */
int
index_text(struct index *ix, uint64_t docid, struct buf *out, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->text(ix, docid, out, cause));
}

/* Insert a document (not prepared), encoding its text here. */
int
index_insert(struct index *ix, const uint64_t *keys, const uint32_t *sig,
    const char *id, size_t idlen, const char *text, size_t textlen,
    int flags, int64_t when, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->insert(ix, INDEX_NOSLOT, keys, sig,
	    id, idlen, text, textlen, NULL, 0, flags, when, cause));
}

/*
 * Insert a document whose text was encoded by textenc_encode (enc not
 * NULL), so that worker threads compress while the writer writes.
 */
int
index_insert_encoded(struct index *ix, size_t slot, const uint64_t *keys,
    const uint32_t *sig, const char *id, size_t idlen, const char *text,
    size_t textlen, const char *enc, size_t enclen, int flags, int64_t when,
    char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->insert(ix, slot, keys, sig, id, idlen,
	    text, textlen, enc, enclen, flags, when, cause));
}

/* Counts and size, for --stats. */
int
index_stats(struct index *ix, struct index_stats *st, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->stats(ix, st, cause));
}

/* Remove what the retention limits allow, at most budget documents. */
int
index_expire(struct index *ix, const struct retention *ret, int64_t now,
    uint64_t budget, uint64_t *removed, char **cause)
{
	GUARDED_IX(ix, cause,
	    ix->ops->expire(ix, ret, now, budget, removed, cause));
}

/* Remove every document with this external id. */
int
index_remove(struct index *ix, const char *id, size_t idlen,
    uint64_t *removed, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->remove(ix, id, idlen, removed, cause));
}

/* What --info prints. */
int
index_info(struct index *ix, struct index_info *in, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->info(ix, in, cause));
}

/* Check the index's consistency; the report goes to f. */
int
index_check(struct index *ix, FILE *f, uint64_t *problems, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->check(ix, f, problems, cause));
}

/* A compacted copy of the index in dest. */
int
index_compact(struct index *ix, const char *dest, char **cause)
{
	if (ix->ops->compact == NULL) {
		xasprintf(cause, "--compact does not apply to a %s index",
		    ix->ops->name);
		return (INDEX_ERROR);
	}
	GUARDED_IX(ix, cause, ix->ops->compact(ix, dest, cause));
}

/* Call fn for every document (export.c: index_export). */
int
index_each(struct index *ix, index_each_fn fn, void *arg, char **cause)
{
	GUARDED_IX(ix, cause, ix->ops->each(ix, fn, arg, cause));
}

/* Give an index with no documents yet other parameters (index_import). */
int
index_adopt(struct index *ix, const struct index_params *want,
    char **cause)
{
	if (index_is_remote(ix->path) && want->measure != MEASURE_JACCARD)
		return (index_no_measure(ix->path, want->measure, cause));
	GUARDED_IX(ix, cause, ix->ops->adopt(ix, want, cause));
}

/* The first document number this process could have inserted. */
uint64_t
index_run_start(struct index *ix)
{
	return (ix->run_doc);
}

/* Make the run's number this process's alone (see reserve_run). */
int
index_reserve_run(struct index *ix, char **cause)
{
	if (ix->ops->reserve_run == NULL ||
	    (ix->flags & (INDEX_RDONLY | INDEX_TEMP)))
		return (0);
	GUARDED_IX(ix, cause, ix->ops->reserve_run(ix, cause));
}

/*
 * Did this process insert docid (this run's document)?  By the backend's
 * record of its own commits where it keeps one (LMDB: another writer's
 * documents interleave with this run's), else by number.
 */
int
index_own(struct index *ix, uint64_t docid)
{
	if (ix->ops->own == NULL)
		return (docid >= ix->run_doc);
	return (ix->ops->own(ix, docid));
}

/* The index's name as given (a directory or a URL). */
const char *
index_path(struct index *ix)
{
	return (ix->path);
}

/*
 * Return a reader's call's result, or INDEX_ERROR should the call fault:
 * with the guard armed as GUARDED does, but on the reader's thread and
 * without marking the index damaged from there (the writer's own calls
 * meet the damage and report it).
 */
#define GUARDED_READER(ops, call) do {				\
	const struct index_guard *g_ = (ops)->guard;			\
	sigjmp_buf	 jb_, *prev_;					\
	int		 rv_;						\
									\
	if (g_ == NULL)							\
		return (call);						\
	prev_ = g_->arm(&jb_);						\
	if (sigsetjmp(jb_, 0) != 0) {					\
		g_->arm(prev_);						\
		return (INDEX_ERROR);					\
	}								\
	rv_ = (call);							\
	g_->arm(prev_);							\
	return (rv_);							\
} while (0)

/* Does the backend lend readers (index_reader_open)? */
int
index_has_readers(struct index *ix)
{
	return (ix->ops->reader_open != NULL);
}

/* A reader for another thread, from prepare until index_settle. */
int
index_reader_open(struct index *ix, struct ixreader **rp)
{
	if (ix->ops->reader_open == NULL || (ix->flags & INDEX_DAMAGED))
		return (1);
	GUARDED_READER(ix->ops, ix->ops->reader_open(ix, rp));
}

void
index_reader_close(struct ixreader *r)
{
	r->ix->ops->reader_close(r);
}

/* Every reader closed: the inserts made meanwhile reach the lookups. */
int
index_settle(struct index *ix, char **cause)
{
	if (ix->ops->settle == NULL)
		return (0);
	GUARDED_IX(ix, cause, ix->ops->settle(ix, cause));
}

/* index_candidates through a reader; *most: the fullest key's count. */
int
index_reader_candidates(struct ixreader *r, const uint64_t *keys,
    struct u64vec *out, size_t *most)
{
	GUARDED_READER(r->ix->ops,
	    r->ix->ops->reader_candidates(r, keys, out, most));
}

/* Start loading what a reader's lookup of keys will read (stage 0, 1). */
void
index_reader_prefetch(struct ixreader *r, const uint64_t *keys, int stage)
{
	if (r->ix->ops->reader_prefetch != NULL)
		r->ix->ops->reader_prefetch(r, keys, stage);
}

/* Start loading what an insert of these band keys will write. */
void
index_insert_prefetch(struct index *ix, const uint64_t *keys, int stage)
{
	if (ix->ops->insert_prefetch != NULL)
		ix->ops->insert_prefetch(ix, keys, stage);
}

/* index_doc through a reader. */
int
index_reader_doc(struct ixreader *r, uint64_t docid, struct docinfo *d)
{
	GUARDED_READER(r->ix->ops, r->ix->ops->reader_doc(r, docid, d));
}

/* index_text through a reader, its DOC_BYTES flag into *bytes. */
int
index_reader_text(struct ixreader *r, uint64_t docid, struct buf *out,
    int *bytes)
{
	GUARDED_READER(r->ix->ops,
	    r->ix->ops->reader_text(r, docid, out, bytes));
}

/* The number of the document the last insert added (0: not known). */
uint64_t
index_last_doc(struct index *ix)
{
	return (ix->last_doc);
}

/* The document numbers [first, end) the last commit inserted. */
void
index_batch_range(struct index *ix, uint64_t *first, uint64_t *end)
{
	*first = ix->batch_first;
	*end = ix->batch_end;
}

/*
 * Might an earlier run's document be missing from that run's output (its
 * batch committed, its output never marked delivered)?  1, 0, or
 * INDEX_ERROR.  A backend that cannot tell says 1: at least once.
 */
int
index_undelivered(struct index *ix, uint64_t docid, char **cause)
{
	if (ix->ops->undelivered == NULL)
		return (1);
	GUARDED_IX(ix, cause, ix->ops->undelivered(ix, docid, cause));
}

/*
 * The output of these ranges of documents ([first, end) pairs) and of
 * these replays was delivered: the next commit forgets them.
 */
void
index_delivered(struct index *ix, const uint64_t *ranges, size_t nranges,
    const uint64_t *replays, size_t nreplays)
{
	if (ix->ops->delivered != NULL)
		ix->ops->delivered(ix, ranges, nranges, replays, nreplays);
}

/*
 * The output of these ranges of this process's documents will never be
 * written: the next commit gives them up to whoever meets them.
 */
void
index_abandoned(struct index *ix, const uint64_t *ranges, size_t nranges)
{
	if (ix->ops->abandoned != NULL)
		ix->ops->abandoned(ix, ranges, nranges);
}

/*
 * The first document of docid's group: where a chain of duplicates
 * started.  0, or INDEX_ERROR.
 */
int
index_group(struct index *ix, uint64_t docid, uint64_t *group, char **cause)
{
	if (ix->ops->group == NULL) {
		*group = docid;
		return (0);
	}
	GUARDED_IX(ix, cause, ix->ops->group(ix, docid, group, cause));
}

/* The document just inserted is a duplicate in group. */
int
index_set_group(struct index *ix, uint64_t group, char **cause)
{
	if (ix->ops->set_group == NULL)
		return (0);
	GUARDED_IX(ix, cause, ix->ops->set_group(ix, group, cause));
}
