/*
 * The batch pipeline: every source of records (the file stream, the
 * daemon's clients, the milter's messages) goes through it, so there is
 * one data path:
 *
 *   source thread              writer thread              worker threads
 *   pipeline_get  <- free
 *   fill a batch (raw bytes)
 *   pipeline_submit -> queue --------------------------> phase 1: parse,
 *                              take the oldest batch       normalise, sign
 *                              (helping its phase 1),      (filter.c)
 *                              screen bad records,
 *                              filter_decide: lookahead -> lookups, verify
 *                              (filter.c), decide behind
 *                              it; when it ends, start the
 *                              next one's phase 1; commit
 *   pipeline_deliver <- done
 *   count, write the output,
 *   the source's deliver (replies)
 *
 * A batch is delivered only after its commit, so nothing is written or
 * answered that the index could lose.  While one batch is decided and
 * committed, the next one's phase 1 runs on the other cores and the source
 * reads a third: the source thread does I/O only, the writer thread only
 * the index.  The source thread owns the counters and the output; the
 * writer thread owns the index and the filter's phase 2.  The lists of
 * batches, the status and the snapshots of the index's statistics are
 * shared under one mutex.
 *
 * Sources plug in by filling batches (pipeline_get, plbatch_add,
 * pipeline_submit) and by a deliver callback, called in their thread for
 * each decided batch.  A pull source (the stream) waits on pipeline_get; an
 * event loop (the daemon) polls pipeline_notify_fd and calls
 * pipeline_deliver when it is readable.
 *
 * Group commit: a source of many owners (the daemon's clients, the
 * milter's messages) adds their records to one open batch (pipeline_add),
 * each slot saying whose it is; the batch goes to the writer when it is
 * full, or once its delay (--batch-delay) is over and fewer than
 * BATCHES_AHEAD are in flight, else at the next delivery: a batch that
 * could not start sooner goes on filling meanwhile.
 *
 * Delivery marks (o.track, the stream with --replay undelivered): each
 * commit records the documents it inserted as undelivered (lmdbmarks.c); once
 * the source has written a batch's output (and synced it, to a file), it
 * hands the batch's range and its replays to the writer, which has the
 * index forget them in its next commit, or in a commit of their own when
 * it has nothing else to do.  A crash therefore leaves undelivered at most
 * the batches in flight and those delivered since the last commit: those
 * are what a later run writes again (filter.c).
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhfilter.h"

#define NBATCH		3		/* filling, in phase 1, deciding */
#define BATCH_BYTES	(64U << 20)	/* a batch also closes at this size */
#define KEEP_BYTES	(64 * 1024)	/* record memory kept between batches */
#define STATS_SECS	1.0		/* index statistics refreshed so often */
#define BATCHES_AHEAD	2		/* in flight: one deciding, one next */

/* Where a batch is. */
#define B_FREE		0
#define B_FILLING	1	/* the source's */
#define B_QUEUED	2	/* submitted, not decided */
#define B_DONE		3	/* decided, not delivered */

struct pipeline {
	struct pipeline_opts	 o;
	struct filter		*f;
	struct index		*ix;
	struct output		*out;
	const char		*outname;	/* for messages, or NULL */
	struct output		*dupout;	/* --duplicates-to, or NULL */
	const char		*dupname;
	pl_deliver_fn		 deliver;
	void			*deliver_arg;
	struct plbatch		 b[NBATCH];

	pthread_t		 writer;
	pthread_mutex_t		 lock;
	pthread_cond_t		 work;		/* the writer waits here */
	pthread_cond_t		 done;		/* the source waits here */
	struct plbatch		*queue;		/* submitted, oldest first */
	struct plbatch		*phase1;	/* in filter_prepare_start */
	int			 holding;	/* no phase 1 until the
						   lookahead is done */
	int			 closing;	/* no more batches: writer ends */
	int			 stopped;	/* decide nothing more */
	int			 status;	/* EXIT_* */
	int			 notify[2];	/* a byte per decided batch */
	struct index_stats	 is;		/* as of the last refresh */
	int			 have_is;
	double			 is_time;
	uint64_t		 seq;		/* batches decided */
	struct u64vec		 halted;	/* owner, batch: the writer's */
	struct plmarks		 given;		/* delivered, to mark */
	struct plmarks		 lost;		/* never will be */
	struct u64vec		 losing;	/* lost to a client, at once */
	struct u64vec		 ended;		/* owners gone, replies owed */
	int			 defer_marks;	/* the source gives them */

	/* The source thread's. */
	struct pl_counts	 ct;
	struct filter_stats	 fst;		/* as of the last delivery */
	uint64_t		 delivered;	/* the last batch delivered */
	struct plsource		 src;		/* group commit */
	double			 delay;
	struct plbatch		*open;		/* being filled */
	double			 opened;	/* its first record came */
	int			 due;		/* its delay is over */
};

static void	*pipeline_run(void *);
static void	 pipeline_screen(struct pipeline *, struct plbatch *);
static void	 pipeline_decide(struct pipeline *, struct plbatch *);
static void	 pipeline_phase1_next(void *);
static void	 pipeline_count(struct pipeline *, struct plbatch *);
static int	 pipeline_write(struct pipeline *, struct plbatch *, char **);
static void	 pipeline_write_failed(struct pipeline *, int, char *);
static void	 pipeline_recycle(struct plbatch *);
static struct plbatch *pipeline_next_done(struct pipeline *);
static int	 pipeline_busy(struct pipeline *);
static int	 pipeline_parse(struct record *, void *, char **);
static int	 pipeline_mark(struct pipeline *, struct plbatch *, char **);
static int	 pipeline_marks_take(struct pipeline *);
static void	 pipeline_news(struct pipeline *);
static void	 pipeline_refresh(void *);
static void	 pipeline_marks_queue(struct pipeline *, struct plmarks *,
		    struct plmarks *);
static int	 pipeline_marks_any(const struct pipeline *);
static void	 pipeline_log(struct pipeline *, struct plbatch *);
static void	 pipeline_where(struct pipeline *, const struct record *,
		    char *, size_t);

