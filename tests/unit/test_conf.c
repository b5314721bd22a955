/*
 * Unit tests for conf.c (the configuration file's lines) and for
 * parse_seconds (the durations of --batch-delay and --idle-timeout):
 * a table of inputs and what must come out, including the errors.
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

/* Write text to a new temporary file; return its name (to free). */
static char *
conf_file(const char *text)
{
	const char	*tmp = getenv("TMPDIR");
	char		*path;
	FILE		*f;
	int		 fd;

	xasprintf(&path, "%s/test_conf.XXXXXX", tmp != NULL && *tmp != '\0' ?
	    tmp : "/tmp");
	assert_true((fd = mkstemp(path)) != -1);
	assert_non_null(f = fdopen(fd, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	return (path);
}

/* Keys, values, bare keys, comments, blanks, quotes and line numbers. */
static void
test_entries(void **state)
{
	struct conf_entry	*e;
	size_t			 n;
	char			*path, *cause = NULL;

	path = conf_file(
	    "# a comment\n"
	    "\n"
	    "   db = /var/lib/mhfilter/index  \n"
	    "threshold=0.5\n"
	    "\tquiet\n"
	    "  # indented comment\n"
	    "text-field = \"  spaced  \"\n"
	    "listen = unix:/run/a # not a comment\n"
	    "empty =\n"
	    "last = no newline");
	assert_int_equal(conf_load(path, &e, &n, &cause), 0);
	assert_int_equal(n, 7);
	assert_string_equal(e[0].key, "db");
	assert_string_equal(e[0].value, "/var/lib/mhfilter/index");
	assert_int_equal(e[0].line, 3);
	assert_string_equal(e[1].key, "threshold");
	assert_string_equal(e[1].value, "0.5");
	assert_string_equal(e[2].key, "quiet");
	assert_null(e[2].value);
	assert_int_equal(e[2].line, 5);
	assert_string_equal(e[3].value, "  spaced  ");
	assert_string_equal(e[4].value, "unix:/run/a # not a comment");
	assert_string_equal(e[5].key, "empty");
	assert_string_equal(e[5].value, "");
	assert_string_equal(e[6].value, "no newline");
	assert_int_equal(e[6].line, 10);
	conf_free(e, n);
	unlink(path);
	free(path);
}

/* Each malformed file is refused with the file and line in the cause. */
static void
test_errors(void **state)
{
	static const struct {
		const char	*text;
		const char	*cause;
	} cases[] = {
		{ "db = x\n= y\n", ":2: no key before '='" },
		{ "db = x\nbad key = 1\n", ":2: bad key 'bad key'" },
		{ "under_score = 1\n", ":1: bad key" },
		{ "x = \"open\n", ":1: unterminated quote" },
	};
	struct conf_entry	*e;
	size_t			 n, i;
	char			*path, *cause;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		path = conf_file(cases[i].text);
		cause = NULL;
		assert_int_equal(conf_load(path, &e, &n, &cause), -1);
		assert_non_null(cause);
		if (strstr(cause, cases[i].cause) == NULL ||
		    strncmp(cause, path, strlen(path)) != 0)
			fail_msg("%s: cause '%s'", cases[i].text, cause);
		assert_null(e);
		assert_int_equal(n, 0);
		free(cause);
		unlink(path);
		free(path);
	}
	assert_int_equal(conf_load("/nonexistent/mhfilter.conf", &e, &n,
	    &cause), -1);
	assert_non_null(strstr(cause, "No such file"));
	free(cause);
}

/* A line longer than the limit is an error, not split in two. */
static void
test_long_line(void **state)
{
	struct conf_entry	*e;
	size_t			 n;
	char			*text, *path, *cause = NULL;

	text = xmalloc(10000);
	memset(text, 'a', 9998);
	text[9998] = '\n';
	text[9999] = '\0';
	path = conf_file(text);
	assert_int_equal(conf_load(path, &e, &n, &cause), -1);
	assert_non_null(strstr(cause, ":1: line longer than"));
	free(cause);
	unlink(path);
	free(path);
	free(text);
}

/*
 * A NUL byte is an error naming the line, not the end of the value; a
 * device (/dev/zero: no end) and a file over 1 MB are refused.
 */
static void
test_not_text(void **state)
{
	struct conf_entry	*e;
	size_t			 n;
	char			*text, *path, *cause = NULL;
	FILE			*f;

	path = conf_file("");
	assert_non_null(f = fopen(path, "w"));
	fwrite("quiet\nthreshold = 0.5\0junk\n", 1, 28, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(conf_load(path, &e, &n, &cause), -1);
	assert_non_null(strstr(cause, ":2: a NUL byte in the line"));
	free(cause);
	assert_int_equal(conf_load("/dev/zero", &e, &n, &cause), -1);
	assert_string_equal(cause, "/dev/zero: not a regular file");
	free(cause);
	text = xmalloc(2 << 20);
	memset(text, '#', (2 << 20) - 1);
	text[(2 << 20) - 1] = '\0';
	unlink(path);
	free(path);
	path = conf_file(text);
	assert_int_equal(conf_load(path, &e, &n, &cause), -1);
	assert_non_null(strstr(cause, ": larger than 1048576 bytes"));
	free(cause);
	unlink(path);
	free(path);
	free(text);
}

/* Durations: units, the default unit, ranges and errors. */
static void
test_time(void **state)
{
	static const struct {
		const char	*s;
		double		 lo, hi;
		int		 rv;
		double		 secs;
		const char	*cause;
	} cases[] = {
		{ "5ms", 0, 60, 0, 0.005, NULL },
		{ "250us", 0, 60, 0, 0.00025, NULL },
		{ "2", 0, 60, 0, 2, NULL },
		{ "2s", 0, 60, 0, 2, NULL },
		{ "1.5m", 0, 1e9, 0, 90, NULL },
		{ "2h", 0, 1e9, 0, 7200, NULL },
		{ "1d", 0, 1e9, 0, 86400, NULL },
		{ "0", 0, 60, 0, 0, NULL },
		{ "61s", 0, 60, -1, 0, "out of range" },
		{ "1ms", 0.5, 60, -1, 0, "out of range" },
		{ "5parsecs", 0, 60, -1, 0, "unknown unit 'parsecs'" },
		{ "-1s", 0, 60, -1, 0, "not a duration" },
		{ "", 0, 60, -1, 0, "not a duration" },
		{ "ms", 0, 60, -1, 0, "not a duration" },
		{ "nan", 0, 60, -1, 0, "not a duration" },
		{ "inf", 0, 1e300, -1, 0, "not a duration" },
		{ "0x10s", 0, 60, -1, 0, "unknown unit 'x'" },
		{ "1m30s", 0, 1e9, 0, 90, NULL },
	};
	size_t	 i;
	double	 v;
	char	*cause;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		v = -1;
		cause = NULL;
		if (parse_seconds(cases[i].s, cases[i].lo, cases[i].hi, &v,
		    &cause) != cases[i].rv)
			fail_msg("'%s': rv", cases[i].s);
		if (cases[i].rv == 0) {
			if (v < cases[i].secs * (1 - 1e-12) ||
			    v > cases[i].secs * (1 + 1e-12))
				fail_msg("'%s': %g, not %g", cases[i].s, v,
				    cases[i].secs);
			continue;
		}
		if (cause == NULL || strstr(cause, cases[i].cause) == NULL)
			fail_msg("'%s': cause '%s'", cases[i].s, cause);
		free(cause);
	}
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_not_text),
		cmocka_unit_test(test_time),
	};

	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
