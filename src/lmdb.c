/*
 * The index: an LMDB environment (a directory with data.mdb and lock.mdb).
 * This is the only file that talks to LMDB.
 *
 * Eight named databases, format 8 (groups below):
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
 * A batch's lookups: lmdb_prepare finds where every chunk's l1 run is (a
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
 * Each lookup is then a few cache misses, so lmdb_candidates starts the
 * loads of the next records' lookups (lmdb_prefetch) while the caller
 * verifies this one's candidates: a pipeline two records deep, bucket
 * headers first, then the buckets and the lines of each run where the key
 * should be.
 *
 * Why not a B-tree of band keys.  Band keys are uniform hashes, so in a
 * B-tree every insertion lands on a different leaf page: a batch of 1,000
 * documents with 16 bands dirties ~16,000 pages once the tree is large,
 * and a commit writes them all (64 MB for 1,000 documents).  Format 1 did
 * that and slowed from 5,000 to 2,700 records/s between 100k and 300k
 * documents.  Formats 2 to 6 are a log-structured merge instead:
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
 *
 * Writes happen in one write transaction per batch (index_begin ...
 * index_commit), band merges included, so a crash leaves either all of a
 * batch or none of it; the caller writes a batch's verdicts only after its
 * commit, so whatever was reported unique is on disk.  LMDB serialises
 * write transactions between processes; a process that finds another's
 * commits since its own (the band state in meta moved) empties its
 * memtable, to be read back from l0 the same way.  When the map is full the transaction
 * fails with MDB_MAP_FULL: index_abort then doubles the map and the caller
 * redoes the batch (INDEX_AGAIN).
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

#define MEMTABLE_DEFAULT (64ULL << 20)
#define BUCKET_MAX	1024	/* entries read from one band bucket */
#define SNAP_CHUNKS	(BAND_CHUNKS / 16)	/* see lmdb_prepare */
#define MAP_DEFAULT	(1ULL << 30)
#define L0_READS	8	/* partial reads of l0, then a whole one */
#define UNCOUNTED	UINT64_MAX
#define L0_WINDOW	4096	/* l0 entries read at a time (lsm_read) */
#define RUN_WINDOW	4096	/* l1 entries read for a lookup, at most */
#define L0_WHOLES_MAX	(BAND_CHUNKS / 8)	/* see l0_filter_setup */
#define MAP_NONE	((const unsigned char *)UINTPTR_MAX)
#define L1_REPACK_MAX	(128ULL << 20)	/* l1 repacked in one commit, at most */
#define L1_NODE		22	/* a leaf's pointer to an overflow run */
#define OWNERS_FILE	"owners.lock"	/* see "Several writers" */

/*
 * What the memtable holds of a chunk's l0 entries (lmdb's held).  A batch
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

/* The band index's position, in meta; committed, and a transaction's. */
struct lsmstate {
	uint64_t	 sweep;		/* chunks merged, ever */
	uint64_t	 l0_next;	/* next l0 record */
	uint64_t	 l1_entries;
	double		 quota;		/* chunks owed to the sweep */
};

struct lmdb {
	struct index	 base;		/* first: what index.c sees */
	int		 format;	/* as opened (3 to 7 read-only, else 8) */
	MDB_env		*env;
	MDB_dbi		 meta;
	MDB_dbi		 docs;
	MDB_dbi		 texts;
	MDB_dbi		 times;
	MDB_dbi		 l0;
	MDB_dbi		 l1;
	MDB_dbi		 l1y;
	int		 have_l1y;	/* l1y exists (read-only: may not) */
	MDB_dbi		 groups;
	int		 have_groups;	/* groups exists (read-only: may not) */
	size_t		 inline_max;	/* larger values go to overflow pages */
	MDB_txn		*txn;
	uint64_t	 next_doc;
	uint64_t	 start_doc;	/* next_doc when the txn began */
	int		 map_full;	/* grow the map on abort */
	int64_t		 now;
	uint32_t	*sig;		/* decoded signature for index_doc */
	struct buf	 rec;		/* scratch for records */
	struct textenc	*enc;

	/* The band index: committed state, and the transaction's. */
	struct memtable	*mt;
	int		 loaded;	/* mt matches the committed state */
	unsigned char	*held;		/* by chunk (MT_*); NULL: all held */
	struct u64vec	 keyset;	/* a batch's keys, sorted */
	struct u64vec	 keysort;	/* sort_u64's scratch for it */
	uint64_t	*keybits;	/* their KEYSET_BIT bits */
	uint64_t	 unheld;	/* l0 entries of the others, or
					   UNCOUNTED */
	unsigned	 reads;		/* partial reads of l0 since emptied */
	size_t		 nwant;		/* chunks marked 2 in held */
	int		 undo_stale;	/* lsm_unkey dropped additions: an
					   abort empties the memtable */
	unsigned char	*rbuf;		/* for lm_pread: L0_WINDOW entries */
	unsigned	*wholes;	/* l0_filter_setup: chunks held or
					   read whole */
	size_t		 nwholes;
	struct l0key	*probe;		/* and the keys to test, with masks */
	size_t		 nprobe;
	size_t		 probesize;
	unsigned char	*fbuf;		/* a record's filter blocks */
	size_t		 fbufsize;
	uint32_t	 dir[(1U << L0F_GBITS_MAX) + 1];	/* its directory */
	unsigned char	 gmark[(1U << L0F_GBITS_MAX) / 8 + 1];
	const unsigned char *map;	/* the map's address: NULL not known
					   yet, MAP_NONE not found */
	size_t		 mapsize;
	int		 fd;		/* of the data file, or -1 */
	struct lsmstate	 lsm;		/* as committed */
	struct lsmstate	 tx;		/* as the transaction has it */
	uint64_t	 mt_max;	/* memtable budget, entries */
	struct bentry	*pend;		/* entries added in this txn */
	size_t		 npend, pendsize;
	size_t		*l0count;	/* l0_sort's scratch */
	unsigned	*merged;	/* chunks merged in this txn */
	size_t		 nmerged, mergedsize;
	struct bentry	*sorted;	/* scratch for merges */
	size_t		 sortedsize;
	struct buf	 chunk;		/* scratch for merges */
	struct buf	 ychunk;	/* a young run merged, encoded */
	struct bentry	*ysorted;	/* and decoded */
	size_t		 ysortedsize;
	size_t		 young_min;	/* run_young's min */
	struct l1ref	*l1map;		/* BAND_CHUNKS, from lmdb_prepare */
	int		 l1valid;	/* l1map is this txn's l1 */
	struct u64vec	 bchunks;	/* a small batch's chunks, sorted, */
	struct brun	*bruns;		/* and their runs (lmdb_prepare) */
	size_t		 brunsize;
	int		 bvalid;	/* bruns are this batch's */
	MDB_txn		*snap;		/* read-only: where l1map points */
	uint64_t	 snap_sweep;	/* sweep when snap was read */
	const struct ixdoc *batch;	/* the prepared batch, for prefetch */
	size_t		 nbatch;
	size_t		 ahead;		/* its slot whose loads are started */
	uint64_t	 l0_bad;	/* damaged l0 entries read (lsm_read) */
	int		 walked;	/* lm_walk found every page sound */
	size_t		 psize;		/* the page size, for lm_ovf_ok */
	uint64_t	 repack_at;	/* sweep of lsm_repack's next look */

	/* Delivery marks for the next commit (lm_undelivered_apply). */
	struct u64vec	 dranges;	/* [first, end) pairs delivered */
	struct u64vec	 dreplays;	/* earlier documents written again */
	struct u64vec	 aranges;	/* [first, end) pairs abandoned */

	/* This process's own, in memory ("Several writers"). */
	struct u64vec	 mine;		/* [first, end) pairs it committed */
	uint64_t	 owner;		/* of its undelivered ranges, or 0 */
	int		 owner_new;	/* taken in the open transaction */
	int		 ofd;		/* owners.lock, or -1 */
};

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

static int	lmdb_exists(const char *, uint64_t *);
static int	lmdb_open(struct index **, const char *, int,
		    struct index_params *, int, char **);
static void	lmdb_close(struct index *);
static int	lmdb_begin(struct index *, char **);
static int	lmdb_prepare(struct index *, const struct ixdoc *, size_t,
		    char **);
static int	lmdb_commit(struct index *, char **);
static void	lmdb_abort(struct index *);
static int	lmdb_undelivered(struct index *, uint64_t, char **);
static void	lmdb_delivered(struct index *, const uint64_t *, size_t,
		    const uint64_t *, size_t);
static void	lmdb_abandoned(struct index *, const uint64_t *, size_t);
static int	lmdb_info(struct index *, struct index_info *, char **);
static int	lmdb_text(struct index *, uint64_t, struct buf *, char **);
static int	lmdb_insert(struct index *, size_t, const uint64_t *,
		    const uint32_t *, const char *, size_t, const char *,
		    size_t, const char *, size_t, int, int64_t, char **);
static int	lm_fail(struct lmdb *, int, const char *, char **);
static int	lm_meta_get(struct lmdb *, const char *, char *, size_t);
static int	lm_meta_put(struct lmdb *, const char *, const char *);
static int	lm_meta_create(struct lmdb *, char **);
static int	lm_meta_check(struct lmdb *, int, int, char **);
static int	lmdb_upgrade(struct lmdb *, int, int *, char **);
static int	lm_foreign(struct lmdb *);
static int	lm_get(struct lmdb *, MDB_dbi, uint64_t, MDB_val *);
static int	lm_txn(struct lmdb *, unsigned, MDB_txn **);
static int	lm_meta_u64(struct lmdb *, const char *, uint64_t *, char **);
static int	lsm_load(struct lmdb *, char **);
static void	lsm_forget(struct lmdb *);
static int	lsm_read(struct lmdb *, MDB_txn *, int, char **);
static void	lm_findmap(struct lmdb *, const unsigned char *);
static const unsigned char *lm_pread(struct lmdb *, const unsigned char *,
		    size_t);
static const unsigned char *lm_pread_to(struct lmdb *,
		    const unsigned char *, size_t, unsigned char *);
static size_t	lm_run_find(struct lmdb *, const MDB_val *, size_t, uint64_t,
		    struct u64vec *, size_t);
static int	lsm_hold(struct lmdb *, uint64_t, int, char **);
static int	lsm_hold_keys(struct lmdb *, size_t, const uint64_t *, char **);
static void	lsm_unkey(struct lmdb *);
static int	lsm_entries(struct lmdb *, MDB_txn *, uint64_t *, char **);
static uint64_t	lsm_estimate(struct lmdb *, MDB_txn *);
static int	lm_run_get(struct lmdb *, MDB_dbi, unsigned, MDB_val *,
		    size_t *, char **);
static int	lm_run_put(struct lmdb *, MDB_dbi, unsigned, size_t,
		    const unsigned char *, size_t, char **);
static int	lsm_merge(struct lmdb *, unsigned, uint64_t, char **);
static int	lsm_flush(struct lmdb *, char **);
static int	lsm_repack(struct lmdb *, char **);
static int	lm_first_doc(struct lmdb *, uint64_t *, char **);
static void	chunk_key(unsigned char *, unsigned, MDB_val *);
static int	lm_bucket(struct lmdb *, uint64_t, struct u64vec *,
		    size_t);
static void	lmdb_prefetch(struct lmdb *, const uint64_t *, int);
static int	lm_batch_runs(struct lmdb *, const struct ixdoc *, size_t,
		    char **);
static const struct brun *lm_brun(const struct lmdb *, unsigned);
static int	l1_read(struct lmdb *, MDB_txn *, unsigned, unsigned,
		    char **);
static int	l1_read_runs(struct lmdb *, MDB_txn *, MDB_dbi, unsigned,
		    unsigned, int, char **);
static void	snap_end(struct lmdb *);
static size_t	next_pending(const struct lmdb *, size_t);
static int	lm_undelivered_find(struct lmdb *, uint64_t, uint64_t *,
		    uint64_t *, uint64_t *, char **);
