/*
 * Unit tests for shingle.c: how many shingles a text has for each unit, the
 * exact bytes each shingle hashes (checked against XXH3 directly), sets,
 * Jaccard similarity, and known-answer vectors for the stored scheme.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "mhfilter.h"

#ifndef nitems
#define nitems(a)	(sizeof (a) / sizeof (a)[0])
#endif

/* The loops with SIMD code are tested with each of theirs. */
static const int simd_levels[] = { SIMD_NONE, SIMD_AVX2, SIMD_ALL };

/*
 * The reference for shset: the set of shingle hashes, sorted, without
 * repeats (what exact verification did before shset).  Returns its size.
 * scratch is working memory for the sort.
 */
static size_t
shingle_set(const struct shingler *sh, const char *text, size_t len,
    int bytes, struct u64vec *out, struct u64vec *scratch)
{
	size_t	 i, n;

	shingle_hash(sh, text, len, bytes, out);
	if (out->n < 2)
		return (out->n);
	sort_u64(out->v, out->n, scratch);
	for (i = 1, n = 1; i < out->n; i++) {
		if (out->v[i] != out->v[n - 1])
			out->v[n++] = out->v[i];
	}
	out->n = n;
	return (n);
}

/* Jaccard similarity of two sorted sets; two empty sets are equal. */
static double
jaccard_sorted(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	size_t	 i = 0, j = 0, both = 0;

	if (na == 0 && nb == 0)
		return (1.0);
	while (i < na && j < nb) {
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else {
			both++;
			i++;
			j++;
		}
	}
	return ((double)both / (double)(na + nb - both));
}

#define TEN	"abcdefghij"
#define HUNDRED	TEN TEN TEN TEN TEN TEN TEN TEN TEN TEN
#define E5	"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"	/* 5 x é */
#define E10	E5 E5
#define W10	"a b c d e f g h i j "

/* A table of shingle counts. */
static const struct ccase {
	int		 unit;
	unsigned	 n;
	int		 bytes;
	const char	*text;
	size_t		 count;
} ccases[] = {
	{ UNIT_CHAR, 5, 0, "hello world", 11 - 4 },
	{ UNIT_CHAR, 5, 0, "abcdef", 2 },
	{ UNIT_CHAR, 5, 0, "abcde", 1 },
	{ UNIT_CHAR, 5, 0, "abc", 1 },
	{ UNIT_CHAR, 1, 0, "abc", 3 },
	{ UNIT_CHAR, 5, 0, "", 0 },
	{ UNIT_CHAR, 5, 1, "", 0 },
	{ UNIT_CHAR, 5, 0, "h\xc3\xa9llo w\xc3\xb6rld", 7 },	/* 11 chars */
	{ UNIT_CHAR, 5, 1, "h\xc3\xa9llo w\xc3\xb6rld", 9 },	/* 13 bytes */
	{ UNIT_CHAR, 3, 0, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"
	    "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88", 5 },
	{ UNIT_CHAR, 5, 0, "\xe6\x97\xa5\xe6\x9c\xac", 1 },
	{ UNIT_CHAR, 2, 0, "\xe6\x97\xa5\xe6\x9c\xac", 1 },
	{ UNIT_CHAR, 64, 0, "x", 1 },
	{ UNIT_CHAR, 64, 0, HUNDRED, 100 - 63 },	/* MHF_MAX_SHINGLE */
	{ UNIT_CHAR, 64, 0, E10 E10 E10 E10 E10 E10 E10, 70 - 63 },
	{ UNIT_CHAR, 64, 1, E10 E10 E10 E10 E10 E10 E10, 140 - 63 },
	{ UNIT_WORD, 2, 0, "a b c d", 3 },
	{ UNIT_WORD, 1, 0, "one two three", 3 },
	{ UNIT_WORD, 3, 0, "a b", 1 },
	{ UNIT_WORD, 2, 0, "  a \t b  ", 1 },
	{ UNIT_WORD, 2, 0, "", 0 },
	{ UNIT_WORD, 2, 0, " \t\n ", 0 },
	{ UNIT_WORD, 64, 0, W10 W10 W10 W10 W10 W10 W10 W10 W10 W10, 100 - 63 },
	{ UNIT_WORD, 64, 0, W10, 1 },
};

/* Each case of the count table, with the return value and out->n agreeing. */
static void
test_counts(void **state)
{
	const struct ccase	*c;
	struct shingler		 sh;
	struct u64vec		 v = { 0 };
	size_t			 i, got;

	for (i = 0; i < sizeof ccases / sizeof ccases[0]; i++) {
		c = &ccases[i];
		sh.unit = c->unit;
		sh.n = c->n;
		sh.seed = 0;
		u64vec_push(&v, 1);	/* shingle_hash empties it first */
		got = shingle_hash(&sh, c->text, strlen(c->text), c->bytes,
		    &v);
		if (got != c->count || v.n != c->count)
			fail_msg("case %zu (\"%s\", n %u): %zu shingles (%zu "
			    "in the vector), want %zu", i, c->text, c->n, got,
			    v.n, c->count);
	}
	u64vec_free(&v);
}

/* ASCII and byte shingles hash every n-byte window, in order. */
static void
test_byte_windows(void **state)
{
	const char	*texts[] = {
		"hello world", "h\xc3\xa9llo w\xc3\xb6rld"
	};
	struct shingler	 sh = { UNIT_CHAR, 5, 7 };
	struct u64vec	 v = { 0 };
	size_t		 i, t, len;

	for (t = 0; t < 2; t++) {
		len = strlen(texts[t]);
		assert_int_equal(shingle_hash(&sh, texts[t], len, 1, &v),
		    len - 4);
		for (i = 0; i + 5 <= len; i++)
			assert_int_equal(v.v[i],
			    XXH3_64bits_withSeed(texts[t] + i, 5, 7));
	}
	/* Without the bytes flag, ASCII text takes the same windows. */
	assert_int_equal(shingle_hash(&sh, "hello world", 11, 0, &v), 7);
	assert_int_equal(v.v[6], XXH3_64bits_withSeed("world", 5, 7));
	u64vec_free(&v);
}

