/*
 * The milter: mhfilter as a mail filter for Postfix and Sendmail
 * (libmilter), a source of the pipeline like the file stream and the
 * daemon.
 *
 *   MTA --SMTP session--> libmilter thread: envelope recipients, header
 *       and body gathered; at end of message the message is read as mail
 *       (record_parse, in this thread: sessions parse in parallel) and
 *       goes into the open batch as one record for each recipient (or one
 *       for the message, --milter-scope message); the thread waits for
 *       the verdicts
 *   collector thread: the open batch is submitted when it is full, or
 *       --batch-delay after its first message (group commit across SMTP
 *       sessions: pipeline_add, pipeline_due), and delivers decided
 *       batches: each waiting thread gets its verdicts; SIGUSR1 logs the
 *       counters
 *   libmilter thread: the recipients who already had the message are
 *       removed (smfi_delrcpt), or, when all had it, the action (a header,
 *       quarantine, reject, discard) applies; then the MTA's answer
 *
 * A recipient's record is scoped (lsh_scope): its band keys and signature
 * are salted by a hash of the lower-cased address, so it meets only that
 * recipient's earlier records, and "seen" (the same Message-ID and text
 * again) is per recipient too: a message delivered to alice is new to
 * carol.  A message's records are all in one batch, so that it is indexed
 * for all its recipients or none.
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>
#include <libmilter/mfapi.h>

#include "mhfilter.h"

#define LOG_RCPTS	5		/* removed recipients named in a line */

/* An envelope recipient and, once decided, its record's verdict. */
struct mrcpt {
	char		*addr;		/* as the MTA gave it (smfi_delrcpt) */
	uint64_t	 scope;		/* of the address, lower-cased */
	int		 kind;		/* V_* */
	int		 seen;		/* its own copy was delivered before */
	double		 sim;
	struct buf	 match;		/* the earlier message's id */
	const char	*why;		/* V_UNCHECKED: the reason */
};

/* One SMTP connection's message and, once decided, its verdicts. */
struct mctx {
	struct record	 rec;		/* raw: header fields and body */
	int		 toolong;	/* over --max-bytes: not kept */
	char		 qid[64];	/* the MTA's queue id, for messages */
	char		 msgid[256];	/* its Message-ID field, for messages */
	int		 forged;	/* X-Mhfilter fields it came with */
	struct mrcpt	*rcpt;
	size_t		 nrcpt;
	size_t		 rcptsize;
	struct mrcpt	 whole;		/* the verdict of an unscoped record */
	int		 scoped;	/* a record each recipient */
	/* Set by milter_deliver. */
	int		 done;
	int		 failed;	/* the batch did not commit */
	size_t		 got;		/* verdicts delivered so far */
};

struct milter {
	const struct milter_opts	*o;
	struct pipeline			*p;
	pthread_mutex_t			 lock;
	pthread_cond_t			 cond;	/* verdicts, or a batch free */
	uint64_t			 recno;
	uint64_t			 messages; /* decided or passed */
	int				 stopping;
	int				 lost;		/* the index: stopping
							   (milter_deliver) */
	int				 wake[2]; /* the collector's */
	int				 sigfd;	/* SIGUSR1 */
	pthread_t			 collector;
	int				 failing; /* the last batch failed */
	double				 started;
	/* What it did (/metrics, the log line). */
	uint64_t			 removed;	/* recipients */
	uint64_t			 rejected;
	uint64_t			 discarded;
	uint64_t			 quarantined;
	uint64_t			 tempfailed;
	/* --http: a thread of its own. */
	struct event_base		*base;
	struct metrics			*metrics;
	struct event			*stop_ev;
	int				 http_stop[2];
	pthread_t			 http_thread;
	int				 http_running;
};

static struct milter	*the_milter;	/* libmilter has no callback arg */

static sfsistat	milter_connect(SMFICTX *, char *, _SOCK_ADDR *);
static sfsistat	milter_envfrom(SMFICTX *, char **);
static sfsistat	milter_envrcpt(SMFICTX *, char **);
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

