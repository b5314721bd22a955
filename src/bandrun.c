/*
 * Band entries in memory and in sorted runs: the pure half of the band
 * index (the LMDB backend, lmdb.c, stores them; its top comment explains
 * the design).
 *
 * A band entry is (band key, document number).  The band key space is cut
 * into BAND_CHUNKS chunks by the key's top bits.  The l0 log keeps whole
 * entries: 16 bytes, key and document number, little-endian (run_get,
 * run_put).  An l1 run is one chunk's entries, sorted, in 10 bytes each
 * (l1_get, l1_put): the 40 key bits below the chunk's (the chunk's own are
 * implied) and a 40-bit document number, big-endian.  54 key bits tell
 * keys apart well enough: a lookup meets an entry of another key with
 * probability n / 2^54 for n entries, and such a candidate is only
 * verified and dropped.  The 6 bytes saved on whole entries are 96 bytes
 * a document at 16 bands, and the sweep rewrites that much less.
 *
 * The memtable holds the entries not yet merged into the chunked run, in
 * growable arrays by the key's top MT_BITS bits (MT_SUB of them per
 * chunk), so that a chunk's new entries can be merged and dropped together
 * and a lookup scans only a short array.  Additions since the last
 * memtable_commit can be rolled back (an aborted transaction).
 *
 * Arrays of up to MT_SMALL entries, most of them, are cut from slabs of
 * the memtable's own and recycled through a free list by size, not taken
 * from malloc one by one: a run of 20,000 records makes about 220,000 of
 * them, for which malloc would take 48 bytes of heap each for 32 of
 * entries and free them one by one at exit.
 */

#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

struct mtchunk {
	struct bentry	*v;
	uint32_t	 n;
	uint32_t	 size;
};

#define MT_BITS		(BAND_CHUNK_BITS + 4)
#define MT_SUB		(1U << (MT_BITS - BAND_CHUNK_BITS))
#define MT_FIRST	2		/* entries of a bucket's first array */
#define MT_SMALL	16		/* larger arrays come from malloc */
#define MT_CLASSES	4		/* 2, 4, 8 and 16 entries */
#define MT_SLAB		(256 * 1024)	/* bytes of a slab */

static inline unsigned
mt_bucket(uint64_t key)
{
	return ((unsigned)(key >> (64 - MT_BITS)));
}

/* A free small array, linked through its first bytes. */
struct mtfree {
	struct mtfree	*next;
};

struct memtable {
	struct mtchunk	*chunks;	/* 1 << MT_BITS buckets */
	size_t		 entries;
	uint32_t	*undo;		/* buckets added to since the commit */
	size_t		 nundo;
	size_t		 undosize;
	struct mtfree	*free[MT_CLASSES];	/* by size: 2 << class */
	char		*slab;		/* the current slab's unused part */
	size_t		 slableft;
	void		**slabs;	/* every slab, to free */
	size_t		 nslabs;
	size_t		 slabsize;
	size_t		 nbig;		/* buckets with arrays from malloc */
	uint64_t	*used;		/* a reader's: buckets added to */
	struct xpopulate *pop;		/* a writer's chunks, faulted in */
};

#define MT_USED(mt, b)	((mt)->used[(b) / 64] >> ((b) % 64) & 1)

/* Little-endian 64-bit values, as runs store them. */
void
put_le64(unsigned char *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &v, 8);
#else
	int	 i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
#endif
}

uint64_t
get_le64(const unsigned char *p)
{
	uint64_t	 v = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(&v, p, 8);
#else
	int		 i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
#endif
	return (v);
}

/* Read entry i of an l0 log. */
void
run_get(const unsigned char *run, size_t i, struct bentry *e)
{
	e->key = get_le64(run + BENTRY_SIZE * i);
	e->docid = get_le64(run + BENTRY_SIZE * i + 8);
}

/* Write entry i of an l0 log. */
void
run_put(unsigned char *run, size_t i, const struct bentry *e)
{
	put_le64(run + BENTRY_SIZE * i, e->key);
	put_le64(run + BENTRY_SIZE * i + 8, e->docid);
}

/*
 * A 40-bit big-endian value: one 4-byte load and one byte, as run_find and
 * run_merge read little else.  Never more than 5 bytes, since a run may end
 * at the end of the map.
 */
