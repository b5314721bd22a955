/*
 * The LMDB backend's formats (lmdb.c gives the layout): the upgrade of an
 * older index on open, and the seals of format 9, which a writable open
 * of an older index writes (lm_seal_all) and every read of a whole value
 * checks.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "mhfilter.h"
#include "lmdbint.h"

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
		rc = mdb_get(ix->db.txn, ix->db.l1, &k, &v);
		if (rc == MDB_NOTFOUND) {
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
		rc = mdb_put(ix->db.txn, ix->db.l1, &k, &v, 0);
	}
	free(e);
	buf_free(&out);
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "upgrading l1", cause));
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
int
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
		return (lm_fail(&ix->db, rc, "upgrading meta", cause));
	return (0);
}

/*
 * Seals.  From format 9 every value of docs, texts, l0, l1 and l1y ends
 * with its seal (codec.c: seal_put), written with it.  It is checked
 * wherever the value is read whole: a document's record and text at each
 * read (a lookup's candidates, an export), an l1 or l1y run when the sweep
 * rewrites it (lsm_merge) and the l0 log when a writer reads it back whole
 * (lsm_read), and everything by --check.  A lookup reads a few entries
 * of a run, where checking its whole run would read a hundred times more;
 * a flipped bit there can hide one band of a document from lookups until
 * the sweep next rewrites that run, which then stops with "damaged", or
 * --check finds it.
 *
 * An older index is sealed by its first writable open (lm_seal_all), in
 * transactions of up to --memtable bytes (the memory a writer may take),
 * database after database in SEAL_* order and each in key order; meta's
 * "sealing" record, "STAGE KEY" (decimal), says how far it got: the
 * values of the databases before STAGE, and those of STAGE's under keys
 * below KEY, are sealed.  It goes once all are.  A process that opens the
 * index meanwhile reads both kinds (lm_sealed, the record read again at
 * each transaction), and one that opens it for writing finishes the
 * sealing first, so that nothing unsealed is written after.
 */

/* Is the value under key in database tag sealed (1)? */
int
lm_sealed(const struct lmstore *db, unsigned tag, uint64_t key)
{
	if (db->format < 9)
		return (0);
	return (tag < db->seal_stage ||
	    (tag == db->seal_stage && key < db->seal_key));
}

/*
 * Take the seal off the value v under key in database tag, if it has one
 * (lm_sealed), checking it first with verify.  0, or -1: it does not match
 * (or the value is too short to have one).
 */
int
lm_unseal(const struct lmstore *db, unsigned tag, uint64_t key, MDB_val *v,
    int verify)
{
	if (!lm_sealed(db, tag, key))
		return (0);
	if (v->mv_size < SEAL_SIZE)
		return (-1);
	v->mv_size -= SEAL_SIZE;
	return (verify ? lm_seal_check(db, tag, key, v) : 0);
}

/*
 * Check the seal of the value v under key in database tag, which lm_unseal
 * took off without checking it: 0, or -1 if it does not match.
 */
int
lm_seal_check(const struct lmstore *db, unsigned tag, uint64_t key,
    const MDB_val *v)
{
	size_t	 len;

	if (!lm_sealed(db, tag, key))
		return (0);
	return (seal_open(v->mv_data, v->mv_size + SEAL_SIZE, tag, key, &len));
}

/*
 * Read the "sealing" record (lm_sealed) in the transaction, unless every
 * value was sealed already: they stay so.  0, or -1.
 */