static int	lm_undelivered_apply(struct lmdb *, char **);
struct checking;
static void	check_undelivered(struct lmdb *, struct checking *);
static int	lmdb_own(struct index *, uint64_t);
static void	lm_own_add(struct lmdb *);
static void	lm_owner_release(struct lmdb *);
static void	guard_install(void);
static int	lmdb_check(struct index *, FILE *, uint64_t *, char **);
static int	lm_walk(struct lmdb *, char **);
static int	lm_ovf_ok(struct lmdb *, const MDB_val *);
static int	lm_overflow(struct lmdb *, const MDB_val *);
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
static int
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
static int
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
static int
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
 * Bring an older index to format 8 inside the open transaction.  Format 2
 * kept l1 in 16-byte entries: every run is rewritten (l1_upgrade), which a
 * read-only open cannot do, and says so.  Format 3 differs from 4 only in
 * that its texts are never LZ4, format 4 from 5 only in that it has no
 * young runs (l1y), format 5 from 6 only in that no young run is padded
 * (yrun_size) and no l0 record sorted (l0_sort), format 6 from 7 only in
 * that no old run is padded (orun_size), and format 7 from 8 only in that
 * no l0 record has a filter (l0f_write): reading any of them is reading
 * format 8, and a writable open only writes the new "format" record (l1y
 * is created by the open; the sweep pads a run when it next rewrites it;
 * l0's older records go as it passes them), so that an older mhfilter
 * refuses the index instead of finding texts it cannot decode, missing the
 * band entries of young runs, taking a padded run for damage, or a sorted
 * or filtered l0 record's header for a sweep position.  Sets *format to
 * the format lm_meta_check is to expect.
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
	    strcmp(stored, "6") != 0 && strcmp(stored, "7") != 0))
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
	if ((rc = lm_meta_put(ix, "format", stored)) != 0)
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
static int
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
	ix->mt = memtable_create(!(flags & INDEX_RDONLY));
	if (lsm_load(ix, cause) != 0) {
		rv = INDEX_ERROR;
		goto fail;
	}
	/*
	 * Commit even a read-only transaction: LMDB closes the database
	 * handles opened in a transaction that is aborted.
	 */
	if ((rc = mdb_txn_commit(ix->txn)) != 0) {
		ix->txn = NULL;
		rv = INDEX_ERROR;
		lm_fail(ix, rc, "commit", cause);
		goto fail;
	}
	ix->txn = NULL;
	ix->base.run_doc = ix->next_doc;

	ix->sig = xcalloc(ix->base.p.perms, sizeof *ix->sig);
	ix->mt_max = (p->memtable ? p->memtable : MEMTABLE_DEFAULT) /
	    sizeof(struct bentry);
	if (ix->mt_max < 1024)
		ix->mt_max = 1024;
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
static int
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
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0) {
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

/*
 * Is value v in an overflow page of the map (1), not on its leaf page or a
 * dirty page (0)?  A big value starts right after the 16-byte header of
 * its first page, where no value on a leaf page can (see lm_ovf_ok).
 */
static int
lm_overflow(struct lmdb *ix, const MDB_val *v)
{
	const unsigned char	*p = v->mv_data;
	size_t			 off;

	lm_findmap(ix, p);
	if (ix->map == NULL || ix->map == MAP_NONE || ix->psize == 0 ||
	    p < ix->map)
		return (0);
	off = (size_t)(p - (const unsigned char *)ix->map);
	return (off < ix->mapsize && off % ix->psize == 16);
}

/*
 * Is the overflow page header of value v sound (1), or is v on its leaf
 * page (1 too)?  Freeing a value's overflow pages (a deletion, a rewrite)
 * trusts the page count in that header: a damaged one corrupts LMDB's free
 * list and its heap.  LMDB 0.9's page layout (MDB_DATA_VERSION 1): a
 * 16-byte header, the page number, then the flags (P_OVERFLOW 0x04) and
 * the number of pages at bytes 10 and 12; a big value starts right after
 * it, where no value on a leaf page can.  Values of this transaction's
 * dirty pages are outside the map, and not checked.
 */
static int
lm_ovf_ok(struct lmdb *ix, const MDB_val *v)
{
	const unsigned char	*p = v->mv_data;
	uint64_t		 pgno;
	uint32_t		 pages;
	uint16_t		 flags;
	size_t			 off;

	/* (A dirty page may lie past the map, at any offset.) */
	if (!lm_overflow(ix, v))
		return (1);
	off = (size_t)(p - (const unsigned char *)ix->map);
	p -= 16;
	memcpy(&pgno, p, sizeof pgno);
	memcpy(&flags, p + 10, sizeof flags);
	memcpy(&pages, p + 12, sizeof pages);
	return (pgno == off / ix->psize && (flags & 0x04) &&
	    pages == (16 + v->mv_size + ix->psize - 1) / ix->psize);
}

/*
 * The B-tree structure under the cursor walk (lm_walk, --check): LMDB
 * trusts what a page says of itself, and a deletion's rebalancing copies
 * nodes by the sizes it finds there, so a flipped bit in a node size or a
 * page's bounds, which a cursor reads past unharmed, corrupts LMDB's heap
 * in the write that follows (of 150 copies of a 20,000-document index with
 * 8 flipped bits, --expire aborted on 3).  So every page reachable from the
 * snapshot's roots is read with pread (no fault to catch) and checked
 * against LMDB 0.9's layout (MDB_DATA_VERSION 1, as lm_ovf_ok): its own
 * number, its kind, its bounds, each node inside it, each child and
 * overflow run inside the file and reached once, and the free list's page
 * numbers likewise.  A swapped or duplicated page fails its own number.
 */
#define PG_HDR		16	/* page header: number, pad, flags, bounds */
#define PG_BRANCH	0x01
#define PG_LEAF		0x02
#define PG_OVERFLOW	0x04
#define ND_HDR		8	/* node header: size, flags, key size */
#define ND_BIGDATA	0x01
#define ND_SUBDATA	0x02
#define DB_SIZE		48	/* MDB_db: md_depth at 6, md_root at 40 */
#define META_DBS	40	/* MDB_meta's mm_dbs in its page */
#define META_LAST	136	/* mm_last_pg */
#define META_TXNID	144	/* mm_txnid */
#define PG_INVALID	UINT64_MAX
#define PG_DEPTH_MAX	32

/* What lm_pages walks with, and where it found a problem. */
struct pagewalk {
	int		 fd;
	size_t		 psize;
	uint64_t	 last;		/* the snapshot's last page */
	unsigned char	*seen;		/* pages reached, a bit each */
	unsigned char	*page[PG_DEPTH_MAX];	/* one buffer per level */
	char		 why[128];
};

/* Read 16-bit and 64-bit little-endian numbers of a page. */
static uint16_t
pw_u16(const unsigned char *p)
{
	return ((uint16_t)(p[0] | p[1] << 8));
}

static uint64_t
pw_u64(const unsigned char *p)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return (v);
}

/* Mark pages [pgno, pgno + n) reached; -1 if one is past last or was. */
static int
pw_mark(struct pagewalk *pw, uint64_t pgno, uint64_t n, const char *what)
{
	uint64_t	 i;

	if (pgno < 2 || n == 0 || pgno > pw->last || n > pw->last - pgno + 1) {
		snprintf(pw->why, sizeof pw->why, "%s page %" PRIu64 " (%"
		    PRIu64 " pages) is outside the file's %" PRIu64, what,
		    pgno, n, pw->last + 1);
		return (-1);
	}
	for (i = pgno; i < pgno + n; i++) {
		if (pw->seen[i / 8] & (1U << (i % 8))) {
			snprintf(pw->why, sizeof pw->why, "page %" PRIu64
			    " is reached twice", i);
			return (-1);
		}
		pw->seen[i / 8] |= 1U << (i % 8);
	}
	return (0);
}

/* Read page pgno into buf: -1 if it cannot be or is not its own. */
static int
pw_read(struct pagewalk *pw, uint64_t pgno, unsigned char *buf)
{
	if (pread(pw->fd, buf, pw->psize, (off_t)(pgno * pw->psize)) !=
	    (ssize_t)pw->psize) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " cannot "
		    "be read", pgno);
		return (-1);
	}
	if (pw_u64(buf) != pgno) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " says it "
		    "is page %" PRIu64, pgno, pw_u64(buf));
		return (-1);
	}
	return (0);
}

/* The overflow run of pgno for a value of size bytes. */
static int
pw_overflow(struct pagewalk *pw, uint64_t pgno, uint64_t size,
    unsigned char *buf)
{
	uint64_t	 n = (PG_HDR + size + pw->psize - 1) / pw->psize;

	if (pw_mark(pw, pgno, n, "overflow") != 0 || pw_read(pw, pgno,
	    buf) != 0)
		return (-1);
	if ((pw_u16(buf + 10) & PG_OVERFLOW) == 0 ||
	    (pw_u16(buf + 12) | (uint64_t)pw_u16(buf + 14) << 16) != n) {
		snprintf(pw->why, sizeof pw->why, "overflow page %" PRIu64
		    " has a bad header", pgno);
		return (-1);
	}
	return (0);
}

static int	pw_tree(struct pagewalk *, uint64_t, unsigned, unsigned,
		    int);

/* Check the free list's value v: a count, then that many page numbers. */
static int
pw_freelist(struct pagewalk *pw, const unsigned char *v, uint64_t size,
    uint64_t pgno)
{
	uint64_t	 n, i, *ids;
	int		 rc = 0;

	if (size < 8 || size % 8 != 0) {
		snprintf(pw->why, sizeof pw->why, "the free list's page %"
		    PRIu64 " has a value of %" PRIu64 " bytes", pgno, size);
		return (-1);
	}
	if (v == NULL) {	/* in an overflow run after pgno's header */
		ids = xmalloc(size);
		if (pread(pw->fd, ids, size, (off_t)(pgno * pw->psize +
		    PG_HDR)) != (ssize_t)size) {
			free(ids);
			snprintf(pw->why, sizeof pw->why, "overflow page %"
			    PRIu64 " cannot be read", pgno);
			return (-1);
		}
		v = (const unsigned char *)ids;
	} else
		ids = NULL;
	n = pw_u64(v);
	if (n != size / 8 - 1) {
		snprintf(pw->why, sizeof pw->why, "the free list's page %"
		    PRIu64 " counts %" PRIu64 " pages in %" PRIu64 " bytes",
		    pgno, n, size);
		rc = -1;
	}
	for (i = 1; rc == 0 && i <= n; i++)
		rc = pw_mark(pw, pw_u64(v + 8 * i), 1, "a free");
	free(ids);
	return (rc);
}

/*
 * Check the tree of page pgno, depth levels deep (a leaf is 1); level
 * picks the buffer.  sub: its leaves hold databases (the main one).  free:
 * its values are free lists.
 */
static int
pw_tree(struct pagewalk *pw, uint64_t pgno, unsigned depth, unsigned level,
    int kind)
{
	unsigned char	*p, *node;
	uint64_t	 size, child, root, used = 0;
	unsigned	 lower, upper, nkeys, i, off, ksize, flags, cdepth;
	int		 leaf;

	if (level >= PG_DEPTH_MAX || depth == 0) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " is too "
		    "deep", pgno);
		return (-1);
	}
	if (pw->page[level] == NULL)
		pw->page[level] = xmalloc(pw->psize);
	p = pw->page[level];
	if (pw_mark(pw, pgno, 1, "a tree") != 0 || pw_read(pw, pgno, p) != 0)
		return (-1);
	flags = pw_u16(p + 10);
	lower = pw_u16(p + 12);
	upper = pw_u16(p + 14);
	leaf = (depth == 1);
	if ((flags & (PG_BRANCH | PG_LEAF | PG_OVERFLOW)) !=
	    (leaf ? PG_LEAF : PG_BRANCH) || lower < PG_HDR || lower % 2 != 0 ||
	    upper < lower || upper > pw->psize || (!leaf && lower == PG_HDR)) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " has a bad "
		    "header", pgno);
		return (-1);
	}
	nkeys = (lower - PG_HDR) / 2;
	for (i = 0; i < nkeys; i++) {
		off = pw_u16(p + PG_HDR + 2 * i);
		if (off < upper || off > pw->psize - ND_HDR)
			goto bad;
		node = p + off;
		ksize = pw_u16(node + 6);
		size = pw_u16(node) | (uint64_t)pw_u16(node + 2) << 16;
		if (off + ND_HDR + ksize > pw->psize)
			goto bad;
		flags = pw_u16(node + 4);
		used += (ND_HDR + ksize + (!leaf ? 0 : (flags & ND_BIGDATA) ?
		    8 : size) + 1) & ~(uint64_t)1;
		if (!leaf) {
			child = size | (uint64_t)pw_u16(node + 4) << 32;
			if (pw_tree(pw, child, depth - 1, level + 1, kind) != 0)
				return (-1);
			continue;
		}
		if (flags & ND_BIGDATA) {
			if (off + ND_HDR + ksize + 8 > pw->psize ||
			    (flags & ND_SUBDATA))
				goto bad;
			child = pw_u64(node + ND_HDR + ksize);
			if (pw_overflow(pw, child, size, pw->page[0]) != 0 ||
			    (kind == 2 && pw_freelist(pw, NULL, size,
			    child) != 0))
				return (-1);
			continue;
		}
		if (off + ND_HDR + ksize + size > pw->psize)
			goto bad;
		if (kind == 2 && pw_freelist(pw, node + ND_HDR + ksize, size,
		    pgno) != 0)
			return (-1);
		if (kind == 1 && (flags & ND_SUBDATA)) {
			if (size != DB_SIZE)
				goto bad;
			cdepth = pw_u16(node + ND_HDR + ksize + 6);
			root = pw_u64(node + ND_HDR + ksize + 40);
			if (root != PG_INVALID && pw_tree(pw, root, cdepth,
			    level + 1, 0) != 0)
				return (-1);
		}
	}
	/* LMDB keeps a page's nodes packed from upper to its end. */
	if (used != pw->psize - upper) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 "'s nodes "
		    "fill %" PRIu64 " bytes of %u", pgno, used,
		    (unsigned)pw->psize - upper);
		return (-1);
	}
	return (0);
bad:
	snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " has a bad node "
	    "%u", pgno, i);
	return (-1);
}

/*
 * Check the structure of every page of txn's snapshot (above).  0, or -1
 * with where in why (of whysize bytes).
 */
