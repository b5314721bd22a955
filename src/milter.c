/*
 * The milter: mhfilter as a mail filter for Postfix and Sendmail
 * (libmilter), a source of the pipeline like the file stream and the
 * daemon.
 *
 *   MTA --SMTP session--> libmilter thread: headers and body gathered
 *       at end of message: the message goes into the open batch,
 *       the thread waits for its verdict
 *   collector thread: submits the batch when it is full, or --batch-delay
 *       after its first message (group commit across SMTP sessions), and
 *       delivers decided batches: each waiting thread gets its verdict
 *   libmilter thread: the verdict's action (a header, quarantine, reject,
 *       discard), then the MTA's answer to the client
 *
 * A message is answered only after the batch that indexed it committed:
 * an MTA that accepted a message as unique never meets it again as
 * unknown.  A batch whose commit fails answers its messages with a
 * temporary failure, so that the sending MTA retries: nothing is lost.
 *
 * Every pipeline call is made under the milter's lock, so that the many
 * libmilter threads and the collector are one source to the pipeline.
 */

#include "config.h"

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <libmilter/mfapi.h>

#include "mhfilter.h"

#define BATCHES_AHEAD	2		/* as daemon.c: one deciding, one next */
#define HEADER_NAME	"X-Mhfilter"

/* One SMTP connection's message and, once decided, its verdict. */
struct mctx {
	struct buf	 msg;		/* header fields and body as received */
	int		 toolong;	/* over --max-bytes: not kept */
	char		 qid[64];	/* the MTA's queue id, for messages */
	int		 forged;	/* X-Mhfilter fields it came with */
	/* Set by milter_deliver. */
	int		 done;
	int		 failed;	/* the batch did not commit */
	int		 kind;		/* V_* */
	double		 sim;
	struct buf	 match;		/* the earlier message's id */
};

struct milter {
	const struct milter_opts	*o;
	struct pipeline			*p;
	pthread_mutex_t			 lock;
	pthread_cond_t			 cond;	/* verdicts, or a batch free */
	struct plbatch			*open;	/* being filled */
	struct mctx			***slotv; /* each batch's waiters */
	size_t				 nslotv;
	double				 opened; /* its first message came */
	uint64_t			 recno;
	int				 stopping;
	int				 wake[2]; /* the collector's */
	pthread_t			 collector;
};

static struct milter	*the_milter;	/* libmilter has no callback arg */

static sfsistat	milter_connect(SMFICTX *, char *, _SOCK_ADDR *);
static sfsistat	milter_envfrom(SMFICTX *, char **);
static sfsistat	milter_header(SMFICTX *, char *, char *);
static sfsistat	milter_eoh(SMFICTX *);
static sfsistat	milter_body(SMFICTX *, unsigned char *, size_t);
static sfsistat	milter_eom(SMFICTX *);
static sfsistat	milter_abort(SMFICTX *);
static sfsistat	milter_close(SMFICTX *);
static void	milter_deliver(void *, struct plbatch *);
static void	*milter_collect(void *);

/* Parse --milter-action. */
int
milter_parse_action(const char *s, int *action)
{
	static const char *const names[] = {
		"header", "quarantine", "reject", "discard"
	};
	int	 i;

	for (i = 0; i < 4; i++) {
		if (strcmp(s, names[i]) == 0) {
			*action = i;
			return (0);
		}
	}
	return (-1);
}

/*
 * Parse --milter-reply: an SMTP reply code (5xx or 4xx), an optional
 * enhanced status code (5.7.1) and a text, into its three parts.
 */
int
milter_parse_reply(const char *s, char *code, char *xcode, char *text,
    size_t textlen, char **cause)
{
	const char	*p = s;
	size_t		 n;

	if (strlen(s) < 3 || (s[0] != '4' && s[0] != '5') ||
	    s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' ||
	    (s[3] != ' ' && s[3] != '\0')) {
		xasprintf(cause, "'%s': start with a 4xx or 5xx SMTP code, as "
		    "in '550 5.7.1 Duplicate message'", s);
		return (-1);
	}
	memcpy(code, s, 3);
	code[3] = '\0';
	p = s + 3 + (s[3] == ' ');
	xcode[0] = '\0';
	n = strspn(p, "0123456789.");
	if (n > 0 && n < 16 && p[0] == s[0] && p[1] == '.' &&
	    (p[n] == ' ' || p[n] == '\0')) {
		memcpy(xcode, p, n);
		xcode[n] = '\0';
		p += n + (p[n] == ' ');
	}
	if (strlen(p) >= textlen || strchr(p, '\n') != NULL ||
	    strchr(p, '%') != NULL) {
		xasprintf(cause, "'%s': the text must be one line of at most "
		    "%zu bytes without %%", s, textlen - 1);
		return (-1);
	}
	snprintf(text, textlen, "%s", *p != '\0' ? p : "Duplicate message");
	return (0);
}

