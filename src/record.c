/*
 * One raw record to the (id, text) pair the filter compares, for each input
 * format, and with --time-field the document time of a JSON record.  A
 * record that does not fit its format is reported with a cause and left to
 * the bad-input policy.
 *
 * JSON records are read with yajl's event parser rather than jansson, which
 * the rest of mhfilter uses: jansson builds a tree of the whole record,
 * every member and every string copied, before one can look at it; yajl
 * reports the values as it reads them and only the members asked for are
 * kept, which makes parsing a record several times cheaper (with jansson
 * it was the largest single cost of hashing one).  The rules are
 * jansson's: the record must be one JSON object; of a repeated member the
 * last counts.  yajl checks only the
 * shape of UTF-8 and turns a \u escape of half a surrogate pair into '?',
 * so json_checks first rejects what jansson did, invalid UTF-8 (overlong
 * forms, surrogates, beyond U+10FFFF), and reads an unpaired surrogate
 * escape, which jansson rejected, as U+FFFD.  Unlike jansson, a number
 * that does not fit 64 bits makes a record bad only when it is the time
 * (an id is its digits), and a record that is another JSON value (an
 * array, a number) is "not a JSON object" even when malformed.
 * Most records never reach yajl: a fast path (jfast) reads the usual ones
 * in one pass, and leaves to yajl what it is not sure of.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>
#include <yajl/yajl_parse.h>

#include "mhfilter.h"

#ifdef MHF_AVX2
#include <immintrin.h>
#endif

/* The members record_parse_jsonl looks for, and what it found. */
enum { F_TEXT, F_ID, F_TIME, F_COUNT };

enum jkind {
	J_NONE,			/* no such member */
	J_STRING,
	J_INTEGER,		/* a number without fraction or exponent */
	J_REAL,
	J_NULL,
	J_OTHER			/* a boolean, an object or an array */
};

struct jparse {
	const char	*name[F_COUNT];	/* NULL: not wanted */
	size_t		 namelen[F_COUNT];
	enum jkind	 kind[F_COUNT];
	struct buf	*val[F_COUNT];	/* a string's bytes, a number's text */
	unsigned	 depth;		/* containers open */
	unsigned	 want;		/* fields the current key names, bits */
	int		 notobject;	/* the record is another JSON value */
};

/*
 * A member's value, kept into the fields its key names (want, bits):
 * both paths, yajl's events and jfast, keep values through here.
 */
static void
jkeep(struct jparse *j, unsigned want, enum jkind kind, const void *p,
    size_t len)
{
	unsigned	 f;

	for (f = 0; f < F_COUNT; f++) {
		if (!(want & (1U << f)))
			continue;
		j->kind[f] = kind;
		j->val[f]->len = 0;	/* a repeated member: the last counts */
		if (kind == J_STRING || kind == J_INTEGER || kind == J_REAL)
			buf_append(j->val[f], p, len);
	}
}

/* A number's kind: J_REAL with a fraction or an exponent. */
static enum jkind
jnumber_kind(const void *s, size_t len)
{
	if (memchr(s, '.', len) != NULL || memchr(s, 'e', len) != NULL ||
	    memchr(s, 'E', len) != NULL)
		return (J_REAL);
	return (J_INTEGER);
}

/* A value at the current place: keep it if its key names a field. */
static int
jvalue(struct jparse *j, enum jkind kind, const void *p, size_t len)
{
	if (j->depth == 0) {
		j->notobject = 1;
		return (0);		/* stop: nothing more to learn */
	}
	if (j->depth != 1 || j->want == 0)
		return (1);
	jkeep(j, j->want, kind, p, len);
	j->want = 0;
	return (1);
}

static int
jnull(void *ctx)
{
	return (jvalue(ctx, J_NULL, NULL, 0));
}

static int
jboolean(void *ctx, int b)
{
	return (jvalue(ctx, J_OTHER, NULL, 0));
}

static int
jnumber(void *ctx, const char *s, size_t len)
{
	return (jvalue(ctx, jnumber_kind(s, len), s, len));
}

static int
jstring(void *ctx, const unsigned char *s, size_t len)
{
	return (jvalue(ctx, J_STRING, s, len));
}

