/*
 * Unit tests for lsh.c: the S-curve, the choice of (b, r) against a brute
 * force search of every pair with b*r <= K, and the band keys (of 16-bit
 * values, 2 bytes each), with known-answer vectors for the stored scheme.
 */

#include "config.h"

#include <math.h>
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

/* lsh_prob against values worked out by hand. */
static void
test_prob(void **state)
{
	static const struct {
		double		 s;
		unsigned	 b, r;
		double		 want;
	} cases[] = {
		{ 0.5, 1, 1, 0.5 },
		{ 0.5, 2, 1, 0.75 },		/* 1 - 0.5^2 */
		{ 0.5, 1, 2, 0.25 },		/* 0.5^2 */
		{ 0.5, 2, 2, 0.4375 },		/* 1 - 0.75^2 */
		{ 0.8, 2, 3, 0.761856 },	/* 1 - (1 - 0.512)^2 */
		{ 0.9, 1, 1, 0.9 },
		{ 0.2, 3, 1, 0.488 },		/* 1 - 0.8^3 */
		{ 0.5, 64, 2, 0.9999999899093102 },	/* 1 - (3/4)^64 */
		{ 0.0, 4, 4, 0.0 },
		{ 1.0, 4, 4, 1.0 },
		{ 1.0, 1, 128, 1.0 },
	};
	size_t	 i;
	double	 got;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		got = lsh_prob(cases[i].s, cases[i].b, cases[i].r);
		if (fabs(got - cases[i].want) > 1e-12)
			fail_msg("lsh_prob(%g, %u, %u) = %.17g, want %.17g",
			    cases[i].s, cases[i].b, cases[i].r, got,
			    cases[i].want);
	}
}

/* The similarity at which lsh.c takes the false-positive bound. */
static double
fp_point(double t)
{
	return (t > 0.5 ? t - 0.25 : t / 2);
}

/*
 * The rule lsh.c documents, by brute force over every (b, r) with b*r <= k:
 * the least fn+fp of the pairs meeting both bounds, else the least fp of
 * those meeting the fn bound, else the least fn.  Ties go to fewer bands,
 * then (equal bands) to fewer rows: pairs are visited in that order and only
 * a strictly better one replaces the best so far.
 */
static void
oracle(unsigned k, double t, double max_fn, double max_fp, unsigned *b,
    unsigned *r)
{
	double		 fn, fp, best_both = 3, best_fp = 2, best_fn = 2;
	unsigned	 bb, rr, b1 = 0, r1 = 0, b2 = 0, r2 = 0, b3 = 0, r3 = 0;

	for (bb = 1; bb <= k; bb++) {
		for (rr = 1; bb * rr <= k; rr++) {
			fn = 1 - lsh_prob(t, bb, rr);
			fp = lsh_prob(fp_point(t), bb, rr);
			if (fn <= max_fn && fp <= max_fp &&
			    fn + fp < best_both) {
				best_both = fn + fp;
				b1 = bb;
				r1 = rr;
			}
			if (fn <= max_fn && fp < best_fp) {
				best_fp = fp;
				b2 = bb;
				r2 = rr;
			}
			if (fn < best_fn) {
				best_fn = fn;
				b3 = bb;
				r3 = rr;
			}
		}
	}
	if (b1 != 0) {
		*b = b1;
		*r = r1;
	} else if (b2 != 0) {
		*b = b2;
		*r = r2;
	} else {
		*b = b3;
		*r = r3;
	}
}

/*
 * The choices for K = 128 that the defaults (fn 0.01, fp 0.05) and a few
 * other bounds give.  Worked out apart from lsh.c, by a brute force in
 * Python over b*r <= 128 with the same rule; the fn and fp shown are
 * (1 - t^r)^b and 1 - (1 - s^r)^b at s = t - 0.25 (t/2 up to 0.5).
 */
