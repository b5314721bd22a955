/*
 * Unit tests for record.c: (id, text) from a raw record in the line, tsv
 * and jsonl formats, the errors for malformed records, record_idstr, and
 * the document time of --time-field.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "mhfilter.h"

/* A table of records: what goes in and what should come out. */
static const struct rcase {
	const char	*name;
	int		 format;
	const char	*raw;
	size_t		 rawlen;	/* 0: strlen(raw) */
	const char	*text_field;
	const char	*id_field;
	int		 rv;
	const char	*text;		/* or a substring of the cause */
	size_t		 textlen;	/* 0: strlen(text) */
	const char	*id;
} rcases[] = {
	/* line */
	{ "line", FORMAT_LINE, "  raw\ttext {\"x\":1} ", 0, NULL, NULL, 0,
	    "  raw\ttext {\"x\":1} ", 0, "" },
	{ "line with NUL", FORMAT_LINE, "a\0b", 3, NULL, NULL, 0, "a\0b", 3,
	    "" },
	{ "empty line", FORMAT_LINE, "", 0, NULL, NULL, 0, "", 0, "" },

	/* tsv */
	{ "tsv", FORMAT_TSV, "a\tb\tc", 0, NULL, NULL, 0, "b\tc", 0, "a" },
	{ "tsv empty id", FORMAT_TSV, "\tx", 0, NULL, NULL, 0, "x", 0, "" },
	{ "tsv empty text", FORMAT_TSV, "id7\t", 0, NULL, NULL, 0, "", 0,
	    "id7" },
	{ "tsv spaces kept", FORMAT_TSV, " a \t b ", 0, NULL, NULL, 0, " b ",
	    0, " a " },
	{ "tsv no tab", FORMAT_TSV, "a b c", 0, NULL, NULL, -1, "TAB", 0,
	    NULL },

	/* jsonl: ids */
	{ "json string id", FORMAT_JSONL, "{\"id\":\"a1\",\"text\":\"hello\"}",
	    0, "text", "id", 0, "hello", 0, "a1" },
	{ "json integer id", FORMAT_JSONL, "{\"text\":\"x\",\"id\":7}", 0,
	    "text", "id", 0, "x", 0, "7" },
	{ "json negative id", FORMAT_JSONL, "{\"text\":\"x\",\"id\":-12}", 0,
	    "text", "id", 0, "x", 0, "-12" },
	{ "json zero id", FORMAT_JSONL, "{\"text\":\"x\",\"id\":0}", 0,
	    "text", "id", 0, "x", 0, "0" },
	{ "json big id", FORMAT_JSONL,
	    "{\"text\":\"x\",\"id\":9007199254740993}", 0, "text", "id", 0,
	    "x", 0, "9007199254740993" },
	{ "json no id", FORMAT_JSONL, "{\"text\":\"x\"}", 0, "text", "id", 0,
	    "x", 0, "" },
	{ "json null id", FORMAT_JSONL, "{\"text\":\"x\",\"id\":null}", 0,
	    "text", "id", 0, "x", 0, "" },

	/* jsonl: text */
	{ "json escapes", FORMAT_JSONL,
	    "{\"text\":\"a\\nb\\t\\\"q\\\" \\u00e9 \\ud83d\\ude00 \\\\\"}", 0,
	    "text", "id", 0, "a\nb\t\"q\" \xc3\xa9 \xf0\x9f\x98\x80 \\", 0,
	    "" },
	{ "json NUL in text", FORMAT_JSONL, "{\"text\":\"a\\u0000b\"}", 0,
	    "text", "id", 0, "a\0b", 3, "" },
	{ "json white space", FORMAT_JSONL,
	    "  { \"text\" : \"x\" , \"id\" : \"i\" }  ", 0, "text", "id", 0,
	    "x", 0, "i" },
	{ "json other fields", FORMAT_JSONL,
	    "{\"meta\":{\"a\":[1,2]},\"text\":\"x\",\"n\":1.5}", 0, "text",
	    "id", 0, "x", 0, "" },

	/* jsonl: custom field names */
	{ "json custom fields", FORMAT_JSONL,
	    "{\"text\":\"no\",\"id\":\"no\",\"body\":\"yes\",\"key\":\"k\"}", 0,
	    "body", "key", 0, "yes", 0, "k" },
	{ "json custom missing", FORMAT_JSONL, "{\"text\":\"x\"}", 0, "body",
	    "key", -1, "no \"body\" field", 0, NULL },

	/* jsonl: errors */
	{ "json truncated", FORMAT_JSONL, "{\"text\":", 0, "text", "id", -1,
	    "invalid JSON", 0, NULL },
	{ "json trailing", FORMAT_JSONL, "{\"text\":\"x\"} y", 0, "text", "id",
	    -1, "invalid JSON", 0, NULL },
	{ "json empty", FORMAT_JSONL, "", 0, "text", "id", -1,
	    "invalid JSON", 0, NULL },
	{ "json bad utf8", FORMAT_JSONL, "{\"text\":\"\xff\"}", 0, "text", "id",
	    -1, "invalid JSON", 0, NULL },
	{ "json array", FORMAT_JSONL, "[\"text\",\"x\"]", 0, "text", "id", -1,
	    "not a JSON object", 0, NULL },
	{ "json string", FORMAT_JSONL, "\"text\"", 0, "text", "id", -1,
	    "JSON", 0, NULL },
	{ "json no text", FORMAT_JSONL, "{\"id\":\"a\"}", 0, "text", "id", -1,
	    "no \"text\" field", 0, NULL },
	{ "json text number", FORMAT_JSONL, "{\"text\":5}", 0, "text", "id", -1,
	    "\"text\" is not a string", 0, NULL },
	{ "json text null", FORMAT_JSONL, "{\"text\":null}", 0, "text", "id",
	    -1, "\"text\" is not a string", 0, NULL },
	{ "json text array", FORMAT_JSONL, "{\"text\":[\"x\"]}", 0, "text",
	    "id", -1, "\"text\" is not a string", 0, NULL },
	{ "json id float", FORMAT_JSONL, "{\"text\":\"x\",\"id\":1.5}", 0,
	    "text", "id", -1, "\"id\" is not a string or an integer", 0, NULL },
	{ "json id object", FORMAT_JSONL, "{\"text\":\"x\",\"id\":{}}", 0,
	    "text", "id", -1, "\"id\" is not a string or an integer", 0, NULL },
	{ "json id bool", FORMAT_JSONL, "{\"text\":\"x\",\"id\":true}", 0,
	    "text", "id", -1, "\"id\" is not a string or an integer", 0, NULL },
	{ "json custom id float", FORMAT_JSONL, "{\"text\":\"x\",\"key\":2.5}",
	    0, "text", "key", -1, "\"key\" is not a string or an integer", 0,
	    NULL },
	/* jsonl: yajl's events, read as jansson read trees */
	{ "json repeated member", FORMAT_JSONL,
	    "{\"text\":\"a\",\"id\":1,\"text\":\"b\",\"id\":\"c\"}", 0,
	    "text", "id", 0, "b", 0, "c" },
	{ "json repeated, bad first", FORMAT_JSONL,
	    "{\"text\":[1],\"text\":\"b\",\"id\":{},\"id\":null}", 0,
	    "text", "id", 0, "b", 0, "" },
	{ "json repeated, bad last", FORMAT_JSONL,
	    "{\"text\":\"b\",\"text\":true}", 0, "text", "id", -1,
	    "\"text\" is not a string", 0, NULL },
	{ "json nested names", FORMAT_JSONL,
	    "{\"m\":{\"text\":\"no\",\"id\":\"no\"},\"l\":[{\"text\":1}],"
	    "\"text\":\"yes\"}", 0, "text", "id", 0, "yes", 0, "" },
	{ "json nested only", FORMAT_JSONL, "{\"m\":{\"text\":\"no\"}}", 0,
	    "text", "id", -1, "no \"text\" field", 0, NULL },
	{ "json huge number elsewhere", FORMAT_JSONL,
	    "{\"n\":123456789012345678901234567890,\"r\":1e999,"
	    "\"text\":\"x\"}", 0, "text", "id", 0, "x", 0, "" },
	{ "json id beyond 64 bits signed", FORMAT_JSONL,
	    "{\"text\":\"x\",\"id\":9223372036854775808}", 0, "text", "id",
	    0, "x", 0, "9223372036854775808" },
	{ "json id beyond 64 bits", FORMAT_JSONL,
	    "{\"text\":\"x\",\"id\":-123456789012345678901234567890}", 0,
	    "text", "id", 0, "x", 0, "-123456789012345678901234567890" },
	{ "json id extremes", FORMAT_JSONL,
	    "{\"text\":\"x\",\"id\":-9223372036854775808}", 0, "text", "id",
	    0, "x", 0, "-9223372036854775808" },
	{ "json id minus zero", FORMAT_JSONL, "{\"text\":\"x\",\"id\":-0}", 0,
	    "text", "id", 0, "x", 0, "0" },
	{ "json same field", FORMAT_JSONL, "{\"t\":\"x\"}", 0, "t", "t", 0,
	    "x", 0, "x" },
	{ "json key with escape", FORMAT_JSONL, "{\"te\\u0078t\":\"x\"}", 0,
	    "text", "id", 0, "x", 0, "" },
	{ "json number", FORMAT_JSONL, "42", 0, "text", "id", -1,
	    "not a JSON object", 0, NULL },
	{ "json bad after text", FORMAT_JSONL, "{\"text\":\"x\",}", 0,
	    "text", "id", -1, "invalid JSON at column", 0, NULL },
	{ "json two objects", FORMAT_JSONL, "{\"text\":\"x\"}{\"text\":\"y\"}",
	    0, "text", "id", -1, "invalid JSON", 0, NULL },
	{ "json comment", FORMAT_JSONL, "{\"text\":\"x\"} // c", 0, "text",
	    "id", -1, "invalid JSON", 0, NULL },
	{ "json truncated column", FORMAT_JSONL, "{\"text\":\"abc", 0,
	    "text", "id", -1, "invalid JSON at column 13: ", 0, NULL },

	/* jsonl: what jansson rejected and yajl alone would let through */
	{ "json overlong", FORMAT_JSONL, "{\"text\":\"a\xc0\x80\"}", 0, "text",
	    "id", -1, "column 11: invalid UTF-8", 0, NULL },
	{ "json raw surrogate", FORMAT_JSONL, "{\"text\":\"\xed\xa0\x80\"}", 0,
	    "text", "id", -1, "invalid UTF-8", 0, NULL },
	{ "json beyond U+10FFFF", FORMAT_JSONL,
	    "{\"text\":\"\xf4\x90\x80\x80\"}", 0, "text", "id", -1,
	    "invalid UTF-8", 0, NULL },
	{ "json cut sequence", FORMAT_JSONL, "{\"text\":\"\xe2\x82\"}", 0,
	    "text", "id", -1, "invalid UTF-8", 0, NULL },
	{ "json raw astral", FORMAT_JSONL,
	    "{\"text\":\"\xf0\x9f\x98\x80 \xc3\xa9\",\"id\":\"\xe2\x82\xac\"}",
	    0, "text", "id", 0, "\xf0\x9f\x98\x80 \xc3\xa9", 0, "\xe2\x82\xac" },
	/* Half a surrogate pair (an emoji cut in two): U+FFFD, as Go reads. */
	{ "json lone high escape", FORMAT_JSONL, "{\"text\":\"a\\ud800\"}", 0,
	    "text", "id", 0, "a\xef\xbf\xbd", 0, "" },
	{ "json lone low escape", FORMAT_JSONL, "{\"text\":\"\\uDC00 \"}", 0,
	    "text", "id", 0, "\xef\xbf\xbd ", 0, "" },
	{ "json high, then not low", FORMAT_JSONL,
	    "{\"text\":\"\\ud800\\u0041\"}", 0, "text", "id", 0,
	    "\xef\xbf\xbd" "A", 0, "" },
	{ "json two highs", FORMAT_JSONL,
	    "{\"text\":\"\\ud800\\ud800\\udc00\"}", 0, "text", "id", 0,
	    "\xef\xbf\xbd\xf0\x90\x80\x80", 0, "" },
	{ "json high at the end", FORMAT_JSONL,
	    "{\"text\":\"x\",\"id\":\"\\uD83D\"}", 0, "text", "id", 0, "x",
	    0, "\xef\xbf\xbd" },
	{ "json lone escape, then bad JSON", FORMAT_JSONL,
	    "{\"text\":\"\\ud800\",}", 0, "text", "id", -1,
	    "invalid JSON at column 19", 0, NULL },
	{ "json escaped backslash", FORMAT_JSONL,
	    "{\"text\":\"\\\\ud800 \\\\\\ud83d\\ude00\"}", 0, "text", "id", 0,
	    "\\ud800 \\\xf0\x9f\x98\x80", 0, "" },
};