static int
lm_pages(struct lmdb *ix, MDB_txn *txn, char *why, size_t whysize)
{
	struct pagewalk	 pw;
	unsigned char	 meta[2][256], *m;
	MDB_stat	 ms;
	struct stat	 sb;
	uint64_t	 txnid = mdb_txn_id(txn);
	unsigned	 i;
	int		 rc = -1;

	memset(&pw, 0, sizeof pw);
	if (mdb_env_stat(ix->env, &ms) != 0 ||
	    mdb_env_get_fd(ix->env, &pw.fd) != 0 || fstat(pw.fd, &sb) != 0) {
		snprintf(why, whysize, "its data file cannot be read");
		return (-1);
	}
	pw.psize = ms.ms_psize;
	for (i = 0; i < 2; i++) {
		if (pread(pw.fd, meta[i], sizeof meta[i], (off_t)(i *
		    pw.psize)) != (ssize_t)sizeof meta[i]) {
			snprintf(why, whysize, "meta page %u cannot be read",
			    i);
			return (-1);
		}
	}
	/* The snapshot's meta page: its transaction's, else the newer. */
	if (pw_u64(meta[0] + META_TXNID) == txnid)
		m = meta[0];
	else if (pw_u64(meta[1] + META_TXNID) == txnid)
		m = meta[1];
	else
		m = meta[pw_u64(meta[1] + META_TXNID) >
		    pw_u64(meta[0] + META_TXNID)];
	pw.last = pw_u64(m + META_LAST);
	if (pw.last < 1 || pw.last >= (uint64_t)sb.st_size / pw.psize) {
		snprintf(why, whysize, "meta page %d says its last page is %"
		    PRIu64 ", of a file of %" PRIu64 " pages", m != meta[0],
		    pw.last, (uint64_t)sb.st_size / pw.psize);
		return (-1);
	}
	pw.seen = xcalloc(pw.last / 8 + 1, 1);
	pw.page[0] = xmalloc(pw.psize);
	pw.why[0] = '\0';
	/* The free list's tree, then the main one's, with the others. */
	for (i = 0; i < 2; i++) {
		if (pw_u64(m + META_DBS + i * DB_SIZE + 40) != PG_INVALID &&
		    pw_tree(&pw, pw_u64(m + META_DBS + i * DB_SIZE + 40),
		    pw_u16(m + META_DBS + i * DB_SIZE + 6), 1,
		    i == 0 ? 2 : 1) != 0)
			break;
	}
	if (i == 2)
		rc = 0;
	else
		snprintf(why, whysize, "%s", pw.why);
	for (i = 0; i < PG_DEPTH_MAX; i++)
		free(pw.page[i]);
	free(pw.seen);
	return (rc);
}

/*
 * Read every page of the index once (INDEX_WALK, before a maintenance mode
 * writes): each database to its end, its keys in order, and the first and
 * last byte and the overflow page header (lm_ovf_ok) of each value.  LMDB
 * reads a damaged page through the fault guard, but rewriting one (a
 * deletion's rebalancing) can corrupt its heap, which aborts the process:
 * of 120 damaged copies, --expire aborted on 36 without this walk.  0, or
 * INDEX_ERROR saying damaged.
 */
static int
lm_walk(struct lmdb *ix, char **cause)
{
	MDB_dbi		 dbis[] = { 0, ix->meta, ix->docs, ix->texts, ix->times,
			    ix->l0, ix->l1, ix->l1y };
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v, prev;
	volatile unsigned char sink = 0;
	char		 why[128];
	size_t		 i;
	int		 rc;

	/* (A read transaction: LMDB walks its free list in no other.) */
	if ((rc = mdb_txn_begin(ix->env, NULL, MDB_RDONLY, &txn)) != 0)
		return (lm_fail(ix, rc, "walking the index", cause));
	if (lm_pages(ix, txn, why, sizeof why) != 0) {
		mdb_txn_abort(txn);
		xasprintf(cause, "index %s is damaged: %s (run --check; see "
		    "mhfilter(1), Damaged indexes)", ix->base.path, why);
		return (INDEX_ERROR);
	}
	for (i = 0; i < sizeof dbis / sizeof dbis[0] - !ix->have_l1y; i++) {
		if ((rc = mdb_cursor_open(txn, dbis[i], &cur)) != 0)
			break;
		prev.mv_data = NULL;
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			/* (A leaf of random bytes: its keys are in no order.) */
			if (!lm_ovf_ok(ix, &v) || (prev.mv_data != NULL &&
			    mdb_cmp(txn, dbis[i], &prev, &k) >= 0)) {
				rc = MDB_CORRUPTED;
				break;
			}
			prev = k;
			if (v.mv_size > 0)
				sink ^= ((unsigned char *)v.mv_data)[0] ^
				    ((unsigned char *)v.mv_data)[v.mv_size - 1];
		}
		mdb_cursor_close(cur);
		if (rc != MDB_NOTFOUND)
			break;
		rc = 0;
	}
	mdb_txn_abort(txn);
	(void)sink;
	if (rc != 0) {
		xasprintf(cause, "index %s is damaged: %s (run --check; see "
		    "mhfilter(1), Damaged indexes)", ix->base.path,
		    mdb_strerror(rc));
		return (INDEX_ERROR);
	}
	ix->walked = 1;
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
	rc = mdb_txn_commit(ix->txn);
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
static int
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

/*
 * At the start of a transaction: take the band state from meta, and empty
 * the memtable if another process (or none yet) made it; lsm_hold reads
 * l0 back as batches need it.
 */
static int
lsm_load(struct lmdb *ix, char **cause)
{
	uint64_t	 sweep, l0_next, l1_entries;

	if (lm_meta_u64(ix, "sweep", &sweep, cause) != 0 ||
	    lm_meta_u64(ix, "l0_next", &l0_next, cause) != 0 ||
	    lm_meta_u64(ix, "l1_entries", &l1_entries, cause) != 0)
		return (INDEX_ERROR);
	if (!ix->loaded || sweep != ix->lsm.sweep ||
	    l0_next != ix->lsm.l0_next) {
		snap_end(ix);		/* l1 moved under it */
		ix->lsm.sweep = sweep;
		ix->lsm.l0_next = l0_next;
		lsm_forget(ix);
		ix->loaded = 1;
	} else
		lsm_unkey(ix);		/* the last batch's keys */
	ix->lsm.l1_entries = l1_entries;
	ix->tx = ix->lsm;
	return (0);
}

/*
 * Empty the memtable, to be read back from l0 by chunk as batches need it
 * (lsm_hold).  A rebuild of the whole of it on open, up to --memtable of
 * entries, was most of the time and memory of a small run (100 records
 * touch 1,600 chunks of 16,384); so was the undo record of each entry.
 */
