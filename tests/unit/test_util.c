/*
 * Unit tests for util.c: parse_duration (--retain), parse_time and
 * format_time (--time-field, --info), from tables of cases.  Expected
 * epoch values were computed independently (GNU date -u -d ... +%s).
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

#include "mhfilter.h"

#define DAY	86400LL
#define MAXAGE	(36500 * DAY)	/* the limit of --retain */

/* Durations: what goes in, and the seconds or a substring of the cause. */
static const struct dcase {
	const char	*in;
	int		 rv;
	int64_t		 secs;
	const char	*cause;
} dcases[] = {
	{ "1s", 0, 1, NULL },
	{ "3600s", 0, 3600, NULL },
	{ "90m", 0, 5400, NULL },
	{ "12h", 0, 43200, NULL },
	{ "30d", 0, 30 * DAY, NULL },
	{ "2w", 0, 14 * DAY, NULL },
	{ "1d12h", 0, DAY + 43200, NULL },
	{ "1w1d1h1m1s", 0, 8 * DAY + 3661, NULL },
	{ "007d", 0, 7 * DAY, NULL },
	{ "36500d", 0, MAXAGE, NULL },

	{ "", -1, 0, "not a duration" },
	{ "30", -1, 0, "not a duration" },	/* a unit is required */
	{ "d", -1, 0, "not a duration" },
	{ "30x", -1, 0, "unknown unit 'x'" },
	{ "30D", -1, 0, "unknown unit 'D'" },
	{ "-1d", -1, 0, "not a duration" },
	{ "+1d", -1, 0, "not a duration" },
	{ " 1d", -1, 0, "not a duration" },
	{ "1d ", -1, 0, "unknown unit 'd '" },
	{ "1.5d", -1, 0, "not a duration" },
	{ "1e3s", -1, 0, "unknown unit 'e'" },
	{ "1d2", -1, 0, "not a duration" },
	{ "0s", -1, 0, "out of range" },
	{ "0d0h", -1, 0, "out of range" },
	{ "36501d", -1, 0, "out of range" },
	{ "36500d1s", -1, 0, "out of range" },
	{ "99999999999999999999s", -1, 0, "out of range" },
	{ "9999999999999999w", -1, 0, "out of range" },
	{ "9223372036854775807s1s", -1, 0, "out of range" },
};

/* Each duration case; out is untouched on error. */
static void
test_duration(void **state)
{
	const struct dcase	*c;
	char			*cause;
	int64_t			 v;
	size_t			 i;
	int			 rv;

	for (i = 0; i < sizeof dcases / sizeof dcases[0]; i++) {
		c = &dcases[i];
		v = -42;
		cause = NULL;
		rv = parse_duration(c->in, 1, MAXAGE, &v, &cause);
		if (rv != c->rv)
			fail_msg("\"%s\": returned %d, want %d (%s)", c->in, rv,
			    c->rv, cause ? cause : "no cause");
		if (rv == 0) {
			assert_null(cause);
			if (v != c->secs)
				fail_msg("\"%s\": %lld seconds, want %lld",
				    c->in, (long long)v, (long long)c->secs);
			continue;
		}
		assert_int_equal(v, -42);
		if (cause == NULL || strstr(cause, c->cause) == NULL ||
		    strstr(cause, c->in) == NULL)
			fail_msg("\"%s\": cause \"%s\" lacks \"%s\" or the input",
			    c->in, cause ? cause : "", c->cause);
		free(cause);
	}
}