static int
jstart(void *ctx)
{
	struct jparse	*j = ctx;

	if (j->depth == 1 && !jvalue(j, J_OTHER, NULL, 0))
		return (0);
	j->depth++;
	return (1);
}

static int
jstart_array(void *ctx)
{
	struct jparse	*j = ctx;

	if (j->depth == 0)
		return (jvalue(j, J_OTHER, NULL, 0));
	return (jstart(ctx));
}

static int
jend(void *ctx)
{
	((struct jparse *)ctx)->depth--;
	return (1);
}

static int
jkey(void *ctx, const unsigned char *s, size_t len)
{
	struct jparse	*j = ctx;
	unsigned	 f;

	if (j->depth != 1)
		return (1);
	j->want = 0;
	for (f = 0; f < F_COUNT; f++) {
		if (j->name[f] != NULL && j->namelen[f] == len &&
		    memcmp(j->name[f], s, len) == 0)
			j->want |= 1U << f;
	}
	return (1);
}

static const yajl_callbacks jcallbacks = {
	jnull, jboolean, NULL, NULL, jnumber, jstring,
	jstart, jkey, jend, jstart_array, jend
};

/* A JSON number's text as a signed 64-bit integer; -1 if it does not fit. */
static int
jinteger(const struct buf *b, long long *v)
{
	char	 num[32];

	if (b->len >= sizeof num)
		return (-1);
	memcpy(num, b->data, b->len);
	num[b->len] = '\0';
	errno = 0;
	*v = strtoll(num, NULL, 10);
	return (errno == ERANGE ? -1 : 0);
}

/* A JSON number's text as a double (infinite when too large). */
static double
jreal(const struct buf *b)
{
	char	*num;
	double	 d;

	num = xmalloc(b->len + 1);
	memcpy(num, b->data, b->len);
	num[b->len] = '\0';
	d = strtod(num, NULL);
	free(num);
	return (d);
}

/*
 * The document time from the time member: an RFC 3339 string, or seconds
 * since the epoch as a number or a numeric string (fractions truncated).
 */
static int
record_time(struct record *r, enum jkind kind, struct buf *v,
    const char *time_field, char **cause)
{
	long long	 i;
	double		 d;
	char		*why;

	switch (kind) {
	case J_NONE:
		xasprintf(cause, "no \"%s\" field", time_field);
		return (-1);
	case J_STRING:
		if (memchr(v->data, '\0', v->len) != NULL) {
			xasprintf(cause, "field \"%s\" is not a time (it holds "
			    "a NUL)", time_field);
			return (-1);
		}
		buf_append(v, "", 1);	/* parse_time wants a C string */
		if (parse_time(v->data, &r->time, &why) != 0) {
			xasprintf(cause, "field \"%s\": %s", time_field, why);
			free(why);
			return (-1);
		}
		return (0);
	case J_INTEGER:
		if (jinteger(v, &i) != 0 || i < TIME_MIN || i > TIME_MAX)
			goto range;
		r->time = i;
		return (0);
	case J_REAL:
		d = jreal(v);
		if (!(d >= TIME_MIN && d < (double)TIME_MAX + 1))
			goto range;
		r->time = (int64_t)d;
		return (0);
	default:
		xasprintf(cause, "field \"%s\" is not a time (a string or a "
		    "number)", time_field);
		return (-1);
	}
range:
	xasprintf(cause, "field \"%s\" is out of range (%d to %lld seconds "
	    "since the epoch)", time_field, TIME_MIN, TIME_MAX);
	return (-1);
}

/* The value of the four hex digits at p, or -1. */
static long
hex4(const char *p)
{
	long	 v = 0;
	int	 i;

	for (i = 0; i < 4; i++) {
		v <<= 4;
		if (p[i] >= '0' && p[i] <= '9')
			v |= p[i] - '0';
		else if ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f')
			v |= (p[i] | 0x20) - 'a' + 10;
		else
			return (-1);
	}
	return (v);
}

