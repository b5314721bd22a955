/*
 * Unit tests for normalize.c: the ASCII fast path, the Unicode path
 * (case folding, NFKC, Unicode white space and punctuation), invalid UTF-8,
 * the flag names, and the agreement of the two paths on ASCII text.  Mixed
 * text is cut into ASCII and Unicode segments; a differential test holds
 * that to the whole-text algorithm it replaced, kept here as the oracle.
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
#include <utf8proc.h>

#include "mhfilter.h"

#define D	NORM_DEFAULT
#define A	NORM_ALL

#ifndef nitems
#define nitems(a)	(sizeof (a) / sizeof (a)[0])
#endif

/* The oracle's ASCII classes, as normalize.c's. */
#define R_SPACE	1
#define R_PUNCT	2
static unsigned char ref_class[128];

/* A piece of generated text: bytes and their length (may hold NUL). */
struct piece {
	const char	*s;
	size_t		 len;
};
#define PIECE(s)	{ s, sizeof s - 1 }

static void	ref_init(void);
static int	ref_classify(utf8proc_int32_t);
static void	ref_bytes(const unsigned char *, size_t, int, struct buf *);
static int	ref_utf8(const unsigned char *, size_t, int, struct buf *);
static int	ref_normalize(const char *, size_t, int, struct buf *);
static uint64_t	rnd(uint64_t *);
static const char *hex(const char *, size_t);
static void	check_same(const char *, size_t, int, const char *, size_t);
static void	byte_runs(void);

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

/*
 * The oracle: normalize as it was before the text was cut into segments,
 * utf8proc_map over the whole text and then spaces and punctuation, or
 * the byte path over the whole text.  Its output is the stored scheme.
 */
static void
ref_init(void)
{
	int	 c, cat;

	for (c = 0; c < 128; c++) {
		cat = utf8proc_category(c);
		if (c == ' ' || (c >= '\t' && c <= '\r'))
			ref_class[c] = R_SPACE;
		else if (cat >= UTF8PROC_CATEGORY_PC &&
		    cat <= UTF8PROC_CATEGORY_PO)
			ref_class[c] = R_PUNCT;
	}
}

/* The oracle's classification of a code point. */
static int
ref_classify(utf8proc_int32_t cp)
{
	int	 cat;

	if (cp < 128)
		return (ref_class[cp]);
	if (cp == 0x85)
		return (R_SPACE);
	cat = utf8proc_category(cp);
	if (cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
	    cat == UTF8PROC_CATEGORY_ZP)
		return (R_SPACE);
	if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO)
		return (R_PUNCT);
	return (0);
}

/* The oracle's byte path, over the whole text. */
static void
ref_bytes(const unsigned char *p, size_t len, int flags, struct buf *out)
{
	size_t	 i;
	char	*w;
	int	 c, pending = 0, space;

	buf_reserve(out, len);
	w = out->data + out->len;
	for (i = 0; i < len; i++) {
		c = p[i];
		space = c < 128 && (ref_class[c] == R_SPACE ||
		    ((flags & NORM_PUNCT) && ref_class[c] == R_PUNCT));
		if (space && (flags & NORM_SPACE)) {
			pending = 1;
			continue;
		}
		if (space)
			c = (ref_class[c] == R_PUNCT) ? ' ' : c;
		else if ((flags & NORM_CASEFOLD) && c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (pending && w != out->data + out->len)
			*w++ = ' ';
		pending = 0;
		*w++ = c;
	}
	out->len = w - out->data;
	out->data[out->len] = '\0';
}

/* The oracle's Unicode path: utf8proc_map over the whole text. */
static int
ref_utf8(const unsigned char *p, size_t len, int flags, struct buf *out)
{
	utf8proc_uint8_t	*mapped = NULL;
	utf8proc_ssize_t	 n, i, step;
	utf8proc_int32_t	 cp;
	int			 options, pending = 0, class;
	size_t			 start = out->len;

	options = UTF8PROC_STABLE;
	if (flags & NORM_NFKC)
		options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
	if (flags & NORM_CASEFOLD)
		options |= UTF8PROC_CASEFOLD;
	if (flags & (NORM_NFKC|NORM_CASEFOLD)) {
		if (~flags & NORM_NFKC)
			options |= UTF8PROC_COMPOSE;
		n = utf8proc_map(p, len, &mapped, options);
		if (n < 0)
			return (-1);
		p = mapped;
		len = n;
	}
	buf_reserve(out, len);
	for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
		step = utf8proc_iterate(p + i, len - i, &cp);
		if (step < 0) {
			free(mapped);
			out->len = start;
			return (-1);
		}
		class = ref_classify(cp);
		if (class == R_PUNCT && (~flags & NORM_PUNCT))
			class = 0;
		if (class != 0 && (flags & NORM_SPACE)) {
			pending = 1;
			continue;
		}
		if (class == R_PUNCT) {
			buf_append(out, " ", 1);
			continue;
		}
		if (pending && out->len != start)
			buf_append(out, " ", 1);
		pending = 0;
		buf_append(out, p + i, step);
	}
	free(mapped);
	return (0);
}