/* A new SMTP connection: its context. */
static sfsistat
milter_connect(SMFICTX *ctx, char *host, _SOCK_ADDR *sa)
{
	struct mctx	*m;

	m = xcalloc(1, sizeof *m);
	if (smfi_setpriv(ctx, m) != MI_SUCCESS) {
		free(m);
		return (SMFIS_TEMPFAIL);
	}
	return (SMFIS_CONTINUE);
}

/* A new message on the connection: forget the last one. */
static sfsistat
milter_envfrom(SMFICTX *ctx, char **argv)
{
	struct mctx	*m = smfi_getpriv(ctx);
	const char	*qid;

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	buf_trim(&m->msg);
	m->msg.len = 0;
	m->toolong = 0;
	m->forged = 0;
	qid = smfi_getsymval(ctx, "i");
	snprintf(m->qid, sizeof m->qid, "%s", qid != NULL ? qid : "-");
	return (SMFIS_CONTINUE);
}

/* Append to the message unless it is over --max-bytes already. */
static void
milter_append(struct mctx *m, const void *p, size_t len)
{
	if (m->toolong)
		return;
	if (m->msg.len + len > pipeline_options(the_milter->p)->max_bytes) {
		/* Not kept: the message passes undecided (milter_eom). */
		m->toolong = 1;
		buf_free(&m->msg);
		return;
	}
	buf_append(&m->msg, p, len);
}

/* A header field, as the MTA passes it (unfolded or not). */
static sfsistat
milter_header(SMFICTX *ctx, char *name, char *value)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	if (strcasecmp(name, HEADER_NAME) == 0) {
		/* A verdict that did not come from us: not kept. */
		m->forged++;
		return (SMFIS_CONTINUE);
	}
	milter_append(m, name, strlen(name));
	milter_append(m, ": ", 2);
	milter_append(m, value, strlen(value));
	milter_append(m, "\n", 1);
	return (SMFIS_CONTINUE);
}

/* The end of the header. */
static sfsistat
milter_eoh(SMFICTX *ctx)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	milter_append(m, "\n", 1);
	return (SMFIS_CONTINUE);
}

/* A piece of the body. */
static sfsistat
milter_body(SMFICTX *ctx, unsigned char *p, size_t len)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	milter_append(m, p, len);
	return (SMFIS_CONTINUE);
}

/* Wake the collector: a batch was opened, or the milter stops. */
static void
milter_wake(struct milter *mt)
{
	if (write(mt->wake[1], "", 1) == -1 && errno != EAGAIN)
		log_warn("milter: wake");
}

/*
 * Put the message into the open batch (opening one, or waiting for a
 * free one) and wait for its verdict.  Called with the lock held.
 */
static void
milter_decide(struct milter *mt, struct mctx *m)
{
	const struct pipeline_opts	*po = pipeline_options(mt->p);
	struct record			*r;
	struct mctx			**slots;

	while (mt->open == NULL) {
		if ((mt->open = pipeline_get(mt->p, 0)) != NULL) {
			mt->opened = now_seconds();
			milter_wake(mt);
			break;
		}
		pthread_cond_wait(&mt->cond, &mt->lock);
	}
	if ((slots = mt->open->arg) == NULL) {
		slots = mt->open->arg = xcalloc(po->batch, sizeof *slots);
		mt->slotv = xreallocarray(mt->slotv, mt->nslotv + 1,
		    sizeof *mt->slotv);
		mt->slotv[mt->nslotv++] = slots;
	}
	slots[mt->open->n] = m;
	r = plbatch_add(mt->open, m->msg.len, m->msg.len);
	memcpy(r->raw.data, m->msg.data, m->msg.len);
	r->recno = r->line = ++mt->recno;
	r->file = m->qid;
	m->done = 0;
	if (plbatch_full(mt->open, po->batch)) {
		pipeline_submit(mt->p, mt->open);
		mt->open = NULL;
	}
	while (!m->done)
		pthread_cond_wait(&mt->cond, &mt->lock);
}

/*
 * Add the X-Mhfilter header field of the verdict, removing those the
 * message came with (a sender could forge a verdict).
 */
