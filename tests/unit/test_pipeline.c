/*
 * Unit tests for pipeline.c over a temporary index whose commit and insert
 * are watched: a record is delivered unique only once the transaction that
 * inserted it has committed; batches come back in order, counted; a failed
 * commit is delivered as such and nothing of it is written; --on-bad-input
 * fail ends the stream at the bad record, and in the daemon's mode skips
 * the rest of that connection only.  Group commit (pipeline_add): a batch
 * opens on its first record, goes when full or due, and its slots say
 * whose each record is; an owner stopped by a bad record stays stopped in
 * the batches opened before that was delivered, and only in those.
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

/* What the watched backend saw: ids inserted, and of those, committed. */
static struct {
	pthread_mutex_t		 lock;
	char			 pending[64][32];
	size_t			 npending;
	char			 committed[256][32];
	size_t			 ncommitted;
	int			 fail_commit;	/* fail the Nth commit (from 1) */
	int			 commits;
} seen = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const struct index_ops	*real;
static struct index_ops		 watched;

/* Insert, remembering the id as not yet committed. */
static int
w_insert(struct index *ix, size_t slot, const uint64_t *keys,
    const uint32_t *sig, const char *id, size_t idlen, const char *text,
    size_t textlen, const char *enc, size_t enclen, int flags, int64_t when,
    char **cause)
{
	pthread_mutex_lock(&seen.lock);
	assert_true(seen.npending < 64 && idlen < 32);
	snprintf(seen.pending[seen.npending++], 32, "%.*s", (int)idlen, id);
	pthread_mutex_unlock(&seen.lock);
	return (real->insert(ix, slot, keys, sig, id, idlen, text, textlen,
	    enc, enclen, flags, when, cause));
}

/* Commit (or fail the chosen one); the pending ids become committed. */
static int
w_commit(struct index *ix, char **cause)
{
	int	 rc;

	pthread_mutex_lock(&seen.lock);
	if (++seen.commits == seen.fail_commit) {
		pthread_mutex_unlock(&seen.lock);
		real->abort(ix);
		seen.npending = 0;
		xasprintf(cause, "injected commit failure");
		return (-1);
	}
	pthread_mutex_unlock(&seen.lock);
	rc = real->commit(ix, cause);
	pthread_mutex_lock(&seen.lock);
	while (rc == 0 && seen.npending > 0) {
		assert_true(seen.ncommitted < 256);
		memcpy(seen.committed[seen.ncommitted++],
		    seen.pending[--seen.npending], 32);
	}
	seen.npending = 0;
	pthread_mutex_unlock(&seen.lock);
	return (rc);
}

/* Abort: nothing pending was committed. */
static void
w_abort(struct index *ix)
{
	pthread_mutex_lock(&seen.lock);
	seen.npending = 0;
	pthread_mutex_unlock(&seen.lock);
	real->abort(ix);
}

/* Was this id committed? */
static int
committed(const char *id, size_t len)
{
	size_t	 i;
	int	 found = 0;

	pthread_mutex_lock(&seen.lock);
	for (i = 0; i < seen.ncommitted && !found; i++)
		found = strlen(seen.committed[i]) == len &&
		    memcmp(seen.committed[i], id, len) == 0;
	pthread_mutex_unlock(&seen.lock);
	return (found);
}

/* What the test's deliver callback saw. */
struct got {
	uint64_t	 last_recno;	/* records come back in order */
	size_t		 batches;
	size_t		 failed;
	size_t		 dropped;
	size_t		 unique;
	size_t		 duplicate;
	size_t		 skipped;
	size_t		 unanswered;	/* V_SKIP without error (fail, daemon) */
};

