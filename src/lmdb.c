/*
 * The index: an LMDB environment (a directory with data.mdb and lock.mdb).
 * This file and the other five of lmdbint.h are the only ones that talk to
 * LMDB.
 *
 * Eight named databases, format 9 (groups below):
 *
 *   meta   text key -> text value: the parameter records (codec.c:
 *          meta_write), "next_doc" (the next document number), and the
 *          band index's state: "sweep", "l0_next", "l1_entries" (below),
 *          all decimal; and the undelivered ranges and their owners
 *          (below).
 *   docs   8-byte document number (big-endian, so key order is insertion
 *          order) -> its document record (codec.c: docrec_encode).
 *   texts  8-byte document number -> the normalised text for exact
 *          verification, encoded (codec.c: textenc_encode; zstd in
 *          indexes made before format 4).  Apart from docs so that
 *          signature lookups touch fewer pages and its size can be
 *          reported on its own.
 *   times  a time key (codec.c: timekey_put, time then document number,
 *          in time order) -> nothing.  What retention walks, oldest first.
 *   l1     the band entries, chunked: 4-byte chunk number (big-endian) ->
 *          a run, the chunk's entries sorted (bandrun.c: 10 bytes each,
 *          the band key's 40 bits below the chunk's and a 40-bit document
 *          number, big-endian).  A band key's chunk is its top
 *          BAND_CHUNK_BITS bits.  A run of ORUN_PAD bytes or more but
 *          shorter than half a page is padded with zeros as a young run is
 *          (bandrun.c: orun_size), new in format 7.  Format 2 kept 16-byte
 *          entries (the whole key, little-endian); lmdb_upgrade rewrites
 *          them on the first writable open.
 *   l1y    the young runs: chunk number -> a run, as in l1, of entries
 *          merged since the chunk's l1 run was last rewritten (below),
 *          one shorter than half a page padded with zeros to a length
 *          that gives its count (bandrun.c: yrun_size).  New in format 5;
 *          format 4 is format 5 without young runs, format 5 format 6
 *          without padding.
 *   l0     8-byte run number (big-endian) -> the entries one batch added:
 *          u64 sweep position when written (little-endian), then its
 *          entries, 16 bytes each (whole key and document number).  The
 *          write-ahead log of the memtable.  Format 6 orders the entries
 *          by the chunk the sweep reaches first (bandrun.c: l0_sort) and
 *          sets the header's top bit (L0_SORTED): the entries the sweep
 *          has not merged yet are then the last ones, which lsm_read
 *          finds by bisection and reads alone.  Format 5 kept them in
 *          insertion order, and such records are read whole.  Format 8
 *          gives a record of L0F_MIN entries or more a longer header, a
 *          directory of its groups of chunks and a filter of its keys
 *          (L0_FILTERED; bandrun.c: l0f_write), so that a batch of few
 *          keys reads only the groups where one of them may be
 *          (l0_read_filtered).
 *
 * Format 9 seals every value of docs, texts, l0, l1 and l1y: 8 bytes
 * after it, XXH3-64 of its bytes seeded with its database and key
 * (codec.c: seal_put), so that a flipped bit is "damaged" with its place,
 * not a wrong answer (lmdbformat.c, "Seals").  Format 8 is format 9
 * without them.
 *
 * The band index (l0, l1, l1y and the memtable) is lsm.c's, delivery marks
 * and their owners lmdbmarks.c's, --check, --info, --compact and the walk
 * of every page lmdbcheck.c's, the upgrades of older formats and the seals
 * lmdbformat.c's, the fault guard lmdbguard.c's; the six files share
 * struct lmdb (lmdbint.h).
 *
 * Groups.  A seventh database, groups: 8-byte document number -> the
 * 8-byte number of the first document of its group (both big-endian), for
 * each duplicate inserted (chains): if C duplicates B and B duplicates A,
 * both B and C map to A.  A unique document has no record: it is its own
 * group.  It came without a format change: older versions of mhfilter
 * ignore it, and a duplicate they insert is its own group, which is what a
 * missing record means; an index opened read-only that has none yet (made
 * before it) reads as all unique documents their own groups.
 *
 * Writes happen in one write transaction per batch (index_begin ...
 * index_commit), band merges included, so a crash leaves either all of a
 * batch or none of it; the caller writes a batch's verdicts only after its
 * commit, so whatever was reported unique is on disk.  LMDB serialises write
 * transactions between processes; a process that finds another's commits
 * since its own (the band state in meta moved) empties its memtable, to be
 * read back from l0 the same way.  When the map is full the transaction
 * fails with MDB_MAP_FULL: index_abort then doubles the map and the caller
 * redoes the batch (INDEX_AGAIN).
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "mhfilter.h"
#include "lmdbint.h"

#define MAP_DEFAULT	(1ULL << 30)

static int	lmdb_open(struct index **, const char *, int,
		    struct index_params *, int, char **);
static void	lmdb_close(struct index *);
static int	lmdb_begin(struct index *, char **);
static int	lmdb_commit(struct index *, char **);
static int	lmdb_settle(struct index *, char **);
static void	lmdb_abort(struct index *);
static int	lmdb_insert(struct index *, size_t, const uint64_t *,
		    const uint32_t *, const char *, size_t, const char *,
		    size_t, const char *, size_t, int, int64_t, char **);
static int	lm_meta_create(struct lmdb *, char **);
static int	lm_meta_check(struct lmdb *, int, int, char **);
static int	lm_foreign(struct lmdb *);
static int	lmdb_prepare(struct index *, const struct ixdoc *, size_t,
		    char **);
static int	lmdb_candidates(struct index *, size_t, const uint64_t *,
		    struct u64vec *, char **);
static int	lm_lsm_save(struct lmdb *, char **);
static int	lm_first_doc(struct lmdb *, uint64_t *, char **);

/*
 * Is the file system of data.mdb full (less than 1 MB left to this user)?
 * LMDB says EIO of a short write, which is what a full disk gives.
 */
static int
lm_disk_full(const char *path)
{
	struct statvfs	 sv;
	uint64_t	 left;
	int		 fd, rc;

	if (path == NULL || (fd = open(path, O_RDONLY | O_DIRECTORY)) == -1)
		return (0);
	rc = fstatvfs(fd, &sv);
	close(fd);
	if (rc == -1)
		return (0);
	left = (uint64_t)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
	    sv.f_frsize;
	return (left < (1 << 20));
}

/*
 * Turn an LMDB error into INDEX_ERROR with a cause; MDB_MAP_FULL becomes
 * INDEX_AGAIN (the map is grown by the abort).  Every put of a key that
 * meta's counters give (docs, texts, groups, l0) appends (MDB_APPEND), so
 * MDB_KEYEXIST there is damage too: a counter behind its database.
 */
