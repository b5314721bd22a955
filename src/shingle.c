/*
 * Shingles: every run of n consecutive units of the normalised text, hashed
 * with XXH3-64 and the index's seed.  A unit is a character (a Unicode code
 * point, or a byte when the text is not valid UTF-8) or a word (a maximal
 * run of bytes that are not ASCII white space).  A text shorter than n units
 * is one shingle; an empty text has none.
 *
 * A shingle's hash is XXH3_64bits_withSeed() over its UTF-8 bytes exactly as
 * they stand in the normalised text (for words, with the separators between
 * them), so the value depends on nothing but the text, n and the seed.
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Hashing a shingle is the inner loop: compile XXH3 in (Debian's xxhash.h
 * carries the implementation) so the short-input path is inlined.  The
 * values are XXH3's, the same as the library's.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mhfilter.h"

/* The ring of character starts: a power of two above MHF_MAX_SHINGLE. */
#define RING		128

static size_t	shingle_chars(const struct shingler *, const unsigned char *,
		    size_t, int, struct u64vec *);
static size_t	shingle_words(const struct shingler *, const unsigned char *,
		    size_t, struct u64vec *);

/* Is this byte a word separator? */
static inline int
is_sep(unsigned char c)
{
	return (c == ' ' || (c >= '\t' && c <= '\r'));
}

/* Add one shingle's hash. */
static inline void
shingle_add(const struct shingler *sh, const unsigned char *p, size_t len,
    struct u64vec *out)
{
	u64vec_push(out, XXH3_64bits_withSeed(p, len, sh->seed));
}

/* Hash every n-byte window of p[0, len) into out->v. */
#define ASCII_SHINGLES(n) do {						\
	for (i = 0; i + (n) <= len; i++)				\
		out->v[i] = XXH3_64bits_withSeed(p + i, (n), sh->seed);	\
} while (0)

/*
 * Character shingles: code points, or bytes when bytes is set.  flatten
 * inlines XXH3 here, where the length is small and known.
 */
#if defined(__GNUC__)
__attribute__((flatten))
#endif
static size_t
shingle_chars(const struct shingler *sh, const unsigned char *p, size_t len,
    int bytes, struct u64vec *out)
{
	size_t	 ring[RING], i, count = 0, n = sh->n, at;
	size_t	 head = 0;

	if (bytes || ascii_span(p, len) == len) {
		/* One byte one character: the fast path for ASCII. */
		if (len <= n) {
			shingle_add(sh, p, len, out);
			return (1);
		}
		if (out->size < len - n + 1) {
			out->size = len - n + 1;
			out->v = xreallocarray(out->v, out->size,
			    sizeof *out->v);
		}
		/*
		 * With the length a constant, the compiler folds XXH3's
		 * dispatch on it and keeps its constants in registers: the
		 * usual shingle sizes get a loop of their own.
		 */
		switch (n) {
		case 3:
			ASCII_SHINGLES(3);
			break;
		case 4:
			ASCII_SHINGLES(4);
			break;
		case 5:
			ASCII_SHINGLES(5);
			break;
		case 6:
			ASCII_SHINGLES(6);
			break;
		case 7:
			ASCII_SHINGLES(7);
			break;
		case 8:
			ASCII_SHINGLES(8);
			break;
		default:
			ASCII_SHINGLES(n);
			break;
		}
		out->n = len - n + 1;
		return (len - n + 1);
	}

	/*
	 * UTF-8: keep the offsets of the last n+1 character starts in a ring;
	 * each new start (or the end) closes the shingle that began n
	 * characters before it.
	 */
	for (i = 0; i <= len; i++) {
		if (i < len && (p[i] & 0xc0) == 0x80)
			continue;	/* a continuation byte */
		ring[head & (RING - 1)] = i;
		head++;
		if (head > n) {
			at = ring[(head - n - 1) & (RING - 1)];
			shingle_add(sh, p + at, i - at, out);
			count++;
		}
	}
	if (count == 0) {
		shingle_add(sh, p, len, out);
		count = 1;
	}
	return (count);
}

/* Word shingles: n consecutive words with what separates them. */
static size_t
shingle_words(const struct shingler *sh, const unsigned char *p, size_t len,
    struct u64vec *out)
{
	size_t	 starts[MHF_MAX_SHINGLE], i, j, count = 0, words = 0;
	size_t	 n = sh->n, first = 0, last = 0;