/* Check each delivered batch: in order, and unique only once committed. */
static void
deliver(void *arg, struct plbatch *b)
{
	struct got	*g = arg;
	size_t		 i;

	g->batches++;
	if (b->rc == PL_FAILED) {
		assert_non_null(b->cause);
		g->failed++;
		return;
	}
	if (b->rc == PL_DROPPED) {
		g->dropped++;
		return;
	}
	for (i = 0; i < b->n; i++) {
		assert_true(b->recs[i].recno > g->last_recno);
		g->last_recno = b->recs[i].recno;
		switch (b->vs[i].kind) {
		case V_UNIQUE:
			assert_true(committed(b->recs[i].id.data,
			    b->recs[i].id.len));
			g->unique++;
			break;
		case V_DUPLICATE:
			g->duplicate++;
			break;
		case V_SKIP:
			if (b->vs[i].error == NULL)
				g->unanswered++;
			else
				g->skipped++;
			break;
		}
	}
}

/* A test's pipeline over a watched temporary index, writing to a file. */
struct fixture {
	struct index	*ix;
	struct pipeline	*p;
	struct output	*out;
	FILE		*outf;
	struct got	 got;
};

/* Make the fixture: batches of batch records, policy, stream or daemon. */
static void
fixture_open(struct fixture *fx, size_t batch, int policy, int stream)
{
	struct index_params	 ip;
	struct filter_opts	 fo;
	struct pipeline_opts	 po;
	char			*cause = NULL;

	memset(fx, 0, sizeof *fx);
	memset(&ip, 0, sizeof ip);
	ip.perms = 64;
	ip.bands = 16;
	ip.rows = 4;
	ip.shingle = 3;
	ip.unit = UNIT_CHAR;
	ip.norm = NORM_DEFAULT;
	ip.texts = 1;
	ip.threshold = 0.5;
	if (index_open(&fx->ix, NULL, 0, &ip, 0, &cause) != 0)
		fail_msg("index_open: %s", cause);
	real = fx->ix->ops;
	watched = *real;
	watched.insert = w_insert;
	watched.commit = w_commit;
	watched.abort = w_abort;
	fx->ix->ops = &watched;
	seen.ncommitted = seen.npending = 0;
	seen.commits = seen.fail_commit = 0;

	memset(&fo, 0, sizeof fo);
	fo.p = ip;
	fo.verify = VERIFY_EXACT;
	fo.chain = 1;
	fo.max_candidates = 100;
	fo.threads = 2;
	memset(&po, 0, sizeof po);
	po.format = FORMAT_TSV;
	po.delim = '\n';
	po.max_bytes = 1000;
	po.policy = policy;
	po.mode = OUT_ANNOTATE;
	po.batch = batch;
	po.quiet = 1;
	po.stop_on_error = stream;
	fx->p = pipeline_create(&po, &fo, fx->ix);
	assert_non_null(fx->outf = tmpfile());
	fx->out = output_open(fileno(fx->outf), OUT_ANNOTATE, FORMAT_TSV,
	    FRAME_DELIM, '\n');
	pipeline_set_output(fx->p, fx->out, NULL);
	pipeline_set_deliver(fx->p, deliver, &fx->got);
}

/* Free the fixture; its output, read back, into out (if not NULL). */
static void
fixture_close(struct fixture *fx, char *out, size_t len)
{
	size_t	 n;

	pipeline_free(fx->p);
	output_close(fx->out);
	if (out != NULL) {
		rewind(fx->outf);
		n = fread(out, 1, len - 1, fx->outf);
		out[n] = '\0';
	}
	fclose(fx->outf);
	index_close(fx->ix);
}

/* Add a record (a TSV line) to a batch, from connection conn (0: a file). */
static void
add(struct plbatch *b, const char *line, uint64_t recno, uint64_t conn)
{
	struct record	*r;

	r = plbatch_add(b, strlen(line), strlen(line) + 1);
	memcpy(r->raw.data, line, strlen(line));
	r->recno = recno;
	r->line = recno;
	r->owner = conn;
	r->file = "test";
}