/* The oracle's normalize. */
static int
ref_normalize(const char *text, size_t len, int flags, struct buf *out)
{
	const unsigned char	*p = (const unsigned char *)text;
	size_t			 i;
	unsigned char		 high = 0;

	if (ref_class[' '] == 0)
		ref_init();
	for (i = 0; i < len; i++)
		high |= p[i];
	if (high < 0x80) {
		ref_bytes(p, len, flags, out);
		return (0);
	}
	if (ref_utf8(p, len, flags, out) == 0)
		return (0);
	ref_bytes(p, len, flags, out);
	return (1);
}

/* A fixed pseudo-random sequence (xorshift64*), the same everywhere. */
static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (*s * 0x2545f4914f6cdd1dULL);
}

/* Bytes as escaped text for a failure message (the start of a long one). */
static const char *
hex(const char *p, size_t len)
{
	static char	 s[1024];
	size_t		 i, used = 0;
	unsigned char	 c;

	for (i = 0; i < len && used + 8 < sizeof s; i++) {
		c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			s[used++] = c;
		else
			used += snprintf(s + used, sizeof s - used, "\\x%02x",
			    c);
	}
	s[used] = '\0';
	return (s);
}

/*
 * normalize and the oracle agree on text with flags: the return value and
 * the output, appended after pre.
 */
static void
check_same(const char *text, size_t len, int flags, const char *pre,
    size_t prelen)
{
	static struct buf	 got, want;
	int			 rv, refrv;

	got.len = want.len = 0;
	buf_append(&got, pre, prelen);
	buf_append(&want, pre, prelen);
	rv = normalize(text, len, flags, &got);
	refrv = ref_normalize(text, len, flags, &want);
	if (rv != refrv || got.len != want.len ||
	    memcmp(got.data, want.data, got.len) != 0) {
		fprintf(stderr, "input  \"%s\"\n", hex(text, len));
		fprintf(stderr, "want   \"%s\" (%d)\n", hex(want.data,
		    want.len), refrv);
		fprintf(stderr, "got    \"%s\" (%d)\n", hex(got.data, got.len),
		    rv);
		fail_msg("flags %#x, prefix %zu bytes: normalize differs "
		    "from the oracle", flags, prelen);
	}
	assert_int_equal(got.data[got.len], '\0');
}

/*
 * Differential: random text of ASCII words, white space, punctuation and
 * pieces that are hard for the cut (marks after ASCII letters, characters
 * that fold or decompose to ASCII or to marks, Unicode spaces and
 * punctuation, Hangul, invalid UTF-8 in some cases), every flag set, with
 * and without text before in the buffer, against the whole-text oracle.
 */