static inline uint64_t
get_be40(const unsigned char *p)
{
	uint32_t	 hi;

	memcpy(&hi, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	hi = __builtin_bswap32(hi);
#endif
	return ((uint64_t)hi << 8 | p[4]);
}

/* Write a 40-bit big-endian value. */
static inline void
put_be40(unsigned char *p, uint64_t v)
{
	uint32_t	 hi = (uint32_t)(v >> 8);

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	hi = __builtin_bswap32(hi);
#endif
	memcpy(p, &hi, 4);
	p[4] = (unsigned char)v;
}

/* The fragment of entry i of an l1 run: its key bits below the chunk's. */
static inline uint64_t
l1_frag(const unsigned char *run, size_t i)
{
	return (get_be40(run + L1E_SIZE * i));
}

/*
 * Read entry i of chunk c's l1 run.  The key comes back with its top 54
 * bits (chunk and fragment) and the rest zero.
 */
void
l1_get(const unsigned char *run, size_t i, unsigned c, struct bentry *e)
{
	e->key = ((uint64_t)c << (64 - BAND_CHUNK_BITS)) |
	    (l1_frag(run, i) << (64 - BAND_CHUNK_BITS - L1E_BITS));
	e->docid = get_be40(run + L1E_SIZE * i + 5);
}

/* Write entry i of an l1 run (the document number is at most L1E_DOCMAX). */
void
l1_put(unsigned char *run, size_t i, const struct bentry *e)
{
	put_be40(run + L1E_SIZE * i, l1_key(e->key) & ((1ULL << L1E_BITS) - 1));
	put_be40(run + L1E_SIZE * i + 5, e->docid);
}

/*
 * Order entries as l1 runs keep them: by the key bits a run keeps, then
 * document number, then the whole key (so that the order is total).
 */
int
bentry_cmp(const void *a, const void *b)
{
	const struct bentry	*x = a, *y = b;

	if (l1_key(x->key) != l1_key(y->key))
		return (l1_key(x->key) < l1_key(y->key) ? -1 : 1);
	if (x->docid != y->docid)
		return (x->docid < y->docid ? -1 : 1);
	return ((x->key > y->key) - (x->key < y->key));
}

/* The key bits an l1 entry keeps. */
static inline uint64_t
l1_frag_of(uint64_t key)
{
	return (l1_key(key) & ((1ULL << L1E_BITS) - 1));
}

#define INTERP_PROBES	3	/* run_find: interpolation, then bisection */

/* Where in an n-entry run a key fragment should be, were keys even. */
static inline size_t
run_guess(uint64_t frag, size_t n)
{
	return ((size_t)(((frag >> (L1E_BITS - 32)) * n) >> 32));
}

/*
 * A lookup is a few cache misses: the memtable bucket's header, its
 * entries, the l1 run where the key should be.  A record's lookups are
 * independent of each other, so lmdb_candidates starts the loads of all
 * of them before doing any, and the misses overlap: run_prefetch and
 * memtable_prefetch stage 0 (the bucket header), then memtable_prefetch
 * stage 1 (the entries it points to, once the header is in).  Hints only:
 * they change no state and read nothing that is not there.
 */
void
run_prefetch(const unsigned char *run, size_t n, uint64_t key)
{
	size_t	 at, from, to;

	if (n == 0)
		return;
	/* The guess and two lines either side, where the next probes go. */
	at = L1E_SIZE * run_guess(l1_frag_of(key), n);
	from = at > 2 * 64 ? at - 2 * 64 : 0;
	to = L1E_SIZE * n - 1;
	if (to > from + 4 * 64)
		to = from + 4 * 64;
	for (at = from; at <= to; at += 64)
		MHF_PREFETCH(run + at);
}

/*
 * Append to out the document numbers of the n-entry l1 run's entries whose
 * key matches this one in the bits the run keeps, at most max of them.
 * The run is the key's chunk's.  Returns how many.
 */
size_t
run_find(const unsigned char *run, size_t n, uint64_t key,
    struct u64vec *out, size_t max)
{
	size_t	 lo = 0, hi = n, mid, got = 0;
	uint64_t frag = l1_frag_of(key), f, flo, fhi;
	unsigned probes;

	/*
	 * Band keys are uniform hashes, so a key's place in a run is about
	 * its fraction of the range between the keys known to bracket it:
	 * interpolate (the first guess is run_guess, which run_prefetch
	 * loaded), narrowing [lo, hi) with each probe, then bisect.  About
	 * sqrt(n), then n^(1/4) entries off after one and two probes: a few
	 * cache misses instead of log2(n).  Equal keys (one band shared by
	 * many documents) defeat interpolation, so it stops after
	 * INTERP_PROBES probes and bisection bounds the rest.
	 */
	flo = 0;			/* <= every key from lo on */
	fhi = 1ULL << L1E_BITS;		/* >= every key before hi */
	for (probes = 0; hi - lo > 16 && probes < INTERP_PROBES; probes++) {
		if (probes == 0)
			mid = run_guess(frag, n);
		else
			mid = lo + (size_t)((double)(frag - flo) /
			    (double)(fhi - flo + 1) * (double)(hi - lo));
		if (mid >= hi)		/* rounding; flo <= frag <= fhi */
			mid = hi - 1;
		if ((f = l1_frag(run, mid)) < frag) {
			lo = mid + 1;
			flo = f;
		} else {
			hi = mid;
			fhi = f;
		}
	}
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l1_frag(run, mid) < frag)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && got < max; lo++, got++) {
		if (l1_frag(run, lo) != frag)
			break;
		u64vec_push(out, get_be40(run + L1E_SIZE * lo + 5));
	}
	return (got);
}

/*
 * How many entries of an n-entry run to read around where a key should be
 * (run_window), at most max.  Band keys are uniform hashes, so a key's
 * rank in a run is binomial about run_guess's, with a standard deviation
 * of at most sqrt(n) / 2: 5 sqrt(n) entries are 5 of them either way, and
 * 64 more leave room for the key's own entries.  A fixed 512 read 5 KB of
 * each run of 1,000 entries, where 222 entries do, and too few of a run
 * of 100,000 (1.6 deviations either way).
 */
size_t
run_window_len(size_t n, size_t max)
{
	size_t	 w = (size_t)(5 * sqrt((double)n)) + 64;

	return (w < max ? w : max);
}

/*
 * A shorter window, for a first try (lm_run_find): 2.5 sqrt(n) entries
 * are 2.5 deviations either way, and 16 more room for the key's own.  It
 * misses about one key in 300 (a second read, of run_window_len, follows),
 * and a small run's 1,600 lookups at a million documents read 1.5 MB with
 * it, 3.5 MB with the wider window.
 */
size_t
run_window_short(size_t n, size_t max)
{
	size_t	 w = (size_t)(2.5 * sqrt((double)n)) + 16;

	return (w < max ? w : max);
}

/*
 * Where to read w of n entries centred on entry at, within the n: sets
 * *from, returns how many (run_window, l0_window).
 */
static size_t
window_at(size_t n, size_t at, size_t w, size_t *from)
{
	if (n <= w) {
		*from = 0;
		return (n);
	}
	*from = at > w / 2 ? at - w / 2 : 0;
	if (*from > n - w)
		*from = n - w;
	return (w);
}

/*
 * Where to read w entries of an n-entry run around where key should be,
 * for run_find_window: sets *from, returns how many.
 */