/* Times: RFC 3339 and epoch seconds. */
static const struct tcase {
	const char	*in;
	int		 rv;
	int64_t		 t;
	const char	*cause;
} tcases[] = {
	{ "2026-11-21T10:00:00Z", 0, 1795255200, NULL },
	{ "2026-11-21t10:00:00z", 0, 1795255200, NULL },
	{ "2026-11-21 10:00:00Z", 0, 1795255200, NULL },
	{ "2026-11-21T10:00:00.123456Z", 0, 1795255200, NULL },
	{ "2026-11-21T10:00:00.9Z", 0, 1795255200, NULL },
	{ "2026-11-21T11:00:00+01:00", 0, 1795255200, NULL },
	{ "2026-11-21T04:30:00-05:30", 0, 1795255200, NULL },
	{ "2026-11-21T10:00:00+00:00", 0, 1795255200, NULL },
	{ "2026-11-21T10:00:00-00:00", 0, 1795255200, NULL },
	{ "2026-11-22T00:00:00.5+14:00", 0, 1795255200, NULL },
	{ "1970-01-01T00:00:01Z", 0, 1, NULL },
	{ "1970-01-01T01:00:01+01:00", 0, 1, NULL },
	{ "2000-02-29T00:00:00Z", 0, 951782400, NULL },
	{ "2024-02-29T23:59:59Z", 0, 1709251199, NULL },
	{ "1999-12-31T23:59:60Z", 0, 946684800, NULL },	/* leap second */
	{ "2038-01-19T03:14:08Z", 0, 2147483648LL, NULL },
	{ "9999-12-31T23:59:59Z", 0, TIME_MAX, NULL },
	{ "1795255200", 0, 1795255200, NULL },
	{ "1795255200.999", 0, 1795255200, NULL },
	{ "1", 0, 1, NULL },
	{ "253402300799", 0, TIME_MAX, NULL },

	/* Not a time. */
	{ "", -1, 0, "not a time" },
	{ "now", -1, 0, "not a time" },
	{ "2026-11-21", -1, 0, "not a time" },
	{ "2026-11-21T10:00Z", -1, 0, "not a time" },
	{ "2026-11-21T10:00:00", -1, 0, "not a time" },	/* no zone */
	{ "2026-11-21T10:00:00+0100", -1, 0, "not a time" },
	{ "2026-11-21T10:00:00+01", -1, 0, "not a time" },
	{ "2026-11-21T10:00:00.Z", -1, 0, "not a time" },
	{ "2026-11-21T10:00:00Z ", -1, 0, "not a time" },
	{ " 2026-11-21T10:00:00Z", -1, 0, "not a time" },
	{ "2026-11-21X10:00:00Z", -1, 0, "not a time" },
	{ "26-11-21T10:00:00Z", -1, 0, "not a time" },
	{ "2026-1-21T10:00:00Z", -1, 0, "not a time" },
	{ "-1", -1, 0, "not a time" },
	{ "+1795255200", -1, 0, "not a time" },
	{ "1795255200.", -1, 0, "not a time" },
	{ "1.7e9", -1, 0, "not a time" },
	{ "0x10", -1, 0, "not a time" },
	{ "12abc", -1, 0, "not a time" },

	/* No such date or time. */
	{ "2026-13-01T00:00:00Z", -1, 0, "not a valid date" },
	{ "2026-00-01T00:00:00Z", -1, 0, "not a valid date" },
	{ "2026-11-00T00:00:00Z", -1, 0, "not a valid date" },
	{ "2026-11-31T00:00:00Z", -1, 0, "not a valid date" },
	{ "2026-02-29T00:00:00Z", -1, 0, "not a valid date" },
	{ "1900-02-29T00:00:00Z", -1, 0, "not a valid date" },
	{ "2026-11-21T24:00:00Z", -1, 0, "not a valid date" },
	{ "2026-11-21T10:60:00Z", -1, 0, "not a valid date" },
	{ "2026-11-21T10:00:61Z", -1, 0, "not a valid date" },
	{ "2026-11-21T10:00:00+24:00", -1, 0, "not a valid date" },
	{ "2026-11-21T10:00:00+01:60", -1, 0, "not a valid date" },

	/* Out of range: 0 means "no time", and years past 9999. */
	{ "0", -1, 0, "out of range" },
	{ "0.5", -1, 0, "out of range" },
	{ "1970-01-01T00:00:00Z", -1, 0, "out of range" },
	{ "1970-01-01T00:30:00+01:00", -1, 0, "out of range" },
	{ "1969-12-31T23:59:59Z", -1, 0, "out of range" },
	{ "0000-01-01T00:00:00Z", -1, 0, "out of range" },
	{ "9999-12-31T23:59:59-00:01", -1, 0, "out of range" },
	{ "253402300800", -1, 0, "out of range" },
	{ "99999999999999999999999999", -1, 0, "out of range" },
};

