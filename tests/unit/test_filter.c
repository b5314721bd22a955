/*
 * Unit tests for filter.c, the algorithm over a batch, on an index in a
 * mkdtemp directory.  Texts are sets of words (word shingles of one word),
 * so that their Jaccard similarities are known by construction:
 *
 *   A   w1 ... w10
 *   A1  w1 ... w9 x1          J(A, A1) = 9/11 = 0.82
 *   A2  w1 ... w8 x1 x2       J(A1, A2) = 9/11, J(A, A2) = 8/12 = 0.67
 *   B   ten other words
 *
 * Cases: duplicates within a batch and across batches; chains (A2 is a
 * duplicate of A1, which --no-chain does not index); identical texts not
 * indexed twice; empty and malformed records; --query-only; --pairs;
 * signature verification; a replay in a later run (same id, same text)
 * and an earlier version with the same id but another text.
 */

#include "config.h"

#include <ftw.h>
#include <limits.h>
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

#define A	"w1 w2 w3 w4 w5 w6 w7 w8 w9 w10"
#define A1	"w1 w2 w3 w4 w5 w6 w7 w8 w9 x1"
#define A2	"w1 w2 w3 w4 w5 w6 w7 w8 x1 x2"
#define B	"b1 b2 b3 b4 b5 b6 b7 b8 b9 b10"
#define NMAX	8

struct fixture {
	char		 dir[PATH_MAX];
	char		 path[PATH_MAX + 16];
	struct filter_opts fo;
	int		 track;		/* open with INDEX_TRACK */
	struct index	*ix;
	struct filter	*f;
	struct fbatch	*fb;
	struct record	 recs[NMAX];
	struct verdict	 vs[NMAX];
	size_t		 n;
};

/* Parse a TSV record (id TAB text), as the pipeline's parser does. */
static int
parse(struct record *r, void *arg, char **cause)
{
	return (record_parse(r, FORMAT_TSV, NULL, NULL, cause));
}

/* Remove one file or directory of a tree (for nftw). */
static int
remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return (remove(path));
}

/* Open (or reopen: a new run) the index and a filter over it. */
static void
run_open(struct fixture *fx)
{
	char	*cause = NULL;

	if (index_open(&fx->ix, fx->path, (fx->fo.query_only ? INDEX_RDONLY :
	    0) | (fx->track ? INDEX_TRACK : 0), &fx->fo.p, 0, &cause) != 0)
		fail_msg("index_open: %s", cause);
	fx->f = filter_create(&fx->fo);
	fx->fb = fbatch_create(fx->f);
}

/* Close the filter and the index. */
static void
run_close(struct fixture *fx)
{
	fbatch_free(fx->fb);
	filter_free(fx->f);
	index_close(fx->ix);
	fx->fb = NULL;
	fx->f = NULL;
	fx->ix = NULL;
}

/* Make the test's directory and the default options. */
static int
setup(void **state)
{
	struct fixture	*fx;
	const char	*tmp;

	fx = xcalloc(1, sizeof *fx);
	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(fx->dir, sizeof fx->dir, "%s/mhf-test-filter.XXXXXX", tmp);
	if (mkdtemp(fx->dir) == NULL)
		return (-1);
	snprintf(fx->path, sizeof fx->path, "%s/ix", fx->dir);
	fx->fo.p.perms = 128;
	fx->fo.p.shingle = 1;
	fx->fo.p.unit = UNIT_WORD;
	fx->fo.p.norm = NORM_DEFAULT;
	fx->fo.p.threshold = 0.8;
	fx->fo.p.texts = 1;
	fx->fo.p.bands = 32;	/* P(candidate | J = 0.82) > 0.999 */
	fx->fo.p.rows = 4;
	fx->fo.verify = VERIFY_EXACT;
	fx->fo.chain = 1;
	fx->fo.max_candidates = 100;
	fx->fo.threads = 2;
	fx->fo.parse = parse;
	*state = fx;
	return (0);
}