static void
test_differential(void **state)
{
	static const struct piece ascii[] = {
		PIECE("a"), PIECE("e"), PIECE("E"), PIECE("i"), PIECE("I"),
		PIECE("K"), PIECE("k"), PIECE("s"), PIECE("S"), PIECE("ss"),
		PIECE("A"), PIECE("o"), PIECE("the"), PIECE("Hello"),
		PIECE("WORLD"), PIECE("fi"), PIECE("x2"), PIECE("42"),
		PIECE("$5"), PIECE("+"), PIECE("<x>"), PIECE("~"), PIECE("\0"),
		PIECE("\x7f"), PIECE("\x01"),
	};
	static const struct piece space[] = {
		PIECE(" "), PIECE("  "), PIECE("\t"), PIECE("\n"),
		PIECE("\r\n"), PIECE("\v\f"), PIECE(" \t "),
	};
	static const struct piece punct[] = {
		PIECE(","), PIECE("."), PIECE("!"), PIECE("-"), PIECE("("),
		PIECE(")"), PIECE("_"), PIECE("'"), PIECE("\""), PIECE("..."),
		PIECE(", "), PIECE("?!"),
	};
	static const struct piece uni[] = {
		PIECE("\xcc\x81"),		/* U+0301 acute */
		PIECE("\xcc\x88"),		/* U+0308 diaeresis */
		PIECE("\xcc\xa3"),		/* U+0323 dot below (ccc 220) */
		PIECE("\xcd\x85"),		/* U+0345, folds to iota */
		PIECE("\xcd\x80"),		/* U+0340, to U+0300 */
		PIECE("\xcd\x84"),		/* U+0344, to two marks */
		PIECE("e\xcc\x81"),
		PIECE("E\xcc\x88\xcc\xa3"),
		PIECE("\xc3\xa9"),		/* é */
		PIECE("\xc3\x89"),		/* É */
		PIECE("\xc3\xb1"),		/* ñ */
		PIECE("\xc4\xb0"),		/* U+0130, folds to i U+0307 */
		PIECE("\xe2\x84\xaa"),		/* U+212A Kelvin */
		PIECE("\xe2\x84\xa6"),		/* U+2126 Ohm */
		PIECE("\xe2\x84\xab"),		/* U+212B Angstrom */
		PIECE("\xef\xbc\xa1"),		/* fullwidth A */
		PIECE("\xef\xbd\x85"),		/* fullwidth e */
		PIECE("\xef\xbc\x81"),		/* fullwidth ! */
		PIECE("\xef\xbc\x8c"),		/* fullwidth comma */
		PIECE("\xef\xac\x81"),		/* U+FB01 fi */
		PIECE("\xef\xac\x80"),		/* U+FB00 ff */
		PIECE("\xc3\x9f"),		/* ß */
		PIECE("\xe1\xba\x9e"),		/* U+1E9E capital sharp s */
		PIECE("\xcf\x82"),		/* final sigma */
		PIECE("\xce\xa3"),		/* capital sigma */
		PIECE("\xce\x86"),		/* Greek A with tonos */
		PIECE("\xc7\x84"),		/* U+01C4 DZ caron */
		PIECE("\xc2\xbd"),		/* ½ */
		PIECE("\xc2\xb2"),		/* superscript 2 */
		PIECE("\xe2\x91\xb4"),		/* U+2474 (1) */
		PIECE("\xe2\x80\xa4"),		/* U+2024 one dot leader */
		PIECE("\xef\xb9\x90"),		/* U+FE50 small comma */
		PIECE("\xef\xb7\xba"),		/* U+FDFA, 18 code points */
		PIECE("\xc2\xa0"),		/* no-break space */
		PIECE("\xe2\x80\x83"),		/* em space */
		PIECE("\xe2\x80\x82"),		/* en space */
		PIECE("\xe3\x80\x80"),		/* ideographic space */
		PIECE("\xe2\x80\xa8"),		/* line separator */
		PIECE("\xc2\x85"),		/* next line */
		PIECE("\xe2\x80\x94"),		/* em dash */
		PIECE("\xe2\x80\x9c"), PIECE("\xe2\x80\x9d"),
		PIECE("\xe2\x80\x98"), PIECE("\xe2\x80\x99"),
		PIECE("\xc2\xab"), PIECE("\xc2\xbb"),
		PIECE("\xea\xb0\x80"),		/* U+AC00 Hangul LV */
		PIECE("\xea\xb0\x81"),		/* U+AC01 Hangul LVT */
		PIECE("\xe1\x84\x80"),		/* U+1100 jamo L */
		PIECE("\xe1\x85\xa1"),		/* U+1161 jamo V */
		PIECE("\xe1\x86\xa8"),		/* U+11A8 jamo T */
		PIECE("\xe0\xad\x87"),		/* U+0B47 Oriya E */
		PIECE("\xe0\xac\xbe"),		/* U+0B3E, composes, class 0 */
		PIECE("\xe2\x82\xac"),		/* euro */
		PIECE("\xe4\xb8\xad"),		/* CJK */
		PIECE("\xf0\x9d\x90\x80"),	/* U+1D400 bold A */
		PIECE("\xf0\x9f\x98\x80"),	/* emoji */
		PIECE("\xd0\x9f\xd1\x80\xd0\xb8"),	/* Cyrillic */
	};
	static const struct piece bad[] = {
		PIECE("\xff"), PIECE("\xc3"), PIECE("\x80"), PIECE("\xbf"),
		PIECE("\xed\xa0\x80"), PIECE("\xc0\xaf"),
		PIECE("\xf4\x90\x80\x80"), PIECE("\xe2\x80"),
		PIECE("\xf0\x9f\x98"),
	};
	struct buf	 text = { 0 };
	const struct piece *pc;
	uint64_t	 seed = 0x6d6866696c746572ULL, r;
	int		 n, i, k, flags, invalid;

	for (n = 0; n < 5000; n++) {
		text.len = 0;
		invalid = rnd(&seed) % 8 == 0;
		k = rnd(&seed) % 32;
		for (i = 0; i < k; i++) {
			r = rnd(&seed) % 100;
			if (invalid && r < 3)
				pc = &bad[rnd(&seed) % nitems(bad)];
			else if (r < 40)
				pc = &ascii[rnd(&seed) % nitems(ascii)];
			else if (r < 55)
				pc = &space[rnd(&seed) % nitems(space)];
			else if (r < 65)
				pc = &punct[rnd(&seed) % nitems(punct)];
			else
				pc = &uni[rnd(&seed) % nitems(uni)];
			buf_append(&text, pc->s, pc->len);
		}
		if (invalid && k > 0 && rnd(&seed) % 2 == 0) {
			/* Also once at a random place. */
			pc = &bad[rnd(&seed) % nitems(bad)];
			i = rnd(&seed) % (text.len + 1);
			buf_reserve(&text, pc->len);
			memmove(text.data + i + pc->len, text.data + i,
			    text.len - i);
			memcpy(text.data + i, pc->s, pc->len);
			text.len += pc->len;
		}
		for (flags = 0; flags <= NORM_ALL; flags++) {
			check_same(text.data, text.len, flags, "", 0);
			if (n % 4 == 0)
				check_same(text.data, text.len, flags, "pre: ",
				    5);
		}
	}
	buf_free(&text);
}