/* Each case of the table. */
static void
test_table(void **state)
{
	const struct rcase	*c;
	struct record		 r;
	char			*cause;
	size_t			 i, rawlen, textlen;
	int			 rv;

	memset(&r, 0, sizeof r);
	for (i = 0; i < sizeof rcases / sizeof rcases[0]; i++) {
		c = &rcases[i];
		record_reset(&r);
		rawlen = c->rawlen ? c->rawlen : strlen(c->raw);
		buf_append(&r.raw, c->raw, rawlen);
		cause = NULL;
		rv = record_parse(&r, c->format, c->text_field, c->id_field,
		    &cause);
		if (rv != c->rv)
			fail_msg("case \"%s\": returned %d, want %d (%s)",
			    c->name, rv, c->rv, cause ? cause : "no cause");
		if (rv != 0) {
			if (cause == NULL || strstr(cause, c->text) == NULL)
				fail_msg("case \"%s\": cause \"%s\" lacks "
				    "\"%s\"", c->name, cause ? cause : "",
				    c->text);
			free(cause);
			/* A bad record keeps nothing: it is known by number. */
			if (r.id.len != 0 || r.text.len != 0)
				fail_msg("case \"%s\": bad, yet id \"%.*s\", "
				    "text \"%.*s\"", c->name, (int)r.id.len,
				    r.id.data, (int)r.text.len, r.text.data);
			continue;
		}
		assert_null(cause);
		textlen = c->textlen ? c->textlen : strlen(c->text);
		if (r.text.len != textlen ||
		    memcmp(r.text.data, c->text, textlen) != 0)
			fail_msg("case \"%s\": text \"%.*s\", want \"%s\"",
			    c->name, (int)r.text.len, r.text.data, c->text);
		if (r.id.len != strlen(c->id) ||
		    (r.id.len != 0 && memcmp(r.id.data, c->id, r.id.len) != 0))
			fail_msg("case \"%s\": id \"%.*s\", want \"%s\"",
			    c->name, (int)r.id.len, r.id.data, c->id);
		/* The raw bytes are left as read. */
		assert_int_equal(r.raw.len, rawlen);
		assert_memory_equal(r.raw.data, c->raw, rawlen);
	}
	record_free(&r);
}

