/*
 * mhfilter: a streaming near-duplicate filter (MinHash + LSH over an LMDB
 * or Redis index).
 *
 * The one internal header.  Data flows through the modules in this order:
 *
 *   input.c     bytes -> raw records (line, NUL, or a format's own
 *               framing, with a size limit; compressed input decompressed)
 *   format.c    the input formats, a table: each one's framing, parser and
 *               writer
 *   record.c    raw record -> (id, text) for the line, tsv and jsonl formats
 *   mail.c      a mail message or news article (-f mail) -> (id, text,
 *               time), with GMime and libxml2; a module (mhfilter-mail.so)
 *               that mailload.c opens through module.c when mail is read
 *   warc.c      a WARC record (-f warc) -> (id, text, time), its HTML
 *               read by mail.c's
 *   normalize.c text -> normalised text (case fold, NFKC, spaces, punctuation)
 *   shingle.c   normalised text -> shingle hashes (XXH3)
 *   minhash.c   shingle hashes -> K-value signature
 *   lsh.c       signature -> band keys; (b, r) from a threshold
 *   bandrun.c   band entries in memory and in sorted runs (pure; the
 *               memtable and run search/merge that lmdb.c stores)
 *   index.c     band keys -> candidates; documents in and out of the
 *               index: a dispatcher over a backend, lmdb.c (a directory)
 *               or redis.c (a Redis Cluster shared by many processes,
 *               over cluster.c); both store what codec.c encodes (the
 *               document record, texts, time keys, meta records, Redis
 *               keys and values)
 *   filter.c    a batch of records -> verdicts (the algorithm, I/O free
 *               except through index.c); phase 1 (parse, normalise, sign)
 *               is shared among worker threads
 *   pipeline.c  the one data path: sources fill batches, a writer thread
 *               decides and commits them (phase 1 of the next overlapping),
 *               and the source gets each back after its commit, counted
 *               and written (output.c); group commit for the sources of
 *               many owners (one open batch with a delay, owned slots)
 *   output.c    verdicts -> bytes
 *   stream.c    a source: files or standard input -> the pipeline ->
 *               standard output
 *   daemon.c    a source: socket clients -> the pipeline -> reply lines;
 *               notify.c talks to systemd (sd_notify, LISTEN_FDS),
 *               tls.c (a module, mhfilter-tls.so) makes the TLS contexts
 *               of its tls: listeners
 *   client.c    --connect: input read as the stream reads it, sent to a
 *               daemon, its replies written as the stream would write them
 *   milter.c    a source: Postfix or Sendmail (libmilter) -> the
 *               pipeline -> an action on each message, for each of its
 *               recipients (a record each, scoped: lsh_scope)
 *   metrics.c   a source's statistics, as a log line, over HTTP
 *               (/metrics, /healthz) and as the stream's --stats lines
 *   mhfilter.c  main: options (conf.c reads the configuration file, whose
 *               keys are the long options), then one source, the client
 *               or one maintenance mode
 *
 * Beside them: log.c (stderr or syslog), xmalloc.c (allocation that cannot
 * fail silently) and util.c (numbers, sizes, durations and times parsed;
 * byte order; SIMD dispatch; threads).
 *
 * The maintenance modes (--info, --expire, --remove, --check, --compact,
 * --export, --import) are maint.c: one index operation, then exit;
 * export.c writes and reads exports (JSON Lines) through index.c.
 *
 * normalize, shingle, minhash and lsh are pure functions: they are what the
 * stored index depends on and are pinned by known-answer tests, as are the
 * stored layouts of codec.c and the export format.  Index calls go one
 * way: callers to index.c, index.c to a backend, a backend to codec.c.
 */

#ifndef MHFILTER_H
#define MHFILTER_H

#include <pthread.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/*
 * Errors.  The functions of the index (index.c and its backends), input
 * (input.c) and output (output.c) layers return 0, or a non-negative
 * result where they say so, on success, and on failure one of these
 * codes, each of which means one thing wherever it is returned.
 * MHF_ERROR, INDEX_MISMATCH and INPUT_ABANDONED come with *cause set: an
 * allocated message that names the file, record, index or server, which
 * the caller frees (or says).  The others are conditions the caller
 * handles, and come without a cause.  Functions named in a section with a
 * convention of their own (a count, 1 for "yes") say so there.
 */
enum mhf_error {
	MHF_ERROR = -1,		/* I/O, server, corrupt data, resources */
	INDEX_AGAIN = -2,	/* map full: grown by index_abort (which the
				   caller calls unless index_commit returned
				   it), redo the transaction */
	INDEX_MISMATCH = -3,	/* not an index, or another format or other
				   parameters than asked for */
	INDEX_GONE = -4,	/* the document was removed (index_doc) */
	INDEX_NOTFOUND = -5,	/* no such meta record (meta_get_fn) */
	OUTPUT_CLOSED = -6,	/* the reader went away (EPIPE) */
	INPUT_RETRY = -7,	/* nothing this time (a signal came, or a
				   file was skipped): call again */
	INPUT_ABANDONED = -8,	/* the rest of a file was dropped (binary,
				   corrupt): call again for the next file */
	INPUT_STOP = -9		/* input_read: stop; *status says why */
};
#define INDEX_ERROR	MHF_ERROR

/*
 * Versions of what is stored.  Bump MHF_INDEX_FORMAT when the LMDB layout
 * changes, MHF_REDIS_FORMAT when the Redis one does (texts are stored alike
 * in both: a new text encoding bumps both), and MHF_SCHEME when any value
 * that goes into a signature or a band key changes (normalisation,
 * shingle hashing, MinHash, band hashing); the known-answer tests in
 * tests/unit fail loudly when either changes by accident.
 */
#define MHF_INDEX_FORMAT	9	/* LMDB; 2 to 8 are upgraded on open */
#define MHF_REDIS_FORMAT	5	/* 2 to 4 are upgraded on open */
#define MHF_SCHEME		2
#define MHF_SCHEME_NAME		"xxh3-oph16-dens-v2"

/* Exit statuses, documented in mhfilter(1). */
#define EXIT_OK			0	/* the input was filtered */
#define EXIT_ERROR		1	/* I/O, index or resource error */
#define EXIT_USAGE		2	/* bad command line */
#define EXIT_DATA		3	/* bad input with --on-bad-input=fail */
#define EXIT_MISMATCH		4	/* index parameters or version differ */

/* Limits. */
#define MHF_MAX_PERMS		1024
#define MHF_MAX_SHINGLE		64

/*
 * normalize.c, shingle.c and util.c (ascii_span) have AVX2 loops, and
 * shingle.c and minhash.c AVX-512 ones, used where the CPU has them.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define MHF_AVX2	1
#endif

/* A hint to start loading the cache line at p (no effect where unknown). */
#if defined(__GNUC__)
#define MHF_PREFETCH(p)		__builtin_prefetch(p)
#else
#define MHF_PREFETCH(p)		((void)(p))
#endif

/* A growable byte buffer. */
struct buf {
	char		*data;
	size_t		 len;
	size_t		 size;
};

/* A growable vector of 64-bit values. */
struct u64vec {
	uint64_t	*v;
	size_t		 n;
	size_t		 size;
};

