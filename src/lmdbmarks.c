/*
 * The LMDB backend's delivery marks (meta's "undelivered:" records) and
 * their owners (owners.lock), for a stream with --replay undelivered.
 *
 * Undelivered ranges.  A run that marks its output (INDEX_TRACK: a stream
 * with --replay undelivered) records, in each batch's own commit, the
 * documents the batch inserted as a meta record "undelivered:" and the
 * range's end as 16 hex digits (so that key order is document order) ->
 * its first document, decimal.  Once the source has written (and synced)
 * that batch's output, the record is deleted in a later commit
 * (index_delivered); a replay, an earlier run's document written again,
 * is cut out of its range the same way.  So after a crash the ranges left
 * are exactly the documents that may be missing from the output, and a
 * later run writes their records again (filter.c).  Formats before these
 * records have none, which means everything was delivered; older versions
 * of mhfilter ignore them.
 *
 * Several writers.  Processes writing one index at once interleave their
 * document numbers (LMDB serialises their commits), so "this run's
 * documents" cannot be those from a number on.  Each process keeps in
 * memory the ranges it committed (mine: lmdb_own), and each undelivered
 * range has an owner record, "undelivered-owner:" and the same 16 hex
 * digits -> the owner, decimal: the first document of its process's first
 * such range, a number no other process can take.  That process holds a
 * read lock on byte owner of owners.lock (next to data.mdb) for as long
 * as its index is open; the lock goes with it when it dies, kill -9
 * included.  So a copy in another process's undelivered range is a
 * replay once that process is gone (nobody holds its byte) and seen while
 * it runs (it writes it itself, or dies first, and then whoever meets it
 * next replays it): a record two streams are given at once is written
 * once, and a killed one's undelivered records are written by the other.
 * A daemon's batch whose client went away first is abandoned
 * (index_abandoned): its ranges lose their owner records in the next
 * commit, so that they are a stopped process's to everyone else, who
 * write their records again; the daemon knows them for its own and
 * replays them itself.  Delivery deletes every range within the batch's,
 * the pieces that replays cut out of it included, and their owners.
 * Why not a run number in the range records, or a PID: the first tells
 * whose a range is but not whether that writer still runs, the second
 * is reused and means nothing on another machine's mount; a lock is
 * exactly "this process is still here".  The owner records are new meta
 * records beside the ranges, whose records are unchanged, so the format
 * is the same: an older version reads and writes the ranges as it did
 * and deletes a range without its owner record, which is then an owner
 * of no range, ignored (--check too); a range without one (an older
 * version's) is a dead writer's.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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

static int	lm_undelivered_find(struct lmdb *, uint64_t, uint64_t *,
		    uint64_t *, uint64_t *, char **);


/* The meta keys of the undelivered range that ends at end (exclusive). */
static void
ud_key(char *kb, uint64_t end, MDB_val *k)
{
	snprintf(kb, UD_KEYLEN + 1, UD_PREFIX "%016" PRIx64, end);
	k->mv_data = kb;
	k->mv_size = UD_KEYLEN;
}

static void
uo_key(char *kb, uint64_t end, MDB_val *k)
{
	snprintf(kb, UO_KEYLEN + 1, UO_PREFIX "%016" PRIx64, end);
	k->mv_data = kb;
	k->mv_size = UO_KEYLEN;
}

/*
 * The end of a key of prefix pre (keylen bytes: the prefix, then 16
 * lower-case hex digits), or 0 if k is not one.
 */
uint64_t
ud_key_end(const MDB_val *k, const char *pre, size_t keylen)
{
	const char	*p = k->mv_data;
	size_t		 i, n = strlen(pre);
	uint64_t	 end = 0;
	int		 c;

	if (k->mv_size != keylen || memcmp(p, pre, n) != 0)
		return (0);
	for (i = n; i < keylen; i++) {
		c = (unsigned char)p[i];
		if (c >= '0' && c <= '9')
			end = end << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			end = end << 4 | (uint64_t)(c - 'a' + 10);
		else
			return (0);
	}
	return (end);
}

