/*
 * Unit tests for lsh.c: the S-curve, the choice of (b, r) against a brute
 * force search of every divisor pair, and the band keys, with a known-answer
 * vector for the stored scheme.
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
 * The rule lsh.c documents, by brute force over every divisor pair: the
 * least fn+fp of the pairs meeting both bounds, else the least fp of those
 * meeting the fn bound, else the least fn.
 */
static void
oracle(unsigned k, double t, double max_fn, double max_fp, unsigned *b,
    unsigned *r)
{
	double		 fn, fp, best_both = 2, best_fp = 2, best_fn = 2;
	unsigned	 rr, rb = 0, rf = 0, ra = 0;

	for (rr = 1; rr <= k; rr++) {
		if (k % rr != 0)
			continue;
		fn = 1 - lsh_prob(t, k / rr, rr);
		fp = lsh_prob(fp_point(t), k / rr, rr);
		if (fn <= max_fn && fp <= max_fp && fn + fp < best_both) {
			best_both = fn + fp;
			rb = rr;
		}
		if (fn <= max_fn && fp < best_fp) {
			best_fp = fp;
			rf = rr;
		}
		if (fn < best_fn) {
			best_fn = fn;
			ra = rr;
		}
	}
	*r = rb ? rb : rf ? rf : ra;
	*b = k / *r;
}

/* The choices for K = 128 that the defaults (fn 0.01, fp 0.05) give. */
static void
test_choose_known(void **state)
{
	static const struct {
		double		 t, max_fn, max_fp;
		unsigned	 b, r;
	} cases[] = {
		{ 0.5, 0.01, 0.05, 64, 2 },
		{ 0.8, 0.01, 0.05, 32, 4 },
		{ 0.9, 0.01, 0.05, 16, 8 },	/* fn 1.2e-4, fp 0.40 */
		{ 0.8, 0.5, 0.05, 16, 8 },	/* looser fn: higher r */
		{ 0.9, 0.25, 0.05, 8, 16 },	/* both bounds met */
		{ 0.5, 0.0, 0.05, 128, 1 },	/* fn bound unreachable */
		{ 1.0, 0.01, 0.05, 1, 128 },
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
 * t = 0.9 with the default bounds: the choice meets the fn bound and no
 * other divisor pair that meets it has a smaller fp.
 */
static void
test_choose_09(void **state)
{
	struct lsh_choice	 c;
	unsigned		 r;
	double			 fn, fp;

	assert_int_equal(lsh_choose(128, 0.9, 0.01, 0.05, &c), 0);
	assert_int_equal(c.b * c.r, 128);
	assert_true(c.fn <= 0.01);
	for (r = 1; r <= 128; r++) {
		if (128 % r != 0 || r == c.r)
			continue;
		fn = 1 - lsh_prob(0.9, 128 / r, r);
		fp = lsh_prob(0.65, 128 / r, r);
		if (fn <= 0.01 && fp < c.fp)
			fail_msg("r %u has fn %g and fp %g < %g", r, fn, fp,
			    c.fp);
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
 * Over a grid of K, t and bounds: b * r = K, fn and fp are what they say,
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
					assert_int_equal(c.b * c.r, ks[i]);
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

/* The key of one band, computed here from its definition. */
static uint64_t
band_key(const uint32_t *sig, unsigned j, unsigned r, uint64_t seed)
{
	unsigned char	 bytes[4 * MHF_MAX_PERMS];
	unsigned	 i;
	uint32_t	 x;

	for (i = 0; i < r; i++) {
		x = sig[j * r + i];
		bytes[4 * i] = x & 0xff;
		bytes[4 * i + 1] = (x >> 8) & 0xff;
		bytes[4 * i + 2] = (x >> 16) & 0xff;
		bytes[4 * i + 3] = x >> 24;
	}
	return (XXH3_64bits_withSeed(bytes, 4 * (size_t)r, seed + j));
}

/* Keys are deterministic and follow their definition. */
static void
test_keys(void **state)
{
	uint32_t	 sig[128];
	uint64_t	 a[128], b[128];
	unsigned	 i, j;

	for (i = 0; i < 128; i++)
		sig[i] = i * 2654435761u;
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

/* Changing one value changes exactly the key of its band. */
static void
test_keys_local(void **state)
{
	uint32_t	 sig[24];
	uint64_t	 base[6], keys[6];
	unsigned	 i, j;

	for (i = 0; i < 24; i++)
		sig[i] = 1000 + i;
	lsh_keys(sig, 6, 4, 3, base);
	for (i = 0; i < 24; i++) {
		sig[i] ^= 1;
		lsh_keys(sig, 6, 4, 3, keys);
		for (j = 0; j < 6; j++) {
			if (j == i / 4)
				assert_int_not_equal(keys[j], base[j]);
			else
				assert_int_equal(keys[j], base[j]);
		}
		sig[i] ^= 1;
	}
}

/*
 * Known answer, generated once from this code and checked in (xxHash's
 * sanity_test): the 4 keys of b = 4, r = 2 for the signature 1..8, seed 0.
 * Band keys are stored in every index: if this test fails, the change
 * breaks every existing index and needs MHF_SCHEME bumped (and this vector
 * regenerated on purpose).
 */
static void
test_keys_known_answer(void **state)
{
	static const uint32_t	 sig[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	static const uint64_t	 kat[4] = {
		0x0389e2c8892d5450ULL, 0x4ed8f7a119795f16ULL,
		0x970058b55ac3ce64ULL, 0xbd13cdd78c579f85ULL,
	};
	uint64_t		 keys[4];
	unsigned		 j;

	lsh_keys(sig, 4, 2, 0, keys);
	for (j = 0; j < 4; j++) {
		if (keys[j] != kat[j])
			fail_msg("band %u: 0x%016llx, want 0x%016llx: the band "
			    "key scheme changed (bump MHF_SCHEME)", j,
			    (unsigned long long)keys[j],
			    (unsigned long long)kat[j]);
	}
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prob),
		cmocka_unit_test(test_choose_known),
		cmocka_unit_test(test_choose_09),
		cmocka_unit_test(test_choose_looser),
		cmocka_unit_test(test_choose_grid),
		cmocka_unit_test(test_choose_invalid),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_keys_apart),
		cmocka_unit_test(test_keys_local),
		cmocka_unit_test(test_keys_known_answer),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