/*
 * Make a pipeline over an open index, with a filter for fo (the parser is
 * the pipeline's), and start its writer thread.
 */
struct pipeline *
pipeline_create(const struct pipeline_opts *o, const struct filter_opts *fo,
    struct index *ix)
{
	struct pipeline		*p;
	struct filter_opts	 f = *fo;
	char			*cause;
	size_t			 i;

	p = xcalloc(1, sizeof *p);
	p->o = *o;
	p->ix = ix;
	f.parse = pipeline_parse;
	f.parse_arg = p;
	p->f = filter_create(&f);
	filter_on_ahead(p->f, pipeline_phase1_next, p);
	filter_on_refresh(p->f, pipeline_refresh, p);
	for (i = 0; i < NBATCH; i++) {
		p->b[i].max = o->batch;
		p->b[i].fb = fbatch_create(p->f);
	}
	if (pthread_mutex_init(&p->lock, NULL) != 0 ||
	    pthread_cond_init(&p->work, NULL) != 0 ||
	    pthread_cond_init(&p->done, NULL) != 0)
		fatalx("cannot make a mutex");
	if (pipe2(p->notify, O_CLOEXEC|O_NONBLOCK) == -1)
		fatal("pipe");
	if (index_stats(ix, &p->is, &cause) == 0)
		p->have_is = 1;
	else
		free(cause);
	p->is_time = now_seconds();
	thread_start(&p->writer, pipeline_run, p);
	return (p);
}

/* Stop the writer (after pipeline_finish, or dropping what is queued). */
static void
pipeline_stop(struct pipeline *p)
{
	pthread_mutex_lock(&p->lock);
	p->closing = 1;
	p->stopped = 1;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
	if (pthread_join(p->writer, NULL) != 0)
		fatalx("cannot join the writer thread");
}

/* Stop the writer and free everything. */
void
pipeline_free(struct pipeline *p)
{
	size_t	 i, j;

	if (p == NULL)
		return;
	pipeline_stop(p);
	for (i = 0; i < NBATCH; i++) {
		fbatch_free(p->b[i].fb);
		for (j = 0; j < p->b[i].size; j++) {
			record_free(&p->b[i].recs[j]);
			verdict_free(&p->b[i].vs[j]);
		}
		free(p->b[i].recs);
		free(p->b[i].vs);
		free(p->b[i].slots);
		free(p->b[i].cause);
	}
	filter_free(p->f);
	u64vec_free(&p->given.ranges);
	u64vec_free(&p->given.replays);
	u64vec_free(&p->lost.ranges);
	u64vec_free(&p->lost.replays);
	u64vec_free(&p->losing);
	u64vec_free(&p->ended);
	u64vec_free(&p->halted);
	close(p->notify[0]);
	close(p->notify[1]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p);
}

/*
 * Stop the writer of a process about to exit, and leave the pipeline's
 * memory to the exit: after batches of 4000 records it is some 100,000
 * blocks, whose freeing one by one is a measurable share of a short run,
 * where the exit's teardown of the address space takes them at once.
 * Built with AddressSanitizer, everything is freed, so that its leak check
 * keeps its meaning.
 */
void
pipeline_exit(struct pipeline *p)
{
#if defined(__SANITIZE_ADDRESS__)
	pipeline_free(p);
#else
	if (p != NULL)
		pipeline_stop(p);
#endif
}

/*
 * Where decided records are written (NULL: nowhere); name, if not NULL,
 * goes into the message of a write error ("-": standard output).
 */
void
pipeline_set_output(struct pipeline *p, struct output *out, const char *name)
{
	p->out = out;
	p->outname = name;
}

/* Where the duplicates go as well (--duplicates-to), or NULL. */
void
pipeline_set_quarantine(struct pipeline *p, struct output *out,
    const char *name)
{
	p->dupout = out;
	p->dupname = name;
}

/*
 * Write a duplicate to the quarantine as well; its errors name it.  0, or
 * what output_record returns.
 */
static int
pipeline_quarantine(struct pipeline *p, const struct record *r,
    const struct verdict *v, char **cause)
{
	char	*why;
	int	 rc;

	if (p->dupout == NULL || v->kind != V_DUPLICATE)
		return (0);
	if ((rc = output_record(p->dupout, r, v, cause)) == 0)
		rc = output_flush(p->dupout, cause);
	if (rc != 0) {
		/* Not a reader gone: a file or a Maildir failed. */
		xasprintf(&why, "--duplicates-to %s: %s", p->dupname,
		    rc == OUTPUT_CLOSED || *cause == NULL ? "closed" : *cause);
		free(*cause);
		*cause = why;
		rc = -1;
	}
	return (rc);
}

/* Who is told of each decided batch, in the source's thread. */
void
pipeline_set_deliver(struct pipeline *p, pl_deliver_fn fn, void *arg)
{
	p->deliver = fn;
	p->deliver_arg = arg;
}

/* The index the pipeline's writer owns (for its name and run number). */
struct index *
pipeline_index(struct pipeline *p)
{
	return (p->ix);
}

/* The options the pipeline was made with. */
const struct pipeline_opts *
pipeline_options(struct pipeline *p)
{
	return (&p->o);
}

/* Readable when a decided batch waits for pipeline_deliver. */
int
pipeline_notify_fd(struct pipeline *p)
{
	return (p->notify[0]);
}

/* The counters, the source thread's to read (and to add what it refuses). */
struct pl_counts *
pipeline_counts(struct pipeline *p)
{
	return (&p->ct);
}

/*
 * The filter's counters as of the last delivery, and the index's
 * statistics as of the writer's last refresh (0 when it has none).
 */
int
pipeline_stats(struct pipeline *p, struct filter_stats *fs,
    struct index_stats *is)
{
	int	 have;

	*fs = p->fst;
	pthread_mutex_lock(&p->lock);
	*is = p->is;
	have = p->have_is;
	pthread_mutex_unlock(&p->lock);
	return (have);
}