static void
test_choose_known(void **state)
{
	static const struct {
		double		 t, max_fn, max_fp;
		unsigned	 b, r;
	} cases[] = {
		{ 0.5, 0.01, 0.05, 35, 3 },	/* fn 0.0093, fp 0.42 */
		{ 0.8, 0.01, 0.05, 16, 6 },	/* fn 0.0077, fp 0.36 */
		{ 0.9, 0.01, 0.05, 11, 10 },	/* fn 0.0089, fp 0.14 */
		{ 0.95, 0.01, 0.05, 8, 16 },	/* both met: fp 0.026 */
		{ 0.8, 0.5, 0.05, 11, 9 },	/* looser fn: higher r */
		{ 0.8, 0.5, 0.5, 16, 8 },	/* least fn+fp, 0.18 */
		{ 0.9, 0.25, 0.05, 9, 13 },	/* both met: fn 0.071 */
		/*
		 * fn bound 0: only pairs whose P(candidate) rounds to 1, such
		 * as r = 1, b >= 54 at t = 0.5 (r = 2 needs b > 64) and r = 2,
		 * b >= 37 at t = 0.8; of those the least fp.
		 */
		{ 0.5, 0.0, 0.05, 54, 1 },
		{ 0.8, 0.0, 0.05, 37, 2 },
		/* fn bound unreachable: (0.95)^128 = 0.0014, the least fn. */
		{ 0.05, 0.001, 0.05, 128, 1 },
		/*
		 * fn is 0 everywhere; fp 0.75^r rounds to 2^-53 from r = 127
		 * on, and the tie goes to fewer rows.
		 */
		{ 1.0, 0.01, 0.05, 1, 127 },
	};
	struct lsh_choice	 c;
	size_t			 i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(&c, 0, sizeof c);
		assert_int_equal(lsh_choose(128, cases[i].t, cases[i].max_fn,
		    cases[i].max_fp, &c), 0);
		if (c.b != cases[i].b || c.r != cases[i].r)
			fail_msg("t %.2f fn %.2f fp %.2f: b %u r %u, want "
			    "b %u r %u", cases[i].t, cases[i].max_fn,
			    cases[i].max_fp, c.b, c.r, cases[i].b, cases[i].r);
	}
}

/*
 * With the default bounds at t = 0.5, 0.8 and 0.9 no (b, r) meets both,
 * so the choice must meet the fn bound, and no (b, r) with b*r <= 128 that
 * meets it may have a smaller fp, nor the same fp with fewer bands.  (With
 * b*r = K only, t = 0.8 got 32 x 4 and fp 0.95.)
 */
static void
test_choose_fn_bound(void **state)
{
	static const double	 ts[] = { 0.5, 0.8, 0.9 };
	struct lsh_choice	 c;
	size_t			 i;
	unsigned		 b, r;
	double			 fn, fp;

	for (i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		assert_int_equal(lsh_choose(128, ts[i], 0.01, 0.05, &c), 0);
		if (c.b == 0 || c.r == 0 || c.b * c.r > 128)
			fail_msg("t %.2f: b %u r %u", ts[i], c.b, c.r);
		if (c.fn > 0.01)
			fail_msg("t %.2f: b %u r %u misses the fn bound: %g",
			    ts[i], c.b, c.r, c.fn);
		for (b = 1; b <= 128; b++) {
			for (r = 1; b * r <= 128; r++) {
				fn = 1 - lsh_prob(ts[i], b, r);
				fp = lsh_prob(ts[i] - 0.25, b, r);
				if (fn > 0.01)
					continue;
				if (fp <= 0.05)
					fail_msg("t %.2f: b %u r %u meets both "
					    "bounds", ts[i], b, r);
				if (fp < c.fp || (fp == c.fp && b < c.b))
					fail_msg("t %.2f: chose b %u r %u, fp "
					    "%g; b %u r %u has fn %g, fp %g",
					    ts[i], c.b, c.r, c.fp, b, r, fn,
					    fp);
			}
		}
	}
}

/* A looser false-negative bound never lowers r. */
static void
test_choose_looser(void **state)
{
	struct lsh_choice	 tight, loose;

	assert_int_equal(lsh_choose(128, 0.8, 0.01, 0.05, &tight), 0);
	assert_int_equal(lsh_choose(128, 0.8, 0.5, 0.05, &loose), 0);
	assert_true(loose.r > tight.r);
	assert_true(loose.fn > tight.fn);
	assert_true(loose.fp < tight.fp);
}

