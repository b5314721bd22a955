/*
 * The index: an LMDB environment (a directory with data.mdb and lock.mdb).
 * This is the only file that talks to LMDB.
 *
 * Four named databases, format 1:
 *
 *   meta   text key -> text value: "format", "scheme", every parameter that
 *          changes signatures or band keys ("perms", "bands", "rows",
 *          "shingle", "unit", "normalize", "seed"), whether texts are kept
 *          ("texts"), the defaults later runs take ("verify", "threshold"),
 *          "created" and "next_doc", the next document number.
 *   bands  8-byte band key (big-endian XXH3) -> 8-byte document numbers,
 *          DUPSORT|DUPFIXED, so one key holds every document in its bucket,
 *          sorted, in as little as 8 bytes an entry.
 *   docs   8-byte document number (big-endian, so key order is insertion
 *          order, which retention can walk) -> a document record:
 *            u8 version (1), u8 flags (DOC_*), u16 0, u32 id length,
 *            i64 insertion time (big-endian, seconds since the epoch),
 *            K x u32 signature (little-endian), the external id.
 *   texts  8-byte document number -> the normalised text for exact
 *          verification: u8 encoding (0 raw, 1 zstd), u8 flags (DOC_BYTES),
 *          then the bytes.  Kept apart from docs so that signature lookups
 *          touch fewer pages and its size can be reported on its own.
 *
 * Writes happen in one write transaction per batch (index_begin ...
 * index_commit); the caller writes a batch's verdicts only after its
 * commit, so whatever was reported unique is on disk.  LMDB serialises
 * write transactions between processes, so a second mhfilter on the same
 * index waits its turn and sees the first one's documents.  When the map is
 * full the transaction fails with MDB_MAP_FULL: index_abort then doubles the
 * map and the caller redoes the batch (INDEX_AGAIN).
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>
#include <zstd.h>

#include "mhfilter.h"

#define DOC_VERSION	1
#define DOC_HEADER	16
#define TEXT_RAW	0
#define TEXT_ZSTD	1
#define ZSTD_LEVEL	3
#define BUCKET_MAX	1024	/* entries read from one band bucket */
#define MAP_DEFAULT	(1ULL << 30)

struct index {
	MDB_env		*env;
	MDB_dbi		 meta;
	MDB_dbi		 bands;
	MDB_dbi		 docs;
	MDB_dbi		 texts;
	MDB_txn		*txn;
	MDB_cursor	*bcur;
	int		 flags;		/* INDEX_* */
	char		*path;
	struct index_params p;
	uint64_t	 next_doc;
	uint64_t	 start_doc;	/* next_doc when the txn began */
	uint64_t	 run_doc;	/* next_doc when the index was opened */
	int		 map_full;	/* grow the map on abort */
	int64_t		 now;
	uint32_t	*sig;		/* decoded signature for index_doc */
	struct buf	 rec;		/* scratch for records */
	ZSTD_CCtx	*cctx;
	ZSTD_DCtx	*dctx;
};

static int	index_fail(struct index *, int, const char *, char **);
static int	meta_get(struct index *, const char *, char *, size_t);
static int	meta_put(struct index *, const char *, const char *);
static int	meta_create(struct index *, char **);
static int	meta_check(struct index *, int, char **);
static int	index_foreign(struct index *);
static int	index_get(struct index *, MDB_dbi, uint64_t, MDB_val *);
static int	index_txn(struct index *, unsigned, MDB_txn **);
static void	index_remove_temp(const char *);

/* Turn an LMDB error into a cause; MDB_MAP_FULL becomes INDEX_AGAIN. */
static int
index_fail(struct index *ix, int rc, const char *what, char **cause)
{
	if (rc == MDB_MAP_FULL) {
		ix->map_full = 1;
		return (INDEX_AGAIN);
	}
	if (rc == MDB_TXN_FULL)
		xasprintf(cause, "%s: %s (use a smaller --batch)", what,
		    mdb_strerror(rc));
	else
		xasprintf(cause, "index %s: %s: %s", ix->path, what,
		    mdb_strerror(rc));
	return (-1);
}