static void
lsm_forget(struct lmdb *ix)
{
	if (memtable_entries(ix->mt) > 0)
		memtable_clear(ix->mt);	/* a new one is empty: leave it */
	if (ix->held == NULL)
		ix->held = xmalloc(BAND_CHUNKS);
	memset(ix->held, 0, BAND_CHUNKS);
	ix->unheld = UNCOUNTED;
	ix->reads = 0;
	ix->nwant = 0;
	ix->keyset.n = 0;
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
lsm_unkey(struct lmdb *ix)
{
	size_t		 i, before;
	unsigned	 c;

	if (ix->held == NULL || ix->keyset.n == 0)
		return;
	before = memtable_entries(ix->mt);
	for (c = 0; c < BAND_CHUNKS; c++) {
		if (ix->held[c] == MT_KEYS)
			memtable_drop(ix->mt, c);
		if (ix->held[c] == MT_WANTKEYS)
			ix->nwant--;
		if (ix->held[c] >= MT_KEYS)
			ix->held[c] = MT_NONE;
	}
	for (i = 0; i < ix->npend; i++) {
		if (ix->held[band_chunk(ix->pend[i].key)] != MT_NONE)
			continue;	/* its chunk is held whole */
		memtable_load(ix->mt, ix->pend[i].key, ix->pend[i].docid);
		ix->undo_stale = 1;
	}
	if (ix->unheld != UNCOUNTED)
		ix->unheld += before - memtable_entries(ix->mt);
	ix->keyset.n = 0;
}

/*
 * The entries of an l0 window that no document can have made: zeroed or
 * random bytes (document 0, or one not yet numbered).
 */
static uint64_t
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
static int
l0_record(struct lmdb *ix, const unsigned char *p, size_t size,
    struct l0layout *l, uint64_t *written, int *sorted)
{
	const unsigned char	*h;

	if (size < L0_HEADER)
		return (-1);
	h = lm_pread(ix, p, size < L0F_HEADER ? L0_HEADER : L0F_HEADER);
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
l0_live_from(struct lmdb *ix, const unsigned char *p, size_t n, unsigned wm,
    uint64_t passed)
{
	const unsigned char	*w;
	size_t			 lo = 0, hi = n, mid, from, m, at;

	m = l0_window(n, passed, run_window_len(n, L0_WINDOW), &from);
	w = lm_pread(ix, p + from * BENTRY_SIZE, m * BENTRY_SIZE);
	if (l0_live_window(w, from, m, n, wm, passed, &at))
		return (at);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l0_offset(get_le64(lm_pread(ix, p + mid * BENTRY_SIZE, 8)),
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
l0_read_entries(struct lmdb *ix, const unsigned char *e, size_t i, size_t n,
    struct l0read *r)
{
	const unsigned char	*w;
	size_t			 m;

	for (; i < n; i += m) {
		m = n - i < L0_WINDOW ? n - i : L0_WINDOW;
		w = lm_pread(ix, e + i * BENTRY_SIZE, m * BENTRY_SIZE);
		memtable_read_log(ix->mt, w, m, r);
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
l0_filter_setup(struct lmdb *ix)
{
	size_t		 i;
	unsigned	 c;

	ix->nwholes = 0;
	for (c = 0; c < BAND_CHUNKS; c++) {
		if (ix->held[c] != MT_ALL && ix->held[c] != MT_WANT)
			continue;
		if (ix->nwholes == L0_WHOLES_MAX)
			return (0);
		if (ix->wholes == NULL)
			ix->wholes = xreallocarray(NULL, L0_WHOLES_MAX,
			    sizeof *ix->wholes);
		ix->wholes[ix->nwholes++] = c;
	}
	if (ix->keyset.n > ix->probesize) {
		ix->probesize = ix->keyset.n;
		ix->probe = xreallocarray(ix->probe, ix->probesize,
		    sizeof *ix->probe);
	}
	ix->nprobe = 0;
	for (i = 0; i < ix->keyset.n; i++) {
		c = band_chunk(ix->keyset.v[i]);
		if (ix->held[c] != MT_KEYS && ix->held[c] != MT_WANTKEYS)
			continue;
		ix->probe[ix->nprobe].key = ix->keyset.v[i];
		l0f_mask(ix->keyset.v[i], ix->probe[ix->nprobe++].m);
	}
	return (1);
}

#define GMARK(g)	(ix->gmark[(g) / 8] |= 1U << ((g) % 8))
#define GMARKED(g)	(ix->gmark[(g) / 8] >> ((g) % 8) & 1)

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
l0_read_filtered(struct lmdb *ix, const unsigned char *p,
    const struct l0layout *l, struct l0read *r)
{
	const unsigned char	*f;
	size_t			 G = (size_t)1 << l->gbits, g, b, i, b0, len;
	unsigned		 shift = BAND_CHUNK_BITS - l->gbits, o;

	if (l0f_dir_read(lm_pread(ix, p + l->dir, 4 * (G + 1)), l,
	    ix->dir) != 0)
		return (-1);
	memset(ix->gmark, 0, G / 8 + 1);
	GMARK(r->passed >> shift);
	for (i = 0; i < ix->nwholes; i++) {
		o = (ix->wholes[i] - r->wm) & (BAND_CHUNKS - 1);
		if (o >= r->passed)
			GMARK(o >> shift);
	}
	if (ix->nprobe > 0) {
		b0 = l0f_first_block(r->passed, l->nb);
		len = (l->nb - b0) * L0F_BLOCK;
		if (len > ix->fbufsize) {
			ix->fbufsize = len;
			ix->fbuf = xreallocarray(ix->fbuf, len, 1);
		}
		f = lm_pread_to(ix, p + l->filter + b0 * L0F_BLOCK, len,
		    ix->fbuf);
		l0f_probe(f, b0, l, r->wm, r->passed, ix->probe, ix->nprobe,
		    ix->gmark);
	}
	for (g = r->passed >> shift; g < G; g = b) {
		for (b = g; b < G && GMARKED(b); b++)
			;
		if (b > g) {
			l0_read_entries(ix, p + l->entries, ix->dir[g],
			    ix->dir[b], r);
			continue;
		}
		r->others += ix->dir[g + 1] - ix->dir[g];
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
lsm_read(struct lmdb *ix, MDB_txn *txn, int all, char **cause)
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
	r.state = ix->held;
	r.keys = ix->keyset.v;
	r.nkeys = ix->keyset.n;
	r.bits = ix->keybits;
	r.all = all;
	r.next_doc = ix->next_doc;
	ix->l0_bad = 0;
	filtered = !all && l0_filter_setup(ix);
	if ((rc = mdb_cursor_open(txn, ix->l0, &cur)) != 0)
		return (lm_fail(ix, rc, "reading l0", cause));
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		p = v.mv_data;
		if (k.mv_size == 8 && get_be64(k.mv_data) >= ix->lsm.l0_next) {
			rc = MDB_NOTFOUND;
			break;
		}
		lm_findmap(ix, p);
		if (l0_record(ix, p, v.mv_size, &l, &written, &sorted) != 0)
			goto damaged;
		if (written > ix->lsm.sweep)
			written = ix->lsm.sweep;
		r.passed = ix->lsm.sweep - written;
		if (r.passed >= BAND_CHUNKS)
			continue;
		r.wm = (unsigned)(written % BAND_CHUNKS);
		if (l.nb > 0 && filtered) {
			if (l0_read_filtered(ix, p, &l, &r) != 0)
				goto damaged;
			continue;
		}
		n = l.n;
		i = sorted ? l0_live_from(ix, p + l.entries, n, r.wm,
		    r.passed) : 0;
		l0_read_entries(ix, p + l.entries, i, n, &r);
	}
	mdb_cursor_close(cur);
	ix->l0_bad = r.bad;
	if (rc != MDB_NOTFOUND) {
		ix->loaded = 0;
		return (lm_fail(ix, rc, "reading l0", cause));
	}
	if (ix->l0_bad > 0) {
		ix->loaded = 0;
		xasprintf(cause, "index %s is damaged: %" PRIu64 " band "
		    "entries in l0 are not of a document below next_doc (run "
		    "--check)", ix->base.path, ix->l0_bad);
		return (INDEX_ERROR);
	}
	if (all) {
		free(ix->held);
		ix->held = NULL;
		ix->unheld = 0;
		return (0);
	}
	for (c = 0; c < BAND_CHUNKS && ix->nwant > 0; c++) {
		if (ix->held[c] == MT_WANT || ix->held[c] == MT_WANTKEYS) {
			ix->held[c] = ix->held[c] == MT_WANT ? MT_ALL :
			    MT_KEYS;
			ix->nwant--;
		}
	}
	ix->unheld = r.others;
	ix->reads++;
	return (0);

damaged:
	mdb_cursor_close(cur);
	ix->loaded = 0;			/* half read: empty it next time */
	xasprintf(cause, "index %s is damaged: an l0 record is corrupt (run "
	    "--check)", ix->base.path);
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
static void
lm_findmap(struct lmdb *ix, const unsigned char *v)
{
	const unsigned char	*page = v - 16;
	unsigned char		 head[64];
	MDB_envinfo		 info;
	MDB_stat		 ms;
	size_t			 pgno;

	if (ix->map != NULL || mdb_env_stat(ix->env, &ms) != 0 ||
	    (uintptr_t)page % ms.ms_psize != 0)
		return;		/* known, or v not in an overflow page */
	ix->map = MAP_NONE;
	memcpy(&pgno, page, sizeof pgno);
	if (mdb_env_get_fd(ix->env, &ix->fd) != 0 ||
	    mdb_env_info(ix->env, &info) != 0 ||
	    pgno == 0 || pgno > (uintptr_t)page / ms.ms_psize ||
	    pread(ix->fd, head, sizeof head, (off_t)(pgno * ms.ms_psize)) !=
	    (ssize_t)sizeof head || memcmp(head, page, sizeof head) != 0)
		return;
	ix->map = page - pgno * ms.ms_psize;
	ix->mapsize = info.me_mapsize;
}

/*
 * The entries of l0 the sweep has not passed, estimated from its records'
 * headers alone: band keys are uniform hashes, so of a record's n entries
 * written passed chunks ago, about n * (BAND_CHUNKS - passed) / BAND_CHUNKS
 * are in chunks not passed since.  For the statistics a process takes on
 * start-up (pipeline_create), before a batch has read l0 (lsm_read then
 * counts them): counting would read all of l0, up to --memtable.
 */
static uint64_t
lsm_estimate(struct lmdb *ix, MDB_txn *txn)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	struct l0layout		 l;
	uint64_t		 written, passed, sum = 0;
	int			 rc, sorted;

	if (mdb_cursor_open(txn, ix->l0, &cur) != 0)
		return (0);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_findmap(ix, v.mv_data);
		if (l0_record(ix, v.mv_data, v.mv_size, &l, &written,
		    &sorted) != 0)
			continue;
		passed = ix->lsm.sweep - (written < ix->lsm.sweep ? written :
		    ix->lsm.sweep);
		if (passed < BAND_CHUNKS)
			sum += l.n * (BAND_CHUNKS - passed) / BAND_CHUNKS;
	}
	mdb_cursor_close(cur);
	return (sum);
}

/* Are the len bytes at p in the map (lm_findmap)? */
static int
lm_inmap(const struct lmdb *ix, const unsigned char *p, size_t len)
{
	return (ix->map != NULL && ix->map != MAP_NONE && p >= ix->map &&
	    (size_t)(p - ix->map) <= ix->mapsize &&
	    len <= ix->mapsize - (size_t)(p - ix->map));
}

/*
 * len bytes at p: copied with pread when p is in the map (lm_findmap),
 * else (a page of a write transaction's, or no map address) p itself.
 */
static const unsigned char *
lm_pread(struct lmdb *ix, const unsigned char *p, size_t len)
{
	if (len > L0_WINDOW * BENTRY_SIZE)
		return (p);
	if (ix->rbuf == NULL)
		ix->rbuf = xmalloc(L0_WINDOW * BENTRY_SIZE);
	return (lm_pread_to(ix, p, len, ix->rbuf));
}

/* The same into buf, of len bytes or more. */
static const unsigned char *
lm_pread_to(struct lmdb *ix, const unsigned char *p, size_t len,
    unsigned char *buf)
{
	if (!lm_inmap(ix, p, len) ||
	    pread(ix->fd, buf, len, p - ix->map) != (ssize_t)len)
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
lm_run_find(struct lmdb *ix, const MDB_val *v, size_t n, uint64_t key,
    struct u64vec *out, size_t max)
{
	const unsigned char	*w, *run = v->mv_data;
	size_t			 from, m, had = out->n;
	int			 wide;

	for (wide = 0; v->mv_size >= ix->inline_max && wide < 2; wide++) {
		lm_findmap(ix, run);
		m = run_window(n, key, wide ? run_window_len(n, RUN_WINDOW) :
		    run_window_short(n, RUN_WINDOW), &from);
		w = lm_pread(ix, run + from * L1E_SIZE, m * L1E_SIZE);
		if (w == run + from * L1E_SIZE)
			break;		/* not read: the map's address unknown */
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
static int
lsm_hold(struct lmdb *ix, uint64_t q, int all, char **cause)
{
	uint64_t	 i;
	unsigned	 c;

	if (ix->held == NULL)
		return (0);
	if (all || q >= BAND_CHUNKS / 4 || ix->nwant >= BAND_CHUNKS / 4 ||
	    ix->reads >= L0_READS) {
		lsm_unkey(ix);
		return (lsm_read(ix, ix->txn, 1, cause));
	}
	for (i = 0; i < q; i++) {
		c = (unsigned)((ix->tx.sweep + i) % BAND_CHUNKS);
		/*
		 * A merge takes a chunk whole.  One held by keys (which the
		 * quota of lmdb_prepare leaves out) has all of l0 read.
		 */
		if (ix->held[c] == MT_KEYS) {
			lsm_unkey(ix);
			return (lsm_read(ix, ix->txn, 1, cause));
		}
		if (ix->held[c] == MT_WANTKEYS)
			ix->held[c] = MT_WANT;
		else if (ix->held[c] == MT_NONE) {
			ix->held[c] = MT_WANT;
			ix->nwant++;
		}
	}
	if (ix->nwant == 0 && ix->unheld != UNCOUNTED)
		return (0);
	return (lsm_read(ix, ix->txn, 0, cause));
}

/*
 * Have the memtable hold the chunks of one record's band keys: all of
 * them if one is missing (a lookup or an insert that no lmdb_prepare
 * announced: an import).  The keys of the prepared batch's record in slot
 * are held since lmdb_prepare, and need no search of the key set.
 */
static int
lsm_hold_keys(struct lmdb *ix, size_t slot, const uint64_t *keys,
    char **cause)
{
	unsigned	 j, h;

	if (ix->held == NULL || (slot < ix->nbatch &&
	    ix->batch[slot].pending && memcmp(ix->batch[slot].keys, keys,
	    ix->base.p.bands * sizeof *keys) == 0))
		return (0);
	for (j = 0; j < ix->base.p.bands; j++) {
		h = ix->held[band_chunk(keys[j])];
		if (h != MT_ALL && (h != MT_KEYS ||
		    !u64_sorted_has(ix->keyset.v, ix->keyset.n, keys[j])))
			return (lsm_hold(ix, 0, 1, cause));
	}
	return (0);
}

/*
 * The band entries not yet merged: those of the memtable and, while it
 * holds only some chunks, those of the rest of l0 (counted in txn if they
 * never were).
 */
static int
lsm_entries(struct lmdb *ix, MDB_txn *txn, uint64_t *n, char **cause)
{
	int	 rc;

	if (ix->held != NULL && ix->unheld == UNCOUNTED &&
	    (rc = lsm_read(ix, txn, 0, cause)) != 0)
		return (rc);
	*n = memtable_entries(ix->mt) + (ix->held != NULL ? ix->unheld : 0);
	return (0);
}

/* The oldest document held (next_doc when there is none). */
static int
lm_first_doc(struct lmdb *ix, uint64_t *docid, char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->txn, ix->docs, &cur)) != 0)
		return (lm_fail(ix, rc, "reading docs", cause));
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND) {
		*docid = ix->next_doc;
		return (0);
	}
	if (rc != 0 || k.mv_size != 8)
		return (lm_fail(ix, rc ? rc : MDB_CORRUPTED, "reading docs",
		    cause));
	*docid = get_be64(k.mv_data);
	return (0);
}

/*
 * The entries of a run of size bytes stored in dbi, in *n: yrun_count's in
 * l1y, and in l1 from format 7 (padded: orun_size); whole entries in the
 * l1 of an older index (read-only).  0, or -1 for a length no run has.
 */
static int
lm_run_count(const struct lmdb *ix, MDB_dbi dbi, size_t size, size_t *n)
{
	if ((ix->have_l1y && dbi == ix->l1y) || ix->format >= 7)
		return (yrun_count(size, n));
	*n = size / L1E_SIZE;
	return (size % L1E_SIZE == 0 ? 0 : -1);
}

/*
 * Chunk c's run in dbi (l1 or l1y) as the transaction has it, in *v (empty
 * when it has none), and its entries in *n.
 */
static int
lm_run_get(struct lmdb *ix, MDB_dbi dbi, unsigned c, MDB_val *v,
    size_t *n, char **cause)
{
	MDB_val		 k;
	unsigned char	 kb[4];
	int		 rc;

	chunk_key(kb, c, &k);
	rc = mdb_get(ix->txn, dbi, &k, v);
	if (rc == MDB_NOTFOUND) {
		v->mv_data = NULL;
		v->mv_size = 0;
		*n = 0;
		return (0);
	}
	if (rc != 0)
		return (lm_fail(ix, rc, "reading l1", cause));
	if (lm_run_count(ix, dbi, v->mv_size, n) != 0 || !lm_ovf_ok(ix, v)) {
		xasprintf(cause, "index %s is damaged: band chunk %u is "
		    "corrupt (run --check)", ix->base.path, c);
		return (INDEX_ERROR);
	}
	return (0);
}

/*
 * Replace chunk c's run in dbi, stored in oldsize bytes, by the n entries
 * in run (none: delete it), padded as yrun_size (young) or orun_size (old)
 * says.
 */
static int
lm_run_put(struct lmdb *ix, MDB_dbi dbi, unsigned c, size_t oldsize,
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
	if (oldsize > 0 && (n == 0 || oldsize < ix->inline_max))
		rc = mdb_del(ix->txn, dbi, &k, NULL);
	if (rc == 0 && n > 0) {
		v.mv_data = NULL;
		v.mv_size = ix->have_l1y && dbi == ix->l1y ? yrun_size(n) :
		    orun_size(n);
		if ((rc = mdb_put(ix->txn, dbi, &k, &v, MDB_RESERVE)) == 0) {
			memcpy(v.mv_data, run, size);
			memset((unsigned char *)v.mv_data + size, 0,
			    v.mv_size - size);
		}
	}
	if (rc != 0)
		return (lm_fail(ix, rc, "writing l1", cause));
	return (0);
}

/*
 * Merge chunk c's memtable entries into its young run, or with the young
 * run into its old one (run_young decides), leaving out entries of
 * documents below live.  Everything is read and merged before anything is
 * written: a write may move the pages the runs were read from.
 */
static int
lsm_merge(struct lmdb *ix, unsigned c, uint64_t live, char **cause)
{
	MDB_val			 v, yv = { 0, NULL };
	const struct bentry	*add;
	size_t			 nadd, nold, ny, n, i;
	int			 rc;

	nadd = memtable_sorted(ix->mt, c, &ix->sorted, &ix->sortedsize);
	if (nadd == 0)
		return (0);
	ny = 0;
	if ((rc = lm_run_get(ix, ix->l1, c, &v, &nold, cause)) != 0 ||
	    (ix->have_l1y && (rc = lm_run_get(ix, ix->l1y, c, &yv, &ny,
	    cause)) != 0))
		return (rc);
	ix->chunk.len = 0;
	if (ix->have_l1y && run_young(nold, ny, nadd, ix->young_min)) {
		buf_reserve(&ix->chunk, (ny + nadd) * L1E_SIZE);
		n = run_merge(c, yv.mv_data, ny, ix->sorted, nadd, live,
		    (unsigned char *)ix->chunk.data);
		if ((rc = lm_run_put(ix, ix->l1y, c, yv.mv_size,
		    (unsigned char *)ix->chunk.data, n, cause)) != 0)
			return (rc);
		nold = ny;
	} else {
		add = ix->sorted;
		if (ny > 0) {
			/* The young run and the new entries, as one list. */
			buf_reserve(&ix->ychunk, (ny + nadd) * L1E_SIZE);
			nadd = run_merge(c, yv.mv_data, ny, ix->sorted, nadd,
			    live, (unsigned char *)ix->ychunk.data);
			if (nadd > ix->ysortedsize) {
				ix->ysortedsize = nadd;
				ix->ysorted = xreallocarray(ix->ysorted, nadd,
				    sizeof *ix->ysorted);
			}
			for (i = 0; i < nadd; i++)
				l1_get((unsigned char *)ix->ychunk.data, i, c,
				    &ix->ysorted[i]);
			add = ix->ysorted;
		}
		buf_reserve(&ix->chunk, (nold + nadd) * L1E_SIZE);
		n = run_merge(c, nold ? v.mv_data : NULL, nold, add, nadd,
		    live, (unsigned char *)ix->chunk.data);
		if ((ny > 0 && (rc = lm_run_put(ix, ix->l1y, c, yv.mv_size,
		    NULL, 0, cause)) != 0) || (rc = lm_run_put(ix, ix->l1, c,
		    v.mv_size, (unsigned char *)ix->chunk.data, n,
		    cause)) != 0)
			return (rc);
		nold += ny;
	}
	ix->tx.l1_entries += n;
	ix->tx.l1_entries -= nold < ix->tx.l1_entries ? nold :
	    ix->tx.l1_entries;
	return (0);
}

/*
 * At commit: log the transaction's entries to l0, advance the sweep by the
 * chunks it is owed, delete the l0 records it has gone round, and record
 * the state in meta.
 */
static int
lsm_flush(struct lmdb *ix, char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	struct l0layout	 l;
	unsigned char	 kb[8];
	uint64_t	 q, live = 0, i;
	char		 num[32];
	int		 rc;

	if ((rc = lsm_repack(ix, cause)) != 0)
		return (rc);
	if (ix->npend > 0) {
		if (ix->l0count == NULL)
			ix->l0count = xcalloc(BAND_CHUNKS + 1,
			    sizeof *ix->l0count);
		ix->rec.len = 0;
		l0f_layout(ix->npend, &l);
		buf_reserve(&ix->rec, l.size);
		l0f_write(ix->pend, ix->tx.sweep, ix->l0count, &l,
		    (unsigned char *)ix->rec.data);
		put_be64(kb, ix->tx.l0_next);
		k.mv_data = kb;
		k.mv_size = sizeof kb;
		v.mv_data = ix->rec.data;
		v.mv_size = l.size;
		if ((rc = mdb_put(ix->txn, ix->l0, &k, &v, MDB_APPEND)) != 0)
			return (lm_fail(ix, rc, "writing l0", cause));
		ix->tx.l0_next++;
		/* A whole sweep per half budget of new entries. */
		ix->tx.quota += (double)BAND_CHUNKS * ix->npend /
		    (ix->mt_max / 2);
	}
	q = (uint64_t)ix->tx.quota;
	ix->tx.quota -= q;
	if ((rc = lsm_hold(ix, q, 0, cause)) != 0)
		return (rc);
	if (memtable_entries(ix->mt) + (ix->held ? ix->unheld : 0) >
	    ix->mt_max)
		q += BAND_CHUNKS / 64;	/* over budget: catch up */
	if (q > BAND_CHUNKS)
		q = BAND_CHUNKS;
	if ((rc = lsm_hold(ix, q, 0, cause)) != 0)
		return (rc);
	if (q > 0) {
		if (lm_first_doc(ix, &live, cause) != 0)
			return (INDEX_ERROR);
		/*
		 * Document numbers start at 1: below 1 nothing is removed,
		 * and with live 0 run_merge copies runs in spans.
		 */
		if (live <= 1)
			live = 0;
		if (ix->nmerged + q > ix->mergedsize) {
			ix->mergedsize = ix->nmerged + q;
			ix->merged = xreallocarray(ix->merged, ix->mergedsize,
			    sizeof *ix->merged);
		}
		for (i = 0; i < q; i++) {
			unsigned c = ix->tx.sweep % BAND_CHUNKS;

			if ((rc = lsm_merge(ix, c, live, cause)) != 0)
				return (rc);
			ix->merged[ix->nmerged++] = c;
			ix->tx.sweep++;
		}
		/* l0 records the sweep has gone all the way round. */
		if ((rc = mdb_cursor_open(ix->txn, ix->l0, &cur)) != 0)
			return (lm_fail(ix, rc, "reading l0", cause));
		while ((rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST)) == 0) {
			if (!lm_ovf_ok(ix, &v)) {
				rc = MDB_CORRUPTED;
				break;
			}
			if (v.mv_size < L0_HEADER || ix->tx.sweep -
			    l0_written(v.mv_data, NULL) < BAND_CHUNKS)
				break;
			if ((rc = mdb_cursor_del(cur, 0)) != 0)
				break;
		}
		mdb_cursor_close(cur);
		if (rc != 0 && rc != MDB_NOTFOUND)
			return (lm_fail(ix, rc, "trimming l0", cause));
	}
#define PUTNUM(key, val) do {						\
	snprintf(num, sizeof num, "%" PRIu64, (uint64_t)(val));	\
	if ((rc = lm_meta_put(ix, key, num)) != 0)				\
		return (lm_fail(ix, rc, "writing meta", cause));	\
} while (0)
	if (ix->tx.sweep != ix->lsm.sweep)
		PUTNUM("sweep", ix->tx.sweep);
	if (ix->tx.l0_next != ix->lsm.l0_next)
		PUTNUM("l0_next", ix->tx.l0_next);
	if (ix->tx.l1_entries != ix->lsm.l1_entries)
		PUTNUM("l1_entries", ix->tx.l1_entries);
#undef PUTNUM
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
 * whatever the parameters.  A larger l1 (an index made before this)
 * keeps its tree.
 * A look that finds a run still in a leaf (a cursor pass up to it) is
 * not made again until the sweep has passed a sixteenth of the chunks.
 */
static int
lsm_repack(struct lmdb *ix, char **cause)
{
	MDB_stat	 st;
	MDB_cursor	*cur;
	MDB_val		*runs, k, v;
	size_t		 per, dense, n = 0, i;
	int		 rc;

	if (ix->tx.sweep < ix->repack_at || ix->psize <= 16)
		return (0);
	if ((rc = mdb_stat(ix->txn, ix->l1, &st)) != 0)
		return (lm_fail(ix, rc, "reading l1", cause));
	per = (ix->psize - 16) / L1_NODE;
	dense = (st.ms_entries + per - 1) / per;
	/* (Fewer overflow pages than runs: some still in a leaf.) */
	if (st.ms_leaf_pages <= 2 * dense + 1 ||
	    st.ms_overflow_pages < st.ms_entries ||
	    (uint64_t)st.ms_overflow_pages * ix->psize > L1_REPACK_MAX)
		return (0);
	ix->repack_at = ix->tx.sweep + BAND_CHUNKS / 16;
	runs = xreallocarray(NULL, st.ms_entries, 2 * sizeof *runs);
	if ((rc = mdb_cursor_open(ix->txn, ix->l1, &cur)) != 0) {
		free(runs);
		return (lm_fail(ix, rc, "reading l1", cause));
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		/* A run still in its leaf, or damage: not now. */
		if (n == st.ms_entries || k.mv_size != 4 ||
		    !lm_overflow(ix, &v) || !lm_ovf_ok(ix, &v))
			break;
		runs[2 * n] = k;
		runs[2 * n++ + 1] = v;
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND || n != st.ms_entries) {
		free(runs);
		return (rc == 0 || rc == MDB_NOTFOUND ? 0 :
		    lm_fail(ix, rc, "reading l1", cause));
	}
	rc = mdb_drop(ix->txn, ix->l1, 0);
	for (i = 0; rc == 0 && i < n; i++) {
		v.mv_size = runs[2 * i + 1].mv_size;
		rc = mdb_put(ix->txn, ix->l1, &runs[2 * i], &v,
		    MDB_APPEND | MDB_RESERVE);
		if (rc == 0)
			memcpy(v.mv_data, runs[2 * i + 1].mv_data, v.mv_size);
	}
	free(runs);
	if (rc != 0)
		return (lm_fail(ix, rc, "repacking l1", cause));
	log_debug("index %s: l1 repacked at document %" PRIu64 ": %zu runs "
	    "in %zu overflow pages, from %zu leaf pages into %zu",
	    ix->base.path, ix->next_doc, n, (size_t)st.ms_overflow_pages,
	    (size_t)st.ms_leaf_pages, dense);
	/* The snapshot would hold the old pages back from reuse. */
	snap_end(ix);
	return (0);
}

/*
 * Append to out the documents sharing each of the b band keys, once for
 * each band they share with the query (so the count of a document is its
 * number of shared bands), at most BUCKET_MAX per band.
 */
static int
lmdb_candidates(struct index *base, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	size_t		 next;
	unsigned	 j;
	int		 rc;

	if ((rc = lsm_hold_keys(ix, slot, keys, cause)) != 0)
		return (rc);
	/*
	 * A lookup is a few cache misses (see run_prefetch), started early
	 * so that they overlap: all of this record's at once, and those of
	 * the next records of the batch while this one is verified.
	 */
	if (ix->l1valid && (slot == INDEX_NOSLOT || slot != ix->ahead)) {
		lmdb_prefetch(ix, keys, 0);
		lmdb_prefetch(ix, keys, 1);
	}
	for (j = 0; j < ix->base.p.bands; j++) {
		if ((rc = lm_bucket(ix, keys[j], out,
		    BUCKET_MAX)) != 0)
			return (lm_fail(ix, rc, "band lookup", cause));
	}
	if (ix->l1valid && slot != INDEX_NOSLOT && slot < ix->nbatch) {
		if ((next = next_pending(ix, slot)) < ix->nbatch) {
			lmdb_prefetch(ix, ix->batch[next].keys, 1);
			ix->ahead = next;
			if ((next = next_pending(ix, next)) < ix->nbatch)
				lmdb_prefetch(ix, ix->batch[next].keys, 0);
		}
	}
	return (0);
}

/*
 * Start loading what the lookups of these band keys will read: stage 0
 * the memtable bucket headers and l1map entries, stage 1 what they point
 * to (see run_prefetch).
 */
static void
lmdb_prefetch(struct lmdb *ix, const uint64_t *keys, int stage)
{
	const struct l1ref	*l;
	unsigned		 j;

	for (j = 0; j < ix->base.p.bands; j++) {
		memtable_prefetch(ix->mt, keys[j], stage);
		l = &ix->l1map[band_chunk(keys[j])];
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
next_pending(const struct lmdb *ix, size_t slot)
{
	for (slot++; slot < ix->nbatch && !ix->batch[slot].pending; slot++)
		;
	return (slot);
}

/*
 * The documents under one band key: memtable, then l1's old and young runs
 * (so that l1's are in document order, as in one run), at most max of
 * them.  Returns an LMDB error.
 */
static int
lm_bucket(struct lmdb *ix, uint64_t key, struct u64vec *out,
    size_t max)
{
	const struct brun *b;
	MDB_val		 k, v;
	unsigned char	 kb[4];
	unsigned	 c;
	size_t		 got, n;
	int		 rc, i;

	got = memtable_find(ix->mt, key, out, max);
	c = band_chunk(key);
	if (ix->l1valid) {
		got += run_find(ix->l1map[c].run, ix->l1map[c].n, key, out,
		    max - got);
		run_find(ix->l1map[c].yrun, ix->l1map[c].yn, key, out,
		    max - got);
		return (0);
	}
	if (ix->bvalid && (b = lm_brun(ix, c)) != NULL) {
		if (b->run.mv_data != NULL)
			got += lm_run_find(ix, &b->run, b->n, key, out,
			    max - got);
		if (b->yrun.mv_data != NULL)
			lm_run_find(ix, &b->yrun, b->yn, key, out, max - got);
		return (0);
	}
	chunk_key(kb, c, &k);
	for (i = 0; i < 1 + ix->have_l1y; i++) {
		rc = mdb_get(ix->txn, i == 0 ? ix->l1 : ix->l1y, &k, &v);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc != 0)
			return (rc);
		if (lm_run_count(ix, i == 0 ? ix->l1 : ix->l1y, v.mv_size,
		    &n) != 0)
			return (MDB_CORRUPTED);
		got += lm_run_find(ix, &v, n, key, out, max - got);
	}
	return (0);
}

/*
 * Find the runs of a small batch's chunks (lmdb_prepare) with one cursor
 * a database, in chunk order: LMDB looks for a key in the leaf the cursor
 * is on before it searches from the root, and the 1,500 chunks of 100
 * records fall in some 90 leaves at a million documents, whose lines are
 * then in the processor's cache.  One mdb_get a lookup, from the root
 * each time, was 0.3 microseconds each, a quarter of what such a batch
 * spent in the index.
 */
static int
lm_batch_runs(struct lmdb *ix, const struct ixdoc *docs, size_t n,
    char **cause)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	unsigned char	 kb[4];
	size_t		 i, cnt;
	unsigned	 j, y;
	int		 rc;

	ix->bchunks.n = 0;
	for (i = 0; i < n; i++)
		for (j = 0; docs[i].pending && j < ix->base.p.bands; j++)
			u64vec_push(&ix->bchunks, band_chunk(docs[i].keys[j]));
	u64_sort_unique(&ix->bchunks, &ix->keysort);
	if (ix->bchunks.n > ix->brunsize) {
		ix->brunsize = ix->bchunks.n;
		ix->bruns = xreallocarray(ix->bruns, ix->brunsize,
		    sizeof *ix->bruns);
	}
	if (ix->bchunks.n == 0)
		return (0);		/* nothing to look up: none pending */
	memset(ix->bruns, 0, ix->bchunks.n * sizeof *ix->bruns);
	for (y = 0; y < 1U + ix->have_l1y; y++) {
		if ((rc = mdb_cursor_open(ix->txn, y ? ix->l1y : ix->l1,
		    &cur)) != 0)
			return (lm_fail(ix, rc, "reading l1", cause));
		for (i = 0; i < ix->bchunks.n; i++) {
			chunk_key(kb, (unsigned)ix->bchunks.v[i], &k);
			rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY);
			if (rc == MDB_NOTFOUND)
				continue;
			if (rc == 0 && lm_run_count(ix, y ? ix->l1y : ix->l1,
			    v.mv_size, &cnt) != 0)
				rc = MDB_CORRUPTED;
			if (rc != 0) {
				mdb_cursor_close(cur);
				return (lm_fail(ix, rc, "reading l1", cause));
			}
			if (y) {
				ix->bruns[i].yrun = v;
				ix->bruns[i].yn = cnt;
			} else {
				ix->bruns[i].run = v;
				ix->bruns[i].n = cnt;
			}
		}
		mdb_cursor_close(cur);
	}
	ix->bvalid = 1;
	return (0);
}

/* The runs of chunk c of the prepared small batch, or NULL if not one. */
static const struct brun *
lm_brun(const struct lmdb *ix, unsigned c)
{
	size_t	 lo = 0, hi = ix->bchunks.n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ix->bchunks.v[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < ix->bchunks.n && ix->bchunks.v[lo] == c ?
	    &ix->bruns[lo] : NULL);
}

/*
 * Before a batch's lookups: when the batch has enough band keys to touch
 * most chunks (1,000 records with 16 bands touch about 60% of them), read
 * where every chunk's l1 run is in one cursor pass, so that a lookup needs
 * no B-tree search.  l1 changes only at commit (the sweep), so the runs
 * stay where they are until then.
 */
static int
lmdb_prepare(struct index *base, const struct ixdoc *docs, size_t n,
    char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	size_t		 i, keys = 0;
	uint64_t	 q = 0;
	unsigned	 c, j;
	int		 rc, whole;

	for (i = 0; i < n; i++)
		keys += docs[i].pending ? ix->base.p.bands : 0;
	/* So many keys touch most chunks: lsm_hold reads all of l0. */
	whole = keys >= BAND_CHUNKS / 4;
	for (i = 0; i < n && !whole; i++) {
		if (!docs[i].pending)
			continue;
		for (j = 0; ix->held != NULL && j < ix->base.p.bands; j++) {
			c = band_chunk(docs[i].keys[j]);
			if (ix->held[c] == MT_NONE) {
				ix->held[c] = MT_WANTKEYS;
				ix->nwant++;
			}
			if (ix->held[c] == MT_WANTKEYS)
				u64vec_push(&ix->keyset, docs[i].keys[j]);
		}
	}
	u64_sort_unique(&ix->keyset, &ix->keysort);
	if (ix->keyset.n > 0) {
		if (ix->keybits == NULL)
			ix->keybits = xcalloc(KEYSET_BITS / 64,
			    sizeof *ix->keybits);
		memset(ix->keybits, 0, KEYSET_BITS / 8);
		for (i = 0; i < ix->keyset.n; i++)
			ix->keybits[KEYSET_BIT(ix->keyset.v[i]) / 64] |=
			    1ULL << KEYSET_BIT(ix->keyset.v[i]) % 64;
	}
	ix->batch = docs;
	ix->nbatch = n;
	ix->ahead = INDEX_NOSLOT;
	ix->l1valid = ix->bvalid = 0;
	/*
	 * The entries of the batch's keys, and (a writer's) the chunks its
	 * commit merges, whole: the sweep's quota for every key the batch
	 * may insert, and its catch-up should the memtable go over budget
	 * (lsm_flush), or should it be unknown yet.
	 */
	if (!(ix->base.flags & INDEX_RDONLY)) {
		q = (uint64_t)(ix->tx.quota + (double)BAND_CHUNKS * keys /
		    (ix->mt_max / 2));
		if (ix->held != NULL && (ix->unheld == UNCOUNTED ||
		    memtable_entries(ix->mt) + ix->unheld + keys >
		    ix->mt_max))
			q += BAND_CHUNKS / 64;
	}
	if ((rc = lsm_hold(ix, q, whole, cause)) != 0)
		return (rc);
	if (!whole)
		return (lm_batch_runs(ix, docs, n, cause));
	if (ix->l1map == NULL)
		ix->l1map = xcalloc(BAND_CHUNKS, sizeof *ix->l1map);
	/*
	 * A new snapshot when the sweep has rewritten too much of the old.
	 * A read-only run's own transaction is one already; and should a
	 * snapshot not begin (no reader slot free), read this transaction's
	 * l1 whole, as before snapshots.
	 */
	if (ix->base.flags & INDEX_RDONLY ||
	    (ix->snap != NULL && ix->lsm.sweep - ix->snap_sweep > SNAP_CHUNKS))
		snap_end(ix);
	if (ix->snap == NULL && !(ix->base.flags & INDEX_RDONLY) &&
	    mdb_txn_begin(ix->env, NULL, MDB_RDONLY, &ix->snap) != 0)
		ix->snap = NULL;
	if (ix->snap == NULL) {
		if ((rc = l1_read(ix, ix->txn, 0, BAND_CHUNKS, cause)) != 0)
			return (rc);
		ix->l1valid = 1;
		return (0);
	}
	if (ix->snap_sweep == UINT64_MAX) {	/* a new snapshot */
		ix->snap_sweep = ix->lsm.sweep;
		if ((rc = l1_read(ix, ix->snap, 0, BAND_CHUNKS, cause)) != 0) {
			snap_end(ix);
			return (rc);
		}
	}
	/* The chunks merged since, as this transaction has them. */
	c = (unsigned)(ix->snap_sweep % BAND_CHUNKS);
	i = (size_t)(ix->lsm.sweep - ix->snap_sweep);
	if (c + i > BAND_CHUNKS) {
		rc = l1_read(ix, ix->txn, c, BAND_CHUNKS, cause);
		if (rc == 0)
			rc = l1_read(ix, ix->txn, 0, c + i - BAND_CHUNKS,
			    cause);
	} else
		rc = l1_read(ix, ix->txn, c, c + i, cause);
	if (rc != 0)
		return (rc);
	ix->l1valid = 1;
	return (0);
}

/*
 * Point l1map[from, to) at the runs, old and young, of those chunks that
 * txn sees, in one cursor pass over each database (a chunk without a run
 * gets none).
 */
static int
l1_read(struct lmdb *ix, MDB_txn *txn, unsigned from, unsigned to,
    char **cause)
{
	int	 rc;

	if (from >= to)
		return (0);
	memset(ix->l1map + from, 0, (to - from) * sizeof *ix->l1map);
	rc = l1_read_runs(ix, txn, ix->l1, from, to, 0, cause);
	if (rc == 0 && ix->have_l1y)
		rc = l1_read_runs(ix, txn, ix->l1y, from, to, 1, cause);
	return (rc);
}

/* l1_read's pass over one database: l1 (young 0) or l1y (1). */
static int
l1_read_runs(struct lmdb *ix, MDB_txn *txn, MDB_dbi dbi, unsigned from,
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
		return (lm_fail(ix, rc, "reading l1", cause));
	chunk_key(fb, from, &k);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 4 || lm_run_count(ix, dbi, v.mv_size,
		    &n) != 0)
			break;
		kb = k.mv_data;
		c = (unsigned)kb[0] << 24 | kb[1] << 16 | kb[2] << 8 | kb[3];
		if (c >= BAND_CHUNKS)
			break;
		if (c >= to) {
			rc = MDB_NOTFOUND;	/* past the range: done */
			break;
		}
		if (young) {
			ix->l1map[c].yrun = v.mv_data;
			ix->l1map[c].yn = n;
		} else {
			ix->l1map[c].run = v.mv_data;
			ix->l1map[c].n = n;
		}
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND) {
		if (rc == 0) {
			xasprintf(cause, "index %s is damaged: l1 is corrupt "
			    "(run --check)", ix->base.path);
			return (INDEX_ERROR);
		}
		return (lm_fail(ix, rc, "reading l1", cause));
	}
	return (0);
}