/* Free what a test left and remove its directory. */
static int
teardown(void **state)
{
	struct fixture	*fx = *state;
	size_t		 i;
	int		 rc;

	if (fx->ix != NULL)
		run_close(fx);
	for (i = 0; i < NMAX; i++) {
		record_free(&fx->recs[i]);
		verdict_free(&fx->vs[i]);
	}
	rc = nftw(fx->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return (rc);
}

/* Add a TSV record to the batch being built. */
static void
add(struct fixture *fx, const char *line)
{
	struct record	*r = &fx->recs[fx->n];

	assert_true(fx->n < NMAX);
	record_reset(r);
	verdict_reset(&fx->vs[fx->n]);
	buf_append(&r->raw, line, strlen(line));
	r->recno = r->line = fx->n + 1;
	fx->vs[fx->n].kind = V_UNPARSED;
	fx->n++;
}

/* Both phases and the commit of the batch built; then a new one. */
static void
decide(struct fixture *fx)
{
	char	*cause = NULL;

	filter_prepare_start(fx->fb, fx->recs, fx->vs, fx->n);
	if (filter_decide(fx->fb, fx->ix, &cause) != 0)
		fail_msg("filter_decide: %s", cause);
}

/* Start a new batch. */
static void
next_batch(struct fixture *fx)
{
	fx->n = 0;
}

/* The verdict of record i: its kind, and for a duplicate its match. */
static void
expect(struct fixture *fx, size_t i, int kind, const char *match)
{
	struct verdict	*v = &fx->vs[i];

	if (v->kind != kind)
		fail_msg("record %zu: verdict %d, expected %d", i + 1, v->kind,
		    kind);
	if (match != NULL && (v->match.len != strlen(match) ||
	    memcmp(v->match.data, match, v->match.len) != 0))
		fail_msg("record %zu: match '%.*s', expected '%s'", i + 1,
		    (int)v->match.len, v->match.data, match);
}

/* Documents in the index. */
static uint64_t
docs(struct fixture *fx)
{
	struct index_stats	 st;
	char			*cause = NULL;

	if (index_stats(fx->ix, &st, &cause) != 0)
		fail_msg("index_stats: %s", cause);
	return (st.docs);
}

/* Duplicates in a batch and across batches, with their similarity. */
static void
test_within_and_across(void **state)
{
	struct fixture	*fx = *state;

	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "a1\t" A1);
	add(fx, "b\t" B);
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	expect(fx, 1, V_DUPLICATE, "a");
	assert_float_equal(fx->vs[1].sim, 9.0 / 11, 1e-9);
	expect(fx, 2, V_UNIQUE, NULL);
	next_batch(fx);
	add(fx, "b2\t" B " b11");
	decide(fx);
	expect(fx, 0, V_DUPLICATE, "b");
	assert_float_equal(fx->vs[0].sim, 10.0 / 11, 1e-9);
}

/* A chain: A2 matches A1 (a duplicate, indexed) but not A. */
static void
test_chain(void **state)
{
	struct fixture	*fx = *state;

	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "a1\t" A1);
	add(fx, "a2\t" A2);
	decide(fx);
	expect(fx, 1, V_DUPLICATE, "a");
	expect(fx, 2, V_DUPLICATE, "a1");
	assert_int_equal(docs(fx), 3);
}

/* --no-chain: duplicates are not indexed, so A2 is unique. */
static void
test_no_chain(void **state)
{
	struct fixture	*fx = *state;

	fx->fo.chain = 0;
	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "a1\t" A1);
	add(fx, "a2\t" A2);
	decide(fx);
	expect(fx, 1, V_DUPLICATE, "a");
	expect(fx, 2, V_UNIQUE, NULL);
	assert_int_equal(docs(fx), 2);
}

/* An identical text is a duplicate with similarity 1, not indexed. */
static void
test_identical(void **state)
{
	struct fixture	*fx = *state;

	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "again\t" A);
	decide(fx);
	expect(fx, 1, V_DUPLICATE, "a");
	assert_float_equal(fx->vs[1].sim, 1.0, 0);
	assert_int_equal(docs(fx), 1);
}