/* EXIT_OK, or why the pipeline stopped deciding (EXIT_DATA, EXIT_ERROR). */
int
pipeline_status(struct pipeline *p)
{
	int	 status;

	pthread_mutex_lock(&p->lock);
	status = p->status;
	pthread_mutex_unlock(&p->lock);
	return (status);
}

/* Batches submitted and not delivered yet. */
size_t
pipeline_inflight(struct pipeline *p)
{
	size_t	 i, n = 0;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < NBATCH; i++)
		n += p->b[i].state == B_QUEUED || p->b[i].state == B_DONE;
	pthread_mutex_unlock(&p->lock);
	return (n);
}

/*
 * A free batch for the source to fill.  When none is free: with wait,
 * wait for one to be decided and deliver it; without (an event loop, which
 * delivers when pipeline_notify_fd is readable), NULL.  NULL too when the
 * pipeline has stopped.
 */
struct plbatch *
pipeline_get(struct pipeline *p, int wait)
{
	struct plbatch	*b = NULL;
	size_t		 i;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		for (i = 0; i < NBATCH && b == NULL; i++) {
			if (p->b[i].state == B_FREE)
				b = &p->b[i];
		}
		if (b != NULL || p->stopped) {
			if (b != NULL && !p->stopped)
				b->state = B_FILLING;
			else
				b = NULL;
			pthread_mutex_unlock(&p->lock);
			break;
		}
		if (!wait) {
			/* An event loop delivers when notified, not here. */
			pthread_mutex_unlock(&p->lock);
			break;
		}
		while (pipeline_next_done(p) == NULL)
			pthread_cond_wait(&p->done, &p->lock);
		pthread_mutex_unlock(&p->lock);
		/* None is free: deliver what is decided, then look again. */
		pipeline_deliver(p, 0);
	}
	if (b != NULL) {
		b->n = 0;
		b->bytes = 0;
		b->after = p->delivered;
	}
	return (b);
}

/* Is the batch full, by records or bytes? */
int
plbatch_full(const struct plbatch *b, size_t batch)
{
	return (b->n >= batch || b->bytes >= BATCH_BYTES);
}

/*
 * Make room for one more record in a batch being filled.  The slots grow
 * with the batch, not to --batch at once: a run of 100 records touched
 * 8 MB of slots for three batches of 4000.
 */
static void
plbatch_grow(struct plbatch *b)
{
	size_t	 size;

	if (b->n < b->size)
		return;
	size = b->size != 0 ? 2 * b->size : 64;
	if (size > b->max && b->max > b->n)
		size = b->max;
	b->recs = xreallocarray(b->recs, size, sizeof *b->recs);
	b->vs = xreallocarray(b->vs, size, sizeof *b->vs);
	b->slots = xreallocarray(b->slots, size, sizeof *b->slots);
	memset(b->recs + b->size, 0, (size - b->size) * sizeof *b->recs);
	memset(b->vs + b->size, 0, (size - b->size) * sizeof *b->vs);
	b->size = size;
}

/*
 * Take a slot of the batch for a record of len bytes, which the caller
 * copies to the returned record's raw.data.  The pipeline's parser makes
 * (id, text, time) of it in phase 1.  inlen is what it took of the input
 * (with its delimiter), for the byte counter.
 */
struct record *
plbatch_add(struct plbatch *b, size_t len, size_t inlen)
{
	struct record	*r;

	plbatch_grow(b);
	r = &b->recs[b->n];
	record_reset(r);
	verdict_reset(&b->vs[b->n]);
	memset(&b->slots[b->n], 0, sizeof b->slots[b->n]);
	buf_reserve(&r->raw, len + 1);
	r->raw.len = len;
	r->inlen = inlen;
	b->vs[b->n].kind = V_UNPARSED;
	b->bytes += len;
	b->n++;
	return (r);
}

/*
 * Take a slot for a record that is not kept: over --max-bytes (error set:
 * the pipeline applies --on-bad-input to it), or, error NULL, a place
 * holder of the source's that the filter skips (the daemon's commands,
 * answered in order); a place holder has record number 0.
 */
struct record *
plbatch_add_empty(struct plbatch *b, size_t inlen, char *error)
{
	struct record	*r;
	struct verdict	*v;

	plbatch_grow(b);
	r = &b->recs[b->n];
	v = &b->vs[b->n];
	record_reset(r);
	verdict_reset(v);
	memset(&b->slots[b->n], 0, sizeof b->slots[b->n]);
	r->inlen = inlen;
	v->kind = error != NULL ? V_TOOLONG : V_SKIP;
	v->error = error;
	b->n++;
	return (r);
}

/*
 * Hand a filled batch to the writer; an empty one goes back.  Phase 1
 * starts at once unless another batch is in it.
 */