/* Forget a connection's message and its recipients. */
static void
milter_forget(struct mctx *m)
{
	size_t	 i;

	record_reset(&m->rec);
	for (i = 0; i < m->nrcpt; i++) {
		free(m->rcpt[i].addr);
		buf_free(&m->rcpt[i].match);
	}
	buf_free(&m->whole.match);
	m->whole.why = NULL;
	m->nrcpt = 0;
	m->toolong = 0;
	m->forged = 0;
	m->msgid[0] = '\0';
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
	milter_forget(m);
	qid = smfi_getsymval(ctx, "i");
	snprintf(m->qid, sizeof m->qid, "%s", qid != NULL ? qid : "-");
	return (SMFIS_CONTINUE);
}

/*
 * An envelope recipient: kept with the scope of its lower-cased address
 * without angle brackets, once (RCPT TO twice for one address is one
 * recipient: its second record would be a duplicate of its first).
 */
static sfsistat
milter_envrcpt(SMFICTX *ctx, char **argv)
{
	struct mctx	*m = smfi_getpriv(ctx);
	struct mrcpt	*r;
	const char	*a;
	char		*low;
	size_t		 len, i;
	uint64_t	 scope;

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	if (argv == NULL || argv[0] == NULL)
		return (SMFIS_CONTINUE);
	a = argv[0];
	len = strlen(a);
	if (len >= 2 && a[0] == '<' && a[len - 1] == '>') {
		a++;
		len -= 2;
	}
	low = xstrndup(a, len);
	for (i = 0; i < len; i++)
		low[i] = tolower((unsigned char)low[i]);
	scope = lsh_scope_key(low, len);
	free(low);
	for (i = 0; i < m->nrcpt; i++) {
		if (m->rcpt[i].scope == scope)
			return (SMFIS_CONTINUE);
	}
	if (m->nrcpt == m->rcptsize) {
		m->rcptsize = m->rcptsize ? 2 * m->rcptsize : 4;
		m->rcpt = xreallocarray(m->rcpt, m->rcptsize, sizeof *m->rcpt);
	}
	r = &m->rcpt[m->nrcpt++];
	memset(r, 0, sizeof *r);
	r->addr = xstrdup(argv[0]);
	r->scope = scope;
	return (SMFIS_CONTINUE);
}

/* Append to the message unless it is over --max-bytes already. */
static void
milter_append(struct mctx *m, const void *p, size_t len)
{
	if (m->toolong)
		return;
	if (m->rec.raw.len + len > pipeline_options(the_milter->p)->max_bytes) {
		/* Not kept: the message passes unchecked (milter_eom). */
		m->toolong = 1;
		buf_free(&m->rec.raw);
		return;
	}
	buf_append(&m->rec.raw, p, len);
}