/*
 * Every shingle size has the library's values: sizes 3 to 8 have loops of
 * their own (the length a constant), the others share one.  The ASCII test
 * reads eight bytes at a time: a non-ASCII byte at any place of the word
 * or of the tail sends the text to the code point path.
 */
static void
test_sizes(void **state)
{
	char		 text[40];
	struct shingler	 sh = { UNIT_CHAR, 1, 99 };
	struct u64vec	 v = { 0 };
	size_t		 i, n, len, at;

	for (i = 0; i < sizeof text - 1; i++)
		text[i] = 'a' + (char)(i * 7 % 26);
	text[sizeof text - 1] = '\0';
	len = sizeof text - 1;
	for (n = 1; n <= 12; n++) {
		sh.n = n;
		assert_int_equal(shingle_hash(&sh, text, len, 0, &v),
		    len - n + 1);
		for (i = 0; i + n <= len; i++)
			assert_int_equal(v.v[i],
			    XXH3_64bits_withSeed(text + i, n, 99));
	}
	/* U+00E9 (2 bytes) at every place: one character fewer. */
	sh.n = 5;
	for (at = 0; at + 2 <= 20; at++) {
		memcpy(text, "abcdefghijklmnopqrst", 20);
		text[at] = (char)0xc3;
		text[at + 1] = (char)0xa9;
		assert_int_equal(shingle_hash(&sh, text, 20, 0, &v), 15);
		assert_int_equal(shingle_hash(&sh, text, 20, 1, &v), 16);
	}
	u64vec_free(&v);
}

