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
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_byte_windows),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_utf8_windows),
		cmocka_unit_test(test_words),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_jaccard),
		cmocka_unit_test(test_known_answers),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