/* Read a meta value as a string.  0 found, 1 missing, -1 error. */
static int
meta_get(struct index *ix, const char *key, char *out, size_t len)
{
	MDB_val	 k, v;
	int	 rc;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	rc = mdb_get(ix->txn, ix->meta, &k, &v);
	if (rc == MDB_NOTFOUND)
		return (1);
	if (rc != 0 || v.mv_size >= len)
		return (-1);
	memcpy(out, v.mv_data, v.mv_size);
	out[v.mv_size] = '\0';
	return (0);
}

/* Write a meta value. */
static int
meta_put(struct index *ix, const char *key, const char *value)
{
	MDB_val	 k, v;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	v.mv_data = (void *)value;
	v.mv_size = strlen(value);
	return (mdb_put(ix->txn, ix->meta, &k, &v, 0));
}

/* Write the meta record of a new index. */
static int
meta_create(struct index *ix, char **cause)
{
	const struct index_params *p = &ix->p;
	char		 v[64];
	int		 rc = 0;

#define PUT(key, ...) do {						\
	snprintf(v, sizeof v, __VA_ARGS__);				\
	if (rc == 0)							\
		rc = meta_put(ix, key, v);				\
} while (0)
	PUT("format", "%d", MHF_INDEX_FORMAT);
	PUT("scheme", "%d %s", MHF_SCHEME, MHF_SCHEME_NAME);
	PUT("perms", "%u", p->perms);
	PUT("bands", "%u", p->bands);
	PUT("rows", "%u", p->rows);
	PUT("shingle", "%u", p->shingle);
	PUT("unit", "%s", p->unit == UNIT_WORD ? "word" : "char");
	normalize_name(p->norm, v, sizeof v);
	if (rc == 0)
		rc = meta_put(ix, "normalize", v);
	PUT("seed", "%" PRIu64, p->seed);
	PUT("texts", "%d", p->texts);
	PUT("verify", "%d", p->verify);
	PUT("threshold", "%.17g", p->threshold);
	PUT("created", "%lld", (long long)time(NULL));
	PUT("next_doc", "1");
#undef PUT
	ix->next_doc = 1;
	if (rc != 0)
		return (index_fail(ix, rc, "writing meta", cause));
	return (0);
}

/*
 * Compare the stored parameters with the ones given, take the stored ones
 * for the rest.  Returns INDEX_MISMATCH with a cause naming the option.
 */