/*
 * What jansson rejected and yajl lets through (see the top): invalid
 * UTF-8, -1 with a cause.  A \u escape of half a surrogate pair (an emoji
 * cut in two, in scraped text) is read as U+FFFD, as Go's decoder reads
 * it: the record's bytes with each such escape made \ufffd, the same
 * length, are put into fixed, and 1 returned; else 0.  Malformed escapes
 * are left to yajl to report.
 */
static int
json_checks(const char *p, size_t len, struct buf *fixed, char **cause)
{
	const char	*at, *end = p + len;
	utf8proc_int32_t cp;
	utf8proc_ssize_t n;
	size_t		 i;
	long		 u, low;
	int		 lone = 0;

	for (i = 0; i < len; i++) {
		i += ascii_span((const unsigned char *)p + i, len - i);
		if (i == len)
			break;
		n = utf8proc_iterate((const utf8proc_uint8_t *)p + i,
		    (utf8proc_ssize_t)(len - i), &cp);
		if (n < 0) {
			xasprintf(cause, "invalid JSON at column %zu: invalid "
			    "UTF-8", i + 1);
			return (-1);
		}
		i += (size_t)n - 1;
	}
	for (at = p; (at = memchr(at, '\\', end - at)) != NULL; at += 2) {
		if (end - at < 6 || at[1] != 'u') {
			if (end - at < 2)
				break;
			continue;	/* \n, \\ ...: two bytes */
		}
		u = hex4(at + 2);
		if (u >= 0xd800 && u <= 0xdbff && end - at >= 12 &&
		    at[6] == '\\' && at[7] == 'u' &&
		    (low = hex4(at + 8)) >= 0xdc00 && low <= 0xdfff) {
			at += 10;	/* a pair: both escapes */
			continue;
		}
		if (u >= 0xd800 && u <= 0xdfff) {
			if (!lone) {
				fixed->len = 0;
				buf_append(fixed, p, len);
				lone = 1;
			}
			memcpy(fixed->data + (at - p) + 2, "fffd", 4);
		}
		at += 4;
	}
	return (lone);
}

/*
 * yajl's message for a parse error, on one line, for a cause; atend: the
 * record ended too soon (yajl_complete_parse failed).
 */
static void
jerror(yajl_handle h, const struct record *r, int atend, char **cause)
{
	unsigned char	*msg;
	size_t		 len, at;

	msg = yajl_get_error(h, 0, NULL, 0);
	len = strlen((char *)msg);
	while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
		len--;
	/* After yajl_complete_parse, the count is of its own input. */
	at = atend ? r->raw.len : yajl_get_bytes_consumed(h);
	if (at > r->raw.len)
		at = r->raw.len;
	xasprintf(cause, "invalid JSON at column %zu: %.*s", at + 1, (int)len,
	    (char *)msg);
	yajl_free_error(h, msg);
}

/*
 * The fast path of record_parse_jsonl.  yajl, set up for each record, is a
 * large share of a run's CPU with the checks above, which read the record
 * a second time.  jfast reads the usual record (one object
 * whose members are strings, numbers, literals and nested values, valid
 * UTF-8, simple escapes) in one pass and fills j as yajl's events would.
 * It is strict: anything it is not sure of (a lone surrogate, \u0000, an
 * escape in a key, another white space than JSON's four, too deep a
 * nesting, any error) makes it return 0 having taken nothing, and the
 * record goes the slow way, whose verdict and message count.  The unit
 * tests and the fuzz target compare the two on the same records
 * (record_json_agree).
 */
static int	record_json_slow;	/* always the slow way */

#define JFAST_DEPTH	64

/*
 * The length of the well-formed UTF-8 sequence (RFC 3629's table) of a
 * non-ASCII byte at p, or 0.
 */
static size_t
jutf8(const unsigned char *p, const unsigned char *end)
{
	size_t		 n, i;
	unsigned char	 c = *p, lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 1;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return (0);
	if ((size_t)(end - p) <= n || p[1] < lo || p[1] > hi)
		return (0);
	for (i = 2; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return (0);
	}
	return (n + 1);
}

/*
 * Does any of the 8 bytes in w need a look in a string: a quote, a
 * backslash, a control character or a byte of a multibyte sequence?
 * (The usual bit tricks for a zero byte and a byte under 0x20.)
 */