/*
 * Over a grid of K, t and bounds: b * r <= K, fn and fp are what they say,
 * and the choice is the one the documented rule picks.
 */
static void
test_choose_grid(void **state)
{
	static const unsigned	 ks[] = { 1, 2, 12, 60, 64, 100, 128, 256,
	    1024 };
	static const double	 fns[] = { 0.0, 0.001, 0.01, 0.1, 0.5, 1.0 };
	static const double	 fps[] = { 0.0, 0.01, 0.05, 0.5, 1.0 };
	struct lsh_choice	 c;
	size_t			 i, j, l, nfn, nfp;
	unsigned		 b, r, t;
	double			 th;

	nfn = sizeof fns / sizeof fns[0];
	nfp = sizeof fps / sizeof fps[0];
	for (i = 0; i < sizeof ks / sizeof ks[0]; i++) {
		for (t = 1; t <= 20; t++) {
			th = t / 20.0;
			for (j = 0; j < nfn; j++) {
				for (l = 0; l < nfp; l++) {
					assert_int_equal(lsh_choose(ks[i], th,
					    fns[j], fps[l], &c), 0);
					assert_true(c.b >= 1 && c.r >= 1 &&
					    c.b * c.r <= ks[i]);
					assert_true(fabs(c.fn - (1 -
					    lsh_prob(th, c.b, c.r))) < 1e-12);
					assert_true(fabs(c.fp - lsh_prob(
					    fp_point(th), c.b, c.r)) < 1e-12);
					oracle(ks[i], th, fns[j], fps[l], &b,
					    &r);
					if (c.b != b || c.r != r)
						fail_msg("K %u t %.2f fn %g fp "
						    "%g: b %u r %u, rule says "
						    "b %u r %u", ks[i], th,
						    fns[j], fps[l], c.b, c.r,
						    b, r);
				}
			}
		}
	}
}

/* Arguments out of range are refused. */
static void
test_choose_invalid(void **state)
{
	static const struct {
		unsigned	 k;
		double		 t;
	} bad[] = {
		{ 0, 0.8 }, { 128, 0.0 }, { 128, -0.1 }, { 128, 1.01 },
		{ 128, 2.0 },
	};
	struct lsh_choice	 c;
	size_t			 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(lsh_choose(bad[i].k, bad[i].t, 0.01, 0.05,
		    &c), -1);
}

/*
 * The key of one band, computed here from its definition: XXH3-64, seeded
 * with seed + j, of rows j*r to j*r+r-1 as 2-byte little-endian values.
 */
static uint64_t
band_key(const uint32_t *sig, unsigned j, unsigned r, uint64_t seed)
{
	unsigned char	 bytes[2 * MHF_MAX_PERMS];
	unsigned	 i;
	uint32_t	 x;

	for (i = 0; i < r; i++) {
		x = sig[j * r + i];
		assert_true(x <= 0xffff);
		bytes[2 * i] = x & 0xff;
		bytes[2 * i + 1] = x >> 8;
	}
	return (XXH3_64bits_withSeed(bytes, 2 * (size_t)r, seed + j));
}

/* Keys are deterministic and follow their definition. */
static void
test_keys(void **state)
{
	uint32_t	 sig[128];
	uint64_t	 a[128], b[128];
	unsigned	 i, j;

	/* 16-bit values, as minhash_sign makes them. */
	for (i = 0; i < 128; i++)
		sig[i] = (i * 2654435761u) >> 16;
	lsh_keys(sig, 32, 4, 5, a);
	lsh_keys(sig, 32, 4, 5, b);
	assert_memory_equal(a, b, 32 * sizeof *a);
	for (j = 0; j < 32; j++)
		assert_int_equal(a[j], band_key(sig, j, 4, 5));
	lsh_keys(sig, 128, 1, 0, a);
	for (j = 0; j < 128; j++)
		assert_int_equal(a[j], band_key(sig, j, 1, 0));
	lsh_keys(sig, 1, 128, 0, a);
	assert_int_equal(a[0], band_key(sig, 0, 128, 0));
	/* b*r < K: 16 x 6 (the default at t = 0.8) uses rows 0-95. */
	lsh_keys(sig, 16, 6, 0, a);
	for (j = 0; j < 16; j++)
		assert_int_equal(a[j], band_key(sig, j, 6, 0));
	lsh_keys(sig, 35, 3, 0, a);
	for (j = 0; j < 35; j++)
		assert_int_equal(a[j], band_key(sig, j, 3, 0));

	/* Another seed changes every key. */
	lsh_keys(sig, 32, 4, 5, a);
	lsh_keys(sig, 32, 4, 6, b);
	for (j = 0; j < 32; j++)
		assert_int_not_equal(a[j], b[j]);
}