/* Parsing again replaces the text and the id; it does not append. */
static void
test_reparse(void **state)
{
	struct record	 r;
	char		*cause = NULL;
	const char	*json = "{\"id\":\"first\",\"text\":\"one\"}";

	memset(&r, 0, sizeof r);
	buf_append(&r.raw, json, strlen(json));
	assert_int_equal(record_parse(&r, FORMAT_JSONL, "text", "id", &cause),
	    0);
	r.raw.len = 0;
	buf_append(&r.raw, "2\ttwo", 5);
	assert_int_equal(record_parse(&r, FORMAT_TSV, NULL, NULL, &cause), 0);
	assert_string_equal(r.text.data, "two");
	assert_string_equal(r.id.data, "2");
	r.raw.len = 0;
	buf_append(&r.raw, "three", 5);
	assert_int_equal(record_parse(&r, FORMAT_LINE, NULL, NULL, &cause), 0);
	assert_string_equal(r.text.data, "three");
	assert_int_equal(r.id.len, 0);
	assert_null(cause);
	record_free(&r);
	assert_null(r.raw.data);
	assert_null(r.text.data);
	assert_null(r.id.data);
}

/* record_reset empties a record and keeps its memory. */
static void
test_reset(void **state)
{
	struct record	 r;
	char		*cause = NULL;

	memset(&r, 0, sizeof r);
	buf_append(&r.raw, "a\tb", 3);
	r.recno = 5;
	r.line = 6;
	r.file = "f";
	assert_int_equal(record_parse(&r, FORMAT_TSV, NULL, NULL, &cause), 0);
	record_reset(&r);
	assert_int_equal(r.raw.len, 0);
	assert_int_equal(r.text.len, 0);
	assert_int_equal(r.id.len, 0);
	assert_int_equal(r.recno, 0);
	assert_int_equal(r.line, 0);
	assert_null(r.file);
	assert_non_null(r.raw.data);
	assert_non_null(r.text.data);
	record_free(&r);
}