static inline int
jspecial(uint64_t w)
{
	const uint64_t	 ones = 0x0101010101010101ULL;
	const uint64_t	 high = 0x8080808080808080ULL;
	uint64_t	 q = w ^ (ones * '"'), b = w ^ (ones * '\\');

	return ((((q - ones) & ~q) | ((b - ones) & ~b) |
	    ((w - ones * 0x20) & ~w) | w) & high) != 0;
}

#ifdef MHF_AVX2
/*
 * How many bytes at the start of p need no look in a string (jspecial),
 * 32 at a time, up to the last whole block: a signed compare with 0x20
 * finds control characters and the bytes of multibyte sequences at once.
 */
__attribute__((target("avx2"))) static size_t
jplain_avx2(const unsigned char *p, size_t len)
{
	const __m256i	 quote = _mm256_set1_epi8('"');
	const __m256i	 bslash = _mm256_set1_epi8('\\');
	const __m256i	 space = _mm256_set1_epi8(0x20);
	__m256i		 v, m;
	uint32_t	 bits;
	size_t		 i;

	for (i = 0; len - i >= 32; i += 32) {
		v = _mm256_loadu_si256((const __m256i *)(p + i));
		m = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v,
		    quote), _mm256_cmpeq_epi8(v, bslash)),
		    _mm256_cmpgt_epi8(space, v));
		if ((bits = (uint32_t)_mm256_movemask_epi8(m)) != 0)
			return (i + (size_t)__builtin_ctz(bits));
	}
	return (i);
}
#endif

/*
 * A string whose opening quote is at *pp: checked, and decoded into out
 * unless out is NULL.  *pp is left after the closing quote.  0 when the
 * fast path cannot take it.
 */
static int
jfast_string(const unsigned char **pp, const unsigned char *end,
    struct buf *out)
{
	const unsigned char	*p = *pp + 1, *run;
	unsigned char		 u8[4];
	long			 u, low;
	uint64_t		 w;
	uint32_t		 cp;
	size_t			 n;
	char			 c;
#ifdef MHF_AVX2
	int			 wide = simd_avx2();
#endif

	if (out != NULL)
		out->len = 0;
	for (;;) {
		run = p;
		for (;;) {
#ifdef MHF_AVX2
			if (wide && end - p >= 32)
				p += jplain_avx2(p, end - p);
#endif
			while (end - p >= 8) {
				memcpy(&w, p, 8);
				if (jspecial(w))
					break;
				p += 8;
			}
			while (p < end && *p != '"' && *p != '\\' &&
			    *p >= 0x20 && *p < 0x80)
				p++;
			if (p == end || *p < 0x80)
				break;
			if ((n = jutf8(p, end)) == 0)
				return (0);
			p += n;
		}
		if (p == end || *p < 0x20)
			return (0);
		if (out != NULL)
			buf_append(out, run, p - run);
		if (*p == '"')
			break;
		/* An escape. */
		if (end - p < 2)
			return (0);
		switch (p[1]) {
		case '"':
		case '\\':
		case '/':
			c = p[1];
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u':
			if (end - p < 6 || (u = hex4((const char *)p + 2)) <= 0 ||
			    (u >= 0xdc00 && u <= 0xdfff))
				return (0);
			cp = u;
			n = 6;
			if (u >= 0xd800 && u <= 0xdbff) {
				if (end - p < 12 || p[6] != '\\' ||
				    p[7] != 'u' || (low = hex4((const char *)p + 8)) <
				    0xdc00 || low > 0xdfff)
					return (0);
				cp = 0x10000 + ((u - 0xd800) << 10) +
				    (low - 0xdc00);
				n = 12;
			}
			if (cp < 0x80) {
				u8[0] = cp;
				c = 1;
			} else if (cp < 0x800) {
				u8[0] = 0xc0 | cp >> 6;
				u8[1] = 0x80 | (cp & 0x3f);
				c = 2;
			} else if (cp < 0x10000) {
				u8[0] = 0xe0 | cp >> 12;
				u8[1] = 0x80 | (cp >> 6 & 0x3f);
				u8[2] = 0x80 | (cp & 0x3f);
				c = 3;
			} else {
				u8[0] = 0xf0 | cp >> 18;
				u8[1] = 0x80 | (cp >> 12 & 0x3f);
				u8[2] = 0x80 | (cp >> 6 & 0x3f);
				u8[3] = 0x80 | (cp & 0x3f);
				c = 4;
			}
			if (out != NULL)
				buf_append(out, u8, c);
			p += n;
			continue;
		default:
			return (0);
		}
		if (out != NULL)
			buf_append(out, &c, 1);
		p += 2;
	}
	*pp = p + 1;
	return (1);
}

