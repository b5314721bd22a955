/*
 * The LMDB backend's own header, shared by its six files only (lmdb.c,
 * lsm.c, lmdbcheck.c, lmdbmarks.c, lmdbformat.c, lmdbguard.c) and not by
 * the rest of the program.
 * Why a second header: the backend's types are LMDB's; in mhfilter.h they
 * would be every file's to see, and would need <lmdb.h> in every file.
 * Three structs, one inside the next: struct lmstore, the LMDB side that
 * every file works through (environment, transaction, map, seals); struct
 * lsm, the band index's state, lsm.c's alone; and struct lmdb, the
 * backend's handle, which holds both and what the documents, texts,
 * groups and delivery marks need.  The band index is given only the
 * first, so what it depends on is what struct lmstore lists.  Include it
 * after <lmdb.h> and mhfilter.h.
 */

#include <stdatomic.h>

#define UNCOUNTED	UINT64_MAX

#define MAP_NONE	((const unsigned char *)UINTPTR_MAX)

#define OWNERS_FILE	"owners.lock"	/* see "Several writers" */

/*
 * The LMDB side of the backend, which all six files work through: the
 * environment, the transaction open, the band index's databases, the map
 * (where the data file is mapped, to read it with pread and to check the
 * header of an overflow page), and how far the values are sealed.  The
 * band index (lsm.c) is lent this and nothing else of the backend: it
 * calls mdb_* on it, and the calls below that take it (lm_fail, the seals,
 * the map's), and nothing that takes struct lmdb.
 */
struct lmstore {
	MDB_env		*env;
	MDB_txn		*txn;		/* the open transaction, or NULL */
	const char	*path;		/* the index's, for messages */
	int		 format;	/* as opened (3-8 read-only, else 9) */
	unsigned	 seal_stage;	/* sealed: the databases before this
					   SEAL_* stage (0: not read yet), */
	uint64_t	 seal_key;	/* and its keys below this */
	MDB_dbi		 l0;
	MDB_dbi		 l1;
	MDB_dbi		 l1y;
	int		 have_l1y;	/* l1y exists (read-only: may not) */
	size_t		 inline_max;	/* larger values go to overflow pages */
	size_t		 psize;		/* the page size */
	int		 map_full;	/* grow the map on abort */
	const unsigned char *map;	/* the map's address: NULL not known
					   yet, MAP_NONE not found */
	size_t		 mapsize;
	int		 fd;		/* of the data file, or -1 */
};

/* The band index's position, in meta; committed, and a transaction's. */
struct lsmstate {
	uint64_t	 sweep;		/* chunks merged, ever */
	uint64_t	 l0_next;	/* next l0 record */
	uint64_t	 l1_entries;
	double		 quota;		/* chunks owed to the sweep */
};

struct brun;
struct l1ref;

/*
 * The band index (lsm.c): its state, which only lsm.c reads and writes;
 * the rest of the backend calls the lsm_* functions below.
 */
struct lsm {
	struct lmstore	*db;		/* lent by the backend */
	unsigned	 bands;		/* per document */
	int		 rdonly;
	uint64_t	 next_doc;	/* l0's entries are of documents
					   below (lsm_load, lsm_add) */
	uint64_t	 mt_max;	/* memtable budget, entries */
	size_t		 young_min;	/* run_young's min */
	struct lsmstate	 committed;	/* as committed */
	struct lsmstate	 tx;		/* as the transaction has it */

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
	struct bentry	*pend;		/* entries added in this txn */
	size_t		 npend, pendsize;
	int		 defer;		/* lsm_defer: pend only, from */
	size_t		 deferred;	/* this entry of it */
	int		 defer_hold;	/* and an lsm_hold to make */
	size_t		*l0count;	/* l0_sort's scratch */
	struct buf	 rec;		/* an l0 record, written */
	unsigned	*merged;	/* chunks merged in this txn */
	size_t		 nmerged, mergedsize;
	struct bentry	*sorted;	/* scratch for merges */
	size_t		 sortedsize;
	struct buf	 chunk;		/* scratch for merges */
	struct buf	 ychunk;	/* a young run merged, encoded */
	struct bentry	*ysorted;	/* and decoded */
	size_t		 ysortedsize;
	struct l1ref	*l1map;		/* BAND_CHUNKS, from lsm_prepare */
	int		 l1valid;	/* l1map is this txn's l1 */
	struct u64vec	 bchunks;	/* a small batch's chunks, sorted, */
	struct brun	*bruns;		/* and their runs (lsm_prepare) */
	size_t		 brunsize;
	int		 bvalid;	/* bruns are this batch's */
	MDB_txn		*snap;		/* read-only: where l1map points */
	uint64_t	 snap_sweep;	/* sweep when snap was read */
	const struct ixdoc *batch;	/* the prepared batch, for prefetch */
	size_t		 nbatch;
	size_t		 ahead;		/* its slot whose loads are started */
	uint64_t	 l0_bad;	/* damaged l0 entries read (lsm_read) */
	uint64_t	 repack_at;	/* sweep of lsm_repack's next look */
};