/* A header field, as the MTA passes it (unfolded or not). */
static sfsistat
milter_header(SMFICTX *ctx, char *name, char *value)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	if (strcasecmp(name, MAIL_FIELD) == 0) {
		/* A verdict that did not come from us: not kept. */
		m->forged++;
		return (SMFIS_CONTINUE);
	}
	if (strcasecmp(name, "Message-ID") == 0) {
		/* For the log, of a message too large to read too. */
		value += strspn(value, " \t<");
		snprintf(m->msgid, sizeof m->msgid, "%.*s",
		    (int)strcspn(value, "> \t\r\n"), value);
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

/* A batch was opened: the collector times its delay. */
static void
milter_opened(void *arg)
{
	milter_wake(arg);
}

/*
 * Put the message's records, parsed, into the open batch (opening one,
 * or waiting for a free one), all into the same batch, and wait for their
 * verdicts.  One record a recipient, scoped, or one unscoped record with
 * --milter-scope message or no recipient.  Called with the lock held.
 */
static void
milter_decide(struct milter *mt, struct mctx *m)
{
	struct record	*r;
	size_t		 i, n;

	m->scoped = mt->o->scope == MILTER_SCOPE_RECIPIENT && m->nrcpt > 0;
	n = m->scoped ? m->nrcpt : 1;
	while (!pipeline_ready(mt->p))
		pthread_cond_wait(&mt->cond, &mt->lock);
	for (i = 0; i < n; i++) {
		/* The open batch takes them all (pipeline_added submits). */
		r = pipeline_add_parsed(mt->p, m, i == 0 ? m->rec.raw.len : 0,
		    &m->rec);
		r->recno = r->line = ++mt->recno;
		r->file = m->qid;
		r->scope = m->scoped ? m->rcpt[i].scope : 0;
	}
	m->done = 0;
	m->got = 0;
	pipeline_added(mt->p);
	while (!m->done)
		pthread_cond_wait(&mt->cond, &mt->lock);
}

/*
 * Replace the X-Mhfilter fields the message came with (a sender could
 * forge a verdict) by value, if not NULL.
 */
static void
milter_set_header(SMFICTX *ctx, struct mctx *m, const char *value)
{
	int	 i;

	for (i = m->forged; i > 0; i--) {
		if (smfi_chgheader(ctx, MAIL_FIELD, i, NULL) != MI_SUCCESS)
			log_warnx("milter: %s: cannot remove a header", m->qid);
	}
	if (value != NULL &&
	    smfi_insheader(ctx, 0, MAIL_FIELD, (char *)value) != MI_SUCCESS)
		log_warnx("milter: %s: cannot add the header", m->qid);
}

/* The X-Mhfilter field of a recipient's verdict (output.c's value). */
static void
milter_add_header(SMFICTX *ctx, struct mctx *m, const struct mrcpt *rc)
{
	struct verdict	 v;
	struct buf	 b = { 0 };

	memset(&v, 0, sizeof v);
	v.kind = rc->kind;
	v.seen = rc->seen;
	v.sim = rc->sim;
	v.match = rc->match;
	v.error = (char *)rc->why;
	output_mail_value(&b, &v, 0);
	buf_append(&b, "", 1);
	milter_set_header(ctx, m, b.data);
	buf_free(&b);
}

/*
 * One line about the message: at info level when the milter changed its
 * delivery (a recipient removed, or the message rejected, discarded or
 * quarantined), else with -v only.
 */
static void
milter_log(const struct mctx *m, int changed, const char *fmt, ...)
{
	va_list		 ap;
	char		 what[512];
	const char	*id = m->msgid;
	int		 len = strlen(m->msgid);

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (m->rec.id.len > 0) {
		/* As read (mail.c), as it is indexed. */
		id = m->rec.id.data;
		len = m->rec.id.len < 256 ? (int)m->rec.id.len : 256;
	}
	if (changed)
		log_info("milter: %s: message-id=<%.*s>: %s", m->qid, len, id,
		    what);
	else
		log_debug("milter: %s: message-id=<%.*s>: %s", m->qid, len,
		    id, what);
}

/* Count something the milter did to a message. */
static void
milter_did(uint64_t *counter)
{
	pthread_mutex_lock(&the_milter->lock);
	(*counter)++;
	pthread_mutex_unlock(&the_milter->lock);
}

/* "duplicate of <id>, similarity 0.93" (or seen) into b. */
static void
milter_dupstr(const struct mrcpt *rc, char *b, size_t len)
{
	snprintf(b, len, "%s of <%.*s>, similarity %.2f",
	    rc->seen ? "seen (its own copy delivered before)" : "duplicate",
	    (int)(rc->match.len < 256 ? rc->match.len : 256),
	    rc->match.data != NULL ? rc->match.data : "", rc->sim);
}

/*
 * The recipients who already had the message, when others had not: they
 * are removed unless the action is header (which removes nothing: the
 * field is the message's, "unique" for the others).
 */
static sfsistat
milter_some(SMFICTX *ctx, struct mctx *m, const struct mrcpt *first_dup,
    const struct mrcpt *first_new, size_t ndup)
{
	struct milter	*mt = the_milter;
	struct buf	 who = { 0 };
	char		 dup[400];
	size_t		 i, named = 0;

	milter_dupstr(first_dup, dup, sizeof dup);
	milter_add_header(ctx, m, first_new);
	if (mt->o->action == MILTER_HEADER) {
		milter_log(m, 0, "%s for %zu of %zu recipients: delivered to "
		    "all, marked %s", dup, ndup, m->nrcpt,
		    first_new->kind == V_UNIQUE ? "unique" : "empty");
		return (SMFIS_CONTINUE);
	}
	for (i = 0; i < m->nrcpt; i++) {
		if (m->rcpt[i].kind != V_DUPLICATE)
			continue;
		if (smfi_delrcpt(ctx, m->rcpt[i].addr) != MI_SUCCESS) {
			log_warnx("milter: %s: cannot remove recipient %s",
			    m->qid, m->rcpt[i].addr);
			continue;
		}
		milter_did(&mt->removed);
		if (named++ < LOG_RCPTS) {
			if (who.len > 0)
				buf_append(&who, " ", 1);
			buf_append(&who, m->rcpt[i].addr,
			    strlen(m->rcpt[i].addr));
		}
	}
	buf_append(&who, "", 1);
	milter_log(m, 1, "%s for %zu of %zu recipients: removed %s%s; "
	    "delivered to the others", dup, ndup, m->nrcpt, who.data,
	    named > LOG_RCPTS ? " and others" : "");
	buf_free(&who);
	return (SMFIS_CONTINUE);
}

/* Every recipient (or the message) had it: the action applies. */
static sfsistat
milter_all(SMFICTX *ctx, struct mctx *m, const struct mrcpt *rc)
{
	struct milter	*mt = the_milter;
	char		 reason[128], dup[400];

	milter_dupstr(rc, dup, sizeof dup);
	switch (mt->o->action) {
	case MILTER_REJECT:
		if (smfi_setreply(ctx, (char *)mt->o->reply_code,
		    mt->o->reply_xcode[0] != '\0' ?
		    (char *)mt->o->reply_xcode : NULL,
		    (char *)mt->o->reply_text) != MI_SUCCESS)
			log_warnx("milter: %s: cannot set the reply", m->qid);
		milter_did(&mt->rejected);
		milter_log(m, 1, "%s: rejected", dup);
		return (SMFIS_REJECT);
	case MILTER_DISCARD:
		milter_did(&mt->discarded);
		milter_log(m, 1, "%s: discarded", dup);
		return (SMFIS_DISCARD);
	case MILTER_QUARANTINE:
		snprintf(reason, sizeof reason, "mhfilter: duplicate, "
		    "similarity %.2f", rc->sim);
		if (smfi_quarantine(ctx, reason) != MI_SUCCESS)
			log_warnx("milter: %s: cannot quarantine", m->qid);
		milter_did(&mt->quarantined);
		milter_log(m, 1, "%s: quarantined", dup);
		break;
	default:
		milter_log(m, 0, "%s: marked", dup);
		break;
	}
	milter_add_header(ctx, m, rc);
	return (SMFIS_CONTINUE);
}

/* Count a message that went into no batch (records, and its kind). */
static void
milter_count(struct milter *mt, int kind)
{
	pthread_mutex_lock(&mt->lock);
	pipeline_count_alone(mt->p, kind, 0);
	mt->messages++;
	pthread_mutex_unlock(&mt->lock);
}

/*
 * The end of a message: read it as mail, decide it through the pipeline
 * for each recipient, then act on the verdicts as --milter-action says.
 */
static sfsistat
milter_eom(SMFICTX *ctx)
{
	struct milter	*mt = the_milter;
	struct mctx	*m = smfi_getpriv(ctx);
	struct mrcpt	*rc, *first_dup = NULL, *first_new = NULL;
	char		*cause = NULL;
	size_t		 i, n, ndup = 0;
	int		 rv;

	if (m == NULL)
		return (SMFIS_TEMPFAIL);
	if (m->toolong) {
		milter_count(mt, V_UNCHECKED);
		m->whole.kind = V_UNCHECKED;
		m->whole.why = "too-large";
		milter_add_header(ctx, m, &m->whole);
		milter_log(m, 0, "over --max-bytes %" PRIu64 ": passed "
		    "unchecked", pipeline_options(mt->p)->max_bytes);
		return (SMFIS_CONTINUE);
	}
	if ((rv = record_parse(&m->rec, FORMAT_MAIL, NULL, NULL,
	    &cause)) != 0) {
		/* 1: mail that cannot be judged, cause its reason. */
		milter_count(mt, rv == 1 ? V_UNCHECKED : V_BAD);
		if (rv == 1) {
			m->whole.kind = V_UNCHECKED;
			m->whole.why = cause;
			milter_add_header(ctx, m, &m->whole);
			m->whole.why = NULL;
		} else
			milter_set_header(ctx, m, NULL);
		milter_log(m, 0, "%s: passed %s", cause, rv == 1 ?
		    "unchecked" : "without a verdict");
		free(cause);
		return (SMFIS_CONTINUE);
	}
	pthread_mutex_lock(&mt->lock);
	mt->messages++;
	milter_decide(mt, m);
	pthread_mutex_unlock(&mt->lock);
	buf_trim(&m->rec.raw);

	if (m->failed) {
		milter_did(&mt->tempfailed);
		milter_log(m, 1, "its batch did not commit: temporary failure");
		return (SMFIS_TEMPFAIL);	/* the sender retries */
	}
	n = m->scoped ? m->nrcpt : 1;
	for (i = 0; i < n; i++) {
		rc = m->scoped ? &m->rcpt[i] : &m->whole;
		if (rc->kind == V_DUPLICATE) {
			if (ndup++ == 0)
				first_dup = rc;
		} else if (first_new == NULL)
			first_new = rc;
	}
	if (ndup == 0) {
		milter_add_header(ctx, m, first_new);
		milter_log(m, 0, "%s", first_new->kind == V_UNIQUE ? "unique" :
		    "empty (no text to compare)");
		return (SMFIS_CONTINUE);
	}
	if (ndup < n)
		return (milter_some(ctx, m, first_dup, first_new, ndup));
	return (milter_all(ctx, m, first_dup));
}

/* The message was aborted (RSET, or the session ended). */
static sfsistat
milter_abort(SMFICTX *ctx)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m != NULL)
		milter_forget(m);
	return (SMFIS_CONTINUE);
}

