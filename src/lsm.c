/*
 * The LMDB backend's band index: band keys to documents, a log-structured
 * merge over three of its databases (lmdb.c gives their format): l0, the
 * log of the memtable (bandrun.c), and each chunk's runs in l1 and l1y.
 * Here: reading l0 back into the memtable, the sweep that merges it into
 * the runs at each commit (lsm_flush), the repacking of l1's tree, and a
 * batch's lookups (lsm_prepare, lsm_candidates).
 *
 * Its interface (lmdbint.h).  Its state, struct lsm, is its own.  Of the
 * backend it is lent struct lmstore: the environment, the transaction the
 * backend has open, the three databases, the map and the seals; it knows
 * nothing of documents, texts or meta.  The backend begins a transaction
 * and hands over meta's band position with lsm_load; adds a document's
 * keys with lsm_add; at commit calls lsm_flush with the oldest document
 * held, writes the new position (lsm_position) to meta, and after the
 * commit calls lsm_commit (or lsm_abort).
 *
 * A batch's lookups: lsm_prepare finds where every chunk's l1 run is (a
 * batch of 1,000 touches most chunks), so a lookup is a search of the
 * memtable's short bucket and an interpolation search of one run.  Finding
 * them is a cursor pass over 16,384 runs, a tenth of the writer's time when
 * done for every batch.  So the pass reads a snapshot, a read-only
 * transaction kept open across batches, whose pointers stay valid for as
 * long as it is open; each batch re-reads from its own transaction only the
 * chunks the sweep has merged since the snapshot was taken, a contiguous
 * range.  Once that range passes SNAP_CHUNKS the snapshot is renewed: the
 * pages the sweep freed meanwhile cannot be reused while it is open, so it
 * holds at most a sixteenth of l1 back.  It is ended before a map resize
 * and when another process's commits moved l1 (their merges are in the
 * range too, the sweep position being shared, but ending it costs little).
 *
 * Each lookup is then a few cache misses, so lsm_candidates starts the
 * loads of the next records' lookups (lsm_prefetch) while the caller
 * verifies this one's candidates: a pipeline two records deep, bucket
 * headers first, then the buckets and the lines of each run where the key
 * should be.
 *
 * Why not a B-tree of band keys.  Band keys are uniform hashes, so in a
 * B-tree every insertion lands on a different leaf page: a batch of 1,000
 * documents with 16 bands dirties ~16,000 pages once the tree is large,
 * and a commit writes them all (64 MB for 1,000 documents), so that the
 * rate falls by half as the index grows from 100k to 300k documents (index
 * format 1 was such a tree).  From format 2 on it is a log-structured merge
 * instead:
 *
 *   - A batch's new entries go to the memtable (bandrun.c: in memory, by
 *     chunk) and, as one sequential record, to l0: a commit writes about
 *     16 bytes per entry, not a page.
 *   - A sweep walks the chunks in order, round and round.  Each commit
 *     merges the next few chunks' memtable entries into their l1 runs
 *     (one sequential rewrite per chunk) and drops them from the memtable.
 *     The pace keeps the memtable under its budget (--memtable): a full
 *     sweep per half budget of new entries.  An l0 record is deleted once
 *     the sweep has gone all the way round since it was written.  On
 *     open the memtable is empty: a batch reads back from l0, in one pass,
 *     the entries of its keys and (a writer's) the whole of the chunks its
 *     commit merges, less those whose chunks the sweep has passed since
 *     (lsm_hold), so that a small run costs no more against a large
 *     index.
 *   - A lookup reads the key's chunk in the memtable and its l1 runs
 *     (interpolation search): the old one and the young one (below).
 *   - Merging leaves out the entries of removed documents below the
 *     oldest one held; removed documents above it are skipped at lookup
 *     (index_doc says INDEX_GONE) until the oldest passes them.
 *
 * Young runs.  A merge rewrites the chunk's whole run, so with one run a
 * chunk the sweep's cost grows with l1 while the memtable does not: the
 * write volume per document grows with the index (l1 / memtable): 136 GB
 * written for 10 million documents of 1 KB (a 14 GB index), and a third
 * less with young runs.  So each chunk has two runs, an old one (l1) and
 * a young one (l1y), and a merge goes into the young run until it would
 * pass sqrt(2 * old * new entries), then, with the young run's entries,
 * into the old run, which is rewritten that much less often (run_young
 * gives the reasoning).  The volume per merge then grows as the square
 * root of l1, not as l1.  A lookup reads both runs; an old run still in
 * its leaf page, or under eight times what a sweep adds to it, gets no
 * young run.  A young run is kept out of the leaf pages, padded if need
 * be (format 6), so that a small batch's lookups read it with pread as
 * they read old runs, rather than faulting in a leaf page each; so is an
 * old run from ORUN_PAD bytes on (format 7).  Once no old run is left in
 * a leaf, a commit rewrites l1's tree with full leaves (lsm_repack), so
 * that those lookups fault in fewer pages of pointers.
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

#define MEMTABLE_DEFAULT (64ULL << 20)	/* --memtable */
#define BUCKET_MAX	INDEX_BUCKET_MAX	/* entries read from one band bucket */
#define SNAP_CHUNKS	(BAND_CHUNKS / 16)	/* see lsm_prepare */
#define L0_READS	8	/* partial reads of l0, then a whole one */
#define L0_WINDOW	4096	/* l0 entries read at a time (lsm_read) */
#define RUN_WINDOW	4096	/* l1 entries read for a lookup, at most */
#define L0_WHOLES_MAX	(BAND_CHUNKS / 8)	/* see l0_filter_setup */
#define L1_REPACK_MAX	(128ULL << 20)	/* l1 repacked in one commit, at most */
#define L1_NODE		22	/* a leaf's pointer to an overflow run */

/*
 * What the memtable holds of a chunk's l0 entries (struct lsm's held).  A batch
 * needs only the entries of its own keys: holding whole chunks (a tenth of
 * l0 for 100 records) cost a read-only batch 6.5 MB of its 8 MB of heap,
 * and a writer's, at a million documents, a sixth of its time.  Only the
 * chunks its commit merges must be whole (lsm_hold).
 */
#define MT_NONE		0
#define MT_ALL		1
#define MT_WANT		2	/* all, at the next lsm_read */
#define MT_KEYS		3	/* those of keys in keyset */
#define MT_WANTKEYS	4	/* those, at the next lsm_read */

/* A chunk's runs as LMDB gives them (NULL data: none), with their counts. */
struct brun {
	MDB_val		 run;
	size_t		 n;
	MDB_val		 yrun;
	size_t		 yn;
};

/* A chunk's l1 runs, old and young, as the transaction sees them. */
struct l1ref {
	const unsigned char	*run;
	size_t			 n;	/* entries */
	const unsigned char	*yrun;
	size_t			 yn;
};

static void	lsm_forget(struct lsm *);
static void	lsm_unkey(struct lsm *);
static int	lsm_read(struct lsm *, MDB_txn *, int, char **);
static uint64_t	l0_estimate(struct lsm *, MDB_txn *);
static const unsigned char *lm_pread(struct lsm *, const unsigned char *,
		    size_t);
static const unsigned char *lm_pread_to(struct lmstore *,
		    const unsigned char *, size_t, unsigned char *);
static size_t	lm_run_find(struct lsm *, const MDB_val *, size_t, uint64_t,
		    struct u64vec *, size_t);
static int	lm_run_get(struct lsm *, MDB_dbi, unsigned, int, MDB_val *,
		    size_t *, char **);
static int	lm_run_put(struct lsm *, MDB_dbi, unsigned, size_t,
		    const unsigned char *, size_t, char **);
static int	lsm_merge(struct lsm *, unsigned, uint64_t, char **);
static int	lsm_repack(struct lsm *, char **);
static void	lsm_prefetch(const struct lsm *, const uint64_t *, int);
static int	lm_batch_runs(struct lsm *, const struct ixdoc *, size_t,
		    char **);
static const struct brun *lm_brun(const struct lsm *, unsigned);
static int	l1_read(struct lsm *, MDB_txn *, unsigned, unsigned,
		    char **);
static int	l1_read_runs(struct lsm *, MDB_txn *, MDB_dbi, unsigned,
		    unsigned, int, char **);
static size_t	next_pending(const struct lsm *, size_t);
static int	lsm_keys_held(const struct lsm *, const uint64_t *);
static size_t	lsm_bucket_l1(const struct lsm *, uint64_t, struct u64vec *,
		    size_t);


/*
 * Set up the band index of an index opened (its LMDB side db), with its
 * documents' bands, read-only or not, and a memtable budget of memtable
 * bytes (0: the default).
 */
void
lsm_init(struct lsm *ls, struct lmstore *db, unsigned bands, int rdonly,
    size_t memtable)
{
	ls->db = db;
	ls->bands = bands;
	ls->rdonly = rdonly;
	ls->snap_sweep = UINT64_MAX;
	ls->mt = memtable_create(!rdonly);
	ls->mt_max = (memtable ? memtable : MEMTABLE_DEFAULT) /
	    sizeof(struct bentry);
	if (ls->mt_max < 1024)
		ls->mt_max = 1024;
	/*
	 * Eight times what a sweep adds to a chunk (see run_young), and
	 * a run out of its leaf page: rewriting one in a leaf costs little.
	 */
	ls->young_min = (size_t)(8 * (ls->mt_max / 2) / BAND_CHUNKS);
	if (ls->young_min < db->inline_max / L1E_SIZE)
		ls->young_min = db->inline_max / L1E_SIZE;
}