static int
meta_check(struct index *ix, int given, char **cause)
{
	static const struct {
		const char	*key;
		const char	*option;
		int		 bit;
	} params[] = {
		{ "perms", "--perms", IP_PERMS },
		{ "bands", "--bands", IP_BANDS },
		{ "rows", "--rows", IP_ROWS },
		{ "shingle", "--shingle", IP_SHINGLE },
		{ "unit", "--unit", IP_UNIT },
		{ "normalize", "--normalize", IP_NORM },
		{ "seed", "--seed", IP_SEED },
	};
	struct index_params	*p = &ix->p;
	char			 stored[128], want[128];
	size_t			 i;
	unsigned long long	 u;
	int			 f;

	if (meta_get(ix, "format", stored, sizeof stored) != 0 ||
	    meta_get(ix, "scheme", want, sizeof want) != 0) {
		xasprintf(cause, "%s is not an mhfilter index (no format "
		    "record)", ix->path);
		return (INDEX_MISMATCH);
	}
	if (atoi(stored) != MHF_INDEX_FORMAT) {
		xasprintf(cause, "%s has index format %s; this mhfilter reads "
		    "format %d", ix->path, stored, MHF_INDEX_FORMAT);
		return (INDEX_MISMATCH);
	}
	if (atoi(want) != MHF_SCHEME) {
		xasprintf(cause, "%s uses signature scheme %s; this mhfilter "
		    "makes scheme %d %s", ix->path, want, MHF_SCHEME,
		    MHF_SCHEME_NAME);
		return (INDEX_MISMATCH);
	}

	for (i = 0; i < sizeof params / sizeof params[0]; i++) {
		if (meta_get(ix, params[i].key, stored, sizeof stored) != 0) {
			xasprintf(cause, "%s: meta record \"%s\" is missing",
			    ix->path, params[i].key);
			return (INDEX_MISMATCH);
		}
		switch (params[i].bit) {
		case IP_PERMS:
			snprintf(want, sizeof want, "%u", p->perms);
			break;
		case IP_BANDS:
			snprintf(want, sizeof want, "%u", p->bands);
			break;
		case IP_ROWS:
			snprintf(want, sizeof want, "%u", p->rows);
			break;
		case IP_SHINGLE:
			snprintf(want, sizeof want, "%u", p->shingle);
			break;
		case IP_UNIT:
			snprintf(want, sizeof want, "%s",
			    p->unit == UNIT_WORD ? "word" : "char");
			break;
		case IP_NORM:
			normalize_name(p->norm, want, sizeof want);
			break;
		case IP_SEED:
			snprintf(want, sizeof want, "%" PRIu64, p->seed);
			break;
		}
		if ((given & params[i].bit) && strcmp(stored, want) != 0) {
			xasprintf(cause, "%s was made with %s %s; you gave %s "
			    "%s (leave the option out, or use another --db)",
			    ix->path, params[i].option, stored,
			    params[i].option, want);
			return (INDEX_MISMATCH);
		}
		u = strtoull(stored, NULL, 10);
		if (params[i].bit != IP_SEED && params[i].bit != IP_UNIT &&
		    params[i].bit != IP_NORM && u > MHF_MAX_PERMS) {
			xasprintf(cause, "%s: stored %s %s is out of range",
			    ix->path, params[i].key, stored);
			return (INDEX_MISMATCH);
		}
		switch (params[i].bit) {
		case IP_PERMS:
			p->perms = u;
			break;
		case IP_BANDS:
			p->bands = u;
			break;
		case IP_ROWS:
			p->rows = u;
			break;
		case IP_SHINGLE:
			p->shingle = u;
			break;
		case IP_UNIT:
			p->unit = strcmp(stored, "word") == 0 ? UNIT_WORD :
			    UNIT_CHAR;
			break;
		case IP_NORM:
			if (normalize_parse(stored, &f, cause) != 0)
				return (INDEX_MISMATCH);
			p->norm = f;
			break;
		case IP_SEED:
			p->seed = u;
			break;
		}
	}
	if (p->perms == 0 || p->perms > MHF_MAX_PERMS || p->rows == 0 ||
	    (uint64_t)p->bands * p->rows != p->perms || p->shingle == 0 ||
	    p->shingle > MHF_MAX_SHINGLE) {
		xasprintf(cause, "%s: the stored parameters are invalid",
		    ix->path);
		return (INDEX_MISMATCH);
	}

	if (meta_get(ix, "texts", stored, sizeof stored) != 0) {
		xasprintf(cause, "%s: meta record \"texts\" is missing",
		    ix->path);
		return (INDEX_MISMATCH);
	}
	p->texts = atoi(stored);
	if (meta_get(ix, "verify", stored, sizeof stored) == 0 &&
	    (~given & IP_VERIFY))
		p->verify = atoi(stored);
	if (p->verify == VERIFY_EXACT && !p->texts) {
		xasprintf(cause, "%s keeps no texts, so --verify exact is not "
		    "possible (it was made with --verify signature or none)",
		    ix->path);
		return (INDEX_MISMATCH);
	}
	if (meta_get(ix, "threshold", stored, sizeof stored) == 0 &&
	    (~given & IP_THRESHOLD)) {
		p->threshold = strtod(stored, NULL);
		if (!(p->threshold >= 0.01 && p->threshold <= 1.0)) {
			xasprintf(cause, "%s: stored threshold %s is out of "
			    "range", ix->path, stored);
			return (INDEX_MISMATCH);
		}
	}
	if (p->verify < VERIFY_EXACT || p->verify > VERIFY_NONE) {
		xasprintf(cause, "%s: stored verify mode is out of range",
		    ix->path);
		return (INDEX_MISMATCH);
	}
	if (meta_get(ix, "next_doc", stored, sizeof stored) != 0) {
		xasprintf(cause, "%s: meta record \"next_doc\" is missing",
		    ix->path);
		return (INDEX_MISMATCH);
	}
	ix->next_doc = strtoull(stored, NULL, 10);
	return (0);
}

