/*
 * Unit tests for normalize.c: the ASCII fast path, the Unicode path
 * (case folding, NFKC, Unicode white space and punctuation), invalid UTF-8,
 * the flag names, and the agreement of the two paths on ASCII text.
 *
 * Normalisation changes every shingle, so its output is part of the stored
 * scheme: a case that changes here needs MHF_SCHEME bumped.
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

#define D	NORM_DEFAULT
#define A	NORM_ALL

/* A table of cases: input, flags, expected output and return value. */
static const struct ncase {
	const char	*name;
	const char	*in;
	int		 flags;
	const char	*want;
	int		 rv;
} ncases[] = {
	/* ASCII fast path. */
	{ "fold", "Hello WORLD 42", NORM_CASEFOLD, "hello world 42", 0 },
	{ "fold keeps spaces", " A\tB ", NORM_CASEFOLD, " a\tb ", 0 },
	{ "space runs", "  a \t\n b\r\n\v\f c  ", NORM_SPACE, "a b c", 0 },
	{ "space keeps case", "A  B", NORM_SPACE, "A B", 0 },
	{ "default", "  The\tQuick\n\nBrown  ", D, "the quick brown", 0 },
	{ "only space", " \t\r\n ", NORM_SPACE, "", 0 },
	{ "empty", "", D, "", 0 },
	{ "punct", "Hello, world! (yes) a-b_c", D | NORM_PUNCT,
	    "hello world yes a b c", 0 },
	{ "punct at the ends", "...a...b...", NORM_SPACE | NORM_PUNCT,
	    "a b", 0 },
	{ "punct without space", ",a,,b", NORM_PUNCT, " a  b", 0 },
	{ "ascii symbols stay", "$5 + 3 = 8 <x> ^ ` | ~", A,
	    "$5 + 3 = 8 <x> ^ ` | ~", 0 },
	{ "ascii punct set", "a!\"#%&'()*,-./:;?@[\\]_{}b", A, "a b", 0 },
	{ "punct off keeps it", "a, b!", D, "a, b!", 0 },
	{ "ascii flags 0", "  Hello,\tWORLD  ", 0, "  Hello,\tWORLD  ", 0 },

	/* Unicode: case folding. */
	{ "fold latin", "\xc3\x89" "COLE", NORM_CASEFOLD, "\xc3\xa9" "cole",
	    0 },
	{ "fold sharp s", "Stra\xc3\x9f" "e", NORM_CASEFOLD, "strasse", 0 },
	{ "fold greek", "\xce\xa3\xce\x9f\xce\xa6\xce\x99\xce\x91",
	    NORM_CASEFOLD, "\xcf\x83\xce\xbf\xcf\x86\xce\xb9\xce\xb1", 0 },
	{ "no fold without flag", "\xc3\x89" "COLE", NORM_NFKC,
	    "\xc3\x89" "COLE", 0 },
	{ "fold composes", "E\xcc\x81", NORM_CASEFOLD, "\xc3\xa9", 0 },

	/* Unicode: NFKC. */
	{ "nfkc ligature", "\xef\xac\x81" "ne", NORM_NFKC, "fine", 0 },
	{ "nfkc fullwidth", "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3", NORM_NFKC,
	    "ABC", 0 },
	{ "nfkc fullwidth folded", "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3", D,
	    "abc", 0 },
	{ "nfkc composes", "e\xcc\x81t\xc3\xa9", NORM_NFKC,
	    "\xc3\xa9t\xc3\xa9", 0 },
	{ "nfkc superscript", "x\xc2\xb2", NORM_NFKC, "x2", 0 },
	{ "no nfkc without flag", "\xef\xac\x81", NORM_SPACE, "\xef\xac\x81",
	    0 },

	/* Unicode white space. */
	{ "nbsp", "a\xc2\xa0" "b", D, "a b", 0 },
	{ "ideographic space", "a\xe3\x80\x80\xe3\x80\x80" "b", D, "a b", 0 },
	{ "nbsp without nfkc", "a\xc2\xa0\xc2\xa0" "b", NORM_SPACE, "a b", 0 },
	{ "nbsp kept without space", "A\xc2\xa0" "B", NORM_CASEFOLD,
	    "a\xc2\xa0" "b", 0 },
	{ "line separator", "a\xe2\x80\xa8" "b", NORM_SPACE, "a b", 0 },
	{ "next line", "a\xc2\x85" "b", NORM_SPACE, "a b", 0 },
	{ "unicode ends trimmed", "\xe3\x80\x80 \xc3\x89" "cole \xc2\xa0", D,
	    "\xc3\xa9" "cole", 0 },

	/* Unicode punctuation and symbols. */
	{ "guillemets and dash",
	    "\xc2\xab" "Bonjour\xc2\xbb \xe2\x80\x94 dit-il", A,
	    "bonjour dit il", 0 },
	{ "unicode punct without space", "\xc2\xab" "a\xc2\xbb", NORM_PUNCT,
	    " a ", 0 },
	{ "dash kept without punct", "a\xe2\x80\x94" "b", D,
	    "a\xe2\x80\x94" "b", 0 },
	{ "unicode symbols stay",
	    "\xe2\x82\xac" "5 + \xc2\xa3" "3 \xc2\xa9", A,
	    "\xe2\x82\xac" "5 + \xc2\xa3" "3 \xc2\xa9", 0 },
	{ "unicode flags 0",
	    "\xc3\x89" "COLE\xc2\xa0\xef\xac\x81  \xc2\xab" "x\xc2\xbb", 0,
	    "\xc3\x89" "COLE\xc2\xa0\xef\xac\x81  \xc2\xab" "x\xc2\xbb", 0 },

	/* Invalid UTF-8: normalised as bytes, and said so. */
	{ "invalid", "\xff\xfe" "ABC  d", D, "\xff\xfe" "abc d", 1 },
	{ "invalid punct", "\xc3(A, B)", A, "\xc3 a b", 1 },
	{ "invalid flags 0", "\xed\xa0\x80X", 0, "\xed\xa0\x80X", 1 },
	{ "truncated", "  Ab\xc3", D, "ab\xc3", 1 },
	{ "overlong", "\xc0\xaf Z", D, "\xc0\xaf z", 1 },
};