static const char *const lines[] = {
	"a1\tthe committee approved the budget for the coming year",
	"a2\tthe committee approved the budget for the coming year!",
	"a3\tflood warnings were issued for three rivers in the north",
	"a4\ta completely different sentence about football results",
	"a5\tthe committee approved the budget for the coming years",
	"a6\tflood warnings were issued for three rivers in the north.",
};
#define NLINES	(sizeof lines / sizeof lines[0])

/*
 * Three batches of two records, all submitted before any is delivered:
 * every unique one was committed first, the order holds, the counts add up.
 */
static void
test_commit_before_write(void **state)
{
	struct fixture		 fx;
	const struct pl_counts	*ct;
	struct plbatch		*b;
	char			 out[4096];
	size_t			 i;

	fixture_open(&fx, 2, POLICY_SKIP, 1);
	for (i = 0; i < NLINES; i += 2) {
		assert_non_null(b = pipeline_get(fx.p, 1));
		add(b, lines[i], i + 1, 0);
		add(b, lines[i + 1], i + 2, 0);
		pipeline_submit(fx.p, b);
	}
	assert_int_equal(pipeline_finish(fx.p), EXIT_OK);
	assert_int_equal(pipeline_inflight(fx.p), 0);
	ct = pipeline_counts(fx.p);
	assert_int_equal(ct->records, NLINES);
	assert_int_equal(ct->batches, 3);
	assert_int_equal(ct->unique, 3);
	assert_int_equal(ct->duplicates, 3);
	assert_int_equal(fx.got.unique, 3);
	assert_int_equal(fx.got.last_recno, NLINES);
	fixture_close(&fx, out, sizeof out);
	/* Written in input order, each with its verdict. */
	assert_non_null(strstr(out, "unique\t-\t-\ta1\t"));
	assert_non_null(strstr(out, "duplicate\ta1\t"));
	assert_true(strstr(out, "a1\t") < strstr(out, "a6\t"));
}

/*
 * The second commit fails: that batch comes back failed and unwritten;
 * in the stream's mode the pipeline stops and drops the rest.
 */
static void
test_failed_commit(void **state)
{
	struct fixture	 fx;
	struct plbatch	*b;
	char		 out[4096];
	size_t		 i;

	fixture_open(&fx, 2, POLICY_SKIP, 1);
	seen.fail_commit = 2;
	for (i = 0; i < NLINES; i += 2) {
		if ((b = pipeline_get(fx.p, 1)) == NULL)
			break;	/* stopped */
		add(b, lines[i], i + 1, 0);
		add(b, lines[i + 1], i + 2, 0);
		pipeline_submit(fx.p, b);
	}
	assert_int_equal(pipeline_finish(fx.p), EXIT_ERROR);
	assert_int_equal(fx.got.failed, 1);
	assert_int_equal(fx.got.batches, fx.got.failed + fx.got.dropped + 1);
	fixture_close(&fx, out, sizeof out);
	assert_non_null(strstr(out, "a1\t"));
	assert_null(strstr(out, "a3\t"));	/* the failed batch */
	assert_null(strstr(out, "a5\t"));
}

/*
 * The daemon's mode: a failed commit is answered as such and the next
 * batch commits again.
 */
static void
test_failed_commit_daemon(void **state)
{
	struct fixture	 fx;
	struct plbatch	*b;
	size_t		 i;

	fixture_open(&fx, 2, POLICY_SKIP, 0);
	seen.fail_commit = 1;
	for (i = 0; i < 4; i += 2) {
		assert_non_null(b = pipeline_get(fx.p, 1));
		add(b, lines[i + 2], i + 1, 1);
		add(b, lines[i + 3], i + 2, 1);
		pipeline_submit(fx.p, b);
		pipeline_finish(fx.p);
	}
	assert_int_equal(pipeline_status(fx.p), EXIT_OK);
	assert_int_equal(fx.got.failed, 1);
	assert_int_equal(fx.got.unique, 2);
	assert_int_equal(pipeline_counts(fx.p)->failed, 2);
	fixture_close(&fx, NULL, 0);
}