/* Equal values in different bands still give different keys. */
static void
test_keys_apart(void **state)
{
	uint32_t	 sig[16];
	uint64_t	 keys[8];
	unsigned	 i, j;

	for (i = 0; i < 16; i++)
		sig[i] = 7;
	lsh_keys(sig, 8, 2, 0, keys);
	for (i = 0; i < 8; i++) {
		for (j = i + 1; j < 8; j++)
			assert_int_not_equal(keys[i], keys[j]);
	}
}

/*
 * Changing any of a value's 16 bits changes exactly the key of its band;
 * rows past b*r (here 24 to 26 of 27) are in no band and change no key.
 */
static void
test_keys_local(void **state)
{
	uint32_t	 sig[27];
	uint64_t	 base[6], keys[6];
	unsigned	 i, j, bit;

	for (i = 0; i < 27; i++)
		sig[i] = 1000 + 997 * i;
	lsh_keys(sig, 6, 4, 3, base);
	for (i = 0; i < 27; i++) {
		for (bit = 0; bit < 16; bit++) {
			sig[i] ^= 1u << bit;
			lsh_keys(sig, 6, 4, 3, keys);
			for (j = 0; j < 6; j++) {
				if (j == i / 4)
					assert_int_not_equal(keys[j], base[j]);
				else
					assert_int_equal(keys[j], base[j]);
			}
			sig[i] ^= 1u << bit;
		}
	}
}

/*
 * Known answers (xxHash's sanity_test), worked out apart from lsh.c and
 * from this file's band_key: by a Python XXH3-64 for inputs of 1 to 16
 * bytes written from xxHash's spec (XXH3_len_1to3, _4to8 and _9to16_64b),
 * which matched libxxhash 0.8.1 on 3000 random inputs and seeds.  Band
 * keys are stored in every index: if this test fails, the change breaks
 * every existing index and needs MHF_SCHEME bumped (and these vectors
 * regenerated on purpose).  Scheme 1 hashed 4 bytes a value; its key for
 * band 0 of the first vector was 0x0389e2c8892d5450.
 */
static void
test_keys_known_answer(void **state)
{
	/* The start of test_minhash's known-answer signature. */
	static const uint32_t	 fox[16] = {
		0x8385, 0xe0c0, 0xff0b, 0x1e3a, 0x86df, 0x361c, 0x1e3a, 0x28de,
		0x57d6, 0x88dc, 0xd943, 0xfaeb, 0xfe92, 0xc993, 0xf828, 0x5d8c,
	};
	static const uint32_t	 small[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	static const uint32_t	 ends[3] = { 0x0000, 0x00ff, 0xff00 };
	static const struct {
		const uint32_t	*sig;
		unsigned	 b, r;
		uint64_t	 seed;
		uint64_t	 kat[4];
	} cases[] = {
		/* 4-byte bands. */
		{ small, 4, 2, 0, { 0x706d9387ba3bbeb3ULL,
		    0x67a481e5a342da15ULL, 0xdc95d0640080f78fULL,
		    0xd98f20e1b52cdcc4ULL } },
		/* 12-byte bands, seeds 7 and 8; rows 12-15 unbanded. */
		{ fox, 2, 6, 7, { 0x73793a8efd73739dULL,
		    0x7a7b9a0e29fbe066ULL } },
		/* 2-byte bands: the byte order shows. */
		{ ends, 3, 1, 0, { 0x3325230e1f285505ULL,
		    0x51c7120330cad42aULL, 0x58a355c5f7315ba1ULL } },
	};
	uint64_t		 keys[4];
	size_t			 i;
	unsigned		 j;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		lsh_keys(cases[i].sig, cases[i].b, cases[i].r, cases[i].seed,
		    keys);
		for (j = 0; j < cases[i].b; j++) {
			if (keys[j] != cases[i].kat[j])
				fail_msg("vector %zu band %u: 0x%016llx, want "
				    "0x%016llx: the band key scheme changed "
				    "(bump MHF_SCHEME)", i, j,
				    (unsigned long long)keys[j],
				    (unsigned long long)cases[i].kat[j]);
		}
	}
}