/* The external id: the record's own, or its record number. */
static void
test_idstr(void **state)
{
	static const struct {
		const char	*id;
		uint64_t	 recno;
		const char	*want;
	} cases[] = {
		{ "", 42, "42" },
		{ "", 1, "1" },
		{ "", UINT64_MAX, "18446744073709551615" },
		{ "abc", 42, "abc" },
		{ "0", 42, "0" },
	};
	struct record	 r;
	struct buf	 out = { 0 };
	char		*cause = NULL;
	size_t		 i;

	memset(&r, 0, sizeof r);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		record_reset(&r);
		buf_append(&r.id, cases[i].id, strlen(cases[i].id));
		r.recno = cases[i].recno;
		buf_append(&out, "junk", 4);	/* emptied first */
		record_idstr(&r, &out);
		assert_int_equal(out.len, strlen(cases[i].want));
		assert_memory_equal(out.data, cases[i].want, out.len);
	}

	/* A JSON id that is an empty string falls back to the number. */
	record_reset(&r);
	buf_append(&r.raw, "{\"text\":\"t\",\"id\":\"\"}", 20);
	r.recno = 9;
	assert_int_equal(record_parse(&r, FORMAT_JSONL, "text", "id", &cause),
	    0);
	record_idstr(&r, &out);
	assert_string_equal(out.data, "9");
	buf_free(&out);
	record_free(&r);
}

/*
 * --time-field: the document time of a JSON record, and the causes of the
 * bad ones.  Without a time field the time is 0 ("none").
 */