/* Nothing to compare, and a record that does not parse. */
static void
test_empty_and_bad(void **state)
{
	struct fixture	*fx = *state;

	run_open(fx);
	add(fx, "e\t   ");
	add(fx, "no tab");
	add(fx, "a\t" A);
	decide(fx);
	expect(fx, 0, V_EMPTY, NULL);
	expect(fx, 1, V_BAD, NULL);
	assert_non_null(fx->vs[1].error);
	expect(fx, 2, V_UNIQUE, NULL);
	assert_int_equal(docs(fx), 1);
}

/* --query-only: compared with the index, nothing inserted. */
static void
test_query_only(void **state)
{
	struct fixture	*fx = *state;

	run_open(fx);
	add(fx, "a\t" A);
	decide(fx);
	run_close(fx);
	fx->fo.query_only = 1;
	run_open(fx);
	next_batch(fx);
	add(fx, "a1\t" A1);
	add(fx, "b\t" B);
	add(fx, "b2\t" B);
	decide(fx);
	expect(fx, 0, V_DUPLICATE, "a");
	expect(fx, 1, V_UNIQUE, NULL);
	expect(fx, 2, V_UNIQUE, NULL);	/* b was not inserted */
	assert_int_equal(docs(fx), 1);
}

/* --pairs: every verified match, not only the best. */
static void
test_pairs(void **state)
{
	struct fixture	*fx = *state;

	fx->fo.want_pairs = 1;
	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "a1\t" A1);
	add(fx, "a1b\t" A1 " w10");
	decide(fx);
	/* A1 w10 is w1..w10 x1: 10/11 to A, 10/11 to A1. */
	expect(fx, 2, V_DUPLICATE, NULL);
	assert_int_equal(fx->vs[2].npairs, 2);
}

/* Signature verification accepts on the estimate alone. */
static void
test_signature(void **state)
{
	struct fixture	*fx = *state;

	fx->fo.verify = VERIFY_SIGNATURE;
	fx->fo.p.texts = 0;
	run_open(fx);
	add(fx, "a\t" A);
	add(fx, "a\t" A);
	add(fx, "b\t" B);
	decide(fx);
	expect(fx, 1, V_DUPLICATE, "a");
	assert_float_equal(fx->vs[1].sim, 1.0, 0);
	expect(fx, 2, V_UNIQUE, NULL);
}

/*
 * A later run, with REPLAY_ALL: the same id with the same text is a
 * replay (unique again, not indexed again); the same id with another text
 * is judged by its text.
 */
static void
test_replay(void **state)
{
	struct fixture	*fx = *state;

	fx->fo.replay = REPLAY_ALL;
	run_open(fx);
	add(fx, "r1\t" A);
	add(fx, "r2\t" B);
	decide(fx);
	run_close(fx);
	run_open(fx);
	next_batch(fx);
	add(fx, "r1\t" A);
	add(fx, "r2\t" A1);
	add(fx, "r3\t" A);
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	assert_true(fx->vs[0].replay);
	expect(fx, 1, V_DUPLICATE, "r1");
	expect(fx, 2, V_DUPLICATE, "r1");
	assert_false(fx->vs[2].replay);
	assert_int_equal(docs(fx), 3);	/* r1, r2, and r2's new text */
}

/* Mark what the last decide's commit inserted as delivered. */
static void
delivered(struct fixture *fx, const uint64_t *replays, size_t n)
{
	uint64_t	 r[2];

	index_batch_range(fx->ix, &r[0], &r[1]);
	index_delivered(fx->ix, r, r[0] != r[1], replays, n);
}

/* The records test_undelivered replays, again: written before. */
static void
written_before(struct fixture *fx)
{
	next_batch(fx);
	add(fx, "r3\t" A2);
	add(fx, "\t" "z1 z2 z3 z4 z5 z6 z7 z8 z9 z10");
	decide(fx);
	expect(fx, 0, V_DUPLICATE, "r3");
	assert_true(fx->vs[0].seen);
	expect(fx, 1, V_DUPLICATE, "2");
	assert_false(fx->vs[1].replay);
}