/*
 * Documents have another number of bands from now on: an index with none
 * yet, given an export's parameters (lmdb_adopt).
 */
void
lsm_set_bands(struct lsm *ls, unsigned bands)
{
	ls->bands = bands;
}

/* Free what lsm_init and the batches since allocated. */
void
lsm_free(struct lsm *ls)
{
	if (ls->db == NULL)
		return;			/* never set up */
	lsm_snap_end(ls);
	buf_free(&ls->rec);
	buf_free(&ls->chunk);
	buf_free(&ls->ychunk);
	free(ls->ysorted);
	memtable_free(ls->mt);
	free(ls->held);
	u64vec_free(&ls->keyset);
	u64vec_free(&ls->keysort);
	free(ls->keybits);
	free(ls->rbuf);
	free(ls->wholes);
	free(ls->bruns);
	u64vec_free(&ls->bchunks);
	free(ls->probe);
	free(ls->fbuf);
	free(ls->pend);
	free(ls->l0count);
	free(ls->merged);
	free(ls->sorted);
	free(ls->l1map);
}

/*
 * At the start of a transaction (the backend's, in db): take the band
 * state at, as meta has it, and the next document number next_doc, and
 * empty the memtable if another process (or none yet) made it; lsm_hold
 * reads l0 back as batches need it.  INDEX_ERROR if an earlier read of l0
 * in this process found entries of no document.
 */
int
lsm_load(struct lsm *ls, const struct lsmstate *at, uint64_t next_doc,
    char **cause)
{
	ls->npend = ls->nmerged = 0;
	ls->l1valid = ls->bvalid = 0;
	ls->batch = NULL;		/* until lsm_prepare */
	ls->nbatch = 0;
	ls->next_doc = next_doc;
	if (!ls->loaded || at->sweep != ls->committed.sweep ||
	    at->l0_next != ls->committed.l0_next) {
		lsm_snap_end(ls);		/* l1 moved under it */
		ls->committed.sweep = at->sweep;
		ls->committed.l0_next = at->l0_next;
		lsm_forget(ls);
		ls->loaded = 1;
	} else
		lsm_unkey(ls);		/* the last batch's keys */
	ls->committed.l1_entries = at->l1_entries;
	ls->tx = ls->committed;
	if (ls->l0_bad > 0) {
		xasprintf(cause, "index %s is damaged: %" PRIu64 " band "
		    "entries in l0 are not of a document below next_doc (run "
		    "--check)", ls->db->path, ls->l0_bad);
		return (INDEX_ERROR);
	}
	return (0);
}

/* Have the next lsm_load empty the memtable: read it again from l0. */
void
lsm_unload(struct lsm *ls)
{
	ls->loaded = 0;
}

/* The band state, as committed and as the transaction has it. */
void
lsm_position(const struct lsm *ls, struct lsmstate *committed,
    struct lsmstate *tx)
{
	*committed = ls->committed;
	*tx = ls->tx;
}

/*
 * A document's band keys, added by the transaction: to the memtable now
 * (or, deferred, at lsm_undefer), and to l0 at its commit (lsm_flush).
 */
void
lsm_add(struct lsm *ls, const uint64_t *keys, uint64_t docid)
{
	unsigned	 j;

	if (ls->npend + ls->bands > ls->pendsize) {
		ls->pendsize = 2 * (ls->npend + ls->bands);
		ls->pend = xreallocarray(ls->pend, ls->pendsize,
		    sizeof *ls->pend);
	}
	for (j = 0; j < ls->bands; j++) {
		if (!ls->defer)
			memtable_add(ls->mt, keys[j], docid);
		ls->pend[ls->npend].key = keys[j];
		ls->pend[ls->npend++].docid = docid;
	}
	if (docid >= ls->next_doc)
		ls->next_doc = docid + 1;
}

/*
 * While other threads read the memtable and l1 map (lsm_peek), the
 * transaction's additions wait: lsm_add keeps them in pend only, and an
 * insert whose keys would have the memtable read more of l0
 * (lsm_hold_keys) has that wait too.  lsm_undefer, once those threads are
 * done, makes both, in the order lsm_add saw them and then the read (an
 * lsm_hold puts back the transaction's additions it drops: lsm_unkey).
 * lsm_candidates, lsm_flush and lsm_commit need them made first.
 */
void
lsm_defer(struct lsm *ls)
{
	if (ls->defer)
		return;
	ls->defer = 1;
	ls->deferred = ls->npend;
	ls->defer_hold = 0;
}

/* Make what lsm_defer had wait.  0, or an INDEX_* code (lsm_hold's). */
int
lsm_undefer(struct lsm *ls, char **cause)
{
	size_t	 i, ahead = 4 * (size_t)ls->bands;

	if (!ls->defer)
		return (0);
	ls->defer = 0;
	/*
	 * The buckets' loads start a few documents ahead, as the writer's
	 * do for its inserts (lsm_add_prefetch).
	 */
	for (i = ls->deferred; i < ls->npend; i++) {
		if (i + ahead < ls->npend)
			memtable_prefetch_add(ls->mt, ls->pend[i + ahead].key,
			    0);
		if (i + ahead / 2 < ls->npend)
			memtable_prefetch_add(ls->mt,
			    ls->pend[i + ahead / 2].key, 1);
		memtable_add(ls->mt, ls->pend[i].key, ls->pend[i].docid);
	}
	if (ls->defer_hold) {
		ls->defer_hold = 0;
		return (lsm_hold(ls, 0, 1, cause));
	}
	return (0);
}

/*
 * The transaction committed (durable): keep its additions, and forget
 * what the sweep merged.
 */
void
lsm_commit(struct lsm *ls)
{
	memtable_commit(ls->mt);
	ls->undo_stale = 0;
	while (ls->nmerged > 0)
		memtable_drop(ls->mt, ls->merged[--ls->nmerged]);
	ls->npend = 0;
	ls->committed = ls->tx;
}

/* The transaction aborted: take its additions back. */
void
lsm_abort(struct lsm *ls)
{
	ls->l1valid = ls->bvalid = 0;
	if (ls->mt != NULL && ls->undo_stale)
		lsm_forget(ls);		/* lsm_unkey */
	else if (ls->mt != NULL)
		memtable_rollback(ls->mt);
	ls->undo_stale = 0;
	ls->npend = ls->nmerged = 0;
	ls->defer = ls->defer_hold = 0;
	ls->tx = ls->committed;
}

/*
 * The backend's transactions were given up unended (the fault guard
 * caught a fault in one): forget the snapshot too, unended.
 */
void
lsm_lost(struct lsm *ls)
{
	ls->snap = NULL;
	ls->l1valid = ls->bvalid = 0;
}

/* The memtable's budget in bytes (--memtable, at least 1,024 entries). */
size_t
lsm_budget(const struct lsm *ls)
{
	return (ls->mt_max * sizeof(struct bentry));
}

/* The entries the memtable holds. */
uint64_t
lsm_held_entries(const struct lsm *ls)
{
	return (memtable_entries(ls->mt));
}

/*
 * Empty the memtable, to be read back from l0 by chunk as batches need it
 * (lsm_hold).  Rebuilding the whole of it on open, up to --memtable of
 * entries, would be most of the time and memory of a small run (100
 * records touch 1,600 chunks of 16,384), and so would an undo record for
 * each entry.
 */
static void
lsm_forget(struct lsm *ls)
{
	if (memtable_entries(ls->mt) > 0)
		memtable_clear(ls->mt);	/* a new one is empty: leave it */
	if (ls->held == NULL)
		ls->held = xmalloc(BAND_CHUNKS);
	memset(ls->held, 0, BAND_CHUNKS);
	ls->unheld = UNCOUNTED;
	ls->reads = 0;
	ls->nwant = 0;
	ls->keyset.n = 0;
}

/*
 * Drop what the memtable holds for a batch's keys only (MT_KEYS), and
 * forget what it was to read so (MT_WANTKEYS): before another batch, with
 * other keys, or a read of all of l0.  A writer's additions in the chunks
 * dropped are in no l0 record yet (they are this transaction's, pend):
 * they go back into the memtable, for the read of all of l0 that follows
 * (lsm_hold) to complete their chunks, and as memtable_rollback could no
 * longer take back exactly the additions, an abort empties the memtable
 * (undo_stale).  At the start of a transaction there are none.
 */