/* --on-bad-input fail in a stream: the run ends at the bad record. */
static void
test_fail_stream(void **state)
{
	struct fixture	 fx;
	struct plbatch	*b;
	char		 out[4096];

	fixture_open(&fx, 8, POLICY_FAIL, 1);
	assert_non_null(b = pipeline_get(fx.p, 1));
	add(b, lines[0], 1, 0);
	add(b, "no tab here", 2, 0);
	add(b, lines[2], 3, 0);
	pipeline_submit(fx.p, b);
	assert_int_equal(pipeline_finish(fx.p), EXIT_DATA);
	assert_null(pipeline_get(fx.p, 0));	/* stopped */
	assert_int_equal(pipeline_counts(fx.p)->records, 2);
	assert_int_equal(pipeline_counts(fx.p)->invalid, 1);
	fixture_close(&fx, out, sizeof out);
	assert_non_null(strstr(out, "a1\t"));
	assert_null(strstr(out, "a3\t"));
	assert_false(committed("3", 1) || committed("a3", 2));
}

/*
 * --on-bad-input fail in the daemon's mode: the bad record's connection
 * is not read further; another connection's records are decided.
 */
static void
test_fail_daemon(void **state)
{
	struct fixture	 fx;
	struct plbatch	*b;

	fixture_open(&fx, 8, POLICY_FAIL, 0);
	assert_non_null(b = pipeline_get(fx.p, 1));
	add(b, lines[0], 1, 1);
	add(b, "no tab here", 2, 1);
	add(b, lines[2], 3, 1);
	add(b, lines[3], 4, 2);
	pipeline_submit(fx.p, b);
	assert_int_equal(pipeline_finish(fx.p), EXIT_OK);
	assert_int_equal(fx.got.unique, 2);
	assert_int_equal(fx.got.unanswered, 1);
	assert_true(committed("a4", 2));
	assert_false(committed("a3", 2));
	fixture_close(&fx, NULL, 0);
}

/* What a group-commit source saw of the pipeline. */
struct gsrc {
	struct got	*got;
	int		 opened;
	int		 wheres;
	int		 tags[16];	/* of the delivered slots, in order */
	size_t		 ntags;
};

/* A batch was opened. */
static void
g_opened(void *arg)
{
	((struct gsrc *)arg)->opened++;
}

/* Where an owner's record came from. */
static void
g_where(void *arg, const struct record *r, char *where, size_t len)
{
	((struct gsrc *)arg)->wheres++;
	snprintf(where, len, "owner %llu", (unsigned long long)r->owner);
}

/* Note each slot's tag, then check the batch as every test does. */
static void
g_deliver(void *arg, struct plbatch *b)
{
	struct gsrc	*g = arg;
	size_t		 i;

	for (i = 0; i < b->n && g->ntags < 16; i++) {
		assert_non_null(b->slots[i].owner);
		g->tags[g->ntags++] = b->slots[i].tag;
	}
	deliver(g->got, b);
}

/* Add a record of owner number owner (its slot's tag) to the open batch. */
static void
gadd(struct pipeline *p, struct gsrc *g, const char *line, uint64_t recno,
    uint64_t owner, int tag)
{
	struct record	*r;

	assert_non_null(r = pipeline_add(p, g, tag, strlen(line),
	    strlen(line) + 1));
	memcpy(r->raw.data, line, strlen(line));
	r->recno = r->line = recno;
	r->owner = owner;
}

/* Make the fixture a group-commit source with a long delay. */
static void
gopen(struct fixture *fx, struct gsrc *g, size_t batch, int policy)
{
	struct plsource	 src = { g_opened, NULL, g_where, NULL };

	fixture_open(fx, batch, policy, 0);
	memset(g, 0, sizeof *g);
	g->got = &fx->got;
	src.arg = g;
	pipeline_set_source(fx->p, &src, 60);
	pipeline_set_deliver(fx->p, g_deliver, g);
}

