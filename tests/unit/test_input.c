/*
 * Unit tests for input.c: records cut at the delimiter (newline or NUL),
 * the last record of a file without one, records over the limit (shorter
 * and longer than the read buffer), mbox framing with CRLF line ends,
 * several files, a missing file, stdin, input_wait/input_wait_or on a pipe
 * and on a regular file, and gzip streamed from a pipe.
 */

#include "config.h"

#include <errno.h>
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
#include <zlib.h>

#include "mhfilter.h"

/* A record as input_next must return it. */
struct want {
	const char	*data;		/* NULL: too long */
	size_t		 len;		/* of data, or the full length */
	int		 delimited;
	const char	*file;		/* NULL: do not check */
	uint64_t	 line;
};

/* Write len bytes to a new temporary file; return its name (to free). */
static char *
input_file(const char *data, size_t len)
{
	const char	*tmp = getenv("TMPDIR");
	char		*path;
	int		 fd;

	xasprintf(&path, "%s/test_input.XXXXXX", tmp != NULL && *tmp != '\0' ?
	    tmp : "/tmp");
	assert_true((fd = mkstemp(path)) != -1);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
	return (path);
}

/* Remove and free n files made by input_file (missing ones too). */
static void
files_remove(char **paths, int n)
{
	int	 i;

	for (i = 0; i < n; i++) {
		unlink(paths[i]);
		free(paths[i]);
	}
}

/*
 * A message over the limit comes in pieces, the first in rr: put together,
 * they must be want's data, with the first one's line and the last one's
 * delimiter.
 */
static void
expect_pieces(struct input *in, struct rawrec *rr, const struct want *want)
{
	struct buf	 whole = { 0 };
	char		*cause = NULL;

	assert_int_equal(rr->piece, 1);
	assert_false(rr->toolong);
	assert_non_null(want->data);
	buf_append(&whole, rr->data, rr->len);
	while (rr->more) {
		assert_int_equal(input_next(in, rr, &cause), 1);
		assert_int_equal(rr->piece, 2);
		assert_int_equal(rr->line, want->line);
		buf_append(&whole, rr->data, rr->len);
	}
	assert_int_equal(rr->delimited, want->delimited);
	assert_int_equal(whole.len, want->len);
	assert_memory_equal(whole.data, want->data, want->len);
	buf_free(&whole);
}

/* Read in to its end; every record must be the next of want[n]. */
static void
expect_records(struct input *in, const struct want *want, size_t n)
{
	struct rawrec	 rr;
	char		*cause = NULL;
	size_t		 i;

	for (i = 0; i < n; i++) {
		if (input_next(in, &rr, &cause) != 1)
			fail_msg("record %zu: none (%s)", i, cause ? cause : "");
		assert_int_equal(rr.line, want[i].line);
		if (want[i].file != NULL)
			assert_string_equal(rr.file, want[i].file);
		if (rr.piece != 0) {
			expect_pieces(in, &rr, &want[i]);
			continue;
		}
		assert_int_equal(rr.delimited, want[i].delimited);
		if (want[i].data == NULL) {
			assert_true(rr.toolong);
			assert_int_equal(rr.fulllen, want[i].len);
			assert_int_equal(rr.len, 0);
			continue;
		}
		assert_false(rr.toolong);
		assert_int_equal(rr.len, want[i].len);
		assert_memory_equal(rr.data, want[i].data, want[i].len);
	}
	assert_int_equal(input_next(in, &rr, &cause), 0);
	/* And it stays at the end. */
	assert_int_equal(input_next(in, &rr, &cause), 0);
}

/* Records of data, a file of its own, read with framing, delim and max. */
static void
expect_framed(const char *data, size_t len, int framing, int delim,
    size_t max, const struct want *want, size_t n)
{
	struct input	*in;
	char		*path;

	path = input_file(data, len);
	in = input_open(&path, 1, framing, delim, max);
	expect_records(in, want, n);
	input_close(in);
	unlink(path);
	free(path);
}

/* Records of data, a file of its own, read with delim and max. */
static void
expect_file(const char *data, size_t len, int delim, size_t max,
    const struct want *want, size_t n)
{
	expect_framed(data, len, FRAME_DELIM, delim, max, want, n);
}