static void
lsm_unkey(struct lsm *ls)
{
	size_t		 i, before;
	unsigned	 c;

	if (ls->held == NULL || ls->keyset.n == 0)
		return;
	before = memtable_entries(ls->mt);
	for (c = 0; c < BAND_CHUNKS; c++) {
		if (ls->held[c] == MT_KEYS)
			memtable_drop(ls->mt, c);
		if (ls->held[c] == MT_WANTKEYS)
			ls->nwant--;
		if (ls->held[c] >= MT_KEYS)
			ls->held[c] = MT_NONE;
	}
	for (i = 0; i < ls->npend; i++) {
		if (ls->held[band_chunk(ls->pend[i].key)] != MT_NONE)
			continue;	/* its chunk is held whole */
		memtable_load(ls->mt, ls->pend[i].key, ls->pend[i].docid);
		ls->undo_stale = 1;
	}
	if (ls->unheld != UNCOUNTED)
		ls->unheld += before - memtable_entries(ls->mt);
	ls->keyset.n = 0;
}

/*
 * The entries of an l0 window that no document can have made: zeroed or
 * random bytes (document 0, or one not yet numbered).
 */
uint64_t
l0_bad_entries(const unsigned char *w, size_t m, uint64_t next_doc)
{
	uint64_t	 docid, bad = 0;
	size_t		 i;

	for (i = 0; i < m; i++) {
		docid = get_le64(w + BENTRY_SIZE * i + 8);
		bad += docid == 0 || docid >= next_doc;
	}
	return (bad);
}

/*
 * The sweep position an l0 record's header h was written at, and in
 * *sorted (when not NULL) whether its entries are in l0_sort's order.
 */
static uint64_t
l0_written(const unsigned char *h, int *sorted)
{
	uint64_t	 w = get_le64(h);

	if (sorted != NULL)
		*sorted = (w & L0_SORTED) != 0;
	return (w & ~(L0_SORTED | L0_FILTERED));
}

/*
 * The layout of the l0 record p of size bytes, from its header (read with
 * lm_pread): a filtered one's (l0f_parse), or an older one's, its entries
 * after an 8-byte header and no filter (l->nb 0).  Sets *written and
 * *sorted (l0_written).  0, or -1 if its sizes do not agree (damage).
 */
int
l0_record(struct lsm *ls, const unsigned char *p, size_t size,
    struct l0layout *l, uint64_t *written, int *sorted)
{
	const unsigned char	*h;

	if (size < L0_HEADER)
		return (-1);
	h = lm_pread(ls, p, size < L0F_HEADER ? L0_HEADER : L0F_HEADER);
	*written = l0_written(h, sorted);
	if (get_le64(h) & L0_FILTERED)
		return (*sorted && size >= L0F_HEADER ? l0f_parse(h, size, l) :
		    -1);
	if ((size - L0_HEADER) % BENTRY_SIZE != 0)
		return (-1);
	l0_layout_plain((size - L0_HEADER) / BENTRY_SIZE, l);
	return (0);
}

/*
 * The first of the n entries at p of an l0 record in l0_sort's order for
 * wm that the sweep has not merged, passed chunks on: the first whose
 * l0_offset is passed or more.  One lm_pread of the entries around where
 * it should be (l0_window) finds it all but rarely; else a bisection,
 * each key read with lm_pread: 16 of them for a batch of 4,000 records,
 * for each of the 42 records of l0 at a million documents, were a quarter
 * of a small run's preads.
 */
static size_t
l0_live_from(struct lsm *ls, const unsigned char *p, size_t n, unsigned wm,
    uint64_t passed)
{
	const unsigned char	*w;
	size_t			 lo = 0, hi = n, mid, from, m, at;

	m = l0_window(n, passed, run_window_len(n, L0_WINDOW), &from);
	w = lm_pread(ls, p + from * BENTRY_SIZE, m * BENTRY_SIZE);
	if (l0_live_window(w, from, m, n, wm, passed, &at))
		return (at);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l0_offset(get_le64(lm_pread(ls, p + mid * BENTRY_SIZE, 8)),
		    wm) < passed)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo);
}

/*
 * Read entries [i, n) of the l0 record whose entries are at e into the
 * memtable (memtable_read_log), L0_WINDOW at a time.
 */
static void
l0_read_entries(struct lsm *ls, const unsigned char *e, size_t i, size_t n,
    struct l0read *r)
{
	const unsigned char	*w;
	size_t			 m;

	for (; i < n; i += m) {
		m = n - i < L0_WINDOW ? n - i : L0_WINDOW;
		w = lm_pread(ls, e + i * BENTRY_SIZE, m * BENTRY_SIZE);
		memtable_read_log(ls->mt, w, m, r);
	}
}

/*
 * Before a pass over l0 that is not of all of it: can filtered records be
 * read by their filters (1)?  Notes the chunks to be read whole or held
 * whole (whose groups are read), and the keys held or to be read by key,
 * with their filter masks.  Not when so many chunks are whole that most
 * groups would be read anyway.
 */
static int
l0_filter_setup(struct lsm *ls)
{
	size_t		 i;
	unsigned	 c;

	ls->nwholes = 0;
	for (c = 0; c < BAND_CHUNKS; c++) {
		if (ls->held[c] != MT_ALL && ls->held[c] != MT_WANT)
			continue;
		if (ls->nwholes == L0_WHOLES_MAX)
			return (0);
		if (ls->wholes == NULL)
			ls->wholes = xreallocarray(NULL, L0_WHOLES_MAX,
			    sizeof *ls->wholes);
		ls->wholes[ls->nwholes++] = c;
	}
	if (ls->keyset.n > ls->probesize) {
		ls->probesize = ls->keyset.n;
		ls->probe = xreallocarray(ls->probe, ls->probesize,
		    sizeof *ls->probe);
	}
	ls->nprobe = 0;
	for (i = 0; i < ls->keyset.n; i++) {
		c = band_chunk(ls->keyset.v[i]);
		if (ls->held[c] != MT_KEYS && ls->held[c] != MT_WANTKEYS)
			continue;
		ls->probe[ls->nprobe].key = ls->keyset.v[i];
		l0f_mask(ls->keyset.v[i], ls->probe[ls->nprobe++].m);
	}
	return (1);
}

#define GMARK(g)	(ls->gmark[(g) / 8] |= 1U << ((g) % 8))
#define GMARKED(g)	(ls->gmark[(g) / 8] >> ((g) % 8) & 1)

/*
 * lsm_read's pass over a filtered l0 record p of layout l (index format
 * 8), r as for memtable_read_log: read only the groups of chunks the
 * sweep has not passed that hold a key of the batch's whose filter bits
 * are all set (l0f_probe), or a chunk to be read or held whole, and the
 * group where the entries not merged begin; count the entries of the
 * others in r->others as a read would.  The directory, the filter's
 * blocks of the chunks not passed and those groups, with a pread each
 * (where the map's address is known): at a million documents, 2 MB of
 * l0's 15 MB not merged for a small batch.  0, or -1 if its directory is
 * damaged.
 */
static int
l0_read_filtered(struct lsm *ls, const unsigned char *p,
    const struct l0layout *l, struct l0read *r)
{
	const unsigned char	*f;
	size_t			 G = (size_t)1 << l->gbits, g, b, i, b0, len;
	unsigned		 shift = BAND_CHUNK_BITS - l->gbits, o;

	if (l0f_dir_read(lm_pread(ls, p + l->dir, 4 * (G + 1)), l,
	    ls->dir) != 0)
		return (-1);
	memset(ls->gmark, 0, G / 8 + 1);
	GMARK(r->passed >> shift);
	for (i = 0; i < ls->nwholes; i++) {
		o = (ls->wholes[i] - r->wm) & (BAND_CHUNKS - 1);
		if (o >= r->passed)
			GMARK(o >> shift);
	}
	if (ls->nprobe > 0) {
		b0 = l0f_first_block(r->passed, l->nb);
		len = (l->nb - b0) * L0F_BLOCK;
		if (len > ls->fbufsize) {
			ls->fbufsize = len;
			ls->fbuf = xreallocarray(ls->fbuf, len, 1);
		}
		f = lm_pread_to(ls->db, p + l->filter + b0 * L0F_BLOCK, len,
		    ls->fbuf);
		l0f_probe(f, b0, l, r->wm, r->passed, ls->probe, ls->nprobe,
		    ls->gmark);
	}
	for (g = r->passed >> shift; g < G; g = b) {
		for (b = g; b < G && GMARKED(b); b++)
			;
		if (b > g) {
			l0_read_entries(ls, p + l->entries, ls->dir[g],
			    ls->dir[b], r);
			continue;
		}
		r->others += ls->dir[g + 1] - ls->dir[g];
		b = g + 1;
	}
	return (0);
}

/*
 * Read into the memtable, from l0 as txn has it, the entries of the chunks
 * marked 2 in held (all those not held, with all) that the sweep has not
 * passed since their record was written, and count the entries of the
 * chunks still not held.  Records from l0_next on are the transaction's
 * own (lsm_flush), in the memtable already.  Only chunks with no entries
 * in the memtable are read, so memtable_rollback still takes back exactly
 * the transaction's additions.
 */