/* JSON's white space. */
static const unsigned char *
jfast_space(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' ||
	    *p == '\r'))
		p++;
	return (p);
}

/* A number at *pp (grammar of RFC 8259); *pp is left after it. */
static int
jfast_number(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char	*p = *pp;

#define DIGIT(q)	((q) < end && *(q) >= '0' && *(q) <= '9')
	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if (DIGIT(p)) {
		while (DIGIT(p))
			p++;
	} else
		return (0);
	if (p < end && *p == '.') {
		if (!DIGIT(p + 1))
			return (0);
		for (p++; DIGIT(p); p++)
			;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (!DIGIT(p))
			return (0);
		while (DIGIT(p))
			p++;
	}
#undef DIGIT
	/* What follows a number must end it (yajl lexes "01" as two). */
	if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' ||
	    *p == 'E' || *p == '-' || *p == '+'))
		return (0);
	*pp = p;
	return (1);
}

/*
 * The fields a member's key names, as bits; -1 for a key with an escape,
 * which only the slow way decodes.
 */
static int
jfast_want(const struct jparse *j, const unsigned char *key, size_t len)
{
	unsigned	 f, want = 0;

	if (memchr(key, '\\', len) != NULL)
		return (-1);
	for (f = 0; f < F_COUNT; f++) {
		if (j->name[f] != NULL && j->namelen[f] == len &&
		    memcmp(j->name[f], key, len) == 0)
			want |= 1U << f;
	}
	return ((int)want);
}

/*
 * Any value at *pp, at depth depth (0: the record, 1: a member of it),
 * kept into the fields want names.  0 when the fast path cannot take it.
 */