static void
test_time(void **state)
{
	static const struct {
		const char	*raw;
		const char	*field;
		int		 rv;
		int64_t		 t;
		const char	*cause;
	} cases[] = {
		{ "{\"text\":\"x\",\"ts\":\"2026-11-21T10:00:00Z\"}", "ts", 0,
		    1795255200, NULL },
		{ "{\"text\":\"x\",\"ts\":\"2026-11-21T11:00:00.25+01:00\"}",
		    "ts", 0, 1795255200, NULL },
		{ "{\"text\":\"x\",\"ts\":1795255200}", "ts", 0, 1795255200,
		    NULL },
		{ "{\"text\":\"x\",\"ts\":1795255200.75}", "ts", 0, 1795255200,
		    NULL },
		{ "{\"text\":\"x\",\"ts\":\"1795255200\"}", "ts", 0,
		    1795255200, NULL },
		{ "{\"text\":\"x\",\"ts\":\"1\"}", "ts", 0, 1, NULL },
		{ "{\"text\":\"x\",\"ts\":\"1\"}", NULL, 0, 0, NULL },
		{ "{\"text\":\"x\",\"when\":5,\"ts\":\"bad\"}", "when", 0, 5,
		    NULL },

		{ "{\"text\":\"x\"}", "ts", -1, 0, "no \"ts\" field" },
		{ "{\"text\":\"x\",\"ts\":null}", "ts", -1, 0,
		    "\"ts\" is not a time" },
		{ "{\"text\":\"x\",\"ts\":true}", "ts", -1, 0,
		    "\"ts\" is not a time" },
		{ "{\"text\":\"x\",\"ts\":[1]}", "ts", -1, 0,
		    "\"ts\" is not a time" },
		{ "{\"text\":\"x\",\"ts\":\"yesterday\"}", "ts", -1, 0,
		    "field \"ts\": 'yesterday' is not a time" },
		{ "{\"text\":\"x\",\"ts\":\"2026-02-30T00:00:00Z\"}", "ts", -1,
		    0, "not a valid date" },
		{ "{\"text\":\"x\",\"ts\":\"1\\u00002\"}", "ts", -1, 0,
		    "NUL" },
		{ "{\"text\":\"x\",\"ts\":0}", "ts", -1, 0, "out of range" },
		{ "{\"text\":\"x\",\"ts\":-5}", "ts", -1, 0, "out of range" },
		{ "{\"text\":\"x\",\"ts\":0.5}", "ts", -1, 0, "out of range" },
		{ "{\"text\":\"x\",\"ts\":1e300}", "ts", -1, 0,
		    "out of range" },
		{ "{\"text\":\"x\",\"ts\":253402300800}", "ts", -1, 0,
		    "out of range" },
	};
	struct record	 r;
	char		*cause;
	size_t		 i;
	int		 rv;

	memset(&r, 0, sizeof r);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		record_reset(&r);
		r.time = 99;	/* replaced, or cleared without a field */
		buf_append(&r.raw, cases[i].raw, strlen(cases[i].raw));
		cause = NULL;
		rv = record_parse_timed(&r, FORMAT_JSONL, "text", "id",
		    cases[i].field, &cause);
		if (rv != cases[i].rv)
			fail_msg("%s: returned %d, want %d (%s)", cases[i].raw,
			    rv, cases[i].rv, cause ? cause : "no cause");
		if (rv != 0) {
			if (cause == NULL ||
			    strstr(cause, cases[i].cause) == NULL)
				fail_msg("%s: cause \"%s\" lacks \"%s\"",
				    cases[i].raw, cause ? cause : "",
				    cases[i].cause);
			free(cause);
			continue;
		}
		assert_null(cause);
		if (r.time != cases[i].t)
			fail_msg("%s: time %lld, want %lld", cases[i].raw,
			    (long long)r.time, (long long)cases[i].t);
	}

	/* The other formats have no time, and record_parse none either. */
	record_reset(&r);
	r.time = 99;
	buf_append(&r.raw, "a\tb", 3);
	assert_int_equal(record_parse_timed(&r, FORMAT_TSV, NULL, NULL, "ts",
	    &cause), 0);
	assert_int_equal(r.time, 0);
	record_reset(&r);
	buf_append(&r.raw, "{\"text\":\"x\",\"ts\":7}", 19);
	r.time = 99;
	assert_int_equal(record_parse(&r, FORMAT_JSONL, "text", "id", &cause),
	    0);
	assert_int_equal(r.time, 0);
	r.time = 99;
	record_reset(&r);
	assert_int_equal(r.time, 0);
	record_free(&r);
}

/*
 * The fast JSON path and the slow one (json_checks and yajl) agree on a
 * record: the same verdict and, for a good record, the same text, id and
 * time; for a bad one, the same cause.  Returns 1 when the fast path took
 * it, 0 when it left it to the slow one.
 */
static int
json_agree(const char *raw, size_t len, const char *time_field)
{
	int	 rv;

	if ((rv = record_json_agree(raw, len, time_field)) < 0)
		fail_msg("the two JSON paths differ on %.*s", (int)len, raw);
	return (rv);
}

/* A small deterministic generator (xorshift64*). */
static uint64_t	jrng = 88172645463325252ULL;

static unsigned
jrand(unsigned n)
{
	jrng ^= jrng >> 12;
	jrng ^= jrng << 25;
	jrng ^= jrng >> 27;
	return ((unsigned)((jrng * 2685821657736338717ULL) >> 33) % n);
}

/*
 * Pieces of JSON for the generator below: in each list the good ones
 * (valid JSON, though the fast path may leave some to the slow) first,
 * then the bad.
 */