/*
 * Unicode segments longer than normalize's buffer on the stack, and long
 * ASCII runs with a few other characters, against the oracle.
 */
static void
test_long_segments(void **state)
{
	static const struct piece run[] = {
		PIECE("\xea\xb0\x81"),		/* Hangul LVT: 3 code points */
		PIECE("\xef\xb7\xba"),		/* U+FDFA: 18 under NFKC */
		PIECE("\xd0\x9f\xd1\x80\xd0\xb8"),
		PIECE("e\xcc\x81\xcc\xa3"),
		PIECE("\xe2\x80\x83"),
	};
	struct buf	 text = { 0 };
	size_t		 i, j;
	int		 flags;

	for (i = 0; i < nitems(run); i++) {
		text.len = 0;
		buf_append(&text, "Start ", 6);
		for (j = 0; j < 1500; j++)
			buf_append(&text, run[i].s, run[i].len);
		buf_append(&text, " End", 4);
		for (flags = 0; flags <= NORM_ALL; flags++)
			check_same(text.data, text.len, flags, "", 0);
	}

	text.len = 0;
	for (j = 0; j < 2000; j++) {
		buf_append(&text, "Some ASCII text, Words. ", 24);
		if (j % 7 == 0)
			buf_append(&text, run[j % nitems(run)].s,
			    run[j % nitems(run)].len);
	}
	for (flags = 0; flags <= NORM_ALL; flags++)
		check_same(text.data, text.len, flags, "", 0);
	buf_free(&text);
}

/*
 * The byte path takes runs of 8 bytes at a time: every byte value at every
 * place of a run and next to a lone space, spaces and runs of them at
 * every offset of texts of 0 to 160 bytes, and random text of the bytes
 * that end a run (with UTF-8 segments between, so that a space owed goes
 * from one segment to the next), against the oracle's byte at a time.
 * test_byte_runs runs it with the portable code, with AVX2 (32 bytes at a
 * time) and with AVX-512 (64, then 32), each where the CPU has it.
 */
