/*
 * Unit tests of the band index (lsm.c) on its own: over a bare LMDB
 * environment with only its three databases, l0, l1 and l1y, and none
 * of the backend's (no meta, no documents).  What the backend would keep
 * in meta, the band position, the tests keep themselves and hand back
 * to lsm_load, as lmdb.c does.  A small memtable budget makes the sweep
 * merge into the runs at every commit and go round the chunks often, so
 * that lookups read the memtable, l0 and both runs.
 */

#include "config.h"

#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "mhfilter.h"
#include "lmdbint.h"

#define BANDS		4
#define PER_COMMIT	200	/* documents */
#define MEMTABLE	(1024 * sizeof(struct bentry))	/* lsm_init's least */

struct fixture {
	char		 dir[64];
	struct lmstore	 db;
	struct lsm	 ls;
	struct lsmstate	 meta;		/* as the backend would keep it */
	uint64_t	 next_doc;
};

/* Document d's band keys: uniform, and the same every time. */
static void
doc_keys(uint64_t d, uint64_t *keys)
{
	uint64_t	 z;
	unsigned	 j;

	for (j = 0; j < BANDS; j++) {
		z = d * BANDS + j + 0x9e3779b97f4a7c15ULL;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		keys[j] = z ^ (z >> 31);
	}
}

static int
remove_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)type;
	(void)f;
	return (remove(path));
}