static const char *const jstrings[] = {
	"\"\"", "\"plain words\"", "\"caf\xc3\xa9\"", "\"\\u00e9t\\u00E9\"",
	"\"\\ud83d\\ude00\"", "\"\\u001f\"",
	"\"a\\nb\\tc\\\"d\\\\e\\/f\\b\\f\\r\"", "\"\x7f\"",
	"\"\xe2\x82\xac\xf0\x9f\x98\x80\"", "\"\\uD83D\\uDE00\"",
	"\"\\u0000\"", "\"\\u0041\\u07ff\\u0800\\uffff\"",
#define JSTRINGS_GOOD	12
	"\"\\ud83d\"", "\"\\ude00x\"", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"",
	"\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
	"\"tab\there\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"",
	"\"\\ud83d\\u0041\"", "\"unterminated",
};
static const char *const jothers[] = {
	"0", "-0", "7", "-12", "3.25", "1e3", "1E+3", "2.5e-2",
	"9223372036854775807", "9223372036854775808", "-9223372036854775809",
	"1700000000", "true", "false", "null", "{}", "[]",
	"[1,2,{\"a\":[\"b\"]}]", "{\"x\":{}}", "[[[[[[]]]]]]",
	"{\"text\":\"inner\"}", "\"2024-01-02T03:04:05Z\"", "\"not a time\"",
	"\"1700000000\"", "-1.5e400", "[ 1 , \"a\" , [ ] ]",
#define JOTHERS_GOOD	26
	"01", "-", "1.", ".5", "1e", "truex", "nul", "[1,]", "{\"a\":}",
	"tru", "1.5.2", "--1",
};
static const char *const jkeys[] = {
	"\"text\"", "\"id\"", "\"ts\"", "\"other\"", "\"te\\u0078t\"",
	"\"\"", "\"id \"",
#define JKEYS_GOOD	7
};
static const char *const jspaces[] = {
	"", "", "", " ", "\n", "\t", "\r", "  ",
#define JSPACES_GOOD	8
	"\v", "\f",
};

/* Append a random piece of a list (of its first good ones) to b. */
#define JPICK(b, list, good) do {					\
	size_t g_ = (good);						\
	size_t n_ = g_ != 0 ? g_ : sizeof (list) / sizeof (list)[0];	\
	const char *p_ = (list)[jrand(n_)];				\
	buf_append((b), p_, strlen(p_));				\
} while (0)

/*
 * A long string: runs of plain bytes of every length (so that what ends
 * them falls anywhere in a 32- or 8-byte block) between escapes and UTF-8
 * characters; when bad, now and then a raw control character or a byte
 * that is not UTF-8.
 */
static void
json_long(struct buf *b, int bad)
{
	static const char *const good[] = {
		"\\n", "\\\"", "\\\\", "\\u00e9", "\\t", "\xc3\xa9",
		"\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x7f", "\\/",
	};
	static const char *const worse[] = {
		"\x01", "\x1f", "\t", "\xc0\xaf", "\x80", "\xed\xa0\x80",
		"\xff", "\\q",
	};
	unsigned	 i, k, n = 1 + jrand(12);
	char		 c;

	buf_append(b, "\"", 1);
	for (i = 0; i < n; i++) {
		for (k = jrand(i % 3 == 0 ? 100 : 40); k > 0; k--) {
			c = "abcdefghij KLMNO,.:;{}[]0123456789-'"[jrand(36)];
			buf_append(b, &c, 1);
		}
		if (bad && jrand(8) == 0)
			JPICK(b, worse, 0);
		else
			JPICK(b, good, 0);
	}
	for (k = jrand(70); k > 0; k--)
		buf_append(b, "x", 1);
	buf_append(b, "\"", 1);
}

/*
 * A random record: an object of a few members, made of good pieces only
 * when valid is set, otherwise of any (sometimes not an object at all).
 */
static void
json_random(struct buf *b, int valid)
{
	unsigned	 i, n;
	int		 bad = !valid;

	b->len = 0;
	JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
	if (bad && jrand(20) == 0) {
		JPICK(b, jothers, 0);
		return;
	}
	buf_append(b, "{", 1);
	if (valid) {
		/* A text, so that most of them are good records. */
		buf_append(b, "\"text\":", 7);
		if (jrand(3) == 0)
			json_long(b, 0);
		else
			JPICK(b, jstrings, JSTRINGS_GOOD);
	}
	n = jrand(5);
	for (i = 0; i < n; i++) {
		if ((i > 0 || valid) && (!bad || jrand(30) != 0))
			buf_append(b, ",", 1);
		JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
		JPICK(b, jkeys, valid ? JKEYS_GOOD : 0);
		JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
		if (!bad || jrand(30) != 0)
			buf_append(b, ":", 1);
		JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
		if (jrand(6) == 0)
			json_long(b, bad);
		else if (jrand(2) == 0)
			JPICK(b, jstrings, valid ? JSTRINGS_GOOD : 0);
		else
			JPICK(b, jothers, valid ? JOTHERS_GOOD : 0);
		JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
	}
	if (!bad || jrand(30) != 0)
		buf_append(b, "}", 1);
	JPICK(b, jspaces, valid ? JSPACES_GOOD : 0);
	if (bad && jrand(30) == 0)
		JPICK(b, jothers, 0);	/* something after the object */
}