/* The connection closed: free its context. */
static sfsistat
milter_close(SMFICTX *ctx)
{
	struct mctx	*m = smfi_getpriv(ctx);

	if (m != NULL) {
		milter_forget(m);
		record_free(&m->rec);
		free(m->rcpt);
		free(m);
		smfi_setpriv(ctx, NULL);
	}
	return (SMFIS_CONTINUE);
}

/* A batch was decided: give each waiting thread its verdicts. */
static void
milter_deliver(void *arg, struct plbatch *b)
{
	struct milter	*mt = arg;
	struct mctx	*m;
	struct mrcpt	*rc;
	size_t		 i;

	if (b->rc != PL_DROPPED)
		metrics_batch(mt->metrics, b->seconds);
	if (b->rc == PL_FAILED) {
		log_warnx("milter: a batch of %zu records failed: %s; "
		    "answered with a temporary failure", b->n, b->cause);
		mt->failing = 1;
		/* An index lost (pipeline_decide): no batch may go on. */
		if (pipeline_status(mt->p) != EXIT_OK && !mt->lost) {
			mt->lost = 1;
			log_warnx("milter: stopping on an index error");
			smfi_stop();
		}
	} else if (b->rc == 0 && mt->failing) {
		log_info("milter: batches are committed again");
		mt->failing = 0;
	}
	for (i = 0; i < b->n; i++) {
		m = b->slots[i].owner;
		rc = m->scoped ? &m->rcpt[m->got] : &m->whole;
		m->got++;
		m->failed = b->rc != 0;
		rc->kind = b->vs[i].kind;
		rc->seen = b->vs[i].seen;
		rc->sim = b->vs[i].sim;
		rc->match.len = 0;
		buf_append(&rc->match, b->vs[i].match.data,
		    b->vs[i].match.len);
		m->done = m->got == (m->scoped ? m->nrcpt : 1);
	}
	pthread_cond_broadcast(&mt->cond);
}