/*
 * End the l1 snapshot.  Before anything that needs no transaction of this
 * process open (a map resize), and when l1 changed otherwise than by this
 * process's sweep (another process's commits).
 */
static void
snap_end(struct lmdb *ix)
{
	if (ix->snap != NULL)
		mdb_txn_abort(ix->snap);
	ix->snap = NULL;
	ix->snap_sweep = UINT64_MAX;	/* l1map holds nothing of it */
	ix->l1valid = ix->bvalid = 0;
	ix->map = NULL;			/* a resize may move the map */
}

/* The l1 key of chunk c, in kb. */
static void
chunk_key(unsigned char *kb, unsigned c, MDB_val *k)
{
	kb[0] = c >> 24;
	kb[1] = c >> 16;
	kb[2] = c >> 8;
	kb[3] = c;
	k->mv_data = kb;
	k->mv_size = 4;
}

/* Look a document number up in one of the databases keyed by it. */
static int
lm_get(struct lmdb *ix, MDB_dbi dbi, uint64_t docid, MDB_val *v)
{
	unsigned char	 kb[8];
	MDB_val		 k;

	put_be64(kb, docid);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	return (mdb_get(ix->txn, dbi, &k, v));
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
	if (docrec_decode(v.mv_data, v.mv_size, ix->base.p.perms, ix->sig,
	    d) != v.mv_size)
		goto corrupt;
	d->docid = docid;
	return (0);
corrupt:
	xasprintf(cause, "index %s is damaged: document %" PRIu64 " is "
	    "corrupt (run --check)", ix->base.path, docid);
	return (INDEX_ERROR);
}