size_t
run_window(size_t n, uint64_t key, size_t w, size_t *from)
{
	return (window_at(n, run_guess(l1_frag_of(key), n), w, from));
}

/*
 * run_find on entries [from, from + m) of an n-entry run, at win.  -1,
 * having found nothing, unless they hold every entry of the key's (the
 * caller then searches the whole run).
 */
int
run_find_window(const unsigned char *win, size_t from, size_t m, size_t n,
    uint64_t key, struct u64vec *out, size_t max)
{
	uint64_t	 frag = l1_frag_of(key);

	if (m == 0 || (from > 0 && l1_frag(win, 0) >= frag) ||
	    (from + m < n && l1_frag(win, m - 1) <= frag))
		return (-1);
	run_find(win, m, key, out, max);
	return (0);
}

/* Does entry i of a run sort before the entry (frag, docid)? */
static inline int
l1_before(const unsigned char *run, size_t i, uint64_t frag, uint64_t docid)
{
	uint64_t	 f = l1_frag(run, i);

	return (f < frag ||
	    (f == frag && get_be40(run + L1E_SIZE * i + 5) < docid));
}

/*
 * The first entry of run[from, n) that does not sort before the entry
 * (frag, docid).  A run's order is its entries' byte order: key fragment,
 * then document number, both 40-bit big-endian, compared here as numbers
 * (a memcmp call a probe, with the bisection, was a seventh of a commit
 * at a million documents).
 * The entries merged into a run are spread over it a few apart: gallop
 * from from, then bisect what is left.
 */
static size_t
run_lower(const unsigned char *run, size_t from, size_t n, uint64_t frag,
    uint64_t docid)
{
	size_t	 lo = from, hi = from, step = 1, mid;

	/* Every entry of [from, lo) sorts before; hi does not, or is n. */
	while (hi < n && l1_before(run, hi, frag, docid)) {
		lo = hi + 1;
		hi = lo + step;
		step *= 2;
	}
	if (hi > n)
		hi = n;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l1_before(run, mid, frag, docid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo);
}

/* Is entry i of a run the entry (frag, docid)? */
static inline int
l1_is(const unsigned char *run, size_t i, uint64_t frag, uint64_t docid)
{
	return (l1_frag(run, i) == frag &&
	    get_be40(run + L1E_SIZE * i + 5) == docid);
}

/*
 * run_merge with nothing to leave out of the run: it is copied in spans
 * between the places of the new entries.  A merge adds a few hundred
 * entries to a run of thousands once the index holds millions of
 * documents, and decoding and encoding every entry of the run would be a
 * sixth of the writer's time at 10 million.
 */
static size_t
run_merge_spans(const unsigned char *old, size_t nold,
    const struct bentry *add, size_t nadd, unsigned char *out)
{
	uint64_t	 frag, docid;
	size_t		 i = 0, j, p, n = 0;

	for (j = 0; j < nadd; j++) {
		frag = l1_frag_of(add[j].key);
		docid = add[j].docid & L1E_DOCMAX;
		p = run_lower(old, i, nold, frag, docid);
		if (p > i) {
			memcpy(out + L1E_SIZE * n, old + L1E_SIZE * i,
			    L1E_SIZE * (p - i));
			n += p - i;
			i = p;
		}
		/* Kept by the run already, or a repeat among the new. */
		if (i < nold && l1_is(old, i, frag, docid))
			continue;
		if (n > 0 && l1_is(out, n - 1, frag, docid))
			continue;
		l1_put(out, n++, &add[j]);
	}
	if (i < nold) {
		memcpy(out + L1E_SIZE * n, old + L1E_SIZE * i,
		    L1E_SIZE * (nold - i));
		n += nold - i;
	}
	return (n);
}

/*
 * Merge chunk c's l1 run (nold entries, as run_merge wrote it: no repeats)
 * and new entries of that chunk, sorted by bentry_cmp, into the l1 run out,
 * which has room for both, leaving out entries whose document number is
 * below live (removed documents) and repeats of what the run keeps.
 * Returns the entries written.
 */
size_t
run_merge(unsigned c, const unsigned char *old, size_t nold,
    const struct bentry *add, size_t nadd, uint64_t live, unsigned char *out)
{
	struct bentry	 a, last = { 0, 0 };
	size_t		 i = 0, j = 0, n = 0;
	int		 have = 0;

	if (live == 0)
		return (run_merge_spans(old, nold, add, nadd, out));

	while (i < nold || j < nadd) {
		if (i < nold) {
			l1_get(old, i, c, &a);
			if (j < nadd && bentry_cmp(&add[j], &a) < 0)
				a = add[j++];
			else
				i++;
		} else
			a = add[j++];
		if (a.docid < live)
			continue;
		if (have && l1_key(a.key) == l1_key(last.key) &&
		    a.docid == last.docid)
			continue;
		l1_put(out, n++, &a);
		last = a;
		have = 1;
	}
	return (n);
}

/*
 * Where a sweep merges a chunk's nadd new entries: into its young run (1),
 * which holds ny, or, with the young run's, into its old run (0), which
 * holds nold.  Rewriting the old run costs nold; letting the young run grow
 * to y before that costs about y / 2 a merge over the y / nadd merges it
 * takes, and nold * nadd / y a merge for the old run's rewrite: least when
 * y * y = 2 * nold * nadd, which bounds the young run.  An old run below
 * min (a young index's, or one a sweep adds a good share to) is cheap to
 * rewrite, and a second run would only cost lookups: no young run then.
 */
int
run_young(size_t nold, size_t ny, size_t nadd, size_t min)
{
	double	 y = (double)ny + (double)nadd;

	return (nold >= min && nold > 0 &&
	    y * y <= 2.0 * (double)nold * (double)nadd);
}