/* A meta value as a decimal number below max: 0, or -1. */
int
ud_value(const MDB_val *v, uint64_t max, uint64_t *out)
{
	char	 num[24];

	if (v->mv_size == 0 || v->mv_size >= sizeof num)
		return (-1);
	memcpy(num, v->mv_data, v->mv_size);
	num[v->mv_size] = '\0';
	if (meta_number(num, UINT64_MAX, out) != 0 || *out >= max)
		return (-1);
	return (0);
}

/*
 * Write the undelivered range [first, end) of owner (0: none); an LMDB
 * code.
 */
static int
ud_put(struct lmdb *ix, uint64_t first, uint64_t end, uint64_t owner)
{
	char	 kb[UO_KEYLEN + 1], num[24];
	MDB_val	 k, v;
	int	 rc;

	ud_key(kb, end, &k);
	v.mv_size = (size_t)snprintf(num, sizeof num, "%" PRIu64, first);
	v.mv_data = num;
	if ((rc = mdb_put(ix->db.txn, ix->meta, &k, &v, 0)) != 0)
		return (rc);
	uo_key(kb, end, &k);
	if (owner == 0) {
		rc = mdb_del(ix->db.txn, ix->meta, &k, NULL);
		return (rc == MDB_NOTFOUND ? 0 : rc);
	}
	v.mv_size = (size_t)snprintf(num, sizeof num, "%" PRIu64, owner);
	return (mdb_put(ix->db.txn, ix->meta, &k, &v, 0));
}

/* Delete the undelivered range that ends at end, and its owner; LMDB's. */
static int
ud_del(struct lmdb *ix, uint64_t end)
{
	char	 kb[UO_KEYLEN + 1];
	MDB_val	 k;
	int	 rc;

	ud_key(kb, end, &k);
	if ((rc = mdb_del(ix->db.txn, ix->meta, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (rc);
	uo_key(kb, end, &k);
	rc = mdb_del(ix->db.txn, ix->meta, &k, NULL);
	return (rc == MDB_NOTFOUND ? 0 : rc);
}

/*
 * The undelivered range holding docid, in the transaction: 1 with
 * [*first, *end) and its *owner (0: not recorded, an older version's),
 * 0 if none, INDEX_ERROR (a bad record).
 */
static int
lm_undelivered_find(struct lmdb *ix, uint64_t docid, uint64_t *first,
    uint64_t *end, uint64_t *owner, char **cause)
{
	MDB_cursor	*c;
	MDB_val		 k, v;
	char		 kb[UO_KEYLEN + 1];
	int		 rc;

	*owner = 0;
	if ((rc = mdb_cursor_open(ix->db.txn, ix->meta, &c)) != 0)
		return (lm_fail(&ix->db, rc, "cursor", cause));
	ud_key(kb, docid + 1, &k);	/* the first range ending after docid */
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND || (rc == 0 && (k.mv_size < sizeof UD_PREFIX -
	    1 || memcmp(k.mv_data, UD_PREFIX, sizeof UD_PREFIX - 1) != 0)))
		return (0);
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "reading meta", cause));
	snprintf(kb, sizeof kb, "%.*s", (int)(k.mv_size < UD_KEYLEN ?
	    k.mv_size : UD_KEYLEN), (const char *)k.mv_data);
	if ((*end = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0 ||
	    ud_value(&v, *end, first) != 0)
		goto corrupt;
	if (*first > docid)
		return (0);
	uo_key(kb, *end, &k);
	if ((rc = mdb_get(ix->db.txn, ix->meta, &k, &v)) == MDB_NOTFOUND)
		return (1);
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "reading meta", cause));
	if (ud_value(&v, UINT64_MAX, owner) != 0 || *owner == 0)
		goto corrupt;
	return (1);

corrupt:
	xasprintf(cause, "%s: meta record \"%s\" is bad", ix->base.path, kb);
	return (INDEX_ERROR);
}

/* Is docid one of this process's own documents (this run's)? */
int
lmdb_own(struct index *base, uint64_t docid)
{
	struct lmdb	*ix = (struct lmdb *)base;

	if (ix->db.txn != NULL && docid >= ix->start_doc &&
	    docid < ix->next_doc)
		return (1);		/* the open transaction's */
	return (pairs_has(&ix->mine, docid));
}