static void
byte_runs(void)
{
	static const char alpha[] = "abcXYZ09 \t\n\r\v\f ,.!-_()$+<~@[]{}\"'";
	static const struct piece odd[] = {
		PIECE("\xc3\xa9"), PIECE("\xc3\x89"), PIECE("\xc2\xa0"),
		PIECE("\xe2\x80\x94"), PIECE("\xff"), PIECE("\x80"),
		PIECE("\0"), PIECE("\x7f"), PIECE("  "), PIECE("   "),
	};
	static const int fl[] = { 0, NORM_CASEFOLD, NORM_SPACE, NORM_PUNCT,
	    NORM_SPACE | NORM_PUNCT, D, A };
	char		 text[192];
	struct buf	 t = { 0 };
	const struct piece *pc;
	uint64_t	 seed = 0x72756e7362797465ULL, r;
	size_t		 len, k, j, q;
	int		 b, c, flags, i;
	char		 ch;

	/* Each byte value at each place of a run, alone and doubled. */
	for (b = 0; b < 256; b++) {
		for (k = 0; k < 72; k++) {
			memcpy(text, "abCDefGHijKLmnOPqrSTuvWXyz0123456789abCD"
			    "efGHijKLmnOPqrSTuvWXyz0123456789", 72);
			text[k] = b;
			for (flags = 0; flags <= NORM_ALL; flags++)
				check_same(text, 72, flags, "", 0);
			text[k + 1] = b;
			check_same(text, 40, D, "", 0);
			check_same(text, 40, A, "p", 1);
		}
	}

	/* Each pair of byte values around a space, either side of 8s. */
	for (b = 0; b < 256; b++) {
		for (c = 0; c < 256; c++) {
			for (k = 1; k < 71; k += k % 8 == 0 ? 7 : 1) {
				memcpy(text, "wOrds and MORE words, "
				    "Words and more WORDS, and MORE words, "
				    "WORDS and mo", 72);
				text[k - 1] = b;
				text[k] = ' ';
				text[k + 1] = c;
				check_same(text, 72, D, "", 0);
				check_same(text, 72, A, "", 0);
			}
		}
	}

	/* Runs of spaces at every offset, every length up to 160. */
	for (len = 0; len <= 160; len++) {
		for (k = 0; k <= len; k++) {
			for (q = 1; q <= 3 && k + q <= len; q++) {
				for (j = 0; j < len; j++)
					text[j] = "aBcDeFgHiJkLmNoP"[j % 16];
				memset(text + k, ' ', q);
				for (i = 0; i < (int)nitems(fl); i++)
					check_same(text, len, fl[i], "", 0);
				check_same(text, len, D, "x ", 2);
			}
		}
	}

	/* Random text of 0 to 160 bytes, ten of each length. */
	for (len = 0; len <= 160; len++) {
		for (q = 0; q < 10; q++) {
			t.len = 0;
			while (t.len < len) {
				r = rnd(&seed) % 100;
				if (r < 50) {
					buf_append(&t, "abcdefgH", 1 +
					    rnd(&seed) % 8);
				} else if (r < 90) {
					ch = alpha[rnd(&seed) %
					    (sizeof alpha - 1)];
					buf_append(&t, &ch, 1);
				} else {
					pc = &odd[rnd(&seed) % nitems(odd)];
					buf_append(&t, pc->s, pc->len);
				}
			}
			for (flags = 0; flags <= NORM_ALL; flags++) {
				check_same(t.data, t.len, flags, "", 0);
				check_same(t.data, t.len, flags, "pre", 3);
			}
		}
	}
	buf_free(&t);
}

static void
test_byte_runs(void **state)
{
	simd_allow(SIMD_NONE);
	byte_runs();
	simd_allow(SIMD_AVX2);
	byte_runs();
	simd_allow(SIMD_ALL);
	byte_runs();
}

/*
 * The differential test again, with the byte path's portable code, and
 * with its AVX2 loop alone (SIMD_ALL takes the AVX-512 one where the CPU
 * has it).
 */
static void
test_differential_portable(void **state)
{
	simd_allow(SIMD_NONE);
	test_differential(state);
	test_long_segments(state);
	simd_allow(SIMD_AVX2);
	test_differential(state);
	test_long_segments(state);
	simd_allow(SIMD_ALL);
}

/* Is cp assigned (not unassigned, private use or a surrogate)? */
static int
assigned(utf8proc_int32_t cp)
{
	int	 cat = utf8proc_category(cp);

	return (cat != UTF8PROC_CATEGORY_CN && cat != UTF8PROC_CATEGORY_CO &&
	    cat != UTF8PROC_CATEGORY_CS);
}