/*
 * Write the n entries e as an l0 record written with the sweep at chunk wm
 * keeps them (index format 6), to out (n * BENTRY_SIZE bytes): in order
 * of l0_offset, and in e's order within one offset, so that a key's
 * entries stay in document order.  The sweep merges the chunks of the
 * first entries first: the entries it has not merged yet are the last
 * ones, which a reader finds by bisection and reads alone, where it read
 * the whole record, half of it merged on average.  count is scratch for
 * BAND_CHUNKS + 1 counts (a counting sort).
 */
void
l0_sort(const struct bentry *e, size_t n, unsigned wm, size_t *count,
    unsigned char *out)
{
	size_t		 i;
	unsigned	 o;

	memset(count, 0, (BAND_CHUNKS + 1) * sizeof *count);
	for (i = 0; i < n; i++)
		count[l0_offset(e[i].key, wm) + 1]++;
	for (o = 0; o < BAND_CHUNKS; o++)
		count[o + 1] += count[o];
	for (i = 0; i < n; i++)
		run_put(out, count[l0_offset(e[i].key, wm)]++, &e[i]);
}

/*
 * Where to read w entries of an n-entry l0 record in l0_sort's order
 * around its first of l0_offset passed or more (l0_live_window): band keys
 * are uniform hashes, so that entry's rank is binomial about
 * n * passed / BAND_CHUNKS, as a key's rank in a run is (run_window_len).
 * Sets *from, returns how many.
 */
size_t
l0_window(size_t n, uint64_t passed, size_t w, size_t *from)
{
	size_t	 at = passed >= BAND_CHUNKS ? n :
	    (size_t)((double)n * (double)passed / BAND_CHUNKS);

	return (window_at(n, at, w, from));
}

/*
 * The first of the n entries of an l0 record in l0_sort's order for wm
 * whose l0_offset is passed or more, from entries [from, from + m) of it
 * at win: 1 with it in *at (n if none is), or 0 if it may lie outside.
 */
int
l0_live_window(const unsigned char *win, size_t from, size_t m, size_t n,
    unsigned wm, uint64_t passed, size_t *at)
{
	size_t	 lo = 0, hi = m, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (l0_offset(get_le64(win + mid * BENTRY_SIZE), wm) < passed)
			lo = mid + 1;
		else
			hi = mid;
	}
	if ((lo == 0 && from > 0) || (lo == m && from + m < n))
		return (0);
	*at = from + lo;
	return (1);
}

/* Are the n entries of rec in l0_sort's order for wm (1)? */
int
l0_in_order(const unsigned char *rec, size_t n, unsigned wm)
{
	size_t		 i;
	unsigned	 o, prev = 0;

	for (i = 0; i < n; i++) {
		if ((o = l0_offset(get_le64(rec + BENTRY_SIZE * i), wm)) <
		    prev)
			return (0);
		prev = o;
	}
	return (1);
}

/*
 * An l0 record's filter and directory (index format 8: l0f_*).
 *
 * Why.  A small batch reads back from l0 the entries of its own keys: at a
 * million documents l0 is 32 MB, of which the sweep has not merged 15 MB,
 * and without a filter a -Q run of 100 records copies all 15 MB with
 * pread and scans it for its 1,600 keys, to find none (a new record's keys
 * are in no other document's entries): half of the run's time.  So a
 * record of L0F_MIN entries or more carries, before its entries, a directory
 * (where each group of chunks begins) and a split-block Bloom filter of
 * its keys, L0F_BITS bits an entry: a reader reads the filter's blocks for
 * the chunks not merged yet, an eighth of those entries' bytes, tests its
 * keys, and reads only the groups where a key may be.
 *
 * Layout (all little-endian):
 *
 *   u64  the sweep position when written, with L0_SORTED and L0_FILTERED
 *   u32  n, the entries
 *   u8   gbits: 2^gbits groups of chunks, in l0_offset order
 *   u8[3] zero
 *   u32  dir[2^gbits + 1]: dir[g] is the first entry whose l0_offset, over
 *        BAND_CHUNKS >> gbits, is g or more; dir[2^gbits] = n
 *   nb blocks of L0F_BLOCK bytes: the filter (nb from n)
 *   n entries of BENTRY_SIZE, in l0_sort's order
 *
 * A key's block is picked by its l0_offset and the next 18 bits of the key
 * (l0f_block), so that blocks, like entries, are in the order the sweep
 * merges: the blocks of the chunks not merged are the last ones
 * (l0f_first_block).  In its block, a key sets one bit in each of the 8
 * 32-bit words, chosen by its low 32 bits and 8 odd constants (the
 * split-block filter of Apache Parquet's specification, with its
 * constants); at 16 bits an entry, about one key in 750 that is not in a
 * record tests positive (test_l0f_write measures it).
 */
static const uint32_t l0f_salt[8] = {
	0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
	0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U
};

/* The groups of a record of n entries: about 64 entries each. */
static unsigned
l0f_gbits(size_t n)
{
	unsigned	 b = 0;

	while (b < L0F_GBITS_MAX && (n >> (b + 1)) >= 64)
		b++;
	return (b);
}

/*
 * The layout of an unfiltered record of n entries: after its 8-byte
 * header, no directory and no filter (nb 0).  A record of format 5 to 7,
 * or one of format 8 under L0F_MIN entries.
 */
void
l0_layout_plain(size_t n, struct l0layout *l)
{
	memset(l, 0, sizeof *l);
	l->n = n;
	l->dir = l->filter = l->entries = L0_HEADER;
	l->size = L0_HEADER + n * BENTRY_SIZE;
}

/*
 * The layout of the record of n entries that l0f_write writes: filtered
 * from L0F_MIN entries on, else plain (l0_layout_plain).
 */