int
lm_fail(struct lmstore *db, int rc, const char *what, char **cause)
{
	if (rc == MDB_MAP_FULL) {
		db->map_full = 1;
		return (INDEX_AGAIN);
	}
	if (rc == EIO && lm_disk_full(db->path))
		rc = ENOSPC;
	if (rc == MDB_TXN_FULL)
		xasprintf(cause, "%s: %s (use a smaller --batch)", what,
		    mdb_strerror(rc));
	else if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	    rc == MDB_KEYEXIST)
		xasprintf(cause, "index %s is damaged: %s: %s (run --check; "
		    "see mhfilter(1), Damaged indexes)", db->path, what,
		    mdb_strerror(rc));
	else
		xasprintf(cause, "index %s: %s: %s", db->path, what,
		    mdb_strerror(rc));
	return (INDEX_ERROR);
}

/*
 * Read a meta value as a string (a meta_get_fn): 0 found, INDEX_NOTFOUND,
 * or INDEX_ERROR (an LMDB error, or len bytes or more).
 */
int
lm_meta_get(struct lmdb *ix, const char *key, char *out, size_t len)
{
	MDB_val	 k, v;
	int	 rc;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	rc = mdb_get(ix->db.txn, ix->meta, &k, &v);
	if (rc == MDB_NOTFOUND)
		return (INDEX_NOTFOUND);
	if (rc != 0 || v.mv_size >= len)
		return (INDEX_ERROR);
	memcpy(out, v.mv_data, v.mv_size);
	out[v.mv_size] = '\0';
	return (0);
}

/* Write a meta value; returns an LMDB code. */
int
lm_meta_put(struct lmdb *ix, const char *key, const char *value)
{
	MDB_val	 k, v;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	v.mv_data = (void *)value;
	v.mv_size = strlen(value);
	return (mdb_put(ix->db.txn, ix->meta, &k, &v, 0));
}

/* lm_meta_put as a meta_put_fn. */
static int
lm_meta_put_cb(void *arg, const char *key, const char *value)
{
	return (lm_meta_put(arg, key, value));
}

/* lm_meta_get as a meta_get_fn. */
static int
lm_meta_get_cb(void *arg, const char *key, char *out, size_t len)
{
	return (lm_meta_get(arg, key, out, len));
}

/*
 * Write the meta records of a new index: the parameters (meta_write) and
 * the band index's starting state.
 */
static int
lm_meta_create(struct lmdb *ix, char **cause)
{
	int	 rc;

	if ((rc = meta_write(&ix->base.p, MHF_INDEX_FORMAT, time(NULL),
	    lm_meta_put_cb, ix)) == 0 &&
	    (rc = lm_meta_put(ix, "next_doc", "1")) == 0 &&
	    (rc = lm_meta_put(ix, "sweep", "0")) == 0 &&
	    (rc = lm_meta_put(ix, "l0_next", "1")) == 0)
		rc = lm_meta_put(ix, "l1_entries", "0");
	ix->next_doc = 1;
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "writing meta", cause));
	return (0);
}

/*
 * Check the stored parameters (meta_read) against format and the given
 * ones, and read next_doc.
 */
static int
lm_meta_check(struct lmdb *ix, int format, int given, char **cause)
{
	int	 rc;

	if ((rc = meta_read(&ix->base.p, format, given,
	    ix->base.path, lm_meta_get_cb, ix, cause)) != 0)
		return (rc);
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0)
		return (INDEX_MISMATCH);
	return (0);
}

/*
 * Is this environment someone else's (1)?  Ours has no meta database only
 * while it is brand new, and then its main database is empty.  Another
 * error looking for it is LMDB's, returned (a damaged main database).
 */
static int
lm_foreign(struct lmdb *ix)
{
	MDB_dbi		 dbi;
	MDB_stat	 st;
	int		 rc;

	if ((rc = mdb_dbi_open(ix->db.txn, "meta", 0, &dbi)) == 0)
		return (0);
	if (rc != MDB_NOTFOUND)
		return (rc);
	if (mdb_dbi_open(ix->db.txn, NULL, 0, &dbi) != 0 ||
	    mdb_stat(ix->db.txn, dbi, &st) != 0)
		return (1);
	return (st.ms_entries != 0);
}

/*
 * Might path hold an index: does its data file exist?  *size gets its
 * bytes.
 */
int
lmdb_exists(const char *path, uint64_t *size)
{
	struct stat	 sb;
	char		*f;
	int		 rc;

	*size = 0;
	if (path == NULL)
		return (0);
	xasprintf(&f, "%s/data.mdb", path);
	rc = stat(f, &sb);
	free(f);
	if (rc == -1)
		return (0);
	*size = sb.st_size;
	return (1);
}

/* Remove an LMDB environment's two files. */
static void
lm_unlink_files(const char *path)
{
	char	*f;

	xasprintf(&f, "%s/data.mdb", path);
	unlink(f);
	free(f);
	xasprintf(&f, "%s/lock.mdb", path);
	unlink(f);
	free(f);
	xasprintf(&f, "%s/" OWNERS_FILE, path);
	unlink(f);
	free(f);
}

/*
 * Remove an LMDB index directory: its two files, then the directory.
 * Returns rmdir's result.
 */
int
lmdb_remove_dir(const char *path)
{
	lm_unlink_files(path);
	return (rmdir(path));
}

/*
 * Is data.mdb as long as its meta page says it is (the last page in use)?
 * A shorter file is damaged, and reading a page past its end through the
 * map would raise SIGBUS; unless every page past its end is free: LMDB
 * never writes the pages a transaction allocated and freed again (its
 * last ones, at times), and leaves the file short of them.  0, or
 * INDEX_ERROR.
 */
