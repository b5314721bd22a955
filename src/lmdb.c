/*
 * The index: an LMDB environment (a directory with data.mdb and lock.mdb).
 * This file and the three below are the only ones that talk to LMDB.
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
 * not a wrong answer ("Seals" below).  Format 8 is format 9 without them.
 *
 * The band index (l0, l1, l1y and the memtable) is lsm.c's, delivery marks
 * and their owners lmdbmarks.c's, --check, --info, --compact and the walk
 * of every page lmdbcheck.c's; the four files share struct lmdb
 * (lmdbint.h).
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

#define MEMTABLE_DEFAULT (64ULL << 20)
#define MAP_DEFAULT	(1ULL << 30)

static int	lmdb_open(struct index **, const char *, int,
		    struct index_params *, int, char **);
static void	lmdb_close(struct index *);
static int	lmdb_begin(struct index *, char **);
static int	lmdb_commit(struct index *, char **);
static void	lmdb_abort(struct index *);
static int	lmdb_insert(struct index *, size_t, const uint64_t *,
		    const uint32_t *, const char *, size_t, const char *,
		    size_t, const char *, size_t, int, int64_t, char **);
static int	lm_meta_create(struct lmdb *, char **);
static int	lm_meta_check(struct lmdb *, int, int, char **);
static int	lmdb_upgrade(struct lmdb *, int, int *, char **);
static int	lm_foreign(struct lmdb *);
static int	lm_seal_all(struct lmdb *, char **);
static void	guard_install(void);
static void	guard_assert(MDB_env *, const char *);

/*
 * Is the file system of data.mdb full (less than 1 MB left to this user)?
 * LMDB says EIO of a short write, which is what a full disk gives.
 */