static void
test_json_paths(void **state)
{
	const struct rcase	*c;
	struct buf		 b = { 0 };
	size_t			 i, k, taken = 0, total = 0;
	char			 save;

	/* The table above, both ways. */
	for (i = 0; i < sizeof rcases / sizeof rcases[0]; i++) {
		c = &rcases[i];
		if (c->format != FORMAT_JSONL ||
		    strcmp(c->text_field, "text") != 0 ||
		    strcmp(c->id_field, "id") != 0)
			continue;
		json_agree(c->raw, c->rawlen ? c->rawlen : strlen(c->raw),
		    NULL);
	}
	/*
	 * Random records, and each with one byte changed; the second half
	 * with the fast path's loops kept to the portable code.
	 */
	for (i = 0; i < 200000; i++) {
		if (i == 100000)
			simd_allow(SIMD_NONE);
		json_random(&b, i % 2);
		taken += json_agree(b.data, b.len, i % 3 == 0 ? "ts" : NULL);
		total++;
		if (b.len == 0)
			continue;
		k = jrand(b.len);
		save = b.data[k];
		b.data[k] = "\"\\{}[],: \x80\xc3u0a\n"[jrand(16)];
		taken += json_agree(b.data, b.len, NULL);
		total++;
		b.data[k] = save;
	}
	simd_allow(SIMD_ALL);
	/* The fast path must take many, or this tests nothing. */
	if (taken < total / 10)
		fail_msg("the fast path took %zu of %zu records", taken,
		    total);
	buf_free(&b);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
/* An over-long record's id from its first bytes (record_prefix_id). */
static void
test_prefix_id(void **state)
{
	static const struct {
		const char	*p;
		int		 format;
		const char	*want;	/* NULL: none */
	} cases[] = {
		{ "big\tsome text", FORMAT_TSV, "big" },
		{ "\tno id", FORMAT_TSV, NULL },
		{ "no tab yet", FORMAT_TSV, NULL },
		{ "{\"id\":\"a1\",\"text\":\"xx", FORMAT_JSONL, "a1" },
		{ "{\"text\":\"xx\", \"id\" : \"a2\"}", FORMAT_JSONL, "a2" },
		{ "{\"text\":\"the id is \\\"id\\\"", FORMAT_JSONL, NULL },
		{ "{\"uid\":\"x\",\"text\":\"t", FORMAT_JSONL, NULL },
		{ "{\"id\":\"cut", FORMAT_JSONL, NULL },
		{ "{\"id\":\"a\\\"b\"", FORMAT_JSONL, NULL },
		{ "{\"id\":12,\"text\":\"t", FORMAT_JSONL, NULL },
		{ "line text", FORMAT_LINE, NULL },
	};
	struct buf	 id = { 0 };
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		id.len = 0;
		rc = record_prefix_id(cases[i].p, strlen(cases[i].p),
		    cases[i].format, "id", &id);
		if (cases[i].want == NULL) {
			if (rc != -1)
				fail_msg("case %zu: an id '%.*s'", i,
				    (int)id.len, id.data);
			continue;
		}
		if (rc != 0 || id.len != strlen(cases[i].want) ||
		    memcmp(id.data, cases[i].want, id.len) != 0)
			fail_msg("case %zu: '%.*s', not '%s'", i, (int)id.len,
			    id.data != NULL ? id.data : "", cases[i].want);
	}
	buf_free(&id);
}

/* The format table: every entry whole, found by its names (format.c). */
static void
test_formats(void **state)
{
	const struct format	*f;
	int			 i;

	for (i = 0; i < FORMAT_COUNT; i++) {
		f = format_get(i);
		assert_non_null(f->name);
		assert_non_null(f->parse);
		assert_non_null(f->write);
		assert_int_equal(format_find(f->name), i);
		if (f->alias != NULL)
			assert_int_equal(format_find(f->alias), i);
		assert_non_null(strstr(format_list(), f->name));
	}
	assert_int_equal(format_find("json"), FORMAT_JSONL);
	assert_int_equal(format_find("news"), FORMAT_MAIL);
	assert_int_equal(format_find("warc"), FORMAT_WARC);
	assert_int_equal(format_find("xml"), -1);
	assert_string_equal(format_list(), "line, tsv, jsonl, mail or warc");
	assert_int_equal(format_get(FORMAT_MAIL)->framing, FRAME_MBOX);
	assert_int_equal(format_get(FORMAT_WARC)->framing, FRAME_WARC);
}