static int
lm_size_check(struct lmdb *ix, char **cause)
{
	MDB_envinfo	 info;
	MDB_stat	 ms;
	struct stat	 sb;
	mdb_filehandle_t fd;
	uint64_t	 want, have;
	int		 rc;

	if ((rc = mdb_env_info(ix->db.env, &info)) != 0 ||
	    (rc = mdb_env_stat(ix->db.env, &ms)) != 0 ||
	    (rc = mdb_env_get_fd(ix->db.env, &fd)) != 0)
		return (lm_fail(&ix->db, rc, "open", cause));
	if (fstat(fd, &sb) == -1) {
		xasprintf(cause, "index %s: fstat: %s", ix->base.path,
		    strerror(errno));
		return (INDEX_ERROR);
	}
	want = ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize;
	have = (uint64_t)sb.st_size / ms.ms_psize;
	if (info.me_last_pgno < 1 || want > info.me_mapsize ||
	    ((uint64_t)sb.st_size < want && (have < 2 ||
	    !lm_tail_free(ix, have, info.me_last_pgno)))) {
		xasprintf(cause, "index %s is damaged (data.mdb is %jd bytes, "
		    "its last page ends at %" PRIu64 "): restore a copy, or "
		    "rebuild it (see mhfilter(1), Damaged indexes)",
		    ix->base.path, (intmax_t)sb.st_size, want);
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * The environment of lmdb_open: the directory (made if missing, or a
 * temporary one for a NULL path), then LMDB's environment in it.  0,
 * INDEX_MISMATCH (not LMDB) or INDEX_ERROR.
 */
static int
lm_env_open(struct lmdb *ix, const char *path, int flags, uint64_t mapsize,
    char **cause)
{
	const char	*tmp;
	MDB_stat	 ms;
	unsigned int	 envflags = MDB_NOTLS;
	uint64_t	 size;
	int		 rc, dead, fresh;

	if (path == NULL) {
		if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
			tmp = "/tmp";
		xasprintf(&ix->base.path, "%s/mhfilter.XXXXXX", tmp);
		if (mkdtemp(ix->base.path) == NULL) {
			xasprintf(cause, "mkdtemp %s: %s", ix->base.path,
			    strerror(errno));
			return (INDEX_ERROR);
		}
		ix->base.flags |= INDEX_TEMP;
		/* A crash loses a throwaway index, so never sync it. */
		envflags |= MDB_NOSYNC | MDB_NOMETASYNC;
	} else {
		ix->base.path = xstrdup(path);
		if (flags & INDEX_RDONLY)
			envflags |= MDB_RDONLY;
		else if (mkdir(path, 0777) == -1 && errno != EEXIST) {
			xasprintf(cause, "mkdir %s: %s", path, strerror(errno));
			return (INDEX_ERROR);
		}
	}

	ix->db.path = ix->base.path;
	guard_install();
	fresh = !lmdb_exists(ix->base.path, &size) || size == 0;
	for (;;) {
		if ((rc = mdb_env_create(&ix->db.env)) != 0 ||
		    (rc = mdb_env_set_assert(ix->db.env, guard_assert)) != 0 ||
		    (rc = mdb_env_set_maxdbs(ix->db.env, 8)) != 0 ||
		    (rc = mdb_env_set_mapsize(ix->db.env,
		    mapsize ? mapsize : MAP_DEFAULT)) != 0) {
			lm_fail(&ix->db, rc, "create", cause);
			return (INDEX_ERROR);
		}
		rc = mdb_env_open(ix->db.env, ix->base.path, envflags, 0666);
		/*
		 * Reading an index one may not write (a read-only file
		 * system, another user's): without lock.mdb, which a reader
		 * must be able to write.  A writer at work meanwhile is not
		 * seen (mhfilter(1), THE INDEX).
		 */
		if ((rc != EACCES && rc != EROFS) || !(envflags & MDB_RDONLY) ||
		    (envflags & MDB_NOLOCK))
			break;
		mdb_env_close(ix->db.env);
		ix->db.env = NULL;
		envflags |= MDB_NOLOCK;
	}
	if (rc != 0) {
		/*
		 * A failed creation (a full disk) leaves a data.mdb cut
		 * short, which no later open would take: remove it.
		 */
		if (fresh && !(envflags & MDB_RDONLY) && rc != ENOENT &&
		    rc != MDB_INVALID && rc != MDB_VERSION_MISMATCH)
			lm_unlink_files(ix->base.path);
		if (rc == EIO && lm_disk_full(ix->base.path))
			rc = ENOSPC;
		if (rc == ENOENT)
			xasprintf(cause, "no index at %s", ix->base.path);
		else if (fresh && (envflags & MDB_RDONLY))
			xasprintf(cause, "no index at %s yet (its data.mdb is "
			    "empty: the run creating it failed)",
			    ix->base.path);
		else if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
			xasprintf(cause, "%s is not an LMDB index: %s",
			    ix->base.path, mdb_strerror(rc));
			return (INDEX_MISMATCH);
		} else
			xasprintf(cause, "open index %s: %s", ix->base.path,
			    mdb_strerror(rc));
		return (INDEX_ERROR);
	}
	if ((rc = lm_size_check(ix, cause)) != 0)
		return (rc);
	/*
	 * A throwaway index goes from the file system at once: LMDB keeps
	 * its files open, and a crash (kill -9) leaves nothing behind.
	 */
	if (ix->base.flags & INDEX_TEMP)
		lmdb_remove_dir(ix->base.path);
	if (mdb_env_stat(ix->db.env, &ms) == 0) {
		ix->db.inline_max = ms.ms_psize / 2;
		ix->db.psize = ms.ms_psize;
	}
	/* Forget readers left by processes that died (kill -9). */
	mdb_reader_check(ix->db.env, &dead);
	return (0);
}

/*
 * The named databases of lmdb_open, in a transaction left open (created
 * unless read-only).  0, INDEX_MISMATCH (another program's environment)
 * or INDEX_ERROR.
 */
static int
lm_dbis_open(struct lmdb *ix, int flags, char **cause)
{
	unsigned	 dbflags = (flags & INDEX_RDONLY) ? 0 : MDB_CREATE;
	int		 rc;

	rc = lm_txn(ix, 0, &ix->db.txn);
	if (rc == 0 && (rc = lm_foreign(ix)) == 1) {
		xasprintf(cause, "%s is an LMDB environment but not an "
		    "mhfilter index", ix->base.path);
		return (INDEX_MISMATCH);
	}
	if (rc == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "meta", dbflags, &ix->meta)) == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "docs", dbflags, &ix->docs)) == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "texts", dbflags,
	    &ix->texts)) == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "times", dbflags,
	    &ix->times)) == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "l0", dbflags, &ix->db.l0)) == 0 &&
	    (rc = mdb_dbi_open(ix->db.txn, "l1", dbflags, &ix->db.l1)) == 0) {
		rc = mdb_dbi_open(ix->db.txn, "groups", dbflags, &ix->groups);
		ix->have_groups = rc == 0;
		if (rc == MDB_NOTFOUND && !(dbflags & MDB_CREATE))
			rc = 0;		/* older, read-only: no duplicates */
	}
	if (rc == 0) {
		rc = mdb_dbi_open(ix->db.txn, "l1y", dbflags, &ix->db.l1y);
		ix->db.have_l1y = rc == 0;
		if (rc == MDB_NOTFOUND && !(dbflags & MDB_CREATE))
			rc = 0;		/* format 4 or older, read-only */
	}
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		xasprintf(cause, "%s is not an mhfilter index", ix->base.path);
		return (INDEX_MISMATCH);
	}
	if (rc != 0) {
		lm_fail(&ix->db, rc, "open", cause);
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * Is the index brand new (1): no format record, and nothing else either?
 * A format record LMDB cannot read, or missing from an index that holds
 * meta records or documents, is damage: -1 with a cause.
 */
static int
lm_fresh(struct lmdb *ix, char **cause)
{
	MDB_val		 k, v;
	MDB_stat	 meta, docs;
	int		 rc;

	k.mv_data = (void *)"format";
	k.mv_size = strlen("format");
	if ((rc = mdb_get(ix->db.txn, ix->meta, &k, &v)) == 0)
		return (0);
	if (rc == MDB_NOTFOUND &&
	    (rc = mdb_stat(ix->db.txn, ix->meta, &meta)) == 0 &&
	    (rc = mdb_stat(ix->db.txn, ix->docs, &docs)) == 0) {
		if (meta.ms_entries == 0 && docs.ms_entries == 0)
			return (1);
		rc = MDB_CORRUPTED;	/* (lm_fail: "damaged") */
	}
	lm_fail(&ix->db, rc, "reading the format record", cause);
	return (-1);
}

/*
 * Open (or create) the index at path; a NULL path makes a temporary one.
 * p holds the parameters wanted and, on return, the ones in force; given
 * says which of them the user set.  Returns 0, INDEX_ERROR or
 * INDEX_MISMATCH, with a cause.
 */
static int
lmdb_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	struct lmdb	*ix;
	int		 rc, fresh, rv;

	ix = xcalloc(1, sizeof *ix);
	ix->ofd = -1;
	ix->db.format = MHF_INDEX_FORMAT;
	ix->db.fd = -1;
	ix->base.flags = flags;
	ix->base.p = *p;
	if ((rv = lm_env_open(ix, path, flags, p->mapsize, cause)) != 0 ||
	    (rv = lm_dbis_open(ix, flags, cause)) != 0)
		goto fail;

	rv = INDEX_ERROR;
	if ((fresh = lm_fresh(ix, cause)) < 0)
		goto fail;
	if (fresh && (flags & INDEX_RDONLY)) {
		xasprintf(cause, "%s is an empty index", ix->base.path);
		goto fail;
	}
	if (fresh) {
		if ((rc = lm_meta_create(ix, cause)) != 0)
			goto fail;
	} else if ((rv = lmdb_upgrade(ix, flags, &ix->db.format, cause)) != 0 ||
	    (rv = lm_meta_check(ix, ix->db.format, given, cause)) != 0)
		goto fail;
	if ((rv = lm_seal_load(ix, cause)) != 0)
		goto fail;
	lsm_init(&ix->lsm, &ix->db, ix->base.p.bands, flags & INDEX_RDONLY,
	    p->memtable);
	if (lm_lsm_load(ix, cause) != 0) {
		rv = INDEX_ERROR;
		goto fail;
	}
	/*
	 * Commit even a read-only transaction: LMDB closes the database
	 * handles opened in a transaction that is aborted.
	 */
	lm_long(1);
	rc = mdb_txn_commit(ix->db.txn);
	lm_long(0);
	if (rc != 0) {
		ix->db.txn = NULL;
		rv = INDEX_ERROR;
		lm_fail(&ix->db, rc, "commit", cause);
		goto fail;
	}
	ix->db.txn = NULL;
	if (!(flags & INDEX_RDONLY) && ix->db.seal_stage != SEAL_DONE &&
	    (rv = lm_seal_all(ix, cause)) != 0)
		goto fail;
	ix->base.run_doc = ix->next_doc;

	ix->sig = xcalloc(ix->base.p.perms, sizeof *ix->sig);
	ix->enc = textenc_create();
	*p = ix->base.p;
	*ixp = &ix->base;
	return (0);

fail:
	if (ix->db.txn != NULL)
		mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	lmdb_close(&ix->base);
	return (rv);
}