/*
 * Read a document's normalised text into out (emptied first).  Returns its
 * DOC_BYTES flag, or -1.
 */
static int
lmdb_text(struct index *base, uint64_t docid, struct buf *out, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_val		 v;
	int		 rc;

	/* (Asked for a document whose record was found: it has a text.) */
	if ((rc = lm_get(ix, ix->texts, docid, &v)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (lm_fail(ix, rc, "text lookup", cause));
	if (rc == 0 && (rc = text_decode(v.mv_data, v.mv_size, out)) >= 0)
		return (rc);
	xasprintf(cause, "index %s is damaged: text of document %" PRIu64
	    " is %s (run --check)", ix->base.path, docid, rc == MDB_NOTFOUND ?
	    "missing" : "corrupt");
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
	v.mv_data = ix->rec.data;
	v.mv_size = ix->rec.len;
	if ((rc = mdb_put(ix->txn, ix->docs, &k, &v, MDB_APPEND)) != 0)
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
		v.mv_data = (void *)enc;
		v.mv_size = enclen;
		if ((rc = mdb_put(ix->txn, ix->texts, &k, &v,
		    MDB_APPEND)) != 0)
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
		if (k.mv_size != 8 || docrec_decode(v.mv_data, v.mv_size,
		    ix->base.p.perms, NULL, &d) != v.mv_size)
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

/* Bytes of the pages a database uses. */
static uint64_t
dbi_bytes(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat	 st;

	if (mdb_stat(txn, dbi, &st) != 0)
		return (0);
	return ((st.ms_branch_pages + st.ms_leaf_pages +
	    st.ms_overflow_pages) * (uint64_t)st.ms_psize);
}

/* The first or last document time, or 0. */
static int64_t
edge_time(MDB_txn *txn, MDB_dbi dbi, MDB_cursor_op op)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int64_t		 t = 0;

	if (mdb_cursor_open(txn, dbi, &cur) != 0)
		return (0);
	if (mdb_cursor_get(cur, &k, &v, op) == 0 && k.mv_size == TIMEKEY_SIZE)
		t = timekey_time(k.mv_data);
	mdb_cursor_close(cur);
	return (t);
}

/* What --info prints. */
static int
lmdb_info(struct index *base, struct index_info *in, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_envinfo	 info;
	MDB_stat	 st;
	char		 v[32];
	uint64_t	 u;
	int		 rc;

	memset(in, 0, sizeof *in);
	in->p = ix->base.p;
	in->format = ix->format;
	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->txn)) != 0) {
		ix->txn = NULL;
		return (lm_fail(ix, rc, "info", cause));
	}
	if (mdb_stat(ix->txn, ix->docs, &st) == 0)
		in->docs = st.ms_entries;
	if (lm_meta_u64(ix, "next_doc", &in->next_doc, cause) != 0 ||
	    lm_meta_u64(ix, "l1_entries", &u, cause) != 0 ||
	    lsm_entries(ix, ix->txn, &in->band_entries, cause) != 0) {
		mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		return (INDEX_ERROR);
	}
	in->band_entries += u;
	if (lm_meta_get(ix, "created", v, sizeof v) == 0 &&
	    meta_number(v, INT64_MAX, &u) == 0)
		in->created = (int64_t)u;
	in->oldest = edge_time(ix->txn, ix->times, MDB_FIRST);
	in->newest = edge_time(ix->txn, ix->times, MDB_LAST);
	in->bands_bytes = dbi_bytes(ix->txn, ix->l1) +
	    dbi_bytes(ix->txn, ix->l0) +
	    (ix->have_l1y ? dbi_bytes(ix->txn, ix->l1y) : 0);
	in->docs_bytes = dbi_bytes(ix->txn, ix->docs) +
	    dbi_bytes(ix->txn, ix->times);
	in->texts_bytes = dbi_bytes(ix->txn, ix->texts);
	if ((rc = mdb_env_stat(ix->env, &st)) == 0 &&
	    (rc = mdb_env_info(ix->env, &info)) == 0)
		in->size = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
	mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	if (rc != 0)
		return (lm_fail(ix, rc, "info", cause));
	lmdb_exists(ix->base.path, &in->file_size);
	return (0);
}