/*
 * Every assigned character, between ASCII letters on both sides and in
 * each kind of segment, for the flag sets that map: no character's mapping
 * reaches across a cut.
 */
static void
test_every_char(void **state)
{
	static const int fl[] = { NORM_CASEFOLD, NORM_NFKC,
	    NORM_CASEFOLD | NORM_NFKC, NORM_ALL };
	unsigned char	 text[64], enc[4];
	utf8proc_int32_t cp;
	size_t		 len, n, i;

	for (cp = 0x80; cp < 0x110000; cp++) {
		if (!assigned(cp))
			continue;
		n = utf8proc_encode_char(cp, enc);
		/* "A" X "b" X "Cd" X "E": cuts before b, C, d and E. */
		len = 0;
		text[len++] = 'A';
		memcpy(text + len, enc, n), len += n;
		text[len++] = 'b';
		memcpy(text + len, enc, n), len += n;
		text[len++] = 'C';
		text[len++] = 'd';
		memcpy(text + len, enc, n), len += n;
		text[len++] = 'E';
		for (i = 0; i < nitems(fl); i++)
			check_same((char *)text, len, fl[i], "", 0);
	}
}

/*
 * Real text: excerpts of the shared corpus's Debian manual pages and
 * changelogs, mostly ASCII with a few other characters as most real text
 * is (box drawing, U+2010 hyphens at the ends of lines, quotation marks,
 * the copyright sign, a no-break space, Czech and Cyrillic letters,
 * angle brackets, arrows).  Each, and all of them one after the other,
 * against the oracle for every flag set, portable and with AVX2; and the
 * default's output pinned by its FNV-1a digest, known answers generated
 * once from the oracle.
 */
static const struct {
	uint64_t	 digest;	/* of normalize(NORM_DEFAULT) */
	const char	*text;
} real[] = {
	{ 0x0f6251eace293057ULL,
	    " terms  used  in  this  section,  see at\xe2\x80\x90\n       t"
	    "ributes(7).\n\n       \xe2\x94\x8c\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\xac\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\xac\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x90\n       \xe2\x94\x82Interface            \xe2\x94\x82"
	    " Attribute     \xe2\x94\x82 Value   \xe2\x94\x82\n       \xe2"
	    "\x94\x9c\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\xbc\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\xbc\xe2\x94\x80\xe2"
	    "\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\xa4\n" },
	{ 0x2711baeb11d45213ULL,
	    "       threads currently blocked in sem_wait(3).  Linux adopts"
	    " the former  be\xe2\x80\x90\n       havior.\n\nRETURN VALUE\n "
	    "      sem_getvalue() returns 0 on success; on error, -1 is ret"
	    "urned and errno\n" },
	{ 0x83ada68cf68cc1a1ULL,
	    "           comma-separated list of features, prefixed with the"
	    " \xe2\x80\x98+\xe2\x80\x99 or \xe2\x80\x98-\xe2\x80\x99\n     "
	    "      modifiers, to denote whether to enable or disable them. "
	    " The\n           special feature \xe2\x80\x9c" "all\xe2\x80\x9d c"
	    "an be used to enable or disable all" },
	{ 0x9f73f18cc867eb5dULL,
	    "COPYRIGHT\n       Copyright \xc2\xa9 2002-2022 Simon Josefsson"
	    ".\n       Copying  and  distribution  of this file, with or wi"
	    "thout modification,\n" },
	{ 0x2e63f492e2faf99dULL,
	    "x265 (3.1.1-1) experimental; urgency=medium\n\n  [ Ond\xc5\x99"
	    "ej Nov\xc3\xbd ]\n  * Bump Standards-Version to 4.4.0\n" },
	{ 0xce3fa182298343e8ULL,
	    "       \xe2\x80\xa2  the process's effective user ID did not m"
	    "atch its real  user  ID  or\n          the  process's  effecti"
	    "ve  group  ID did not match its real group ID" },
	{ 0x48cddc36193096fbULL,
	    "       236   158   9E     \xd1\x9b     CYRILLIC SMALL LETTER T"
	    "SHE\n       240   160   A0     \xc2\xa0     NO-BREAK SPACE\n  "
	    "     241   161   A1     \xd0\x8e     CYRILLIC CAPITAL LETTER S"
	    "HORT U\n" },
	{ 0x44be2898114e88dbULL,
	    "       See  \xe2\x9f\xa8http://www.bsc.es/projects/deepcomputi"
	    "ng/linuxoncell/\xe2\x9f\xa9  for   the\n       recommended lib"
	    "raries.\n" },
	{ 0x830f1b063b062cc0ULL,
	    "    - libglib2.0-dev \xe2\x86\x92 2.57.4\n    - wayland-protoc"
	    "ols \xe2\x86\x92 1.14\n" },
};