void
l0f_layout(size_t n, struct l0layout *l)
{
	if (n < L0F_MIN) {
		l0_layout_plain(n, l);
		return;
	}
	l->n = n;
	l->gbits = l0f_gbits(n);
	l->nb = (n * L0F_BITS + L0F_BLOCK * 8 - 1) / (L0F_BLOCK * 8);
	l->dir = L0F_HEADER;
	l->filter = l->dir + 4 * (((size_t)1 << l->gbits) + 1);
	l->entries = l->filter + l->nb * L0F_BLOCK;
	l->size = l->entries + n * BENTRY_SIZE;
}

/*
 * The layout of the filtered record of size bytes whose first L0F_HEADER
 * bytes are h: 0, or -1 if they do not agree (damage).
 */
int
l0f_parse(const unsigned char *h, size_t size, struct l0layout *l)
{
	uint32_t	 n = (uint32_t)h[8] | (uint32_t)h[9] << 8 |
	    (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;

	if (n < L0F_MIN || h[12] != l0f_gbits(n) || h[13] != 0 ||
	    h[14] != 0 || h[15] != 0)
		return (-1);
	l0f_layout(n, l);
	return (l->size == size ? 0 : -1);
}

/*
 * Decode the directory d of layout l into dir (2^gbits + 1 values): 0, or
 * -1 if it is not sound (from 0, never down, to n).  Its values place
 * reads in the record: a damaged one must not.
 */
int
l0f_dir_read(const unsigned char *d, const struct l0layout *l, uint32_t *dir)
{
	size_t	 g, G = (size_t)1 << l->gbits;

	for (g = 0; g <= G; g++) {
		dir[g] = get_le32(d + 4 * g);
		if (g > 0 && dir[g] < dir[g - 1])
			return (-1);
	}
	return (dir[0] == 0 && dir[G] == l->n ? 0 : -1);
}

/* The block of a record of nb blocks written at wm that holds key's bits. */
size_t
l0f_block(uint64_t key, unsigned wm, size_t nb)
{
	uint32_t	 r = (uint32_t)l0_offset(key, wm) << 18 |
	    (uint32_t)(key >> 32 & 0x3ffff);

	return ((size_t)(((uint64_t)r * nb) >> 32));
}

/*
 * The first block that may hold a key of l0_offset passed or more: the
 * blocks of the chunks the sweep has not merged are those from it on.
 */
size_t
l0f_first_block(uint64_t passed, size_t nb)
{
	if (passed >= BAND_CHUNKS)
		return (nb);
	return ((size_t)(((uint64_t)passed << 18) * nb >> 32));
}

/* The bits key sets in its block, as four little-endian 64-bit words. */
void
l0f_mask(uint64_t key, uint64_t m[4])
{
	uint32_t	 h = (uint32_t)key;
	unsigned	 i;

	for (i = 0; i < 4; i++)
		m[i] = 1ULL << ((h * l0f_salt[2 * i]) >> 27) |
		    1ULL << (32 + ((h * l0f_salt[2 * i + 1]) >> 27));
}

/* May a key of mask m be among the keys of the filter block b? */
int
l0f_has(const unsigned char *b, const uint64_t m[4])
{
	return ((get_le64(b) & m[0]) == m[0] &&
	    (get_le64(b + 8) & m[1]) == m[1] &&
	    (get_le64(b + 16) & m[2]) == m[2] &&
	    (get_le64(b + 24) & m[3]) == m[3]);
}

/*
 * Mark in gmark the groups of a filtered record of layout l written at
 * chunk wm, passed chunks ago, where a key of the n keys k (sorted, with
 * their masks) may be: those of l0_offset passed or more, from the first
 * key of the first chunk not passed round to the first of a passed one,
 * whose bits are all set in the record's filter, of which blocks b0 on are
 * at f (b0 = l0f_first_block of passed).  Groups marked already are not
 * tested.
 */
void
l0f_probe(const unsigned char *f, size_t b0, const struct l0layout *l,
    unsigned wm, uint64_t passed, const struct l0key *k, size_t n,
    unsigned char *gmark)
{
	const unsigned char	*b;
	uint64_t		 first, key;
	size_t			 lo = 0, hi = n, mid, i, j;
	unsigned		 o, g, shift = BAND_CHUNK_BITS - l->gbits;

	first = (uint64_t)((wm + passed) & (BAND_CHUNKS - 1)) <<
	    (64 - BAND_CHUNK_BITS);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (k[mid].key < first)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = 0, j = lo < n ? lo : 0; i < n; i++, j = (j + 1) % n) {
		key = k[j].key;
		if ((o = l0_offset(key, wm)) < passed)
			break;
		g = o >> shift;
		if (gmark[g / 8] >> (g % 8) & 1)
			continue;
		b = f + (l0f_block(key, wm, l->nb) - b0) * L0F_BLOCK;
		if (l0f_has(b, k[j].m))
			gmark[g / 8] |= 1U << (g % 8);
	}
}

/*
 * Write the record of layout l (l0f_layout) for the entries of e: its
 * header (with written, the sweep position), a filtered one's directory
 * and filter, and the entries in l0_sort's order for the sweep's chunk;
 * count is l0_sort's scratch.  The record's l->size bytes go to out.
 */
void
l0f_write(const struct bentry *e, uint64_t written, size_t *count,
    const struct l0layout *l, unsigned char *out)
{
	unsigned char	*ent = out + l->entries, *blk;
	unsigned	 wm = (unsigned)(written % BAND_CHUNKS), shift;
	uint64_t	 m[4], key;
	size_t		 i, g, G = (size_t)1 << l->gbits;
	unsigned	 j;

	if (l->nb == 0) {		/* plain: a header and the entries */
		put_le64(out, written | L0_SORTED);
		l0_sort(e, l->n, wm, count, ent);
		return;
	}
	memset(out, 0, l->entries);
	put_le64(out, written | L0_SORTED | L0_FILTERED);
	put_le32(out + 8, (uint32_t)l->n);
	out[12] = (unsigned char)l->gbits;
	l0_sort(e, l->n, wm, count, ent);
	/* count[o] is now where offset o + 1 begins: the directory's. */
	shift = BAND_CHUNK_BITS - l->gbits;
	put_le32(out + l->dir, 0);
	for (g = 1; g <= G; g++)
		put_le32(out + l->dir + 4 * g,
		    (uint32_t)count[(g << shift) - 1]);
	for (i = 0; i < l->n; i++) {
		key = get_le64(ent + BENTRY_SIZE * i);
		blk = out + l->filter + L0F_BLOCK *
		    l0f_block(key, wm, l->nb);
		l0f_mask(key, m);
		for (j = 0; j < 4; j++)
			put_le64(blk + 8 * j, get_le64(blk + 8 * j) | m[j]);
	}
}