static int
lm_disk_full(struct lmdb *ix)
{
	struct statvfs	 sv;
	uint64_t	 left;
	int		 fd, rc;

	if (ix->base.path == NULL ||
	    (fd = open(ix->base.path, O_RDONLY | O_DIRECTORY)) == -1)
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
lm_fail(struct lmdb *ix, int rc, const char *what, char **cause)
{
	if (rc == MDB_MAP_FULL) {
		ix->map_full = 1;
		return (INDEX_AGAIN);
	}
	if (rc == EIO && lm_disk_full(ix))
		rc = ENOSPC;
	if (rc == MDB_TXN_FULL)
		xasprintf(cause, "%s: %s (use a smaller --batch)", what,
		    mdb_strerror(rc));
	else if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	    rc == MDB_KEYEXIST)
		xasprintf(cause, "index %s is damaged: %s: %s (run --check; "
		    "see mhfilter(1), Damaged indexes)", ix->base.path, what,
		    mdb_strerror(rc));
	else
		xasprintf(cause, "index %s: %s: %s", ix->base.path, what,
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
	rc = mdb_get(ix->txn, ix->meta, &k, &v);
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
	return (mdb_put(ix->txn, ix->meta, &k, &v, 0));
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
		return (lm_fail(ix, rc, "writing meta", cause));
	return (0);
}

/* Rewrite every l1 run of a format 2 index in 10-byte entries. */
static int
l1_upgrade(struct lmdb *ix, char **cause)
{
	MDB_val			 k, v;
	struct bentry		*e = NULL;
	struct buf		 out = { 0 };
	unsigned char		 kb[4];
	size_t			 i, n, size = 0;
	unsigned		 c;
	int			 rc = 0;

	for (c = 0; c < BAND_CHUNKS && rc == 0; c++) {
		chunk_key(kb, c, &k);
		if ((rc = mdb_get(ix->txn, ix->l1, &k, &v)) == MDB_NOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		if (v.mv_size % BENTRY_SIZE != 0) {
			xasprintf(cause, "index %s: band chunk %u is corrupt",
			    ix->base.path, c);
			free(e);
			buf_free(&out);
			return (INDEX_ERROR);
		}
		n = v.mv_size / BENTRY_SIZE;
		if (n > size) {
			size = n;
			e = xreallocarray(e, size, sizeof *e);
		}
		for (i = 0; i < n; i++)
			run_get(v.mv_data, i, &e[i]);
		qsort(e, n, sizeof *e, bentry_cmp);
		out.len = 0;
		buf_reserve(&out, n * L1E_SIZE);
		n = run_merge(c, NULL, 0, e, n, 0, (unsigned char *)out.data);
		v.mv_data = out.data;
		v.mv_size = n * L1E_SIZE;
		rc = mdb_put(ix->txn, ix->l1, &k, &v, 0);
	}
	free(e);
	buf_free(&out);
	if (rc != 0)
		return (lm_fail(ix, rc, "upgrading l1", cause));
	return (0);
}

/*
 * Bring an older index to format 9 inside the open transaction.  Format 2
 * kept l1 in 16-byte entries: every run is rewritten (l1_upgrade), which a
 * read-only open cannot do, and says so.  Format 3 differs from 4 only in
 * that its texts are never LZ4, format 4 from 5 only in that it has no
 * young runs (l1y), format 5 from 6 only in that no young run is padded
 * (yrun_size) and no l0 record sorted (l0_sort), format 6 from 7 only in
 * that no old run is padded (orun_size), and format 7 from 8 only in that
 * no l0 record has a filter (l0f_write), and format 8 from 9 only in that
 * no value is sealed: reading any of them is reading format 9 with no
 * seals, and a writable open writes the new "format" record and the
 * "sealing" one that has lm_seal_all seal every value after it (l1y
 * is created by the open; the sweep pads a run when it next rewrites it;
 * l0's older records go as it passes them), so that an older mhfilter
 * refuses the index instead of finding texts it cannot decode, missing the
 * band entries of young runs, taking a padded run for damage, or a sorted
 * or filtered l0 record's header for a sweep position, or a seal for
 * part of a value.  Sets *format to the format lm_meta_check is to
 * expect.
 */
static int
lmdb_upgrade(struct lmdb *ix, int flags, int *format, char **cause)
{
	char	 stored[32];
	int	 rc;

	*format = MHF_INDEX_FORMAT;
	if (lm_meta_get(ix, "format", stored, sizeof stored) != 0 ||
	    (strcmp(stored, "2") != 0 && strcmp(stored, "3") != 0 &&
	    strcmp(stored, "4") != 0 && strcmp(stored, "5") != 0 &&
	    strcmp(stored, "6") != 0 && strcmp(stored, "7") != 0 &&
	    strcmp(stored, "8") != 0))
		return (0);	/* lm_meta_check judges the rest */
	if (strcmp(stored, "2") == 0) {
		if (flags & INDEX_RDONLY) {
			xasprintf(cause, "%s has index format 2: open it once "
			    "for writing (without -Q) to upgrade it to format "
			    "%d", ix->base.path, MHF_INDEX_FORMAT);
			return (INDEX_MISMATCH);
		}
		if ((rc = l1_upgrade(ix, cause)) != 0)
			return (rc);
	} else if (flags & INDEX_RDONLY) {
		*format = stored[0] - '0';
		return (0);
	}
	log_info("%s: upgraded from index format %s to %d", ix->base.path,
	    stored, MHF_INDEX_FORMAT);
	snprintf(stored, sizeof stored, "%d", MHF_INDEX_FORMAT);
	if ((rc = lm_meta_put(ix, "format", stored)) != 0 ||
	    (rc = lm_meta_put(ix, "sealing", "1 0")) != 0)
		return (lm_fail(ix, rc, "upgrading meta", cause));
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

	if ((rc = mdb_dbi_open(ix->txn, "meta", 0, &dbi)) == 0)
		return (0);
	if (rc != MDB_NOTFOUND)
		return (rc);
	if (mdb_dbi_open(ix->txn, NULL, 0, &dbi) != 0 ||
	    mdb_stat(ix->txn, dbi, &st) != 0)
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
 * map would raise SIGBUS.  0, or INDEX_ERROR.
 */
static int
lm_size_check(struct lmdb *ix, char **cause)
{
	MDB_envinfo	 info;
	MDB_stat	 ms;
	struct stat	 sb;
	mdb_filehandle_t fd;
	uint64_t	 want;
	int		 rc;

	if ((rc = mdb_env_info(ix->env, &info)) != 0 ||
	    (rc = mdb_env_stat(ix->env, &ms)) != 0 ||
	    (rc = mdb_env_get_fd(ix->env, &fd)) != 0)
		return (lm_fail(ix, rc, "open", cause));
	if (fstat(fd, &sb) == -1) {
		xasprintf(cause, "index %s: fstat: %s", ix->base.path,
		    strerror(errno));
		return (INDEX_ERROR);
	}
	want = ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize;
	if (info.me_last_pgno < 1 || (uint64_t)sb.st_size < want ||
	    want > info.me_mapsize) {
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

	guard_install();
	fresh = !lmdb_exists(ix->base.path, &size) || size == 0;
	for (;;) {
		if ((rc = mdb_env_create(&ix->env)) != 0 ||
		    (rc = mdb_env_set_assert(ix->env, guard_assert)) != 0 ||
		    (rc = mdb_env_set_maxdbs(ix->env, 8)) != 0 ||
		    (rc = mdb_env_set_mapsize(ix->env,
		    mapsize ? mapsize : MAP_DEFAULT)) != 0) {
			lm_fail(ix, rc, "create", cause);
			return (INDEX_ERROR);
		}
		rc = mdb_env_open(ix->env, ix->base.path, envflags, 0666);
		/*
		 * Reading an index one may not write (a read-only file
		 * system, another user's): without lock.mdb, which a reader
		 * must be able to write.  A writer at work meanwhile is not
		 * seen (mhfilter(1), THE INDEX).
		 */
		if ((rc != EACCES && rc != EROFS) || !(envflags & MDB_RDONLY) ||
		    (envflags & MDB_NOLOCK))
			break;
		mdb_env_close(ix->env);
		ix->env = NULL;
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
		if (rc == EIO && lm_disk_full(ix))
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
	if (mdb_env_stat(ix->env, &ms) == 0) {
		ix->inline_max = ms.ms_psize / 2;
		ix->psize = ms.ms_psize;
	}
	/* Forget readers left by processes that died (kill -9). */
	mdb_reader_check(ix->env, &dead);
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

	rc = lm_txn(ix, 0, &ix->txn);
	if (rc == 0 && (rc = lm_foreign(ix)) == 1) {
		xasprintf(cause, "%s is an LMDB environment but not an "
		    "mhfilter index", ix->base.path);
		return (INDEX_MISMATCH);
	}
	if (rc == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "meta", dbflags, &ix->meta)) == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "docs", dbflags, &ix->docs)) == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "texts", dbflags, &ix->texts)) == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "times", dbflags, &ix->times)) == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "l0", dbflags, &ix->l0)) == 0 &&
	    (rc = mdb_dbi_open(ix->txn, "l1", dbflags, &ix->l1)) == 0) {
		rc = mdb_dbi_open(ix->txn, "groups", dbflags, &ix->groups);
		ix->have_groups = rc == 0;
		if (rc == MDB_NOTFOUND && !(dbflags & MDB_CREATE))
			rc = 0;		/* older, read-only: no duplicates */
	}
	if (rc == 0) {
		rc = mdb_dbi_open(ix->txn, "l1y", dbflags, &ix->l1y);
		ix->have_l1y = rc == 0;
		if (rc == MDB_NOTFOUND && !(dbflags & MDB_CREATE))
			rc = 0;		/* format 4 or older, read-only */
	}
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		xasprintf(cause, "%s is not an mhfilter index", ix->base.path);
		return (INDEX_MISMATCH);
	}
	if (rc != 0) {
		lm_fail(ix, rc, "open", cause);
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
	if ((rc = mdb_get(ix->txn, ix->meta, &k, &v)) == 0)
		return (0);
	if (rc == MDB_NOTFOUND &&
	    (rc = mdb_stat(ix->txn, ix->meta, &meta)) == 0 &&
	    (rc = mdb_stat(ix->txn, ix->docs, &docs)) == 0) {
		if (meta.ms_entries == 0 && docs.ms_entries == 0)
			return (1);
		rc = MDB_CORRUPTED;	/* (lm_fail: "damaged") */
	}
	lm_fail(ix, rc, "reading the format record", cause);
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
	ix->format = MHF_INDEX_FORMAT;
	ix->snap_sweep = UINT64_MAX;
	ix->base.flags = flags;
	ix->base.p = *p;
	if ((rv = lm_env_open(ix, path, flags, p->mapsize, cause)) != 0 ||
	    (rv = lm_dbis_open(ix, flags, cause)) != 0)
		goto fail;

	rv = INDEX_ERROR;
	ix->seal_stage = SEAL_DONE;
	if ((fresh = lm_fresh(ix, cause)) < 0)
		goto fail;
	if (fresh && (flags & INDEX_RDONLY)) {
		xasprintf(cause, "%s is an empty index", ix->base.path);
		goto fail;
	}
	if (fresh) {
		if ((rc = lm_meta_create(ix, cause)) != 0)
			goto fail;
	} else if ((rv = lmdb_upgrade(ix, flags, &ix->format, cause)) != 0 ||
	    (rv = lm_meta_check(ix, ix->format, given, cause)) != 0)
		goto fail;
	if ((rv = lm_seal_load(ix, cause)) != 0)
		goto fail;
	ix->mt = memtable_create(!(flags & INDEX_RDONLY));
	if (lsm_load(ix, cause) != 0) {
		rv = INDEX_ERROR;
		goto fail;
	}
	/*
	 * Commit even a read-only transaction: LMDB closes the database
	 * handles opened in a transaction that is aborted.
	 */
	lm_long(1);
	rc = mdb_txn_commit(ix->txn);
	lm_long(0);
	if (rc != 0) {
		ix->txn = NULL;
		rv = INDEX_ERROR;
		lm_fail(ix, rc, "commit", cause);
		goto fail;
	}
	ix->txn = NULL;
	ix->mt_max = (p->memtable ? p->memtable : MEMTABLE_DEFAULT) /
	    sizeof(struct bentry);
	if (ix->mt_max < 1024)
		ix->mt_max = 1024;
	if (!(flags & INDEX_RDONLY) && ix->seal_stage != SEAL_DONE &&
	    (rv = lm_seal_all(ix, cause)) != 0)
		goto fail;
	ix->base.run_doc = ix->next_doc;

	ix->sig = xcalloc(ix->base.p.perms, sizeof *ix->sig);
	/*
	 * Eight times what a sweep adds to a chunk (see run_young), and
	 * a run out of its leaf page: rewriting one in a leaf costs little.
	 */
	ix->young_min = (size_t)(8 * (ix->mt_max / 2) / BAND_CHUNKS);
	if (ix->young_min < ix->inline_max / L1E_SIZE)
		ix->young_min = ix->inline_max / L1E_SIZE;
	ix->enc = textenc_create();
	*p = ix->base.p;
	*ixp = &ix->base;
	return (0);

fail:
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	ix->txn = NULL;
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
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	snap_end(ix);
	if (ix->env != NULL)
		mdb_env_close(ix->env);
	/* (Gone already unless lm_env_open failed.) */
	if ((ix->base.flags & INDEX_TEMP) && ix->base.path != NULL)
		lmdb_remove_dir(ix->base.path);
	textenc_free(ix->enc);
	buf_free(&ix->rec);
	buf_free(&ix->chunk);
	buf_free(&ix->ychunk);
	free(ix->ysorted);
	memtable_free(ix->mt);
	free(ix->held);
	u64vec_free(&ix->keyset);
	u64vec_free(&ix->keysort);
	free(ix->keybits);
	free(ix->rbuf);
	free(ix->wholes);
	free(ix->bruns);
	u64vec_free(&ix->bchunks);
	free(ix->probe);
	free(ix->fbuf);
	free(ix->pend);
	free(ix->l0count);
	free(ix->merged);
	free(ix->sorted);
	free(ix->sig);
	free(ix->l1map);
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
		rc = mdb_txn_begin(ix->env, NULL, flags, txn);
		if (rc != MDB_MAP_RESIZED)
			return (rc);
		snap_end(ix);	/* no transaction may be open for this */
		if ((rc = mdb_env_set_mapsize(ix->env, 0)) != 0)
			return (rc);
	}
}