/* Report a problem found by index_check (the first 100 in full). */
static void
problem(FILE *f, uint64_t *problems, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
problem(FILE *f, uint64_t *problems, const char *fmt, ...)
{
	va_list	 ap;

	if (++*problems > 100)
		return;
	fputs("problem: ", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* What lmdb_check counts and reports to. */
struct checking {
	FILE		*f;
	uint64_t	*problems;
	uint64_t	 docs;
	uint64_t	 l1;		/* entries in l1 runs */
	uint64_t	*keys;		/* scratch: a document's band keys */
	struct u64vec	 found;		/* scratch: a bucket */
	struct buf	 text;		/* scratch */
};

/*
 * One document of lmdb_check: its record parses, it has its time and (when
 * texts are kept) its text, and it is under each of its band keys,
 * recomputed from its stored signature.
 */
static void
check_doc(struct lmdb *ix, struct checking *ck, const MDB_val *k,
    const MDB_val *v)
{
	MDB_val		 k2, v2;
	struct docinfo	 d;
	unsigned char	 tk[TIMEKEY_SIZE];
	uint64_t	 docid;
	char		*cause = NULL;
	size_t		 i;
	unsigned	 b, j;
	int		 ok, rc;

	ck->docs++;
	if (k->mv_size != 8) {
		problem(ck->f, ck->problems, "a docs key is %zu bytes",
		    k->mv_size);
		return;
	}
	docid = get_be64(k->mv_data);
	if (docid == 0 || docid >= ix->next_doc)
		problem(ck->f, ck->problems, "document %" PRIu64 " is not "
		    "below next_doc %" PRIu64, docid, ix->next_doc);
	if (docrec_decode(v->mv_data, v->mv_size, ix->base.p.perms, ix->sig,
	    &d) != v->mv_size) {
		problem(ck->f, ck->problems, "document %" PRIu64 ": record "
		    "is corrupt", docid);
		return;
	}
	timekey_put(tk, d.time, docid);
	k2.mv_data = tk;
	k2.mv_size = sizeof tk;
	if ((rc = mdb_get(ix->txn, ix->times, &k2, &v2)) == MDB_NOTFOUND)
		problem(ck->f, ck->problems, "document %" PRIu64 " has no "
		    "times entry", docid);
	else if (rc != 0)
		problem(ck->f, ck->problems, "document %" PRIu64 ": reading "
		    "its times entry: %s", docid, mdb_strerror(rc));
	if (ix->base.p.texts && lmdb_text(&ix->base, docid, &ck->text,
	    &cause) < 0) {
		problem(ck->f, ck->problems, "document %" PRIu64 ": %s",
		    docid, cause);
		free(cause);
	}
	/*
	 * The bands of the stored signature; under containment, the parts'
	 * bands, made from the text, are not checked.
	 */
	b = ix->base.p.bands / lsh_parts(ix->base.p.measure);
	lsh_keys(ix->sig, b, ix->base.p.rows, ix->base.p.seed, ck->keys);
	for (j = 0; j < b; j++) {
		ck->found.n = 0;
		if ((rc = lm_bucket(ix, ck->keys[j], &ck->found,
		    SIZE_MAX)) != 0) {
			problem(ck->f, ck->problems, "document %" PRIu64 ": "
			    "band %u: %s", docid, j, mdb_strerror(rc));
			break;
		}
		for (i = 0, ok = 0; i < ck->found.n && !ok; i++)
			ok = ck->found.v[i] == docid;
		if (!ok)
			problem(ck->f, ck->problems, "document %" PRIu64 " is "
			    "missing from band %u", docid, j);
	}
}

/*
 * After a walk of a database (what) that ended with rc: a problem unless
 * it went to the end.  LMDB says MDB_CORRUPTED or MDB_PAGE_NOTFOUND of
 * some damaged pages.
 */
static void
check_walked(struct checking *ck, const char *what, int rc)
{
	if (rc != MDB_NOTFOUND)
		problem(ck->f, ck->problems, "reading %s: %s", what,
		    mdb_strerror(rc));
}

/*
 * The entries of a database keyed by document (texts: 8-byte keys) or
 * by time key (times) whose document is not there.
 */
static void
check_orphans(struct lmdb *ix, struct checking *ck, MDB_dbi dbi,
    size_t keysize, const char *what)
{
	MDB_cursor	*cur;
	MDB_val		 k, v, v2;
	uint64_t	 docid = 0;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->txn, dbi, &cur)) != 0) {
		check_walked(ck, what, rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size == keysize)
			docid = keysize == 8 ? get_be64(k.mv_data) :
			    timekey_doc(k.mv_data);
		if (k.mv_size != keysize || lm_get(ix, ix->docs, docid,
		    &v2) != 0)
			problem(ck->f, ck->problems, "%s has no document",
			    what);
	}
	mdb_cursor_close(cur);
	check_walked(ck, what, rc);
}

static void	check_runs(struct lmdb *, struct checking *, MDB_dbi,
		    const char *);

/*
 * The l1 runs, old and young: in their chunks, sorted, of documents below
 * next_doc, as many entries as meta says.
 */
static void
check_l1(struct lmdb *ix, struct checking *ck)
{
	check_runs(ix, ck, ix->l1, "l1");
	if (ix->have_l1y)
		check_runs(ix, ck, ix->l1y, "l1y");
	if (ck->l1 != ix->lsm.l1_entries)
		problem(ck->f, ck->problems, "l1 holds %" PRIu64 " entries; "
		    "meta says %" PRIu64, ck->l1, ix->lsm.l1_entries);
}

/* check_l1 of one database, l1 or l1y (what). */
static void
check_runs(struct lmdb *ix, struct checking *ck, MDB_dbi dbi,
    const char *what)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	const unsigned char	*p, *pad;
	struct bentry		 e, prev;
	size_t			 i, n;
	unsigned		 c;
	int			 rc;

	if ((rc = mdb_cursor_open(ix->txn, dbi, &cur)) != 0) {
		check_walked(ck, what, rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		p = k.mv_data;
		if (k.mv_size != 4 ||
		    lm_run_count(ix, dbi, v.mv_size, &n) != 0) {
			problem(ck->f, ck->problems, "an %s record is "
			    "malformed", what);
			continue;
		}
		c = (unsigned)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
		if (c >= BAND_CHUNKS) {
			problem(ck->f, ck->problems, "%s holds chunk %u", what,
			    c);
			continue;
		}
		ck->l1 += n;
		for (pad = (const unsigned char *)v.mv_data + n * L1E_SIZE;
		    pad < (const unsigned char *)v.mv_data + v.mv_size; pad++)
			if (*pad != 0) {
				problem(ck->f, ck->problems, "%s chunk %u: "
				    "its padding is not zeros", what, c);
				break;
			}
		for (i = 0; i < n; i++) {
			l1_get(v.mv_data, i, c, &e);
			if (i > 0 && bentry_cmp(&prev, &e) >= 0)
				problem(ck->f, ck->problems, "%s chunk %u is "
				    "not sorted at entry %zu", what, c, i);
			if (e.docid == 0 || e.docid >= ix->next_doc)
				problem(ck->f, ck->problems, "%s chunk %u: "
				    "document %" PRIu64 " is not below "
				    "next_doc", what, c, e.docid);
			prev = e;
		}
	}
	mdb_cursor_close(cur);
	check_walked(ck, what, rc);
}

/*
 * Do the directory and filter of the filtered l0 record rec of layout l,
 * written at the sweep position written and in order, say what its
 * entries do (1)?  They are written again from its entries (l0f_write)
 * and compared.
 */
static int
check_l0_filter(struct lmdb *ix, const unsigned char *rec,
    const struct l0layout *l, uint64_t written)
{
	struct bentry	*e;
	unsigned char	*again;
	size_t		 i;
	int		 same;

	if (ix->l0count == NULL)
		ix->l0count = xcalloc(BAND_CHUNKS + 1, sizeof *ix->l0count);
	e = xreallocarray(NULL, l->n, sizeof *e);
	for (i = 0; i < l->n; i++)
		run_get(rec + l->entries, i, &e[i]);
	again = xmalloc(l->size);
	l0f_write(e, written, ix->l0count, l, again);
	same = memcmp(again, rec, l->entries) == 0;
	free(again);
	free(e);
	return (same);
}

/* The memtable's log: well formed, below l0_next and the sweep. */
static void
check_l0(struct lmdb *ix, struct checking *ck, uint64_t sweep,
    uint64_t l0_next)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	const unsigned char	*e;
	struct l0layout		 l;
	uint64_t		 bad = 0, h;
	int			 rc, sorted;

	if ((rc = mdb_cursor_open(ix->txn, ix->l0, &cur)) != 0) {
		check_walked(ck, "l0", rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || get_be64(k.mv_data) >= l0_next ||
		    !lm_ovf_ok(ix, &v) ||
		    l0_record(ix, v.mv_data, v.mv_size, &l, &h, &sorted) != 0 ||
		    h > sweep) {
			if (lm_ovf_ok(ix, &v))	/* (else check_walked) */
				problem(ck->f, ck->problems, "an l0 record is "
				    "malformed");
			continue;
		}
		e = (const unsigned char *)v.mv_data + l.entries;
		bad += l0_bad_entries(e, l.n, ix->next_doc);
		if (sorted && !l0_in_order(e, l.n, (unsigned)(h % BAND_CHUNKS)))
			problem(ck->f, ck->problems, "l0 record %" PRIu64 " is "
			    "out of order", get_be64(k.mv_data));
		else if (l.nb > 0 && !check_l0_filter(ix, v.mv_data, &l, h))
			problem(ck->f, ck->problems, "l0 record %" PRIu64 ": "
			    "its directory or filter does not match its "
			    "entries", get_be64(k.mv_data));
	}
	mdb_cursor_close(cur);
	check_walked(ck, "l0", rc);
	if (bad > 0)
		problem(ck->f, ck->problems, "l0 holds %" PRIu64 " entries "
		    "not of a document below next_doc", bad);
}

/* LMDB's free list (database 0): it can be read to its end. */
static void
check_free(struct lmdb *ix, struct checking *ck)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->txn, 0, &cur)) == 0) {
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			;
		mdb_cursor_close(cur);
	}
	check_walked(ck, "the free list", rc);
}

/*
 * Check the index's internal consistency, in one read transaction: every
 * document (check_doc); every time and text belongs to a document; the
 * band runs are sorted, in their chunks, and their count matches; the l0
 * log is well formed; LMDB's free list reads to its end.  Writes
 * "problem: ..." lines and a summary to f.
 */
static int
lmdb_check(struct index *base, FILE *f, uint64_t *problems, char **cause)
{
	struct lmdb		*ix = (struct lmdb *)base;
	struct checking		 ck = { f, problems, 0, 0, NULL, { 0 }, { 0 } };
	MDB_cursor		*cur;
	MDB_val			 k, v;
	uint64_t		 sweep, l0_next;
	char			 why[128];
	int			 rc;

	*problems = 0;
	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->txn)) != 0) {
		ix->txn = NULL;
		return (lm_fail(ix, rc, "check", cause));
	}
	ix->loaded = 0;		/* rebuild the memtable from this snapshot */
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0 ||
	    lsm_load(ix, cause) != 0 || lsm_hold(ix, 0, 1, cause) != 0 ||
	    lm_meta_u64(ix, "sweep", &sweep, cause) != 0 ||
	    lm_meta_u64(ix, "l0_next", &l0_next, cause) != 0) {
		mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		return (INDEX_ERROR);
	}
	ck.keys = xcalloc(ix->base.p.bands, sizeof *ck.keys);

	if ((rc = mdb_cursor_open(ix->txn, ix->docs, &cur)) == 0) {
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			check_doc(ix, &ck, &k, &v);
		mdb_cursor_close(cur);
	}
	check_walked(&ck, "docs", rc);
	check_orphans(ix, &ck, ix->times, TIMEKEY_SIZE, "a times entry");
	check_orphans(ix, &ck, ix->texts, 8, "a text");
	check_l1(ix, &ck);
	check_l0(ix, &ck, sweep, l0_next);
	check_undelivered(ix, &ck);
	check_free(ix, &ck);
	if (lm_pages(ix, ix->txn, why, sizeof why) != 0)
		problem(f, problems, "LMDB's pages: %s", why);

	mdb_txn_abort(ix->txn);
	ix->txn = NULL;
	ix->loaded = 0;
	free(ck.keys);
	u64vec_free(&ck.found);
	buf_free(&ck.text);
	if (*problems > 100)
		fprintf(f, "problems not shown: %" PRIu64 "\n",
		    *problems - 100);
	fprintf(f, "documents: %" PRIu64 "\n", ck.docs);
	fprintf(f, "band_entries: %" PRIu64 "\n",
	    ck.l1 + memtable_entries(ix->mt));
	fprintf(f, "problems: %" PRIu64 "\n", *problems);
	return (0);
}