/*
 * The stored length of a young run of n entries (index format 6).  A
 * lookup reads a run that lives in overflow pages with pread, and touches
 * of the map only the B-tree's pages, a few hundred for all 16,384 runs;
 * but LMDB keeps a value in its leaf page up to about half a page, and
 * most young runs are shorter: at 10 million documents, 13,728 young runs
 * filled 2,199 leaf pages, and the 1,600 lookups of 100 records faulted
 * in 1,500 of them.  So a young run whose entries are under YRUN_PAD bytes
 * is padded with zeros to a length past it that no run of whole entries
 * has (it is not a multiple of L1E_SIZE), from which yrun_count gives n
 * back without reading the value: the n-th such length from YRUN_PAD + 1,
 * at most 2,277 bytes, one overflow page.  Young runs exist only beside
 * old runs of at least half a page; old runs are padded from ORUN_PAD on
 * (orun_size).
 */
size_t
yrun_size(size_t n)
{
	if (n * L1E_SIZE >= YRUN_PAD)
		return (n * L1E_SIZE);
	return (YRUN_PAD + 1 + L1E_SIZE * (n / (L1E_SIZE - 1)) +
	    n % (L1E_SIZE - 1));
}

/*
 * The stored length of an old run of n entries (index format 7): padded as
 * a young run is (yrun_size) from ORUN_PAD bytes of entries on, so that
 * LMDB keeps it out of the leaf pages as well.  Why: a small batch's lookup
 * of a run in a leaf faults that leaf in, and a fault maps the page cache
 * around it (64 KB, or the whole folio) into the process.  Unpadded, l1
 * at 200,000 documents keeps runs of about 1.3 KB in 8,792 leaf pages, and
 * 100 records' lookups touch 1,500 of them: 36 MB of RSS, the whole of
 * l1's leaves.  Shorter runs stay in their leaves: an index of under about
 * 100,000 documents has only those, several to a leaf, and padding them
 * would make its l1 64 MB (a page for each of the 16,384 chunks) where it
 * is a few.
 */
size_t
orun_size(size_t n)
{
	if (n * L1E_SIZE < ORUN_PAD)
		return (n * L1E_SIZE);
	return (yrun_size(n));
}

/*
 * The entries of a young run stored in size bytes, in *n: a padded length
 * (yrun_size) or whole entries (format 5 stored every run so); of an old
 * run as well (orun_size; formats up to 6 stored whole entries).  0, or -1
 * for a length neither can be.
 */
int
yrun_count(size_t size, size_t *n)
{
	size_t	 d;

	if (size % L1E_SIZE == 0) {
		*n = size / L1E_SIZE;
		return (0);
	}
	if (size <= YRUN_PAD)
		return (-1);
	d = size - YRUN_PAD - 1;
	*n = (L1E_SIZE - 1) * (d / L1E_SIZE) + d % L1E_SIZE;
	return (*n * L1E_SIZE < YRUN_PAD ? 0 : -1);
}

/* The free-list class of a small array of size entries. */
static unsigned
mt_class(uint32_t size)
{
	unsigned	 c = 0;

	while ((uint32_t)MT_FIRST << c < size)
		c++;
	return (c);
}

/* An array of size entries: a small one from a slab, else from malloc. */
static struct bentry *
mt_alloc(struct memtable *mt, uint32_t size)
{
	struct mtfree	*f;
	size_t		 bytes = size * sizeof(struct bentry);
	unsigned	 c;

	if (size > MT_SMALL)
		return (xreallocarray(NULL, size, sizeof(struct bentry)));
	c = mt_class(size);
	if ((f = mt->free[c]) != NULL) {
		mt->free[c] = f->next;
		return ((struct bentry *)f);
	}
	if (mt->slableft < bytes) {
		if (mt->nslabs == mt->slabsize) {
			mt->slabsize = mt->slabsize ? 2 * mt->slabsize : 16;
			mt->slabs = xreallocarray(mt->slabs, mt->slabsize,
			    sizeof *mt->slabs);
		}
		/* (The tail of the last slab, under 256 bytes, is lost.) */
		mt->slab = mt->slabs[mt->nslabs++] = xmalloc(MT_SLAB);
		mt->slableft = MT_SLAB;
	}
	f = (struct mtfree *)mt->slab;
	mt->slab += bytes;
	mt->slableft -= bytes;
	return ((struct bentry *)f);
}

/* Give back an array of size entries (NULL when size is 0). */
static void
mt_release(struct memtable *mt, struct bentry *v, uint32_t size)
{
	struct mtfree	*f = (struct mtfree *)v;
	unsigned	 c;

	if (size > MT_SMALL) {
		free(v);
		return;
	}
	if (size == 0)
		return;
	c = mt_class(size);
	f->next = mt->free[c];
	mt->free[c] = f;
}

/*
 * A new, empty memtable.  A writer's bucket table is looked up before it
 * is added to, bucket by bucket (see xmap), so it is faulted in for
 * writing in the background (xpopulate_start) while the run starts; a
 * reader's (read-only: it adds only what it reads of l0) stays the zero
 * pages it touches, which take no memory, and it touches only the buckets
 * added to, as a bitmap of 32 KB says: with a few entries held, the 1,600
 * lookups of 100 records faulted in 800 of its pages.
 */