/*
 * Is this environment someone else's?  Ours has no meta database only
 * while it is brand new, and then its main database is empty.
 */
static int
index_foreign(struct index *ix)
{
	MDB_dbi		 dbi;
	MDB_stat	 st;

	if (mdb_dbi_open(ix->txn, "meta", 0, &dbi) == 0)
		return (0);
	if (mdb_dbi_open(ix->txn, NULL, 0, &dbi) != 0 ||
	    mdb_stat(ix->txn, dbi, &st) != 0)
		return (1);
	return (st.ms_entries != 0);
}

/* Remove a temporary index directory. */
static void
index_remove_temp(const char *path)
{
	char	*f;

	xasprintf(&f, "%s/data.mdb", path);
	unlink(f);
	free(f);
	xasprintf(&f, "%s/lock.mdb", path);
	unlink(f);
	free(f);
	rmdir(path);
}

/*
 * Open (or create) the index at path; a NULL path makes a temporary one.
 * p holds the parameters wanted and, on return, the ones in force; given
 * says which of them the user set.  Returns 0, -1 on error or
 * INDEX_MISMATCH, with a cause.
 */
int
index_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	struct index	*ix;
	const char	*tmp;
	char		 probe[16];
	unsigned int	 envflags = MDB_NOTLS;
	int		 rc, dead, fresh, rv = -1;

	ix = xcalloc(1, sizeof *ix);
	ix->flags = flags;
	ix->p = *p;
	if (path == NULL) {
		if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
			tmp = "/tmp";
		xasprintf(&ix->path, "%s/mhfilter.XXXXXX", tmp);
		if (mkdtemp(ix->path) == NULL) {
			xasprintf(cause, "mkdtemp %s: %s", ix->path,
			    strerror(errno));
			goto fail;
		}
		ix->flags |= INDEX_TEMP;
		/* A crash loses a throwaway index, so never sync it. */
		envflags |= MDB_NOSYNC | MDB_NOMETASYNC;
	} else {
		ix->path = xstrdup(path);
		if (flags & INDEX_RDONLY)
			envflags |= MDB_RDONLY;
		else if (mkdir(path, 0777) == -1 && errno != EEXIST) {
			xasprintf(cause, "mkdir %s: %s", path, strerror(errno));
			goto fail;
		}
	}

	if ((rc = mdb_env_create(&ix->env)) != 0 ||
	    (rc = mdb_env_set_maxdbs(ix->env, 4)) != 0 ||
	    (rc = mdb_env_set_mapsize(ix->env,
	    p->mapsize ? p->mapsize : MAP_DEFAULT)) != 0) {
		index_fail(ix, rc, "create", cause);
		goto fail;
	}
	if ((rc = mdb_env_open(ix->env, ix->path, envflags, 0666)) != 0) {
		if (rc == ENOENT)
			xasprintf(cause, "no index at %s", ix->path);
		else if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
			xasprintf(cause, "%s is not an LMDB index: %s",
			    ix->path, mdb_strerror(rc));
			rv = INDEX_MISMATCH;
		} else
			xasprintf(cause, "open index %s: %s", ix->path,
			    mdb_strerror(rc));
		goto fail;
	}
	/* Forget readers left by processes that died (kill -9). */
	mdb_reader_check(ix->env, &dead);

	rc = index_txn(ix, 0, &ix->txn);
	if (rc == 0 && (rc = index_foreign(ix)) != 0) {
		xasprintf(cause, "%s is an LMDB environment but not an "
		    "mhfilter index", ix->path);
		rv = INDEX_MISMATCH;
		goto fail;
	}
	if (rc == 0) {
		unsigned dbflags = (flags & INDEX_RDONLY) ? 0 : MDB_CREATE;

		if ((rc = mdb_dbi_open(ix->txn, "meta", dbflags,
		    &ix->meta)) == 0 &&
		    (rc = mdb_dbi_open(ix->txn, "bands", dbflags |
		    MDB_DUPSORT | MDB_DUPFIXED, &ix->bands)) == 0 &&
		    (rc = mdb_dbi_open(ix->txn, "docs", dbflags,
		    &ix->docs)) == 0)
			rc = mdb_dbi_open(ix->txn, "texts", dbflags,
			    &ix->texts);
	}
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		xasprintf(cause, "%s is not an mhfilter index", ix->path);
		rv = INDEX_MISMATCH;
		goto fail;
	}
	if (rc != 0) {
		index_fail(ix, rc, "open", cause);
		goto fail;
	}

	fresh = meta_get(ix, "format", probe, sizeof probe) == 1;
	if (fresh && (flags & INDEX_RDONLY)) {
		xasprintf(cause, "%s is an empty index", ix->path);
		goto fail;
	}
	if (fresh) {
		if ((rc = meta_create(ix, cause)) != 0)
			goto fail;
	} else if ((rv = meta_check(ix, given, cause)) != 0)
		goto fail;
	/*
	 * Commit even a read-only transaction: LMDB closes the database
	 * handles opened in a transaction that is aborted.
	 */
	if ((rc = mdb_txn_commit(ix->txn)) != 0) {
		ix->txn = NULL;
		rv = -1;
		index_fail(ix, rc, "commit", cause);
		goto fail;
	}
	ix->txn = NULL;
	ix->run_doc = ix->next_doc;

	ix->sig = xcalloc(ix->p.perms, sizeof *ix->sig);
	if ((ix->cctx = ZSTD_createCCtx()) == NULL ||
	    (ix->dctx = ZSTD_createDCtx()) == NULL)
		fatalx("zstd: out of memory");
	*p = ix->p;
	*ixp = ix;
	return (0);