/*
 * A compacted copy of the index in a new directory.  Checked first: the
 * copy parses every page, and LMDB's copy of a damaged one can corrupt
 * memory (past what the fault guard catches); a damaged index is rebuilt
 * by export and import instead.
 */
static int
lmdb_compact(struct index *base, const char *dest, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	FILE		*devnull;
	uint64_t	 problems;
	int	 rc;

	if ((devnull = fopen("/dev/null", "w")) == NULL) {
		xasprintf(cause, "/dev/null: %s", strerror(errno));
		return (INDEX_ERROR);
	}
	rc = lmdb_check(base, devnull, &problems, cause);
	fclose(devnull);
	if (rc != 0)
		return (rc);
	if (problems > 0) {
		xasprintf(cause, "index %s is damaged (--check finds %" PRIu64
		    " problem%s): not compacted; rebuild it with --export and "
		    "--import (see mhfilter(1), Damaged indexes)",
		    ix->base.path, problems, problems == 1 ? "" : "s");
		return (INDEX_ERROR);
	}
	if (mkdir(dest, 0777) == -1 && errno != EEXIST) {
		xasprintf(cause, "mkdir %s: %s", dest, strerror(errno));
		return (INDEX_ERROR);
	}
	if ((rc = mdb_env_copy2(ix->env, dest, MDB_CP_COMPACT)) != 0) {
		xasprintf(cause, "copy %s to %s: %s", ix->base.path, dest,
		    mdb_strerror(rc));
		return (INDEX_ERROR);
	}
	return (0);
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
	if ((rc = mdb_cursor_open(ix->txn, ix->docs, &cur)) != 0) {
		mdb_txn_abort(ix->txn);
		ix->txn = NULL;
		return (lm_fail(ix, rc, "export", cause));
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && rv == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		docid = k.mv_size == 8 ? get_be64(k.mv_data) : 0;
		if (k.mv_size != 8 || docrec_decode(v.mv_data, v.mv_size,
		    ix->base.p.perms, ix->sig, &d) != v.mv_size ||
		    (ix->base.p.texts &&
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

/* The meta keys of the undelivered range that ends at end (exclusive). */
#define UD_PREFIX	"undelivered:"
#define UD_KEYLEN	(sizeof UD_PREFIX - 1 + 16)
#define UO_PREFIX	"undelivered-owner:"
#define UO_KEYLEN	(sizeof UO_PREFIX - 1 + 16)
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
static uint64_t
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
static int
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
	if ((rc = mdb_put(ix->txn, ix->meta, &k, &v, 0)) != 0)
		return (rc);
	uo_key(kb, end, &k);
	if (owner == 0) {
		rc = mdb_del(ix->txn, ix->meta, &k, NULL);
		return (rc == MDB_NOTFOUND ? 0 : rc);
	}
	v.mv_size = (size_t)snprintf(num, sizeof num, "%" PRIu64, owner);
	return (mdb_put(ix->txn, ix->meta, &k, &v, 0));
}

/* Delete the undelivered range that ends at end, and its owner; LMDB's. */
static int
ud_del(struct lmdb *ix, uint64_t end)
{
	char	 kb[UO_KEYLEN + 1];
	MDB_val	 k;
	int	 rc;

	ud_key(kb, end, &k);
	if ((rc = mdb_del(ix->txn, ix->meta, &k, NULL)) != 0 &&
	    rc != MDB_NOTFOUND)
		return (rc);
	uo_key(kb, end, &k);
	rc = mdb_del(ix->txn, ix->meta, &k, NULL);
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
	if ((rc = mdb_cursor_open(ix->txn, ix->meta, &c)) != 0)
		return (lm_fail(ix, rc, "cursor", cause));
	ud_key(kb, docid + 1, &k);	/* the first range ending after docid */
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND || (rc == 0 && (k.mv_size < sizeof UD_PREFIX -
	    1 || memcmp(k.mv_data, UD_PREFIX, sizeof UD_PREFIX - 1) != 0)))
		return (0);
	if (rc != 0)
		return (lm_fail(ix, rc, "reading meta", cause));
	snprintf(kb, sizeof kb, "%.*s", (int)(k.mv_size < UD_KEYLEN ?
	    k.mv_size : UD_KEYLEN), (const char *)k.mv_data);
	if ((*end = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0 ||
	    ud_value(&v, *end, first) != 0)
		goto corrupt;
	if (*first > docid)
		return (0);
	uo_key(kb, *end, &k);
	if ((rc = mdb_get(ix->txn, ix->meta, &k, &v)) == MDB_NOTFOUND)
		return (1);
	if (rc != 0)
		return (lm_fail(ix, rc, "reading meta", cause));
	if (ud_value(&v, UINT64_MAX, owner) != 0 || *owner == 0)
		goto corrupt;
	return (1);

corrupt:
	xasprintf(cause, "%s: meta record \"%s\" is bad", ix->base.path, kb);
	return (INDEX_ERROR);
}

/* A meta key for a message: at most 40 bytes, unprintable ones as '?'. */
static void
ud_key_show(const MDB_val *k, char *out, size_t size)
{
	const unsigned char	*p = k->mv_data;
	size_t			 i;

	for (i = 0; i < k->mv_size && i < 40 && i + 1 < size; i++)
		out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
	out[i] = '\0';
}

/*
 * The delivery marks of lmdb_check: each undelivered range and owner
 * record well formed, ranges below next_doc and apart, owners document
 * numbers.  An owner record without its range is no problem: an older
 * version of mhfilter deletes the range alone.
 */
static void
check_undelivered(struct lmdb *ix, struct checking *ck)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	char		 show[48];
	uint64_t	 end, first, owner, last = 0;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->txn, ix->meta, &cur)) != 0) {
		check_walked(ck, "meta", rc);
		return;
	}
	k.mv_data = (void *)"undelivered";
	k.mv_size = strlen("undelivered");
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < strlen("undelivered") || memcmp(k.mv_data,
		    "undelivered", strlen("undelivered")) != 0)
			break;
		ud_key_show(&k, show, sizeof show);
		if ((end = ud_key_end(&k, UO_PREFIX, UO_KEYLEN)) != 0) {
			if (ud_value(&v, ix->next_doc, &owner) != 0 ||
			    owner == 0)
				problem(ck->f, ck->problems, "meta record "
				    "\"%s\": not the first document of a "
				    "writer's", show);
			continue;
		}
		if ((end = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0) {
			problem(ck->f, ck->problems, "meta record \"%s\" is "
			    "malformed", show);
			continue;
		}
		if (ud_value(&v, end, &first) != 0 || first == 0)
			problem(ck->f, ck->problems, "meta record \"%s\": "
			    "not an undelivered range", show);
		else if (end > ix->next_doc)
			problem(ck->f, ck->problems, "undelivered range "
			    "[%" PRIu64 ", %" PRIu64 ") ends past next_doc",
			    first, end);
		else if (first < last)
			problem(ck->f, ck->problems, "undelivered range "
			    "[%" PRIu64 ", %" PRIu64 ") overlaps the one "
			    "before", first, end);
		else
			last = end;
	}
	mdb_cursor_close(cur);
	check_walked(ck, "meta", rc == 0 ? MDB_NOTFOUND : rc);
}

/* Is docid one of this process's own documents (this run's)? */
static int
lmdb_own(struct index *base, uint64_t docid)
{
	struct lmdb	*ix = (struct lmdb *)base;
	size_t		 lo = 0, hi = ix->mine.n / 2, mid;

	if (ix->txn != NULL && docid >= ix->start_doc && docid < ix->next_doc)
		return (1);		/* the open transaction's */
	while (lo < hi) {		/* the last range starting <= docid */
		mid = lo + (hi - lo) / 2;
		if (ix->mine.v[2 * mid] <= docid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo > 0 && docid < ix->mine.v[2 * (lo - 1) + 1]);
}

/* The transaction just committed inserted documents of this process's. */
static void
lm_own_add(struct lmdb *ix)
{
	if (ix->next_doc == ix->start_doc)
		return;
	if (ix->mine.n > 0 && ix->mine.v[ix->mine.n - 1] == ix->start_doc) {
		ix->mine.v[ix->mine.n - 1] = ix->next_doc;
		return;
	}
	u64vec_push(&ix->mine, ix->start_doc);
	u64vec_push(&ix->mine, ix->next_doc);
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
static void
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
static int
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
static void
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
static void
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

	if ((rc = mdb_cursor_open(ix->txn, ix->meta, &c)) != 0)
		return (lm_fail(ix, rc, "cursor", cause));
	ud_key(kb, first + 1, &k);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if ((e = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0 || e > end)
			break;
		u64vec_push(&ends, e);
	}
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND) {
		u64vec_free(&ends);
		return (lm_fail(ix, rc, "reading meta", cause));
	}
	for (i = 0, rc = 0; i < ends.n && rc == 0; i++) {
		if (!disown) {
			rc = ud_del(ix, ends.v[i]);
			continue;
		}
		uo_key(kb, ends.v[i], &k);
		if ((rc = mdb_del(ix->txn, ix->meta, &k, NULL)) ==
		    MDB_NOTFOUND)
			rc = 0;
	}
	u64vec_free(&ends);
	return (rc == 0 ? 0 : lm_fail(ix, rc, "writing meta", cause));
}

/*
 * In the commit: record this batch's documents as undelivered (with
 * INDEX_TRACK), owned by this process, delete the ranges delivered since,
 * cut the replays delivered since out of their ranges, and disown the
 * ranges abandoned since.
 */
static int
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
			return (lm_fail(ix, rc, "writing meta", cause));
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
			return (lm_fail(ix, rc, "writing meta", cause));
	}
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
 * Damaged pages.  LMDB reads its pages in place, through the map, and
 * trusts them: a damaged page number sends it outside the map (SIGSEGV)
 * or past the end of the file (SIGBUS), and a page of the wrong kind fails
 * one of its assertions (abort).  Checking every page up front would cost
 * a read of the whole file at every open, and the library has no
 * checksums; so faults are caught instead.  index.c arms this guard around
 * each call into this backend (sigsetjmp there, no signal mask saved, so
 * that arming costs no system call); a SIGSEGV or SIGBUS raised, or an
 * LMDB assertion failed, while it is armed on the thread jumps back, and
 * the call returns INDEX_ERROR saying the index is damaged.  The process
 * then uses the index no more (INDEX_DAMAGED): the transaction the jump
 * left is never committed, so the damage goes no further.  A fault
 * elsewhere is not ours: the handler there was before (the default: the
 * process dies) takes it.  The price: a bug of this file's own that faults
 * inside a call is reported as damage too (the sanitizer builds still see
 * it first).  Threads must not block the two signals (util.c:
 * thread_start), or the kernel kills the process instead.  The size check
 * of lm_env_open turns the most common damage, a truncated file, into a
 * plain error before any of this.
 */
static __thread sigjmp_buf	*guard_jmp;	/* armed on this thread */
static __thread char		 guard_what[160];	/* what was caught */
static struct sigaction		 guard_segv, guard_bus;	/* as they were */
static pthread_once_t		 guard_once = PTHREAD_ONCE_INIT;

/* Arm the guard with jb (NULL disarms); returns what was armed before. */
sigjmp_buf *
lmdb_guard_arm(sigjmp_buf *jb)
{
	sigjmp_buf	*prev = guard_jmp;

	guard_jmp = jb;
	return (prev);
}

/* SIGSEGV and SIGBUS: jump back if armed, else let the old action act. */
static void
guard_fault(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
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

/* Install guard_fault (guard_install). */
static void
guard_init(void)
{
	struct sigaction	 sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = guard_fault;
	/* No mask to restore after the jump (sigsetjmp saves none). */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &guard_segv) == -1 ||
	    sigaction(SIGBUS, &sa, &guard_bus) == -1)
		fatal("sigaction");
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
int
lmdb_guard_caught(struct index *base, const char *path, sigjmp_buf *prev,
    char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;

	guard_jmp = prev;
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
int
lmdb_damaged(struct index *ix, char **cause)
{
	xasprintf(cause, "index %s is damaged: not used after the error above",
	    ix->path);
	return (INDEX_ERROR);
}

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
};
