/*
 * Band entries in memory and in sorted runs: the pure half of the band
 * index (index.c does the LMDB half; its top comment explains the design).
 *
 * A band entry is (band key, document number).  The band key space is cut
 * into BAND_CHUNKS chunks by the key's top bits.  A run is a byte array of
 * 16-byte entries (key, document number, both little-endian) sorted by key
 * then document number; the chunked run on disk holds one run per chunk.
 *
 * The memtable holds the entries not yet merged into the chunked run, in
 * growable arrays by the key's top MT_BITS bits (MT_SUB of them per
 * chunk), so that a chunk's new entries can be merged and dropped together
 * and a lookup scans only a short array.  Additions since the last
 * memtable_commit can be rolled back (an aborted transaction).
 */

#include "config.h"

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

static inline unsigned
mt_bucket(uint64_t key)
{
	return ((unsigned)(key >> (64 - MT_BITS)));
}

struct memtable {
	struct mtchunk	*chunks;	/* 1 << MT_BITS buckets */
	size_t		 entries;
	uint32_t	*undo;		/* buckets added to since the commit */
	size_t		 nundo;
	size_t		 undosize;
};

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

/* Read entry i of a run. */
void
run_get(const unsigned char *run, size_t i, struct bentry *e)
{
	e->key = get_le64(run + BENTRY_SIZE * i);
	e->docid = get_le64(run + BENTRY_SIZE * i + 8);
}

/* Write entry i of a run. */
void
run_put(unsigned char *run, size_t i, const struct bentry *e)
{
	put_le64(run + BENTRY_SIZE * i, e->key);
	put_le64(run + BENTRY_SIZE * i + 8, e->docid);
}

/* Order entries by key, then document number. */
int
bentry_cmp(const void *a, const void *b)
{
	const struct bentry	*x = a, *y = b;

	if (x->key != y->key)
		return (x->key < y->key ? -1 : 1);
	return ((x->docid > y->docid) - (x->docid < y->docid));
}

/*
 * Append to out the document numbers of the n-entry run's entries with this
 * key, at most max of them.  Returns how many.
 */
size_t
run_find(const unsigned char *run, size_t n, uint64_t key,
    struct u64vec *out, size_t max)
{
	size_t	 lo = 0, hi = n, mid, got = 0, step;
	uint64_t frac;

	/*
	 * Band keys are uniform hashes, so a key's place in its chunk is
	 * about its fraction of the chunk's key range: guess it, then gallop
	 * to a bracket [lo, hi) and finish by bisection.  A few cache misses
	 * instead of log2(n).
	 */
	if (n > 16) {
		frac = (key << BAND_CHUNK_BITS) >> 32;
		mid = (size_t)((frac * n) >> 32);
		if (get_le64(run + BENTRY_SIZE * mid) < key) {
			lo = mid + 1;
			for (step = 8; lo + step < n; step *= 2) {
				if (get_le64(run + BENTRY_SIZE * (lo + step)) >=
				    key) {
					hi = lo + step + 1;
					break;
				}
				lo += step + 1;
			}
		} else {
			hi = mid + 1;
			for (step = 8; hi > step + 1; step *= 2) {
				if (get_le64(run + BENTRY_SIZE *
				    (hi - step - 2)) < key) {
					lo = hi - step - 1;
					break;
				}
				hi -= step + 1;
			}
		}
	}
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (get_le64(run + BENTRY_SIZE * mid) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && got < max; lo++, got++) {
		if (get_le64(run + BENTRY_SIZE * lo) != key)
			break;
		u64vec_push(out, get_le64(run + BENTRY_SIZE * lo + 8));
	}
	return (got);
}

/*
 * Merge a sorted run (nold entries) and sorted new entries into out, which
 * has room for both, leaving out entries whose document number is below
 * live (removed documents) and exact repeats.  Returns the entries written.
 */
size_t
run_merge(const unsigned char *old, size_t nold, const struct bentry *add,
    size_t nadd, uint64_t live, unsigned char *out)
{
	struct bentry	 a, last = { 0, 0 };
	size_t		 i = 0, j = 0, n = 0;
	int		 have = 0;

	while (i < nold || j < nadd) {
		if (i < nold) {
			run_get(old, i, &a);
			if (j < nadd && bentry_cmp(&add[j], &a) < 0)
				a = add[j++];
			else
				i++;
		} else
			a = add[j++];
		if (a.docid < live)
			continue;
		if (have && a.key == last.key && a.docid == last.docid)
			continue;
		run_put(out, n++, &a);
		last = a;
		have = 1;
	}
	return (n);
}

/* A new, empty memtable. */
struct memtable *
memtable_create(void)
{
	struct memtable	*mt;

	mt = xcalloc(1, sizeof *mt);
	mt->chunks = xcalloc(1U << MT_BITS, sizeof *mt->chunks);
	return (mt);
}

/* Free a memtable. */
void
memtable_free(struct memtable *mt)
{
	size_t	 c;

	if (mt == NULL)
		return;
	for (c = 0; c < (1U << MT_BITS); c++)
		free(mt->chunks[c].v);
	free(mt->chunks);
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

/* Add an entry; memtable_rollback takes it back until memtable_commit. */
void
memtable_add(struct memtable *mt, uint64_t key, uint64_t docid)
{
	struct mtchunk	*ch;
	unsigned	 c = mt_bucket(key);

	ch = &mt->chunks[c];
	if (ch->n == ch->size) {
		ch->size = ch->size ? 2 * ch->size : 8;
		ch->v = xreallocarray(ch->v, ch->size, sizeof *ch->v);
	}
	ch->v[ch->n].key = key;
	ch->v[ch->n].docid = docid;
	ch->n++;
	mt->entries++;
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

/* Append the document numbers of the entries with this key, up to max. */
size_t
memtable_find(struct memtable *mt, uint64_t key, struct u64vec *out,
    size_t max)
{
	struct mtchunk	*ch = &mt->chunks[mt_bucket(key)];
	size_t		 i, got = 0;

	for (i = 0; i < ch->n && got < max; i++) {
		if (ch->v[i].key == key) {
			u64vec_push(out, ch->v[i].docid);
			got++;
		}
	}
	return (got);
}

/*
 * Copy a chunk's entries into *buf (grown as needed), sorted by key and
 * document number.  Returns how many.  The chunk itself keeps its order,
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
			qsort(*buf + n, ch[i].n, sizeof **buf, bentry_cmp);
		n += ch[i].n;
	}
	return (n);
}

/* Drop a chunk's entries (merged into the run).  Not undoable. */
void
memtable_drop(struct memtable *mt, unsigned c)
{
	struct mtchunk	*ch = &mt->chunks[c * MT_SUB];
	unsigned	 i;

	for (i = 0; i < MT_SUB; i++) {
		mt->entries -= ch[i].n;
		ch[i].n = 0;
		if (ch[i].size > 16) {	/* keep no slack past a sweep */
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