static int
lsm_read(struct lsm *ls, MDB_txn *txn, int all, char **cause)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	const unsigned char	*p;
	struct l0read		 r;
	struct l0layout		 l;
	uint64_t		 written;
	size_t			 i, n;
	unsigned		 c;
	int			 rc, sorted, filtered;

	memset(&r, 0, sizeof r);
	r.state = ls->held;
	r.keys = ls->keyset.v;
	r.nkeys = ls->keyset.n;
	r.bits = ls->keybits;
	r.all = all;
	r.next_doc = ls->next_doc;
	ls->l0_bad = 0;
	filtered = !all && l0_filter_setup(ls);
	if ((rc = mdb_cursor_open(txn, ls->db->l0, &cur)) != 0)
		return (lm_fail(ls->db, rc, "reading l0", cause));
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		p = v.mv_data;
		if (k.mv_size == 8 &&
		    get_be64(k.mv_data) >= ls->committed.l0_next) {
			rc = MDB_NOTFOUND;
			break;
		}
		lm_findmap(ls->db, p);
		/* Read whole (a writer's first read): its seal checked. */
		if (k.mv_size != 8 || lm_unseal(ls->db, SEAL_L0,
		    get_be64(k.mv_data), &v, all) != 0 ||
		    l0_record(ls, p, v.mv_size, &l, &written, &sorted) != 0)
			goto damaged;
		if (written > ls->committed.sweep)
			written = ls->committed.sweep;
		r.passed = ls->committed.sweep - written;
		if (r.passed >= BAND_CHUNKS)
			continue;
		r.wm = (unsigned)(written % BAND_CHUNKS);
		if (l.nb > 0 && filtered) {
			if (l0_read_filtered(ls, p, &l, &r) != 0)
				goto damaged;
			continue;
		}
		n = l.n;
		i = sorted ? l0_live_from(ls, p + l.entries, n, r.wm,
		    r.passed) : 0;
		l0_read_entries(ls, p + l.entries, i, n, &r);
	}
	mdb_cursor_close(cur);
	ls->l0_bad = r.bad;
	if (rc != MDB_NOTFOUND) {
		ls->loaded = 0;
		return (lm_fail(ls->db, rc, "reading l0", cause));
	}
	if (ls->l0_bad > 0) {
		ls->loaded = 0;
		xasprintf(cause, "index %s is damaged: %" PRIu64 " band "
		    "entries in l0 are not of a document below next_doc (run "
		    "--check)", ls->db->path, ls->l0_bad);
		return (INDEX_ERROR);
	}
	if (all) {
		free(ls->held);
		ls->held = NULL;
		ls->unheld = 0;
		return (0);
	}
	for (c = 0; c < BAND_CHUNKS && ls->nwant > 0; c++) {
		if (ls->held[c] == MT_WANT || ls->held[c] == MT_WANTKEYS) {
			ls->held[c] = ls->held[c] == MT_WANT ? MT_ALL :
			    MT_KEYS;
			ls->nwant--;
		}
	}
	ls->unheld = r.others;
	ls->reads++;
	return (0);

damaged:
	mdb_cursor_close(cur);
	ls->loaded = 0;			/* half read: empty it next time */
	if (k.mv_size == 8)
		xasprintf(cause, "index %s is damaged: l0 record %" PRIu64
		    " is corrupt (run --check)", ls->db->path,
		    get_be64(k.mv_data));
	else
		xasprintf(cause, "index %s is damaged: an l0 key is corrupt "
		    "(run --check)", ls->db->path);
	return (INDEX_ERROR);
}

/*
 * A small run reads little of the map, but what it touches counts in its
 * RSS: the page cache's 64 KB around each fault (fault-around), or the
 * whole folio, up to 2 MB, where the page cache holds large folios.  A
 * pass over the 32 MB of l0 at a million documents added 46 MB to a run of
 * 10 MB, and the 1,600 lookups of 100 records 150 MB.  So those read with
 * pread (lm_pread).  (Reading l0 in place and then taking its pages out of
 * the page tables with MADV_DONTNEED was 10% faster with large folios but
 * 3 to 6% slower with small ones, the only ones that ext4 has under Debian
 * 12's kernel, 6.1.)  pread needs the map's address: LMDB does not give
 * it (MDB_envinfo's me_mapaddr is a fixed map's only), but an overflow
 * page begins with its own number, 16 bytes before its value v.  The
 * address found is checked against the file.
 */
void
lm_findmap(struct lmstore *db, const unsigned char *v)
{
	const unsigned char	*page = v - 16;
	unsigned char		 head[64];
	MDB_envinfo		 info;
	MDB_stat		 ms;
	size_t			 pgno;

	if (db->map != NULL || mdb_env_stat(db->env, &ms) != 0 ||
	    (uintptr_t)page % ms.ms_psize != 0)
		return;		/* known, or v not in an overflow page */
	db->map = MAP_NONE;
	memcpy(&pgno, page, sizeof pgno);
	if (mdb_env_get_fd(db->env, &db->fd) != 0 ||
	    mdb_env_info(db->env, &info) != 0 ||
	    pgno == 0 || pgno > (uintptr_t)page / ms.ms_psize ||
	    pread(db->fd, head, sizeof head, (off_t)(pgno * ms.ms_psize)) !=
	    (ssize_t)sizeof head || memcmp(head, page, sizeof head) != 0)
		return;
	db->map = page - pgno * ms.ms_psize;
	db->mapsize = info.me_mapsize;
}

/*
 * The band entries not yet merged (lsm_entries), in txn, estimated from
 * the headers of l0's records while the memtable holds only some chunks
 * and the others were never counted: band keys are uniform hashes, so of a
 * record's n entries written passed chunks ago, about n * (BAND_CHUNKS -
 * passed) / BAND_CHUNKS are in chunks not passed since.  For the
 * statistics a process takes on start-up (pipeline_create), before a
 * batch has read l0 (lsm_read then counts them): counting would read all
 * of l0, up to --memtable.
 */
int
lsm_estimate(struct lsm *ls, MDB_txn *txn, uint64_t *n, char **cause)
{
	if (ls->held == NULL || ls->unheld != UNCOUNTED)
		return (lsm_entries(ls, txn, n, cause));
	*n = memtable_entries(ls->mt) + l0_estimate(ls, txn);
	return (0);
}

/* lsm_estimate's estimate of l0's entries not passed. */
static uint64_t
l0_estimate(struct lsm *ls, MDB_txn *txn)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	struct l0layout		 l;
	uint64_t		 written, passed, sum = 0;
	int			 rc, sorted;

	if (mdb_cursor_open(txn, ls->db->l0, &cur) != 0)
		return (0);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		lm_findmap(ls->db, v.mv_data);
		if (k.mv_size != 8 || lm_unseal(ls->db, SEAL_L0,
		    get_be64(k.mv_data), &v, 0) != 0 || l0_record(ls,
		    v.mv_data, v.mv_size, &l, &written, &sorted) != 0)
			continue;
		if (written > ls->committed.sweep)
			written = ls->committed.sweep;
		passed = ls->committed.sweep - written;
		if (passed < BAND_CHUNKS)
			sum += l.n * (BAND_CHUNKS - passed) / BAND_CHUNKS;
	}
	mdb_cursor_close(cur);
	return (sum);
}

/* Are the len bytes at p in the map (lm_findmap)? */
static int
lm_inmap(const struct lmstore *db, const unsigned char *p, size_t len)
{
	return (db->map != NULL && db->map != MAP_NONE && p >= db->map &&
	    (size_t)(p - db->map) <= db->mapsize &&
	    len <= db->mapsize - (size_t)(p - db->map));
}

/*
 * len bytes at p: copied with pread when p is in the map (lm_findmap),
 * else (a page of a write transaction's, or no map address) p itself.
 */
static const unsigned char *
lm_pread(struct lsm *ls, const unsigned char *p, size_t len)
{
	if (len > L0_WINDOW * BENTRY_SIZE)
		return (p);
	if (ls->rbuf == NULL)
		ls->rbuf = xmalloc(L0_WINDOW * BENTRY_SIZE);
	return (lm_pread_to(ls->db, p, len, ls->rbuf));
}

/* The same into buf, of len bytes or more. */
static const unsigned char *
lm_pread_to(struct lmstore *db, const unsigned char *p, size_t len,
    unsigned char *buf)
{
	if (!lm_inmap(db, p, len) ||
	    pread(db->fd, buf, len, p - db->map) != (ssize_t)len)
		return (p);
	return (buf);
}

/*
 * run_find on the n entries of an l1 or l1y run v that no prepared batch
 * mapped (a small batch's): a run in overflow pages is read with pread,
 * the entries around where the key should be (run_window), a short
 * window first and then a wide one (run_window_short, run_window_len),
 * unless they may not hold all of its entries.
 */
static size_t
lm_run_find(struct lsm *ls, const MDB_val *v, size_t n, uint64_t key,
    struct u64vec *out, size_t max)
{
	const unsigned char	*w, *run = v->mv_data;
	size_t			 from, m, had = out->n;
	int			 wide;

	for (wide = 0; v->mv_size >= ls->db->inline_max && wide < 2; wide++) {
		lm_findmap(ls->db, run);
		m = run_window(n, key, wide ? run_window_len(n, RUN_WINDOW) :
		    run_window_short(n, RUN_WINDOW), &from);
		w = lm_pread(ls, run + from * L1E_SIZE, m * L1E_SIZE);
		if (w == run + from * L1E_SIZE)
			break;	/* not read: the map's address unknown */
		if (run_find_window(w, from, m, n, key, out, max) == 0)
			return (out->n - had);
	}
	return (run_find(run, n, key, out, max));
}