/* A shingle's key as the top of shingle.c defines it. */
static uint64_t
ref_key(const unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t	 x = 0;
	size_t		 i;
	unsigned char	 any = 0;

	for (i = 0; i < len; i++)
		any |= p[i];
	if (len > 7 || any >= 0x80)
		return (XXH3_64bits_withSeed(p, len, seed) | 1ULL << 63);
	for (i = 0; i < len; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return (x | (uint64_t)len << 56);
}

/* shingle_hash has the library's value for every window of text. */
static void
check_windows(const struct shingler *sh, const unsigned char *text,
    size_t len, int bytes, struct u64vec *v)
{
	size_t	 i, want, n;

	n = len < sh->n ? len : sh->n;
	want = len - n + 1;
	assert_int_equal(shingle_hash(sh, (const char *)text, len, bytes, v),
	    want);
	for (i = 0; i < want; i++) {
		if (v->v[i] != XXH3_64bits_withSeed(text + i, n, sh->seed))
			fail_msg("n %u, seed %#llx, len %zu, window %zu",
			    sh->n, (unsigned long long)sh->seed, len, i);
	}
	/* And their keys, as the top of shingle.c defines them. */
	assert_int_equal(shingle_keys(sh, (const char *)text, len, bytes, v),
	    want);
	for (i = 0; i < want; i++) {
		if (v->v[i] != ref_key(text + i, n, sh->seed))
			fail_msg("n %u, seed %#llx, len %zu, key %zu",
			    sh->n, (unsigned long long)sh->seed, len, i);
	}
}

/*
 * The byte windows' hashes are computed without xxhash's own function
 * (shingle.c has XXH3's 4-to-8-byte path inline, with AVX2 or AVX-512 8
 * windows at a time where the CPU has it): hold the portable loop, the
 * AVX2 one and the AVX-512 one (where the CPU has them) to the library's
 * XXH3_64bits_withSeed on every window of texts of 1 to 100 bytes, ASCII
 * and any bytes, for shingle sizes 1 to 12 and 64 and seeds that stress
 * the seed's part (its halves swapped and subtracted); and the windows'
 * keys (AVX2 makes those of ASCII text 8 at a time) to ref_key.
 */
static void
test_window_hashes(void **state)
{
	static const uint64_t fixed[] = { 0, 1, 7, 0xffffffff, 1ULL << 32,
	    1ULL << 63, UINT64_MAX, 0x0123456789abcdefULL };
	unsigned char	 text[128];
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct u64vec	 v = { 0 };
	uint64_t	 r = 0x77696e646f777321ULL;
	size_t		 i, s, len;
	unsigned	 n;
	int		 simd;

	for (simd = 0; simd < (int)nitems(simd_levels); simd++) {
		simd_allow(simd_levels[simd]);
		for (s = 0; s < 16; s++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			sh.seed = s < nitems(fixed) ? fixed[s] : r;
			for (n = 1; n <= 13; n++) {
				sh.n = n == 13 ? 64 : n;
				for (len = 1; len <= 100; len++) {
					for (i = 0; i < len; i++) {
						r ^= r << 13, r ^= r >> 7,
						    r ^= r << 17;
						text[i] = 0x20 + (r >> 24) % 95;
					}
					check_windows(&sh, text, len, 0, &v);
					for (i = 0; i < len; i++)
						text[i] ^= (r >> (i % 56)) &
						    0x80;
					check_windows(&sh, text, len, 1, &v);
				}
			}
		}
	}
	simd_allow(SIMD_ALL);
	u64vec_free(&v);
}

/*
 * shingle_hash and shingle_keys of UTF-8 text whose nc characters start at
 * starts[0, nc] (starts[nc] the end): every window of n characters hashes
 * (and keys) as the library's XXH3 of its bytes, in order.
 */
static void
check_utf8(const struct shingler *sh, const unsigned char *text,
    const size_t *starts, size_t nc, struct u64vec *v, struct u64vec *k,
    size_t t)
{
	size_t	 i, want, len = starts[nc];

	want = nc < sh->n ? 1 : nc - sh->n + 1;
	assert_int_equal(shingle_hash(sh, (char *)text, len, 0, v), want);
	assert_int_equal(shingle_keys(sh, (char *)text, len, 0, k), want);
	if (nc < sh->n) {
		assert_int_equal(v->v[0], XXH3_64bits_withSeed(text, len,
		    sh->seed));
		assert_int_equal(k->v[0], ref_key(text, len, sh->seed));
		return;
	}
	for (i = 0; i < want; i++) {
		if (v->v[i] != XXH3_64bits_withSeed(text + starts[i],
		    starts[i + sh->n] - starts[i], sh->seed))
			fail_msg("text %zu, n %u: window %zu", t, sh->n, i);
		if (k->v[i] != ref_key(text + starts[i],
		    starts[i + sh->n] - starts[i], sh->seed))
			fail_msg("text %zu, n %u: key %zu", t, sh->n, i);
	}
}

/*
 * UTF-8 text of 1 to 60 characters of 1 to 4 bytes: every window of n
 * characters hashes (and keys) as the library's XXH3 of its bytes, for n
 * from 1 to 12 and several seeds.
 */
static void
test_utf8_random(void **state)
{
	static const char *chars[] = { "a", "Z", " ", "\xc3\xa9",
	    "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xd0\x9f" };
	unsigned char	 text[256];
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct u64vec	 v = { 0 }, k = { 0 };
	uint64_t	 r = 0x7574663877696e64ULL;
	size_t		 starts[64], nc, i, len, t, c;

	for (t = 0; t < 3000; t++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		nc = 1 + r % 60;
		len = 0;
		for (i = 0; i < nc; i++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			c = (r >> 8) % 8 < 4 ? 0 : (r >> 16) % nitems(chars);
			starts[i] = len;
			memcpy(text + len, chars[c], strlen(chars[c]));
			len += strlen(chars[c]);
		}
		starts[nc] = len;
		sh.n = 1 + t % 12;
		sh.seed = t % 5 == 0 ? 0 : r;
		check_utf8(&sh, text, starts, nc, &v, &k, t);
	}
	u64vec_free(&v);
	u64vec_free(&k);
}

/*
 * Runs of ASCII in UTF-8 text, which shingle.c hashes at once when they
 * are long enough: runs of every length from 0 to n + 40 (across where
 * they become long enough) between other characters, at the start and at
 * the end, for n from 1 to 12 and 64, with the portable loops, AVX2 and
 * AVX-512.
 */
static void
test_utf8_runs(void **state)
{
	static const char *chars[] = { "\xc3\xa9", "\xe2\x82\xac",
	    "\xf0\x9f\x98\x80", "\xd0\x9f" };
	unsigned char	 text[4096];
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct u64vec	 v = { 0 }, k = { 0 };
	uint64_t	 r = 0x72756e736f667574ULL;
	size_t		 starts[1024], nc, i, j, len, t, c, run, nt = 0;
	int		 simd;

	for (simd = 0; simd < (int)nitems(simd_levels); simd++) {
		simd_allow(simd_levels[simd]);
		for (t = 0; t < 13; t++) {
			sh.n = t == 12 ? 64 : t + 1;
			for (run = 0; run <= sh.n + 40; run++) {
				r ^= r << 13, r ^= r >> 7, r ^= r << 17;
				sh.seed = r;
				len = nc = 0;
				/* ASCII first, last and between. */
				for (j = 0; j < 4; j++) {
					for (i = 0; i < run + j % 2; i++) {
						starts[nc++] = len;
						text[len++] = 0x20 +
						    (r >> (i % 48)) % 95;
					}
					if (j == 3)
						break;
					c = (r >> (8 * j)) % nitems(chars);
					starts[nc++] = len;
					memcpy(text + len, chars[c],
					    strlen(chars[c]));
					len += strlen(chars[c]);
				}
				starts[nc] = len;
				check_utf8(&sh, text, starts, nc, &v, &k,
				    nt++);
			}
		}
	}
	simd_allow(SIMD_ALL);
	u64vec_free(&v);
	u64vec_free(&k);
}

/* A text shorter than n is one shingle: the hash of the whole text. */
static void
test_short(void **state)
{
	struct shingler	 sh = { UNIT_CHAR, 5, 42 };
	struct u64vec	 v = { 0 };
	const char	*cjk = "\xe6\x97\xa5\xe6\x9c\xac";	/* 2 chars */

	assert_int_equal(shingle_hash(&sh, "abc", 3, 0, &v), 1);
	assert_int_equal(v.v[0], XXH3_64bits_withSeed("abc", 3, 42));
	assert_int_equal(shingle_hash(&sh, cjk, 6, 0, &v), 1);
	assert_int_equal(v.v[0], XXH3_64bits_withSeed(cjk, 6, 42));
	/* 6 bytes are more than 5: as bytes it is two shingles. */
	assert_int_equal(shingle_hash(&sh, cjk, 6, 1, &v), 2);
	assert_int_equal(v.v[1], XXH3_64bits_withSeed(cjk + 1, 5, 42));
	u64vec_free(&v);
}

/*
 * UTF-8 shingles are windows of n code points: find the code point starts
 * here and hash each window's bytes.
 */
static void
test_utf8_windows(void **state)
{
	static const char	*texts[] = {
		"h\xc3\xa9llo w\xc3\xb6rld",
		"a\xf0\x9f\x98\x80" "b\xe2\x82\xac" "cd\xc3\xa9" "ef",
		"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x83\x86",
	};
	struct shingler		 sh = { UNIT_CHAR, 3, 1 };
	struct u64vec		 v = { 0 };
	size_t			 starts[64], nstarts, i, t, len;

	for (t = 0; t < sizeof texts / sizeof texts[0]; t++) {
		len = strlen(texts[t]);
		nstarts = 0;
		for (i = 0; i < len; i++) {
			if (((unsigned char)texts[t][i] & 0xc0) != 0x80)
				starts[nstarts++] = i;
		}
		starts[nstarts] = len;
		assert_int_equal(shingle_hash(&sh, texts[t], len, 0, &v),
		    nstarts - 2);
		for (i = 0; i + 3 <= nstarts; i++)
			assert_int_equal(v.v[i], XXH3_64bits_withSeed(
			    texts[t] + starts[i], starts[i + 3] - starts[i],
			    1));
	}

	/* The brief's example: the first 5-gram of "héllo wörld". */
	sh.n = 5;
	sh.seed = 0;
	assert_int_equal(shingle_hash(&sh, texts[0], strlen(texts[0]), 0, &v),
	    7);
	assert_int_equal(v.v[0], XXH3_64bits_withSeed("h\xc3\xa9llo", 6, 0));
	assert_int_equal(v.v[6], XXH3_64bits_withSeed("w\xc3\xb6rld", 6, 0));
	u64vec_free(&v);
}

/* Word shingles hash the words with the separators between them. */
static void
test_words(void **state)
{
	static const struct {
		const char	*text;
		unsigned	 n;
		const char	*want[4];
	} cases[] = {
		{ "a b c d", 2, { "a b", "b c", "c d" } },
		{ "a  b\tc", 2, { "a  b", "b\tc" } },
		{ "  x  y  ", 3, { "x  y" } },
		{ "one", 2, { "one" } },
		{ "\xc3\xa9t\xc3\xa9 hiver", 1,
		    { "\xc3\xa9t\xc3\xa9", "hiver" } },
	};
	struct shingler	 sh = { UNIT_WORD, 2, 0 };
	struct u64vec	 v = { 0 };
	size_t		 i, j, nwant;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sh.n = cases[i].n;
		for (nwant = 0; nwant < 4 && cases[i].want[nwant]; nwant++)
			;
		assert_int_equal(shingle_hash(&sh, cases[i].text,
		    strlen(cases[i].text), 0, &v), nwant);
		for (j = 0; j < nwant; j++)
			assert_int_equal(v.v[j], XXH3_64bits_withSeed(
			    cases[i].want[j], strlen(cases[i].want[j]), 0));
	}
	u64vec_free(&v);
}