/* A WARC record's header (warc_header): complete, partial, malformed. */
static void
test_warc_header(void **state)
{
	static const struct {
		const char	*p;
		int		 rc;	/* warc_header's */
		size_t		 hlen;
		uint64_t	 clen;
		const char	*why;	/* in the cause, when -1 */
	} cases[] = {
		{ "WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 12\r\n"
		    "\r\n", 1, 53, 12, NULL },
		{ "WARC/1.1\r\ncontent-length:7\r\n\r\n", 1, 30, 7, NULL },
		{ "WARC/1.0\r\nContent-Length:  0 \r\n\r\n", 1, 33, 0,
		    NULL },
		{ "WARC/1.", 0, 0, 0, NULL },
		{ "WARC/1.0\r\nContent-Length: 12\r\n", 0, 0, 0, NULL },
		{ "WARC/0.17\r\n", -1, 0, 0, "bad version line 'WARC/0.17'" },
		{ "HTTP/1.1 200 OK\r\n", -1, 0, 0, "bad version line" },
		{ "WARC/1.0\nContent-Length: 1\n\n", -1, 0, 0,
		    "bad version line" },
		{ "WARC/1.0\r\nWARC-Type: request\r\n\r\n", -1, 0, 0,
		    "no Content-Length" },
		{ "WARC/1.0\r\nContent-Length: 1x\r\n\r\n", -1, 0, 0,
		    "bad Content-Length '1x'" },
		{ "WARC/1.0\r\nContent-Length: -1\r\n\r\n", -1, 0, 0,
		    "bad Content-Length '-1'" },
		{ "WARC/1.0\r\nContent-Length: \r\n\r\n", -1, 0, 0,
		    "bad Content-Length ''" },
		{ "WARC/1.0\r\nContent-Length: 99999999999999999999\r\n\r\n",
		    -1, 0, 0, "bad Content-Length" },
	};
	struct warc_hdr	 h;
	char		*why;
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		why = NULL;
		rc = warc_header(cases[i].p, strlen(cases[i].p), &h, &why);
		if (rc != cases[i].rc)
			fail_msg("case %zu: %d, not %d (%s)", i, rc,
			    cases[i].rc, why != NULL ? why : "");
		if (rc == 1 && (h.hlen != cases[i].hlen ||
		    h.clen != cases[i].clen || h.total != h.hlen + h.clen + 4))
			fail_msg("case %zu: %zu %" PRIu64 ", not %zu %" PRIu64,
			    i, h.hlen, h.clen, cases[i].hlen, cases[i].clen);
		if (rc == -1 && (why == NULL || strstr(why, cases[i].why) ==
		    NULL))
			fail_msg("case %zu: '%s', not '%s'", i, why,
			    cases[i].why);
		free(why);
	}
	/* No end of the header in its first WARC_HEADER_MAX bytes. */
	{
		struct buf	 b = { 0 };

		buf_append(&b, "WARC/1.0\r\n", 10);
		while (b.len < WARC_HEADER_MAX + 100)
			buf_append(&b, "X-Pad: 0123456789\r\n", 19);
		why = NULL;
		assert_int_equal(warc_header(b.data, b.len, &h, &why), -1);
		assert_non_null(strstr(why, "no end of its header"));
		free(why);
		buf_free(&b);
	}
}

/*
 * A WARC record that is no document (warc_parse): no text, its id and
 * time from the header, also as a gzip member.
 */
static void
test_warc_parse(void **state)
{
	static const char rec[] = "WARC/1.0\r\nWARC-Type: request\r\n"
	    "WARC-Target-URI: <http://example.org/a>\r\n"
	    "WARC-Date: 2024-05-01T12:00:00Z\r\n"
	    "WARC-Record-ID: <urn:uuid:1>\r\n"
	    "Content-Type: application/http; msgtype=request\r\n"
	    "Content-Length: 4\r\n\r\nGET \r\n\r\n";
	static const char noid[] = "WARC/1.1\r\nWARC-Type: warcinfo\r\n"
	    "WARC-Record-ID: <urn:uuid:2>\r\n"
	    "Content-Length: 0\r\n\r\n\r\n\r\n";
	struct record	 r = { 0 };
	char		*cause = NULL;
	unsigned char	 gz[1024];
	uLongf		 gzlen;
	z_stream	 z;

	buf_append(&r.raw, rec, sizeof rec - 1);
	assert_int_equal(record_parse(&r, FORMAT_WARC, NULL, NULL, &cause),
	    0);
	assert_int_equal(r.text.len, 0);
	assert_int_equal(r.id.len, strlen("http://example.org/a"));
	assert_memory_equal(r.id.data, "http://example.org/a", r.id.len);
	assert_true(r.time == 1714564800);

	/* The same as one gzip member. */
	memset(&z, 0, sizeof z);
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (unsigned char *)rec;
	z.avail_in = sizeof rec - 1;
	z.next_out = gz;
	z.avail_out = sizeof gz;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	gzlen = sizeof gz - z.avail_out;
	deflateEnd(&z);
	record_reset(&r);
	buf_append(&r.raw, gz, gzlen);
	assert_int_equal(record_parse(&r, FORMAT_WARC, NULL, NULL, &cause),
	    0);
	assert_int_equal(r.id.len, strlen("http://example.org/a"));
	assert_true(r.time == 1714564800);

	/* Without a target, the record's id; cut short, not a record. */
	record_reset(&r);
	buf_append(&r.raw, noid, sizeof noid - 1);
	assert_int_equal(record_parse(&r, FORMAT_WARC, NULL, NULL, &cause),
	    0);
	assert_int_equal(r.id.len, strlen("<urn:uuid:2>"));
	record_reset(&r);
	buf_append(&r.raw, noid, sizeof noid - 3);
	assert_int_equal(record_parse(&r, FORMAT_WARC, NULL, NULL, &cause),
	    -1);
	assert_non_null(strstr(cause, "not a WARC record"));
	free(cause);
	record_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_reparse),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_prefix_id),
		cmocka_unit_test(test_idstr),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_json_paths),
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_warc_header),
		cmocka_unit_test(test_warc_parse),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