	i = 0;
	for (;;) {
		while (i < len && is_sep(p[i]))
			i++;
		if (i == len)
			break;
		j = i;
		while (j < len && !is_sep(p[j]))
			j++;
		/* A word at [i, j). */
		if (words == 0)
			first = i;
		last = j;
		starts[words % n] = i;
		words++;
		if (words >= n) {
			shingle_add(sh, p + starts[(words - n) % n],
			    j - starts[(words - n) % n], out);
			count++;
		}
		i = j;
	}
	if (count == 0 && words > 0) {
		shingle_add(sh, p + first, last - first, out);
		count = 1;
	}
	return (count);
}

/*
 * Hash the shingles of a normalised text into out (which is emptied
 * first).  bytes says the text is not valid UTF-8.  Returns how many.
 */
size_t
shingle_hash(const struct shingler *sh, const char *text, size_t len,
    int bytes, struct u64vec *out)
{
	const unsigned char	*p = (const unsigned char *)text;

	out->n = 0;
	if (len == 0)
		return (0);
	if (sh->unit == UNIT_WORD)
		return (shingle_words(sh, p, len, out));
	return (shingle_chars(sh, p, len, bytes, out));
}

/*
 * Shingle sets by hashing, for exact verification, where sorting both sets
 * was the cost.  Open addressing with linear probing, at most half full.
 * The values are XXH3 hashes, uniform already: the low bits are the home
 * slot.  Any value is legal (0 too), so a slot is in use iff its mark is
 * the set's generation; a build bumps the generation instead of clearing
 * the table, which is cleared only when the generation wraps.
 */
#define SHSET_MIN	16
#define SHSET_KEEP	(1U << 16)	/* slots kept by shset_trim */

/* Start an empty set with room for up to n values. */
static void
shset_reset(struct shset *s, size_t n)
{
	size_t	 want = SHSET_MIN;

	while (want / 2 < n)
		want <<= 1;
	if (want > s->size) {
		free(s->slot);
		free(s->mark);
		s->slot = xreallocarray(NULL, want, sizeof *s->slot);
		s->mark = xcalloc(want, sizeof *s->mark);
		s->size = want;
		s->gen = 0;
	}
	s->mask = want - 1;
	if (++s->gen == 0) {
		memset(s->mark, 0, s->size * sizeof *s->mark);
		s->gen = 1;
	}
	s->n = 0;
}

/* Add a value to a set; returns 1 if it was not there before. */
static inline int
shset_add(struct shset *s, uint64_t x)
{
	size_t	 i = x & s->mask;

	while (s->mark[i] == s->gen) {
		if (s->slot[i] == x)
			return (0);
		i = (i + 1) & s->mask;
	}
	s->mark[i] = s->gen;
	s->slot[i] = x;
	s->n++;
	return (1);
}

/* Is a value in a set?  Inlined where it is the inner loop. */
static inline int
shset_find(const struct shset *s, uint64_t x)
{
	size_t	 i = x & s->mask;

	if (s->n == 0)
		return (0);
	while (s->mark[i] == s->gen) {
		if (s->slot[i] == x)
			return (1);
		i = (i + 1) & s->mask;
	}
	return (0);
}

/* Free a set's memory; it is empty again. */
void
shset_free(struct shset *s)
{
	free(s->slot);
	free(s->mark);
	memset(s, 0, sizeof *s);
}

/* Free a set's memory if it grew past what is worth keeping for reuse. */
void
shset_trim(struct shset *s)
{
	if (s->size > SHSET_KEEP)
		shset_free(s);
}

/* Make s the set of the values h[0..n) (with repeats).  Returns its size. */
size_t
shset_build(struct shset *s, const uint64_t *h, size_t n)
{
	size_t	 i;

	shset_reset(s, n);
	for (i = 0; i < n; i++)
		shset_add(s, h[i]);
	return (s->n);
}

/* Is a value in the set? */
int
shset_has(const struct shset *s, uint64_t x)
{
	return (shset_find(s, x));
}

/*
 * Jaccard similarity of the set mine and the set of the values h[0..n)
 * (with repeats), which is built in scratch (not mine).  The same value as
 * sorting both sets and merging them; two empty sets are equal.
 */
double
shset_jaccard(const struct shset *mine, struct shset *scratch,
    const uint64_t *h, size_t n)
{
	size_t	 i, both = 0;

	shset_reset(scratch, n);
	for (i = 0; i < n; i++) {
		if (shset_add(scratch, h[i]) && shset_find(mine, h[i]))
			both++;
	}
	if (mine->n == 0 && scratch->n == 0)
		return (1.0);
	return ((double)both / (double)(mine->n + scratch->n - both));
}