/* Compare two 64-bit values for qsort. */
static int
u64cmp(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return ((x > y) - (x < y));
}

/* Check that set is the sorted, repeat-free form of the multiset all. */
static void
check_set(const struct u64vec *all, const struct u64vec *set)
{
	uint64_t	*ref;
	size_t		 i, n;

	ref = xreallocarray(NULL, all->n, sizeof *ref);
	memcpy(ref, all->v, all->n * sizeof *ref);
	qsort(ref, all->n, sizeof *ref, u64cmp);
	for (i = 0, n = 0; i < all->n; i++) {
		if (n == 0 || ref[i] != ref[n - 1])
			ref[n++] = ref[i];
	}
	assert_int_equal(set->n, n);
	assert_memory_equal(set->v, ref, n * sizeof *ref);
	free(ref);
}

/* shingle_set sorts and drops repeats, for small and large sets. */
static void
test_set(void **state)
{
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct u64vec	 v = { 0 }, all = { 0 }, scratch = { 0 };
	const char	*text = "the cat and the hat and the bat";
	struct buf	 big = { 0 };
	size_t		 i, n;
	char		 word[32];

	assert_int_equal(shingle_set(&sh, "aaaaaaa", 7, 0, &v, &scratch), 1);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.v[0], XXH3_64bits_withSeed("aaaaa", 5, 0));

	sh.n = 3;
	assert_int_equal(shingle_set(&sh, "abcabcabc", 9, 0, &v, &scratch),
	    3);
	assert_int_equal(shingle_set(&sh, "", 0, 0, &v, &scratch), 0);

	/* A small set, with repeats. */
	shingle_hash(&sh, text, strlen(text), 0, &all);
	assert_true(shingle_set(&sh, text, strlen(text), 0, &v, &scratch) <
	    all.n);
	check_set(&all, &v);

	/* Large sets, with repeats: thousands of shingles. */
	for (i = 0; i < 3000; i++) {
		snprintf(word, sizeof word, "w%zu ", (i * 7919) % 1009);
		buf_append(&big, word, strlen(word));
	}
	for (sh.n = 5; sh.n <= 9; sh.n += 4) {
		shingle_hash(&sh, big.data, big.len, 0, &all);
		n = shingle_set(&sh, big.data, big.len, 0, &v, &scratch);
		assert_int_equal(n, v.n);
		assert_true(n > 64 && n < all.n);
		check_set(&all, &v);
	}
	sh.unit = UNIT_WORD;
	sh.n = 2;
	shingle_hash(&sh, big.data, big.len, 0, &all);
	shingle_set(&sh, big.data, big.len, 0, &v, &scratch);
	check_set(&all, &v);

	buf_free(&big);
	u64vec_free(&v);
	u64vec_free(&all);
	u64vec_free(&scratch);
}

/*
 * The sort shingle_set relies on, on inputs that are hard for a radix sort:
 * values equal in some digits, all equal, extremes, many sizes.
 */
static void
test_sort(void **state)
{
	static const uint64_t	 masks[] = {
		UINT64_MAX, 0xff, 0xffffffff00000000ULL, 0x8000000000000001ULL,
		0x7ff0000000000ULL, 0,
	};
	struct u64vec		 scratch = { 0 };
	uint64_t		*v, *ref, x = 0x243f6a8885a308d3ULL;
	size_t			 sizes[] = { 0, 1, 2, 63, 64, 65, 1000, 5000 };
	size_t			 s, m, i, n;

	for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		n = sizes[s];
		v = xreallocarray(NULL, n + 1, sizeof *v);
		ref = xreallocarray(NULL, n + 1, sizeof *ref);
		for (m = 0; m < sizeof masks / sizeof masks[0]; m++) {
			for (i = 0; i < n; i++) {
				/* xorshift64 */
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				v[i] = (x & masks[m]) | (i % 3 == 0 ?
				    UINT64_MAX & ~masks[m] : 0);
			}
			memcpy(ref, v, n * sizeof *v);
			qsort(ref, n, sizeof *ref, u64cmp);
			sort_u64(v, n, &scratch);
			if (n != 0 && memcmp(v, ref, n * sizeof *v) != 0)
				fail_msg("sort_u64 of %zu values (mask "
				    "%#llx) is wrong", n,
				    (unsigned long long)masks[m]);
		}
		free(v);
		free(ref);
	}
	u64vec_free(&scratch);
}