/* Close the index; a temporary one is removed (lm_env_open did). */
static void
lmdb_close(struct index *base)
{
	struct lmdb	*ix = (struct lmdb *)base;

	if (ix == NULL)
		return;
	if (ix->db.txn != NULL)
		mdb_txn_abort(ix->db.txn);
	lsm_free(&ix->lsm);		/* (ends its snapshot) */
	if (ix->db.env != NULL)
		mdb_env_close(ix->db.env);
	/* (Gone already unless lm_env_open failed.) */
	if ((ix->base.flags & INDEX_TEMP) && ix->base.path != NULL)
		lmdb_remove_dir(ix->base.path);
	textenc_free(ix->enc);
	buf_free(&ix->rec);
	free(ix->sig);
	u64vec_free(&ix->dranges);
	u64vec_free(&ix->dreplays);
	u64vec_free(&ix->aranges);
	u64vec_free(&ix->mine);
	if (ix->ofd != -1)
		close(ix->ofd);		/* (releases its owner lock) */
	free(ix->base.path);
	free(ix);
}

/*
 * Set the map's size (0: adopt the size another process gave it).  No
 * transaction of this process may be open: the band index's snapshot is
 * ended, and the map's address is to be found again (lm_findmap): it may
 * move.  Returns an LMDB code.
 */
int
lm_resize(struct lmdb *ix, size_t size)
{
	lsm_snap_end(&ix->lsm);
	ix->db.map = NULL;
	return (mdb_env_set_mapsize(ix->db.env, size));
}

/*
 * Begin a transaction (read-only if flags or the index say so).  When
 * another process has grown the map since, adopt its size and retry.
 */
int
lm_txn(struct lmdb *ix, unsigned flags, MDB_txn **txn)
{
	int	 rc;

	if (ix->base.flags & INDEX_RDONLY)
		flags |= MDB_RDONLY;
	for (;;) {
		rc = mdb_txn_begin(ix->db.env, NULL, flags, txn);
		if (rc == 0 && !(flags & MDB_RDONLY))
			ix->docs_cur = ix->texts_cur = NULL;
		if (rc != MDB_MAP_RESIZED)
			return (rc);
		if ((rc = lm_resize(ix, 0)) != 0)
			return (rc);
	}
}

/*
 * The band index's position, from meta (lsm_load), with next_doc as read
 * for the transaction.
 */
int
lm_lsm_load(struct lmdb *ix, char **cause)
{
	struct lsmstate	 at;

	memset(&at, 0, sizeof at);
	if (lm_meta_u64(ix, "sweep", &at.sweep, cause) != 0 ||
	    lm_meta_u64(ix, "l0_next", &at.l0_next, cause) != 0 ||
	    lm_meta_u64(ix, "l1_entries", &at.l1_entries, cause) != 0)
		return (INDEX_ERROR);
	return (lsm_load(&ix->lsm, &at, ix->next_doc, cause));
}