/* FNV-1a, 64 bits: a digest of a known answer. */
static uint64_t
fnv1a(const char *p, size_t len)
{
	uint64_t	 h = 0xcbf29ce484222325ULL;
	size_t		 i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
	return (h);
}

static void
test_real_text(void **state)
{
	struct buf	 all = { 0 }, out = { 0 };
	size_t		 i, len;
	int		 flags, simd;

	for (i = 0; i < nitems(real); i++) {
		len = strlen(real[i].text);
		buf_append(&all, real[i].text, len);
		out.len = 0;
		assert_int_equal(normalize(real[i].text, len, D, &out), 0);
		if (fnv1a(out.data, out.len) != real[i].digest)
			fail_msg("excerpt %zu: digest 0x%016llx, want "
			    "0x%016llx: the normalised text changed (bump "
			    "MHF_SCHEME)", i, (unsigned long long)fnv1a(
			    out.data, out.len),
			    (unsigned long long)real[i].digest);
	}
	for (simd = 0; simd < 3; simd++) {
		simd_allow(simd == 0 ? SIMD_NONE : simd == 1 ? SIMD_AVX2 :
		    SIMD_ALL);
		for (flags = 0; flags <= NORM_ALL; flags++) {
			for (i = 0; i < nitems(real); i++)
				check_same(real[i].text, strlen(real[i].text),
				    flags, "", 0);
			check_same(all.data, all.len, flags, "", 0);
		}
	}
	simd_allow(1);
	buf_free(&all);
	buf_free(&out);
}

/*
 * Characters that normalize leaves to themselves, without utf8proc, when
 * it finds them inert (they map to themselves, are starters and compose
 * with nothing): every code point of the Basic Multilingual Plane after an
 * ASCII letter and before or after a mark (one of a low combining class
 * that composes with nothing, too), a jamo or a letter that composes with
 * what goes before it, for the flag sets that map, against the oracle.
 */
static void
test_inert(void **state)
{
	static const char *next[] = {
		"\xcc\x81",		/* U+0301 acute */
		"\xcc\xa3",		/* U+0323 dot below (ccc 220) */
		"\xe1\x85\xa1",	/* U+1161 jamo V */
		"\xe1\x86\xa8",	/* U+11A8 jamo T */
		"\xe0\xac\xbe",	/* U+0B3E, composes, class 0 */
		"\xe3\x82\x99",	/* U+3099 kana voiced mark */
		"\xd6\xb0",		/* U+05B0, ccc 10, composes with nothing */
	};
	static const int fl[] = { NORM_CASEFOLD, NORM_NFKC, D };
	unsigned char	 text[64], enc[4];
	utf8proc_int32_t cp;
	size_t		 len, n, i, j, m;

	for (cp = 0x80; cp < 0x10000; cp++) {
		if (!assigned(cp))
			continue;
		n = utf8proc_encode_char(cp, enc);
		for (j = 0; j < nitems(next); j++) {
			/* "a" X Y "b" Y X "c" */
			m = strlen(next[j]);
			len = 0;
			text[len++] = 'a';
			memcpy(text + len, enc, n), len += n;
			memcpy(text + len, next[j], m), len += m;
			text[len++] = 'b';
			memcpy(text + len, next[j], m), len += m;
			memcpy(text + len, enc, n), len += n;
			text[len++] = 'c';
			for (i = 0; i < nitems(fl); i++)
				check_same((char *)text, len, fl[i], "", 0);
		}
	}
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
		cmocka_unit_test(test_differential),
		cmocka_unit_test(test_long_segments),
		cmocka_unit_test(test_byte_runs),
		cmocka_unit_test(test_differential_portable),
		cmocka_unit_test(test_every_char),
		cmocka_unit_test(test_real_text),
		cmocka_unit_test(test_inert),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_names_bad),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