/* xmalloc.c */
void		 xmalloc_init(void);
void		*xmalloc(size_t);
void		*xcalloc(size_t, size_t);
void		*xmap(size_t, size_t);
void		 xunmap(void *, size_t, size_t);
struct xpopulate *xpopulate_start(void *, size_t, size_t);
void		 xpopulate_wait(struct xpopulate *);
void		*xreallocarray(void *, size_t, size_t);
char		*xstrdup(const char *);
char		*xstrndup(const char *, size_t);
int		 xasprintf(char **, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
void		 buf_reserve(struct buf *, size_t);
void		 buf_append(struct buf *, const void *, size_t);
void		 buf_free(struct buf *);
void		 u64vec_push(struct u64vec *, uint64_t);
void		 u64vec_free(struct u64vec *);
#define TRIM_BYTES	(8 * 1024)	/* larger reused buffers are freed */
void		 buf_trim(struct buf *);
void		 u64vec_trim(struct u64vec *);
void		 u64vec_fit(struct u64vec *);

/* log.c */
void		 log_init(const char *);
int		 log_open(const char *, char **);
void		 log_warn(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
int		 log_debugging(void);
void		 log_errx(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_warnx(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_verbose(int);
void		 log_escape(const char *, char *, size_t);
void		 log_progress_line(int);
void		 log_info(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_debug(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void fatal(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void fatalx(const char *, ...)
		    __attribute__((format(printf, 1, 2)));

/* normalize.c */
#define NORM_CASEFOLD	0x1	/* Unicode case folding */
#define NORM_NFKC	0x2	/* compatibility normalisation (NFKC) */
#define NORM_SPACE	0x4	/* collapse white space runs, trim the ends */
#define NORM_PUNCT	0x8	/* punctuation becomes white space */
#define NORM_ALL	0xf
#define NORM_DEFAULT	(NORM_CASEFOLD|NORM_NFKC|NORM_SPACE)
int		 normalize_parse(const char *, int *, char **);
void		 normalize_name(int, char *, size_t);
int		 normalize(const char *, size_t, int, struct buf *);

/* shingle.c */
#define UNIT_CHAR	0
#define UNIT_WORD	1
struct shingler {
	int		 unit;		/* UNIT_CHAR or UNIT_WORD */
	unsigned	 n;		/* units per shingle */
	uint64_t	 seed;		/* XXH3 seed */
};
size_t		 shingle_hash(const struct shingler *, const char *, size_t,
		    int, struct u64vec *);
size_t		 shingle_keys(const struct shingler *, const char *, size_t,
		    int, struct u64vec *);
/*
 * A set of shingle keys, by open addressing (shingle.c): slot i holds a
 * value of the set iff slot[i].mark == own.  Zeroed, it is an empty set;
 * the memory is kept between builds.
 */
struct shslot {
	uint64_t	 v;
	uint32_t	 mark;		/* the generation that put v here */
	uint32_t	 seen;		/* the last shset_jaccard that met v */
};
struct shset {
	struct shslot	*slot;
	size_t		 size;		/* slots allocated, a power of two */
	size_t		 mask;		/* slots in use - 1 */
	unsigned	 shift;		/* 64 - log2(mask + 1) */
	uint32_t	 gen;		/* the last generation handed out */
	uint32_t	 own;		/* the generation of the set's values */
	size_t		 n;		/* values in the set */
};
void		 shset_free(struct shset *);
void		 shset_trim(struct shset *);
size_t		 shset_build(struct shset *, const uint64_t *, size_t);
size_t		 shingle_distinct(const uint64_t *, size_t, struct u64vec *);
int		 shset_has(const struct shset *, uint64_t);
double		 shset_jaccard(struct shset *, struct shset *,
		    const uint64_t *, size_t);
size_t		 shset_overlap(struct shset *, struct shset *,
		    const uint64_t *, size_t, size_t *);

/* minhash.c */
void		 minhash_sign(const uint64_t *, size_t, unsigned, uint64_t,
		    uint32_t *);
double		 minhash_similarity(const uint32_t *, const uint32_t *,
		    unsigned);

/* lsh.c */
struct lsh_choice {
	unsigned	 b;		/* bands */
	unsigned	 r;		/* rows per band */
	double		 fn;		/* P(not a candidate | s = t) */
	double		 fp;		/* P(candidate | s = t - LSH_FP_GAP) */
};
#define LSH_FP_GAP	0.25
double		 lsh_prob(double, unsigned, unsigned);
void		 lsh_rate(double, unsigned, unsigned, struct lsh_choice *);
int		 lsh_choose(unsigned, double, double, double,
		    struct lsh_choice *);
void		 lsh_keys(const uint32_t *, unsigned, unsigned, uint64_t,
		    uint64_t *);
uint64_t	 lsh_scope_key(const char *, size_t);
void		 lsh_scope(uint32_t *, unsigned, uint64_t);
void		 lsh_explain(FILE *, unsigned, double, const struct lsh_choice *);
/* What -t is a threshold of (index_params.measure). */
#define MEASURE_JACCARD		0	/* |A & B| / |A | B| */
#define MEASURE_CONTAINMENT	1	/* |A & B| / |A|, A the new record */
const char	*measure_name(int);
int		 measure_parse(const char *);
double		 lsh_bound(int, double);
void		 contain_bounds(double, uint64_t, uint64_t, uint64_t,
		    double *, double *);
#define LSH_PARTS	3	/* containment: the whole, 1/2, 1/4 */
unsigned	 lsh_parts(int);
size_t		 lsh_part_len(size_t, unsigned);
struct index_params;
void		 lsh_doc_keys(const struct index_params *, const uint64_t *,
		    size_t, uint64_t, uint32_t *, uint32_t *, uint64_t *);

/*
 * input.c: records from a list of files, delimited, with a size limit.
 * input_next and input_read return 1 for a record, 0 at the end, or an
 * error of enum mhf_error (INPUT_RETRY, INPUT_ABANDONED, INPUT_STOP are
 * theirs).
 */
struct input;
struct rawrec {
	const char	*data;		/* valid until the next input_next */
	size_t		 len;		/* without the delimiter */
	int		 toolong;	/* longer than the limit: data is empty */
	size_t		 fulllen;	/* the whole length when toolong */
	int		 delimited;	/* ended by the delimiter, not EOF */
	const char	*file;		/* name for messages */
	uint64_t	 line;		/* record number within the file */
	int		 piece;		/* mail over the limit: 1 its first
					   piece, 2 a later one; 0 whole */
	int		 more;		/* more pieces of it follow */
	int		 whole;		/* mail: a file of its own (Maildir,
					   MH, --single), not cut from an
					   mbox: no From_ line but a valid
					   one, no >From quoting */
};
struct input	*input_open(char **, int, int, int, size_t);
int		 input_next(struct input *, struct rawrec *, char **);
int		 input_read(struct input *, int, struct rawrec *, uint64_t *,
		    char **, int *);
int		 input_next_piece(struct input *, struct rawrec *, uint64_t *);
int		 input_output_fd(const char *, const char *, char **, int,
		    int *);
int		 input_wait(struct input *, int);
int		 input_from_line(const char *, size_t);
void		 input_set_pieces(struct input *);
int		 input_is_one(const char *, char **, int);
int		 input_wait_or(struct input *, int);
void		 input_progress(struct input *, uint64_t *, uint64_t *);
void		 input_close(struct input *);

/* record.c: a raw record to (id, text) for the chosen format (FORMAT_*). */
struct record {
	struct buf	 raw;		/* the bytes as read */
	struct buf	 text;		/* the text to compare (decoded) */
	struct buf	 id;		/* external id; empty: use recno */
	uint64_t	 recno;		/* 1-based across all inputs */
	uint64_t	 line;		/* record number within its file */
	const char	*file;
	uint64_t	 owner;		/* its source's owner (pipeline_add), as
					   the daemon's connection; 0: none */
	size_t		 inlen;		/* input bytes it took, delimiter too */
	int64_t		 time;		/* from --time-field; 0: none */
	uint64_t	 scope;		/* the milter's recipient (lsh_scope);
					   0: none, as every other source */
	int		 pairs;		/* every match wanted, as with
					   --pairs (a daemon client's) */
	int		 genid;		/* id given by its source (the
					   daemon's RUN:CONN:RECNO), not its
					   own: not the same when sent again */
	int		 whole;		/* mail: a file of its own (rawrec) */
};
int		 record_parse(struct record *, int, const char *, const char *,
		    char **);
int		 record_parse_timed(struct record *, int, const char *,
		    const char *, const char *, char **);
int		 record_json_agree(const char *, size_t, const char *);
void		 record_reset(struct record *);
int		 record_blank(const char *, size_t, int);
int		 record_prefix_id(const char *, size_t, int, const char *,
		    struct buf *);
int		 record_parse_line(struct record *, const char *, const char *,
		    const char *, char **);
int		 record_parse_tsv(struct record *, const char *, const char *,
		    const char *, char **);
int		 record_parse_jsonl(struct record *, const char *, const char *,
		    const char *, char **);
int		 record_parse_mail(struct record *, const char *, const char *,
		    const char *, char **);
int		 record_prefix_tsv(const char *, size_t, const char *,
		    struct buf *);
int		 record_prefix_json(const char *, size_t, const char *,
		    struct buf *);
void		 record_free(struct record *);
void		 record_idstr(const struct record *, struct buf *);
void		 record_connid(struct buf *, uint64_t, uint64_t, uint64_t);

/*
 * bandrun.c: band entries in memory (the memtable) and in sorted runs; the
 * pure half of the band index.
 */
struct bentry {
	uint64_t	 key;		/* band key */
	uint64_t	 docid;
};
#define BENTRY_SIZE	16		/* bytes of an entry in an l0 log */
#define BAND_CHUNK_BITS	14
#define BAND_CHUNKS	(1U << BAND_CHUNK_BITS)
#define L1E_SIZE	10		/* bytes of an entry in an l1 run */
#define L1E_BITS	40		/* key bits below the chunk's, kept */
#define L1E_DOCMAX	((1ULL << 40) - 1)	/* largest document number */
#define YRUN_PAD	2050		/* shorter young runs are padded */
#define ORUN_PAD	512		/* and old runs from this long */
/* A key's bit in a filter of 2^16 (memtable_read_log's keyset). */
#define KEYSET_BITS	(1U << 16)
#define KEYSET_BIT(key)	((unsigned)((key) >> 34) & (KEYSET_BITS - 1))
static inline unsigned
band_chunk(uint64_t key)
{
	return ((unsigned)(key >> (64 - BAND_CHUNK_BITS)));
}
/* What an l1 run keeps of a band key: chunk and fragment, 54 bits. */
static inline uint64_t
l1_key(uint64_t key)
{
	return (key >> (64 - BAND_CHUNK_BITS - L1E_BITS));
}
/*
 * Where an entry of key sorts in an l0 record written with the sweep at
 * chunk wm (index format 6): how many chunks the sweep merges after wm
 * before it merges the key's.
 */
static inline unsigned
l0_offset(uint64_t key, unsigned wm)
{
	return ((band_chunk(key) - wm) & (BAND_CHUNKS - 1));
}
struct memtable;
void		 put_le64(unsigned char *, uint64_t);
uint64_t	 get_le64(const unsigned char *);
void		 run_get(const unsigned char *, size_t, struct bentry *);
void		 run_put(unsigned char *, size_t, const struct bentry *);
void		 l1_get(const unsigned char *, size_t, unsigned,
		    struct bentry *);
void		 l1_put(unsigned char *, size_t, const struct bentry *);
int		 bentry_cmp(const void *, const void *);
size_t		 run_find(const unsigned char *, size_t, uint64_t,
		    struct u64vec *, size_t);
void		 run_prefetch(const unsigned char *, size_t, uint64_t);
size_t		 run_window_len(size_t, size_t);
size_t		 run_window_short(size_t, size_t);
size_t		 run_window(size_t, uint64_t, size_t, size_t *);
int		 run_find_window(const unsigned char *, size_t, size_t, size_t,
		    uint64_t, struct u64vec *, size_t);
size_t		 run_merge(unsigned, const unsigned char *, size_t,
		    const struct bentry *, size_t, uint64_t, unsigned char *);
int		 run_young(size_t, size_t, size_t, size_t);
void		 l0_sort(const struct bentry *, size_t, unsigned, size_t *,
		    unsigned char *);
/* An l0 record's header flags, and its filter (bandrun.c: l0f_*). */
#define L0_SORTED	(1ULL << 63)	/* in l0_sort's order (format 6) */
#define L0_FILTERED	(1ULL << 62)	/* with a filter (format 8) */
#define L0_HEADER	8		/* bytes of an unfiltered one's header */
#define L0F_HEADER	16		/* bytes of a filtered one's header */
#define L0F_MIN		1024		/* entries: smaller ones have none */
#define L0F_BITS	16		/* filter bits an entry */
#define L0F_BLOCK	32		/* bytes of a filter block */
#define L0F_GBITS_MAX	12		/* at most 4,096 groups of chunks */
struct l0layout {
	size_t		 n;		/* entries */
	unsigned	 gbits;		/* 2^gbits groups */
	size_t		 nb;		/* filter blocks */
	size_t		 dir;		/* offsets in the record */
	size_t		 filter;
	size_t		 entries;
	size_t		 size;
};
void		 l0_layout_plain(size_t, struct l0layout *);
void		 l0f_layout(size_t, struct l0layout *);
int		 l0f_parse(const unsigned char *, size_t, struct l0layout *);
/* A key, and the bits it sets in an l0 record's filter (l0f_mask). */
struct l0key {
	uint64_t	 key;
	uint64_t	 m[4];
};
int		 l0f_dir_read(const unsigned char *, const struct l0layout *,
		    uint32_t *);
size_t		 l0f_block(uint64_t, unsigned, size_t);
size_t		 l0f_first_block(uint64_t, size_t);
void		 l0f_mask(uint64_t, uint64_t[4]);
int		 l0f_has(const unsigned char *, const uint64_t[4]);
void		 l0f_probe(const unsigned char *, size_t,
		    const struct l0layout *, unsigned, uint64_t,
		    const struct l0key *, size_t, unsigned char *);
void		 l0f_write(const struct bentry *, uint64_t, size_t *,
		    const struct l0layout *, unsigned char *);
int		 l0_in_order(const unsigned char *, size_t, unsigned);
size_t		 l0_window(size_t, uint64_t, size_t, size_t *);
int		 l0_live_window(const unsigned char *, size_t, size_t, size_t,
		    unsigned, uint64_t, size_t *);
size_t		 yrun_size(size_t);
size_t		 orun_size(size_t);
int		 yrun_count(size_t, size_t *);
struct memtable	*memtable_create(int);
void		 memtable_free(struct memtable *);
void		 memtable_clear(struct memtable *);
void		 memtable_add(struct memtable *, uint64_t, uint64_t);
unsigned	 memtable_load(struct memtable *, uint64_t, uint64_t);
/* What memtable_read_log reads of an l0 record, and what it found. */
struct l0read {
	unsigned		 wm;	/* the sweep's chunk when written */
	uint64_t		 passed;	/* chunks it has passed since */
	const unsigned char	*state;	/* by chunk: lsm.c's held */
	const uint64_t		*keys;	/* a read-only batch's, sorted */
	size_t			 nkeys;
	const uint64_t		*bits;	/* their KEYSET_BIT bits */
	int			 all;	/* every chunk not held */
	uint64_t		 next_doc;
	uint64_t		 others;	/* out: live, neither held nor read */
	uint64_t		 bad;	/* out: of no document below next_doc */
};
void		 memtable_read_log(struct memtable *, const unsigned char *,
		    size_t, struct l0read *);
int		 u64_sorted_has(const uint64_t *, size_t, uint64_t);
void		 u64_sort_unique(struct u64vec *, struct u64vec *);
void		 memtable_commit(struct memtable *);
void		 memtable_rollback(struct memtable *);
void		 memtable_prefetch(const struct memtable *, uint64_t, int);
void		 memtable_prefetch_add(const struct memtable *, uint64_t, int);
size_t		 memtable_find(struct memtable *, uint64_t, struct u64vec *,
		    size_t);
size_t		 memtable_sorted(struct memtable *, unsigned, struct bentry **,
		    size_t *);
void		 memtable_drop(struct memtable *, unsigned);
size_t		 memtable_entries(struct memtable *);

/*
 * index.c: the index, over a storage backend (lmdb.c, redis.c).
 *
 * Every index_* function that opens or works on an index, and every
 * index_ops member but exists, returns 0 (or, for index_text, a
 * non-negative result) or an INDEX_* code of enum mhf_error;
 * index_exit_status maps those to mhfilter(1)'s exit statuses.
 *
 * Threads.  An index is used by one thread at a time and needs no lock of
 * its own: the thread that opened it, until it hands it to a pipeline;
 * then the pipeline's writer thread alone (lookups, inserts, commits,
 * delivery marks, statistics) until pipeline_exit; then the opener again,
 * which closes it.  Phase 1 (normalise, sign) in the worker threads never
 * touches it.  The one exception: between a batch's index_prepare and its
 * first insert the writer may lend readers (index_reader_open) to other
 * threads, which look up and read through them while it goes on, and
 * ends them, then index_settle, before its own lookups and its commit
 * (filter.c's lookahead).  The LMDB backend's fault guard (a SIGSEGV or
 * SIGBUS on a damaged map becomes INDEX_ERROR) is armed per call, in the
 * calling thread.
 */

#define VERIFY_EXACT	0
#define VERIFY_SIGNATURE 1
#define VERIFY_NONE	2
struct index_params {
	unsigned	 perms;		/* K */
	unsigned	 bands;		/* b */
	unsigned	 rows;		/* r */
	unsigned	 shingle;	/* n */
	int		 unit;		/* UNIT_* */
	int		 norm;		/* NORM_* */
	uint64_t	 seed;
	int		 texts;		/* texts kept for exact verification */
	int		 verify;	/* VERIFY_*, default for later runs */
	double		 threshold;	/* default for later runs */
	int		 measure;	/* MEASURE_*: what threshold is of */
	uint64_t	 mapsize;	/* initial LMDB map size (not stored) */
	uint64_t	 memtable;	/* bytes of unmerged band entries held
					   in memory (not stored) */
};
/* Which parameters the user gave, for the compatibility check. */
#define IP_PERMS	0x01
#define IP_BANDS	0x02
#define IP_ROWS		0x04
#define IP_SHINGLE	0x08
#define IP_UNIT		0x10
#define IP_NORM		0x20
#define IP_SEED		0x40
#define IP_VERIFY	0x80
#define IP_THRESHOLD	0x100
#define IP_MEASURE	0x200

#define INDEX_RDONLY	0x1	/* never write (--query-only) */
#define INDEX_TEMP	0x2	/* a throwaway index: no fsync */
#define INDEX_DAMAGED	0x4	/* a fault was caught in it (index_guard) */
#define INDEX_WALK	0x8	/* read every page before the first write
				   (maintenance: LMDB may abort rewriting
				   a damaged page; see lmdbcheck.c: lm_walk) */
#define INDEX_TRACK	0x10	/* keep each batch's documents undelivered
				   until index_delivered */
#define INDEX_LOST	0x20	/* its data went away under it (a Redis
				   emptied): no batch may go on, and the
				   process stops (pipeline_decide) */

struct index;
struct ixreader;
#define INDEX_BUCKET_MAX 1024	/* entries a lookup gives for one band key */
struct docinfo {
	uint64_t	 docid;
	const uint32_t	*sig;		/* K values, valid in this txn */
	const char	*id;
	size_t		 idlen;
	int64_t		 time;
	int		 flags;
	unsigned	 shingles;	/* its distinct shingle count's code
					   (shcount_encode), 0: not known */
};
#define DOC_UNIQUE	0x1	/* it was reported unique when inserted */
#define DOC_BYTES	0x2	/* its text is not UTF-8: shingled by bytes */
#define DOC_FLAGS	0xff	/* the flags stored */
/* An insert's flags may carry the shingle count's code, from bit 16. */
#define DOC_SHINGLES(c)	((int)((unsigned)(c) << 16))

struct index_stats {
	uint64_t	 docs;
	uint64_t	 band_entries;
	uint64_t	 size;
	uint64_t	 roundtrips;	/* to a server (Redis), 0 for LMDB */
	uint64_t	 rereads;	/* batches that read buckets again
					   after another's ticket (Redis) */
	uint64_t	 reread;	/* ... the buckets they read again */
	uint64_t	 waits;		/* candidates waited for (Redis) */
};

/*
 * One record of a batch, as index_prepare sees it: a backend that needs
 * the whole batch up front (Redis: one round trip per node, not per band)
 * writes and looks up everything there; LMDB reads the chunks of band
 * entries the batch's keys need.  The array, and what it points to, stays
 * the caller's and must live until the transaction ends: LMDB keeps it
 * for the lookups and inserts of the batch's slots.
 */
struct ixdoc {
	const uint64_t	*keys;		/* b band keys */
	const uint32_t	*sig;		/* K values */
	const char	*id;
	size_t		 idlen;
	const char	*enc;		/* the text as textenc_encode made it */
	size_t		 enclen;
	int		 flags;		/* DOC_BYTES */
	int64_t		 time;		/* 0: now */
	int		 pending;	/* 0: not looked up in this batch */
};
#define INDEX_NOSLOT	((size_t)-1)	/* a lookup or insert not prepared */

/*
 * Retention and maintenance.  index_expire and index_remove run inside a
 * write transaction (between index_begin and index_commit); the others open
 * their own.  Removed documents leave the docs, texts and times databases
 * at once; their band entries are dropped when the band runs are next
 * merged, and lookups skip them meanwhile.
 */
struct retention {
	int64_t		 max_age;	/* seconds; 0: no age limit */
	uint64_t	 max_docs;	/* 0: no count limit */
};
struct index_info {
	struct index_params p;		/* the stored parameters */
	int		 format;	/* as opened: MHF_INDEX_FORMAT, or an
					   older one read as it is */
	uint64_t	 docs;		/* documents held */
	uint64_t	 next_doc;	/* the next document number */
	int64_t		 created;	/* seconds since the epoch */
	int64_t		 oldest;	/* document times; 0 when empty */
	int64_t		 newest;
	uint64_t	 band_entries;	/* including not yet merged-out ones */
	uint64_t	 size;		/* bytes of the data file in use */
	uint64_t	 file_size;	/* bytes of the data file on disk */
	uint64_t	 bands_bytes;	/* pages of each part, in bytes */
	uint64_t	 docs_bytes;
	uint64_t	 texts_bytes;
	int		 remote;	/* Redis: the keys below apply */
	uint64_t	 pending;	/* documents not decided yet */
	uint64_t	 undelivered;	/* ranges not marked delivered */
	uint64_t	 memory;	/* bytes the masters use */
};

/*
 * The index API.  Each call is its index_ops member's (below), which says
 * what it returns; index.c adds only:
 *
 * index_is_remote(path)	1 if path is a redis:// URL, else 0.
 * index_exists(path, size)	see exists.
 * index_exit_status(rc)	EXIT_OK for rc >= 0, EXIT_MISMATCH for
 *				INDEX_MISMATCH, else EXIT_ERROR.
 * index_open			picks the backend by the path, then open.
 * index_prepare		0 when the backend has no prepare.
 * index_insert			insert with slot INDEX_NOSLOT, the text
 *				encoded by the backend.
 * index_insert_encoded		insert with the text encoded by the caller.
 * index_compact		INDEX_ERROR when the backend has no compact.
 * index_compactable(path)	0 if the backend of path has a compact, else
 *				-1 with a cause saying why not (no_compact).
 * index_password_file(file)	the credentials of every connection to a
 *				server, read by each backend that makes them
 *				(password_file): 0, or -1 with a cause.
 * index_each, index_adopt	each and adopt (export.c's).
 * index_export (export.c)	the header, then each document through each:
 *				0, or INDEX_ERROR (a write error, or each's).
 * index_import (export.c)	an export read into the index, in
 *				transactions of 1,000 documents: 0 with the
 *				count, or INDEX_ERROR naming the line.
 * index_path, index_run_start	the path as given; the first document
 *				number this process could have inserted.
 * index_reserve_run		a daemon's: make index_run_start a number
 *				no other process has (reserve_run), so that
 *				the ids a daemon makes of it are its own
 *				though another started on the index at the
 *				same time.  0; ERROR.  Nothing for a
 *				read-only or temporary index.
 * index_own			see own; docid >= index_run_start when the
 *				backend has none.
 * index_last_doc		the number of the document the last insert
 *				added (0: a backend that cannot say yet).
 * index_batch_range		the document numbers [first, end) that the
 *				last committed transaction inserted (first
 *				== end: none, or a backend that cannot say).
 * index_undelivered		see undelivered; 1 (unknown, so at least
 *				once) when the backend has none.
 * index_delivered		see delivered; nothing when the backend has
 *				none.
 * index_abandoned		see abandoned; nothing when the backend has
 *				none.
 * index_group			see group; the document itself when the
 *				backend keeps no groups.
 * index_set_group		see set_group; 0 when the backend keeps no
 *				groups.
 * index_has_readers	1 if the backend has readers, else 0.
 * index_reader_*		see reader_*; index_reader_open gives 1 when
 *				the backend has no readers.  A reader's call
 *				that faults on a damaged page gives ERROR and
 *				leaves the index be: the writer's own call
 *				meets the damage and reports it.
 * index_settle		see settle; 0 when the backend has no readers.
 */
typedef int	 (*index_each_fn)(void *, const struct docinfo *,
		    const struct buf *, char **);
int		 index_is_remote(const char *);
int		 index_compactable(const char *, char **);
int		 index_password_file(const char *, char **);
int		 index_exists(const char *, uint64_t *);
int		 index_exit_status(int);
int		 index_open(struct index **, const char *, int,
		    struct index_params *, int, char **);
void		 index_close(struct index *);
int		 index_begin(struct index *, char **);
int		 index_prepare(struct index *, const struct ixdoc *, size_t,
		    char **);
int		 index_commit(struct index *, char **);
void		 index_abort(struct index *);
int		 index_candidates(struct index *, size_t, const uint64_t *,
		    struct u64vec *, char **);
int		 index_doc(struct index *, uint64_t, struct docinfo *, char **);
int		 index_text(struct index *, uint64_t, struct buf *, char **);
int		 index_insert(struct index *, const uint64_t *,
		    const uint32_t *, const char *, size_t, const char *,
		    size_t, int, int64_t, char **);
void		 index_insert_prefetch(struct index *, const uint64_t *, int);
int		 index_insert_encoded(struct index *, size_t, const uint64_t *,
		    const uint32_t *, const char *, size_t, const char *,
		    size_t, const char *, size_t, int, int64_t, char **);
int		 index_stats(struct index *, struct index_stats *, char **);
int		 index_expire(struct index *, const struct retention *,
		    int64_t, uint64_t, uint64_t *, char **);
int		 index_remove(struct index *, const char *, size_t,
		    uint64_t *, char **);
int		 index_info(struct index *, struct index_info *, char **);
int		 index_check(struct index *, FILE *, uint64_t *, char **);
int		 index_compact(struct index *, const char *, char **);
int		 index_each(struct index *, index_each_fn, void *, char **);
int		 index_adopt(struct index *, const struct index_params *,
		    char **);
const char	*index_path(struct index *);
uint64_t	 index_run_start(struct index *);
int		 index_reserve_run(struct index *, char **);
int		 index_own(struct index *, uint64_t);
void		 index_batch_range(struct index *, uint64_t *, uint64_t *);
uint64_t	 index_last_doc(struct index *);
int		 index_undelivered(struct index *, uint64_t, char **);
void		 index_delivered(struct index *, const uint64_t *, size_t,
		    const uint64_t *, size_t);
void		 index_abandoned(struct index *, const uint64_t *, size_t);
int		 index_group(struct index *, uint64_t, uint64_t *, char **);
int		 index_set_group(struct index *, uint64_t, char **);
int		 index_has_readers(struct index *);
int		 index_reader_open(struct index *, struct ixreader **);
void		 index_reader_close(struct ixreader *);
int		 index_reader_candidates(struct ixreader *, const uint64_t *,
		    struct u64vec *, size_t *);
void		 index_reader_prefetch(struct ixreader *, const uint64_t *, int);
int		 index_reader_doc(struct ixreader *, uint64_t,
		    struct docinfo *);
int		 index_reader_text(struct ixreader *, uint64_t, struct buf *,
		    int *);
int		 index_settle(struct index *, char **);

/*
 * The storage backends behind index.c's functions: lmdb.c (a directory,
 * the default) and redis.c (--db redis://...).  Each backend's own struct
 * begins with a struct index.  Each member, with what it returns (codes as
 * above; "ERROR" is INDEX_ERROR with a cause):
 *
 * exists(path, size)	1 if path may hold an index, with *size the bytes
 *			of its data file; 0 if not.  LMDB: the data file
 *			exists; Redis: always 1 (only open can tell), size 0.
 * open(ixp, path, flags, p, given, cause)
 *			open or create the index (flags INDEX_*; path NULL:
 *			a temporary LMDB one).  p holds the parameters
 *			wanted and, on return, those in force; given
 *			(IP_*) says which the user set.  0; MISMATCH (not
 *			an index, another format, a given parameter that
 *			differs from the stored one, a format 2 LMDB index
 *			opened read-only); ERROR (no index read-only or
 *			empty, I/O, connection).  An older format is
 *			upgraded by a writable open.
 * close(ix)		free everything; a temporary index is removed.
 * begin(ix, cause)	start a batch's transaction (read-only if the
 *			index is).  0; ERROR.
 * prepare(ix, docs, n, cause)
 *			the batch's records before their lookups (may be
 *			NULL).  0; ERROR.  Redis writes and looks up
 *			everything here; LMDB locates the band runs.
 * commit(ix, cause)	make the batch durable.  0; AGAIN (the map was
 *			full: already aborted and grown); ERROR (already
 *			aborted).  Read-only: ends the transaction.
 * abort(ix)		throw the batch away (and grow a full map).
 * candidates(ix, slot, keys, out, cause)
 *			append to out the documents under each of the b
 *			band keys, once per band shared (so a document's
 *			count is its number of shared bands), at most 1,024
 *			per band (but an unprepared Redis lookup); slot is
 *			the record's place in the prepared batch, or
 *			INDEX_NOSLOT.  0; ERROR.
 * doc(ix, docid, d, cause)
 *			a document's record into d, its signature valid
 *			until the next call.  0; GONE (removed or expired;
 *			Redis: not kept, or another writer's still
 *			pending); ERROR (no such document, corrupt).
 * text(ix, docid, out, cause)
 *			a document's normalised text into out.  Its
 *			DOC_BYTES flag (0 or DOC_BYTES); ERROR (no text,
 *			gone, corrupt).
 * insert(ix, slot, keys, sig, id, idlen, text, textlen, enc, enclen,
 *     flags, when, cause)
 *			add a document (flags DOC_*, when 0: now) with its
 *			text encoded (enc) or to encode (enc NULL).  0;
 *			AGAIN (the caller aborts and redoes the batch);
 *			ERROR (id over 4 GB, no document numbers left).
 * stats(ix, st, cause)	counts for --stats.  0; ERROR.
 * expire(ix, ret, now, budget, removed, cause)
 *			remove at most budget of the documents over the
 *			retention limits, in the write transaction.  0 with
 *			*removed; AGAIN; ERROR.
 * remove(ix, id, idlen, removed, cause)
 *			remove every document with this id, in the write
 *			transaction.  0 with *removed; AGAIN; ERROR.
 * info(ix, in, cause)	what --info prints.  0; ERROR.
 * check(ix, f, problems, cause)
 *			check the consistency, writing "problem: ..." lines
 *			and a summary to f.  0 with *problems; ERROR when
 *			the check itself cannot run.
 * compact(ix, dest, cause)
 *			a compacted copy in directory dest (may be NULL).
 *			0; ERROR.
 * each(ix, fn, arg, cause)
 *			call fn(arg, d, text, cause) for every kept
 *			document (text NULL unless texts are kept), in one
 *			read transaction for LMDB (oldest first).  0; fn's
 *			first non-zero return; ERROR (corrupt document:
 *			LMDB leaves it out, goes on, and says so at the end).
 * adopt(ix, want, cause)
 *			take an export's parameters into an index with no
 *			documents yet.  0; ERROR (it has documents).
 * undelivered(ix, docid, cause)
 *			in a transaction: is the document in a range that
 *			a committed batch inserted (INDEX_TRACK) and whose
 *			output was never marked delivered, by this process
 *			or by one no longer running?  1, 0; ERROR.  May be
 *			NULL (then every earlier document may be).
 * own(ix, docid)	did this process insert the document (committed,
 *			or in the open transaction), whatever other
 *			processes inserted meanwhile?  1, 0.  May be NULL
 *			(then a document from index_run_start on is).
 * delivered(ix, ranges, nranges, replays, nreplays)
 *			the output of these ranges ([first, end) pairs) was
 *			delivered, and these earlier documents were written
 *			again as replays: forget them as undelivered in the
 *			next commit (kept and retried if it fails).  May be
 *			NULL.
 * abandoned(ix, ranges, nranges)
 *			the output of these ranges of this process's will
 *			never be written (a daemon's client went away
 *			first): in the next commit they stop being this
 *			process's, so that any other process that meets
 *			them writes them again, as a stopped process's.
 *			May be NULL.
 * group(ix, docid, group, cause)
 *			the first document of docid's group (docid itself
 *			for a unique one) into *group.  0; ERROR.  May be
 *			NULL (Redis).
 * set_group(ix, group, cause)
 *			in the write transaction: the document the last
 *			insert added is a duplicate in group.  0; AGAIN;
 *			ERROR.  May be NULL.
 * reader_open(ix, reader)
 *			in a write transaction, after prepare and before
 *			the batch's first insert: a reader, through which
 *			another thread may look up and read documents as
 *			the transaction saw them then, beside other readers
 *			and the writer, until reader_close.  The writer may
 *			read and insert meanwhile, but not look up
 *			(candidates) until the last reader is closed and
 *			settle called.  0; 1 (none now: the caller does
 *			without).  The reader_* and settle may be NULL (no
 *			readers).  Each reader_* call gives 0, 1 (not here:
 *			the caller makes the writer's own call) or ERROR (a
 *			damaged page: the caller stops reading).
 * reader_candidates(reader, keys, out, most)
 *			candidates' lookup of a prepared slot's keys, with
 *			into *most the most entries one key gave (at most
 *			INDEX_BUCKET_MAX).
 * reader_prefetch(reader, keys, stage)
 *			start loading what reader_candidates of these keys
 *			will read: stage 0 first, then 1 (the pointers 0
 *			loaded), a lookup or two ahead.  May be NULL.
 * insert_prefetch(ix, keys, stage)
 *			start loading what an insert of a document with
 *			these band keys will write, as reader_prefetch.  May
 *			be NULL.
 * reader_doc(reader, docid, d)
 *			doc's (1: gone, or not read).
 * reader_text(reader, docid, out, bytes)
 *			text's, its DOC_BYTES flag into *bytes.
 * reader_close(reader)	end it.
 * reserve_run(ix, cause)
 *			take a document number for this process alone and
 *			make it run_doc (index_reserve_run).  0; ERROR.  May
 *			be NULL.
 * settle(ix, cause)	after the last reader_close: what the inserts made
 *			while readers were open reach the band index's
 *			lookups (until then kept from the readers).  0;
 *			ERROR.  candidates and commit settle first.
 */
struct index_ops {
	const char	*name;
	int		(*exists)(const char *, uint64_t *);
	int		(*open)(struct index **, const char *, int,
			    struct index_params *, int, char **);
	void		(*close)(struct index *);
	int		(*begin)(struct index *, char **);
	int		(*prepare)(struct index *, const struct ixdoc *, size_t,
			    char **);
	int		(*commit)(struct index *, char **);
	void		(*abort)(struct index *);
	int		(*candidates)(struct index *, size_t, const uint64_t *,
			    struct u64vec *, char **);
	int		(*doc)(struct index *, uint64_t, struct docinfo *,
			    char **);
	int		(*text)(struct index *, uint64_t, struct buf *,
			    char **);
	int		(*insert)(struct index *, size_t, const uint64_t *,
			    const uint32_t *, const char *, size_t,
			    const char *, size_t, const char *, size_t, int,
			    int64_t, char **);
	int		(*stats)(struct index *, struct index_stats *, char **);
	int		(*expire)(struct index *, const struct retention *,
			    int64_t, uint64_t, uint64_t *, char **);
	int		(*remove)(struct index *, const char *, size_t,
			    uint64_t *, char **);
	int		(*info)(struct index *, struct index_info *, char **);
	int		(*check)(struct index *, FILE *, uint64_t *, char **);
	int		(*compact)(struct index *, const char *, char **);
	int		(*each)(struct index *, index_each_fn, void *, char **);
	int		(*adopt)(struct index *, const struct index_params *,
			    char **);
	int		(*undelivered)(struct index *, uint64_t, char **);
	void		(*delivered)(struct index *, const uint64_t *, size_t,
			    const uint64_t *, size_t);
	void		(*abandoned)(struct index *, const uint64_t *,
			    size_t);
	int		(*own)(struct index *, uint64_t);
	int		(*group)(struct index *, uint64_t, uint64_t *, char **);
	int		(*set_group)(struct index *, uint64_t, char **);
	const struct index_guard *guard;	/* or NULL: none */
	const char	*no_compact;	/* why compact is NULL */
	int		(*password_file)(const char *, char **);
	int		(*reader_open)(struct index *, struct ixreader **);
	void		(*reader_close)(struct ixreader *);
	int		(*reader_candidates)(struct ixreader *,
			    const uint64_t *, struct u64vec *, size_t *);
	void		(*reader_prefetch)(struct ixreader *,
			    const uint64_t *, int);
	void		(*insert_prefetch)(struct index *, const uint64_t *,
			    int);
	int		(*reader_doc)(struct ixreader *, uint64_t,
			    struct docinfo *);
	int		(*reader_text)(struct ixreader *, uint64_t,
			    struct buf *, int *);
	int		(*settle)(struct index *, char **);
	int		(*reserve_run)(struct index *, char **);
};
/* A reader of the backend's (reader_open), which starts with this. */
struct ixreader {
	struct index	*ix;
};
/*
 * A backend that reads its store in place (LMDB's map: lmdbguard.c, "Damaged
 * pages") brings a fault guard: index.c arms it around every call into the
 * backend with a jump buffer of its own; caught, after the jump, gives the
 * call's INDEX_ERROR (ix NULL: the open of path), and damaged that of any
 * later call on an index once caught (INDEX_DAMAGED).  The jump point has
 * to be in a frame that lives for the whole call, so it is index.c's, and
 * the backend lends only these three.
 */
struct index_guard {
	sigjmp_buf	*(*arm)(sigjmp_buf *);
	int		 (*caught)(struct index *, const char *, sigjmp_buf *,
			    char **);
	int		 (*damaged)(struct index *, char **);
};
struct index {
	const struct index_ops *ops;
	char		*path;		/* as given, for messages */
	int		 flags;		/* INDEX_* */
	struct index_params p;		/* in force */
	uint64_t	 run_doc;	/* the first document number of this run */
	uint64_t	 batch_first;	/* what the last commit inserted */
	uint64_t	 batch_end;
	uint64_t	 last_doc;	/* what the last insert added, or 0 */
};
extern const struct index_ops lmdb_ops;
int		 lmdb_remove_dir(const char *);
extern const struct index_ops redis_ops;

/* export.c: export and import, JSON Lines (see the top of the file). */
int		 index_export(struct index *, FILE *, char **);
int		 index_import(struct index *, FILE *, uint64_t *, char **);
int		 export_header(FILE *, const struct index_params *);
int		 export_doc(FILE *, const struct docinfo *, unsigned,
		    const struct buf *, uint64_t);

/*
 * codec.c: what both backends store, byte for byte (the layouts are
 * described at the top of the file).  docrec_decode returns the record's
 * length or 0 if it is corrupt; text_decode the DOC_BYTES flag or -1;
 * rval_decode where the text begins or 0.
 */
#define DOC_VERSION	2
#define DOC_HEADER	16
void		 docrec_encode(struct buf *, unsigned, const uint32_t *,
		    const char *, size_t, int, int64_t);
void		 docrec_append(struct buf *, unsigned, const uint32_t *,
		    const char *, size_t, int, int64_t);
size_t		 docrec_decode(const unsigned char *, size_t, unsigned,
		    uint32_t *, struct docinfo *);
void		 docrec_set_flags(unsigned char *, int);
unsigned	 shcount_encode(uint64_t);
void		 shcount_range(unsigned, uint64_t *, uint64_t *);
void		 sig_decode16(const unsigned char *, unsigned, uint32_t *);
void		 sig_encode16(const uint32_t *, unsigned, unsigned char *);
#define TIMEKEY_SIZE	16
void		 timekey_put(unsigned char *, int64_t, uint64_t);
int64_t		 timekey_time(const unsigned char *);
uint64_t	 timekey_doc(const unsigned char *);
#define SEAL_SIZE	8
enum seal_tag {			/* where a sealed value is stored */
	SEAL_DOCS = 1,
	SEAL_TEXTS,
	SEAL_L0,
	SEAL_L1,
	SEAL_L1Y,
	SEAL_DONE		/* (lmdb.c: every database sealed) */
};
uint64_t	 seal_of(const void *, size_t, unsigned, uint64_t);
void		 seal_put(unsigned char *, size_t, unsigned, uint64_t);
int		 seal_open(const void *, size_t, unsigned, uint64_t, size_t *);
struct textenc;
struct textenc	*textenc_create(void);
void		 textenc_free(struct textenc *);
void		 textenc_encode(struct textenc *, const char *, size_t, int,
		    struct buf *);
int		 text_decode(const unsigned char *, size_t, struct buf *);
int		 params_ok(const struct index_params *);
void		 params_take(struct index_params *,
		    const struct index_params *);
/* Read a meta record: 0 found, INDEX_NOTFOUND, or INDEX_ERROR. */
typedef int	 (*meta_get_fn)(void *, const char *, char *, size_t);
/* Write a meta record: 0, or the backend's error. */
typedef int	 (*meta_put_fn)(void *, const char *, const char *);
int		 meta_write(const struct index_params *, int, int64_t,
		    meta_put_fn, void *);
int		 meta_read(struct index_params *, int, int, const char *,
		    meta_get_fn, void *, char **);
int		 meta_number(const char *, uint64_t, uint64_t *);
struct metatext {			/* Redis's meta string */
	const char	*s;		/* for metatext_get */
	size_t		 len;
	struct buf	*out;		/* for metatext_put */
};
int		 metatext_get(void *, const char *, char *, size_t);
int		 metatext_put(void *, const char *, const char *);
void		 metatext_set_format(const struct metatext *, int,
		    struct buf *);
#define RVAL_PENDING	'P'	/* a Redis document not yet decided */
#define RVAL_KEPT	'K'
#define RVAL_GROUPED	'G'	/* kept, in an earlier document's group */
void		 rkey_ns(struct buf *, const char *, const char *);
void		 rkey_doc(struct buf *, const char *, uint64_t);
void		 rkey_band(struct buf *, const char *, uint64_t);
uint64_t	 rkey_docid(const char *, size_t, const char *);
void		 rud_encode(struct buf *, uint64_t, uint64_t, uint64_t);
int		 rud_decode(const char *, size_t, uint64_t *, uint64_t *,
		    uint64_t *);
void		 rval_encode(struct buf *, int, unsigned, const uint32_t *,
		    const char *, size_t, int, int64_t, const char *, size_t);
void		 rval_keep(struct buf *, const char *, size_t, int, uint64_t);
size_t		 rval_decode(const char *, size_t, unsigned, uint32_t *,
		    struct docinfo *, int *, uint64_t *);

/*
 * cluster.c: a Redis Cluster client (or a single Redis) over hiredis, for
 * the Redis index backend.  Commands are queued, each routed by the hash
 * slot of its key, then sent pipelined: cluster_exec writes every node's
 * queue before reading any replies, so a batch costs one round trip per
 * node.  It follows MOVED and ASK, re-reads the slot map after a failover
 * and retries with backoff until its deadline.
 */
struct cluster;
struct redisReply;
struct cluster	*cluster_connect(const char *, double, char **);
void		 cluster_close(struct cluster *);
void		 cluster_auth(const char *, const char *);
int		 cluster_set_name(struct cluster *, const char *, char **);
size_t		 cluster_queue(struct cluster *, const char *, size_t, int,
		    const char **, const size_t *);
int		 cluster_exec(struct cluster *, char **);
const struct redisReply *cluster_reply(struct cluster *, size_t);
size_t		 cluster_queued(struct cluster *);
void		 cluster_reset(struct cluster *);
void		 cluster_wait(struct cluster *, int, int);
unsigned	 cluster_nodes(struct cluster *);
uint64_t	 cluster_roundtrips(struct cluster *);
int		 cluster_is_cluster(struct cluster *);
unsigned	 cluster_masters(struct cluster *);
size_t		 cluster_queue_node(struct cluster *, unsigned, int,
		    const char **, const size_t *);
unsigned	 key_slot(const char *, size_t);
/* The pure parts of cluster.c, for its tests. */
struct cluster_addr {
	char		*host;		/* without [] for IPv6 */
	int		 port;
};
#define CLUSTER_MOVED	1
#define CLUSTER_ASK	2
int		 cluster_parse_hosts(const char *, struct cluster_addr **,
		    size_t *, char **);
void		 cluster_free_hosts(struct cluster_addr *, size_t);
int		 cluster_parse_redirect(const char *, size_t, unsigned *,
		    char **, int *);

/* filter.c: the algorithm over one batch of records. */
#define V_UNPARSED	-2	/* read, not parsed yet: phase 1 parses */
#define V_PENDING	-1	/* not decided yet: filter_decide decides */
#define V_UNIQUE	0	/* novel: indexed and written */
#define V_DUPLICATE	1	/* near-duplicate of an earlier document */
#define V_EMPTY		2	/* nothing to compare: passed through */
#define V_BAD		3	/* malformed: passed or skipped by policy */
#define V_TOOLONG	4	/* over --max-bytes: skipped */
#define V_SKIP		5	/* left out by --on-bad-input: not written */
#define V_UNCHECKED	6	/* mail that cannot be judged (error says
				   why): passed through, never indexed */
/*
 * --replay: a record whose own copy (same id, same text) an earlier run
 * indexed as unique is written again (a replay) only if that copy's batch
 * was never marked delivered (REPLAY_UNDELIVERED; otherwise it is seen),
 * or always (REPLAY_ALL: at least once, as the daemon answers).
 */
#define REPLAY_UNDELIVERED 0
#define REPLAY_ALL	1
struct filter_opts {
	struct index_params p;
	int		 verify;	/* VERIFY_* */
	int		 chain;		/* index duplicates too */
	int		 query_only;
	int		 want_pairs;
	int		 want_held;	/* containment: what an earlier
					   document a unique record holds
					   (shown by -a, -p, the servers) */
	unsigned	 max_candidates;
	unsigned	 threads;	/* for normalising, shingling, signing */
	int		 replay;	/* REPLAY_*: which copies are replays */
	int		 run_unsure;	/* this run's own documents may be
					   undelivered too (the daemon's
					   clients may go away first) */
	/*
	 * Parses V_UNPARSED records in phase 1: 0, 1 for mail not to judge
	 * (V_UNCHECKED, the cause its reason) or -1 and a cause.
	 */
	int		(*parse)(struct record *, void *, char **);
	void		*parse_arg;
	/*
	 * Mail: may a record of the first text (normalised) be a copy of a
	 * document of the second (mail_attach_within)?  NULL: any may.
	 */
	int		(*within)(const char *, size_t, const char *, size_t);
	struct retention ret;		/* expired a bounded amount per batch */
};
struct pair {
	uint64_t	 docid;
	struct buf	 id;		/* its external id */
	double		 sim;
	int		 contains;	/* the record holds it (containment),
					   sim its share: not a match */
};
struct verdict {
	int		 kind;		/* V_* */
	int		 replay;	/* same id seen before: reported again */
	int		 seen;		/* V_DUPLICATE of its own delivered copy */
	uint64_t	 self;		/* an undelivered earlier copy that it
					   was decided again for (a replay, or
					   a duplicate judged again) */
	uint64_t	 doc;		/* the document it inserted, or 0 (or
					   a backend's token for one it
					   numbers at its commit) */
	char		*error;		/* V_BAD, V_TOOLONG: why */
	double		 sim;		/* of the best match */
	struct buf	 match;		/* the best match's external id */
	struct buf	 group;		/* V_DUPLICATE: its group's first id */
	struct pair	*pairs;		/* every verified match (--pairs) */
	size_t		 npairs;
	size_t		 pairsize;
	struct buf	 contains;	/* V_UNIQUE, containment: an earlier
					   document it holds, else empty */
	double		 contains_sim;	/* the share of it held */
};
struct filter_stats {
	uint64_t	 candidates;	/* candidates examined */
	uint64_t	 verified;	/* exact comparisons made */
	uint64_t	 verified_same;	/* of which of the same text */
	uint64_t	 ahead;		/* records looked up ahead */
	uint64_t	 ahead_again;	/* of which looked up again */
	uint64_t	 verified_ahead; /* similarities computed ahead */
	uint64_t	 expired;	/* documents removed by retention */
	uint64_t	 invalid_utf8;
};
struct filter;
struct fbatch;
struct filter	*filter_create(const struct filter_opts *);
void		 filter_free(struct filter *);
struct fbatch	*fbatch_create(struct filter *);
void		 fbatch_free(struct fbatch *);
void		 filter_prepare_start(struct fbatch *, struct record *,
		    struct verdict *, size_t);
void		 filter_prepare_wait(struct fbatch *);
void		 fbatch_truncate(struct fbatch *, size_t);
void		 fbatch_skip(struct fbatch *, size_t);
int		 filter_decide(struct fbatch *, struct index *, char **);
void		 filter_on_ahead(struct filter *, void (*)(void *), void *);
void		 filter_stats(struct filter *, struct filter_stats *);
void		 filter_unreplay(struct filter *, const uint64_t *, size_t);
void		 filter_abandon(struct filter *, const uint64_t *, size_t);
void		 filter_owners_ended(struct filter *, const uint64_t *, size_t);
void		 filter_on_refresh(struct filter *, void (*)(void *), void *);
void		 verdict_pair(struct verdict *, uint64_t, const char *, size_t,
		    double);
void		 verdict_reset(struct verdict *);
void		 verdict_free(struct verdict *);

/*
 * output.c: verdicts to bytes.  Its writers return 0, MHF_ERROR with a
 * cause, or OUTPUT_CLOSED when the reader went away (EPIPE: no cause).
 */
#define OUT_UNIQUE	0	/* the unique records, as read */
#define OUT_DUPLICATES	1	/* the duplicate records, as read */
#define OUT_ANNOTATE	2	/* every record with its verdict */
#define OUT_PAIRS	3	/* earlier id, later id, similarity */
#define OUT_NONE	4	/* nothing: the exit status says it (--mda) */
#define OUT_CLUSTERS	5	/* record id, group id */
#define OUT_MODE	0xff
#define OUT_GROUP	0x100	/* with the group (--group) */
struct output;
struct output	*output_open(int, int, int, int, int);
struct output	*output_open_quarantine(const char *, int, int, int, char **);
int		 output_record(struct output *, const struct record *,
		    const struct verdict *, char **);
int		 output_piece(struct output *, const struct record *,
		    const struct verdict *, int, int, char **);
int		 output_flush(struct output *, char **);
int		 output_sync(struct output *, char **);
const char	*verdict_name(const struct verdict *);
void		 output_close(struct output *);
void		 output_field(struct buf *, const char *, size_t);
#define MAIL_FIELD	"X-Mhfilter"	/* the verdict's header field */
void		 output_mail_header(struct buf *, const struct verdict *, int,
		    const char *);
void		 output_mail_value(struct buf *, const struct verdict *, int);
int		 output_mail_from(const struct record *, int);
/* The formats' writers (format.c's write): one record, or a piece. */
int		 output_write_line(struct output *, const struct record *,
		    const struct verdict *, int, int, char **);
int		 output_write_json(struct output *, const struct record *,
		    const struct verdict *, int, int, char **);
int		 output_write_mail(struct output *, const struct record *,
		    const struct verdict *, int, int, char **);
int		 output_write_warc(struct output *, const struct record *,
		    const struct verdict *, int, int, char **);

/*
 * format.c: the input formats (-f), one entry each in a table.  The
 * sources, the pipeline and output.c ask a format's entry what to do and
 * never which format it is; a new format is a new entry.  FORMAT_* are
 * the entries' places (pipeline_opts.format), for the callers that name
 * one.
 */
#define FORMAT_LINE	0
#define FORMAT_TSV	1
#define FORMAT_JSONL	2
#define FORMAT_MAIL	3	/* RFC 5322/5536 messages (mail.c) */
#define FORMAT_WARC	4	/* ISO 28500 web archives (warc.c) */
#define FORMAT_COUNT	5
/*
 * How input.c cuts a file into records (pipeline_opts.framing), apart
 * from the delimiter: FRAME_DELIM at the delimiter ('\n', or NUL with
 * -z); FRAME_MBOX before each From_ line of an mbox, a Maildir given as a
 * directory read a message a file; FRAME_SINGLE each input one record
 * (--single); FRAME_WARC by each WARC record's Content-Length, a .warc.gz
 * at the end of each gzip member.  On a socket (daemon.c, client.c)
 * records always end with the delimiter, NUL for the formats framed otherwise.
 */
#define FRAME_DELIM	0
#define FRAME_MBOX	1
#define FRAME_SINGLE	2
#define FRAME_WARC	3
#define FMT_FIELDS	0x1	/* --text-field, --id-field, --time-field */
#define FMT_PIECES	0x2	/* over --max-message passed through in
				   pieces, never dropped (input_set_pieces) */
#define FMT_MAILBOX	0x4	/* a quarantine is an mbox or a Maildir,
				   with the X-Mhfilter field */
#define FMT_LOG_ALL	0x8	/* -v logs every record, not only the
				   duplicates and the unchecked */
#define FMT_FILES	0x10	/* its records hold any byte: read from
				   files only, never from a socket or -z */
struct pipeline_opts;
struct format {
	const char	*name;		/* for -f */
	const char	*alias;		/* another name for -f, not listed */
	int		 framing;	/* FRAME_* of its files, unless -z */
	int		 flags;		/* FMT_* */
	const char	*blank;		/* the bytes of a line left out as
					   blank (record_blank), or NULL */
	/* A record's text, id and time (record_parse_timed). */
	int		(*parse)(struct record *, const char *, const char *,
			    const char *, char **);
	/* An over-long record's id from its first bytes, or NULL. */
	int		(*prefix_id)(const char *, size_t, const char *,
			    struct buf *);
	/* Queue a record (first and last) or a piece of one (FMT_PIECES)
	   as --duplicates or --annotate or the default output wants it. */
	int		(*write)(struct output *, const struct record *,
			    const struct verdict *, int, int, char **);
	/* Before any record, from the options (or NULL): 0, or -1 and a
	   cause. */
	int		(*init)(const struct pipeline_opts *, char **);
};
const struct format *format_get(int);
int		 format_find(const char *);
const char	*format_list(void);

/*
 * mail.c (the module mhfilter-mail.so): a mail message or news article to
 * (text, id, time); mailload.c: loading it, and the options of mail input.
 */
#define MAIL_STRIP_QUOTES 0x1	/* quoted reply text and its attribution */
#define MAIL_STRIP_SIG	0x2	/* the signature after "-- " */
#define MAIL_STRIP_FOOTER 0x4	/* a mailing list's footer */
#define MAIL_STRIP_ALL	0x7
#define MAIL_STRIP_DEFAULT MAIL_STRIP_ALL
#define MAIL_NO_ID	0x100	/* leave the id empty */
#define MAIL_EXIT_DUPLICATE 0	/* --mda: the message is a duplicate */
#define MAIL_EXIT_UNIQUE 1	/* --mda: deliver it as usual */
int		 mail_init(char **);
void		 mailmod_init(void);
int		 mailmod_extract(const char *, size_t, int, struct buf *,
		    struct buf *, int64_t *, struct buf *, char **);
int		 mail_allow_add(const char *, char **);
void		 mail_set_flags(int);
void		 mail_set_limits(uint64_t, size_t);
void		 mail_warn_unchecked(const char *, uint64_t, const char *);
int		 mail_flags(void);
int		 mail_strip_parse(const char *, int *, char **);
int		 mail_extract(const char *, size_t, int, struct buf *,
		    struct buf *, int64_t *, char **);
#define MAIL_ATTACH	"attachment"	/* an attachment's line in a text: */
#define MAIL_DIGEST	32		/* that, a space, as many hex digits */
int		 mail_attach_within(const char *, size_t, const char *,
		    size_t);
void		 mailmod_html(const char *, size_t, const char *,
		    struct buf *);
int		 mail_html(const char *, size_t, const char *, struct buf *,
		    char **);

/* warc.c: WARC records (-f warc), framed by input.c. */
#define WARC_HEADER_MAX	65536	/* bytes of a record's header, at most */
struct warc_hdr {
	size_t		 hlen;		/* version line, fields, blank line */
	uint64_t	 clen;		/* Content-Length: the block's bytes */
	uint64_t	 total;		/* the record's, its two CRLFs too */
};
int		 warc_header(const char *, size_t, struct warc_hdr *,
		    char **);
int		 warc_parse(struct record *, const char *, const char *,
		    const char *, char **);
int		 warc_init(const struct pipeline_opts *, char **);
struct pl_counts;
int		 mail_mda_status(const struct pl_counts *, int, int);

/* conf.c: the configuration file, "key = value" lines. */
struct conf_entry {
	char		*key;
	char		*value;		/* NULL: a bare key */
	unsigned	 line;
};
int		 conf_load(const char *, struct conf_entry **, size_t *,
		    char **);
void		 conf_free(struct conf_entry *, size_t);

/* notify.c: systemd's notification socket and socket activation. */
struct notify_fd {
	int		 fd;
	char		*name;		/* from LISTEN_FDNAMES, or "" */
};
int		 notify_send(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
int		 notify_listen_count(void);
size_t		 notify_listen_fds(struct notify_fd **);
uint64_t	 notify_watchdog_usec(void);

/*
 * pipeline.c: the one data path from every source to the index and back.
 * A source fills batches with raw records and submits them; a writer
 * thread decides and commits each (phase 1 of the next one overlapping);
 * the source gets them back, counted and written, in its own thread.
 */
#define POLICY_SKIP	0	/* --on-bad-input */
#define POLICY_PASS	1
#define POLICY_FAIL	2
struct pipeline_opts {
	int		 format;	/* FORMAT_* */
	int		 framing;	/* FRAME_* */
	int		 delim;		/* '\n' or NUL */
	const char	*text_field;
	const char	*id_field;
	const char	*time_field;	/* jsonl: the document time, or NULL */
	uint64_t	 max_bytes;
	uint64_t	 max_message;	/* mail: held whole up to this size */
	int		 policy;	/* POLICY_* */
	int		 mode;		/* OUT_*, OUT_GROUP */
	size_t		 batch;		/* records per batch (--batch) */
	int		 track;		/* mark batches delivered (INDEX_TRACK) */
	int		 quiet;
	int		 stop_on_error;	/* a failure stops it all (stream) */
};
/* Counters, kept by the pipeline in the source's thread. */
struct pl_counts {
	uint64_t	 records;
	uint64_t	 unique;
	uint64_t	 replayed;
	uint64_t	 duplicates;
	uint64_t	 seen;		/* of the duplicates: already delivered */
	uint64_t	 empty;
	uint64_t	 invalid;
	uint64_t	 too_long;
	uint64_t	 unchecked;	/* V_UNCHECKED: mail passed unjudged */
	uint64_t	 failed;	/* in a batch that did not commit */
	uint64_t	 blank;		/* blank lines left out (stream.c) */
	uint64_t	 bytes;
	uint64_t	 batches;
	double		 batch_seconds;	/* deciding and committing */
	double		 batch_max;
	double		 batch_last;
};
#define PL_FAILED	1	/* plbatch rc: the commit failed (cause) */
#define PL_DROPPED	2	/* not decided: the pipeline had stopped */
struct plbatch {
	struct record	*recs;
	struct verdict	*vs;
	size_t		 n;		/* slots in use */
	size_t		 bytes;		/* raw bytes held */
	struct plslot	*slots;		/* pipeline_add's: whose each is */
	int		 rc;		/* 0: committed, or PL_* */
	char		*cause;		/* PL_FAILED: why */
	uint64_t	 first;		/* the documents its commit inserted */
	uint64_t	 end;
	/* The pipeline's. */
	size_t		 size;		/* slots allocated */
	size_t		 max;		/* at most (--batch) */
	double		 seconds;
	uint64_t	 records;
	uint64_t	 inbytes;
	uint64_t	 invalid;
	uint64_t	 too_long;
	struct filter_stats fst;
	struct fbatch	*fb;
	int		 state;
	uint64_t	 seq;
	uint64_t	 after;		/* batches delivered when it opened */
	struct plbatch	*next;
};
/* Whose a record of a shared batch is (pipeline_add): the source's. */
struct plslot {
	void		*owner;		/* a client, a message; NULL: none */
	int		 tag;		/* what the slot is, to the source */
};
/*
 * A source whose owners (the daemon's clients, the milter's messages)
 * share one open batch (group commit): it adds their records with
 * pipeline_add, which opens a batch when none is; the batch is submitted
 * when full (pipeline_added), when its delay is over (pipeline_due), or
 * at once (pipeline_flush).  Records carry their owner's number (record
 * owner): under --on-bad-input fail, a bad record stops its owner's later
 * records.
 */
struct plsource {
	/* A batch was opened: its delay starts (a timer, a thread). */
	void		(*opened)(void *);
	/* An id for an owner's record that has none (phase 1, a worker). */
	void		(*id)(void *, struct record *);
	/* Where an owner's record came from, for the log. */
	void		(*where)(void *, const struct record *, char *,
			    size_t);
	void		*arg;
};
struct pipeline;
typedef void	(*pl_deliver_fn)(void *, struct plbatch *);
struct pipeline	*pipeline_create(const struct pipeline_opts *,
		    const struct filter_opts *, struct index *);
void		 pipeline_free(struct pipeline *);
void		 pipeline_exit(struct pipeline *);
void		 pipeline_set_output(struct pipeline *, struct output *,
		    const char *);
void		 pipeline_set_deliver(struct pipeline *, pl_deliver_fn,
		    void *);
const struct pipeline_opts *pipeline_options(struct pipeline *);
struct index	*pipeline_index(struct pipeline *);
int		 pipeline_notify_fd(struct pipeline *);
struct pl_counts *pipeline_counts(struct pipeline *);
int		 pipeline_stats(struct pipeline *, struct filter_stats *,
		    struct index_stats *);
int		 pipeline_status(struct pipeline *);
size_t		 pipeline_inflight(struct pipeline *);
struct plbatch	*pipeline_get(struct pipeline *, int);
int		 plbatch_full(const struct plbatch *, size_t);
struct record	*plbatch_add(struct plbatch *, size_t, size_t);
struct record	*plbatch_add_empty(struct plbatch *, size_t, char *);
void		 pipeline_submit(struct pipeline *, struct plbatch *);
size_t		 pipeline_deliver(struct pipeline *, int);
int		 pipeline_finish(struct pipeline *);
void		 pipeline_set_source(struct pipeline *,
		    const struct plsource *, double);
int		 pipeline_ready(struct pipeline *);
struct record	*pipeline_add(struct pipeline *, void *, int, size_t,
		    size_t);
struct record	*pipeline_add_parsed(struct pipeline *, void *, size_t,
		    const struct record *);
struct record	*pipeline_add_empty(struct pipeline *, void *, int);
void		 pipeline_added(struct pipeline *);
double		 pipeline_open_left(struct pipeline *);
void		 pipeline_due(struct pipeline *);
void		 pipeline_flush(struct pipeline *);
void		 pipeline_count_alone(struct pipeline *, int, uint64_t);
void		 pipeline_print_stats(struct pipeline *, double);
/* A batch's delivery marks, taken by a source that defers them. */
struct plmarks {
	struct u64vec	 ranges;	/* first, end pairs of documents */
	struct u64vec	 replays;	/* earlier documents written again */
};
void		 pipeline_defer_marks(struct pipeline *);
struct plmarks	*pipeline_marks_of(struct pipeline *, struct plbatch *,
		    char **);
int		 pipeline_marks_split(const struct plbatch *);
void		 pipeline_marks_add(struct plmarks *, const struct plbatch *,
		    size_t);
void		 pipeline_marks_give(struct pipeline *, struct plmarks *);
void		 pipeline_marks_lose(struct pipeline *, struct plmarks *);
void		 pipeline_owner_ended(struct pipeline *, uint64_t);
void		 pipeline_marks_losing(struct pipeline *,
		    const struct plmarks *);
void		 pipeline_marks_free(struct plmarks *);
void		 pipeline_set_quarantine(struct pipeline *, struct output *,
		    const char *);
int		 pipeline_write_piece(struct pipeline *, const struct record *,
		    const struct verdict *, int, int);
void		 pipeline_warn_unchecked(struct pipeline *,
		    const struct record *, const char *);

/* stream.c: the files (or standard input) through the pipeline. */
struct stream_opts {
	const char	*output;	/* --output, or NULL */
	const char	*duplicates_to;	/* --duplicates-to, or NULL */
	int		 stats;		/* --stats */
	int		 progress;
};
int		 stream_run(const struct stream_opts *, struct pipeline *,
		    char **, int);

/* daemon.c: the socket server and its protocol, over the pipeline. */
#define PROTOCOL_VERSION 1	/* of the reply lines; see mhfilter(1) */
struct tls_opts {
	const char	*cert;		/* --tls-cert: PEM chain */
	const char	*key;		/* --tls-key: PEM */
	const char	*client_ca;	/* --tls-client-ca, or NULL */
};
struct daemon_opts {
	double		 batch_delay;	/* seconds */
	char		**listen;	/* "unix:PATH", "tcp:HOST:PORT", "tls:" */
	size_t		 nlisten;
	struct tls_opts	 tls;
	int		 trusted_network; /* plaintext tcp: beyond loopback */
	const char	*http;		/* HOST:PORT or NULL */
	const char	*output;	/* file, "-" for stdout, or NULL */
	const char	*log_file;
	uint64_t	 max_clients;
	double		 idle_timeout;	/* seconds, 0 for none */
	int		 stats;		/* statistics at exit */
};
int		 daemon_run(const struct daemon_opts *, struct pipeline *);
int		 daemon_check_http(const char *, int, char **);
int		 daemon_check_listen(const struct daemon_opts *, char **);
int		 daemon_command(const char *, size_t);
int		 daemon_taken(const char *, size_t, uint64_t *);

/*
 * metrics.c: a serving source's statistics, as a log line (SIGUSR1,
 * --stats, the daemon's STATS) and as /metrics, and the HTTP server of
 * /metrics and /healthz (--http) on the source's event base.
 */
#define MS_LINE		1		/* the log line and STATS */
#define MS_METRIC	2		/* /metrics */
#define MS_BOTH		3
#define MS_STREAM	4		/* the stream's --stats lines */
#define MSTATS_MAX	64
struct mstat {
	const char	*name;
	const char	*label;		/* /metrics: name{label}, or NULL */
	const char	*help;
	int		 counter;	/* a Prometheus counter, else a gauge */
	int		 where;		/* MS_* */
	int		 prec;		/* MS_STREAM: decimals */
	double		 value;
};
struct mstats {
	struct mstat	 v[MSTATS_MAX];
	size_t		 n;
};
struct metrics_src {
	/* Fill in the source's statistics (mstats_add). */
	void		(*stats)(void *, struct mstats *);
	/* NULL when well (200), else why not (503). */
	const char	*(*health)(void *);
	void		*arg;
};
struct metrics;
struct event_base;
void		 mstats_add(struct mstats *, const char *, const char *, int,
		    int, double, const char *);
void		 mstats_pipeline(struct mstats *, struct pipeline *, double);
void		 mstats_line(const struct mstats *, struct buf *, int);
void		 mstats_log(void (*)(void *, struct mstats *), void *);
struct metrics	*metrics_new(struct event_base *, const struct metrics_src *,
		    char **);
void		 metrics_free(struct metrics *);
int		 metrics_parse(const char *, char **, uint64_t *, char **);
int		 metrics_bind(struct metrics *, const char *, char *, size_t,
		    char **);
int		 metrics_accept(struct metrics *, int);
void		 metrics_batch(struct metrics *, double);

/*
 * tls.c, built as the module mhfilter-tls.so: the daemon's TLS, with
 * OpenSSL.  Its one symbol, tlsmod, is this table; tls_module (module.c)
 * opens the module and gives it.
 */
struct ssl_ctx_st;
struct ssl_st;
struct bufferevent;
struct event_base;
/* The client's TLS (--connect tls:). */
struct tls_client_opts {
	const char	*cert;		/* --tls-cert: its own, or NULL */
	const char	*key;		/* --tls-key */
	const char	*ca;		/* --tls-ca: the server's CA, or NULL
					   for the system's */
};
#define TLSC_HANDSHAKE	0		/* tlsmod's client_io ops */
#define TLSC_READ	1
#define TLSC_WRITE	2
#define TLSC_SHUTDOWN	3
#define TLSC_WANT_READ	(-2)
#define TLSC_WANT_WRITE	(-3)
struct tlsmod {
	/* A server context from the options, or NULL with a cause. */
	struct ssl_ctx_st *(*context)(const struct tls_opts *, char **);
	void	 (*context_free)(struct ssl_ctx_st *);
	/* An accepted connection's bufferevent, or NULL. */
	struct bufferevent *(*accept)(struct ssl_ctx_st *, struct event_base *,
		    int);
	void	 (*close_notify)(struct bufferevent *);
	/* Why a connection failed; the fallback if OpenSSL does not say. */
	void	 (*failure)(struct bufferevent *, const char *, char *,
		    size_t);
	/* Its protocol and peer certificate, for a log line. */
	void	 (*describe)(struct bufferevent *, char *, size_t);
	/* Move up to max bytes OpenSSL holds decrypted to the input. */
	size_t	 (*read_pending)(struct bufferevent *, size_t);

	/* The client's (client.c): a context, or NULL with a cause. */
	struct ssl_ctx_st *(*client_context)(const struct tls_client_opts *,
		    char **);
	void	 (*client_context_free)(struct ssl_ctx_st *);
	/* A session on a connected socket, to server host; NULL, cause. */
	struct ssl_st *(*client_new)(struct ssl_ctx_st *, int, const char *,
		    char **);
	/* TLSC_* op: bytes (1: handshake done), 0 at the end, TLSC_WANT_*,
	   or -1 with a cause. */
	int	 (*client_io)(struct ssl_st *, int, void *, size_t, char **);
	void	 (*client_free)(struct ssl_st *);
};
extern const struct tlsmod tlsmod;

/* module.c: opening the modules (mail, TLS). */
int		 module_open(const char *, const char *, const char *const *,
		    void **, size_t, char **);
const struct tlsmod *tls_module(char **);

/*
 * client.c: --connect ADDR, the stream's records through a daemon, its
 * verdicts written as the stream writes them.
 */
struct client_opts {
	const char	*addr;		/* unix:PATH, tcp: or tls:HOST:PORT */
	const char	*output;	/* --output, or NULL */
	struct tls_client_opts tls;
	uint64_t	 retries;	/* --connect-retries */
	uint64_t	 window;	/* --connect-window: records */
};
int		 client_run(const struct client_opts *,
		    const struct pipeline_opts *, char **, int);
int		 client_check_addr(const char *, char **);

/* milter.c: a mail filter for Postfix and Sendmail, over the pipeline. */
#define MILTER_HEADER		0	/* --milter-action */
#define MILTER_QUARANTINE	1
#define MILTER_REJECT		2
#define MILTER_DISCARD		3
#define MILTER_SCOPE_RECIPIENT	0	/* --milter-scope */
#define MILTER_SCOPE_MESSAGE	1
struct milter_opts {
	const char	*socket;	/* libmilter's: unix:PATH, inet:PORT@HOST */
	int		 action;	/* MILTER_*: what a duplicate gets */
	int		 scope;		/* MILTER_SCOPE_*: who had it */
	const char	*http;		/* --http HOST:PORT, or NULL */
	const char	*log_file;	/* --log-file, or NULL */
	char		 reply_code[4];	/* --milter-reply, for MILTER_REJECT */
	char		 reply_xcode[16];
	char		 reply_text[256];
	double		 batch_delay;	/* seconds */
	int		 stats;
};
int		 milter_run(const struct milter_opts *, struct pipeline *);
int		 milter_parse_action(const char *, int *);
int		 milter_parse_reply(const char *, char *, char *, char *, size_t,
		    char **);

/* maint.c: the maintenance modes, one index operation and exit. */
#define MAINT_NONE	0
#define MAINT_INFO	1	/* --info */
#define MAINT_EXPIRE	2	/* --expire */
#define MAINT_REMOVE	3	/* --remove FILE */
#define MAINT_CHECK	4	/* --check */
#define MAINT_COMPACT	5	/* --compact DIR */
#define MAINT_EXPORT	6	/* --export FILE */
#define MAINT_IMPORT	7	/* --import FILE */
struct maint_opts {
	int		 mode;		/* MAINT_* */
	const char	*arg;		/* the mode's FILE or DIR */
	const char	*db;
	struct index_params p;		/* wanted, as for index_open */
	int		 given;		/* IP_* */
	struct retention ret;		/* --expire */
	uint64_t	 batch;		/* ids per transaction (--remove) */
	int		 quiet;
};
int		 maint_run(const struct maint_opts *);

/* util.c */
int		 parse_size(const char *, uint64_t, uint64_t, uint64_t *,
		    char **);
int		 parse_uint(const char *, uint64_t, uint64_t, uint64_t *,
		    char **);
int		 parse_double(const char *, double, double, double *, char **);
#define TIME_MIN	1		/* 1970-01-01T00:00:01Z; 0 is "none" */
#define TIME_MAX	253402300799LL	/* 9999-12-31T23:59:59Z */
int		 parse_duration(const char *, int64_t, int64_t, int64_t *,
		    char **);
int		 parse_seconds(const char *, double, double, double *, char **);
int		 parse_time(const char *, int64_t *, char **);
void		 format_time(int64_t, char *, size_t);
double		 now_seconds(void);
void		 put_le32(unsigned char *, uint32_t);
uint32_t	 get_le32(const unsigned char *);
void		 put_be64(unsigned char *, uint64_t);
uint64_t	 get_be64(const unsigned char *);
void		 sort_u64(uint64_t *, size_t, struct u64vec *);
int		 pairs_has(const struct u64vec *, uint64_t);
void		 pairs_add(struct u64vec *, uint64_t, uint64_t);
size_t		 ascii_span(const unsigned char *, size_t);
int		 simd_avx2(void);
int		 simd_avx512(void);
int		 simd_avx512_vbmi2(void);
#define SIMD_NONE	0	/* simd_allow: the portable code */
#define SIMD_ALL	1	/* what the CPU has */
#define SIMD_AVX2	2	/* AVX2, not AVX-512 */
int		 simd_allow(int);
void		 thread_start(pthread_t *, void *(*)(void *), void *);
void		 std_fds_open(void);

#endif /* MHFILTER_H */