/*
 * REPLAY_UNDELIVERED over a tracked index: an earlier run's copy whose
 * batch was marked delivered makes the record seen (a duplicate of
 * itself, not written); one whose batch was not (a crash between commit
 * and output) makes it a replay, and once that replay is delivered too,
 * the record is seen.  Without an id, an identical text in an undelivered
 * range is the record's copy; in a delivered one, a plain duplicate.
 */
static void
test_undelivered(void **state)
{
	struct fixture	*fx = *state;
	uint64_t	 replays[2];

	fx->fo.replay = REPLAY_UNDELIVERED;
	fx->track = 1;
	run_open(fx);
	add(fx, "r1\t" A);
	add(fx, "r2\t" B);
	decide(fx);
	delivered(fx, NULL, 0);		/* batch 1 written */
	next_batch(fx);
	add(fx, "r3\t" A2);
	add(fx, "\t" "z1 z2 z3 z4 z5 z6 z7 z8 z9 z10");
	decide(fx);			/* batch 2 never written: a crash */
	run_close(fx);

	run_open(fx);
	next_batch(fx);
	add(fx, "r1\t" A);
	add(fx, "r3\t" A2);
	add(fx, "\t" "z1 z2 z3 z4 z5 z6 z7 z8 z9 z10");
	add(fx, "\t" B);
	decide(fx);
	expect(fx, 0, V_DUPLICATE, "r1");
	assert_true(fx->vs[0].seen);
	expect(fx, 1, V_UNIQUE, NULL);
	assert_true(fx->vs[1].replay);
	expect(fx, 2, V_UNIQUE, NULL);
	assert_true(fx->vs[2].replay);
	expect(fx, 3, V_DUPLICATE, "r2");
	assert_false(fx->vs[3].seen);
	assert_int_equal(docs(fx), 4);	/* nothing indexed again */
	/* The replays are written: they are carved out of their range. */
	replays[0] = fx->vs[1].self;
	replays[1] = fx->vs[2].self;
	assert_true(replays[0] != 0 && replays[1] != 0);
	delivered(fx, replays, 2);
	/* Written by this run already: seen, or a duplicate (no id). */
	written_before(fx);
	run_close(fx);
	/* A later run: the replays' delivery was recorded. */
	run_open(fx);
	written_before(fx);
}

/*
 * The daemon's parser: a record without an id is given one, RUN:CONN:N,
 * another each time it is sent.
 */
static int
parse_given(struct record *r, void *arg, char **cause)
{
	static unsigned	 n;
	char		 id[32];
	int		 rc;

	rc = record_parse(r, FORMAT_TSV, NULL, NULL, cause);
	if (r->id.len == 0) {
		snprintf(id, sizeof id, "1:1:%u", ++n);
		buf_append(&r->id, id, strlen(id));
		r->genid = 1;
	}
	return (rc);
}

#define C	"c1 c2 c3 c4 c5 c6 c7 c8 c9 c10"
#define D	"d1 d2 d3 d4 d5 d6 d7 d8 d9 d10"

/*
 * Records with ids the daemon gave (genid), as the daemon runs the filter
 * (REPLAY_UNDELIVERED, tracked, run_unsure): sent again with another id,
 * a record whose earlier copy's batch was not delivered (a crash) is a
 * replay, judged by its text as a record without an id; one delivered is
 * a plain duplicate.  In the same run, a copy whose batch was abandoned
 * (filter_abandon: its client went away) is a replay once, a copy of a
 * batch that was not is a plain duplicate.
 */