/* The environment and the band index, as lmdb_open sets them up. */
static void
env_open(struct fixture *f)
{
	MDB_txn		*txn;
	MDB_stat	 ms;

	memset(&f->db, 0, sizeof f->db);
	f->db.path = f->dir;
	f->db.fd = -1;
	f->db.format = MHF_INDEX_FORMAT;
	f->db.seal_stage = SEAL_DONE;	/* every value sealed */
	assert_int_equal(mdb_env_create(&f->db.env), 0);
	assert_int_equal(mdb_env_set_maxdbs(f->db.env, 4), 0);
	assert_int_equal(mdb_env_set_mapsize(f->db.env, 256ULL << 20), 0);
	assert_int_equal(mdb_env_open(f->db.env, f->dir, MDB_NOSYNC, 0600),
	    0);
	assert_int_equal(mdb_env_stat(f->db.env, &ms), 0);
	f->db.psize = ms.ms_psize;
	f->db.inline_max = ms.ms_psize / 2;
	assert_int_equal(mdb_txn_begin(f->db.env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "l0", MDB_CREATE, &f->db.l0), 0);
	assert_int_equal(mdb_dbi_open(txn, "l1", MDB_CREATE, &f->db.l1), 0);
	assert_int_equal(mdb_dbi_open(txn, "l1y", MDB_CREATE, &f->db.l1y), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	f->db.have_l1y = 1;
	memset(&f->ls, 0, sizeof f->ls);
	lsm_init(&f->ls, &f->db, BANDS, 0, MEMTABLE);
}

static void
env_close(struct fixture *f)
{
	lsm_free(&f->ls);
	mdb_env_close(f->db.env);
}

static int
setup(void **state)
{
	struct fixture	*f;

	f = xcalloc(1, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/mhf-lsm.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return (-1);
	env_open(f);
	f->next_doc = 1;
	*state = f;
	return (0);
}

static int
teardown(void **state)
{
	struct fixture	*f = *state;

	env_close(f);
	nftw(f->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return (0);
}

/* Begin a transaction and load the band index into it, as lmdb_begin. */
static void
begin(struct fixture *f, unsigned flags)
{
	char	*cause = NULL;

	assert_int_equal(mdb_txn_begin(f->db.env, NULL, flags, &f->db.txn),
	    0);
	assert_int_equal(lsm_load(&f->ls, &f->meta, f->next_doc, &cause), 0);
}

/* End the transaction begin started without committing it, as lmdb_abort. */
static void
rollback(struct fixture *f)
{
	mdb_txn_abort(f->db.txn);
	f->db.txn = NULL;
	lsm_abort(&f->ls);
}

/*
 * Add documents [from, to) in one transaction and commit it, keeping what
 * the oldest held is (live) and the position, as lmdb_commit.
 */
static void
add_commit(struct fixture *f, uint64_t from, uint64_t to, uint64_t live)
{
	struct lsmstate	 was;
	uint64_t	 keys[BANDS], d;
	char		*cause = NULL;

	begin(f, 0);
	for (d = from; d < to; d++) {
		doc_keys(d, keys);
		assert_int_equal(lsm_hold_keys(&f->ls, INDEX_NOSLOT, keys,
		    &cause), 0);
		lsm_add(&f->ls, keys, d);
	}
	assert_int_equal(lsm_flush(&f->ls, live, &cause), 0);
	lsm_position(&f->ls, &was, &f->meta);
	assert_int_equal(mdb_txn_commit(f->db.txn), 0);
	f->db.txn = NULL;
	lsm_commit(&f->ls);
	if (to > f->next_doc)
		f->next_doc = to;
}

/* Does a lookup of document d's keys find d in each of its bands? */
static int
found(struct fixture *f, uint64_t d)
{
	struct u64vec	 out = { 0 };
	uint64_t	 keys[BANDS];
	size_t		 i;
	unsigned	 j, bands = 0;
	char		*cause = NULL;

	doc_keys(d, keys);
	assert_int_equal(lsm_hold_keys(&f->ls, INDEX_NOSLOT, keys, &cause),
	    0);
	for (j = 0; j < BANDS; j++) {
		out.n = 0;
		assert_int_equal(lsm_bucket(&f->ls, keys[j], &out, 1024), 0);
		for (i = 0; i < out.n; i++)
			if (out.v[i] == d) {
				bands++;
				break;
			}
	}
	u64vec_free(&out);
	return (bands == BANDS ? 1 : bands == 0 ? 0 : -1);
}

/* Look documents [from, to) up in a read-only transaction of their own. */
static void
assert_found(struct fixture *f, uint64_t from, uint64_t to, int want)
{
	uint64_t	 d;

	begin(f, MDB_RDONLY);
	for (d = from; d < to; d++)
		if (found(f, d) != want)
			fail_msg("document %" PRIu64 ": found %d, want %d", d,
			    found(f, d), want);
	rollback(f);
}

/*
 * Documents added over many commits are found: in the memtable, in the
 * runs the sweep merged them into, and after a restart (a new struct lsm
 * on the same files), through l0 (the last commit's, most of them not
 * merged yet) and the runs.  The entries are counted whole, and the sweep
 * has gone round the chunks several times.
 */
static void
test_add_find_restart(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 d, n;
	char		*cause = NULL;

	for (d = 1; d < 3001; d += PER_COMMIT)
		add_commit(f, d, d + PER_COMMIT, 1);
	assert_true(f->meta.sweep > 2 * BAND_CHUNKS);
	assert_true(f->meta.l1_entries > 0);
	assert_found(f, 1, 3001, 1);

	begin(f, MDB_RDONLY);
	assert_int_equal(lsm_entries(&f->ls, f->db.txn, &n, &cause), 0);
	assert_int_equal(f->meta.l1_entries + n, 3000 * BANDS);
	rollback(f);

	/* Too few for the sweep to go round: most only in l0. */
	add_commit(f, 3001, 3021, 1);
	env_close(f);
	env_open(f);
	assert_found(f, 1, 3021, 1);
	add_commit(f, 3021, 3221, 1);
	assert_found(f, 1, 3221, 1);
}

/*
 * An aborted transaction's documents are not found, neither by this
 * process's memtable nor after a restart, and the position is unchanged.
 */
static void
test_abort(void **state)
{
	struct fixture	*f = *state;
	struct lsmstate	 was, tx;
	uint64_t	 keys[BANDS], d;
	char		*cause = NULL;

	add_commit(f, 1, 401, 1);
	begin(f, 0);
	for (d = 401; d < 601; d++) {
		doc_keys(d, keys);
		assert_int_equal(lsm_hold_keys(&f->ls, INDEX_NOSLOT, keys,
		    &cause), 0);
		lsm_add(&f->ls, keys, d);
	}
	assert_int_equal(lsm_flush(&f->ls, 1, &cause), 0);
	rollback(f);
	lsm_position(&f->ls, &was, &tx);
	assert_int_equal(was.sweep, f->meta.sweep);
	assert_int_equal(tx.l0_next, f->meta.l0_next);
	assert_int_equal(tx.l1_entries, f->meta.l1_entries);
	assert_found(f, 1, 401, 1);
	assert_found(f, 401, 601, 0);
	env_close(f);
	env_open(f);
	assert_found(f, 401, 601, 0);
	assert_found(f, 1, 401, 1);
}

/*
 * Merges leave out the entries of documents below live, the oldest held:
 * with live at 1001 once 1,000 documents are in, and the sweep gone round
 * every chunk twice since, fewer entries are left than were added (the
 * runs rewritten lost those of documents 1 to 1,000), and every document
 * from live on is still found.  (An old run not rewritten since keeps its
 * entries of removed documents: lookups skip those, lmdb.c's INDEX_GONE.)
 */
static void
test_live(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 d, start, n;
	char		*cause = NULL;

	add_commit(f, 1, 1001, 1);
	start = f->meta.sweep;
	for (d = 1001; f->meta.sweep < start + 2 * BAND_CHUNKS;
	    d += PER_COMMIT)
		add_commit(f, d, d + PER_COMMIT, 1001);
	assert_found(f, 1001, d, 1);
	begin(f, MDB_RDONLY);
	assert_int_equal(lsm_entries(&f->ls, f->db.txn, &n, &cause), 0);
	assert_true(f->meta.l1_entries + n < (d - 1) * BANDS);
	assert_true(f->meta.l1_entries + n >= (d - 1001) * BANDS);
	rollback(f);
}

/* The l0 log: a damaged record is an error naming it, not a lookup. */
static void
test_l0_damage(void **state)
{
	struct fixture	*f = *state;
	MDB_cursor	*cur;
	MDB_val		 k, v;
	MDB_txn		*txn;
	unsigned char	*copy;
	char		*cause = NULL;
	int		 rc;

	/* Few enough that the sweep does not go round: l0 keeps them. */
	add_commit(f, 1, 21, 1);
	/* Flip a bit in the middle of the first l0 record, seal and all. */
	assert_int_equal(mdb_txn_begin(f->db.env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, f->db.l0, &cur), 0);
	assert_int_equal(mdb_cursor_get(cur, &k, &v, MDB_FIRST), 0);
	copy = xmalloc(v.mv_size);
	memcpy(copy, v.mv_data, v.mv_size);
	copy[v.mv_size / 2] ^= 0x10;
	v.mv_data = copy;
	assert_int_equal(mdb_cursor_put(cur, &k, &v, MDB_CURRENT), 0);
	mdb_cursor_close(cur);
	assert_int_equal(mdb_txn_commit(txn), 0);
	free(copy);

	env_close(f);
	env_open(f);
	begin(f, 0);
	rc = lsm_hold(&f->ls, 0, 1, &cause);
	assert_int_equal(rc, INDEX_ERROR);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "l0 record 0 is corrupt"));
	free(cause);
	rollback(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_add_find_restart, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_l0_damage, setup,
		    teardown),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