void
pipeline_submit(struct pipeline *p, struct plbatch *b)
{
	struct plbatch	**q;

	pthread_mutex_lock(&p->lock);
	if (b->n == 0) {
		b->state = B_FREE;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	b->state = B_QUEUED;
	b->next = NULL;
	for (q = &p->queue; *q != NULL; q = &(*q)->next)
		;
	*q = b;
	if (p->phase1 == NULL && !p->holding) {
		p->phase1 = b;
		filter_prepare_start(b->fb, b->recs, b->vs, b->n);
	}
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

/*
 * Group commit for a source of many owners: its callbacks, and the delay
 * of an open batch (seconds) after its first record.
 */
void
pipeline_set_source(struct pipeline *p, const struct plsource *src,
    double delay)
{
	if (src != NULL)
		p->src = *src;
	else
		memset(&p->src, 0, sizeof p->src);
	p->delay = delay;
}

/*
 * Is there an open batch to add to?  One is opened if none is (its delay
 * starts); 0 when every batch is in flight: the source waits for a
 * delivery.
 */
int
pipeline_ready(struct pipeline *p)
{
	if (p->open != NULL)
		return (1);
	if ((p->open = pipeline_get(p, 0)) == NULL)
		return (0);
	p->opened = now_seconds();
	p->due = 0;
	if (p->src.opened != NULL)
		p->src.opened(p->src.arg);
	return (1);
}

/*
 * Take a slot of the open batch for a record of owner, tag saying what it
 * is to the source, as plbatch_add (the caller copies len bytes to the
 * record's raw.data and sets its owner's number); NULL when every batch is
 * in flight.  After the caller's last record of the moment,
 * pipeline_added.
 */
struct record *
pipeline_add(struct pipeline *p, void *owner, int tag, size_t len,
    size_t inlen)
{
	struct plbatch	*b;
	struct record	*r;

	if (!pipeline_ready(p))
		return (NULL);
	b = p->open;
	r = plbatch_add(b, len, inlen);
	b->slots[b->n - 1].owner = owner;
	b->slots[b->n - 1].tag = tag;
	return (r);
}

/*
 * A slot for a record the source has parsed already: parsed's text, id
 * and time are copied, and phase 1 starts at normalising.  NULL when every
 * batch is in flight.
 */
struct record *
pipeline_add_parsed(struct pipeline *p, void *owner, size_t inlen,
    const struct record *parsed)
{
	struct record	*r;

	if ((r = pipeline_add(p, owner, 0, 0, inlen)) == NULL)
		return (NULL);
	p->open->vs[p->open->n - 1].kind = V_PENDING;
	buf_append(&r->text, parsed->text.data, parsed->text.len);
	buf_append(&r->id, parsed->id.data, parsed->id.len);
	r->time = parsed->time;
	p->open->bytes += parsed->text.len;
	return (r);
}

/*
 * A place holder of owner's that the filter skips (the daemon's commands,
 * answered in order, record number 0); NULL when every batch is in flight.
 */
struct record *
pipeline_add_empty(struct pipeline *p, void *owner, int tag)
{
	struct plbatch	*b;
	struct record	*r;

	if (!pipeline_ready(p))
		return (NULL);
	b = p->open;
	r = plbatch_add_empty(b, 0, NULL);
	b->slots[b->n - 1].owner = owner;
	b->slots[b->n - 1].tag = tag;
	return (r);
}

/* Records were added: a full open batch goes to the writer. */
void
pipeline_added(struct pipeline *p)
{
	if (p->open != NULL && plbatch_full(p->open, p->o.batch))
		pipeline_flush(p);
}

/*
 * Seconds left of the open batch's delay: 0 when it is over, -1 when no
 * batch is open.
 */
double
pipeline_open_left(struct pipeline *p)
{
	double	 left;

	if (p->open == NULL)
		return (-1);
	left = p->opened + p->delay - now_seconds();
	return (left > 0 ? left : 0);
}

/*
 * The open batch's delay is over: it goes to the writer, unless
 * BATCHES_AHEAD are in flight; then it could not start sooner anyway, so
 * it goes on filling and goes at the next delivery (or when full).
 */
void
pipeline_due(struct pipeline *p)
{
	if (p->open == NULL)
		return;
	p->due = 1;
	if (pipeline_inflight(p) < BATCHES_AHEAD)
		pipeline_flush(p);
}

/* Hand the open batch, if any, to the writer now. */
void
pipeline_flush(struct pipeline *p)
{
	p->due = 0;
	if (p->open == NULL)
		return;
	pipeline_submit(p, p->open);
	p->open = NULL;
}

/*
 * Count a record that goes into no batch: refused as over a limit
 * (V_TOOLONG), or mail passed without a verdict (V_UNCHECKED, too large
 * or not a message; V_BAD), of inlen input bytes.
 */
void
pipeline_count_alone(struct pipeline *p, int kind, uint64_t inlen)
{
	struct pl_counts	*ct = &p->ct;

	ct->records++;
	ct->bytes += inlen;
	if (kind == V_TOOLONG)
		ct->too_long++;
	else if (kind == V_UNCHECKED)
		ct->unchecked++;
	else
		ct->invalid++;
}

/*
 * The stream's --stats summary after secs seconds: one "mhfilter: key:
 * value" line on the standard error for each of the statistics every
 * source has (mstats_pipeline) that the stream shows.
 */
void
pipeline_print_stats(struct pipeline *p, double secs)
{
	struct mstats	 st;
	size_t		 i;

	st.n = 0;
	mstats_add(&st, "records", NULL, 1, MS_STREAM, (double)p->ct.records,
	    "");
	mstats_pipeline(&st, p, secs);
	for (i = 0; i < st.n; i++) {
		if (st.v[i].where & MS_STREAM)
			fprintf(stderr, "mhfilter: %s: %.*f\n", st.v[i].name,
			    st.v[i].prec, st.v[i].value);
	}
}

/* Is a batch submitted and not decided yet?  (Called locked.) */
static int
pipeline_busy(struct pipeline *p)
{
	size_t	 i;

	for (i = 0; i < NBATCH; i++) {
		if (p->b[i].state == B_QUEUED)
			return (1);
	}
	return (0);
}

/* The oldest decided batch, or NULL (called locked). */
static struct plbatch *
pipeline_next_done(struct pipeline *p)
{
	struct plbatch	*b = NULL;
	size_t		 i;

	for (i = 0; i < NBATCH; i++) {
		if (p->b[i].state == B_DONE &&
		    (b == NULL || p->b[i].seq < b->seq))
			b = &p->b[i];
	}
	return (b);
}

/*
 * The output failed: nothing more is decided (the index would hold what
 * the output lacks).  A reader that went away (a closed pipe) ends the run
 * quietly with the status of a process killed by SIGPIPE, as grep's.
 */
static void
pipeline_write_failed(struct pipeline *p, int rc, char *cause)
{
	if (rc != OUTPUT_CLOSED && p->outname != NULL &&
	    strcmp(p->outname, "-") != 0)
		log_warnx("output %s: %s", p->outname, cause);
	else if (rc != OUTPUT_CLOSED && p->outname != NULL)
		log_warnx("standard output: %s", cause);
	else if (rc != OUTPUT_CLOSED)
		log_warnx("%s", cause);
	free(cause);
	pthread_mutex_lock(&p->lock);
	p->stopped = 1;
	p->status = rc == OUTPUT_CLOSED ? 128 + SIGPIPE : EXIT_ERROR;
	pthread_mutex_unlock(&p->lock);
}

/*
 * Deliver the decided batches, oldest first, in the calling (source)
 * thread: count them, write their records, then call the source's deliver.
 * With wait, waits for one if none is decided yet and some are in flight.
 * Returns the number delivered.
 */
size_t
pipeline_deliver(struct pipeline *p, int wait)
{
	struct plbatch	*b;
	char		 drain[64], *cause;
	size_t		 n = 0;
	int		 rc;

	while (read(p->notify[0], drain, sizeof drain) > 0)
		;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		while ((b = pipeline_next_done(p)) == NULL && wait && n == 0 &&
		    pipeline_busy(p))
			pthread_cond_wait(&p->done, &p->lock);
		pthread_mutex_unlock(&p->lock);
		if (b == NULL)
			break;
		rc = 0;
		if (b->rc != PL_DROPPED) {
			pipeline_count(p, b);
			pipeline_log(p, b);
			if (b->rc == 0 &&
			    (rc = pipeline_write(p, b, &cause)) != 0)
				pipeline_write_failed(p, rc, cause);
		}
		if (p->deliver != NULL)
			p->deliver(p->deliver_arg, b);
		/* Written and answered: delivered. */
		if (b->rc == 0 && rc == 0 &&
		    (rc = pipeline_mark(p, b, &cause)) != 0)
			pipeline_write_failed(p, rc, cause);
		pipeline_recycle(b);
		p->delivered = b->seq;
		pthread_mutex_lock(&p->lock);
		b->state = B_FREE;
		pthread_mutex_unlock(&p->lock);
		n++;
	}
	if (n > 0 && p->due)
		pipeline_due(p);	/* it waited for a batch ahead */
	return (n);
}

/*
 * Write a piece of a message over --max-message straight to the output,
 * unjudged (stream.c): the first piece (piece 1) with its From_ line and,
 * under --annotate, its X-Mhfilter field; with last, the end of the
 * message.  The source has delivered every batch before it.  0, or -1
 * when the output failed (the pipeline stops, as pipeline_write's would).
 */
int
pipeline_write_piece(struct pipeline *p, const struct record *r,
    const struct verdict *v, int piece, int last)
{
	char	*cause = NULL;
	int	 rc;

	if (p->out == NULL)
		return (0);
	if ((rc = output_piece(p->out, r, v, piece, last, &cause)) == 0)
		rc = output_flush(p->out, &cause);
	if (rc != 0) {
		pipeline_write_failed(p, rc, cause);
		return (-1);
	}
	return (0);
}

/*
 * Submit nothing more: wait for every batch in flight and deliver it.
 * Returns the pipeline's status.
 */
int
pipeline_finish(struct pipeline *p)
{
	while (pipeline_inflight(p) > 0)
		pipeline_deliver(p, 1);
	return (pipeline_status(p));
}

/* Add a delivered batch's counts to the source's. */
static void
pipeline_count(struct pipeline *p, struct plbatch *b)
{
	struct pl_counts	*ct = &p->ct;
	struct verdict		*v;
	size_t			 i;

	ct->records += b->records;
	ct->bytes += b->inbytes;
	ct->invalid += b->invalid;
	ct->too_long += b->too_long;
	ct->batches++;
	ct->batch_seconds += b->seconds;
	ct->batch_last = b->seconds;
	if (b->seconds > ct->batch_max)
		ct->batch_max = b->seconds;
	p->fst = b->fst;
	if (b->rc != 0) {
		ct->failed += b->records - b->invalid - b->too_long;
		return;
	}
	for (i = 0; i < b->n; i++) {
		v = &b->vs[i];
		switch (v->kind) {
		case V_UNIQUE:
			ct->unique++;
			ct->replayed += v->replay;
			break;
		case V_DUPLICATE:
			ct->duplicates++;
			ct->seen += v->seen;
			break;
		case V_EMPTY:
			ct->empty++;
			break;
		case V_UNCHECKED:
			ct->unchecked++;
			break;
		}
	}
}

/*
 * With -v, a line for each decided record of a batch, with where it came
 * from, its id and its verdict, the duplicates with both ids: for mail
 * every message (a delivery agent's log, the journal), for other records
 * the duplicates and what was not judged, which a feed's operator asks
 * about.
 */
static void
pipeline_log(struct pipeline *p, struct plbatch *b)
{
	const struct record	*r;
	const struct verdict	*v;
	char			 where[128];
	const char		*id, *match;
	size_t			 i;
	int			 idl, ml;

	if (!log_debugging() || b->rc != 0)
		return;
	for (i = 0; i < b->n; i++) {
		r = &b->recs[i];
		v = &b->vs[i];
		if (r->recno == 0 ||
		    (!(format_get(p->o.format)->flags & FMT_LOG_ALL) &&
		    v->kind != V_DUPLICATE && v->kind != V_UNCHECKED) ||
		    (v->kind != V_UNIQUE && v->kind != V_DUPLICATE &&
		    v->kind != V_EMPTY && v->kind != V_UNCHECKED))
			continue;
		pipeline_where(p, r, where, sizeof where);
		id = r->id.len > 0 ? r->id.data : "";
		match = v->match.len > 0 ? v->match.data : "";
		idl = r->id.len > 200 ? 200 : (int)r->id.len;
		ml = v->match.len > 200 ? 200 : (int)v->match.len;
		if (v->kind == V_DUPLICATE)
			log_debug("%s: <%.*s>: %s of <%.*s>, similarity %.2f",
			    where, idl, id, v->seen ? "seen, a duplicate" :
			    "duplicate", ml, match, v->sim);
		else if (v->kind == V_UNCHECKED)
			log_debug("%s: <%.*s>: unchecked (%s)", where, idl, id,
			    v->error);
		else
			log_debug("%s: <%.*s>: %s", where, idl, id,
			    verdict_name(v));
	}
}

/*
 * Write a committed batch's records: all but the skipped ones and the bad
 * ones that --on-bad-input does not pass.
 */
static int
pipeline_write(struct pipeline *p, struct plbatch *b, char **cause)
{
	struct verdict	*v;
	size_t		 i;
	int		 rc;

	if (p->out == NULL)
		return (0);
	for (i = 0; i < b->n; i++) {
		v = &b->vs[i];
		if (v->kind == V_SKIP || b->recs[i].recno == 0 ||
		    (v->kind == V_BAD && p->o.policy != POLICY_PASS))
			continue;
		if ((rc = output_record(p->out, &b->recs[i], v, cause)) != 0 ||
		    (rc = pipeline_quarantine(p, &b->recs[i], v, cause)) != 0)
			return (rc);
	}
	return (output_flush(p->out, cause));
}

/*
 * A batch's output is written: with o.track, sync it (to a file) and take
 * what is to be marked delivered, its documents and replays, into a marks
 * object; NULL with *cause NULL when there is nothing to mark, NULL with a
 * cause when the sync failed.
 */
struct plmarks *
pipeline_marks_of(struct pipeline *p, struct plbatch *b, char **cause)
{
	struct plmarks	*m;
	size_t		 i, n = 0;

	*cause = NULL;
	if (!p->o.track || b->rc != 0)
		return (NULL);
	for (i = 0; i < b->n; i++)
		n += b->vs[i].self != 0;
	if (b->first == b->end && n == 0)
		return (NULL);
	if (p->out != NULL && output_sync(p->out, cause) != 0)
		return (NULL);
	if (p->dupout != NULL && output_sync(p->dupout, cause) != 0)
		return (NULL);
	m = xcalloc(1, sizeof *m);
	if (b->first != b->end) {
		u64vec_push(&m->ranges, b->first);
		u64vec_push(&m->ranges, b->end);
	}
	for (i = 0; i < b->n; i++) {
		if (b->vs[i].self != 0)
			u64vec_push(&m->replays, b->vs[i].self);
	}
	/* A daemon's may wait long for its clients: a few bytes, not 2 KB. */
	u64vec_fit(&m->ranges);
	u64vec_fit(&m->replays);
	return (m);
}

/*
 * Can a batch's marks be split by record (pipeline_marks_add), each of its
 * documents known by the record that inserted it?  Not where the backend
 * numbers documents at its commit (Redis, at times): then the batch is
 * marked as a whole.
 */
int
pipeline_marks_split(const struct plbatch *b)
{
	uint64_t	 known = 0;
	size_t		 i;

	for (i = 0; i < b->n; i++) {
		if (b->vs[i].doc >= b->first && b->vs[i].doc < b->end)
			known++;
	}
	return (known == b->end - b->first);
}

/*
 * Add to m what record i of batch b makes of the batch's marks: the
 * document it inserted (extending m's last range when it follows it) and
 * the earlier copy it replayed.  A daemon's client's part of a batch, so
 * that one that goes away without its replies loses its records alone.
 */
void
pipeline_marks_add(struct plmarks *m, const struct plbatch *b, size_t i)
{
	const struct verdict	*v = &b->vs[i];

	if (v->doc >= b->first && v->doc < b->end) {
		if (m->ranges.n > 0 && m->ranges.v[m->ranges.n - 1] == v->doc)
			m->ranges.v[m->ranges.n - 1]++;
		else {
			u64vec_push(&m->ranges, v->doc);
			u64vec_push(&m->ranges, v->doc + 1);
		}
	}
	if (v->self != 0)
		u64vec_push(&m->replays, v->self);
}

/*
 * Hand marks to the writer, which has the index forget them as undelivered
 * in its next commit; m is freed.
 */
void
pipeline_marks_give(struct pipeline *p, struct plmarks *m)
{
	pipeline_marks_queue(p, &p->given, m);
}

/*
 * Hand the writer marks whose output will never be written (the daemon's
 * client went away first): the index gives their documents up to other
 * processes (index_abandoned), and the filter forgets their replays, so
 * that every one of their records is a replay when it comes again; m is
 * freed.
 */
void
pipeline_marks_lose(struct pipeline *p, struct plmarks *m)
{
	pipeline_marks_queue(p, &p->lost, m);
}

/*
 * A reply of the batch whose marks are m will never be written (a daemon's
 * client went away first), though the batch's marks may wait for other
 * clients' replies before they are given or lost: tell the filter now, so
 * that a record of it sent again meanwhile is judged a replay (a record
 * without an id of its own, filter_abandon).  Once a batch; m is kept.
 */
void
pipeline_marks_losing(struct pipeline *p, const struct plmarks *m)
{
	size_t	 i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < m->ranges.n; i++)
		u64vec_push(&p->losing, m->ranges.v[i]);
	pthread_mutex_unlock(&p->lock);
}