/* The counters, as the log line and /metrics name them. */
static void
milter_stats(void *arg, struct mstats *st)
{
	struct milter		*mt = arg;
	struct pl_counts	*ct;

	pthread_mutex_lock(&mt->lock);
	ct = pipeline_counts(mt->p);
	mstats_add(st, "records", NULL, 1, MS_LINE, (double)ct->records,
	    "Records: one a recipient of each message (or a message).");
	mstats_pipeline(st, mt->p, now_seconds() - mt->started);
	mstats_add(st, "messages", NULL, 1, MS_BOTH, (double)mt->messages,
	    "Messages the MTA passed to the milter.");
#define A(what, val)	mstats_add(st, "milter_actions", "action=\""	\
	what "\"", 1, MS_METRIC, (double)(val), "What the milter did "	\
	"to messages: recipients removed (those who already had it), "	\
	"the message rejected, discarded or quarantined, or a "	\
	"temporary failure.")
	A("recipients_removed", mt->removed);
	A("rejected", mt->rejected);
	A("discarded", mt->discarded);
	A("quarantined", mt->quarantined);
	A("tempfail", mt->tempfailed);
#undef A
	mstats_add(st, "recipients_removed", NULL, 1, MS_LINE,
	    (double)mt->removed, "");
	mstats_add(st, "rejected", NULL, 1, MS_LINE, (double)mt->rejected, "");
	mstats_add(st, "discarded", NULL, 1, MS_LINE, (double)mt->discarded,
	    "");
	mstats_add(st, "quarantined", NULL, 1, MS_LINE,
	    (double)mt->quarantined, "");
	mstats_add(st, "tempfail", NULL, 1, MS_LINE, (double)mt->tempfailed,
	    "");
	mstats_add(st, "uptime_seconds", NULL, 0, MS_LINE,
	    now_seconds() - mt->started, "");
	pthread_mutex_unlock(&mt->lock);
}