/* Record in meta what the transaction changed of the band's position. */
static int
lm_lsm_save(struct lmdb *ix, char **cause)
{
	struct lsmstate	 was, now;
	const char	*keys[] = { "sweep", "l0_next", "l1_entries" };
	uint64_t	 a[3], b[3];
	char		 num[32];
	size_t		 i;
	int		 rc;

	lsm_position(&ix->lsm, &was, &now);
	a[0] = was.sweep, a[1] = was.l0_next, a[2] = was.l1_entries;
	b[0] = now.sweep, b[1] = now.l0_next, b[2] = now.l1_entries;
	for (i = 0; i < 3; i++) {
		if (a[i] == b[i])
			continue;
		snprintf(num, sizeof num, "%" PRIu64, b[i]);
		if ((rc = lm_meta_put(ix, keys[i], num)) != 0)
			return (lm_fail(&ix->db, rc, "writing meta", cause));
	}
	return (0);
}

/* The oldest document held (next_doc when there is none). */
static int
lm_first_doc(struct lmdb *ix, uint64_t *docid, char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, ix->docs, &cur)) != 0)
		return (lm_fail(&ix->db, rc, "reading docs", cause));
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND) {
		*docid = ix->next_doc;
		return (0);
	}
	if (rc != 0 || k.mv_size != 8)
		return (lm_fail(&ix->db, rc ? rc : MDB_CORRUPTED,
		    "reading docs", cause));
	*docid = get_be64(k.mv_data);
	return (0);
}