fail:
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	index_close(ix);
	return (rv);
}

/* Close the index; a temporary one is removed. */
void
index_close(struct index *ix)
{
	if (ix == NULL)
		return;
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	if (ix->env != NULL)
		mdb_env_close(ix->env);
	if ((ix->flags & INDEX_TEMP) && ix->path != NULL)
		index_remove_temp(ix->path);
	ZSTD_freeCCtx(ix->cctx);
	ZSTD_freeDCtx(ix->dctx);
	buf_free(&ix->rec);
	free(ix->sig);
	free(ix->path);
	free(ix);
}

/* The first document number this process could have inserted. */
uint64_t
index_run_start(struct index *ix)
{
	return (ix->run_doc);
}

/* The index's directory. */
const char *
index_path(struct index *ix)
{
	return (ix->path);
}

/*
 * Begin a transaction (read-only if flags or the index say so).  When
 * another process has grown the map since, adopt its size and retry.
 */
static int
index_txn(struct index *ix, unsigned flags, MDB_txn **txn)
{
	int	 rc;

	if (ix->flags & INDEX_RDONLY)
		flags |= MDB_RDONLY;
	for (;;) {
		rc = mdb_txn_begin(ix->env, NULL, flags, txn);
		if (rc != MDB_MAP_RESIZED)
			return (rc);
		if ((rc = mdb_env_set_mapsize(ix->env, 0)) != 0)
			return (rc);
	}
}

/* Start a batch's transaction: a write one unless the index is read-only. */
int
index_begin(struct index *ix, char **cause)
{
	char	 v[32];
	int	 rc;

	if ((rc = index_txn(ix, 0, &ix->txn)) != 0) {
		ix->txn = NULL;
		return (index_fail(ix, rc, "begin", cause));
	}
	if ((rc = mdb_cursor_open(ix->txn, ix->bands, &ix->bcur)) != 0) {
		index_abort(ix);
		return (index_fail(ix, rc, "cursor", cause));
	}
	if (!(ix->flags & INDEX_RDONLY)) {
		/* Another writer may have added documents since. */
		if (meta_get(ix, "next_doc", v, sizeof v) != 0) {
			index_abort(ix);
			xasprintf(cause, "%s: no next_doc record", ix->path);
			return (-1);
		}
		ix->next_doc = ix->start_doc = strtoull(v, NULL, 10);
	}
	ix->now = time(NULL);
	return (0);
}