/* Start a batch's transaction: a write one unless the index is read-only. */
static int
lmdb_begin(struct index *base, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	int		 rc;

	if ((rc = lm_txn(ix, 0, &ix->txn)) != 0) {
		ix->txn = NULL;
		return (lm_fail(ix, rc, "begin", cause));
	}
	ix->npend = ix->nmerged = 0;
	ix->l1valid = ix->bvalid = 0;
	ix->batch = NULL;		/* until lmdb_prepare */
	ix->nbatch = 0;
	/*
	 * Another writer may have added documents since; a reader needs
	 * next_doc too, to tell a removed document from a corrupt index,
	 * and so does lsm_load, to tell an l0 entry from a damaged one.
	 */
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0 ||
	    lm_seal_load(ix, cause) != 0) {
		lmdb_abort(&ix->base);
		return (INDEX_ERROR);
	}
	if ((rc = lsm_load(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	if (ix->l0_bad > 0) {
		xasprintf(cause, "index %s is damaged: %" PRIu64 " band "
		    "entries in l0 are not of a document below next_doc (run "
		    "--check)", ix->base.path, ix->l0_bad);
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
	char	 v[32];
	int	 rc;

	if (ix->base.flags & INDEX_RDONLY) {
		lmdb_abort(&ix->base);
		return (0);
	}
	ix->l1valid = ix->bvalid = 0;	/* the sweep rewrites l1 */
	if ((rc = lsm_flush(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	if (ix->next_doc != ix->start_doc) {
		snprintf(v, sizeof v, "%" PRIu64, ix->next_doc);
		if ((rc = lm_meta_put(ix, "next_doc", v)) != 0) {
			rc = lm_fail(ix, rc, "writing meta", cause);
			lmdb_abort(&ix->base);
			return (rc);
		}
	}
	if ((rc = lm_undelivered_apply(ix, cause)) != 0) {
		lmdb_abort(&ix->base);
		return (rc);
	}
	lm_long(1);
	rc = mdb_txn_commit(ix->txn);
	lm_long(0);
	ix->txn = NULL;
	if (rc != 0) {
		rc = lm_fail(ix, rc, "commit", cause);
		lmdb_abort(&ix->base);
		return (rc);
	}
	ix->dranges.n = ix->dreplays.n = ix->aranges.n = 0;
	ix->base.batch_first = ix->start_doc;
	ix->base.batch_end = ix->next_doc;
	lm_own_add(ix);
	ix->owner_new = 0;
	/* Durable: keep the additions, forget what the sweep merged. */
	memtable_commit(ix->mt);
	ix->undo_stale = 0;
	while (ix->nmerged > 0)
		memtable_drop(ix->mt, ix->merged[--ix->nmerged]);
	ix->npend = 0;
	ix->lsm = ix->tx;
	return (0);
}

/* Throw the batch's transaction away; grow the map if it was full. */
static void
lmdb_abort(struct index *base)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_envinfo	 info;

	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	ix->l1valid = ix->bvalid = 0;
	ix->next_doc = ix->start_doc;
	if (ix->owner_new)
		lm_owner_release(ix);	/* its first range was not kept */
	if (ix->mt != NULL && ix->undo_stale)
		lsm_forget(ix);		/* lsm_unkey */
	else if (ix->mt != NULL)
		memtable_rollback(ix->mt);
	ix->undo_stale = 0;
	ix->npend = ix->nmerged = 0;
	ix->tx = ix->lsm;
	if (ix->map_full) {
		ix->map_full = 0;
		snap_end(ix);
		mdb_env_info(ix->env, &info);
		if (mdb_env_set_mapsize(ix->env, info.me_mapsize * 2) != 0)
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

/* Look a document number up in one of the databases keyed by it. */
int
lm_get(struct lmdb *ix, MDB_dbi dbi, uint64_t docid, MDB_val *v)
{
	unsigned char	 kb[8];
	MDB_val		 k;

	lm_beat();
	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	return (mdb_get(ix->txn, dbi, &k, v));
}

/*
 * Seals.  From format 9 every value of docs, texts, l0, l1 and l1y ends
 * with its seal (codec.c: seal_put), written with it.  It is checked
 * wherever the value is read whole: a document's record and text at each
 * read (a lookup's candidates, an export), an l1 or l1y run when the sweep
 * merges it (lm_run_get) and the l0 log when a writer reads it back whole
 * (lsm_read), and everything by --check.  A lookup reads a few entries
 * of a run, where checking its whole run would read a hundred times more;
 * a flipped bit there can hide one band of a document from lookups until
 * the sweep next merges its chunk, which then stops with "damaged".
 *
 * An older index is sealed by its first writable open (lm_seal_all), in
 * transactions of up to --memtable bytes (the memory a writer may take),
 * database after database in
 * SEAL_* order and each in key order; meta's "sealing" record, "STAGE
 * KEY" (decimal), says how far it got: the values of the databases before
 * STAGE, and those of STAGE's under keys below KEY, are sealed.  It goes
 * once all are.  A process that opens the index meanwhile reads both
 * kinds (lm_sealed, the record read again at each transaction), and one
 * that opens it for writing finishes the sealing first, so that nothing
 * unsealed is written after.
 */
/* Is the value under key in database tag sealed (1)? */
int
lm_sealed(const struct lmdb *ix, unsigned tag, uint64_t key)
{
	if (ix->format < 9)
		return (0);
	return (tag < ix->seal_stage ||
	    (tag == ix->seal_stage && key < ix->seal_key));
}

/*
 * Take the seal off the value v under key in database tag, if it has one
 * (lm_sealed), checking it first with verify.  0, or -1: it does not match
 * (or the value is too short to have one).
 */
int
lm_unseal(const struct lmdb *ix, unsigned tag, uint64_t key, MDB_val *v,
    int verify)
{
	size_t	 len;

	if (!lm_sealed(ix, tag, key))
		return (0);
	if (v->mv_size < SEAL_SIZE || (verify &&
	    seal_open(v->mv_data, v->mv_size, tag, key, &len) != 0))
		return (-1);
	v->mv_size -= SEAL_SIZE;
	return (0);
}

/* Read the "sealing" record (lm_sealed) in the transaction.  0, or -1. */
int
lm_seal_load(struct lmdb *ix, char **cause)
{
	char		 s[64];
	unsigned	 stage;
	uint64_t	 key;
	int		 n = 0, rc;

	ix->seal_stage = SEAL_DONE;
	ix->seal_key = 0;
	if (ix->format < 9 ||
	    (rc = lm_meta_get(ix, "sealing", s, sizeof s)) == INDEX_NOTFOUND)
		return (0);
	if (rc != 0 || sscanf(s, "%u %" SCNu64 "%n", &stage, &key, &n) != 2 ||
	    s[n] != '\0' || stage < SEAL_DOCS || stage >= SEAL_DONE) {
		xasprintf(cause, "index %s is damaged: meta record \"sealing\" "
		    "is bad (run --check)", ix->base.path);
		return (-1);
	}
	ix->seal_stage = stage;
	ix->seal_key = key;
	return (0);
}

/* The database of a SEAL_* stage, and the size of its keys. */
static MDB_dbi
lm_seal_dbi(const struct lmdb *ix, unsigned stage, size_t *keysize)
{
	*keysize = stage >= SEAL_L1 ? 4 : 8;
	switch (stage) {
	case SEAL_DOCS:
		return (ix->docs);
	case SEAL_TEXTS:
		return (ix->texts);
	case SEAL_L0:
		return (ix->l0);
	case SEAL_L1:
		return (ix->l1);
	default:
		return (ix->l1y);
	}
}

/* A big-endian key of size bytes (4 or 8), and back. */
static void
lm_key_put(unsigned char *kb, size_t size, uint64_t key)
{
	size_t	 i;

	for (i = 0; i < size; i++)
		kb[i] = (unsigned char)(key >> (8 * (size - 1 - i)));
}

static uint64_t
lm_key_get(const unsigned char *kb, size_t size)
{
	uint64_t	 key = 0;
	size_t		 i;

	for (i = 0; i < size; i++)
		key = key << 8 | kb[i];
	return (key);
}

/*
 * One transaction of lm_seal_all: seal up to --memtable bytes of
 * values from where the "sealing" record says, and write where it got to
 * in *stage and *key and in the record (deleted at SEAL_DONE).
 */
static int
lm_seal_step(struct lmdb *ix, unsigned *stage, uint64_t *key, char **cause)
{
	MDB_cursor	*cur;
	MDB_dbi		 dbi;
	MDB_val		 k, v;
	unsigned char	 kb[8];
	size_t		 keysize, done = 0, budget;
	char		 s[64];
	int		 rc = 0;

	*stage = ix->seal_stage;
	*key = ix->seal_key;
	budget = ix->mt_max * sizeof(struct bentry);
	while (*stage != SEAL_DONE && done < budget) {
		if (*stage == SEAL_L1Y && !ix->have_l1y) {
			*stage = SEAL_DONE;
			break;
		}
		dbi = lm_seal_dbi(ix, *stage, &keysize);
		if ((rc = mdb_cursor_open(ix->txn, dbi, &cur)) != 0)
			return (lm_fail(ix, rc, "sealing", cause));
		lm_key_put(kb, keysize, *key);
		k.mv_data = kb;
		k.mv_size = keysize;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc == 0 && (k.mv_size != keysize || !lm_ovf_ok(ix, &v)))
			rc = MDB_CORRUPTED;
		if (rc == 0) {
			*key = lm_key_get(k.mv_data, keysize);
			buf_reserve(&ix->rec, v.mv_size + SEAL_SIZE);
			memcpy(ix->rec.data, v.mv_data, v.mv_size);
			seal_put((unsigned char *)ix->rec.data, v.mv_size,
			    *stage, *key);
			done += v.mv_size + 64;
			lm_key_put(kb, keysize, *key);
			k.mv_data = kb;
			v.mv_data = ix->rec.data;
			v.mv_size += SEAL_SIZE;
			rc = mdb_cursor_put(cur, &k, &v, MDB_CURRENT);
		}
		mdb_cursor_close(cur);
		lm_beat();
		if (rc == MDB_NOTFOUND) {
			(*stage)++;
			*key = 0;
		} else if (rc != 0)
			return (lm_fail(ix, rc, "sealing", cause));
		else
			(*key)++;
	}
	if (*stage == SEAL_DONE) {
		k.mv_data = (void *)"sealing";
		k.mv_size = strlen("sealing");
		rc = mdb_del(ix->txn, ix->meta, &k, NULL);
	} else {
		snprintf(s, sizeof s, "%u %" PRIu64, *stage, *key);
		rc = lm_meta_put(ix, "sealing", s);
	}
	if (rc != 0)
		return (lm_fail(ix, rc, "sealing", cause));
	return (0);
}

/*
 * Seal every value of an index of an older format (see "Seals"), in as
 * many transactions as it takes, each committed before the next.
 */
static int
lm_seal_all(struct lmdb *ix, char **cause)
{
	MDB_envinfo	 info;
	unsigned	 stage;
	uint64_t	 key;
	int		 rc, steps = 0;

	while (ix->seal_stage != SEAL_DONE) {
		if ((rc = lm_txn(ix, 0, &ix->txn)) != 0) {
			ix->txn = NULL;
			return (lm_fail(ix, rc, "begin", cause));
		}
		/* (Another process may be sealing it too.) */
		if (lm_seal_load(ix, cause) != 0)
			rc = INDEX_ERROR;
		else if (ix->seal_stage == SEAL_DONE)
			break;
		else if ((rc = lm_seal_step(ix, &stage, &key, cause)) == 0) {
			lm_long(1);
			rc = mdb_txn_commit(ix->txn);
			lm_long(0);
			ix->txn = NULL;
			if (rc != 0)
				rc = lm_fail(ix, rc, "commit", cause);
		}
		if (ix->txn != NULL)
			mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		if (rc == INDEX_AGAIN) {	/* the map is full: grow it */
			free(*cause);
			*cause = NULL;
			ix->map_full = 0;
			snap_end(ix);
			mdb_env_info(ix->env, &info);
			if ((rc = mdb_env_set_mapsize(ix->env,
			    info.me_mapsize * 2)) != 0)
				return (lm_fail(ix, rc, "growing the map",
				    cause));
			continue;
		}
		if (rc != 0)
			return (rc);
		ix->seal_stage = stage;
		ix->seal_key = key;
		steps++;
		log_debug("%s: sealed up to database %u, key %" PRIu64,
		    ix->base.path, stage, key);
	}
	if (ix->txn != NULL)
		mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	if (steps > 0)
		log_info("%s: every value sealed (index format %d)",
		    ix->base.path, MHF_INDEX_FORMAT);
	return (0);
}

/*
 * Put len bytes at data under k in dbi (appended: docs and texts are in
 * document order), sealed as database tag's.  Returns an LMDB code.
 */
int
lm_put_sealed(struct lmdb *ix, MDB_dbi dbi, unsigned tag, MDB_val *k,
    const void *data, size_t len)
{
	MDB_val	 v;
	int	 rc;

	v.mv_data = NULL;
	v.mv_size = len + SEAL_SIZE;
	if ((rc = mdb_put(ix->txn, dbi, k, &v, MDB_APPEND | MDB_RESERVE)) != 0)
		return (rc);
	memcpy(v.mv_data, data, len);
	seal_put(v.mv_data, len, tag, lm_key_get(k->mv_data, k->mv_size));
	return (0);
}

/*
 * Decode document docid's record v, as read from docs, into d (its
 * signature into sig, unless NULL).  0, -1 if it is corrupt, or -2 if it
 * fails its seal.
 */
int
lm_docrec(struct lmdb *ix, uint64_t docid, const MDB_val *v, uint32_t *sig,
    struct docinfo *d)
{
	MDB_val	 r = *v;

	if (lm_unseal(ix, SEAL_DOCS, docid, &r, 1) != 0)
		return (-2);
	if (docrec_decode(r.mv_data, r.mv_size, ix->base.p.perms, sig, d) !=
	    r.mv_size)
		return (-1);
	d->docid = docid;
	return (0);
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
		return (lm_fail(ix, rc, "document lookup", cause));
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
		return (lm_fail(ix, rc, "text lookup", cause));
	if (rc == 0 && lm_unseal(ix, SEAL_TEXTS, docid, &v, 1) != 0)
		rc = -2;
	else if (rc == 0 && (rc = text_decode(v.mv_data, v.mv_size, out)) >= 0)
		return (rc);
	xasprintf(cause, "index %s is damaged: text of document %" PRIu64
	    " %s (run --check)", ix->base.path, docid, rc == MDB_NOTFOUND ?
	    "is missing" : rc == -2 ? "fails its checksum" : "is corrupt");
	return (INDEX_ERROR);
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
	unsigned	 j;
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
	if ((rc = lsm_hold_keys(ix, slot, keys, cause)) != 0)
		return (rc);
	docid = ix->next_doc++;
	ix->base.last_doc = docid;
	put_be64(kb, docid);
	if (when == 0)
		when = ix->now;

	docrec_encode(&ix->rec, ix->base.p.perms, sig, id, idlen, flags, when);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	if ((rc = lm_put_sealed(ix, ix->docs, SEAL_DOCS, &k, ix->rec.data,
	    ix->rec.len)) != 0)
		return (lm_fail(ix, rc, "insert document", cause));

	timekey_put(tk, when, docid);
	k.mv_data = tk;
	k.mv_size = sizeof tk;
	v.mv_data = tk;
	v.mv_size = 0;
	if ((rc = mdb_put(ix->txn, ix->times, &k, &v, 0)) != 0)
		return (lm_fail(ix, rc, "insert time", cause));
	k.mv_data = kb;
	k.mv_size = sizeof kb;

	if (ix->base.p.texts) {
		if (enc == NULL) {
			textenc_encode(ix->enc, text, textlen, flags, &ix->rec);
			enc = ix->rec.data;
			enclen = ix->rec.len;
		}
		if ((rc = lm_put_sealed(ix, ix->texts, SEAL_TEXTS, &k, enc,
		    enclen)) != 0)
			return (lm_fail(ix, rc, "insert text", cause));
	}

	if (ix->npend + ix->base.p.bands > ix->pendsize) {
		ix->pendsize = 2 * (ix->npend + ix->base.p.bands);
		ix->pend = xreallocarray(ix->pend, ix->pendsize,
		    sizeof *ix->pend);
	}
	for (j = 0; j < ix->base.p.bands; j++) {
		memtable_add(ix->mt, keys[j], docid);
		ix->pend[ix->npend].key = keys[j];
		ix->pend[ix->npend++].docid = docid;
	}
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
	uint64_t	 n;
	int		 rc;

	memset(st, 0, sizeof *st);
	if ((rc = lm_txn(ix, MDB_RDONLY, &txn)) != 0)
		return (lm_fail(ix, rc, "stats", cause));
	if (mdb_stat(txn, ix->docs, &ms) == 0)
		st->docs = ms.ms_entries;
	if (ix->held != NULL && ix->unheld == UNCOUNTED)
		n = memtable_entries(ix->mt) + lsm_estimate(ix, txn);
	else if ((rc = lsm_entries(ix, txn, &n, cause)) != 0) {
		mdb_txn_abort(txn);
		return (rc);
	}
	st->band_entries = ix->lsm.l1_entries + n;
	if ((rc = mdb_env_stat(ix->env, &ms)) == 0 &&
	    (rc = mdb_env_info(ix->env, &info)) == 0)
		st->size = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	mdb_txn_abort(txn);
	if (rc != 0)
		return (lm_fail(ix, rc, "stats", cause));
	return (0);
}

/* Delete a document's rows: docs, texts and times. */
static int
lm_delete(struct lmdb *ix, uint64_t docid, int64_t t, char **cause)
{
	unsigned char	 kb[8], tk[TIMEKEY_SIZE];
	MDB_val		 k, v;
	int		 rc;

	/* (Overflow pages are freed as their header says: check it.) */
	if (((rc = lm_get(ix, ix->texts, docid, &v)) == 0 &&
	    !lm_ovf_ok(ix, &v)) ||
	    ((rc = lm_get(ix, ix->docs, docid, &v)) == 0 && !lm_ovf_ok(ix, &v)))
		return (lm_fail(ix, MDB_CORRUPTED, "removing a document",
		    cause));
	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	if ((rc = mdb_del(ix->txn, ix->docs, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "removing a document", cause));
	if ((rc = mdb_del(ix->txn, ix->texts, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "removing a text", cause));
	if (ix->have_groups && (rc = mdb_del(ix->txn, ix->groups, &k,
	    NULL)) != 0 && rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "removing a group", cause));
	timekey_put(tk, t, docid);
	k.mv_data = tk;
	k.mv_size = sizeof tk;
	if ((rc = mdb_del(ix->txn, ix->times, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "removing a time", cause));
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
	if ((rc = mdb_stat(ix->txn, ix->docs, &st)) != 0)
		return (lm_fail(ix, rc, "expire", cause));
	count = st.ms_entries;
	if ((rc = mdb_cursor_open(ix->txn, ix->times, &cur)) != 0)
		return (lm_fail(ix, rc, "expire", cause));
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
		return (lm_fail(ix, rc, "expire", cause));
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
	if ((rc = mdb_cursor_open(ix->txn, ix->docs, &cur)) != 0)
		return (lm_fail(ix, rc, "remove", cause));
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
		return (lm_fail(ix, rc, "remove", cause));
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

	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->txn)) != 0) {
		ix->txn = NULL;
		return (lm_fail(ix, rc, "export", cause));
	}
	if (lm_seal_load(ix, cause) != 0) {
		mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		return (INDEX_ERROR);
	}
	if ((rc = mdb_cursor_open(ix->txn, ix->docs, &cur)) != 0) {
		mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		return (lm_fail(ix, rc, "export", cause));
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
	mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	buf_free(&text);
	if (rv == 0 && rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "export", cause));
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
		return (lm_fail(ix, rc, "reading a group", cause));
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
	if ((rc = mdb_put(ix->txn, ix->groups, &k, &v, MDB_APPEND)) != 0)
		return (lm_fail(ix, rc, "insert group", cause));
	return (0);
}

/*
 * Damaged pages.  LMDB reads its pages in place, through the map, and trusts
 * them: a damaged page number sends it outside the map (SIGSEGV) or past the
 * end of the file (SIGBUS), and a page of the wrong kind fails one of its
 * assertions (abort).  Checking every page up front would cost a read of the
 * whole file at every open, and the library has no checksums; so faults are
 * caught instead.  index.c arms this guard around each call into this
 * backend (lmdb_ops.guard; sigsetjmp there, no signal mask saved, so that
 * arming costs no system call); a SIGSEGV or SIGBUS raised, or an LMDB
 * assertion failed, while it is armed on the thread jumps back, and the call
 * returns INDEX_ERROR saying the index is damaged.  The process then uses
 * the index no more (INDEX_DAMAGED): the transaction the jump left is never
 * committed, so the damage goes no further.  A fault elsewhere is not ours:
 * the handler there was before (the default: the process dies) takes it.
 * The price: a bug of this file's own that faults inside a call is reported
 * as damage too (the sanitizer builds still see it first).  Threads must not
 * block the two signals (util.c: thread_start), or the kernel kills the
 * process instead.  The size check of lm_env_open turns the most common
 * damage, a truncated file, into a plain error before any of this.
 *
 * A damaged page can also send LMDB round in circles without a fault: a
 * branch page swapped with overflow bytes that read as a page of garbage
 * counts made a lookup search forever (damage.bats), and SIGTERM cannot
 * stop a thread that never returns to look.  So a watchdog thread
 * (guard_watch) looks once a second at the thread in a guarded call: if it
 * has spent GUARD_SPIN seconds of processor time since the last sign of
 * progress (each guarded call, each document read, each turn of the long
 * loops: lm_beat), it is taken to be looping and sent a SIGSEGV, which
 * jumps back as a fault does.  Waiting (fsync, a page read from a slow
 * disk) spends no processor time, and the LMDB calls that may rightly run
 * long on their own, a commit and a copy, are let be (lm_long); no single
 * lookup comes near.  One thread uses an index at a time (mhfilter.h), so
 * one watch suffices.
 */
#define GUARD_SPIN	15	/* seconds of processor time without a beat */

_Atomic uint64_t		 lm_beats;
static __thread sigjmp_buf	*guard_jmp;	/* armed on this thread */
static __thread char		 guard_what[160];	/* what was caught */
static struct sigaction		 guard_segv, guard_bus;	/* as they were */
static pthread_once_t		 guard_once = PTHREAD_ONCE_INIT;
static _Atomic int		 guard_on;	/* a call is guarded */
static _Atomic unsigned long	 guard_thread;	/* by this thread */
static _Atomic int		 guard_longcall; /* lm_long */
static _Atomic int		 guard_kicked;	/* guard_watch's signal */

_Static_assert(sizeof(pthread_t) == sizeof(unsigned long),
    "pthread_t is kept as an unsigned long");

/* Arm the guard with jb (NULL disarms); returns what was armed before. */
static sigjmp_buf *
lmdb_guard_arm(sigjmp_buf *jb)
{
	sigjmp_buf	*prev = guard_jmp;

	guard_jmp = jb;
	if (jb != NULL)
		atomic_store_explicit(&guard_thread,
		    (unsigned long)pthread_self(), memory_order_relaxed);
	atomic_store_explicit(&guard_on, jb != NULL, memory_order_release);
	lm_beat();
	return (prev);
}

/* The next LMDB call may rightly run long (on) or not (off). */
void
lm_long(int on)
{
	atomic_store(&guard_longcall, on);
	lm_beat();
}

/*
 * The watchdog: once a second, the processor time of the thread in a
 * guarded call since its last beat; past GUARD_SPIN, a SIGSEGV for it.
 */
static void *
guard_watch(void *arg)
{
	struct timespec	 ts;
	clockid_t	 clk;
	pthread_t	 t;
	uint64_t	 beat, seen = 0;
	double		 cpu, from = -1;

	(void)arg;
	for (;;) {
		sleep(1);
		if (!atomic_load_explicit(&guard_on, memory_order_acquire) ||
		    atomic_load(&guard_longcall)) {
			from = -1;
			continue;
		}
		t = (pthread_t)atomic_load_explicit(&guard_thread,
		    memory_order_relaxed);
		beat = atomic_load_explicit(&lm_beats, memory_order_relaxed);
		if (pthread_getcpuclockid(t, &clk) != 0 ||
		    clock_gettime(clk, &ts) != 0) {
			from = -1;
			continue;
		}
		cpu = ts.tv_sec + ts.tv_nsec / 1e9;
		if (from < 0 || beat != seen) {
			seen = beat;
			from = cpu;
			continue;
		}
		if (cpu - from < GUARD_SPIN ||
		    atomic_load_explicit(&lm_beats, memory_order_relaxed) !=
		    seen || !atomic_load(&guard_on))
			continue;
		atomic_store(&guard_kicked, 1);
		pthread_kill(t, SIGSEGV);
		from = -1;
	}
	return (NULL);
}

/*
 * SIGSEGV and SIGBUS: jump back if armed, else let the old action act.  A
 * SIGSEGV from guard_watch (SI_TKILL) that finds the call over is dropped.
 */
static void
guard_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGSEGV && si != NULL && si->si_code == SI_TKILL &&
	    atomic_exchange(&guard_kicked, 0)) {
		if (guard_jmp == NULL)
			return;
		strcpy(guard_what, "LMDB went round in circles: a cycle "
		    "of damaged pages");
		siglongjmp(*guard_jmp, 1);
	}
	if (guard_jmp != NULL) {
		/* (strcpy, not snprintf: async-signal-safe.) */
		strcpy(guard_what, sig == SIGBUS ? "a read past the end of "
		    "data.mdb (SIGBUS)" : "a read outside the map (SIGSEGV)");
		siglongjmp(*guard_jmp, 1);
	}
	sigaction(sig, sig == SIGBUS ? &guard_bus : &guard_segv, NULL);
}

/* An LMDB assertion: jump back if armed, else LMDB aborts. */
static void
guard_assert(MDB_env *env, const char *msg)
{
	(void)env;
	if (guard_jmp != NULL) {
		snprintf(guard_what, sizeof guard_what, "LMDB: %s", msg);
		siglongjmp(*guard_jmp, 1);
	}
}

/* Install guard_fault and start guard_watch (guard_install). */
static void
guard_init(void)
{
	struct sigaction	 sa;
	pthread_t		 t;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = guard_fault;
	/* No mask to restore after the jump (sigsetjmp saves none). */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &guard_segv) == -1 ||
	    sigaction(SIGBUS, &sa, &guard_bus) == -1)
		fatal("sigaction");
	thread_start(&t, guard_watch, NULL);
	pthread_detach(t);
}

/* Install guard_fault, once in the process. */
static void
guard_install(void)
{
	pthread_once(&guard_once, guard_init);
}

/*
 * After the guard caught something in a call on ix (NULL: the open of
 * path), with prev armed before: INDEX_ERROR, with the cause and what to
 * do.  What the call had made (the open's index, ix's transactions) is
 * left unused: it may be what the fault left half done.
 */
static int
lmdb_guard_caught(struct index *base, const char *path, sigjmp_buf *prev,
    char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;

	(void)lmdb_guard_arm(prev);
	if (ix != NULL) {
		ix->base.flags |= INDEX_DAMAGED;
		ix->txn = NULL;
		ix->snap = NULL;
		ix->l1valid = ix->bvalid = 0;
	}
	xasprintf(cause, "index %s is damaged (%s): see what --check says, "
	    "then rebuild it: --export what can be read and --import that "
	    "into a new index (see mhfilter(1), Damaged indexes)",
	    path != NULL ? path : "", guard_what);
	return (INDEX_ERROR);
}

/* A call on an index damaged before (INDEX_DAMAGED): INDEX_ERROR. */
static int
lmdb_damaged(struct index *ix, char **cause)
{
	xasprintf(cause, "index %s is damaged: not used after the error above",
	    ix->path);
	return (INDEX_ERROR);
}

static const struct index_guard lmdb_guard = {
	.arm = lmdb_guard_arm,
	.caught = lmdb_guard_caught,
	.damaged = lmdb_damaged,
};

const struct index_ops lmdb_ops = {
	.name = "LMDB",
	.exists = lmdb_exists,
	.open = lmdb_open,
	.close = lmdb_close,
	.begin = lmdb_begin,
	.prepare = lmdb_prepare,
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
};