static int
jfast_value(struct jparse *j, const unsigned char **pp,
    const unsigned char *end, unsigned depth, unsigned want)
{
	const unsigned char	*p = *pp, *start = p, *key;
	static const struct {
		const char	*word;
		size_t		 len;
		enum jkind	 kind;
	} lit[] = {
		{ "true", 4, J_OTHER },
		{ "false", 5, J_OTHER },
		{ "null", 4, J_NULL },
	};
	unsigned	 first;
	size_t		 i;
	int		 mwant = 0;
	char		 close;

	if (p == end)
		return (0);
	switch (*p) {
	case '"':
		/* The first field that wants it decodes; the rest copy. */
		for (first = 0; first < F_COUNT; first++) {
			if (want & (1U << first))
				break;
		}
		if (!jfast_string(&p, end, first < F_COUNT ? j->val[first] :
		    NULL))
			return (0);
		if (first < F_COUNT) {
			j->kind[first] = J_STRING;
			jkeep(j, want & ~(1U << first), J_STRING,
			    j->val[first]->data, j->val[first]->len);
		}
		break;
	case '{':
	case '[':
		if (depth >= JFAST_DEPTH)
			return (0);
		close = *p == '{' ? '}' : ']';
		p = jfast_space(p + 1, end);
		if (p < end && *p == close) {
			p++;
			jkeep(j, want, J_OTHER, NULL, 0);
			break;
		}
		for (;;) {
			if (close == '}') {
				if (p == end || *p != '"')
					return (0);
				key = p + 1;
				if (!jfast_string(&p, end, NULL))
					return (0);
				/* The record's members are looked at. */
				if (depth == 0 && (mwant = jfast_want(j, key,
				    p - 1 - key)) < 0)
					return (0);
				p = jfast_space(p, end);
				if (p == end || *p != ':')
					return (0);
				p = jfast_space(p + 1, end);
			}
			if (!jfast_value(j, &p, end, depth + 1,
			    (unsigned)mwant))
				return (0);
			p = jfast_space(p, end);
			if (p < end && *p == ',') {
				p = jfast_space(p + 1, end);
				continue;
			}
			if (p < end && *p == close) {
				p++;
				break;
			}
			return (0);
		}
		jkeep(j, want, J_OTHER, NULL, 0);
		break;
	case 't':
	case 'f':
	case 'n':
		for (i = 0; i < sizeof lit / sizeof lit[0]; i++) {
			if ((size_t)(end - p) >= lit[i].len &&
			    memcmp(p, lit[i].word, lit[i].len) == 0)
				break;
		}
		if (i == sizeof lit / sizeof lit[0])
			return (0);
		p += lit[i].len;
		/* "truex" is not a literal. */
		if (p < end && ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z'))
			return (0);
		jkeep(j, want, lit[i].kind, NULL, 0);
		break;
	default:
		if (!jfast_number(&p, end))
			return (0);
		jkeep(j, want, jnumber_kind(start, p - start), start,
		    p - start);
		break;
	}
	*pp = p;
	return (1);
}

/*
 * The record as one object, its members read into j.  1 when taken, 0 for
 * the slow way (j then holds nothing the slow way would not overwrite:
 * it starts from the same empty state).
 */
static int
jfast(struct jparse *j, const char *raw, size_t len)
{
	const unsigned char	*p = (const unsigned char *)raw;
	const unsigned char	*end = p + len;

	p = jfast_space(p, end);
	if (p == end || *p != '{' || !jfast_value(j, &p, end, 0, 0))
		return (0);
	return (jfast_space(p, end) == end);
}

/* -f jsonl: id, text and, with a time field, the time from a JSON object. */
int
record_parse_jsonl(struct record *r, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	struct jparse	 j;
	struct buf	 tv = { 0 }, fixed = { 0 };
	yajl_handle	 h;
	yajl_status	 st;
	long long	 id;
	char		 num[32];
	unsigned	 f;
	int		 atend = 0, rv = -1, lone;

	memset(&j, 0, sizeof j);
	j.name[F_TEXT] = text_field;
	j.name[F_ID] = id_field;
	j.name[F_TIME] = time_field;
	j.val[F_TEXT] = &r->text;
	j.val[F_ID] = &r->id;
	j.val[F_TIME] = &tv;
	for (f = 0; f < F_COUNT; f++)
		j.namelen[f] = j.name[f] != NULL ? strlen(j.name[f]) : 0;

	h = NULL;
	if (record_json_slow || !jfast(&j, r->raw.data, r->raw.len)) {
		/* The slow way, from the same empty state. */
		for (f = 0; f < F_COUNT; f++) {
			j.kind[f] = J_NONE;
			j.val[f]->len = 0;
		}
		if ((lone = json_checks(r->raw.data, r->raw.len, &fixed,
		    cause)) < 0) {
			r->text.len = r->id.len = 0;
			buf_free(&tv);
			return (-1);
		}
		if ((h = yajl_alloc(&jcallbacks, NULL, &j)) == NULL)
			fatalx("yajl_alloc: out of memory");
		st = yajl_parse(h, (const unsigned char *)(lone ? fixed.data :
		    r->raw.data), r->raw.len);
		buf_free(&fixed);
		if (st == yajl_status_ok && (st = yajl_complete_parse(h)) !=
		    yajl_status_ok)
			atend = 1;
		if (j.notobject) {
			xasprintf(cause, "not a JSON object");
			goto out;
		}
		if (st != yajl_status_ok) {
			jerror(h, r, atend, cause);
			goto out;
		}
	}

	if (j.kind[F_TEXT] == J_NONE) {
		xasprintf(cause, "no \"%s\" field", text_field);
		goto out;
	}
	if (j.kind[F_TEXT] != J_STRING) {
		xasprintf(cause, "field \"%s\" is not a string", text_field);
		goto out;
	}
	switch (j.kind[F_ID]) {
	case J_NONE:
	case J_NULL:
		r->id.len = 0;
		/* FALLTHROUGH */
	case J_STRING:
		break;
	case J_INTEGER:
		/*
		 * Written as jansson did: "-0" is "0".  One beyond 64 bits
		 * (an unsigned 64-bit hash) is its digits as written.
		 */
		if (jinteger(&r->id, &id) != 0)
			break;
		snprintf(num, sizeof num, "%lld", id);
		r->id.len = 0;
		buf_append(&r->id, num, strlen(num));
		break;
	default:
		xasprintf(cause, "field \"%s\" is not a string or an integer",
		    id_field);
		goto out;
	}
	if (time_field != NULL && record_time(r, j.kind[F_TIME], &tv,
	    time_field, cause) != 0)
		goto out;
	rv = 0;
out:
	if (rv != 0)	/* a bad record is known by its number, not half an id */
		r->text.len = r->id.len = 0;
	if (h != NULL)
		yajl_free(h);
	buf_free(&tv);
	return (rv);
}

/*
 * Fill r->text and r->id from r->raw.  Returns 0, or -1 with a cause when
 * the record is malformed for its format.
 */
int
record_parse(struct record *r, int format, const char *text_field,
    const char *id_field, char **cause)
{
	return (record_parse_timed(r, format, text_field, id_field, NULL,
	    cause));
}

/*
 * record_parse, and with a time_field (jsonl only) r->time from that
 * member, which must then be present and valid; otherwise r->time is 0.
 * The format's entry (format.c) parses: mail (mail.c) takes its id and
 * time from Message-ID and Date.
 */
int
record_parse_timed(struct record *r, int format, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	r->text.len = r->id.len = 0;
	r->time = 0;
	return (format_get(format)->parse(r, text_field, id_field, time_field,
	    cause));
}

/* -f line: the record is the text. */
int
record_parse_line(struct record *r, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	buf_append(&r->text, r->raw.data, r->raw.len);
	return (0);
}

/* -f tsv: the id, a TAB, the text. */
int
record_parse_tsv(struct record *r, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	const char	*tab;

	tab = memchr(r->raw.data, '\t', r->raw.len);
	if (tab == NULL) {
		xasprintf(cause, "no TAB between id and text");
		return (-1);
	}
	buf_append(&r->id, r->raw.data, tab - r->raw.data);
	buf_append(&r->text, tab + 1, r->raw.len - (tab + 1 - r->raw.data));
	return (0);
}

/* -f mail: a message (mail.c, through mailload.c), as --mail-strip says. */
int
record_parse_mail(struct record *r, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	return (mail_extract(r->raw.data, r->raw.len, mail_flags(), &r->text,
	    &r->id, &r->time, cause));
}

/* Do two buffers hold the same bytes? */
static int
buf_same(const struct buf *a, const struct buf *b)
{
	return (a->len == b->len && (a->len == 0 ||
	    memcmp(a->data, b->data, a->len) == 0));
}

/*
 * For the tests: parse a JSON record both ways, by the fast path and by
 * the slow one, with the fields "text" and "id" and time_field.  Returns
 * -1 if they differ in anything (verdict, cause, text, id, time), 1 if
 * the fast path took the record and both agree, 0 if it left it to the
 * slow one.
 */
int
record_json_agree(const char *raw, size_t len, const char *time_field)
{
	struct record	 fast, slow;
	char		*cf = NULL, *cs = NULL;
	int		 rf, rs, rv;

	memset(&fast, 0, sizeof fast);
	memset(&slow, 0, sizeof slow);
	buf_append(&fast.raw, raw, len);
	buf_append(&slow.raw, raw, len);
	rf = record_parse_timed(&fast, FORMAT_JSONL, "text", "id", time_field,
	    &cf);
	record_json_slow = 1;
	rs = record_parse_timed(&slow, FORMAT_JSONL, "text", "id", time_field,
	    &cs);
	record_json_slow = 0;
	rv = rf == 0;
	if (rf != rs || (rf != 0 && strcmp(cf, cs) != 0) ||
	    !buf_same(&fast.text, &slow.text) || !buf_same(&fast.id, &slow.id) ||
	    fast.time != slow.time)
		rv = -1;
	free(cf);
	free(cs);
	record_free(&fast);
	record_free(&slow);
	return (rv);
}

/* Empty a record for reuse, keeping its memory. */
void
record_reset(struct record *r)
{
	buf_trim(&r->raw);
	buf_trim(&r->text);
	buf_trim(&r->id);
	r->recno = r->line = 0;
	r->file = NULL;
	r->time = 0;
	r->scope = 0;
	r->pairs = 0;
	r->genid = 0;
	r->whole = 0;
}

/*
 * The id of a record from its first len bytes alone (an over-long record,
 * not kept whole), by its format's entry (format.c); appended to id.  0,
 * or -1 when there is none to be had (the caller numbers the record
 * instead).
 */
int
record_prefix_id(const char *p, size_t len, int format, const char *id_field,
    struct buf *id)
{
	const struct format	*fmt = format_get(format);

	if (fmt->prefix_id == NULL)
		return (-1);
	return (fmt->prefix_id(p, len, id_field, id));
}

/* record_prefix_id of TSV: what comes before the first tab. */
int
record_prefix_tsv(const char *p, size_t len, const char *id_field,
    struct buf *id)
{
	const char	*q;

	if ((q = memchr(p, '\t', len)) == NULL || q == p)
		return (-1);
	buf_append(id, p, q - p);
	return (0);
}

/*
 * record_prefix_id of JSON Lines: the string member id_field when it is
 * there, unescaped if it has no escapes.
 */
int
record_prefix_json(const char *p, size_t len, const char *id_field,
    struct buf *id)
{
	const char	*q, *end = p + len, *s;
	size_t		 n = strlen(id_field);

	/* "id_field" : "value", at the top level or not: a good guess. */
	for (q = p; (q = memmem(q, end - q, id_field, n)) != NULL; q += n) {
		if (q == p || q[-1] != '"' || q + n >= end || q[n] != '"')
			continue;
		for (s = q + n + 1; s < end && (*s == ' ' || *s == '\t'); s++)
			;
		if (s >= end || *s != ':')
			continue;
		for (s++; s < end && (*s == ' ' || *s == '\t'); s++)
			;
		if (s >= end || *s != '"')
			continue;
		for (q = ++s; q < end && *q != '"' && *q != '\\'; q++)
			;
		if (q >= end || *q != '"' || q == s)
			return (-1);
		buf_append(id, s, q - s);
		return (0);
	}
	return (-1);
}

/*
 * Is this line blank, no record but left out (the stream and the daemon
 * count it)?  Only for a format whose entry (format.c) names the white
 * space of its blank lines: JSON's for JSON Lines, spaces and a CR for
 * TSV (a tab makes an empty record).  Lines of other formats are records,
 * empty or not.
 */
int
record_blank(const char *p, size_t len, int format)
{
	const char	*ws = format_get(format)->blank;
	size_t		 i;

	if (ws == NULL)
		return (0);
	for (i = 0; i < len; i++) {
		if (p[i] == '\0' || strchr(ws, p[i]) == NULL)
			return (0);
	}
	return (1);
}

/* Free a record's memory. */
void
record_free(struct record *r)
{
	buf_free(&r->raw);
	buf_free(&r->text);
	buf_free(&r->id);
}

/* The record's external id: its own, or its record number. */
void
record_idstr(const struct record *r, struct buf *out)
{
	char	 num[32];

	out->len = 0;
	if (r->id.len != 0) {
		buf_append(out, r->id.data, r->id.len);
		return;
	}
	snprintf(num, sizeof num, "%" PRIu64, r->recno);
	buf_append(out, num, strlen(num));
}

/*
 * The id of a daemon client's record that has none of its own:
 * RUN:CONN:RECNO (the run's first document number, the connection, the
 * record's number on it), into out (emptied first).
 */
void
record_connid(struct buf *out, uint64_t run, uint64_t conn, uint64_t recno)
{
	char	 id[80];

	snprintf(id, sizeof id, "%" PRIu64 ":%" PRIu64 ":%" PRIu64, run, conn,
	    recno);
	out->len = 0;
	buf_append(out, id, strlen(id));
}