static void
milter_add_header(SMFICTX *ctx, struct mctx *m)
{
	struct verdict	 v;
	struct buf	 b = { 0 };
	char		*value;
	int		 i;

	for (i = m->forged; i > 0; i--) {
		if (smfi_chgheader(ctx, HEADER_NAME, i, NULL) != MI_SUCCESS)
			log_warnx("milter: %s: cannot remove a header", m->qid);
	}

	memset(&v, 0, sizeof v);
	v.kind = m->kind;
	v.sim = m->sim;
	v.match = m->match;
	output_mail_header(&b, &v, 0, "");
	buf_append(&b, "", 1);
	value = b.data + sizeof HEADER_NAME + 1;	/* after "X-Mhfilter: " */
	if (smfi_insheader(ctx, 0, HEADER_NAME, value) != MI_SUCCESS)
		log_warnx("milter: %s: cannot add the header", m->qid);
	buf_free(&b);
}

/*
 * The end of a message: decide it through the pipeline, then act on the
 * verdict as --milter-action says.
 */
static sfsistat
milter_eom(SMFICTX *ctx)
{
	struct milter	*mt = the_milter;
	struct mctx	*m = smfi_getpriv(ctx);
	char		 reason[128];

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	if (m->toolong) {
		log_info("milter: %s: over --max-bytes %" PRIu64 ": passed "
		    "undecided", m->qid, pipeline_options(mt->p)->max_bytes);
		pthread_mutex_lock(&mt->lock);
		pipeline_counts(mt->p)->records++;
		pipeline_counts(mt->p)->too_long++;
		pthread_mutex_unlock(&mt->lock);
		return (SMFIS_ACCEPT);
	}
	pthread_mutex_lock(&mt->lock);
	milter_decide(mt, m);
	pthread_mutex_unlock(&mt->lock);
	buf_trim(&m->msg);
	m->msg.len = 0;

	if (m->failed)
		return (SMFIS_TEMPFAIL);	/* the sender retries */
	if (m->kind != V_UNIQUE && m->kind != V_DUPLICATE &&
	    m->kind != V_EMPTY)
		return (SMFIS_ACCEPT);		/* unreadable: passed */
	if (m->kind != V_DUPLICATE) {
		milter_add_header(ctx, m);
		return (SMFIS_CONTINUE);
	}
	switch (mt->o->action) {
	case MILTER_REJECT:
		if (smfi_setreply(ctx, (char *)mt->o->reply_code,
		    mt->o->reply_xcode[0] != '\0' ?
		    (char *)mt->o->reply_xcode : NULL,
		    (char *)mt->o->reply_text) != MI_SUCCESS)
			log_warnx("milter: %s: cannot set the reply", m->qid);
		return (SMFIS_REJECT);
	case MILTER_DISCARD:
		return (SMFIS_DISCARD);
	case MILTER_QUARANTINE:
		snprintf(reason, sizeof reason, "mhfilter: duplicate, "
		    "similarity %.2f", m->sim);
		if (smfi_quarantine(ctx, reason) != MI_SUCCESS)
			log_warnx("milter: %s: cannot quarantine", m->qid);
		break;
	}
	milter_add_header(ctx, m);
	return (SMFIS_CONTINUE);
}

/* The message was aborted (RSET, or the session ended). */
static sfsistat
milter_abort(SMFICTX *ctx)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m != NULL) {
		buf_trim(&m->msg);
		m->msg.len = 0;
	}
	return (SMFIS_CONTINUE);
}

/* The connection closed: free its context. */
static sfsistat
milter_close(SMFICTX *ctx)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m != NULL) {
		buf_free(&m->msg);
		buf_free(&m->match);
		free(m);
		smfi_setpriv(ctx, NULL);
	}
	return (SMFIS_CONTINUE);
}

/* A batch was decided: give each waiting thread its verdict. */
static void
milter_deliver(void *arg, struct plbatch *b)
{
	struct milter	*mt = arg;
	struct mctx	**slots = b->arg, *m;
	size_t		 i;

	for (i = 0; i < b->n; i++) {
		m = slots[i];
		m->failed = b->rc != 0;
		m->kind = b->vs[i].kind;
		m->sim = b->vs[i].sim;
		m->match.len = 0;
		buf_append(&m->match, b->vs[i].match.data,
		    b->vs[i].match.len);
		m->done = 1;
	}
	if (b->rc == PL_FAILED)
		log_warnx("milter: a batch of %zu messages failed: %s; "
		    "answered with a temporary failure", b->n, b->cause);
	pthread_cond_broadcast(&mt->cond);
}

/*
 * The collector thread: submit the open batch once its delay is over (or
 * at once when stopping) unless two are in flight, and deliver the
 * decided ones; until stopping and nothing is left.
 */