/*
 * Scopes: scope 0 leaves a signature as it is; within a scope equal
 * positions stay equal (the estimates are kept), across two scopes the
 * same signature shares no band.
 */
static void
test_scope(void **state)
{
	uint32_t	 sig[64], a[64], b[64];
	uint64_t	 ka[16], kb[16], k0[16];
	uint64_t	 alice = lsh_scope_key("alice@example.org", 17);
	uint64_t	 bob = lsh_scope_key("bob@example.org", 15);
	unsigned	 i, same = 0;

	for (i = 0; i < 64; i++)
		sig[i] = (7919 * i + 13) & 0xffff;
	memcpy(a, sig, sizeof sig);
	lsh_scope(a, 64, 0);
	assert_memory_equal(a, sig, sizeof sig);
	assert_int_not_equal(alice, bob);
	assert_int_not_equal(lsh_scope_key("", 0), 0);

	memcpy(a, sig, sizeof sig);
	memcpy(b, sig, sizeof sig);
	b[5] ^= 1;			/* one position differs */
	lsh_scope(a, 64, alice);
	lsh_scope(b, 64, alice);
	for (i = 0; i < 64; i++) {
		assert_true(a[i] <= 0xffff);
		same += a[i] == b[i];
	}
	assert_int_equal(same, 63);
	assert_float_equal(minhash_similarity(a, b, 64), 63.0 / 64, 1e-12);

	memcpy(b, sig, sizeof sig);
	lsh_scope(b, 64, bob);
	lsh_keys(sig, 16, 4, 1, k0);
	lsh_keys(a, 16, 4, 1, ka);
	lsh_keys(b, 16, 4, 1, kb);
	for (i = 0; i < 16; i++) {
		assert_int_not_equal(ka[i], kb[i]);
		assert_int_not_equal(ka[i], k0[i]);
	}
}

/*
 * Known answers for scopes, generated once by lsh.c and checked in: a
 * scoped document's stored signature depends on both functions, so a
 * change to either makes an index forget what each recipient had.
 */
