/*
 * Unit tests for output.c: what each mode (-u unique, -D duplicates,
 * -a annotate, -p pairs) writes for each verdict, with newline and NUL
 * delimiters, the JSON field added to jsonl records, the escaping of ids
 * in tab-separated columns, the high-water flush and a write error.
 */

#include "config.h"

#include <fcntl.h>
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

/* A record, its verdict and the bytes expected for it. */
struct ocase {
	const char	*raw;
	const char	*id;		/* "": none (the record number) */
	uint64_t	 recno;
	int		 kind;		/* V_* */
	const char	*match;
	double		 sim;
};

/* The same five records for every mode. */
static const struct ocase cases[] = {
	{ "first text", "a", 1, V_UNIQUE, NULL, 0 },
	{ "first text again", "b", 2, V_DUPLICATE, "a", 0.875 },
	{ "", "", 3, V_EMPTY, NULL, 0 },
	{ "other", "", 4, V_UNIQUE, NULL, 0 },
	{ "first", "e", 5, V_DUPLICATE, "a\tb", 0.5 },
};
#define NCASES	(sizeof cases / sizeof cases[0])

/* A temporary file to write to, already unlinked. */
static int
output_tmp(void)
{
	const char	*tmp = getenv("TMPDIR");
	char		*path;
	int		 fd;

	xasprintf(&path, "%s/test_output.XXXXXX", tmp != NULL && *tmp != '\0' ?
	    tmp : "/tmp");
	assert_true((fd = mkstemp(path)) != -1);
	unlink(path);
	free(path);
	return (fd);
}

/* Everything written to fd so far, NUL-terminated (to free). */
static char *
output_read(int fd, size_t *lenp)
{
	char	*data;
	off_t	 end;

	assert_true((end = lseek(fd, 0, SEEK_END)) != -1);
	data = xmalloc(end + 1);
	assert_int_equal(pread(fd, data, end, 0), end);
	data[end] = '\0';
	*lenp = end;
	return (data);
}

/* Fill r and v from c. */
static void
case_set(const struct ocase *c, struct record *r, struct verdict *v)
{
	memset(r, 0, sizeof *r);
	memset(v, 0, sizeof *v);
	buf_append(&r->raw, c->raw, strlen(c->raw));
	buf_append(&r->id, c->id, strlen(c->id));
	r->recno = c->recno;
	v->kind = c->kind;
	if (c->match != NULL)
		buf_append(&v->match, c->match, strlen(c->match));
	v->sim = c->sim;
}

/* Free what case_set filled. */
static void
case_free(struct record *r, struct verdict *v)
{
	buf_free(&r->raw);
	buf_free(&r->id);
	buf_free(&v->match);
}

/* Write n cases in a mode; the output must be want (wantlen bytes). */
static void
expect_output(const struct ocase *cs, size_t n, int mode, int format,
    int delim, const char *want, size_t wantlen)
{
	struct output	*o;
	struct record	 r;
	struct verdict	 v;
	char		*cause = NULL, *got;
	size_t		 i, len;
	int		 fd;

	fd = output_tmp();
	o = output_open(fd, mode, format, FRAME_DELIM, delim);
	for (i = 0; i < n; i++) {
		case_set(&cs[i], &r, &v);
		assert_int_equal(output_record(o, &r, &v, &cause), 0);
		case_free(&r, &v);
	}
	/* Nothing is written before the flush (all under the high mark). */
	got = output_read(fd, &len);
	assert_int_equal(len, 0);
	free(got);
	assert_int_equal(output_flush(o, &cause), 0);
	got = output_read(fd, &len);
	if (len != wantlen || memcmp(got, want, len) != 0)
		fail_msg("mode %d: got \"%s\", want \"%s\"", mode, got, want);
	free(got);
	output_close(o);
	close(fd);
}