/* Each case of the table. */
static void
test_table(void **state)
{
	const struct ncase	*c;
	struct buf		 out = { 0 };
	size_t			 i;
	int			 rv;

	for (i = 0; i < sizeof ncases / sizeof ncases[0]; i++) {
		c = &ncases[i];
		out.len = 0;
		rv = normalize(c->in, strlen(c->in), c->flags, &out);
		if (rv != c->rv || out.len != strlen(c->want) ||
		    memcmp(out.data, c->want, out.len) != 0) {
			fail_msg("case \"%s\": got \"%.*s\" (%d), want \"%s\" "
			    "(%d)", c->name, (int)out.len, out.data, rv,
			    c->want, c->rv);
		}
		assert_int_equal(out.data[out.len], '\0');
	}
	buf_free(&out);
}

/* normalize appends: leading white space is trimmed from its own part. */
static void
test_appends(void **state)
{
	static const struct {
		const char	*in;
		int		 flags;
		const char	*want;
	} cases[] = {
		{ "  A  B ", D, "pre:a b" },			/* bytes */
		{ "  \xc3\x89  B ", D, "pre:\xc3\xa9 b" },	/* utf8 */
		{ "Ab\xff", NORM_SPACE, "pre:Ab\xff" },	/* fallback */
		{ " x \xff", 0, "pre: x \xff" },		/* fallback */
	};
	struct buf	 out = { 0 };
	size_t		 i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		out.len = 0;
		buf_append(&out, "pre:", 4);
		normalize(cases[i].in, strlen(cases[i].in), cases[i].flags,
		    &out);
		assert_int_equal(out.len, strlen(cases[i].want));
		assert_memory_equal(out.data, cases[i].want, out.len);
		assert_int_equal(out.data[out.len], '\0');
	}
	buf_free(&out);
}