/*
 * Have the memtable hold the chunks marked in held, and the q the sweep
 * merges next (a commit's) whole, in one pass over l0.  Past L0_READS
 * passes, or for a quarter of the chunks, it reads them all, as it did on
 * open before: a daemon's small batches would read l0 again and again.
 */
int
lsm_hold(struct lsm *ls, uint64_t q, int all, char **cause)
{
	uint64_t	 i;
	unsigned	 c;

	if (ls->held == NULL)
		return (0);
	if (all || q >= BAND_CHUNKS / 4 || ls->nwant >= BAND_CHUNKS / 4 ||
	    ls->reads >= L0_READS) {
		lsm_unkey(ls);
		return (lsm_read(ls, ls->db->txn, 1, cause));
	}
	for (i = 0; i < q; i++) {
		c = (unsigned)((ls->tx.sweep + i) % BAND_CHUNKS);
		/*
		 * A merge takes a chunk whole.  One held by keys (which the
		 * quota of lsm_prepare leaves out) has all of l0 read.
		 */
		if (ls->held[c] == MT_KEYS) {
			lsm_unkey(ls);
			return (lsm_read(ls, ls->db->txn, 1, cause));
		}
		if (ls->held[c] == MT_WANTKEYS)
			ls->held[c] = MT_WANT;
		else if (ls->held[c] == MT_NONE) {
			ls->held[c] = MT_WANT;
			ls->nwant++;
		}
	}
	if (ls->nwant == 0 && ls->unheld != UNCOUNTED)
		return (0);
	return (lsm_read(ls, ls->db->txn, 0, cause));
}

/*
 * Have the memtable hold the chunks of one record's band keys: all of
 * them if one is missing (a lookup or an insert that no lsm_prepare
 * announced: an import).  The keys of the prepared batch's record in slot
 * are held since lsm_prepare, and need no search of the key set.
 */
int
lsm_hold_keys(struct lsm *ls, size_t slot, const uint64_t *keys,
    char **cause)
{
	if (ls->held == NULL || (slot < ls->nbatch &&
	    ls->batch[slot].pending && memcmp(ls->batch[slot].keys, keys,
	    ls->bands * sizeof *keys) == 0) || lsm_keys_held(ls, keys))
		return (0);
	if (ls->defer) {
		ls->defer_hold = 1;	/* lsm_undefer reads it */
		return (0);
	}
	return (lsm_hold(ls, 0, 1, cause));
}

/* Does the memtable hold every entry of these keys (l0's included)? */
static int
lsm_keys_held(const struct lsm *ls, const uint64_t *keys)
{
	unsigned	 j, h;

	for (j = 0; ls->held != NULL && j < ls->bands; j++) {
		h = ls->held[band_chunk(keys[j])];
		if (h != MT_ALL && (h != MT_KEYS ||
		    !u64_sorted_has(ls->keyset.v, ls->keyset.n, keys[j])))
			return (0);
	}
	return (1);
}

/*
 * The band entries not yet merged: those of the memtable and, while it
 * holds only some chunks, those of the rest of l0 (counted in txn if they
 * never were).
 */
int
lsm_entries(struct lsm *ls, MDB_txn *txn, uint64_t *n, char **cause)
{
	int	 rc;

	if (ls->held != NULL && ls->unheld == UNCOUNTED &&
	    (rc = lsm_read(ls, txn, 0, cause)) != 0)
		return (rc);
	*n = memtable_entries(ls->mt) + (ls->held != NULL ? ls->unheld : 0);
	return (0);
}

/*
 * The entries of a run of size bytes stored in dbi, in *n: yrun_count's in
 * l1y, and in l1 from format 7 (padded: orun_size); whole entries in the
 * l1 of an older index (read-only).  0, or -1 for a length no run has.
 */
int
lm_run_count(const struct lmstore *db, MDB_dbi dbi, size_t size, size_t *n)
{
	if ((db->have_l1y && dbi == db->l1y) || db->format >= 7)
		return (yrun_count(size, n));
	*n = size / L1E_SIZE;
	return (size % L1E_SIZE == 0 ? 0 : -1);
}

/*
 * Chunk c's run in dbi (l1 or l1y) as the transaction has it, in *v (empty
 * when it has none; its seal taken off, and checked with verify), and its
 * entries in *n.
 */