/* The transaction just committed inserted documents of this process's. */
void
lm_own_add(struct lmdb *ix)
{
	if (ix->next_doc != ix->start_doc)
		pairs_add(&ix->mine, ix->start_doc, ix->next_doc);
}

/*
 * Open owners.lock if it is not open yet (create it too when create is
 * set): 0, or -1 if it cannot be (none yet, a read-only directory).
 */
static int
lm_owners_open(struct lmdb *ix, int create)
{
	char	*f;

	if (ix->ofd != -1)
		return (0);
	xasprintf(&f, "%s/" OWNERS_FILE, ix->base.path);
	ix->ofd = open(f, O_RDONLY | O_CLOEXEC | (create ? O_CREAT : 0),
	    0666);
	free(f);
	return (ix->ofd == -1 ? -1 : 0);
}

/*
 * Owner locks: byte owner of owners.lock, read-locked by the process that
 * owns the ranges.  Open file description locks where there are (Linux):
 * they belong to the descriptor, so a second index handle in the process
 * neither shares nor drops them; elsewhere POSIX record locks.
 */
#ifdef F_OFD_SETLK
#define LM_SETLK	F_OFD_SETLK
#define LM_GETLK	F_OFD_GETLK
#else
#define LM_SETLK	F_SETLK
#define LM_GETLK	F_GETLK
#endif
static int
lm_owner_lock(struct lmdb *ix, uint64_t owner, short type, int cmd,
    struct flock *fl)
{
	memset(fl, 0, sizeof *fl);
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)owner;
	fl->l_len = 1;
	return (fcntl(ix->ofd, cmd, fl));
}

/*
 * Is the process that owns ranges of owner running (it holds its lock)?
 * Not if nobody could have taken one: no owners.lock, or a copy without it.
 */
static int
lm_owner_alive(struct lmdb *ix, uint64_t owner)
{
	struct flock	 fl;

	if (owner > INT64_MAX || lm_owners_open(ix, 0) != 0 ||
	    lm_owner_lock(ix, owner, F_WRLCK, LM_GETLK, &fl) == -1)
		return (0);
	return (fl.l_type != F_UNLCK);
}

/*
 * Become an owner, in the transaction of this process's first undelivered
 * range: its first document, never another range's, names the owner.
 * Without the lock (a directory one may not write to) the ranges are
 * recorded all the same: others take them for a dead process's and write
 * them again (at least once).
 */
static void
lm_owner_take(struct lmdb *ix)
{
	struct flock	 fl;
	static int	 warned;

	ix->owner = ix->start_doc;
	ix->owner_new = 1;
	if (lm_owners_open(ix, 1) == 0 &&
	    lm_owner_lock(ix, ix->owner, F_RDLCK, LM_SETLK, &fl) == 0)
		return;
	if (!warned++)
		log_warn("%s/%s: cannot lock (other writers will take this "
		    "run's undelivered records for a stopped run's)",
		    ix->base.path, OWNERS_FILE);
}

/* Give up an owner taken in a transaction that was not committed. */
void
lm_owner_release(struct lmdb *ix)
{
	struct flock	 fl;

	if (ix->ofd != -1)
		(void)lm_owner_lock(ix, ix->owner, F_UNLCK, LM_SETLK, &fl);
	ix->owner = 0;
	ix->owner_new = 0;
}

/*
 * Is docid in an undelivered range whose output may never be written?
 * 1, 0, or INDEX_ERROR.  A range of this process's is (it knows it will
 * not write it again but as a replay); one of another process that is
 * running is not: that process writes it, or stops first, and then it is.
 */
int
lmdb_undelivered(struct index *base, uint64_t docid, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	uint64_t	 first, end, owner;
	int		 rc;

	rc = lm_undelivered_find(ix, docid, &first, &end, &owner, cause);
	if (rc != 1 || lmdb_own(base, docid) || owner == 0)
		return (rc);
	return (!lm_owner_alive(ix, owner));
}