/* Newlines: empty records count, and the last one may lack its newline. */
static void
test_lines(void **state)
{
	static const char	 data[] = "a\nbb\n\nccc\td\n\n last";
	static const struct want want[] = {
		{ "a", 1, 1, NULL, 1 },
		{ "bb", 2, 1, NULL, 2 },
		{ "", 0, 1, NULL, 3 },
		{ "ccc\td", 5, 1, NULL, 4 },
		{ "", 0, 1, NULL, 5 },
		{ " last", 5, 0, NULL, 6 },
	};
	static const struct want one[] = { { "", 0, 1, NULL, 1 } };

	expect_file(data, sizeof data - 1, '\n', 1000, want, 6);
	/* With the newline, the same records, the last one delimited. */
	expect_file("a\nbb\n", 5, '\n', 1000, want, 2);
	/* A file of one newline is one empty record; an empty file none. */
	expect_file("\n", 1, '\n', 1000, one, 1);
	expect_file("", 0, '\n', 1000, NULL, 0);
}

/* NUL: newlines are data; a NUL-free file is one undelimited record. */
static void
test_nul(void **state)
{
	static const char	 data[] = "x\ny\0\0z\r\n";
	static const struct want want[] = {
		{ "x\ny", 3, 1, NULL, 1 },
		{ "", 0, 1, NULL, 2 },
		{ "z\r\n", 3, 0, NULL, 3 },
	};
	static const struct want lines[] = {
		{ "x", 1, 1, NULL, 1 },
		{ "y\0\0z\r", 5, 1, NULL, 2 },
	};

	expect_file(data, sizeof data - 1, '\0', 1000, want, 3);
	/* With newlines, NULs are data. */
	expect_file(data, sizeof data - 1, '\n', 1000, lines, 2);
}

/*
 * The limit: a record of max bytes is kept, one more is reported with its
 * whole length and no data, and the records around it are intact, also
 * when the long one is the last and has no delimiter.
 */
static void
test_toolong(void **state)
{
	static const char	 data[] = "abcd\nabcde\nxy\nabcdefghijkl";
	static const struct want want[] = {
		{ "abcd", 4, 1, NULL, 1 },
		{ NULL, 5, 1, NULL, 2 },
		{ "xy", 2, 1, NULL, 3 },
		{ NULL, 12, 0, NULL, 4 },
	};

	expect_file(data, sizeof data - 1, '\n', 4, want, 4);
}

/*
 * Records longer than the read buffer: one over the limit is discarded as
 * it arrives (its length still counted), one under it is returned whole.
 */
static void
test_huge(void **state)
{
	const size_t	 big = 3 * 1024 * 1024 + 17, half = 700 * 1024;
	struct want	 want[5];
	char		*data;
	size_t		 len;

	len = 2 + big + 1 + half + 1 + 2 + big;
	data = xmalloc(len);
	memcpy(data, "a\n", 2);
	memset(data + 2, 'x', big);
	data[2 + big] = '\n';
	memset(data + 3 + big, 'y', half);
	data[3 + big + half] = '\n';
	memcpy(data + 4 + big + half, "b\n", 2);
	memset(data + 6 + big + half, 'z', big);

	want[0] = (struct want){ "a", 1, 1, NULL, 1 };
	want[1] = (struct want){ NULL, big, 1, NULL, 2 };
	want[2] = (struct want){ data + 3 + big, half, 1, NULL, 3 };
	want[3] = (struct want){ "b", 1, 1, NULL, 4 };
	want[4] = (struct want){ NULL, big, 0, NULL, 5 };
	expect_file(data, len, '\n', 1024 * 1024, want, 5);
	free(data);
}

/*
 * An mbox written on Windows: messages are cut before a "From " line after
 * a CRLF blank line (which belongs to neither), not before one inside a
 * paragraph or a quoted one; the last one loses the blank line before the
 * end of the file.  Bytes are kept as read.
 */