struct memtable *
memtable_create(int writer)
{
	struct memtable	*mt;

	mt = xcalloc(1, sizeof *mt);
	mt->chunks = xmap(1U << MT_BITS, sizeof *mt->chunks);
	if (writer)
		mt->pop = xpopulate_start(mt->chunks, 1U << MT_BITS,
		    sizeof *mt->chunks);
	else
		mt->used = xcalloc((1U << MT_BITS) / 64, sizeof *mt->used);
	return (mt);
}

/* Free a memtable. */
void
memtable_free(struct memtable *mt)
{
	size_t	 c;

	if (mt == NULL)
		return;
	/*
	 * (Not a reader's every bucket for nothing: its table is the zero
	 * pages it looked up, and reading the rest cost a fault a page.)
	 */
	for (c = 0; mt->nbig > 0 && c < (1U << MT_BITS); c++) {
		if (mt->chunks[c].size > MT_SMALL)
			free(mt->chunks[c].v);
	}
	for (c = 0; c < mt->nslabs; c++)
		free(mt->slabs[c]);
	free(mt->slabs);
	xpopulate_wait(mt->pop);
	xunmap(mt->chunks, 1U << MT_BITS, sizeof *mt->chunks);
	free(mt->used);
	free(mt->undo);
	free(mt);
}

/* Forget every entry (keeping the memory of small chunks). */
void
memtable_clear(struct memtable *mt)
{
	size_t	 c;

	for (c = 0; c < BAND_CHUNKS; c++)
		memtable_drop(mt, c);
	mt->entries = 0;
	mt->nundo = 0;
}

/*
 * Add an entry read back from the log: kept, with no undo record (a
 * rebuild's millions of them would cost 4 bytes each for nothing).
 * Returns its bucket.
 */
unsigned
memtable_load(struct memtable *mt, uint64_t key, uint64_t docid)
{
	struct mtchunk	*ch;
	struct bentry	*v;
	uint32_t	 size;
	unsigned	 c = mt_bucket(key);

	if (mt->used != NULL)
		mt->used[c / 64] |= 1ULL << (c % 64);
	ch = &mt->chunks[c];
	if (ch->n == ch->size) {
		/*
		 * Most buckets of a small index hold one or two entries: a
		 * first array of 8 would make 21 MB of the heap of a run of
		 * 20,000 records, in page faults mostly.
		 */
		size = ch->size ? 2 * ch->size : MT_FIRST;
		if (ch->size > MT_SMALL)
			v = xreallocarray(ch->v, size, sizeof *ch->v);
		else {
			if (size > MT_SMALL)
				mt->nbig++;	/* mt_alloc: from malloc */
			v = mt_alloc(mt, size);
			if (ch->n > 0)
				memcpy(v, ch->v, ch->n * sizeof *v);
			mt_release(mt, ch->v, ch->size);
		}
		ch->v = v;
		ch->size = size;
	}
	ch->v[ch->n].key = key;
	ch->v[ch->n].docid = docid;
	ch->n++;
	mt->entries++;
	return (c);
}