/* Append m to the writer's marks to, wake it, and free m. */
static void
pipeline_marks_queue(struct pipeline *p, struct plmarks *to,
    struct plmarks *m)
{
	size_t	 i;

	if (m == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < m->ranges.n; i++)
		u64vec_push(&to->ranges, m->ranges.v[i]);
	for (i = 0; i < m->replays.n; i++)
		u64vec_push(&to->replays, m->replays.v[i]);
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
	pipeline_marks_free(m);
}

/* Are there marks for the writer to take?  (Under the lock.) */
static int
pipeline_marks_any(const struct pipeline *p)
{
	return (p->given.ranges.n != 0 || p->given.replays.n != 0 ||
	    p->lost.ranges.n != 0 || p->lost.replays.n != 0);
}

/* Forget marks never given: their documents stay undelivered. */
void
pipeline_marks_free(struct plmarks *m)
{
	if (m == NULL)
		return;
	u64vec_free(&m->ranges);
	u64vec_free(&m->replays);
	free(m);
}

/*
 * A source whose deliveries end later than its deliver callback (the
 * daemon: when a client's socket has taken the replies) takes each batch's
 * marks itself (pipeline_marks_of) and gives them when that is so; the
 * others are marked as soon as their output is written.
 */
void
pipeline_defer_marks(struct pipeline *p)
{
	p->defer_marks = 1;
}