/* Jaccard similarity of small sorted sets, as exact fractions. */
static void
test_jaccard(void **state)
{
	static const uint64_t	 s123[] = { 1, 2, 3 }, s234[] = { 2, 3, 4 };
	static const uint64_t	 s1234[] = { 1, 2, 3, 4 };
	static const uint64_t	 s345678[] = { 3, 4, 5, 6, 7, 8 };
	static const uint64_t	 s9[] = { 9 }, sbig[] = { 1, UINT64_MAX };
	static const struct {
		const uint64_t	*a;
		size_t		 na;
		const uint64_t	*b;
		size_t		 nb;
		double		 want;
	} cases[] = {
		{ s123, 3, s123, 3, 1.0 },
		{ s123, 3, s234, 3, 2.0 / 4 },
		{ s1234, 4, s345678, 6, 2.0 / 8 },
		{ s345678, 6, s1234, 4, 2.0 / 8 },
		{ s123, 3, s1234, 4, 3.0 / 4 },
		{ s123, 3, s9, 1, 0.0 },
		{ sbig, 2, s1234, 4, 1.0 / 5 },
		{ NULL, 0, NULL, 0, 1.0 },
		{ s123, 3, NULL, 0, 0.0 },
		{ NULL, 0, s9, 1, 0.0 },
	};
	size_t		 i;
	double		 got;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		got = jaccard_sorted(cases[i].a, cases[i].na, cases[i].b,
		    cases[i].nb);
		if (got != cases[i].want)
			fail_msg("case %zu: %.17g, want %.17g", i, got,
			    cases[i].want);
	}
}

/* A xorshift64 generator for the tests' values. */
static uint64_t
next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (*x);
}

/* The distinct values of a and b, sorted, into sa and sb. */
static void
ref_sets(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
    struct u64vec *sa, struct u64vec *sb)
{
	struct u64vec	 scratch = { 0 };
	struct u64vec	*v[2] = { sa, sb };
	const uint64_t	*in[2] = { a, b };
	size_t		 nin[2] = { na, nb }, i, k, n;

	for (k = 0; k < 2; k++) {
		for (i = 0; i < nin[k]; i++)
			u64vec_push(v[k], in[k][i]);
		sort_u64(v[k]->v, v[k]->n, &scratch);
		for (i = 0, n = 0; i < v[k]->n; i++) {
			if (n == 0 || v[k]->v[i] != v[k]->v[n - 1])
				v[k]->v[n++] = v[k]->v[i];
		}
		v[k]->n = n;
	}
	u64vec_free(&scratch);
}

/* The Jaccard similarity of two multisets, by sorting and merging. */
static double
ref_jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	struct u64vec	 sa = { 0 }, sb = { 0 };
	double		 sim;

	ref_sets(a, na, b, nb, &sa, &sb);
	sim = jaccard_sorted(sa.v, sa.n, sb.v, sb.n);
	u64vec_free(&sa);
	u64vec_free(&sb);
	return (sim);
}

/*
 * The distinct values two multisets have in common, and into *nbp how many
 * distinct values b has, by sorting and merging.
 */
static size_t
ref_overlap(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
    size_t *nbp)
{
	struct u64vec	 sa = { 0 }, sb = { 0 };
	size_t		 i = 0, j = 0, both = 0;

	ref_sets(a, na, b, nb, &sa, &sb);
	while (i < sa.n && j < sb.n) {
		if (sa.v[i] == sb.v[j]) {
			both++;
			i++;
			j++;
		} else if (sa.v[i] < sb.v[j])
			i++;
		else
			j++;
	}
	*nbp = sb.n;
	u64vec_free(&sa);
	u64vec_free(&sb);
	return (both);
}

/* How many distinct values a multiset has, and is x one of them? */
static size_t
ref_distinct(const uint64_t *a, size_t na)
{
	size_t	 i, j, n = 0;

	for (i = 0; i < na; i++) {
		for (j = 0; j < i && a[j] != a[i]; j++)
			;
		n += j == i;
	}
	return (n);
}

/* Is x among a[0..na)? */
static int
ref_has(const uint64_t *a, size_t na, uint64_t x)
{
	size_t	 i;

	for (i = 0; i < na; i++) {
		if (a[i] == x)
			return (1);
	}
	return (0);
}

/*
 * Check shset against sort and merge for the multisets a and b, both ways
 * round, through the sets mine and scratch (reused from call to call):
 * the size, membership and exactly the same similarity.
 */