/* Is key among the n sorted keys? */
int
u64_sorted_has(const uint64_t *keys, size_t n, uint64_t key)
{
	size_t	 lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (keys[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < n && keys[lo] == key);
}

/* Sort a vector (sort_u64, with its scratch) and drop its repeats. */
void
u64_sort_unique(struct u64vec *v, struct u64vec *scratch)
{
	size_t	 i, n = 0;

	sort_u64(v->v, v->n, scratch);
	for (i = 0; i < v->n; i++)
		if (n == 0 || v->v[i] != v->v[n - 1])
			v->v[n++] = v->v[i];
	v->n = n;
}

/*
 * Read back n entries of an l0 record, written when the sweep was at
 * chunk r->wm and r->passed chunks ago, by what r->state (lsm.c's held)
 * says of their chunks: add those of chunks to read (2, or 4 and a key
 * among the r->nkeys sorted keys, whose KEYSET_BIT bits are set in
 * r->bits; with r->all, any but 1) that the sweep has not passed since,
 * and add to r->others how many it has not passed are in neither the
 * memtable nor this read.  An entry to read of a document no document
 * number below r->next_doc names (0, or one not yet numbered) is damage:
 * counted in r->bad, not read.  Entries not read are not checked, which
 * would take a second pass over every window of l0 a batch reads.
 */
void
memtable_read_log(struct memtable *mt, const unsigned char *log, size_t n,
    struct l0read *r)
{
	const unsigned char	*state = r->state;
	uint64_t		 key, docid, others = 0;
	size_t			 i;
	unsigned		 c, live;

	for (i = 0; i < n; i++) {
		key = get_le64(log + BENTRY_SIZE * i);
		c = band_chunk(key);
		live = ((c - r->wm) & (BAND_CHUNKS - 1)) >= r->passed;
		/*
		 * Most entries of a small batch's pass: counted without a
		 * branch on live, which is random (one mispredicted branch
		 * an entry made this loop twice as slow).
		 */
		if (state[c] == 0 && !r->all) {
			others += live;
			continue;
		}
		if (!live || state[c] == 1)
			continue;	/* merged since, or held */
		if (state[c] >= 3 && (r->bits[KEYSET_BIT(key) / 64] >>
		    KEYSET_BIT(key) % 64 & 1) &&
		    u64_sorted_has(r->keys, r->nkeys, key)) {
			if (state[c] != 4)
				continue;
		} else if (!r->all && state[c] != 2) {
			others++;
			continue;
		}
		docid = get_le64(log + BENTRY_SIZE * i + 8);
		if (docid == 0 || docid >= r->next_doc)
			r->bad++;
		else
			memtable_load(mt, key, docid);
	}
	r->others += others;
}

/* Add an entry; memtable_rollback takes it back until memtable_commit. */
void
memtable_add(struct memtable *mt, uint64_t key, uint64_t docid)
{
	unsigned	 c = memtable_load(mt, key, docid);

	if (mt->nundo == mt->undosize) {
		mt->undosize = mt->undosize ? 2 * mt->undosize : 1024;
		mt->undo = xreallocarray(mt->undo, mt->undosize,
		    sizeof *mt->undo);
	}
	mt->undo[mt->nundo++] = c;
}

/* Keep the additions since the last commit. */
void
memtable_commit(struct memtable *mt)
{
	mt->nundo = 0;
}

/* Take back the additions since the last commit, newest first. */
void
memtable_rollback(struct memtable *mt)
{
	while (mt->nundo > 0) {
		mt->chunks[mt->undo[--mt->nundo]].n--;
		mt->entries--;
	}
}

/* See run_prefetch. */
void
memtable_prefetch(const struct memtable *mt, uint64_t key, int stage)
{
	const struct mtchunk	*ch = &mt->chunks[mt_bucket(key)];

	if (mt->used != NULL && !MT_USED(mt, mt_bucket(key)))
		return;
	if (stage == 0)
		MHF_PREFETCH(ch);
	else if (ch->n > 0)
		MHF_PREFETCH(ch->v);
}

/*
 * The same for memtable_add of key: stage 0 the bucket's header, stage 1
 * where the entry will go.
 */
void
memtable_prefetch_add(const struct memtable *mt, uint64_t key, int stage)
{
	const struct mtchunk	*ch = &mt->chunks[mt_bucket(key)];

	if (stage == 0)
		MHF_PREFETCH(ch);
	else if (ch->n < ch->size)
		MHF_PREFETCH(ch->v + ch->n);
}

/* Append the document numbers of the entries with this key, up to max. */
size_t
memtable_find(struct memtable *mt, uint64_t key, struct u64vec *out,
    size_t max)
{
	struct mtchunk	*ch = &mt->chunks[mt_bucket(key)];
	size_t		 i, got = 0;

	/*
	 * (An empty table, a reader's mostly, is zero pages never touched:
	 * looking in it would fault one in for each of 800 buckets.)
	 */
	if (mt->entries == 0 || (mt->used != NULL &&
	    !MT_USED(mt, mt_bucket(key))))
		return (0);
	for (i = 0; i < ch->n && got < max; i++) {
		if (ch->v[i].key == key) {
			u64vec_push(out, ch->v[i].docid);
			got++;
		}
	}
	return (got);
}

/* bentry_cmp's order, inlined: is x before y? */
static inline int
bentry_before(const struct bentry *x, const struct bentry *y)
{
	if (l1_key(x->key) != l1_key(y->key))
		return (l1_key(x->key) < l1_key(y->key));
	if (x->docid != y->docid)
		return (x->docid < y->docid);
	return (x->key < y->key);
}

/*
 * Sort n entries by bentry_cmp.  A bucket holds a few entries, about 16
 * when the memtable is full: by insertion, with the comparison inlined,
 * where qsort's merge sort called bentry_cmp through a pointer (1.4% of a
 * run's samples, the writer's).  The order is total (equal entries are
 * equal bytes), so any correct sort gives the same entries.
 */
#define SORT_SMALL	32

static void
bentry_sort(struct bentry *v, size_t n)
{
	struct bentry	 x;
	size_t		 i, j;

	if (n > SORT_SMALL) {
		qsort(v, n, sizeof *v, bentry_cmp);
		return;
	}
	for (i = 1; i < n; i++) {
		x = v[i];
		for (j = i; j > 0 && bentry_before(&x, &v[j - 1]); j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/*
 * Copy a chunk's entries into *buf (grown as needed), sorted by bentry_cmp
 * (as l1 runs keep them).  Returns how many.  The chunk itself keeps its order,
 * which memtable_rollback relies on.
 */
size_t
memtable_sorted(struct memtable *mt, unsigned c, struct bentry **buf,
    size_t *bufsize)
{
	struct mtchunk	*ch = &mt->chunks[c * MT_SUB];
	size_t		 i, n = 0;

	for (i = 0; i < MT_SUB; i++)
		n += ch[i].n;
	if (n > *bufsize) {
		*bufsize = n;
		*buf = xreallocarray(*buf, *bufsize, sizeof **buf);
	}
	if (n == 0)
		return (0);
	for (i = 0, n = 0; i < MT_SUB; i++) {
		if (ch[i].n == 0)
			continue;	/* v may be NULL */
		memcpy(*buf + n, ch[i].v, ch[i].n * sizeof **buf);
		n += ch[i].n;
	}
	/* The buckets are in key order: sort each, they are short. */
	for (i = 0, n = 0; i < MT_SUB; i++) {
		if (ch[i].n > 1)
			bentry_sort(*buf + n, ch[i].n);
		n += ch[i].n;
	}
	return (n);
}

/* Drop a chunk's entries (merged into the run).  Not undoable. */
void
memtable_drop(struct memtable *mt, unsigned c)
{
	struct mtchunk	*ch = &mt->chunks[c * MT_SUB];
	unsigned	 i, b;

	for (i = 0; i < MT_SUB; i++) {
		b = c * MT_SUB + i;
		if (mt->used != NULL) {
			if (!MT_USED(mt, b))
				continue;
			mt->used[b / 64] &= ~(1ULL << (b % 64));
		}
		mt->entries -= ch[i].n;
		ch[i].n = 0;
		if (ch[i].size > MT_SMALL) {	/* no slack past a sweep */
			free(ch[i].v);
			ch[i].v = NULL;
			ch[i].size = 0;
		}
	}
}

/* Entries held. */
size_t
memtable_entries(struct memtable *mt)
{
	return (mt->entries);
}
