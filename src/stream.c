/*
 * The file stream: records from the files (or standard input) through the
 * pipeline, and the decided ones to the output, in input order.
 *
 * This thread only reads and writes: it fills a batch while the pipeline's
 * writer decides the one before (pipeline.c), and writes each batch's
 * verdicts once it is committed.  While the producer is silent, what is
 * decided is written at once, so a paused producer gets its answers
 * without sending more.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mhfilter.h"

/*
 * A producer that has written nothing for this long (ms) has paused: the
 * batch closes and is answered.  Less than that is a pipe emptied faster
 * than the producer refills it: closing the batch there would make a
 * batch of each pipe buffer ("cat file |" writes 64 KB at a time), a
 * commit each, at a fraction of the speed of a file given as an argument.
 */
#define INPUT_GRACE	2
#define PROGRESS_HZ	4	/* progress line redraws a second, at most */

struct stream {
	const struct stream_opts	*o;
	const struct pipeline_opts	*po;
	struct pipeline			*p;
	struct input			*in;
	uint64_t			 recno;
	int				 eof;
	double				 start;
	uint64_t			 skipped_files;	/* abandoned */
	struct rawrec			 big;	/* a message's first piece */
	int				 havebig;
};

static volatile sig_atomic_t	 stop_signal;
static volatile sig_atomic_t	 want_stats;

static int	stream_blank(struct stream *, const struct rawrec *);
static int	stream_read(struct stream *, struct plbatch *);
static int	stream_big(struct stream *);
static void	stream_deliver(void *, struct plbatch *);
static void	stream_progress(struct stream *, int);
static void	stream_signal(int);

/*
 * Remember the first SIGINT/SIGTERM: reading stops and what was read is
 * finished.  The handler is installed with SA_RESETHAND, so a second one
 * kills at once.  SIGUSR1 asks for the counters.
 */
static void
stream_signal(int sig)
{
	if (sig == SIGUSR1)
		want_stats = 1;
	else if (stop_signal == 0)
		stop_signal = sig;
}

/* Is this a blank line of TSV or JSON Lines, left out (record_blank)? */
static int
stream_blank(struct stream *s, const struct rawrec *rr)
{
	return (s->po->delim == '\n' && !rr->toolong &&
	    record_blank(rr->data, rr->len, s->po->format));
}

/*
 * Read up to a batch of records, unparsed (phase 1 parses them in the
 * workers; the pipeline then reports the bad ones in order).  A record over
 * --max-bytes takes a place in the batch without its bytes.  Sets eof at
 * the end of input; returns 0, or EXIT_ERROR on a read error, with the
 * records before it in the batch.
 */
static int
stream_read(struct stream *s, struct plbatch *b)
{
	struct rawrec	 rr;
	struct record	*r;
	char		*over;
	size_t		 inlen;
	int		 rc, status;

	while (!plbatch_full(b, s->po->batch) && !stop_signal) {
		if (b->n > 0 && !input_wait(s->in, INPUT_GRACE))
			break;	/* the producer paused: answer now */
		/* While it is silent, write what is decided. */
		while (b->n == 0 && pipeline_inflight(s->p) > 0 &&
		    !input_wait_or(s->in, pipeline_notify_fd(s->p)))
			pipeline_deliver(s->p, 0);
		if (stop_signal)
			break;
		if ((rc = input_read(s->in, s->po->policy == POLICY_FAIL, &rr,
		    &s->skipped_files, &over, &status)) == 0) {
			s->eof = 1;
			break;
		}
		if (rc == INPUT_RETRY) {
			/* A signal (the loop condition decides), a file
			   skipped (the others are read). */
			if (want_stats) {
				want_stats = 0;
				pipeline_print_stats(s->p,
				    now_seconds() - s->start);
			}
			continue;
		}
		if (rc == INPUT_STOP)
			return (status);
		if (rr.piece != 0) {
			/* Mail over --max-message: see stream_big. */
			s->big = rr;
			s->havebig = 1;
			break;
		}
		if (stream_blank(s, &rr)) {
			/* A blank line: no record, no warning; counted. */
			s->recno++;
			pipeline_counts(s->p)->blank++;
			continue;
		}
		inlen = (rr.toolong ? rr.fulllen : rr.len) + rr.delimited;
		if (over != NULL)
			r = plbatch_add_empty(b, inlen, over);
		else {
			r = plbatch_add(b, rr.len, inlen);
			memcpy(r->raw.data, rr.data, rr.len);
		}
		r->recno = ++s->recno;
		r->line = rr.line;
		r->file = rr.file;
		r->whole = rr.whole;
	}
	return (0);
}

/*
 * A message over --max-message, whose first piece stream_read found: once
 * every batch before it is written, it is written through unjudged, piece
 * by piece as it is read (input.c), so that it costs no more memory than
 * the limit and is neither lost nor reordered.  Returns 0, or the exit
 * status of a read error.
 */
static int
stream_big(struct stream *s)
{
	struct rawrec		 rr = s->big;
	struct record		 r;
	struct verdict		 v;
	uint64_t		 len = 0;
	int			 first = 1, rc;

	s->havebig = 0;
	while (pipeline_inflight(s->p) > 0)
		pipeline_deliver(s->p, 1);
	memset(&r, 0, sizeof r);
	memset(&v, 0, sizeof v);
	v.kind = V_UNCHECKED;
	v.error = (char *)"too-large";
	r.recno = ++s->recno;
	r.line = rr.line;
	r.file = rr.file;
	r.whole = rr.whole;
	for (;;) {
		r.raw.data = (char *)rr.data;
		r.raw.len = rr.len;
		len += rr.len + (rr.more ? 0 : rr.delimited);
		if (pipeline_write_piece(s->p, &r, &v, first, !rr.more) != 0)
			return (0);	/* the pipeline stopped: it says why */
		if (!rr.more)
			break;
		first = 0;
		rc = input_next_piece(s->in, &rr, &s->skipped_files);
		if (rc == 1)
			continue;	/* its next piece (input.c ends it) */
		if (rc == 0)
			break;		/* not so: input.c ends it first */
		/* Its file ended in error: end the message where it broke. */
		r.raw.len = 0;
		(void)pipeline_write_piece(s->p, &r, &v, 0, 1);
		if (rc == MHF_ERROR)
			return (EXIT_ERROR);
		break;
	}
	pipeline_count_alone(s->p, V_UNCHECKED, len);
	pipeline_warn_unchecked(s->p, &r, "too-large");
	if (s->o->progress)
		stream_progress(s, 0);
	return (0);
}