struct lmdb {
	struct index	 base;		/* first: what index.c sees */
	struct lmstore	 db;		/* its LMDB side */
	struct lsm	 lsm;		/* its band index */
	MDB_dbi		 meta;
	MDB_dbi		 docs;
	MDB_dbi		 texts;
	MDB_dbi		 times;
	MDB_dbi		 groups;
	int		 have_groups;	/* groups exists (read-only: may not) */
	uint64_t	 next_doc;
	uint64_t	 start_doc;	/* next_doc when the txn began */
	int64_t		 now;
	uint32_t	*sig;		/* decoded signature for index_doc */
	/*
	 * The write transaction's cursors for inserts (lm_put_sealed),
	 * NULL until its first; LMDB frees them with the transaction, so
	 * lm_txn forgets them at each begin, and lm_delete closes them
	 * before it changes those databases otherwise.
	 */
	MDB_cursor	*docs_cur;
	MDB_cursor	*texts_cur;
	struct buf	 rec;		/* scratch for records */
	struct textenc	*enc;
	int		 walked;	/* lm_walk found every page sound */
	unsigned	 readers;	/* open (lmdb_reader_open) */

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

#define UD_PREFIX	"undelivered:"
#define UD_KEYLEN	(sizeof UD_PREFIX - 1 + 16)
#define UO_PREFIX	"undelivered-owner:"
#define UO_KEYLEN	(sizeof UO_PREFIX - 1 + 16)

/* lmdb.c */
int		 lm_fail(struct lmstore *, int, const char *, char **);
int		 lm_meta_get(struct lmdb *, const char *, char *, size_t);
int		 lm_meta_put(struct lmdb *, const char *, const char *);
int		 lmdb_exists(const char *, uint64_t *);
int		 lm_txn(struct lmdb *, unsigned, MDB_txn **);
int		 lm_resize(struct lmdb *, size_t);
int		 lm_lsm_load(struct lmdb *, char **);
int		 lm_meta_u64(struct lmdb *, const char *, uint64_t *, char **);
int		 lm_get(struct lmdb *, MDB_dbi, uint64_t, MDB_val *);
int		 lmdb_text(struct index *, uint64_t, struct buf *, char **);

/* lmdbformat.c */
int		 lmdb_upgrade(struct lmdb *, int, int *, char **);
int		 lm_seal_all(struct lmdb *, char **);
int		 lm_sealed(const struct lmstore *, unsigned, uint64_t);
int		 lm_unseal(const struct lmstore *, unsigned, uint64_t,
		    MDB_val *, int);
int		 lm_seal_check(const struct lmstore *, unsigned, uint64_t,
		    const MDB_val *);
int		 lm_seal_load(struct lmdb *, char **);
int		 lm_put_sealed(struct lmstore *, MDB_dbi, MDB_cursor **,
		    unsigned, MDB_val *, const void *, size_t);
int		 lm_docrec(struct lmdb *, uint64_t, const MDB_val *, uint32_t *,
		    struct docinfo *);

/* lmdbguard.c */
extern const struct index_guard lmdb_guard;
void		 guard_install(void);
void		 guard_assert(MDB_env *, const char *);

/* lsm.c: the band index */
void		 lsm_init(struct lsm *, struct lmstore *, unsigned, int,
		    size_t);
void		 lsm_set_bands(struct lsm *, unsigned);
void		 lsm_free(struct lsm *);
int		 lsm_load(struct lsm *, const struct lsmstate *, uint64_t,
		    char **);
void		 lsm_unload(struct lsm *);
void		 lsm_position(const struct lsm *, struct lsmstate *,
		    struct lsmstate *);
int		 lsm_prepare(struct lsm *, const struct ixdoc *, size_t,
		    char **);
int		 lsm_candidates(struct lsm *, size_t, const uint64_t *,
		    struct u64vec *, char **);
int		 lsm_bucket(struct lsm *, uint64_t, struct u64vec *, size_t);
int		 lsm_peek(const struct lsm *, const uint64_t *, struct u64vec *,
		    size_t *);
void		 lsm_peek_prefetch(const struct lsm *, const uint64_t *, int);
void		 lsm_add_prefetch(const struct lsm *, const uint64_t *, int);
int		 lsm_hold(struct lsm *, uint64_t, int, char **);
int		 lsm_hold_keys(struct lsm *, size_t, const uint64_t *,
		    char **);
void		 lsm_add(struct lsm *, const uint64_t *, uint64_t);
void		 lsm_defer(struct lsm *);
int		 lsm_undefer(struct lsm *, char **);
int		 lsm_flush(struct lsm *, uint64_t, char **);
void		 lsm_commit(struct lsm *);
void		 lsm_abort(struct lsm *);
void		 lsm_snap_end(struct lsm *);
void		 lsm_lost(struct lsm *);
int		 lsm_entries(struct lsm *, MDB_txn *, uint64_t *, char **);
int		 lsm_estimate(struct lsm *, MDB_txn *, uint64_t *, char **);
uint64_t	 lsm_held_entries(const struct lsm *);
size_t		 lsm_budget(const struct lsm *);
int		 l0_record(struct lsm *, const unsigned char *, size_t,
		    struct l0layout *, uint64_t *, int *);
uint64_t	 l0_bad_entries(const unsigned char *, size_t, uint64_t);
void		 lm_findmap(struct lmstore *, const unsigned char *);
int		 lm_run_count(const struct lmstore *, MDB_dbi, size_t,
		    size_t *);
void		 chunk_key(unsigned char *, unsigned, MDB_val *);

/* lmdbcheck.c */
int		 lm_overflow(struct lmstore *, const MDB_val *);
int		 lm_ovf_ok(struct lmstore *, const MDB_val *);
int		 lm_walk(struct lmdb *, char **);
int		 lm_tail_free(struct lmdb *, uint64_t, uint64_t);
int		 lmdb_info(struct index *, struct index_info *, char **);
int		 lmdb_check(struct index *, FILE *, uint64_t *, char **);
int		 lmdb_compact(struct index *, const char *, char **);

/* lmdbmarks.c */
uint64_t	 ud_key_end(const MDB_val *, const char *, size_t);
int		 ud_value(const MDB_val *, uint64_t, uint64_t *);
int		 lmdb_own(struct index *, uint64_t);
void		 lm_own_add(struct lmdb *);
void		 lm_owner_release(struct lmdb *);
int		 lmdb_undelivered(struct index *, uint64_t, char **);
void		 lmdb_delivered(struct index *, const uint64_t *, size_t,
		    const uint64_t *, size_t);
void		 lmdb_abandoned(struct index *, const uint64_t *, size_t);
int		 lm_undelivered_apply(struct lmdb *, char **);

/*
 * The fault guard's watchdog (lmdbguard.c: "Damaged pages"): the
 * backend's long loops beat now and then, so that a call that makes
 * progress is not taken for LMDB going round in circles; lm_long(1) before
 * an LMDB call that may rightly run long on its own (a commit, a copy),
 * lm_long(0) after.
 */
extern __thread _Atomic uint64_t *lm_beatp;
#define lm_beat()							\
	atomic_store_explicit(lm_beatp, atomic_load_explicit(lm_beatp,	\
	    memory_order_relaxed) + 1, memory_order_relaxed)
void		 lm_long(int);