/* Queue delivery marks for the next commit. */
void
lmdb_delivered(struct index *base, const uint64_t *ranges, size_t nranges,
    const uint64_t *replays, size_t nreplays)
{
	struct lmdb	*ix = (struct lmdb *)base;
	size_t		 i;

	if (ix->base.flags & INDEX_RDONLY)
		return;
	for (i = 0; i < 2 * nranges; i++)
		u64vec_push(&ix->dranges, ranges[i]);
	for (i = 0; i < nreplays; i++)
		u64vec_push(&ix->dreplays, replays[i]);
}

/* Queue abandoned ranges for the next commit. */
void
lmdb_abandoned(struct index *base, const uint64_t *ranges, size_t nranges)
{
	struct lmdb	*ix = (struct lmdb *)base;
	size_t		 i;

	if (ix->base.flags & INDEX_RDONLY)
		return;
	for (i = 0; i < 2 * nranges; i++)
		u64vec_push(&ix->aranges, ranges[i]);
}

/*
 * Delete every undelivered range within [first, end), or with disown only
 * its owner record: the range a commit recorded, or what is left of it
 * once replays were cut out of it (by this process or another).  Ranges
 * never overlap, so these are the committing process's own.  0, or
 * INDEX_ERROR.
 */
static int
lm_undelivered_forget(struct lmdb *ix, uint64_t first, uint64_t end,
    int disown, char **cause)
{
	MDB_cursor	*c;
	MDB_val		 k, v;
	char		 kb[UO_KEYLEN + 1];
	uint64_t	 e;
	struct u64vec	 ends = { 0 };
	size_t		 i;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, ix->meta, &c)) != 0)
		return (lm_fail(&ix->db, rc, "cursor", cause));
	ud_key(kb, first + 1, &k);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		lm_beat();
		if ((e = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0 || e > end)
			break;
		u64vec_push(&ends, e);
	}
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND) {
		u64vec_free(&ends);
		return (lm_fail(&ix->db, rc, "reading meta", cause));
	}
	for (i = 0, rc = 0; i < ends.n && rc == 0; i++) {
		if (!disown) {
			rc = ud_del(ix, ends.v[i]);
			continue;
		}
		uo_key(kb, ends.v[i], &k);
		if ((rc = mdb_del(ix->db.txn, ix->meta, &k, NULL)) ==
		    MDB_NOTFOUND)
			rc = 0;
	}
	u64vec_free(&ends);
	return (rc == 0 ? 0 : lm_fail(&ix->db, rc, "writing meta", cause));
}

/*
 * In the commit: record this batch's documents as undelivered (with
 * INDEX_TRACK), owned by this process, delete the ranges delivered since,
 * cut the replays delivered since out of their ranges, and disown the
 * ranges abandoned since.
 */
int
lm_undelivered_apply(struct lmdb *ix, char **cause)
{
	uint64_t	 d, first, end, owner;
	size_t		 i;
	int		 rc = 0, found;

	if ((ix->base.flags & INDEX_TRACK) && ix->next_doc != ix->start_doc) {
		if (ix->owner == 0)
			lm_owner_take(ix);
		if ((rc = ud_put(ix, ix->start_doc, ix->next_doc,
		    ix->owner)) != 0)
			return (lm_fail(&ix->db, rc, "writing meta", cause));
	}
	for (i = 0; i + 1 < ix->dranges.n; i += 2) {
		if ((rc = lm_undelivered_forget(ix, ix->dranges.v[i],
		    ix->dranges.v[i + 1], 0, cause)) != 0)
			return (rc);
	}
	for (i = 0; i + 1 < ix->aranges.n; i += 2) {
		if ((rc = lm_undelivered_forget(ix, ix->aranges.v[i],
		    ix->aranges.v[i + 1], 1, cause)) != 0)
			return (rc);
	}
	for (i = 0; i < ix->dreplays.n; i++) {
		d = ix->dreplays.v[i];
		found = lm_undelivered_find(ix, d, &first, &end, &owner,
		    cause);
		if (found < 0)
			return (found);
		if (found == 0)
			continue;
		if ((rc = ud_del(ix, end)) != 0 ||
		    (first < d && (rc = ud_put(ix, first, d, owner)) != 0) ||
		    (d + 1 < end && (rc = ud_put(ix, d + 1, end, owner)) != 0))
			return (lm_fail(&ix->db, rc, "writing meta", cause));
	}
	return (0);
}