/*
 * A batch opens on its first record and waits out its delay; it goes
 * when full, or when due; the slots come back with their tags in order.
 */
static void
test_group_commit(void **state)
{
	struct fixture	 fx;
	struct gsrc	 g;
	double		 left;

	gopen(&fx, &g, 3, POLICY_SKIP);
	assert_true(pipeline_open_left(fx.p) < 0);
	gadd(fx.p, &g, lines[0], 1, 1, 10);
	gadd(fx.p, &g, lines[2], 2, 2, 20);
	pipeline_added(fx.p);
	assert_int_equal(g.opened, 1);
	left = pipeline_open_left(fx.p);
	assert_true(left > 50 && left <= 60);
	assert_int_equal(pipeline_inflight(fx.p), 0);
	gadd(fx.p, &g, lines[1], 3, 1, 11);
	pipeline_added(fx.p);		/* full: submitted */
	assert_true(pipeline_open_left(fx.p) < 0);
	gadd(fx.p, &g, lines[3], 4, 2, 21);
	pipeline_added(fx.p);
	assert_int_equal(g.opened, 2);
	assert_true(pipeline_open_left(fx.p) >= 0);
	pipeline_due(fx.p);		/* one in flight: it goes too */
	assert_true(pipeline_open_left(fx.p) < 0);
	assert_int_equal(pipeline_finish(fx.p), EXIT_OK);
	assert_int_equal(g.ntags, 4);
	assert_int_equal(g.tags[0], 10);
	assert_int_equal(g.tags[1], 20);
	assert_int_equal(g.tags[2], 11);
	assert_int_equal(g.tags[3], 21);
	assert_int_equal(fx.got.unique, 3);
	assert_int_equal(fx.got.duplicate, 1);
	assert_int_equal(pipeline_counts(fx.p)->batches, 2);
	pipeline_set_source(fx.p, NULL, 0);
	fixture_close(&fx, NULL, 0);
}

/*
 * --on-bad-input fail for a group-commit source: owner 1's bad record
 * stops its later records in its batch and in the next, opened before it
 * was delivered; a batch opened after that delivery decides owner 1's
 * records again (the source stops reading an owner when it delivers its
 * bad record, so the pipeline forgets it).
 */
static void
test_owner_stop(void **state)
{
	struct fixture	 fx;
	struct gsrc	 g;

	gopen(&fx, &g, 3, POLICY_FAIL);
	gadd(fx.p, &g, lines[0], 1, 1, 0);
	gadd(fx.p, &g, "no tab here", 2, 1, 0);
	gadd(fx.p, &g, lines[2], 3, 1, 0);
	pipeline_added(fx.p);		/* full */
	gadd(fx.p, &g, lines[5], 4, 1, 0);
	gadd(fx.p, &g, lines[3], 5, 2, 0);
	pipeline_flush(fx.p);
	assert_int_equal(pipeline_finish(fx.p), EXIT_OK);
	assert_int_equal(fx.got.unanswered, 2);
	assert_true(g.wheres >= 1);
	assert_true(committed("a4", 2));
	assert_false(committed("a3", 2) || committed("a6", 2));
	gadd(fx.p, &g, lines[5], 6, 1, 0);
	pipeline_flush(fx.p);
	assert_int_equal(pipeline_finish(fx.p), EXIT_OK);
	assert_true(committed("a6", 2));
	pipeline_set_source(fx.p, NULL, 0);
	fixture_close(&fx, NULL, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_before_write),
		cmocka_unit_test(test_failed_commit),
		cmocka_unit_test(test_failed_commit_daemon),
		cmocka_unit_test(test_fail_stream),
		cmocka_unit_test(test_fail_daemon),
		cmocka_unit_test(test_group_commit),
		cmocka_unit_test(test_owner_stop),
	};

	log_init("test_pipeline");
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