/* A From_ line has a sender and a date; a body line "From ..." has not. */
static void
test_from_line(void **state)
{
	static const char *const yes[] = {
		"From alice@example.org Tue Jul  1 10:00:00 2025",
		"From alice@example.org Tue Jul  1 10:00:00 2025\r",
		"From alice@example.org  Tue Jul 1 10:00 2025",
		"From alice@example.org Tue Jul  1 10:00:00 +0000 2025",
		"From alice@example.org Tue Jul  1 10:00:00 2025 +0000",
		"From alice@example.org Tue Jul  1 10:00:00 CEST 2025",
		"From \"Alice Smith\"@example.org Tue Jul  1 10:00:00 2025",
		"From alice at example.org  Tue Jul  1 10:00:00 2025",
		"From MAILER-DAEMON Fri Nov 27 09:00:00 2026",
		"From  Tue Jul  1 10:00:00 2025",
		"From tue Tue Jul  1 10:00:00 2025",
		"From uucp Tue Jul  1 10:00:00 2025 remote from host",
	};
	static const char *const no[] = {
		"From now on, we meet on Tuesdays.",
		"From the kitchen staff.",
		"From Tue Jul to Wed Aug",
		"From alice@example.org Tue Jul  1 10:00:00 and then 2025",
		"From alice@example.org",
		"From alice@example.org Tue Jul  1 2025",
		"From alice@example.org Tue Jul  1 10:00:00",
		"From alice@example.org Tue Jul  1 1000 2025",
		"From alice@example.org Tue Jul 123 10:00:00 2025",
		"From alice@example.org Tue July  1 10:00:00 2025",
		"From \"Alice Tue Jul  1 10:00:00 2025",
		"From: alice@example.org",
		"From",
		">From alice@example.org Tue Jul  1 10:00:00 2025",
	};
	size_t	 i;

	for (i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (!input_from_line(yes[i], strlen(yes[i])))
			fail_msg("not a From_ line: %s", yes[i]);
	}
	for (i = 0; i < sizeof no / sizeof no[0]; i++) {
		if (input_from_line(no[i], strlen(no[i])))
			fail_msg("taken for a From_ line: %s", no[i]);
	}
}

/* An unquoted "From " line after a blank line is body text, not a cut. */
static void
test_mbox_unquoted(void **state)
{
	static const char	 m1[] = "From a Tue Jul  1 10:00:00 2025\n"
	    "Subject: one\n\nbody\n\nFrom now on, we meet on Tuesdays.\n"
	    "\nFrom the kitchen staff.\n\nFrom here\n";
	static const char	 m2[] = "From b Tue Jul  1 10:00:00 2025\n"
	    "Subject: two\n\nlast\n";
	static const struct want want[] = {
		{ m1, sizeof m1 - 1, 1, NULL, 1 },
		{ m2, sizeof m2 - 1, 0, NULL, 12 },
	};
	struct buf		 b = { 0 };
	size_t			 max;

	buf_append(&b, m1, sizeof m1 - 1);
	buf_append(&b, "\n", 1);
	buf_append(&b, m2, sizeof m2 - 1);
	/* Whole, and in pieces around the "From " lines. */
	for (max = 8; max <= 1000; max += max < 100 ? 1 : 900)
		expect_framed(b.data, b.len, FRAME_MBOX, '\0', max, want,
		    2);
	buf_free(&b);
}

static void
test_mbox_crlf(void **state)
{
	static const char	 m1[] = "From a Tue Jul  1 10:00:00 2025\r\n"
	    "Subject: one\r\n\r\nbody\r\nFrom inside\r\n";
	static const char	 m2[] = "From b Tue Jul  1 10:00:00 2025\r\n"
	    "Subject: two\r\n\r\n>From the start.\r\n";
	static const char	 m3[] = "From c Tue Jul  1 10:00:00 2025\r\n"
	    "Subject: three\r\n\r\nlast\r\n";
	static const struct want want[] = {
		{ m1, sizeof m1 - 1, 1, NULL, 1 },
		{ m2, sizeof m2 - 1, 1, NULL, 7 },
		{ m3, sizeof m3 - 1, 0, NULL, 12 },
	};
	struct buf		 b = { 0 };

	buf_append(&b, m1, sizeof m1 - 1);
	buf_append(&b, "\r\n", 2);
	buf_append(&b, m2, sizeof m2 - 1);
	buf_append(&b, "\r\n", 2);
	buf_append(&b, m3, sizeof m3 - 1);
	expect_framed(b.data, b.len, FRAME_MBOX, '\0', 1000, want, 3);
	/* The blank line before the end of the file is no part of m3. */
	buf_append(&b, "\r\n", 2);
	expect_framed(b.data, b.len, FRAME_MBOX, '\0', 1000, want, 3);
	buf_free(&b);
}

/*
 * A CRLF separator across two reads (input.c reads 256 KiB first), at
 * every offset: the first message kept whole under the limit, reported
 * with its length over it, and the next one intact either way.
 */