static int
lm_run_get(struct lsm *ls, MDB_dbi dbi, unsigned c, int verify, MDB_val *v,
    size_t *n, char **cause)
{
	MDB_val		 k;
	unsigned char	 kb[4];
	int		 rc;

	chunk_key(kb, c, &k);
	rc = mdb_get(ls->db->txn, dbi, &k, v);
	if (rc == MDB_NOTFOUND) {
		v->mv_data = NULL;
		v->mv_size = 0;
		*n = 0;
		return (0);
	}
	if (rc != 0)
		return (lm_fail(ls->db, rc, "reading l1", cause));
	if (!lm_ovf_ok(ls->db, v) || lm_unseal(ls->db, dbi == ls->db->l1 ?
	    SEAL_L1 : SEAL_L1Y, c, v, verify) != 0 || lm_run_count(ls->db,
	    dbi, v->mv_size, n) != 0) {
		xasprintf(cause, "index %s is damaged: band chunk %u's %s "
		    "run is corrupt (run --check)", ls->db->path, c,
		    dbi == ls->db->l1 ? "old" : "young");
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * Replace chunk c's run in dbi, stored in oldsize bytes, by the n entries
 * in run (none: delete it), padded as yrun_size (young) or orun_size (old)
 * says, and sealed.
 */
static int
lm_run_put(struct lsm *ls, MDB_dbi dbi, unsigned c, size_t oldsize,
    const unsigned char *run, size_t n, char **cause)
{
	MDB_val		 k, v;
	unsigned char	 kb[4];
	size_t		 size = n * L1E_SIZE;
	int		 rc = 0;

	chunk_key(kb, c, &k);
	/*
	 * A run small enough to live in its leaf page (a young index's) is
	 * deleted before it is written again: LMDB merges sparse pages only
	 * when a node is deleted, and once the runs had grown into overflow
	 * pages the l1 tree kept the leaves they had filled, nearly empty,
	 * for good: 8,000 pages, 33 bytes per document at a million.
	 */
	if (oldsize > 0 && (n == 0 || oldsize < ls->db->inline_max))
		rc = mdb_del(ls->db->txn, dbi, &k, NULL);
	if (rc == 0 && n > 0) {
		v.mv_data = NULL;
		v.mv_size = (ls->db->have_l1y && dbi == ls->db->l1y ?
		    yrun_size(n) : orun_size(n)) + SEAL_SIZE;
		if ((rc = mdb_put(ls->db->txn, dbi, &k, &v,
		    MDB_RESERVE)) == 0) {
			memcpy(v.mv_data, run, size);
			memset((unsigned char *)v.mv_data + size, 0,
			    v.mv_size - SEAL_SIZE - size);
			seal_put(v.mv_data, v.mv_size - SEAL_SIZE, dbi ==
			    ls->db->l1 ? SEAL_L1 : SEAL_L1Y, c);
		}
	}
	if (rc != 0)
		return (lm_fail(ls->db, rc, "writing l1", cause));
	return (0);
}

/*
 * Merge chunk c's memtable entries into its young run, or with the young
 * run into its old one (run_young decides), leaving out entries of
 * documents below live.  Everything is read and merged before anything is
 * written: a write may move the pages the runs were read from.
 */
static int
lsm_merge(struct lsm *ls, unsigned c, uint64_t live, char **cause)
{
	MDB_val			 v, yv = { 0, NULL };
	const struct bentry	*add;
	size_t			 nadd, nold, ny, n, i;
	int			 rc;

	lm_beat();
	nadd = memtable_sorted(ls->mt, c, &ls->sorted, &ls->sortedsize);
	if (nadd == 0)
		return (0);
	ny = 0;
	/*
	 * The young run is read whole either way; the old one only when it
	 * is rewritten, and its seal is checked then (at 10 million
	 * documents, checking l1 whole at each turn of the sweep would read
	 * 1.6 GB for every 125,000 documents added).
	 */
	if ((rc = lm_run_get(ls, ls->db->l1, c, 0, &v, &nold, cause)) != 0 ||
	    (ls->db->have_l1y && (rc = lm_run_get(ls, ls->db->l1y, c, 1, &yv,
	    &ny, cause)) != 0))
		return (rc);
	ls->chunk.len = 0;
	if (ls->db->have_l1y && run_young(nold, ny, nadd, ls->young_min)) {
		buf_reserve(&ls->chunk, (ny + nadd) * L1E_SIZE);
		n = run_merge(c, yv.mv_data, ny, ls->sorted, nadd, live,
		    (unsigned char *)ls->chunk.data);
		if ((rc = lm_run_put(ls, ls->db->l1y, c, yv.mv_size,
		    (unsigned char *)ls->chunk.data, n, cause)) != 0)
			return (rc);
		nold = ny;
	} else {
		if (nold > 0 && lm_seal_check(ls->db, SEAL_L1, c, &v) != 0) {
			xasprintf(cause, "index %s is damaged: band chunk %u's "
			    "old run is corrupt (run --check)", ls->db->path,
			    c);
			return (INDEX_ERROR);
		}
		add = ls->sorted;
		if (ny > 0) {
			/* The young run and the new entries, as one list. */
			buf_reserve(&ls->ychunk, (ny + nadd) * L1E_SIZE);
			nadd = run_merge(c, yv.mv_data, ny, ls->sorted, nadd,
			    live, (unsigned char *)ls->ychunk.data);
			if (nadd > ls->ysortedsize) {
				ls->ysortedsize = nadd;
				ls->ysorted = xreallocarray(ls->ysorted, nadd,
				    sizeof *ls->ysorted);
			}
			for (i = 0; i < nadd; i++)
				l1_get((unsigned char *)ls->ychunk.data, i, c,
				    &ls->ysorted[i]);
			add = ls->ysorted;
		}
		buf_reserve(&ls->chunk, (nold + nadd) * L1E_SIZE);
		n = run_merge(c, nold ? v.mv_data : NULL, nold, add, nadd,
		    live, (unsigned char *)ls->chunk.data);
		if ((ny > 0 && (rc = lm_run_put(ls, ls->db->l1y, c, yv.mv_size,
		    NULL, 0, cause)) != 0) || (rc = lm_run_put(ls, ls->db->l1,
		    c, v.mv_size, (unsigned char *)ls->chunk.data, n,
		    cause)) != 0)
			return (rc);
		nold += ny;
	}
	ls->tx.l1_entries += n;
	ls->tx.l1_entries -= nold < ls->tx.l1_entries ? nold :
	    ls->tx.l1_entries;
	return (0);
}

/*
 * At commit: log the transaction's entries to l0, advance the sweep by the
 * chunks it is owed, and delete the l0 records it has gone round.  The
 * merges leave out the entries of documents below live, the oldest one
 * held.  The backend then records the new position (lsm_position) in
 * meta, in the same transaction.
 */
int
lsm_flush(struct lsm *ls, uint64_t live, char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	struct l0layout	 l;
	unsigned char	 kb[8];
	uint64_t	 q, i;
	int		 rc;

	ls->l1valid = ls->bvalid = 0;	/* the sweep rewrites l1 */
	if ((rc = lsm_repack(ls, cause)) != 0)
		return (rc);
	if (ls->npend > 0) {
		if (ls->l0count == NULL)
			ls->l0count = xcalloc(BAND_CHUNKS + 1,
			    sizeof *ls->l0count);
		ls->rec.len = 0;
		l0f_layout(ls->npend, &l);
		buf_reserve(&ls->rec, l.size);
		l0f_write(ls->pend, ls->tx.sweep, ls->l0count, &l,
		    (unsigned char *)ls->rec.data);
		put_be64(kb, ls->tx.l0_next);
		k.mv_data = kb;
		k.mv_size = sizeof kb;
		if ((rc = lm_put_sealed(ls->db, ls->db->l0, NULL, SEAL_L0, &k,
		    ls->rec.data, l.size)) != 0)
			return (lm_fail(ls->db, rc, "writing l0", cause));
		ls->tx.l0_next++;
		/* A whole sweep per half budget of new entries. */
		ls->tx.quota += (double)BAND_CHUNKS * ls->npend /
		    (ls->mt_max / 2);
	}
	q = (uint64_t)ls->tx.quota;
	ls->tx.quota -= q;
	if ((rc = lsm_hold(ls, q, 0, cause)) != 0)
		return (rc);
	if (memtable_entries(ls->mt) + (ls->held ? ls->unheld : 0) >
	    ls->mt_max)
		q += BAND_CHUNKS / 64;	/* over budget: catch up */
	if (q > BAND_CHUNKS)
		q = BAND_CHUNKS;
	if ((rc = lsm_hold(ls, q, 0, cause)) != 0)
		return (rc);
	if (q > 0) {
		/*
		 * Document numbers start at 1: below 1 nothing is removed,
		 * and with live 0 run_merge copies runs in spans.
		 */
		if (live <= 1)
			live = 0;
		if (ls->nmerged + q > ls->mergedsize) {
			ls->mergedsize = ls->nmerged + q;
			ls->merged = xreallocarray(ls->merged, ls->mergedsize,
			    sizeof *ls->merged);
		}
		for (i = 0; i < q; i++) {
			unsigned c = ls->tx.sweep % BAND_CHUNKS;

			if ((rc = lsm_merge(ls, c, live, cause)) != 0)
				return (rc);
			ls->merged[ls->nmerged++] = c;
			ls->tx.sweep++;
		}
		/* l0 records the sweep has gone all the way round. */
		if ((rc = mdb_cursor_open(ls->db->txn, ls->db->l0, &cur)) != 0)
			return (lm_fail(ls->db, rc, "reading l0", cause));
		while ((rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST)) == 0) {
			if (!lm_ovf_ok(ls->db, &v)) {
				rc = MDB_CORRUPTED;
				break;
			}
			if (v.mv_size < L0_HEADER || ls->tx.sweep -
			    l0_written(v.mv_data, NULL) < BAND_CHUNKS)
				break;
			if ((rc = mdb_cursor_del(cur, 0)) != 0)
				break;
		}
		mdb_cursor_close(cur);
		if (rc != 0 && rc != MDB_NOTFOUND)
			return (lm_fail(ls->db, rc, "trimming l0", cause));
	}
	return (0);
}

/*
 * Rewrite l1's tree with full leaves, once every run has grown out of them.
 *
 * Why.  Each lookup of a small run reads a leaf page of l1 through the map
 * (the run itself it reads with pread), and the fault maps the page cache
 * around that page into the process: 64 KB, or the whole folio.  While the
 * runs were small they filled the leaves a few each, and the tree split
 * accordingly; grown into overflow pages, they leave a pointer each in the
 * leaves, 22 bytes, but LMDB merges a leaf only when a deletion leaves it
 * under a quarter full.  At a million documents l1 kept 436 leaves where 89
 * hold its 16,384 pointers, and 100 records' lookups faulted in 425 of
 * them: 35 MB of RSS against 16 MB with the leaves full.
 *
 * How.  At the start of a commit, before the sweep writes anything of l1
 * (whose pages are then those of an earlier commit, in the map): note each
 * run, empty l1 (mdb_drop gives its pages to later transactions: this one
 * cannot reuse them, so the runs stay where they were, readable), and put
 * the runs back in key order with MDB_APPEND, which leaves each leaf full.
 * Nothing stored changes but where.  The pointers keep their size through
 * later merges, so the leaves stay full.  The commit holds the rewritten
 * runs in memory until it writes them, so only an l1 up to L1_REPACK_MAX is
 * repacked: the moment its last run leaves the leaves, l1 is about 64 MB
 * (16,384 runs of a page; with the default --memtable, at about 210,000
 * documents, the chunk the sweep is about to reach lagging most),
 * whatever the parameters.  A larger l1 (an index that grew past that
 * under format 6 or older, before this repacking) keeps its tree.
 * A look that finds a run still in a leaf (a cursor pass up to it) is
 * not made again until the sweep has passed a sixteenth of the chunks.
 */
static int
lsm_repack(struct lsm *ls, char **cause)
{
	MDB_stat	 st;
	MDB_cursor	*cur;
	MDB_val		*runs, k, v;
	size_t		 per, dense, n = 0, i;
	int		 rc;

	if (ls->tx.sweep < ls->repack_at || ls->db->psize <= 16)
		return (0);
	if ((rc = mdb_stat(ls->db->txn, ls->db->l1, &st)) != 0)
		return (lm_fail(ls->db, rc, "reading l1", cause));
	per = (ls->db->psize - 16) / L1_NODE;
	dense = (st.ms_entries + per - 1) / per;
	/* (Fewer overflow pages than runs: some still in a leaf.) */
	if (st.ms_leaf_pages <= 2 * dense + 1 ||
	    st.ms_overflow_pages < st.ms_entries ||
	    (uint64_t)st.ms_overflow_pages * ls->db->psize > L1_REPACK_MAX)
		return (0);
	ls->repack_at = ls->tx.sweep + BAND_CHUNKS / 16;
	runs = xreallocarray(NULL, st.ms_entries, 2 * sizeof *runs);
	if ((rc = mdb_cursor_open(ls->db->txn, ls->db->l1, &cur)) != 0) {
		free(runs);
		return (lm_fail(ls->db, rc, "reading l1", cause));
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		/* A run still in its leaf, or damage: not now. */
		if (n == st.ms_entries || k.mv_size != 4 ||
		    !lm_overflow(ls->db, &v) || !lm_ovf_ok(ls->db, &v))
			break;
		runs[2 * n] = k;
		runs[2 * n++ + 1] = v;
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND || n != st.ms_entries) {
		free(runs);
		return (rc == 0 || rc == MDB_NOTFOUND ? 0 :
		    lm_fail(ls->db, rc, "reading l1", cause));
	}
	lm_long(1);
	rc = mdb_drop(ls->db->txn, ls->db->l1, 0);
	lm_long(0);
	for (i = 0; rc == 0 && i < n; i++) {
		v.mv_size = runs[2 * i + 1].mv_size;
		rc = mdb_put(ls->db->txn, ls->db->l1, &runs[2 * i], &v,
		    MDB_APPEND | MDB_RESERVE);
		if (rc == 0)
			memcpy(v.mv_data, runs[2 * i + 1].mv_data, v.mv_size);
	}
	free(runs);
	if (rc != 0)
		return (lm_fail(ls->db, rc, "repacking l1", cause));
	log_debug("index %s: l1 repacked at document %" PRIu64 ": %zu runs "
	    "in %zu overflow pages, from %zu leaf pages into %zu",
	    ls->db->path, ls->next_doc, n, (size_t)st.ms_overflow_pages,
	    (size_t)st.ms_leaf_pages, dense);
	/* The snapshot would hold the old pages back from reuse. */
	lsm_snap_end(ls);
	return (0);
}

/*
 * Append to out the documents sharing each of the b band keys, once for
 * each band they share with the query (so the count of a document is its
 * number of shared bands), at most BUCKET_MAX per band.
 */
int
lsm_candidates(struct lsm *ls, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	size_t		 next;
	unsigned	 j;
	int		 rc;

	if ((rc = lsm_hold_keys(ls, slot, keys, cause)) != 0)
		return (rc);
	/*
	 * A lookup is a few cache misses (see run_prefetch), started early
	 * so that they overlap: all of this record's at once, and those of
	 * the next records of the batch while this one is verified.
	 */
	if (ls->l1valid && (slot == INDEX_NOSLOT || slot != ls->ahead)) {
		lsm_prefetch(ls, keys, 0);
		lsm_prefetch(ls, keys, 1);
	}
	for (j = 0; j < ls->bands; j++) {
		if ((rc = lsm_bucket(ls, keys[j], out,
		    BUCKET_MAX)) != 0)
			return (lm_fail(ls->db, rc, "band lookup", cause));
	}
	if (ls->l1valid && slot != INDEX_NOSLOT && slot < ls->nbatch) {
		if ((next = next_pending(ls, slot)) < ls->nbatch) {
			lsm_prefetch(ls, ls->batch[next].keys, 1);
			ls->ahead = next;
			if ((next = next_pending(ls, next)) < ls->nbatch)
				lsm_prefetch(ls, ls->batch[next].keys, 0);
		}
	}
	return (0);
}

/*
 * lsm_candidates for another thread, which may run beside others between
 * lsm_prepare and the batch's first lsm_add: the memtable and the l1 runs
 * as lsm_prepare left them are only read.  Into *most the most entries one
 * key had (BUCKET_MAX: some left out).  0, or 1 when this batch's lookups
 * are not all in memory (a small batch reads its runs with pread into the
 * lsm's buffer; keys not held have l0 read): the caller then looks up in
 * its own thread.
 */
int
lsm_peek(const struct lsm *ls, const uint64_t *keys, struct u64vec *out,
    size_t *most)
{
	size_t		 got;
	unsigned	 j;

	if (!ls->l1valid || !lsm_keys_held(ls, keys))
		return (1);
	*most = 0;
	for (j = 0; j < ls->bands; j++) {
		if ((got = lsm_bucket_l1(ls, keys[j], out, BUCKET_MAX)) >
		    *most)
			*most = got;
	}
	return (0);
}

/* lsm_prefetch for lsm_peek's caller: the lookups it will make next. */
void
lsm_peek_prefetch(const struct lsm *ls, const uint64_t *keys, int stage)
{
	if (ls->l1valid)
		lsm_prefetch(ls, keys, stage);
}

/* The same for lsm_add of these keys: where their entries go. */
void
lsm_add_prefetch(const struct lsm *ls, const uint64_t *keys, int stage)
{
	unsigned	 j;

	for (j = 0; j < ls->bands; j++)
		memtable_prefetch_add(ls->mt, keys[j], stage);
}

/*
 * Start loading what the lookups of these band keys will read: stage 0
 * the memtable bucket headers and l1map entries, stage 1 what they point
 * to (see run_prefetch).
 */
static void
lsm_prefetch(const struct lsm *ls, const uint64_t *keys, int stage)
{
	const struct l1ref	*l;
	unsigned		 j;

	for (j = 0; j < ls->bands; j++) {
		memtable_prefetch(ls->mt, keys[j], stage);
		l = &ls->l1map[band_chunk(keys[j])];
		if (stage == 0)
			MHF_PREFETCH(l);
		else {
			run_prefetch(l->run, l->n, keys[j]);
			run_prefetch(l->yrun, l->yn, keys[j]);
		}
	}
}

/* The prepared batch's first record looked up after slot, or nbatch. */
static size_t
next_pending(const struct lsm *ls, size_t slot)
{
	for (slot++; slot < ls->nbatch && !ls->batch[slot].pending; slot++)
		;
	return (slot);
}

/*
 * The documents under one band key: memtable, then l1's old and young runs
 * (so that l1's are in document order, as in one run), at most max of
 * them.  Returns an LMDB error.
 */
int
lsm_bucket(struct lsm *ls, uint64_t key, struct u64vec *out,
    size_t max)
{
	const struct brun *b;
	MDB_dbi		 dbi;
	MDB_val		 k, v;
	unsigned char	 kb[4];
	unsigned	 c;
	size_t		 got, n;
	int		 rc, i;

	if (ls->l1valid) {
		lsm_bucket_l1(ls, key, out, max);
		return (0);
	}
	got = memtable_find(ls->mt, key, out, max);
	c = band_chunk(key);
	if (ls->bvalid && (b = lm_brun(ls, c)) != NULL) {
		if (b->run.mv_data != NULL)
			got += lm_run_find(ls, &b->run, b->n, key, out,
			    max - got);
		if (b->yrun.mv_data != NULL)
			lm_run_find(ls, &b->yrun, b->yn, key, out, max - got);
		return (0);
	}
	chunk_key(kb, c, &k);
	for (i = 0; i < 1 + ls->db->have_l1y; i++) {
		dbi = i == 0 ? ls->db->l1 : ls->db->l1y;
		rc = mdb_get(ls->db->txn, dbi, &k, &v);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc != 0)
			return (rc);
		if (lm_unseal(ls->db, i == 0 ? SEAL_L1 : SEAL_L1Y, c, &v,
		    0) != 0 || lm_run_count(ls->db, dbi, v.mv_size, &n) != 0)
			return (MDB_CORRUPTED);
		got += lm_run_find(ls, &v, n, key, out, max - got);
	}
	return (0);
}