/* A batch's output is written: mark it delivered, unless deferred. */
static int
pipeline_mark(struct pipeline *p, struct plbatch *b, char **cause)
{
	struct plmarks	*m;

	if (p->defer_marks)
		return (0);
	m = pipeline_marks_of(p, b, cause);
	if (m == NULL)
		return (*cause != NULL ? -1 : 0);
	pipeline_marks_give(p, m);
	return (0);
}

/*
 * Give the index the delivery marks the source has handed over, for its
 * next commit (writer).  Returns whether there were any.
 */
static int
pipeline_marks_take(struct pipeline *p)
{
	int	 any;

	pthread_mutex_lock(&p->lock);
	any = pipeline_marks_any(p);
	if (any) {
		index_delivered(p->ix, p->given.ranges.v,
		    p->given.ranges.n / 2, p->given.replays.v,
		    p->given.replays.n);
		index_abandoned(p->ix, p->lost.ranges.v,
		    p->lost.ranges.n / 2);
		filter_unreplay(p->f, p->lost.replays.v, p->lost.replays.n);
	}
	p->given.ranges.n = p->given.replays.n = 0;
	p->lost.ranges.n = p->lost.replays.n = 0;
	pipeline_news(p);
	pthread_mutex_unlock(&p->lock);
	return (any);
}