/* Start a batch's transaction: a write one unless the index is read-only. */
static int
lmdb_begin(struct index *base, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	int		 rc;

	if ((rc = lm_txn(ix, 0, &ix->db.txn)) != 0) {
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "begin", cause));
	}
	/*
	 * Another writer may have added documents since; a reader needs
	 * next_doc too, to tell a removed document from a corrupt index,
	 * and so does lsm_load, to tell an l0 entry from a damaged one.
	 */
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0 ||
	    lm_seal_load(ix, cause) != 0 || lm_lsm_load(ix, cause) != 0) {
		lmdb_abort(&ix->base);
		return (INDEX_ERROR);
	}
	if ((ix->base.flags & INDEX_WALK) && !ix->walked &&
	    (rc = lm_walk(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	ix->start_doc = ix->next_doc;
	ix->now = time(NULL);
	return (0);
}

/* Commit the batch's transaction. */
static int
lmdb_commit(struct index *base, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	uint64_t	 live = 0;
	char		 v[32];
	int		 rc;

	if (ix->base.flags & INDEX_RDONLY) {
		lmdb_abort(&ix->base);
		return (0);
	}
	if ((rc = lmdb_settle(base, cause)) != 0 ||
	    (rc = lm_first_doc(ix, &live, cause)) != 0 ||
	    (rc = lsm_flush(&ix->lsm, live, cause)) != 0 ||
	    (rc = lm_lsm_save(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	if (ix->next_doc != ix->start_doc) {
		snprintf(v, sizeof v, "%" PRIu64, ix->next_doc);
		if ((rc = lm_meta_put(ix, "next_doc", v)) != 0) {
			rc = lm_fail(&ix->db, rc, "writing meta", cause);
			lmdb_abort(&ix->base);
			return (rc);
		}
	}
	if ((rc = lm_undelivered_apply(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	lm_long(1);
	rc = mdb_txn_commit(ix->db.txn);
	lm_long(0);
	ix->db.txn = NULL;
	if (rc != 0) {
		rc = lm_fail(&ix->db, rc, "commit", cause);
		lmdb_abort(&ix->base);
		return (rc);
	}
	ix->dranges.n = ix->dreplays.n = ix->aranges.n = 0;
	ix->base.batch_first = ix->start_doc;
	ix->base.batch_end = ix->next_doc;
	lm_own_add(ix);
	ix->owner_new = 0;
	lsm_commit(&ix->lsm);
	return (0);
}

/* Throw the batch's transaction away; grow the map if it was full. */
static void
lmdb_abort(struct index *base)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_envinfo	 info;

	if (ix->db.txn != NULL)
		mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	ix->next_doc = ix->start_doc;
	if (ix->owner_new)
		lm_owner_release(ix);	/* its first range was not kept */
	lsm_abort(&ix->lsm);
	if (ix->db.map_full) {
		ix->db.map_full = 0;
		mdb_env_info(ix->db.env, &info);
		if (lm_resize(ix, info.me_mapsize * 2) != 0)
			fatalx("cannot grow the index map to %zu bytes",
			    info.me_mapsize * 2);
	}
}

/* Read a meta value as a number (parse_uint).  0, or INDEX_ERROR. */
int
lm_meta_u64(struct lmdb *ix, const char *key, uint64_t *out, char **cause)
{
	char	 v[32], *c;

	if (lm_meta_get(ix, key, v, sizeof v) != 0) {
		xasprintf(cause, "%s: meta record \"%s\" is missing or bad",
		    ix->base.path, key);
		return (INDEX_ERROR);
	}
	if (parse_uint(v, 0, UINT64_MAX, out, &c) != 0) {
		free(c);
		xasprintf(cause, "%s: meta record \"%s\" is bad", ix->base.path,
		    key);
		return (INDEX_ERROR);
	}
	return (0);
}

/* Look a document number up in one of the databases keyed by it, in txn. */
static int
lm_get_in(MDB_txn *txn, MDB_dbi dbi, uint64_t docid, MDB_val *v)
{
	unsigned char	 kb[8];
	MDB_val		 k;

	lm_beat();
	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	return (mdb_get(txn, dbi, &k, v));
}

/* The same in the index's transaction. */
int
lm_get(struct lmdb *ix, MDB_dbi dbi, uint64_t docid, MDB_val *v)
{
	return (lm_get_in(ix->db.txn, dbi, docid, v));
}

/* Read a document's record.  The signature stays valid until the next call. */
static int
lmdb_doc(struct index *base, uint64_t docid, struct docinfo *d, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_val		 v;
	int		 rc;

	if ((rc = lm_get(ix, ix->docs, docid, &v)) != 0) {
		/*
		 * Removed: its band entries linger.  But removing takes the
		 * text too: a text without its record is a lost record.
		 */
		if (rc == MDB_NOTFOUND && docid != 0 &&
		    docid < ix->next_doc && (!ix->base.p.texts ||
		    lm_get(ix, ix->texts, docid, &v) == MDB_NOTFOUND))
			return (INDEX_GONE);
		if (rc == MDB_NOTFOUND && docid != 0 && docid < ix->next_doc)
			goto corrupt;
		return (lm_fail(&ix->db, rc, "document lookup", cause));
	}
	if ((rc = lm_docrec(ix, docid, &v, ix->sig, d)) != 0)
		goto corrupt;
	return (0);
corrupt:
	xasprintf(cause, "index %s is damaged: document %" PRIu64 " %s "
	    "(run --check)", ix->base.path, docid, rc == -2 ?
	    "fails its checksum" : "is corrupt");
	return (INDEX_ERROR);
}

/*
 * Read a document's normalised text into out (emptied first).  Returns its
 * DOC_BYTES flag, or -1.
 */
int
lmdb_text(struct index *base, uint64_t docid, struct buf *out, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_val		 v;
	int		 rc;

	/* (Asked for a document whose record was found: it has a text.) */
	if ((rc = lm_get(ix, ix->texts, docid, &v)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "text lookup", cause));
	if (rc == 0 && lm_unseal(&ix->db, SEAL_TEXTS, docid, &v, 1) != 0)
		rc = -2;
	else if (rc == 0 && (rc = text_decode(v.mv_data, v.mv_size, out)) >= 0)
		return (rc);
	xasprintf(cause, "index %s is damaged: text of document %" PRIu64
	    " %s (run --check)", ix->base.path, docid, rc == MDB_NOTFOUND ?
	    "is missing" : rc == -2 ? "fails its checksum" : "is corrupt");
	return (INDEX_ERROR);
}

/*
 * A reader (index_reader_open): a read-only transaction of its own, which
 * sees what the batch's write transaction saw at its start of documents
 * and texts, and the band index's lookups as lsm_prepare left them
 * (lsm_peek).  MDB_NOTLS lets any thread hold one beside the writer's
 * transaction.  The writer goes on meanwhile: LMDB keeps a reader's pages
 * as they were, and the memtable, which readers read in place, gets the
 * band entries of the writer's inserts at lmdb_settle (lsm_defer).
 */
struct lmreader {
	struct ixreader	 base;
	struct lmdb	*ix;
	MDB_txn		*txn;
	uint32_t	*sig;		/* decoded signature for reader_doc */
};

static int
lmdb_reader_open(struct index *base, struct ixreader **rp)
{
	struct lmdb	*ix = (struct lmdb *)base;
	struct lmreader	*r;
	MDB_txn		*txn;

	if (ix->db.txn == NULL ||
	    mdb_txn_begin(ix->db.env, NULL, MDB_RDONLY, &txn) != 0)
		return (1);
	r = xcalloc(1, sizeof *r);
	r->base.ix = base;
	r->ix = ix;
	r->txn = txn;
	r->sig = xreallocarray(NULL, ix->base.p.perms, sizeof *r->sig);
	*rp = &r->base;
	ix->readers++;
	lsm_defer(&ix->lsm);
	return (0);
}

static void
lmdb_reader_close(struct ixreader *base)
{
	struct lmreader	*r = (struct lmreader *)base;

	mdb_txn_abort(r->txn);
	r->ix->readers--;
	free(r->sig);
	free(r);
}

/* The readers are closed: the inserts' band entries join the memtable. */
static int
lmdb_settle(struct index *base, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;

	if (ix->readers != 0)
		fatalx("lmdb_settle: %u readers open", ix->readers);
	return (lsm_undefer(&ix->lsm, cause));
}

static int
lmdb_reader_candidates(struct ixreader *base, const uint64_t *keys,
    struct u64vec *out, size_t *most)
{
	struct lmreader	*r = (struct lmreader *)base;

	return (lsm_peek(&r->ix->lsm, keys, out, most));
}

static void
lmdb_reader_prefetch(struct ixreader *base, const uint64_t *keys, int stage)
{
	struct lmreader	*r = (struct lmreader *)base;

	lsm_peek_prefetch(&r->ix->lsm, keys, stage);
}

static void
lmdb_insert_prefetch(struct index *base, const uint64_t *keys, int stage)
{
	lsm_add_prefetch(&((struct lmdb *)base)->lsm, keys, stage);
}

static int
lmdb_reader_doc(struct ixreader *base, uint64_t docid, struct docinfo *d)
{
	struct lmreader	*r = (struct lmreader *)base;
	MDB_val		 v;

	if (lm_get_in(r->txn, r->ix->docs, docid, &v) != 0 ||
	    lm_docrec(r->ix, docid, &v, r->sig, d) != 0)
		return (1);
	return (0);
}

static int
lmdb_reader_text(struct ixreader *base, uint64_t docid, struct buf *out,
    int *bytes)
{
	struct lmreader	*r = (struct lmreader *)base;
	MDB_val		 v;

	if (lm_get_in(r->txn, r->ix->texts, docid, &v) != 0 ||
	    lm_unseal(&r->ix->db, SEAL_TEXTS, docid, &v, 1) != 0 ||
	    (*bytes = text_decode(v.mv_data, v.mv_size, out)) < 0)
		return (1);
	return (0);
}

/*
 * index_insert with the text already encoded by textenc_encode (enc not
 * NULL), so that worker threads can compress while the writer writes.
 */
static int
lmdb_insert(struct index *base, size_t slot, const uint64_t *keys,
    const uint32_t *sig, const char *id, size_t idlen, const char *text,
    size_t textlen, const char *enc, size_t enclen, int flags, int64_t when,
    char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_val		 k, v;
	unsigned char	 kb[8], tk[TIMEKEY_SIZE];
	uint64_t	 docid;
	int		 rc;

	if (idlen > UINT32_MAX) {
		xasprintf(cause, "id too long");
		return (INDEX_ERROR);
	}
	if (ix->next_doc > L1E_DOCMAX) {
		xasprintf(cause, "index %s: no document numbers left",
		    ix->base.path);
		return (INDEX_ERROR);
	}
	if ((rc = lsm_hold_keys(&ix->lsm, slot, keys, cause)) != 0)
		return (rc);
	docid = ix->next_doc++;
	ix->base.last_doc = docid;
	put_be64(kb, docid);
	if (when == 0)
		when = ix->now;

	docrec_encode(&ix->rec, ix->base.p.perms, sig, id, idlen, flags, when);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	if ((rc = lm_put_sealed(&ix->db, ix->docs, &ix->docs_cur, SEAL_DOCS,
	    &k, ix->rec.data, ix->rec.len)) != 0)
		return (lm_fail(&ix->db, rc, "insert document", cause));

	timekey_put(tk, when, docid);
	k.mv_data = tk;
	k.mv_size = sizeof tk;
	v.mv_data = tk;
	v.mv_size = 0;
	if ((rc = mdb_put(ix->db.txn, ix->times, &k, &v, 0)) != 0)
		return (lm_fail(&ix->db, rc, "insert time", cause));
	k.mv_data = kb;
	k.mv_size = sizeof kb;

	if (ix->base.p.texts) {
		if (enc == NULL) {
			textenc_encode(ix->enc, text, textlen, flags, &ix->rec);
			enc = ix->rec.data;
			enclen = ix->rec.len;
		}
		if ((rc = lm_put_sealed(&ix->db, ix->texts, &ix->texts_cur,
		    SEAL_TEXTS, &k, enc, enclen)) != 0)
			return (lm_fail(&ix->db, rc, "insert text", cause));
	}

	lsm_add(&ix->lsm, keys, docid);
	return (0);
}

/* Count documents and band entries, and the size of the data file. */
static int
lmdb_stats(struct index *base, struct index_stats *st, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_txn		*txn;
	MDB_stat	 ms;
	MDB_envinfo	 info;
	struct lsmstate	 at, tx;
	uint64_t	 n;
	int		 rc;

	memset(st, 0, sizeof *st);
	if ((rc = lm_txn(ix, MDB_RDONLY, &txn)) != 0)
		return (lm_fail(&ix->db, rc, "stats", cause));
	if (mdb_stat(txn, ix->docs, &ms) == 0)
		st->docs = ms.ms_entries;
	if ((rc = lsm_estimate(&ix->lsm, txn, &n, cause)) != 0) {
		mdb_txn_abort(txn);
		return (rc);
	}
	lsm_position(&ix->lsm, &at, &tx);
	st->band_entries = at.l1_entries + n;
	if ((rc = mdb_env_stat(ix->db.env, &ms)) == 0 &&
	    (rc = mdb_env_info(ix->db.env, &info)) == 0)
		st->size = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	mdb_txn_abort(txn);
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "stats", cause));
	return (0);
}

/* Delete a document's rows: docs, texts and times. */
static int
lm_delete(struct lmdb *ix, uint64_t docid, int64_t t, char **cause)
{
	unsigned char	 kb[8], tk[TIMEKEY_SIZE];
	MDB_val		 k, v;
	int		 rc;

	/*
	 * The inserts' cursors: LMDB would move them with the rows it
	 * moves, but an append trusts a cursor it left at the end to be
	 * there still.
	 */
	if (ix->docs_cur != NULL)
		mdb_cursor_close(ix->docs_cur);
	if (ix->texts_cur != NULL)
		mdb_cursor_close(ix->texts_cur);
	ix->docs_cur = ix->texts_cur = NULL;
	/* (Overflow pages are freed as their header says: check it.) */
	if (((rc = lm_get(ix, ix->texts, docid, &v)) == 0 &&
	    !lm_ovf_ok(&ix->db, &v)) ||
	    ((rc = lm_get(ix, ix->docs, docid, &v)) == 0 &&
	    !lm_ovf_ok(&ix->db, &v)))
		return (lm_fail(&ix->db, MDB_CORRUPTED, "removing a document",
		    cause));
	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	if ((rc = mdb_del(ix->db.txn, ix->docs, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "removing a document", cause));
	if ((rc = mdb_del(ix->db.txn, ix->texts, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "removing a text", cause));
	if (ix->have_groups && (rc = mdb_del(ix->db.txn, ix->groups, &k,
	    NULL)) != 0 && rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "removing a group", cause));
	timekey_put(tk, t, docid);
	k.mv_data = tk;
	k.mv_size = sizeof tk;
	if ((rc = mdb_del(ix->db.txn, ix->times, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "removing a time", cause));
	return (0);
}

/*
 * Remove the oldest documents (by document time) while there are more than
 * max_docs or they are older than max_age before now, at most budget of
 * them.  Inside a write transaction.
 */
static int
lmdb_expire(struct index *base, const struct retention *ret, int64_t now,
    uint64_t budget, uint64_t *removed, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_cursor	*cur;
	MDB_stat	 st;
	MDB_val		 k, v;
	uint64_t	 count, docid;
	int64_t		 t;
	int		 rc, old;

	*removed = 0;
	if (ret->max_age == 0 && ret->max_docs == 0)
		return (0);
	if ((rc = mdb_stat(ix->db.txn, ix->docs, &st)) != 0)
		return (lm_fail(&ix->db, rc, "expire", cause));
	count = st.ms_entries;
	if ((rc = mdb_cursor_open(ix->db.txn, ix->times, &cur)) != 0)
		return (lm_fail(&ix->db, rc, "expire", cause));
	while (*removed < budget) {
		rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
		if (rc != 0 || k.mv_size != TIMEKEY_SIZE)
			break;
		t = timekey_time(k.mv_data);
		docid = timekey_doc(k.mv_data);
		old = (ret->max_docs != 0 && count > ret->max_docs) ||
		    (ret->max_age != 0 && t < now - ret->max_age);
		if (!old)
			break;
		if ((rc = lm_delete(ix, docid, t, cause)) != 0) {
			mdb_cursor_close(cur);
			return (rc);
		}
		count--;
		(*removed)++;
	}
	mdb_cursor_close(cur);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "expire", cause));
	if (rc == 0 && k.mv_size != TIMEKEY_SIZE) {
		xasprintf(cause, "index %s is damaged: a times key is corrupt "
		    "(run --check)", ix->base.path);
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * Remove every document with this external id.  A scan of the documents
 * table: there is no index by id (it would cost a random B-tree insertion
 * per document, the very cost format 2 avoids).
 */
static int
lmdb_remove(struct index *base, const char *id, size_t idlen,
    uint64_t *removed, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_cursor	*cur;
	MDB_val		 k, v;
	struct docinfo	 d;
	struct u64vec	 found = { 0 }, times = { 0 };
	size_t		 i;
	int		 rc;

	*removed = 0;
	if ((rc = mdb_cursor_open(ix->db.txn, ix->docs, &cur)) != 0)
		return (lm_fail(&ix->db, rc, "remove", cause));
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		if (k.mv_size != 8 || lm_docrec(ix, get_be64(k.mv_data), &v,
		    NULL, &d) != 0)
			continue;	/* index_check reports it */
		if (d.idlen == idlen && memcmp(d.id, id, idlen) == 0) {
			u64vec_push(&found, get_be64(k.mv_data));
			u64vec_push(&times, (uint64_t)d.time);
		}
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND) {
		u64vec_free(&found);
		u64vec_free(&times);
		return (lm_fail(&ix->db, rc, "remove", cause));
	}
	for (i = 0, rc = 0; i < found.n && rc == 0; i++)
		rc = lm_delete(ix, found.v[i], (int64_t)times.v[i], cause);
	if (rc == 0)
		*removed = found.n;
	u64vec_free(&found);
	u64vec_free(&times);
	return (rc);
}

/*
 * Call fn for every document, oldest first, in one read transaction; stop
 * at fn's first non-zero return, and return it.  A corrupt document is left
 * out with a warning, and makes the result INDEX_ERROR at the end.
 */
static int
lmdb_each(struct index *base, index_each_fn fn, void *arg, char **cause)
{
	struct lmdb		*ix = (struct lmdb *)base;
	MDB_cursor		*cur;
	MDB_val			 k, v;
	struct docinfo		 d;
	struct buf		 text = { 0 };
	uint64_t		 docid, skipped = 0;
	char			*bad = NULL;
	int			 rc, rv = 0;

	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->db.txn)) != 0) {
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "export", cause));
	}
	if (lm_seal_load(ix, cause) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (INDEX_ERROR);
	}
	if ((rc = mdb_cursor_open(ix->db.txn, ix->docs, &cur)) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "export", cause));
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && rv == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		docid = k.mv_size == 8 ? get_be64(k.mv_data) : 0;
		if (k.mv_size != 8 || lm_docrec(ix, docid, &v, ix->sig,
		    &d) != 0 || (ix->base.p.texts &&
		    lmdb_text(&ix->base, docid, &text, &bad) < 0)) {
			/* Left out, so that an export saves what it can. */
			log_warnx("index %s: document %" PRIu64 " is corrupt: "
			    "left out", ix->base.path, docid);
			free(bad);
			bad = NULL;
			skipped++;
			continue;
		}
		d.docid = docid;
		rv = fn(arg, &d, ix->base.p.texts ? &text : NULL, cause);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	buf_free(&text);
	if (rv == 0 && rc != MDB_NOTFOUND)
		return (lm_fail(&ix->db, rc, "export", cause));
	if (rv == 0 && skipped > 0) {
		xasprintf(cause, "index %s: %" PRIu64 " corrupt document%s "
		    "left out (run --check)", ix->base.path, skipped,
		    skipped == 1 ? "" : "s");
		return (INDEX_ERROR);
	}
	return (rv);
}