static void
check_shset(struct shset *mine, struct shset *scratch, const uint64_t *a,
    size_t na, const uint64_t *b, size_t nb, int slow)
{
	double	 want, got;
	size_t	 i, n, both, theirs, want_both, want_theirs;

	want = ref_jaccard(a, na, b, nb);
	want_both = ref_overlap(a, na, b, nb, &want_theirs);
	n = shset_build(mine, a, na);
	assert_int_equal(n, mine->n);
	assert_true(2 * mine->n <= mine->mask + 1);	/* at most half full */
	for (i = 0; i < na; i++)
		assert_true(shset_has(mine, a[i]));
	if (slow) {
		assert_int_equal(n, ref_distinct(a, na));
		for (i = 0; i < nb; i++)
			assert_int_equal(shset_has(mine, b[i]),
			    ref_has(a, na, b[i]));
	}
	got = shset_jaccard(mine, scratch, b, nb);
	if (got != want)
		fail_msg("shset_jaccard of %zu and %zu values: %.17g, want "
		    "%.17g", na, nb, got, want);
	assert_true(2 * scratch->n <= scratch->mask + 1);
	/* What containment is made of: the values in common, b's. */
	both = shset_overlap(mine, scratch, b, nb, &theirs);
	if (both != want_both || theirs != want_theirs)
		fail_msg("shset_overlap of %zu and %zu values: %zu of %zu, "
		    "want %zu of %zu", na, nb, both, theirs, want_both,
		    want_theirs);

	/* The other way round: the same value. */
	shset_build(mine, b, nb);
	got = shset_jaccard(mine, scratch, a, na);
	if (got != want)
		fail_msg("shset_jaccard of %zu and %zu values (swapped): "
		    "%.17g, want %.17g", nb, na, got, want);
}

/* Hash sets on small cases: empty, one empty, identical, disjoint, 0. */
static void
test_shset_small(void **state)
{
	static const uint64_t	 s123[] = { 1, 2, 3 }, s234[] = { 2, 3, 4 };
	static const uint64_t	 rep[] = { 3, 2, 3, 1, 1, 3, 2, 2 };
	static const uint64_t	 s0[] = { 0 }, s00[] = { 0, 0, 0 };
	static const uint64_t	 s0x[] = { 0, UINT64_MAX, 16, 32 };
	static const uint64_t	 s9[] = { 9, 9 };
	static const struct {
		const uint64_t	*a;
		size_t		 na;
		const uint64_t	*b;
		size_t		 nb;
		double		 want;
	} cases[] = {
		{ NULL, 0, NULL, 0, 1.0 },
		{ s123, 3, NULL, 0, 0.0 },
		{ NULL, 0, s0, 1, 0.0 },
		{ s123, 3, s123, 3, 1.0 },
		{ s123, 3, rep, 8, 1.0 },
		{ s123, 3, s234, 3, 2.0 / 4 },
		{ s123, 3, s9, 2, 0.0 },
		{ s0, 1, s00, 3, 1.0 },
		{ s0, 1, s123, 3, 0.0 },
		{ s00, 3, s0x, 4, 1.0 / 4 },
		{ s0x, 4, s0x, 4, 1.0 },
	};
	struct shset	 mine = { 0 }, scratch = { 0 };
	size_t		 i;
	double		 got;

	/* A zeroed set is empty. */
	assert_false(shset_has(&mine, 0));
	assert_false(shset_has(&mine, 1));
	assert_true(shset_jaccard(&mine, &scratch, NULL, 0) == 1.0);
	assert_true(shset_jaccard(&mine, &scratch, s0, 1) == 0.0);

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(shset_build(&mine, cases[i].a, cases[i].na),
		    ref_distinct(cases[i].a, cases[i].na));
		got = shset_jaccard(&mine, &scratch, cases[i].b, cases[i].nb);
		if (got != cases[i].want)
			fail_msg("case %zu: %.17g, want %.17g", i, got,
			    cases[i].want);
		check_shset(&mine, &scratch, cases[i].a, cases[i].na,
		    cases[i].b, cases[i].nb, 1);
	}

	/* 0 is a value like any other: in the set or not. */
	shset_build(&mine, s123, 3);
	assert_false(shset_has(&mine, 0));
	shset_build(&mine, s0x, 4);
	assert_true(shset_has(&mine, 0));
	assert_true(shset_has(&mine, UINT64_MAX));
	assert_false(shset_has(&mine, 1));

	/* Freed, a set is empty and can be built again. */
	shset_free(&mine);
	assert_false(shset_has(&mine, 0));
	assert_int_equal(shset_build(&mine, rep, 8), 3);
	shset_free(&mine);
	shset_free(&scratch);
	shset_free(&scratch);
}

/*
 * Hash sets on generated multisets with repeats and overlaps of every
 * degree, sizes growing and shrinking so the tables grow across calls and
 * are reused, and values that all want the same slot (long probe runs,
 * runs that wrap around the end of the table).
 */
static void
test_shset_random(void **state)
{
	static const size_t	 sizes[] = {
		0, 1, 2, 7, 8, 9, 15, 16, 17, 100, 1000, 3000, 5000, 300, 2,
		0, 2000, 40,
	};
	struct shset		 mine = { 0 }, scratch = { 0 };
	uint64_t		*a, *b, *pool, x = 0x243f6a8885a308d3ULL;
	uint64_t		 inv = 0x9e3779b97f4a7c15ULL;
	struct shslot		*slot;
	size_t			 s, i, na, nb, npool, size, kind;

	/*
	 * The inverse of shset_home's multiplier, mod 2^64 (Newton): r * inv
	 * has home slot 0 for small r, and -r * inv the last slot.
	 */
	for (i = 0; i < 5; i++)
		inv *= 2 - 0x9e3779b97f4a7c15ULL * inv;
	assert_true(inv * 0x9e3779b97f4a7c15ULL == 1);
	for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		na = sizes[s];
		nb = sizes[(s + 5) % (sizeof sizes / sizeof sizes[0])];
		npool = na + nb + 1;
		a = xreallocarray(NULL, na + 1, sizeof *a);
		b = xreallocarray(NULL, nb + 1, sizeof *b);
		pool = xreallocarray(NULL, npool, sizeof *pool);
		for (kind = 0; kind < 4; kind++) {
			/*
			 * kind 0: uniform; 1: the value 0 among them; 2:
			 * all in one home slot; 3: in the last slots.
			 */
			for (i = 0; i < npool; i++) {
				pool[i] = next_rand(&x);
				if (kind == 1 && i % 5 == 0)
					pool[i] = 0;
				else if (kind == 2)
					pool[i] = (pool[i] >> 32) * inv;
				else if (kind == 3)
					pool[i] = (0 - (pool[i] >> 32) - 1) * inv;
			}
			/* Draw from a pool of varying size: repeats. */
			for (i = 0; i < na; i++)
				a[i] = pool[next_rand(&x) % (s % 3 + 1 == 1 ?
				    npool : npool / (s % 3 + 1) + 1)];
			for (i = 0; i < nb; i++)
				b[i] = pool[next_rand(&x) % npool];
			check_shset(&mine, &scratch, a, na, b, nb, na + nb <
			    2000);
			/* b a subset of a: an overlap near 1. */
			if (na > 0) {
				for (i = 0; i < nb; i++)
					b[i] = a[next_rand(&x) % na];
				check_shset(&mine, &scratch, a, na, b, nb, 0);
			}
		}
		free(a);
		free(b);
		free(pool);
	}

	/* Grown to the largest size, the memory is reused for smaller sets. */
	a = xreallocarray(NULL, 1000, sizeof *a);
	for (i = 0; i < 1000; i++)
		a[i] = next_rand(&x);
	assert_true(mine.size >= 2 * 5000);
	slot = mine.slot;
	size = mine.size;
	shset_build(&mine, a, 1000);
	assert_true(mine.slot == slot && mine.size == size);
	assert_true(mine.mask + 1 < size);	/* a smaller table in use */
	assert_int_equal(mine.n, 1000);
	free(a);
	shset_free(&mine);
	shset_free(&scratch);
}