/*
 * Hand the filter the source's news: the batches a client lost, the
 * owners gone (p->lock held; writer).
 */
static void
pipeline_news(struct pipeline *p)
{
	filter_abandon(p->f, p->losing.v, p->losing.n / 2);
	p->losing.n = 0;
	filter_owners_ended(p->f, p->ended.v, p->ended.n);
	p->ended.n = 0;
}

/* The same in the middle of a batch (filter_on_refresh; writer). */
static void
pipeline_refresh(void *arg)
{
	struct pipeline	*p = arg;

	pthread_mutex_lock(&p->lock);
	pipeline_news(p);
	pthread_mutex_unlock(&p->lock);
}

/*
 * The owner (a daemon's connection) ended with replies it never took, or
 * may not take (it closed its side first): a record it sent, sent again
 * by another, may be owed (filter_owners_ended).
 */
void
pipeline_owner_ended(struct pipeline *p, uint64_t owner)
{
	pthread_mutex_lock(&p->lock);
	u64vec_push(&p->ended, owner);
	pthread_mutex_unlock(&p->lock);
}

/*
 * Nothing to decide but delivery marks: commit them on their own, so that
 * a quiet feed's last batch is not written again after a crash (writer).
 */
static void
pipeline_marks_commit(struct pipeline *p)
{
	char	*cause;

	if (!pipeline_marks_take(p))
		return;
	if (index_begin(p->ix, &cause) != 0 ||
	    index_commit(p->ix, &cause) != 0) {
		/* The index keeps the marks for its next commit. */
		log_warnx("%s", cause);
		free(cause);
	}
}

/* Free the memory of big records, or the slots would hoard it. */
static void
pipeline_recycle(struct plbatch *b)
{
	size_t	 i;

	for (i = 0; i < b->n; i++) {
		if (b->recs[i].raw.size > KEEP_BYTES ||
		    b->recs[i].text.size > KEEP_BYTES)
			record_free(&b->recs[i]);
	}
	free(b->cause);
	b->cause = NULL;
}

/* Parse a record in phase 1, in a worker thread. */
static int
pipeline_parse(struct record *r, void *arg, char **cause)
{
	struct pipeline	*p = arg;
	int		 rc;

	rc = record_parse_timed(r, p->o.format, p->o.text_field,
	    p->o.id_field, p->o.time_field, cause);
	r->genid = 0;
	if (r->id.len == 0 && r->owner != 0 && p->src.id != NULL) {
		p->src.id(p->src.arg, r);
		r->genid = 1;
	}
	return (rc);
}

/* Where a record came from: its owner's words, or its file and line. */
static void
pipeline_where(struct pipeline *p, const struct record *r, char *where,
    size_t len)
{
	if (r->owner != 0 && p->src.where != NULL)
		p->src.where(p->src.arg, r, where, len);
	else
		snprintf(where, len, "%s:%" PRIu64,
		    r->file != NULL ? r->file : "-", r->line);
}

/*
 * Has a bad record under fail stopped this owner, in this batch or one
 * before?  The source stops taking an owner's records when it delivers
 * the bad one, so a stop matters only to the batches opened before that
 * delivery (b->after): the others forget it.  (Writer.)
 */
static int
pipeline_owner_stopped(struct pipeline *p, struct plbatch *b,
    uint64_t owner)
{
	struct u64vec	*st = &p->halted;
	size_t		 i, n = 0;
	int		 found = 0;

	for (i = 0; i < st->n; i += 2) {
		if (st->v[i + 1] <= b->after)
			continue;	/* delivered before b opened */
		found |= st->v[i] == owner;
		st->v[n++] = st->v[i];
		st->v[n++] = st->v[i + 1];
	}
	st->n = n;
	return (found);
}

/* Say what --on-bad-input does with a bad record. */
static void
pipeline_warn(struct pipeline *p, const struct record *r,
    const struct verdict *v, int policy)
{
	char	 where[128];

	if (p->o.quiet && policy != POLICY_FAIL)
		return;
	pipeline_where(p, r, where, sizeof where);
	if (r->owner != 0) {
		/* Its owner has an error line: the log says it quietly. */
		log_debug("%s: %s", where, v->error);
		return;
	}
	log_warnx("%s: %s: %s", where, v->error, policy == POLICY_SKIP ?
	    "skipped" : policy == POLICY_PASS ? "passed through" : "stopping");
}

/*
 * Say that a message was passed through without being judged, and why
 * (mail_warn_unchecked), unless -q.
 */