/* Commit the batch's transaction. */
int
index_commit(struct index *ix, char **cause)
{
	char	 v[32];
	int	 rc;

	if (ix->flags & INDEX_RDONLY) {
		index_abort(ix);
		return (0);
	}
	if (ix->next_doc != ix->start_doc) {
		snprintf(v, sizeof v, "%" PRIu64, ix->next_doc);
		if ((rc = meta_put(ix, "next_doc", v)) != 0) {
			rc = index_fail(ix, rc, "writing meta", cause);
			index_abort(ix);
			return (rc);
		}
	}
	mdb_cursor_close(ix->bcur);
	ix->bcur = NULL;
	rc = mdb_txn_commit(ix->txn);
	ix->txn = NULL;
	if (rc != 0) {
		rc = index_fail(ix, rc, "commit", cause);
		index_abort(ix);
		return (rc);
	}
	return (0);
}

/* Throw the batch's transaction away; grow the map if it was full. */
void
index_abort(struct index *ix)
{
	MDB_envinfo	 info;

	if (ix->bcur != NULL)
		mdb_cursor_close(ix->bcur);
	ix->bcur = NULL;
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	ix->next_doc = ix->start_doc;
	if (ix->map_full) {
		ix->map_full = 0;
		mdb_env_info(ix->env, &info);
		if (mdb_env_set_mapsize(ix->env, info.me_mapsize * 2) != 0)
			fatalx("cannot grow the index map to %zu bytes",
			    info.me_mapsize * 2);
	}
}

/*
 * Append to out the documents in the buckets of the b band keys, once for
 * each band they share with the query (so the count of a document is its
 * number of shared bands).
 */
int
index_candidates(struct index *ix, const uint64_t *keys, struct u64vec *out,
    char **cause)
{
	MDB_val		 k, v;
	unsigned char	 kb[8];
	unsigned	 j;
	size_t		 i, seen;
	int		 rc, op;

	for (j = 0; j < ix->p.bands; j++) {
		put_be64(kb, keys[j]);
		k.mv_data = kb;
		k.mv_size = sizeof kb;
		rc = mdb_cursor_get(ix->bcur, &k, &v, MDB_SET_KEY);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc != 0)
			return (index_fail(ix, rc, "band lookup", cause));
		/* DUPFIXED: fetch the bucket a page at a time. */
		seen = 0;
		for (op = MDB_GET_MULTIPLE; seen < BUCKET_MAX;
		    op = MDB_NEXT_MULTIPLE) {
			rc = mdb_cursor_get(ix->bcur, &k, &v, op);
			if (rc == MDB_NOTFOUND)
				break;
			if (rc != 0)
				return (index_fail(ix, rc, "band lookup",
				    cause));
			for (i = 0; i + 8 <= v.mv_size && seen < BUCKET_MAX;
			    i += 8, seen++)
				u64vec_push(out,
				    get_be64((unsigned char *)v.mv_data + i));
		}
	}
	return (0);
}

/* Look a document number up in one of the databases keyed by it. */
static int
index_get(struct index *ix, MDB_dbi dbi, uint64_t docid, MDB_val *v)
{
	unsigned char	 kb[8];
	MDB_val		 k;

	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	return (mdb_get(ix->txn, dbi, &k, v));
}