static void
test_mbox_crlf_reads(void **state)
{
	static const char	 m2[] = "From b Tue Jul  1 10:00:00 2025\r\n"
	    "Subject: two\r\n\r\nshort\r\n";
	const size_t		 chunk = 256 * 1024;
	struct want		 want[2];
	struct buf		 b = { 0 };
	size_t			 len1, i, shift, lines;

	for (shift = 0; shift <= 10; shift++) {
		/* Message 1 ends its last line at chunk - shift. */
		len1 = chunk - shift;
		b.len = 0;
		buf_append(&b, "From a Tue Jul  1 10:00:00 2025\r\n", 33);
		for (lines = 1; b.len < len1; lines++) {
			/* Lines of 72 bytes, the last of 72 to 143. */
			i = len1 - b.len < 144 ? len1 - b.len : 72;
			while (i-- > 2)
				buf_append(&b, "x", 1);
			buf_append(&b, "\r\n", 2);
		}
		assert_int_equal(b.len, len1);
		buf_append(&b, "\r\n", 2);
		buf_append(&b, m2, sizeof m2 - 1);
		want[0] = (struct want){ b.data, len1, 1, NULL, 1 };
		want[1] = (struct want){ m2, sizeof m2 - 1, 0, NULL,
		    lines + 2 };
		expect_framed(b.data, b.len, FRAME_MBOX, '\0', 1024 * 1024,
		    want, 2);
		/* Over the limit: in pieces, none lost, the separator whole. */
		expect_framed(b.data, b.len, FRAME_MBOX, '\0', 1000, want,
		    2);
		expect_framed(b.data, b.len, FRAME_MBOX, '\0', 40, want, 2);
	}
	buf_free(&b);
}

/* Many short records across the buffer's refills, in order. */
static void
test_many(void **state)
{
	struct input	*in;
	struct rawrec	 rr;
	struct buf	 b = { 0 };
	char		*path, *cause = NULL, num[32];
	int		 i, n;

	for (i = 1; i <= 200000; i++) {
		n = snprintf(num, sizeof num, "%d\n", i);
		buf_append(&b, num, n);
	}
	path = input_file(b.data, b.len);
	in = input_open(&path, 1, FRAME_DELIM, '\n', 16);
	for (i = 1; i <= 200000; i++) {
		assert_int_equal(input_next(in, &rr, &cause), 1);
		n = snprintf(num, sizeof num, "%d", i);
		assert_int_equal(rr.len, n);
		assert_memory_equal(rr.data, num, n);
		assert_int_equal(rr.line, i);
	}
	assert_int_equal(input_next(in, &rr, &cause), 0);
	input_close(in);
	unlink(path);
	free(path);
	buf_free(&b);
}

/*
 * Several files: a record never spans two, line numbers start again in
 * each, and each record names its file.
 */
static void
test_files(void **state)
{
	struct input	*in;
	char		*paths[3];
	struct want	 want[4];

	paths[0] = input_file("a\nb", 3);
	paths[1] = input_file("", 0);
	paths[2] = input_file("c\nd\n", 4);
	want[0] = (struct want){ "a", 1, 1, paths[0], 1 };
	want[1] = (struct want){ "b", 1, 0, paths[0], 2 };
	want[2] = (struct want){ "c", 1, 1, paths[2], 1 };
	want[3] = (struct want){ "d", 1, 1, paths[2], 2 };
	in = input_open(paths, 3, FRAME_DELIM, '\n', 100);
	expect_records(in, want, 4);
	input_close(in);
	files_remove(paths, 3);
}

/*
 * A file that cannot be opened: the records before it come first, then
 * -1 with a cause naming the file, then the next file's records.
 */
static void
test_missing(void **state)
{
	struct input	*in;
	struct rawrec	 rr;
	char		*paths[3], *cause = NULL;

	paths[0] = input_file("a\n", 2);
	xasprintf(&paths[1], "%s.missing", paths[0]);
	paths[2] = input_file("b\n", 2);
	in = input_open(paths, 3, FRAME_DELIM, '\n', 100);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_memory_equal(rr.data, "a", 1);
	assert_int_equal(input_next(in, &rr, &cause), -1);
	assert_non_null(cause);
	assert_non_null(strstr(cause, paths[1]));
	assert_non_null(strstr(cause, strerror(ENOENT)));
	free(cause);
	cause = NULL;
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_memory_equal(rr.data, "b", 1);
	assert_string_equal(rr.file, paths[2]);
	assert_int_equal(input_next(in, &rr, &cause), 0);
	input_close(in);
	files_remove(paths, 3);
}

/*
 * Standard input, from a pipe: no files (or "-") read it and name it
 * "stdin"; input_wait says whether a record is ready, and waits for one.
 */