int
lm_seal_load(struct lmdb *ix, char **cause)
{
	char		 s[64];
	unsigned	 stage;
	uint64_t	 key;
	int		 n = 0, rc;

	if (ix->db.seal_stage == SEAL_DONE)
		return (0);
	if (ix->db.format < 9 ||
	    (rc = lm_meta_get(ix, "sealing", s, sizeof s)) == INDEX_NOTFOUND) {
		ix->db.seal_stage = SEAL_DONE;
		ix->db.seal_key = 0;
		return (0);
	}
	if (rc != 0 || sscanf(s, "%u %" SCNu64 "%n", &stage, &key, &n) != 2 ||
	    s[n] != '\0' || stage < SEAL_DOCS || stage >= SEAL_DONE) {
		xasprintf(cause, "index %s is damaged: meta record \"sealing\" "
		    "is bad (see mhfilter(1), Damaged indexes)", ix->base.path);
		return (-1);
	}
	ix->db.seal_stage = stage;
	ix->db.seal_key = key;
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
		return (ix->db.l0);
	case SEAL_L1:
		return (ix->db.l1);
	default:
		return (ix->db.l1y);
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
 * One transaction of lm_seal_all: seal up to --memtable bytes of values
 * from where the "sealing" record says, and write where it got to in
 * *stage and *key and in the record (deleted at SEAL_DONE).
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

	*stage = ix->db.seal_stage;
	*key = ix->db.seal_key;
	budget = lsm_budget(&ix->lsm);
	while (*stage != SEAL_DONE && done < budget) {
		if (*stage == SEAL_L1Y && !ix->db.have_l1y) {
			*stage = SEAL_DONE;
			break;
		}
		dbi = lm_seal_dbi(ix, *stage, &keysize);
		if ((rc = mdb_cursor_open(ix->db.txn, dbi, &cur)) != 0)
			return (lm_fail(&ix->db, rc, "sealing", cause));
		lm_key_put(kb, keysize, *key);
		k.mv_data = kb;
		k.mv_size = keysize;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc == 0 && (k.mv_size != keysize ||
		    !lm_ovf_ok(&ix->db, &v)))
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
		if (rc != 0 && rc != MDB_NOTFOUND)
			return (lm_fail(&ix->db, rc, "sealing", cause));
		/* (The last key there can be: done, not round again.) */
		if (rc == MDB_NOTFOUND || *key == (keysize == 4 ?
		    UINT32_MAX : UINT64_MAX)) {
			(*stage)++;
			*key = 0;
		} else
			(*key)++;
	}
	if (*stage == SEAL_DONE) {
		k.mv_data = (void *)"sealing";
		k.mv_size = strlen("sealing");
		rc = mdb_del(ix->db.txn, ix->meta, &k, NULL);
	} else {
		snprintf(s, sizeof s, "%u %" PRIu64, *stage, *key);
		rc = lm_meta_put(ix, "sealing", s);
	}
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "sealing", cause));
	return (0);
}

/*
 * Seal every value of an index of an older format (see "Seals"), in as
 * many transactions as it takes, each committed before the next.
 */
int
lm_seal_all(struct lmdb *ix, char **cause)
{
	MDB_envinfo	 info;
	unsigned	 stage;
	uint64_t	 key;
	int		 rc, steps = 0;

	while (ix->db.seal_stage != SEAL_DONE) {
		if ((rc = lm_txn(ix, 0, &ix->db.txn)) != 0) {
			ix->db.txn = NULL;
			return (lm_fail(&ix->db, rc, "begin", cause));
		}
		/* (Another process may be sealing it too.) */
		if (lm_seal_load(ix, cause) != 0)
			rc = INDEX_ERROR;
		else if (ix->db.seal_stage == SEAL_DONE)
			break;
		else if ((rc = lm_seal_step(ix, &stage, &key, cause)) == 0) {
			lm_long(1);
			rc = mdb_txn_commit(ix->db.txn);
			lm_long(0);
			ix->db.txn = NULL;
			if (rc != 0)
				rc = lm_fail(&ix->db, rc, "commit", cause);
		}
		if (ix->db.txn != NULL)
			mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		if (rc == INDEX_AGAIN) {	/* the map is full: grow it */
			ix->db.map_full = 0;
			mdb_env_info(ix->db.env, &info);
			if ((rc = lm_resize(ix, info.me_mapsize * 2)) != 0)
				return (lm_fail(&ix->db, rc, "growing the map",
				    cause));
			continue;
		}
		if (rc != 0)
			return (rc);
		ix->db.seal_stage = stage;
		ix->db.seal_key = key;
		steps++;
		log_debug("%s: sealed up to database %u, key %" PRIu64,
		    ix->base.path, stage, key);
	}
	if (ix->db.txn != NULL)
		mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	if (steps > 0)
		log_info("%s: every value sealed (index format %d)",
		    ix->base.path, MHF_INDEX_FORMAT);
	return (0);
}

/*
 * Put len bytes at data under k in dbi (appended: docs and texts are in
 * document order), sealed as database tag's.  With cur (not NULL), through
 * *cur, opened on dbi in the transaction if it is NULL: a cursor kept at
 * the database's end for a batch's appends spares each of them a cursor's
 * set-up and a search down from the root (a third of their time).  Returns
 * an LMDB code.
 */
int
lm_put_sealed(struct lmstore *db, MDB_dbi dbi, MDB_cursor **cur,
    unsigned tag, MDB_val *k, const void *data, size_t len)
{
	MDB_val	 v;
	int	 rc;

	v.mv_data = NULL;
	v.mv_size = len + SEAL_SIZE;
	if (cur != NULL && *cur == NULL &&
	    (rc = mdb_cursor_open(db->txn, dbi, cur)) != 0)
		return (rc);
	if (cur != NULL)
		rc = mdb_cursor_put(*cur, k, &v, MDB_APPEND | MDB_RESERVE);
	else
		rc = mdb_put(db->txn, dbi, k, &v, MDB_APPEND | MDB_RESERVE);
	if (rc != 0)
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

	if (lm_unseal(&ix->db, SEAL_DOCS, docid, &r, 1) != 0)
		return (-2);
	if (docrec_decode(r.mv_data, r.mv_size, ix->base.p.perms, sig, d) !=
	    r.mv_size)
		return (-1);
	d->docid = docid;
	return (0);
}