/* Unique and duplicates: the records as read, each with the delimiter. */
static void
test_pass(void **state)
{
	static const char	 unique[] = "first text\n\nother\n";
	static const char	 dups[] = "first text again\nfirst\n";
	static const char	 nul[] = "first text again\0first\0";

	expect_output(cases, NCASES, OUT_UNIQUE, FORMAT_TSV, '\n',
	    unique, sizeof unique - 1);
	expect_output(cases, NCASES, OUT_DUPLICATES, FORMAT_TSV, '\n',
	    dups, sizeof dups - 1);
	expect_output(cases, NCASES, OUT_DUPLICATES, FORMAT_LINE, '\0',
	    nul, sizeof nul - 1);
	/* No record kept: no byte written. */
	expect_output(cases + 1, 1, OUT_UNIQUE, FORMAT_TSV, '\n', "", 0);
}

/* Annotate (line and tsv): verdict, match, similarity, then the record. */
static void
test_annotate(void **state)
{
	static const char	 want[] =
	    "unique\t-\t-\tfirst text\n"
	    "duplicate\ta\t0.8750\tfirst text again\n"
	    "empty\t-\t-\t\n"
	    "unique\t-\t-\tother\n"
	    "duplicate\ta\\tb\t0.5000\tfirst\n";

	expect_output(cases, NCASES, OUT_ANNOTATE, FORMAT_TSV, '\n',
	    want, sizeof want - 1);
	expect_output(cases, NCASES, OUT_ANNOTATE, FORMAT_LINE, '\n',
	    want, sizeof want - 1);
}

/*
 * Annotate jsonl: one more member before the last brace (whatever
 * follows it is kept); a match that is not UTF-8 is mended; a malformed
 * record, or one without a brace, passes unchanged.
 */
static void
test_json(void **state)
{
	static const struct ocase json[] = {
		{ "{\"id\":\"a\",\"text\":\"x\"}", "a", 1, V_UNIQUE, NULL, 0 },
		{ "{\"text\":\"x\"} \r", "", 2, V_DUPLICATE, "q\"\\", 1 },
		{ "{\"text\":\"x\"}", "", 3, V_DUPLICATE, "a\xff" "b", 0.9 },
		{ "{\"text\":\"\"}", "", 4, V_EMPTY, NULL, 0 },
		{ "{\"text\":", "", 5, V_BAD, NULL, 0 },
		{ "{\"text\":1}", "", 6, V_BAD, NULL, 0 },
		{ "no brace", "", 7, V_UNIQUE, NULL, 0 },
	};
	static const char	 want[] =
	    "{\"id\":\"a\",\"text\":\"x\",\"mhfilter\":{\"verdict\":\"unique\"}}\n"
	    "{\"text\":\"x\",\"mhfilter\":{\"verdict\":\"duplicate\","
	    "\"match\":\"q\\\"\\\\\",\"similarity\":1.0000}} \r\n"
	    "{\"text\":\"x\",\"mhfilter\":{\"verdict\":\"duplicate\","
	    "\"match\":\"a\xef\xbf\xbd" "b\",\"similarity\":0.9000}}\n"
	    "{\"text\":\"\",\"mhfilter\":{\"verdict\":\"empty\"}}\n"
	    "{\"text\":\n"
	    "{\"text\":1}\n"
	    "no brace\n";

	expect_output(json, sizeof json / sizeof json[0], OUT_ANNOTATE,
	    FORMAT_JSONL, '\n', want, sizeof want - 1);
}

/*
 * Pairs: one line per verified match, earlier id first, the record's id
 * or else its number; no line for a record without matches.
 */