/* Read a document's record.  The signature stays valid until the next call. */
int
index_doc(struct index *ix, uint64_t docid, struct docinfo *d, char **cause)
{
	MDB_val			 v;
	const unsigned char	*p;
	uint32_t		 idlen;
	unsigned		 i;
	int			 rc;

	if ((rc = index_get(ix, ix->docs, docid, &v)) != 0)
		return (index_fail(ix, rc, "document lookup", cause));
	p = v.mv_data;
	if (v.mv_size < DOC_HEADER + 4 * (size_t)ix->p.perms ||
	    p[0] != DOC_VERSION)
		goto corrupt;
	idlen = get_le32(p + 4);
	if (v.mv_size != DOC_HEADER + 4 * (size_t)ix->p.perms + idlen)
		goto corrupt;
	for (i = 0; i < ix->p.perms; i++)
		ix->sig[i] = get_le32(p + DOC_HEADER + 4 * i);
	d->docid = docid;
	d->flags = p[1];
	d->time = (int64_t)get_be64(p + 8);
	d->sig = ix->sig;
	d->id = (const char *)p + DOC_HEADER + 4 * ix->p.perms;
	d->idlen = idlen;
	return (0);
corrupt:
	xasprintf(cause, "index %s: document %" PRIu64 " is corrupt",
	    ix->path, docid);
	return (-1);
}

/*
 * Read a document's normalised text into out (emptied first).  Returns its
 * DOC_BYTES flag, or -1.
 */
int
index_text(struct index *ix, uint64_t docid, struct buf *out, char **cause)
{
	MDB_val			 v;
	const unsigned char	*p;
	unsigned long long	 size;
	size_t			 n;
	int			 rc;

	if ((rc = index_get(ix, ix->texts, docid, &v)) != 0)
		return (index_fail(ix, rc, "text lookup", cause));
	p = v.mv_data;
	out->len = 0;
	if (v.mv_size < 2)
		goto corrupt;
	if (p[0] == TEXT_RAW) {
		buf_append(out, p + 2, v.mv_size - 2);
		return (p[1] & DOC_BYTES);
	}
	if (p[0] != TEXT_ZSTD)
		goto corrupt;
	size = ZSTD_getFrameContentSize(p + 2, v.mv_size - 2);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
		goto corrupt;
	buf_reserve(out, size);
	n = ZSTD_decompressDCtx(ix->dctx, out->data, size, p + 2,
	    v.mv_size - 2);
	if (ZSTD_isError(n) || n != size)
		goto corrupt;
	out->len = n;
	out->data[n] = '\0';
	return (p[1] & DOC_BYTES);
corrupt:
	xasprintf(cause, "index %s: text of document %" PRIu64 " is corrupt",
	    ix->path, docid);
	return (-1);
}

/*
 * Insert a document: its record, its text when texts are kept, and one
 * entry in each band bucket.  Returns 0, -1, or INDEX_AGAIN when the map is
 * full (abort, then redo the batch).
 */