static void
test_scope_known_answer(void **state)
{
	static const uint32_t	 want[8] = {
		0x6731, 0x0aa2, 0x91e2, 0xd10f, 0x528f, 0x965a, 0x5fca, 0x5fe1,
	};
	uint32_t		 sig[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint64_t		 k = lsh_scope_key("alice@example.org", 17);
	uint64_t		 want_k = 0xb26ce42876a67c0dULL;
	unsigned		 i;

	if (k != want_k)
		fail_msg("lsh_scope_key: 0x%016llx, want 0x%016llx",
		    (unsigned long long)k, (unsigned long long)want_k);
	lsh_scope(sig, 8, k);
	for (i = 0; i < 8; i++) {
		if (sig[i] != want[i])
			fail_msg("lsh_scope: value %u is 0x%04x, want 0x%04x",
			    i, sig[i], want[i]);
	}
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
/*
 * lsh_bound against brute force over sets of a values and an overlap of k
 * (every a up to 300, every k): of the pairs of sets of one size whose
 * containment k / a reaches t, the least Jaccard similarity k / (2a - k)
 * is never below the bound and comes within 0.01 of it; a document twice
 * the record's size can be below it.  Jaccard's bound is t itself.
 */
static void
test_bound(void **state)
{
	static const double	 ts[] = { 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95 };
	double			 t, bound, j, least, least2;
	size_t			 i;
	unsigned		 a, k;

	(void)state;
	for (i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		t = ts[i];
		assert_true(lsh_bound(MEASURE_JACCARD, t) == t);
		bound = lsh_bound(MEASURE_CONTAINMENT, t);
		assert_true(bound < t);
		least = least2 = 2;
		for (a = 1; a <= 300; a++) {
			for (k = 0; k <= a; k++) {
				if ((double)k / a < t)
					continue;
				j = (double)k / (2.0 * a - k);
				if (j < bound - 1e-12)
					fail_msg("t %.2f: a %u, k %u: Jaccard "
					    "%.6f below the bound %.6f", t, a,
					    k, j, bound);
				if (j < least)
					least = j;
				/* A document of 2a holding all k. */
				j = (double)k / (3.0 * a - k);
				if (j < least2)
					least2 = j;
			}
		}
		if (least - bound > 0.01)
			fail_msg("t %.2f: least %.6f, bound %.6f: not tight",
			    t, least, bound);
		assert_true(least2 < bound);
	}
	assert_int_equal(measure_parse("jaccard"), MEASURE_JACCARD);
	assert_int_equal(measure_parse("containment"), MEASURE_CONTAINMENT);
	assert_int_equal(measure_parse("Jaccard"), -1);
	assert_int_equal(measure_parse(""), -1);
	assert_string_equal(measure_name(MEASURE_JACCARD), "jaccard");
	assert_string_equal(measure_name(MEASURE_CONTAINMENT), "containment");
}

/*
 * contain_bounds against brute force: sets A and B of a and b values
 * sharing k, for many a, b, k; with their exact Jaccard similarity, the
 * bounds are never below the exact containments either way, and with b
 * known exactly they are the exact containments (the identity |A & B| =
 * J (a + b) / (1 + J)).  A b range around the true b keeps them bounds; a
 * bound on J below the true J is the only way to get under them.  Sizes
 * not known give 1.
 */
static void
test_contain_bounds(void **state)
{
	uint64_t	 a, b, k;
	double		 j, in, out, cin, cout;

	(void)state;
	for (a = 1; a <= 60; a += 7)
		for (b = 1; b <= 80; b += 9)
			for (k = 0; k <= (a < b ? a : b); k++) {
				j = (double)k / (double)(a + b - k);
				cin = (double)k / (double)a;
				cout = (double)k / (double)b;
				contain_bounds(j, a, b, b, &in, &out);
				assert_true(fabs(in - cin) < 1e-9);
				assert_true(fabs(out - cout) < 1e-9);
				contain_bounds(j, a, b > 3 ? b - 3 : 1, b + 5,
				    &in, &out);
				assert_true(in >= cin - 1e-12);
				assert_true(out >= cout - 1e-12);
				contain_bounds(fmin(1, j + 0.2), a, b, b, &in,
				    &out);
				assert_true(in >= cin && out >= cout);
			}
	/* Only an estimate too low misses: J 0.5 taken for 0.3. */
	contain_bounds(0.3, 100, 100, 100, &in, &out);
	assert_true(in < 2.0 * 0.5 / 1.5);
	contain_bounds(0.5, 0, 10, 10, &in, &out);
	assert_true(in == 1.0 && out == 1.0);
	contain_bounds(0.5, 10, 0, UINT64_MAX, &in, &out);
	assert_true(in == 1.0 && out == 1.0);
	/* A small document cannot hold most of a large record. */
	contain_bounds(1.0, 1000, 100, 100, &in, &out);
	assert_true(fabs(in - 0.1) < 1e-12 && out == 1.0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prob),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_contain_bounds),
		cmocka_unit_test(test_choose_known),
		cmocka_unit_test(test_choose_fn_bound),
		cmocka_unit_test(test_choose_looser),
		cmocka_unit_test(test_choose_grid),
		cmocka_unit_test(test_choose_invalid),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_keys_apart),
		cmocka_unit_test(test_keys_local),
		cmocka_unit_test(test_keys_known_answer),
		cmocka_unit_test(test_scope),
		cmocka_unit_test(test_scope_known_answer),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