static void
test_pairs(void **state)
{
	static const char	 want[] =
	    "x\\ny\t7\t0.7500\n"
	    "z\t7\t1.0000\n"
	    "x\\ny\tid\\\\2\t0.6000\n";
	struct output	*o;
	struct record	 r = { 0 };
	struct verdict	 v = { 0 };
	struct pair	 pairs[2];
	char		*cause = NULL, *got;
	size_t		 len;
	int		 fd;

	memset(pairs, 0, sizeof pairs);
	buf_append(&pairs[0].id, "x\ny", 3);
	pairs[0].sim = 0.75;
	buf_append(&pairs[1].id, "z", 1);
	pairs[1].sim = 1;
	fd = output_tmp();
	o = output_open(fd, OUT_PAIRS, FORMAT_JSONL, FRAME_DELIM, '\0');

	r.recno = 6;
	v.kind = V_UNIQUE;
	assert_int_equal(output_record(o, &r, &v, &cause), 0);
	r.recno = 7;
	v.kind = V_DUPLICATE;
	v.pairs = pairs;
	v.npairs = 2;
	assert_int_equal(output_record(o, &r, &v, &cause), 0);
	buf_append(&r.id, "id\\2", 4);
	pairs[0].sim = 0.6;
	v.npairs = 1;
	assert_int_equal(output_record(o, &r, &v, &cause), 0);
	assert_int_equal(output_flush(o, &cause), 0);

	got = output_read(fd, &len);
	assert_int_equal(len, sizeof want - 1);
	assert_memory_equal(got, want, len);
	free(got);
	output_close(o);
	close(fd);
	buf_free(&r.id);
	buf_free(&pairs[0].id);
	buf_free(&pairs[1].id);
}

/* output_field: the five escapes, at either end and side by side. */
static void
test_field(void **state)
{
	static const struct {
		const char	*in;
		size_t		 len;
		const char	*want;
	} fcases[] = {
		{ "", 0, "" },
		{ "plain id", 8, "plain id" },
		{ "a\tb", 3, "a\\tb" },
		{ "\n", 1, "\\n" },
		{ "\r\n", 2, "\\r\\n" },
		{ "\\", 1, "\\\\" },
		{ "\\t", 2, "\\\\t" },
		{ "x\0y", 3, "x\\0y" },
		{ "\t\t", 2, "\\t\\t" },
		{ "\xc3\xa9\x01", 3, "\xc3\xa9\x01" },
	};
	struct buf	 b = { 0 };
	size_t		 i;

	for (i = 0; i < sizeof fcases / sizeof fcases[0]; i++) {
		b.len = 0;
		buf_append(&b, "<", 1);
		output_field(&b, fcases[i].in, fcases[i].len);
		assert_int_equal(b.len, 1 + strlen(fcases[i].want));
		assert_memory_equal(b.data + 1, fcases[i].want, b.len - 1);
	}
	buf_free(&b);
}

/*
 * Past the high-water mark output_record writes by itself; a write that
 * fails (/dev/full) is an error with a cause, from either call.
 */
static void
test_flush(void **state)
{
	struct output	*o;
	struct record	 r;
	struct verdict	 v;
	struct ocase	 c = { NULL, "", 1, V_UNIQUE, NULL, 0 };
	char		*cause = NULL, *got, *big;
	size_t		 len, i;
	int		 fd, rv;

	big = xmalloc(4097);
	memset(big, 'w', 4096);
	big[4096] = '\0';
	c.raw = big;
	fd = output_tmp();
	o = output_open(fd, OUT_UNIQUE, FORMAT_LINE, FRAME_DELIM, '\n');
	case_set(&c, &r, &v);
	for (i = 0; i < 1000; i++)
		assert_int_equal(output_record(o, &r, &v, &cause), 0);
	got = output_read(fd, &len);
	assert_true(len > 0);
	assert_int_equal(len % 4097, 0);
	free(got);
	assert_int_equal(output_flush(o, &cause), 0);
	got = output_read(fd, &len);
	assert_int_equal(len, 1000 * 4097);
	free(got);
	output_close(o);
	close(fd);

	if ((fd = open("/dev/full", O_WRONLY)) == -1) {
		case_free(&r, &v);
		free(big);
		skip();
	}
	o = output_open(fd, OUT_UNIQUE, FORMAT_LINE, FRAME_DELIM, '\n');
	for (i = 0, rv = 0; i < 1000 && rv == 0; i++)
		rv = output_record(o, &r, &v, &cause);
	assert_int_equal(rv, -1);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "write error"));
	free(cause);
	cause = NULL;
	assert_int_equal(output_flush(o, &cause), -1);
	assert_non_null(cause);
	free(cause);
	output_close(o);
	close(fd);
	case_free(&r, &v);
	free(big);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pass),
		cmocka_unit_test(test_annotate),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_pairs),
		cmocka_unit_test(test_field),
		cmocka_unit_test(test_flush),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