/*
 * Give an index with no documents yet an export's parameters; refuse if it
 * has documents.
 */
static int
lmdb_adopt(struct index *base, const struct index_params *want,
    char **cause)
{
	struct lmdb		*ix = (struct lmdb *)base;
	struct index_params	 saved = ix->base.p;
	struct index_info	 in;
	int			 rc;

	if ((rc = lmdb_info(&ix->base, &in, cause)) != 0)
		return (rc);
	if (in.docs != 0 || in.next_doc != 1) {
		xasprintf(cause, "import: %s already holds documents made with "
		    "other parameters than the export's", ix->base.path);
		return (INDEX_ERROR);
	}
	if ((rc = lmdb_begin(&ix->base, cause)) != 0)
		return (rc);
	params_take(&ix->base.p, want);
	if ((rc = lm_meta_create(ix, cause)) != 0 ||
	    (rc = lmdb_commit(&ix->base, cause)) != 0) {
		lmdb_abort(&ix->base);
		ix->base.p = saved;
		return (rc);
	}
	lsm_set_bands(&ix->lsm, ix->base.p.bands);
	free(ix->sig);
	ix->sig = xcalloc(ix->base.p.perms, sizeof *ix->sig);
	return (0);
}

/* The first document of docid's group. */
static int
lmdb_group(struct index *base, uint64_t docid, uint64_t *group, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	int		 rc;
	MDB_val		 v;

	*group = docid;
	if (!ix->have_groups)
		return (0);
	if ((rc = lm_get(ix, ix->groups, docid, &v)) == MDB_NOTFOUND)
		return (0);
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "reading a group", cause));
	if (v.mv_size != 8 || (*group = get_be64(v.mv_data)) > docid) {
		xasprintf(cause, "%s: the group of document %" PRIu64 " is "
		    "damaged", ix->base.path, docid);
		return (INDEX_ERROR);
	}
	return (0);
}