/*
 * lsm_bucket once l1map is this transaction's: the memtable, then the old
 * and young runs, at most max; how many.  Only reads.
 */
static size_t
lsm_bucket_l1(const struct lsm *ls, uint64_t key, struct u64vec *out,
    size_t max)
{
	const struct l1ref	*l = &ls->l1map[band_chunk(key)];
	size_t			 got;

	got = memtable_find(ls->mt, key, out, max);
	got += run_find(l->run, l->n, key, out, max - got);
	got += run_find(l->yrun, l->yn, key, out, max - got);
	return (got);
}

/*
 * Find the runs of a small batch's chunks (lsm_prepare) with one cursor
 * a database, in chunk order: LMDB looks for a key in the leaf the cursor
 * is on before it searches from the root, and the 1,500 chunks of 100
 * records fall in some 90 leaves at a million documents, whose lines are
 * then in the processor's cache.  One mdb_get a lookup, from the root
 * each time, was 0.3 microseconds each, a quarter of what such a batch
 * spent in the index.
 */
static int
lm_batch_runs(struct lsm *ls, const struct ixdoc *docs, size_t n,
    char **cause)
{
	MDB_cursor	*cur;
	MDB_dbi		 dbi;
	MDB_val		 k, v;
	unsigned char	 kb[4];
	size_t		 i, cnt;
	unsigned	 j, y;
	int		 rc;

	ls->bchunks.n = 0;
	for (i = 0; i < n; i++)
		for (j = 0; docs[i].pending && j < ls->bands; j++)
			u64vec_push(&ls->bchunks, band_chunk(docs[i].keys[j]));
	u64_sort_unique(&ls->bchunks, &ls->keysort);
	if (ls->bchunks.n > ls->brunsize) {
		ls->brunsize = ls->bchunks.n;
		ls->bruns = xreallocarray(ls->bruns, ls->brunsize,
		    sizeof *ls->bruns);
	}
	if (ls->bchunks.n == 0)
		return (0);		/* nothing to look up: none pending */
	memset(ls->bruns, 0, ls->bchunks.n * sizeof *ls->bruns);
	for (y = 0; y < 1U + ls->db->have_l1y; y++) {
		dbi = y ? ls->db->l1y : ls->db->l1;
		if ((rc = mdb_cursor_open(ls->db->txn, dbi, &cur)) != 0)
			return (lm_fail(ls->db, rc, "reading l1", cause));
		for (i = 0; i < ls->bchunks.n; i++) {
			chunk_key(kb, (unsigned)ls->bchunks.v[i], &k);
			rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY);
			if (rc == MDB_NOTFOUND)
				continue;
			if (rc == 0 && (lm_unseal(ls->db, y ? SEAL_L1Y :
			    SEAL_L1, ls->bchunks.v[i], &v, 0) != 0 ||
			    lm_run_count(ls->db, dbi, v.mv_size, &cnt) != 0))
				rc = MDB_CORRUPTED;
			if (rc != 0) {
				mdb_cursor_close(cur);
				return (lm_fail(ls->db, rc, "reading l1",
				    cause));
			}
			if (y) {
				ls->bruns[i].yrun = v;
				ls->bruns[i].yn = cnt;
			} else {
				ls->bruns[i].run = v;
				ls->bruns[i].n = cnt;
			}
		}
		mdb_cursor_close(cur);
	}
	ls->bvalid = 1;
	return (0);
}