/*
 * Hash sets on shingles of generated texts: a text and an edited copy of
 * it, the same similarity as shingle_set() and jaccard_sorted(), from the
 * shingles' hashes and from their keys (shingle_keys).  Every third text is
 * ASCII while its copy may not be, so that keys made by the ASCII loop meet
 * keys made one shingle at a time; and an ASCII text has the same keys
 * shingled as bytes.
 */
static void
test_shset_texts(void **state)
{
	static const char	*words[] = {
		"the", "cat", "sat", "on", "a", "mat", "and",
		"\xc3\xa9t\xc3\xa9", "hat", "x", "\xe6\x97\xa5\xe6\x9c\xac", "bat", "mat", "the",
	};
	static const struct shingler	 shs[] = {
		{ UNIT_CHAR, 5, 0 }, { UNIT_CHAR, 3, 42 }, { UNIT_CHAR, 9, 1 },
		{ UNIT_WORD, 2, 0 }, { UNIT_WORD, 1, 7 },
	};
	const size_t		 nwords = sizeof words / sizeof words[0];
	struct shset		 mine = { 0 }, scratch = { 0 };
	struct u64vec		 ha = { 0 }, hb = { 0 }, sa = { 0 };
	struct u64vec		 sb = { 0 }, sort = { 0 }, kb = { 0 };
	struct buf		 ta = { 0 }, tb = { 0 };
	uint64_t		 x = 0x9e3779b97f4a7c15ULL;
	size_t			 (*fn)(const struct shingler *, const char *,
				    size_t, int, struct u64vec *);
	size_t			 t, k, i, len, edit, pick;
	int			 keys;
	const char		*w;
	double			 want, got;

	for (t = 0; t < 200; t++) {
		ta.len = tb.len = 0;
		buf_append(&ta, "", 0);
		buf_append(&tb, "", 0);
		len = t % 10 == 0 ? t % 4 : next_rand(&x) % 400;
		edit = next_rand(&x) % 20 + 1;	/* 1 word in edit changes */
		pick = t % 3 == 0 ? 7 : nwords;	/* words[0..7) are ASCII */
		for (i = 0; i < len; i++) {
			w = words[next_rand(&x) % pick];
			buf_append(&ta, w, strlen(w));
			buf_append(&ta, " ", 1);
			if (next_rand(&x) % edit == 0)
				w = words[next_rand(&x) % nwords];
			buf_append(&tb, w, strlen(w));
			buf_append(&tb, " ", 1);
		}
		for (k = 0; k < sizeof shs / sizeof shs[0]; k++) {
			shingle_set(&shs[k], ta.data, ta.len, 0, &sa, &sort);
			shingle_set(&shs[k], tb.data, tb.len, 0, &sb, &sort);
			want = jaccard_sorted(sa.v, sa.n, sb.v, sb.n);
			/* Hashes, then keys: the same sets, the same value. */
			for (keys = 0; keys < 2; keys++) {
				fn = keys ? shingle_keys : shingle_hash;
				fn(&shs[k], ta.data, ta.len, 0, &ha);
				fn(&shs[k], tb.data, tb.len, 0, &hb);
				assert_int_equal(shset_build(&mine, ha.v, ha.n),
				    sa.n);
				got = shset_jaccard(&mine, &scratch, hb.v,
				    hb.n);
				if (got != want)
					fail_msg("text %zu, shingler %zu, %s: "
					    "%.17g, want %.17g", t, k, keys ?
					    "keys" : "hashes", got, want);
			}
			for (i = 0; i < ha.n; i++)
				assert_true(ha.v[i] != 0);
			if (pick == 7) {
				shingle_keys(&shs[k], ta.data, ta.len, 1, &kb);
				assert_int_equal(kb.n, ha.n);
				assert_memory_equal(kb.v, ha.v,
				    ha.n * sizeof *ha.v);
			}
		}
	}
	shset_free(&mine);
	shset_free(&scratch);
	u64vec_free(&ha);
	u64vec_free(&hb);
	u64vec_free(&sa);
	u64vec_free(&sb);
	u64vec_free(&sort);
	u64vec_free(&kb);
	buf_free(&ta);
	buf_free(&tb);
}

/*
 * The generation wraps: marks left from long ago must not count as slots
 * in use, a wrap inside shset_jaccard keeps the set's own values, and the
 * scratch set wraps the same way.
 */