int
index_insert(struct index *ix, const uint64_t *keys, const uint32_t *sig,
    const char *id, size_t idlen, const char *text, size_t textlen,
    int flags, int64_t when, char **cause)
{
	MDB_val		 k, v;
	unsigned char	 kb[8], *p;
	unsigned	 i, j;
	size_t		 bound, n;
	uint64_t	 docid;
	int		 rc;

	if (idlen > UINT32_MAX) {
		xasprintf(cause, "id too long");
		return (-1);
	}
	docid = ix->next_doc++;
	put_be64(kb, docid);

	ix->rec.len = 0;
	buf_reserve(&ix->rec, DOC_HEADER + 4 * (size_t)ix->p.perms + idlen);
	p = (unsigned char *)ix->rec.data;
	p[0] = DOC_VERSION;
	p[1] = flags;
	p[2] = p[3] = 0;
	put_le32(p + 4, idlen);
	put_be64(p + 8, (uint64_t)(when != 0 ? when : ix->now));
	for (i = 0; i < ix->p.perms; i++)
		put_le32(p + DOC_HEADER + 4 * i, sig[i]);
	memcpy(p + DOC_HEADER + 4 * ix->p.perms, id, idlen);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	v.mv_data = p;
	v.mv_size = DOC_HEADER + 4 * (size_t)ix->p.perms + idlen;
	if ((rc = mdb_put(ix->txn, ix->docs, &k, &v, MDB_APPEND)) != 0)
		return (index_fail(ix, rc, "insert document", cause));

	if (ix->p.texts) {
		bound = ZSTD_compressBound(textlen);
		ix->rec.len = 0;
		buf_reserve(&ix->rec, 2 + bound);
		p = (unsigned char *)ix->rec.data;
		p[1] = flags & DOC_BYTES;
		n = 0;
		if (textlen >= 64) {
			n = ZSTD_compressCCtx(ix->cctx, p + 2, bound, text,
			    textlen, ZSTD_LEVEL);
			if (ZSTD_isError(n))
				n = 0;
		}
		if (n != 0 && n < textlen)
			p[0] = TEXT_ZSTD;
		else {
			p[0] = TEXT_RAW;
			memcpy(p + 2, text, textlen);
			n = textlen;
		}
		v.mv_data = p;
		v.mv_size = 2 + n;
		if ((rc = mdb_put(ix->txn, ix->texts, &k, &v,
		    MDB_APPEND)) != 0)
			return (index_fail(ix, rc, "insert text", cause));
	}

	for (j = 0; j < ix->p.bands; j++) {
		unsigned char	 bk[8];
		MDB_val		 key, val;

		put_be64(bk, keys[j]);
		key.mv_data = bk;
		key.mv_size = sizeof bk;
		val.mv_data = kb;
		val.mv_size = sizeof kb;
		rc = mdb_cursor_put(ix->bcur, &key, &val, MDB_NODUPDATA);
		if (rc != 0 && rc != MDB_KEYEXIST)
			return (index_fail(ix, rc, "insert band", cause));
	}
	return (0);
}

/* Count documents and band entries, and the size of the data file. */
int
index_stats(struct index *ix, struct index_stats *st, char **cause)
{
	MDB_txn		*txn;
	MDB_stat	 ms;
	MDB_envinfo	 info;
	int		 rc;

	memset(st, 0, sizeof *st);
	if ((rc = index_txn(ix, MDB_RDONLY, &txn)) != 0)
		return (index_fail(ix, rc, "stats", cause));
	if (mdb_stat(txn, ix->docs, &ms) == 0)
		st->docs = ms.ms_entries;
	if (mdb_stat(txn, ix->bands, &ms) == 0)
		st->band_entries = ms.ms_entries;
	mdb_env_stat(ix->env, &ms);
	mdb_env_info(ix->env, &info);
	st->size = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	mdb_txn_abort(txn);
	return (0);
}

/* Stubs until format 2 lands. */
int
index_expire(struct index *ix, const struct retention *ret, int64_t now,
    uint64_t budget, uint64_t *removed, char **cause)
{
	(void)ix; (void)ret; (void)now; (void)budget;
	*removed = 0;
	xasprintf(cause, "index_expire: not implemented yet");
	return (-1);
}

int
index_remove(struct index *ix, const char *id, size_t idlen,
    uint64_t *removed, char **cause)
{
	(void)ix; (void)id; (void)idlen;
	*removed = 0;
	xasprintf(cause, "index_remove: not implemented yet");
	return (-1);
}

int
index_info(struct index *ix, struct index_info *info, char **cause)
{
	(void)ix; (void)info;
	xasprintf(cause, "index_info: not implemented yet");
	return (-1);
}

int
index_check(struct index *ix, FILE *f, uint64_t *problems, char **cause)
{
	(void)ix; (void)f; (void)problems;
	xasprintf(cause, "index_check: not implemented yet");
	return (-1);
}

int
index_compact(struct index *ix, const char *dest, char **cause)
{
	(void)ix; (void)dest;
	xasprintf(cause, "index_compact: not implemented yet");
	return (-1);
}

int
index_export(struct index *ix, FILE *f, char **cause)
{
	(void)ix; (void)f;
	xasprintf(cause, "index_export: not implemented yet");
	return (-1);
}

int
index_import(struct index *ix, FILE *f, uint64_t *n, char **cause)
{
	(void)ix; (void)f; (void)n;
	xasprintf(cause, "index_import: not implemented yet");
	return (-1);
}