static void
test_given_ids(void **state)
{
	struct fixture	*fx = *state;
	uint64_t	 r[2], later[4] = { 1000, 1001, 2000, 2001 };

	fx->fo.replay = REPLAY_UNDELIVERED;
	fx->fo.run_unsure = 1;
	fx->fo.parse = parse_given;
	fx->track = 1;
	run_open(fx);
	add(fx, "\t" A);
	add(fx, "\t" B);
	decide(fx);
	delivered(fx, NULL, 0);		/* batch 1 answered */
	next_batch(fx);
	add(fx, "\t" A2);
	add(fx, "\t" C);
	decide(fx);			/* batch 2 never answered: killed */
	run_close(fx);

	run_open(fx);
	next_batch(fx);
	add(fx, "\t" A2);
	add(fx, "\t" C);
	add(fx, "\t" B);
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	assert_true(fx->vs[0].replay);
	expect(fx, 1, V_UNIQUE, NULL);
	assert_true(fx->vs[1].replay);
	expect(fx, 2, V_DUPLICATE, "1:1:2");
	assert_false(fx->vs[2].seen);
	assert_int_equal(docs(fx), 4);	/* nothing indexed again */

	/* This run's: answered, and abandoned. */
	next_batch(fx);
	add(fx, "\t" D);
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	index_batch_range(fx->ix, &r[0], &r[1]);
	assert_true(r[0] < r[1]);
	next_batch(fx);
	add(fx, "\t" D);
	decide(fx);
	expect(fx, 0, V_DUPLICATE, NULL);
	assert_false(fx->vs[0].replay);
	index_abandoned(fx->ix, r, 1);
	/* Told out of order, after ranges of no document yet. */
	filter_abandon(fx->f, later, 2);
	filter_abandon(fx->f, r, 1);
	next_batch(fx);
	add(fx, "\t" D);
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	assert_true(fx->vs[0].replay);
	next_batch(fx);
	add(fx, "\t" D);
	decide(fx);
	expect(fx, 0, V_DUPLICATE, NULL);
	assert_false(fx->vs[0].replay);
	assert_false(fx->vs[0].seen);
	assert_int_equal(docs(fx), 5);
}

/* Add a TSV record of a scope (a milter recipient's). */
static void
add_scoped(struct fixture *fx, const char *line, const char *who)
{
	add(fx, line);
	fx->recs[fx->n - 1].scope = lsh_scope_key(who, strlen(who));
}

/*
 * Scopes, as the milter uses them (REPLAY_UNDELIVERED, tracked): a text
 * is judged against its own scope's documents only.  The same id and text
 * delivered to alice is neither seen nor a duplicate for carol, in the same
 * batch or a later one; for alice again it is seen; a near-duplicate is a
 * duplicate in its scope only; unscoped records meet no scoped one.  The
 * index checks clean: its band keys are those of the stored signatures.
 */
static void
test_scope(void **state)
{
	struct fixture	*fx = *state;
	uint64_t	 problems = 99;
	char		*cause = NULL;
	FILE		*f;

	fx->fo.replay = REPLAY_UNDELIVERED;
	fx->track = 1;
	run_open(fx);
	add_scoped(fx, "m1\t" A, "alice@example.org");
	add_scoped(fx, "m1\t" A, "bob@example.org");
	decide(fx);
	expect(fx, 0, V_UNIQUE, NULL);
	expect(fx, 1, V_UNIQUE, NULL);
	delivered(fx, NULL, 0);
	next_batch(fx);
	add_scoped(fx, "m1\t" A, "bob@example.org");
	add_scoped(fx, "m1\t" A, "carol@example.org");
	add_scoped(fx, "m2\t" A1, "alice@example.org");
	add_scoped(fx, "m2\t" A1, "dave@example.org");
	add(fx, "m1\t" A);
	decide(fx);
	expect(fx, 0, V_DUPLICATE, "m1");
	assert_true(fx->vs[0].seen);
	expect(fx, 1, V_UNIQUE, NULL);
	assert_false(fx->vs[1].replay);
	expect(fx, 2, V_DUPLICATE, "m1");
	assert_false(fx->vs[2].seen);
	expect(fx, 3, V_UNIQUE, NULL);
	expect(fx, 4, V_UNIQUE, NULL);
	/* Not bob's seen copy; alice's duplicate is (chains). */
	assert_int_equal(docs(fx), 6);
	assert_non_null(f = fopen("/dev/null", "w"));
	if (index_check(fx->ix, f, &problems, &cause) != 0)
		fail_msg("index_check: %s", cause);
	fclose(f);
	assert_int_equal(problems, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_scope, setup, teardown),
		cmocka_unit_test_setup_teardown(test_within_and_across, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_chain, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_identical, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_bad, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_query_only, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_pairs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signature, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undelivered, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_given_ids, setup,
		    teardown),
	};

	log_init("test_filter");
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