/* Each time case; out is untouched on error. */
static void
test_time(void **state)
{
	const struct tcase	*c;
	char			*cause;
	int64_t			 v;
	size_t			 i;
	int			 rv;

	for (i = 0; i < sizeof tcases / sizeof tcases[0]; i++) {
		c = &tcases[i];
		v = -42;
		cause = NULL;
		rv = parse_time(c->in, &v, &cause);
		if (rv != c->rv)
			fail_msg("\"%s\": returned %d, want %d (%s)", c->in, rv,
			    c->rv, cause ? cause : "no cause");
		if (rv == 0) {
			assert_null(cause);
			if (v != c->t)
				fail_msg("\"%s\": %lld, want %lld", c->in,
				    (long long)v, (long long)c->t);
			continue;
		}
		assert_int_equal(v, -42);
		if (cause == NULL || strstr(cause, c->cause) == NULL ||
		    strstr(cause, c->in) == NULL)
			fail_msg("\"%s\": cause \"%s\" lacks \"%s\" or the input",
			    c->in, cause ? cause : "", c->cause);
		free(cause);
	}
}

/* format_time: known values, and the inverse of parse_time. */
static void
test_format(void **state)
{
	static const struct {
		int64_t		 t;
		const char	*want;
	} cases[] = {
		{ 1, "1970-01-01T00:00:01Z" },
		{ 951782400, "2000-02-29T00:00:00Z" },
		{ 1709251199, "2024-02-29T23:59:59Z" },
		{ 1795255200, "2026-11-21T10:00:00Z" },
		{ 2147483648LL, "2038-01-19T03:14:08Z" },
		{ TIME_MAX, "9999-12-31T23:59:59Z" },
	};
	char		 buf[32], *cause = NULL;
	int64_t		 t, back;
	size_t		 i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		format_time(cases[i].t, buf, sizeof buf);
		assert_string_equal(buf, cases[i].want);
	}
	/* Every day for 400 years (a whole Gregorian cycle) and more. */
	for (t = 1; t < TIME_MAX; t += DAY * 37 + 3607) {
		format_time(t, buf, sizeof buf);
		assert_int_equal(parse_time(buf, &back, &cause), 0);
		if (back != t)
			fail_msg("%lld -> %s -> %lld", (long long)t, buf,
			    (long long)back);
	}
	/* A short buffer is truncated, not overrun. */
	memset(buf, 'x', sizeof buf);
	format_time(1795255200, buf, 5);
	assert_string_equal(buf, "2026");
	assert_int_equal(buf[5], 'x');
}

/*
 * Numbers and sizes: a negative number is out of range, not "not a
 * number"; a size's limits are written with the largest exact suffix.
 */
static void
test_numbers(void **state)
{
	static const struct {
		int		 size;
		const char	*in;
		uint64_t	 lo, hi;
		const char	*cause;		/* NULL: accepted */
	} cases[] = {
		{ 0, "-1", 1, 1000000, "'-1' is out of range (1 to 1000000)" },
		{ 0, "-x", 1, 10, "'-x' is not a number" },
		{ 0, "12", 1, 100, NULL },
		{ 1, "1", 1 << 16, 1ULL << 40,
		    "'1' is out of range (64K to 1T bytes)" },
		{ 1, "-1", 1, 1ULL << 30, "'-1' is out of range (1 to 1G bytes)" },
		{ 1, "2T", 1, 1ULL << 40, "out of range" },
		{ 1, "1T", 1, 1ULL << 40, NULL },
		{ 1, "3x", 1, 1000, "'3x' is not a size" },
	};
	char		*cause;
	uint64_t	 v;
	size_t		 i;
	int		 rv;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		rv = (cases[i].size ? parse_size : parse_uint)(cases[i].in,
		    cases[i].lo, cases[i].hi, &v, &cause);
		if ((rv == 0) != (cases[i].cause == NULL))
			fail_msg("\"%s\": returned %d (%s)", cases[i].in, rv,
			    cause ? cause : "no cause");
		if (rv != 0 && strstr(cause, cases[i].cause) == NULL)
			fail_msg("\"%s\": cause \"%s\", want \"%s\"",
			    cases[i].in, cause, cases[i].cause);
		free(cause);
	}
}