static void
test_stdin(void **state)
{
	struct input	*in;
	struct rawrec	 rr;
	char		*cause = NULL, *dash[] = { "-" }, *path;
	int		 p[2], q[2], saved;

	saved = dup(STDIN_FILENO);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	close(p[0]);
	in = input_open(NULL, 0, FRAME_DELIM, '\n', 100);

	assert_int_equal(write(p[1], "one\ntw", 6), 6);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_string_equal(rr.file, "stdin");
	assert_int_equal(rr.len, 3);
	assert_memory_equal(rr.data, "one", 3);
	/* Half a record buffered, nothing in the pipe: not ready. */
	assert_false(input_wait(in, 10));
	/* Waiting for it or another descriptor: the other one is ready. */
	assert_int_equal(pipe(q), 0);
	assert_int_equal(write(q[1], "x", 1), 1);
	assert_int_equal(input_wait_or(in, q[0]), 0);
	assert_int_equal(write(p[1], "o\n", 2), 2);
	assert_true(input_wait(in, 10));
	assert_int_equal(input_wait_or(in, q[0]), 1);
	close(q[0]);
	close(q[1]);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_int_equal(rr.len, 3);
	assert_memory_equal(rr.data, "two", 3);
	/* The end of the pipe is an answer too. */
	close(p[1]);
	assert_true(input_wait(in, 10));
	assert_int_equal(input_next(in, &rr, &cause), 0);
	input_close(in);

	/* "-" names stdin as well; a regular file there is regular. */
	path = input_file("x", 1);
	assert_true((p[0] = open(path, O_RDONLY)) != -1);
	unlink(path);
	free(path);
	assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	close(p[0]);
	in = input_open(dash, 1, FRAME_DELIM, '\n', 100);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_string_equal(rr.file, "stdin");
	assert_int_equal(rr.delimited, 0);
	assert_true(input_wait(in, 0));
	assert_int_equal(input_next(in, &rr, &cause), 0);
	input_close(in);

	assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
	close(saved);
}

/* Compress len bytes of data with gzip into out, flushed: a part. */
static size_t
gzip_part(z_stream *z, const char *data, size_t len, int flush,
    unsigned char *out, size_t size)
{
	z->next_in = (unsigned char *)data;
	z->avail_in = len;
	z->next_out = out;
	z->avail_out = size;
	assert_true(deflate(z, flush) != Z_STREAM_ERROR);
	assert_int_equal(z->avail_in, 0);
	return (size - z->avail_out);
}

/*
 * Gzip from a pipe, streamed: a producer that sends a flushed part and
 * pauses gets the records in it answered without more input; the rest,
 * in another member, follows; the end of the data is the end of input.
 */
static void
test_gzip_stream(void **state)
{
	struct input	*in;
	struct rawrec	 rr;
	z_stream	 z;
	unsigned char	 out[256];
	char		*cause = NULL;
	size_t		 n;
	int		 p[2], saved;

	saved = dup(STDIN_FILENO);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	close(p[0]);
	in = input_open(NULL, 0, FRAME_DELIM, '\n', 100);

	memset(&z, 0, sizeof z);
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY), Z_OK);
	n = gzip_part(&z, "one\ntw", 6, Z_SYNC_FLUSH, out, sizeof out);
	assert_int_equal(write(p[1], out, n), (ssize_t)n);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_int_equal(rr.len, 3);
	assert_memory_equal(rr.data, "one", 3);
	/* Half a record decoded, nothing more sent: not ready. */
	assert_false(input_wait(in, 10));
	n = gzip_part(&z, "o\n", 2, Z_FINISH, out, sizeof out);
	assert_int_equal(write(p[1], out, n), (ssize_t)n);
	deflateEnd(&z);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_memory_equal(rr.data, "two", 3);
	/* A second member. */
	memset(&z, 0, sizeof z);
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY), Z_OK);
	n = gzip_part(&z, "three\n", 6, Z_FINISH, out, sizeof out);
	deflateEnd(&z);
	assert_int_equal(write(p[1], out, n), (ssize_t)n);
	close(p[1]);
	assert_int_equal(input_next(in, &rr, &cause), 1);
	assert_int_equal(rr.len, 5);
	assert_memory_equal(rr.data, "three", 5);
	assert_int_equal(input_next(in, &rr, &cause), 0);
	input_close(in);

	assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
	close(saved);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_nul),
		cmocka_unit_test(test_toolong),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_mbox_crlf),
		cmocka_unit_test(test_mbox_crlf_reads),
		cmocka_unit_test(test_from_line),
		cmocka_unit_test(test_mbox_unquoted),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_stdin),
		cmocka_unit_test(test_gzip_stream),
	};

	alarm(60);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