static void
test_shset_wrap(void **state)
{
	static const uint64_t	 old[] = { 0, 5, 6, 7, 8, 100, 1000 };
	static const uint64_t	 cur[] = { 1, 2, 3, 16, 17 };
	uint64_t		 many[40];
	struct shset		 s = { 0 }, scratch = { 0 };
	size_t			 i, round;

	for (round = 0; round < 4; round++) {
		shset_build(&s, old, 7);
		/* The next build takes UINT32_MAX; the walk after it wraps. */
		s.gen = UINT32_MAX - 1;
		shset_build(&s, cur, 5);
		assert_int_equal(s.own, UINT32_MAX);
		for (i = 0; i < 7; i++)
			assert_false(shset_has(&s, old[i]));
		assert_true(shset_jaccard(&s, &scratch, old, 7) == 0.0);
		assert_int_equal(s.own, 1);
		assert_int_equal(s.gen, 2);
		for (i = 0; i < 5; i++)
			assert_true(shset_has(&s, cur[i]));
		for (i = 0; i < 7; i++)
			assert_false(shset_has(&s, old[i]));
		assert_true(shset_jaccard(&s, &scratch, cur, 5) == 1.0);
		assert_true(shset_jaccard(&s, &scratch, old + 1, 3) == 0.0);
		assert_true(shset_jaccard(&s, &scratch, cur + 1, 3) == 3.0 / 5);

		/* A build across the wrap forgets everything before it. */
		s.gen = UINT32_MAX;
		assert_int_equal(shset_build(&s, old, 7), 7);
		assert_int_equal(s.own, 2);
		for (i = 0; i < 5; i++)
			assert_false(shset_has(&s, cur[i]));
		assert_true(shset_jaccard(&s, &scratch, old, 7) == 1.0);
		assert_true(shset_jaccard(&s, &scratch, cur, 5) == 0.0);
	}

	/* Too many values to walk through s: the scratch set, wrapping. */
	for (i = 0; i < 40; i++)
		many[i] = i < 7 ? old[i] : 5000 + i;
	shset_build(&s, old, 7);
	shset_jaccard(&s, &scratch, many, 40);
	assert_int_equal(scratch.n, 40);
	scratch.gen = UINT32_MAX - 1;
	for (round = 0; round < 3; round++) {
		assert_true(shset_jaccard(&s, &scratch, many, 40) ==
		    7.0 / 40);
		assert_int_equal(scratch.n, 40);
		assert_true(shset_jaccard(&s, &scratch, many + 5, 35) ==
		    2.0 / 40);
	}
	assert_true(scratch.gen < 10);
	shset_free(&s);
	shset_free(&scratch);
}

/*
 * Known answers, generated once from this code and checked in (xxHash's
 * sanity_test): the first three char 5-gram hashes of "The quick brown fox"
 * after normalize(NORM_DEFAULT), for seeds 0 and 42.  Every stored
 * signature and band key is built from these values: if this test fails,
 * the change breaks every existing index and needs MHF_SCHEME bumped (and
 * these vectors regenerated on purpose).
 */
static void
test_known_answers(void **state)
{
	static const struct {
		uint64_t	 seed;
		uint64_t	 h[3];
	} kat[] = {
		{ 0, { 0x6ffe1f0efe926a79ULL, 0xbe2390caff0b65eeULL,
		    0xa3e79a7ac3d07501ULL } },
		{ 42, { 0xf564eaf5ec7ff2e0ULL, 0x34e7f562ec0f2edfULL,
		    0xe10a8eaab086484aULL } },
	};
	const char	*text = "The quick brown fox";
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct buf	 norm = { 0 };
	struct u64vec	 v = { 0 };
	size_t		 i, j;

	assert_int_equal(normalize(text, strlen(text), NORM_DEFAULT, &norm),
	    0);
	assert_string_equal(norm.data, "the quick brown fox");
	for (i = 0; i < sizeof kat / sizeof kat[0]; i++) {
		sh.seed = kat[i].seed;
		assert_int_equal(shingle_hash(&sh, norm.data, norm.len, 0, &v),
		    15);
		for (j = 0; j < 3; j++) {
			if (v.v[j] != kat[i].h[j])
				fail_msg("seed %llu shingle %zu: 0x%016llx, "
				    "want 0x%016llx: the shingle scheme "
				    "changed (bump MHF_SCHEME)",
				    (unsigned long long)kat[i].seed, j,
				    (unsigned long long)v.v[j],
				    (unsigned long long)kat[i].h[j]);
		}
	}
	buf_free(&norm);
	u64vec_free(&v);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * shingle_distinct against sort-and-count: repeats, 0 among the values,
 * collisions in the table's low bits, and an empty list.
 */
static void
test_distinct(void **state)
{
	struct u64vec	 table = { 0 };
	uint64_t	 h[3000] = { 0 }, sorted[3000], x = 88172645463325252ULL;
	size_t		 n, i, want;

	(void)state;
	assert_int_equal(shingle_distinct(h, 0, &table), 0);
	for (n = 1; n <= 3000; n = n * 2 + 7) {
		for (i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Few values, many repeats; and low bits alike. */
			h[i] = i % 5 == 0 ? 0 : (x % (n / 2 + 1)) << 20;
		}
		memcpy(sorted, h, n * sizeof *h);
		qsort(sorted, n, sizeof *sorted, cmp_u64);
		for (i = want = 0; i < n; i++)
			want += i == 0 || sorted[i] != sorted[i - 1];
		assert_int_equal(shingle_distinct(h, n, &table), want);
	}
	u64vec_free(&table);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_byte_windows),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_window_hashes),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_utf8_windows),
		cmocka_unit_test(test_utf8_random),
		cmocka_unit_test(test_utf8_runs),
		cmocka_unit_test(test_words),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_jaccard),
		cmocka_unit_test(test_shset_small),
		cmocka_unit_test(test_shset_random),
		cmocka_unit_test(test_shset_texts),
		cmocka_unit_test(test_shset_wrap),
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_distinct),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