static void *
milter_collect(void *arg)
{
	struct milter	*mt = arg;
	struct pollfd	 pfd[2];
	double		 left;
	char		 drain[64];
	int		 timeout;

	pfd[0].fd = pipeline_notify_fd(mt->p);
	pfd[1].fd = mt->wake[0];
	pfd[0].events = pfd[1].events = POLLIN;
	pthread_mutex_lock(&mt->lock);
	for (;;) {
		timeout = -1;
		if (mt->open != NULL) {
			left = mt->opened + mt->o->batch_delay - now_seconds();
			if (left > 0 && !mt->stopping)
				timeout = (int)(left * 1000) + 1;
			else if (pipeline_inflight(mt->p) < BATCHES_AHEAD) {
				pipeline_submit(mt->p, mt->open);
				mt->open = NULL;
			}
			/* Else it waits for a delivery (the notify fd). */
		}
		if (mt->stopping && mt->open == NULL &&
		    pipeline_inflight(mt->p) == 0)
			break;
		pthread_mutex_unlock(&mt->lock);
		if (poll(pfd, 2, timeout) == -1 && errno != EINTR)
			fatal("milter: poll");
		while (read(mt->wake[0], drain, sizeof drain) > 0)
			;
		pthread_mutex_lock(&mt->lock);
		if (pipeline_deliver(mt->p, 0) > 0)
			pthread_cond_broadcast(&mt->cond);	/* free batches */
	}
	pthread_mutex_unlock(&mt->lock);
	return (NULL);
}

/*
 * Run the milter on o->socket until SIGTERM or SIGINT (libmilter's).
 * Returns the exit status.
 */
int
milter_run(const struct milter_opts *o, struct pipeline *p)
{
	struct smfiDesc	 desc;
	struct sigaction sa;
	struct milter	 mt;
	size_t		 i;
	double		 start = now_seconds();
	int		 rc, status = EXIT_OK;

	memset(&mt, 0, sizeof mt);
	mt.o = o;
	mt.p = p;
	if (pthread_mutex_init(&mt.lock, NULL) != 0 ||
	    pthread_cond_init(&mt.cond, NULL) != 0)
		fatalx("cannot make a mutex");
	if (pipe2(mt.wake, O_CLOEXEC|O_NONBLOCK) == -1)
		fatal("pipe");
	the_milter = &mt;
	pipeline_set_deliver(p, milter_deliver, &mt);
	/* Write errors are reported (a failed commit), not signals. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGXFSZ, &sa, NULL);

	memset(&desc, 0, sizeof desc);
	desc.xxfi_name = "mhfilter";
	desc.xxfi_version = SMFI_VERSION;
	desc.xxfi_flags = SMFIF_ADDHDRS | SMFIF_CHGHDRS | SMFIF_QUARANTINE;
	desc.xxfi_connect = milter_connect;
	desc.xxfi_envfrom = milter_envfrom;
	desc.xxfi_header = milter_header;
	desc.xxfi_eoh = milter_eoh;
	desc.xxfi_body = milter_body;
	desc.xxfi_eom = milter_eom;
	desc.xxfi_abort = milter_abort;
	desc.xxfi_close = milter_close;
	if (smfi_setconn((char *)o->socket) != MI_SUCCESS ||
	    smfi_register(desc) != MI_SUCCESS) {
		log_warnx("--milter %s: cannot set up libmilter", o->socket);
		status = EXIT_ERROR;
		goto out;
	}
	if (smfi_opensocket(1) != MI_SUCCESS) {
		log_warnx("--milter %s: cannot listen (a bad address, or no "
		    "permission)", o->socket);
		status = EXIT_ERROR;
		goto out;
	}
	thread_start(&mt.collector, milter_collect, &mt);
	log_info("ready: milter on %s; duplicates get %s", o->socket,
	    o->action == MILTER_HEADER ? "a header" :
	    o->action == MILTER_QUARANTINE ? "quarantine" :
	    o->action == MILTER_REJECT ? "rejected" : "discarded");
	notify_send("READY=1\nSTATUS=milter on %s", o->socket);
	rc = smfi_main();

	/* libmilter has stopped its sessions: finish what is in flight. */
	pthread_mutex_lock(&mt.lock);
	mt.stopping = 1;
	milter_wake(&mt);
	pthread_mutex_unlock(&mt.lock);
	if (pthread_join(mt.collector, NULL) != 0)
		fatalx("cannot join the collector");
	if (rc != MI_SUCCESS)
		status = EXIT_ERROR;
	if (status == EXIT_OK)
		status = pipeline_status(p);
	if (o->stats)
		stream_print_stats(p, now_seconds() - start);
	log_info("milter stopped after %" PRIu64 " messages", mt.recno);
out:
	pipeline_set_deliver(p, NULL, NULL);
	for (i = 0; i < mt.nslotv; i++)
		free(mt.slotv[i]);
	free(mt.slotv);
	close(mt.wake[0]);
	close(mt.wake[1]);
	pthread_mutex_destroy(&mt.lock);
	pthread_cond_destroy(&mt.cond);
	the_milter = NULL;
	return (status);
}