void
pipeline_warn_unchecked(struct pipeline *p, const struct record *r,
    const char *why)
{
	if (!p->o.quiet)
		mail_warn_unchecked(r->file, r->line, why);
}

/*
 * After phase 1, in input order: count the records that were too long or
 * did not parse, warn about them, and apply --on-bad-input.  Under fail,
 * with stop_on_error (the stream), the batch ends before the bad record and
 * the pipeline stops; otherwise (the daemon) that owner's later records
 * are skipped unanswered, as if never read: the daemon closes its
 * connection.
 */
static void
pipeline_screen(struct pipeline *p, struct plbatch *b)
{
	struct verdict	*v;
	struct record	*r;
	size_t		 i;
	int		 policy;

	b->records = b->inbytes = b->invalid = b->too_long = 0;
	for (i = 0; i < b->n; i++) {
		v = &b->vs[i];
		r = &b->recs[i];
		if (r->recno == 0)
			continue;	/* a place holder */
		if (r->owner != 0 && p->o.policy == POLICY_FAIL &&
		    pipeline_owner_stopped(p, b, r->owner)) {
			fbatch_skip(b->fb, i);
			verdict_reset(v);
			v->kind = V_SKIP;
			continue;
		}
		b->records++;
		b->inbytes += r->inlen;
		if (v->kind == V_UNCHECKED) {
			pipeline_warn_unchecked(p, r, v->error);
			continue;
		}
		if (v->kind != V_BAD && v->kind != V_TOOLONG)
			continue;
		policy = p->o.policy;
		if (v->kind == V_TOOLONG) {
			b->too_long++;
			/* Passing one would need unbounded memory. */
			if (policy == POLICY_PASS)
				policy = POLICY_SKIP;
		} else
			b->invalid++;
		pipeline_warn(p, r, v, policy);
		if (policy == POLICY_SKIP)
			v->kind = V_SKIP;
		if (policy != POLICY_FAIL)
			continue;
		if (!p->o.stop_on_error) {
			/* Its batch's number: p->seq once decided. */
			if (r->owner != 0) {
				u64vec_push(&p->halted, r->owner);
				u64vec_push(&p->halted, p->seq + 1);
			}
			continue;
		}
		fbatch_truncate(b->fb, i);
		b->n = i;
		pthread_mutex_lock(&p->lock);
		p->stopped = 1;
		p->status = EXIT_DATA;
		pthread_mutex_unlock(&p->lock);
		return;
	}
}

/*
 * Start the phase 1 of the oldest batch submitted, once the batch taken
 * has been looked up ahead (filter_on_ahead; the writer).
 */
static void
pipeline_phase1_next(void *arg)
{
	struct pipeline	*p = arg;

	pthread_mutex_lock(&p->lock);
	p->holding = 0;
	p->phase1 = p->queue;
	if (p->phase1 != NULL)
		filter_prepare_start(p->phase1->fb, p->phase1->recs,
		    p->phase1->vs, p->phase1->n);
	pthread_mutex_unlock(&p->lock);
}

/* Screen, decide and commit a batch whose phase 1 is done (writer). */
static void
pipeline_decide(struct pipeline *p, struct plbatch *b)
{
	char	*cause;
	double	 t0;

	pipeline_screen(p, b);
	pipeline_marks_take(p);
	t0 = now_seconds();
	b->rc = filter_decide(b->fb, p->ix, &cause) != 0 ? PL_FAILED : 0;
	b->first = b->end = 0;
	if (b->rc == 0)
		index_batch_range(p->ix, &b->first, &b->end);
	b->seconds = now_seconds() - t0;
	filter_stats(p->f, &b->fst);
	if (b->rc != 0) {
		b->cause = cause;
		/*
		 * An index whose data went away (INDEX_LOST) stops a server
		 * too: going on would take what is left for a new index.
		 */
		if (p->o.stop_on_error || (p->ix->flags & INDEX_LOST)) {
			log_warnx("%s", cause);
			pthread_mutex_lock(&p->lock);
			p->stopped = 1;
			p->status = EXIT_ERROR;
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/*
 * The writer thread: take the oldest submitted batch, finish its phase 1
 * (helping), start the next one's, decide and commit, and mark it done.
 */
static void *
pipeline_run(void *arg)
{
	struct pipeline		*p = arg;
	struct plbatch		*b;
	struct index_stats	 is;
	char			*cause;
	int			 stopped, idle, rc;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (p->queue == NULL && !p->closing &&
		    !pipeline_marks_any(p))
			pthread_cond_wait(&p->work, &p->lock);
		if ((b = p->queue) == NULL) {
			if (!pipeline_marks_any(p))
				break;		/* closing */
			pthread_mutex_unlock(&p->lock);
			pipeline_marks_commit(p);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		filter_prepare_wait(b->fb);

		pthread_mutex_lock(&p->lock);
		p->queue = b->next;
		p->phase1 = NULL;
		p->holding = 1;
		stopped = p->stopped;
		pthread_mutex_unlock(&p->lock);

		if (stopped) {
			pipeline_phase1_next(p);
			b->rc = PL_DROPPED;
		} else
			pipeline_decide(p, b);

		/* The index's statistics, for the source thread. */
		pthread_mutex_lock(&p->lock);
		idle = p->queue == NULL;
		pthread_mutex_unlock(&p->lock);
		if (!stopped && (idle || now_seconds() - p->is_time >=
		    STATS_SECS)) {
			rc = index_stats(p->ix, &is, &cause);
			if (rc != 0)
				free(cause);
			p->is_time = now_seconds();
			pthread_mutex_lock(&p->lock);
			if (rc == 0) {
				p->is = is;
				p->have_is = 1;
			}
			pthread_mutex_unlock(&p->lock);
		}

		pthread_mutex_lock(&p->lock);
		b->seq = ++p->seq;
		b->state = B_DONE;
		pthread_cond_broadcast(&p->done);
		if (write(p->notify[1], "", 1) == -1 && errno != EAGAIN)
			log_warn("pipeline: notify");
	}
	pthread_mutex_unlock(&p->lock);
	return (NULL);
}