/*
 * The ASCII fast path and the Unicode path agree: every ASCII byte, then a
 * non-ASCII letter that sends the same text down the Unicode path.
 */
static void
test_paths_agree(void **state)
{
	char		 text[256];
	struct buf	 fast = { 0 }, in = { 0 }, slow = { 0 };
	size_t		 len = 0;
	int		 c, flags;

	len += snprintf(text, sizeof text, "  Mixed CASE,\ttext!\n");
	for (c = 1; c < 128; c++)
		text[len++] = c;
	memcpy(text + len, " end z", 6);
	len += 6;

	for (flags = 0; flags <= NORM_ALL; flags++) {
		fast.len = in.len = slow.len = 0;
		assert_int_equal(normalize(text, len, flags, &fast), 0);
		buf_append(&in, text, len);
		buf_append(&in, "\xc3\xa9", 2);	/* é */
		assert_int_equal(normalize(in.data, in.len, flags, &slow), 0);
		if (slow.len != fast.len + 2 ||
		    memcmp(slow.data, fast.data, fast.len) != 0 ||
		    memcmp(slow.data + fast.len, "\xc3\xa9", 2) != 0)
			fail_msg("flags %#x: the ASCII and Unicode paths "
			    "differ (%zu and %zu bytes)", flags, fast.len,
			    slow.len);
	}
	buf_free(&fast);
	buf_free(&in);
	buf_free(&slow);
}

/* Names to flags and back, for every combination. */
static void
test_names(void **state)
{
	static const struct {
		int		 flags;
		const char	*name;
	} known[] = {
		{ 0, "none" },
		{ NORM_DEFAULT, "casefold,nfkc,space" },
		{ NORM_ALL, "casefold,nfkc,space,punct" },
		{ NORM_PUNCT, "punct" },
		{ NORM_CASEFOLD | NORM_SPACE, "casefold,space" },
	};
	char	 name[64], *cause = NULL;
	size_t	 i;
	int	 flags, f;

	for (i = 0; i < sizeof known / sizeof known[0]; i++) {
		normalize_name(known[i].flags, name, sizeof name);
		assert_string_equal(name, known[i].name);
	}
	for (flags = 0; flags <= NORM_ALL; flags++) {
		normalize_name(flags, name, sizeof name);
		f = -1;
		assert_int_equal(normalize_parse(name, &f, &cause), 0);
		assert_int_equal(f, flags);
	}
	f = -1;
	assert_int_equal(normalize_parse("punct,casefold", &f, &cause), 0);
	assert_int_equal(f, NORM_PUNCT | NORM_CASEFOLD);
	assert_int_equal(normalize_parse("space,space", &f, &cause), 0);
	assert_int_equal(f, NORM_SPACE);
	assert_null(cause);
}

/* Unknown names are errors that name the culprit. */
static void
test_names_bad(void **state)
{
	static const struct {
		const char	*list;
		const char	*word;
	} bad[] = {
		{ "bogus", "'bogus'" },
		{ "casefold,nfc", "'nfc'" },
		{ "casefold,", "''" },
		{ "", "''" },
		{ "none,space", "'none'" },
	};
	char	*cause;
	size_t	 i;
	int	 f;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cause = NULL;
		f = 0x55;
		assert_int_equal(normalize_parse(bad[i].list, &f, &cause), -1);
		assert_non_null(cause);
		if (strstr(cause, bad[i].word) == NULL)
			fail_msg("\"%s\": cause \"%s\" does not name %s",
			    bad[i].list, cause, bad[i].word);
		free(cause);
	}
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_appends),
		cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_names_bad),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