/* /healthz: well while batches commit and it is not stopping. */
static const char *
milter_health(void *arg)
{
	struct milter	*mt = arg;
	const char	*why = NULL;

	pthread_mutex_lock(&mt->lock);
	if (mt->stopping)
		why = "stopping";
	else if (mt->failing)
		why = "the last batch failed to commit";
	pthread_mutex_unlock(&mt->lock);
	return (why);
}

/*
 * The collector thread: the open batch is due once its delay is over (or
 * at once when stopping), deliver the decided ones and log the counters
 * on SIGUSR1; until stopping and nothing is left.
 */
static void *
milter_collect(void *arg)
{
	struct milter		*mt = arg;
	struct pollfd		 pfd[3];
	struct signalfd_siginfo	 si;
	double			 left;
	char			 drain[64];
	int			 timeout, usr1;

	pfd[0].fd = pipeline_notify_fd(mt->p);
	pfd[1].fd = mt->wake[0];
	pfd[2].fd = mt->sigfd;
	pfd[0].events = pfd[1].events = pfd[2].events = POLLIN;
	pthread_mutex_lock(&mt->lock);
	for (;;) {
		timeout = -1;
		left = pipeline_open_left(mt->p);
		if (left > 0 && !mt->stopping)
			timeout = (int)(left * 1000) + 1;
		else if (left >= 0)
			pipeline_due(mt->p);	/* or at the next delivery */
		if (mt->stopping && pipeline_open_left(mt->p) < 0 &&
		    pipeline_inflight(mt->p) == 0)
			break;
		pthread_mutex_unlock(&mt->lock);
		if (poll(pfd, 3, timeout) == -1 && errno != EINTR)
			fatal("milter: poll");
		while (read(mt->wake[0], drain, sizeof drain) > 0)
			;
		usr1 = 0;
		while (read(mt->sigfd, &si, sizeof si) == sizeof si)
			usr1 = 1;
		if (usr1)
			mstats_log(milter_stats, mt);
		pthread_mutex_lock(&mt->lock);
		if (pipeline_deliver(mt->p, 0) > 0)
			pthread_cond_broadcast(&mt->cond);	/* free batches */
	}
	pthread_mutex_unlock(&mt->lock);
	return (NULL);
}