/* The runs of chunk c of the prepared small batch, or NULL if not one. */
static const struct brun *
lm_brun(const struct lsm *ls, unsigned c)
{
	size_t	 lo = 0, hi = ls->bchunks.n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ls->bchunks.v[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < ls->bchunks.n && ls->bchunks.v[lo] == c ?
	    &ls->bruns[lo] : NULL);
}

/*
 * Before a batch's lookups: when the batch has enough band keys to touch
 * most chunks (1,000 records with 16 bands touch about 60% of them), read
 * where every chunk's l1 run is in one cursor pass, so that a lookup needs
 * no B-tree search.  l1 changes only at commit (the sweep), so the runs
 * stay where they are until then.
 */
int
lsm_prepare(struct lsm *ls, const struct ixdoc *docs, size_t n,
    char **cause)
{
	size_t		 i, keys = 0;
	uint64_t	 q = 0;
	unsigned	 c, j;
	int		 rc, whole;

	for (i = 0; i < n; i++)
		keys += docs[i].pending ? ls->bands : 0;
	/* So many keys touch most chunks: lsm_hold reads all of l0. */
	whole = keys >= BAND_CHUNKS / 4;
	for (i = 0; i < n && !whole; i++) {
		if (!docs[i].pending)
			continue;
		for (j = 0; ls->held != NULL && j < ls->bands; j++) {
			c = band_chunk(docs[i].keys[j]);
			if (ls->held[c] == MT_NONE) {
				ls->held[c] = MT_WANTKEYS;
				ls->nwant++;
			}
			if (ls->held[c] == MT_WANTKEYS)
				u64vec_push(&ls->keyset, docs[i].keys[j]);
		}
	}
	u64_sort_unique(&ls->keyset, &ls->keysort);
	if (ls->keyset.n > 0) {
		if (ls->keybits == NULL)
			ls->keybits = xcalloc(KEYSET_BITS / 64,
			    sizeof *ls->keybits);
		memset(ls->keybits, 0, KEYSET_BITS / 8);
		for (i = 0; i < ls->keyset.n; i++)
			ls->keybits[KEYSET_BIT(ls->keyset.v[i]) / 64] |=
			    1ULL << KEYSET_BIT(ls->keyset.v[i]) % 64;
	}
	ls->batch = docs;
	ls->nbatch = n;
	ls->ahead = INDEX_NOSLOT;
	ls->l1valid = ls->bvalid = 0;
	/*
	 * The entries of the batch's keys, and (a writer's) the chunks its
	 * commit merges, whole: the sweep's quota for every key the batch
	 * may insert, and its catch-up should the memtable go over budget
	 * (lsm_flush), or should it be unknown yet.
	 */
	if (!(ls->rdonly)) {
		q = (uint64_t)(ls->tx.quota + (double)BAND_CHUNKS * keys /
		    (ls->mt_max / 2));
		if (ls->held != NULL && (ls->unheld == UNCOUNTED ||
		    memtable_entries(ls->mt) + ls->unheld + keys >
		    ls->mt_max))
			q += BAND_CHUNKS / 64;
	}
	if ((rc = lsm_hold(ls, q, whole, cause)) != 0)
		return (rc);
	if (!whole)
		return (lm_batch_runs(ls, docs, n, cause));
	if (ls->l1map == NULL)
		ls->l1map = xcalloc(BAND_CHUNKS, sizeof *ls->l1map);
	/*
	 * A new snapshot when the sweep has rewritten too much of the old.
	 * A read-only run's own transaction is one already; and should a
	 * snapshot not begin (no reader slot free), read this transaction's
	 * l1 whole, as before snapshots.
	 */
	if (ls->rdonly ||
	    (ls->snap != NULL &&
	    ls->committed.sweep - ls->snap_sweep > SNAP_CHUNKS))
		lsm_snap_end(ls);
	if (ls->snap == NULL && !(ls->rdonly) &&
	    mdb_txn_begin(ls->db->env, NULL, MDB_RDONLY, &ls->snap) != 0)
		ls->snap = NULL;
	if (ls->snap == NULL) {
		if ((rc = l1_read(ls, ls->db->txn, 0, BAND_CHUNKS, cause)) != 0)
			return (rc);
		ls->l1valid = 1;
		return (0);
	}
	if (ls->snap_sweep == UINT64_MAX) {	/* a new snapshot */
		ls->snap_sweep = ls->committed.sweep;
		if ((rc = l1_read(ls, ls->snap, 0, BAND_CHUNKS, cause)) != 0) {
			lsm_snap_end(ls);
			return (rc);
		}
	}
	/* The chunks merged since, as this transaction has them. */
	c = (unsigned)(ls->snap_sweep % BAND_CHUNKS);
	i = (size_t)(ls->committed.sweep - ls->snap_sweep);
	if (c + i > BAND_CHUNKS) {
		rc = l1_read(ls, ls->db->txn, c, BAND_CHUNKS, cause);
		if (rc == 0)
			rc = l1_read(ls, ls->db->txn, 0, c + i - BAND_CHUNKS,
			    cause);
	} else
		rc = l1_read(ls, ls->db->txn, c, c + i, cause);
	if (rc != 0)
		return (rc);
	ls->l1valid = 1;
	return (0);
}

/*
 * Point l1map[from, to) at the runs, old and young, of those chunks that
 * txn sees, in one cursor pass over each database (a chunk without a run
 * gets none).
 */
static int
l1_read(struct lsm *ls, MDB_txn *txn, unsigned from, unsigned to,
    char **cause)
{
	int	 rc;

	if (from >= to)
		return (0);
	memset(ls->l1map + from, 0, (to - from) * sizeof *ls->l1map);
	rc = l1_read_runs(ls, txn, ls->db->l1, from, to, 0, cause);
	if (rc == 0 && ls->db->have_l1y)
		rc = l1_read_runs(ls, txn, ls->db->l1y, from, to, 1, cause);
	return (rc);
}

/* l1_read's pass over one database: l1 (young 0) or l1y (1). */
static int
l1_read_runs(struct lsm *ls, MDB_txn *txn, MDB_dbi dbi, unsigned from,
    unsigned to, int young, char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	const unsigned char *kb;
	unsigned char	 fb[4];
	unsigned	 c;
	size_t		 n;
	int		 rc;

	if ((rc = mdb_cursor_open(txn, dbi, &cur)) != 0)
		return (lm_fail(ls->db, rc, "reading l1", cause));
	chunk_key(fb, from, &k);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		if (k.mv_size != 4)
			break;
		kb = k.mv_data;
		c = (unsigned)kb[0] << 24 | kb[1] << 16 | kb[2] << 8 | kb[3];
		if (c >= BAND_CHUNKS || lm_unseal(ls->db, young ? SEAL_L1Y :
		    SEAL_L1, c, &v, 0) != 0 || lm_run_count(ls->db, dbi,
		    v.mv_size, &n) != 0)
			break;
		if (c >= to) {
			rc = MDB_NOTFOUND;	/* past the range: done */
			break;
		}
		if (young) {
			ls->l1map[c].yrun = v.mv_data;
			ls->l1map[c].yn = n;
		} else {
			ls->l1map[c].run = v.mv_data;
			ls->l1map[c].n = n;
		}
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND) {
		if (rc == 0) {
			xasprintf(cause, "index %s is damaged: l1 is corrupt "
			    "(run --check)", ls->db->path);
			return (INDEX_ERROR);
		}
		return (lm_fail(ls->db, rc, "reading l1", cause));
	}
	return (0);
}

/*
 * End the l1 snapshot.  Before anything that needs no transaction of this
 * process open (a map resize: lm_resize), and when l1 changed otherwise
 * than by this process's sweep (another process's commits).
 */
void
lsm_snap_end(struct lsm *ls)
{
	if (ls->snap != NULL)
		mdb_txn_abort(ls->snap);
	ls->snap = NULL;
	ls->snap_sweep = UINT64_MAX;	/* l1map holds nothing of it */
	ls->l1valid = ls->bvalid = 0;
}

/* The l1 key of chunk c, in kb. */
void
chunk_key(unsigned char *kb, unsigned c, MDB_val *k)
{
	kb[0] = c >> 24;
	kb[1] = c >> 16;
	kb[2] = c >> 8;
	kb[3] = c;
	k->mv_data = kb;
	k->mv_size = 4;
}