/* The document just inserted is a duplicate in group. */
static int
lmdb_set_group(struct index *base, uint64_t group, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	unsigned char	 kb[8], vb[8];
	MDB_val		 k, v;
	uint64_t	 docid = ix->next_doc - 1;
	int		 rc;

	if (!ix->have_groups || ix->next_doc == ix->start_doc ||
	    group >= docid)
		return (0);
	put_be64(kb, docid);
	put_be64(vb, group);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	v.mv_data = vb;
	v.mv_size = sizeof vb;
	if ((rc = mdb_put(ix->db.txn, ix->groups, &k, &v, MDB_APPEND)) != 0)
		return (lm_fail(&ix->db, rc, "insert group", cause));
	return (0);
}

/*
 * Take the next document number for this process alone, in a transaction
 * of its own, and make it run_doc (index_reserve_run).  No document will
 * have it: a gap, as a removed document leaves.
 */
static int
lmdb_reserve_run(struct index *base, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	char		 v[32];
	int		 rc;

	if ((rc = lm_txn(ix, 0, &ix->db.txn)) != 0) {
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "begin", cause));
	}
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (INDEX_ERROR);
	}
	snprintf(v, sizeof v, "%" PRIu64, ix->next_doc + 1);
	if ((rc = lm_meta_put(ix, "next_doc", v)) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "reserve a number", cause));
	}
	rc = mdb_txn_commit(ix->db.txn);
	ix->db.txn = NULL;
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "commit", cause));
	ix->base.run_doc = ix->next_doc++;
	return (0);
}

/* A batch's lookups, announced (the band index's: lsm_prepare). */
static int
lmdb_prepare(struct index *base, const struct ixdoc *docs, size_t n,
    char **cause)
{
	return (lsm_prepare(&((struct lmdb *)base)->lsm, docs, n, cause));
}

/* The documents sharing a band with keys (lsm_candidates). */
static int
lmdb_candidates(struct index *base, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	int	 rc;

	if ((rc = lmdb_settle(base, cause)) != 0)
		return (rc);
	return (lsm_candidates(&((struct lmdb *)base)->lsm, slot, keys, out,
	    cause));
}

const struct index_ops lmdb_ops = {
	.name = "LMDB",
	.exists = lmdb_exists,
	.open = lmdb_open,
	.close = lmdb_close,
	.begin = lmdb_begin,
	.prepare = lmdb_prepare,
	.reserve_run = lmdb_reserve_run,
	.commit = lmdb_commit,
	.abort = lmdb_abort,
	.candidates = lmdb_candidates,
	.doc = lmdb_doc,
	.text = lmdb_text,
	.insert = lmdb_insert,
	.stats = lmdb_stats,
	.expire = lmdb_expire,
	.remove = lmdb_remove,
	.info = lmdb_info,
	.check = lmdb_check,
	.compact = lmdb_compact,
	.each = lmdb_each,
	.adopt = lmdb_adopt,
	.undelivered = lmdb_undelivered,
	.delivered = lmdb_delivered,
	.abandoned = lmdb_abandoned,
	.own = lmdb_own,
	.group = lmdb_group,
	.set_group = lmdb_set_group,
	.guard = &lmdb_guard,
	.reader_open = lmdb_reader_open,
	.reader_close = lmdb_reader_close,
	.reader_candidates = lmdb_reader_candidates,
	.reader_prefetch = lmdb_reader_prefetch,
	.insert_prefetch = lmdb_insert_prefetch,
	.settle = lmdb_settle,
	.reader_doc = lmdb_reader_doc,
	.reader_text = lmdb_reader_text,
};