/* The HTTP thread's loop ends: the milter stops. */
static void
milter_http_stop(evutil_socket_t fd, short events, void *arg)
{
	event_base_loopbreak(arg);
}

/* The HTTP thread: /metrics and /healthz until the milter stops. */
static void *
milter_http(void *arg)
{
	struct milter	*mt = arg;

	event_base_dispatch(mt->base);
	return (NULL);
}

/*
 * Serve --http in a thread of its own (the milter's sessions are
 * libmilter's threads): its event base, its server, and a pipe that
 * stops its loop.  0, or -1 and a cause.
 */
static int
milter_http_start(struct milter *mt, char **cause)
{
	struct metrics_src	 src = { milter_stats, milter_health, mt };
	char			 name[256];

	if ((mt->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((mt->metrics = metrics_new(mt->base, &src, cause)) == NULL ||
	    metrics_bind(mt->metrics, mt->o->http, name, sizeof name,
	    cause) != 0)
		return (-1);
	if (pipe2(mt->http_stop, O_CLOEXEC|O_NONBLOCK) == -1)
		fatal("pipe");
	mt->stop_ev = event_new(mt->base, mt->http_stop[0], EV_READ,
	    milter_http_stop, mt->base);
	event_add(mt->stop_ev, NULL);
	thread_start(&mt->http_thread, milter_http, mt);
	mt->http_running = 1;
	log_info("serving HTTP on %s", name);
	return (0);
}

/* Stop the HTTP thread and free its server. */
static void
milter_http_end(struct milter *mt)
{
	if (mt->http_running) {
		if (write(mt->http_stop[1], "", 1) == -1)
			log_warn("milter: stopping HTTP");
		if (pthread_join(mt->http_thread, NULL) != 0)
			fatalx("cannot join the HTTP thread");
		mt->http_running = 0;
	}
	metrics_free(mt->metrics);
	mt->metrics = NULL;
	if (mt->stop_ev != NULL)
		event_free(mt->stop_ev);
	if (mt->http_stop[0] > 0) {
		close(mt->http_stop[0]);
		close(mt->http_stop[1]);
	}
	if (mt->base != NULL)
		event_base_free(mt->base);
	mt->base = NULL;
}

/*
 * Why libmilter could not listen on spec (it says so only in syslog):
 * the same socket made and bound here, for its errno.  A unix socket is
 * removed again; a path that is there and not a socket is said to be.
 */
static void
milter_listen_cause(const char *spec, char *out, size_t len)
{
	struct sockaddr_un	 sun;
	struct stat		 st;
	const char		*path = NULL;
	int			 fd;

	if (strncmp(spec, "unix:", 5) == 0)
		path = spec + 5;
	else if (strncmp(spec, "local:", 6) == 0)
		path = spec + 6;
	else if (strchr(spec, ':') == NULL)
		path = spec;
	if (path == NULL) {
		snprintf(out, len, "cannot listen (the port taken, a host "
		    "that is not this one's, or a port below 1024)");
		return;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(out, len, "cannot make the socket %s: a file that "
		    "is not a socket is there", path);
		return;
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(out, len, "cannot make the socket %s: the path is "
		    "longer than %zu bytes", path, sizeof sun.sun_path - 1);
		return;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0)) == -1) {
		snprintf(out, len, "cannot make the socket %s: %s", path,
		    strerror(errno));
		return;
	}
	if (S_ISSOCK(st.st_mode))
		unlink(path);	/* libmilter removes an old one too */
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1)
		snprintf(out, len, "cannot make the socket %s: %s", path,
		    strerror(errno));
	else {
		unlink(path);
		snprintf(out, len, "cannot listen on %s", path);
	}
	close(fd);
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
	struct plsource	 src = { milter_opened, NULL, NULL, NULL };
	sigset_t	 usr1;
	char		*cause = NULL, why[512];
	int		 rc, status = EXIT_OK;

	memset(&mt, 0, sizeof mt);
	mt.o = o;
	mt.p = p;
	mt.started = now_seconds();
	mt.sigfd = -1;
	if (pthread_mutex_init(&mt.lock, NULL) != 0 ||
	    pthread_cond_init(&mt.cond, NULL) != 0)
		fatalx("cannot make a mutex");
	if (pipe2(mt.wake, O_CLOEXEC|O_NONBLOCK) == -1)
		fatal("pipe");
	/*
	 * SIGUSR1 is blocked in every thread (each inherits this one's
	 * mask) and read by the collector from a signalfd: by default it
	 * would end the process.
	 */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &usr1, NULL) != 0 ||
	    (mt.sigfd = signalfd(-1, &usr1, SFD_NONBLOCK|SFD_CLOEXEC)) == -1)
		fatal("signalfd");
	the_milter = &mt;
	/* Write errors are reported (a failed commit), not signals. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGXFSZ, &sa, NULL);

	if (o->log_file != NULL && log_open(o->log_file, &cause) != 0) {
		log_warnx("%s", cause);
		status = EXIT_ERROR;
		goto out;
	}
	if (o->http != NULL && milter_http_start(&mt, &cause) != 0) {
		log_warnx("%s", cause);
		status = EXIT_ERROR;
		goto out;
	}
	pipeline_set_deliver(p, milter_deliver, &mt);
	src.arg = &mt;
	pipeline_set_source(p, &src, o->batch_delay);

	memset(&desc, 0, sizeof desc);
	desc.xxfi_name = "mhfilter";
	desc.xxfi_version = SMFI_VERSION;
	desc.xxfi_flags = SMFIF_ADDHDRS | SMFIF_CHGHDRS | SMFIF_QUARANTINE |
	    SMFIF_DELRCPT;
	desc.xxfi_connect = milter_connect;
	desc.xxfi_envfrom = milter_envfrom;
	desc.xxfi_envrcpt = milter_envrcpt;
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
		milter_listen_cause(o->socket, why, sizeof why);
		log_warnx("--milter %s: %s", o->socket, why);
		status = EXIT_ERROR;
		goto out;
	}
	thread_start(&mt.collector, milter_collect, &mt);
	log_info("ready: milter on %s; per %s; duplicates get %s", o->socket,
	    o->scope == MILTER_SCOPE_MESSAGE ? "message" : "recipient",
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
		mstats_log(milter_stats, &mt);
	log_info("milter stopped after %" PRIu64 " messages", mt.messages);
out:
	free(cause);
	milter_http_end(&mt);
	pipeline_set_deliver(p, NULL, NULL);
	pipeline_set_source(p, NULL, 0);
	close(mt.wake[0]);
	close(mt.wake[1]);
	close(mt.sigfd);
	pthread_mutex_destroy(&mt.lock);
	pthread_cond_destroy(&mt.cond);
	the_milter = NULL;
	return (status);
}