/* A batch was written: the progress line, and the counters if asked. */
static void
stream_deliver(void *arg, struct plbatch *b)
{
	struct stream	*s = arg;

	(void)b;
	if (s->o->progress)
		stream_progress(s, 0);
	if (want_stats) {
		want_stats = 0;
		pipeline_print_stats(s->p, now_seconds() - s->start);
	}
}

/*
 * Redraw the progress line on stderr, at most PROGRESS_HZ times a second:
 * the counts, the bytes read and their rate, and when the inputs are
 * regular files (their size known) the share read and the time left.
 */
static void
stream_progress(struct stream *s, int last)
{
	static double		 shown;
	const struct pl_counts	*ct = pipeline_counts(s->p);
	double			 now = now_seconds(), secs, eta;
	uint64_t		 done, total;

	if (!last && now - shown < 1.0 / PROGRESS_HZ)
		return;
	shown = now;
	secs = now - s->start > 0 ? now - s->start : 1e-9;
	input_progress(s->in, &done, &total);
	fprintf(stderr, "\rmhfilter: %" PRIu64 " records, %" PRIu64
	    " unique, %" PRIu64 " duplicates, %.0f records/s, %.1f MB, "
	    "%.1f MB/s", ct->records, ct->unique, ct->duplicates,
	    ct->records / secs, done / 1e6, done / secs / 1e6);
	if (total > 0 && done <= total) {
		eta = done > 0 ? (total - done) * secs / done : 0;
		fprintf(stderr, ", %.0f%%, %d:%02d left", 100.0 * done / total,
		    (int)(eta / 60), (int)eta % 60);
	}
	fputs("\033[K", stderr);
	if (last)
		fputc('\n', stderr);
	log_progress_line(!last);
}

/*
 * Filter the files (none: standard input) to the output through the
 * pipeline.  Returns the exit status.
 */
int
stream_run(const struct stream_opts *o, struct pipeline *p, char **files,
    int nfiles)
{
	const struct pipeline_opts	*po = pipeline_options(p);
	struct stream			 s;
	struct output			*out, *dupout = NULL;
	struct plbatch			*b;
	char				*cause;
	struct sigaction		 sa;
	int				 outfd = STDOUT_FILENO, status, rc;

	if ((rc = input_output_fd(o->output, o->duplicates_to, files, nfiles,
	    &outfd)) != 0)
		return (rc);

	if (o->duplicates_to != NULL && (dupout = output_open_quarantine(
	    o->duplicates_to, po->format, po->framing, po->delim, &cause)) ==
	    NULL) {
		log_warnx("--duplicates-to %s", cause);
		free(cause);
		if (outfd != STDOUT_FILENO)
			close(outfd);
		return (EXIT_ERROR);
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);	/* write errors are reported */
	sa.sa_handler = stream_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	memset(&s, 0, sizeof s);
	s.o = o;
	s.po = po;
	s.p = p;
	s.in = input_open(files, nfiles, po->framing, po->delim,
	    format_get(po->format)->flags & FMT_PIECES ? po->max_message :
	    po->max_bytes);
	if (format_get(po->format)->flags & FMT_PIECES)
		input_set_pieces(s.in);
	s.start = now_seconds();
	out = output_open(outfd, po->mode, po->format, po->framing,
	    po->delim);
	pipeline_set_output(p, out, o->output != NULL ? o->output : "-");
	pipeline_set_quarantine(p, dupout, o->duplicates_to);
	pipeline_set_deliver(p, stream_deliver, &s);

	status = EXIT_OK;
	while (!s.eof && !stop_signal) {
		if ((b = pipeline_get(p, 1)) == NULL)
			break;		/* it stopped: pipeline_status says */
		rc = stream_read(&s, b);
		pipeline_submit(p, b);
		if (rc == 0 && s.havebig)
			rc = stream_big(&s);
		if (rc != 0) {
			status = rc;
			break;
		}
	}
	/* Every batch read is decided, committed and written. */
	rc = pipeline_finish(p);
	if (status == EXIT_OK)
		status = rc;
	if (s.skipped_files > 0 && status == EXIT_OK)
		status = EXIT_ERROR;
	if (o->progress)
		stream_progress(&s, 1);
	if (stop_signal && status == EXIT_OK) {
		log_warnx("interrupted by signal %d: every record read so far "
		    "was committed and written", (int)stop_signal);
		status = 128 + stop_signal;
	}
	if (o->stats)
		pipeline_print_stats(p, now_seconds() - s.start);

	pipeline_set_output(p, NULL, NULL);
	pipeline_set_quarantine(p, NULL, NULL);
	pipeline_set_deliver(p, NULL, NULL);
	output_close(out);
	output_close(dupout);
	if (outfd != STDOUT_FILENO && close(outfd) == -1 &&
	    status == EXIT_OK) {
		log_warn("--output %s", o->output);
		status = EXIT_ERROR;
	}
	input_close(s.in);
	return (status);
}