/*
 * ascii_span: the first byte at or above 0x80, at every place of texts of
 * 0 to 200 bytes (it reads 64 bytes at a time with AVX-512, then 32 with
 * AVX2, 8 at a time, then one), with another after it or not.
 * test_ascii_span runs it with the portable code, with AVX2, and with
 * AVX-512, each where the CPU has it.
 */
static void
ascii_spans(void)
{
	unsigned char	 text[256];
	size_t		 len, at, i;
	int		 c;

	memset(text, 0, sizeof text);
	for (len = 0; len <= 200; len++) {
		for (i = 0; i < len; i++)
			text[i] = 1 + i % 127;
		assert_int_equal(ascii_span(text, len), len);
		for (at = 0; at < len; at++) {
			for (c = 0x80; c < 0x100; c += 0x7f) {
				text[at] = c;
				assert_int_equal(ascii_span(text, len), at);
				if (at + 9 < len) {
					text[at + 9] = 0xc3;
					assert_int_equal(ascii_span(text, len),
					    at);
					text[at + 9] = 'x';
				}
				text[at] = 0x7f;
			}
		}
	}
}

static void
test_ascii_span(void **state)
{
	simd_allow(SIMD_NONE);
	ascii_spans();
	simd_allow(SIMD_AVX2);
	ascii_spans();
	simd_allow(SIMD_ALL);
	ascii_spans();
}

/*
 * A table from xmap, populated in the background (xpopulate_start) while
 * it is written: populating never writes, so every value written meanwhile
 * is there after xpopulate_wait, and the rest is still zero.  Run a few
 * times, as the writes race the populating thread.
 */
static void
test_xpopulate(void **state)
{
	struct xpopulate	*xp;
	uint64_t		*t;
	size_t			 n = (8U << 20) / sizeof *t, i, step = 509;
	int			 round;

	(void)state;
	for (round = 0; round < 4; round++) {
		t = xmap(n, sizeof *t);
		xp = xpopulate_start(t, n, sizeof *t);
		for (i = round; i < n; i += step)
			t[i] = i + 1;
		xpopulate_wait(xp);
		for (i = 0; i < n; i++) {
			if (i % step == (size_t)round)
				assert_int_equal(t[i], i + 1);
			else
				assert_int_equal(t[i], 0);
		}
		xunmap(t, n, sizeof *t);
	}
	xpopulate_wait(NULL);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */

/*
 * pairs_add and pairs_has: ranges appended in order, adjacent ones
 * merged; a number is in one when first <= x < end.
 */
static void
test_pairs(void **state)
{
	struct u64vec	 v = { 0 };
	uint64_t	 x;

	(void)state;
	assert_false(pairs_has(&v, 0));
	pairs_add(&v, 10, 20);
	pairs_add(&v, 20, 25);		/* merged */
	pairs_add(&v, 40, 41);
	pairs_add(&v, 100, 200);
	assert_int_equal(v.n, 6);
	for (x = 0; x < 300; x++)
		assert_int_equal(pairs_has(&v, x), (x >= 10 && x < 25) ||
		    x == 40 || (x >= 100 && x < 200));
	assert_false(pairs_has(&v, UINT64_MAX));
	u64vec_free(&v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_ascii_span),
		cmocka_unit_test(test_xpopulate),
		cmocka_unit_test(test_pairs),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
