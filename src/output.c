/*
 * Verdicts to bytes on the output.  Records are written byte for byte as
 * they were read; annotations are added around them, never inside them,
 * except for JSON objects, which get one more field before their closing
 * brace so that the output is still one JSON object a line.
 *
 * Mail (-f mail) is written as mbox: a message read from an mbox keeps its
 * From_ line and quoting; one from a Maildir gets a From_ line and mboxrd
 * quoting (">From ", ">>From ", ...); --annotate adds an X-Mhfilter header
 * field at the top of the header.  With --single the message is written as
 * read (so that mhfilter can be a procmail filter), and with -z each
 * message as read, then a NUL.
 *
 * Output is buffered here and written with write(2); every failure (a full
 * disk, a closed pipe) is returned to the caller, which ends the run.
 */

#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <utf8proc.h>

#include "mhfilter.h"

#define OUTPUT_HIGH	(256 * 1024)
/*
 * The queue is kept across flushes up to this size: freed at each flush,
 * it grew again by doubling, past malloc's mmap threshold, so that every
 * 256 KB of output cost fresh pages (page faults) and copies.
 */
#define OUTPUT_KEEP	(4 * OUTPUT_HIGH)

struct output {
	int		 fd;
	int		 mode;		/* OUT_* */
	const struct format *fmt;
	int		 framing;	/* FRAME_* */
	int		 delim;
	struct buf	 b;
	struct buf	 id;
	int		 file;		/* fd is a regular file: output_sync */
	int		 group;		/* OUT_GROUP: say each record's group */
	/* A quarantine (output_open_quarantine): its own file, or a Maildir
	   written a file a message. */
	int		 ownfd;
	char		*maildir;
	unsigned long	 seq;
	int		 header;	/* the X-Mhfilter field in every mode */
	/* The message being written in pieces (output_mail). */
	const char	*eol;
	int		 quote;		/* mboxrd quoting to add */
	int		 unquote;	/* mboxrd quoting to undo (Maildir) */
	char		 lastc;
};

static const char *verdict_names[] = {
	"unique", "duplicate", "empty", "invalid", "too_long", "skipped",
	"unchecked"
};

static void	output_annotate(struct output *, const struct record *,
		    const struct verdict *);
static void	output_verdict(struct output *, const struct record *,
		    const struct verdict *);
static void	output_json(struct output *, const struct record *,
		    const struct verdict *);
static void	output_jsonstr(struct buf *, const char *, size_t);
static void	output_mail(struct output *, const struct record *,
		    const struct verdict *, int, int);
static struct output *output_open_maildir(const char *, char **);

/*
 * Start writing to fd in one of the OUT_* modes, records of format
 * (FORMAT_*) read with framing (FRAME_*) and delimiter delim.
 */
struct output *
output_open(int fd, int mode, int format, int framing, int delim)
{
	struct output	*o;
	struct stat	 st;

	o = xcalloc(1, sizeof *o);
	o->fd = fd;
	o->mode = mode & OUT_MODE;
	o->group = (mode & OUT_GROUP) != 0;
	o->fmt = format_get(format);
	o->framing = framing;
	o->delim = delim;
	o->file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	return (o);
}

/*
 * Start writing the duplicates to path as well, a quarantine
 * (--duplicates-to): records are appended to a file as read; mail is
 * appended to an mbox, or, when path is a directory or ends in "/",
 * written to a Maildir (output_open_maildir); each message with the
 * X-Mhfilter field that says what it duplicates.  NULL and a cause on
 * error.
 */
struct output *
output_open_quarantine(const char *path, int format, int framing, int delim,
    char **cause)
{
	struct output	*o;
	struct stat	 st;
	int		 fd, mailbox = format_get(format)->flags & FMT_MAILBOX;

	if (mailbox && ((path[0] != '\0' &&
	    path[strlen(path) - 1] == '/') || (stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode))))
		return (output_open_maildir(path, cause));
	if ((fd = open(path, O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0600)) ==
	    -1) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return (NULL);
	}
	/* Mail goes to an mbox, unless it is NUL-terminated (-z). */
	if (mailbox && framing != FRAME_DELIM)
		framing = FRAME_MBOX;
	o = output_open(fd, OUT_DUPLICATES, format, framing, delim);
	o->ownfd = 1;
	o->header = mailbox != 0;
	return (o);
}

/*
 * A Maildir as a quarantine: each message a file of its own in new/,
 * written in tmp/, synced and renamed there, as a delivery agent does;
 * without its From_ line and mbox quoting.  The Maildir is made if need
 * be.  NULL and a cause on error.
 */
static struct output *
output_open_maildir(const char *dir, char **cause)
{
	static const char *const subs[] = { "", "/tmp", "/new", "/cur" };
	struct output	*o;
	char		*path;
	size_t		 i;

	for (i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		xasprintf(&path, "%s%s", dir, subs[i]);
		if (mkdir(path, 0700) == -1 && errno != EEXIST) {
			xasprintf(cause, "%s: %s", path, strerror(errno));
			free(path);
			return (NULL);
		}
		free(path);
	}
	/* Each message as read (FRAME_SINGLE): no From_ line, no NUL. */
	o = output_open(-1, OUT_DUPLICATES, FORMAT_MAIL, FRAME_SINGLE, '\0');
	o->maildir = xstrdup(dir);
	o->header = 1;
	return (o);
}

/*
 * Write the message queued in o->b to a file of its own in the Maildir:
 * tmp/, synced, then renamed into new/ (maildir(5)).  0 or -1 and a cause.
 */
static int
output_maildir_file(struct output *o, char **cause)
{
	char	 host[256], *tmp, *new;
	size_t	 off = 0;
	ssize_t	 n;
	int	 fd, rc = -1;

	if (gethostname(host, sizeof host) == -1)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	host[strcspn(host, "/:")] = '\0';
	xasprintf(&tmp, "%s/tmp/%lld.P%ldQ%lu.%s", o->maildir,
	    (long long)time(NULL), (long)getpid(), ++o->seq, host);
	xasprintf(&new, "%s/new/%s", o->maildir, strrchr(tmp, '/') + 1);
	if ((fd = open(tmp, O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600)) == -1) {
		xasprintf(cause, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	while (off < o->b.len) {
		if ((n = write(fd, o->b.data + off, o->b.len - off)) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		off += n;
	}
	if (off < o->b.len || fsync(fd) == -1) {
		xasprintf(cause, "%s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, new) == -1) {
		xasprintf(cause, "%s: %s", new, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	o->b.len = 0;
	free(tmp);
	free(new);
	return (rc);
}

/*
 * The id of a record's group into o->id: a duplicate's group, or the
 * record's own id.
 */
static void
output_group_id(struct output *o, const struct record *r,
    const struct verdict *v)
{
	if (v->kind == V_DUPLICATE) {
		o->id.len = 0;
		buf_append(&o->id, v->group.data, v->group.len);
	} else
		record_idstr(r, &o->id);
}

/* A verdict's name, as --annotate and mail headers give it. */
const char *
verdict_name(const struct verdict *v)
{
	if (v->kind == V_DUPLICATE && v->seen)
		return ("seen");
	return (verdict_names[v->kind]);
}

/*
 * Append an id as a column of tab-separated output: backslash, TAB,
 * newline, carriage return and NUL are escaped so that the columns and
 * lines stay intact whatever the id holds.  The daemon's replies use it too.
 */
void
output_field(struct buf *b, const char *s, size_t len)
{
	size_t	 i, start = 0;
	char	 esc[2] = { '\\', 0 };

	for (i = 0; i < len; i++) {
		switch (s[i]) {
		case '\\': esc[1] = '\\'; break;
		case '\t': esc[1] = 't'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\0': esc[1] = '0'; break;
		default: continue;
		}
		buf_append(b, s + start, i - start);
		buf_append(b, esc, 2);
		start = i + 1;
	}
	buf_append(b, s + start, len - start);
}

/*
 * Append a string as a JSON string literal.  Ids need not be UTF-8 (tsv
 * input is bytes), and JSON must be: invalid bytes become U+FFFD.
 */
static void
output_jsonstr(struct buf *b, const char *s, size_t len)
{
	struct buf		 fixed = { 0 };
	utf8proc_int32_t	 cp;
	utf8proc_ssize_t	 n;
	json_t			*j;
	char			*enc;
	size_t			 i;

	if ((j = json_stringn(s, len)) == NULL) {
		for (i = 0; i < len; i += n) {
			n = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
			    len - i, &cp);
			if (n > 0)
				buf_append(&fixed, s + i, n);
			else {
				buf_append(&fixed, "\xef\xbf\xbd", 3);
				n = 1;
			}
		}
		j = json_stringn(fixed.data ? fixed.data : "", fixed.len);
		buf_free(&fixed);
		if (j == NULL)
			fatalx("json_stringn failed");
	}
	enc = json_dumps(j, JSON_ENCODE_ANY);
	if (enc == NULL)
		fatalx("json_dumps failed");
	buf_append(b, enc, strlen(enc));
	free(enc);
	json_decref(j);
}

/* A JSON object as read, with a "mhfilter" field before its last brace. */
static void
output_json(struct output *o, const struct record *r, const struct verdict *v)
{
	const char	*raw = r->raw.data, *close = NULL;
	size_t		 i, len = r->raw.len;
	char		 sim[32];

	for (i = len; i > 0; i--) {
		if (raw[i - 1] == '}') {
			close = raw + i - 1;
			break;
		}
	}
	/*
	 * A record that parsed has at least its text member, so the new one
	 * follows a comma.  One that did not (passed through) is unchanged.
	 */
	if (v->kind == V_BAD || close == NULL) {
		buf_append(&o->b, raw, len);
		return;
	}
	buf_append(&o->b, raw, close - raw);
	buf_append(&o->b, ",\"mhfilter\":{\"verdict\":\"", 24);
	buf_append(&o->b, verdict_name(v), strlen(verdict_name(v)));
	buf_append(&o->b, "\"", 1);
	if (v->kind == V_DUPLICATE) {
		buf_append(&o->b, ",\"match\":", 9);
		output_jsonstr(&o->b, v->match.data, v->match.len);
		snprintf(sim, sizeof sim, ",\"similarity\":%.4f", v->sim);
		buf_append(&o->b, sim, strlen(sim));
	} else if (v->kind == V_UNIQUE && v->contains.len > 0) {
		buf_append(&o->b, ",\"contains\":", 12);
		output_jsonstr(&o->b, v->contains.data, v->contains.len);
		snprintf(sim, sizeof sim, ",\"similarity\":%.4f",
		    v->contains_sim);
		buf_append(&o->b, sim, strlen(sim));
	}
	if (o->group && (v->kind == V_DUPLICATE || v->kind == V_UNIQUE)) {
		output_group_id(o, r, v);
		buf_append(&o->b, ",\"group\":", 9);
		output_jsonstr(&o->b, o->id.data, o->id.len);
	}
	buf_append(&o->b, "}", 1);
	buf_append(&o->b, close, len - (close - raw));
}

/*
 * The columns of --annotate before the record: the verdict, the match (or
 * the earlier document it contains) and the similarity, with --group the
 * group; each followed by a TAB.
 */
static void
output_verdict(struct output *o, const struct record *r,
    const struct verdict *v)
{
	char	 sim[32];
	const char *name = verdict_name(v);

	buf_append(&o->b, name, strlen(name));
	if (v->kind == V_DUPLICATE) {
		buf_append(&o->b, "\t", 1);
		output_field(&o->b, v->match.data, v->match.len);
		snprintf(sim, sizeof sim, "\t%.4f\t", v->sim);
		buf_append(&o->b, sim, strlen(sim));
	} else if (v->kind == V_UNIQUE && v->contains.len > 0) {
		/* (containment) the earlier document it holds. */
		buf_append(&o->b, "\t", 1);
		output_field(&o->b, v->contains.data, v->contains.len);
		snprintf(sim, sizeof sim, "\t%.4f\t", v->contains_sim);
		buf_append(&o->b, sim, strlen(sim));
	} else
		buf_append(&o->b, "\t-\t-\t", 5);
	if (o->group && v->kind != V_DUPLICATE && v->kind != V_UNIQUE)
		buf_append(&o->b, "-\t", 2);
	else if (o->group) {
		output_group_id(o, r, v);
		output_field(&o->b, o->id.data, o->id.len);
		buf_append(&o->b, "\t", 1);
	}
}

/* A record with its verdict: the verdict's columns, then the record. */
static void
output_annotate(struct output *o, const struct record *r,
    const struct verdict *v)
{
	output_verdict(o, r, v);
	buf_append(&o->b, r->raw.data, r->raw.len);
}

/* An id as one line of printable text in a header field. */
static void
output_header_id(struct buf *b, const char *id, size_t len)
{
	size_t	 i, start = b->len;

	buf_append(b, id, len);
	for (i = start; i < b->len; i++) {
		if ((unsigned char)b->data[i] < 0x20 || b->data[i] == 0x7f ||
		    b->data[i] == '>')
			b->data[i] = '?';
	}
}

/*
 * The X-Mhfilter header field of a verdict, with group its group, ending
 * with eol.
 */
void
output_mail_header(struct buf *b, const struct verdict *v, int group,
    const char *eol)
{
	buf_append(b, MAIL_FIELD ": ", sizeof MAIL_FIELD + 1);
	output_mail_value(b, v, group);
	buf_append(b, eol, strlen(eol));
}

/*
 * The value of a verdict's X-Mhfilter field (the milter adds the field by
 * name and value), with group its group.
 */
void
output_mail_value(struct buf *b, const struct verdict *v, int group)
{
	char	 sim[32];

	/*
	 * A message seen before is a duplicate to a mail filter's rules
	 * ("^X-Mhfilter: duplicate"), which says it was seen.
	 */
	buf_append(b, verdict_names[v->kind], strlen(verdict_names[v->kind]));
	if (v->kind == V_UNCHECKED && v->error != NULL) {
		buf_append(b, "; reason=", 9);
		output_header_id(b, v->error, strlen(v->error));
	}
	if (v->kind == V_DUPLICATE) {
		if (v->seen)
			buf_append(b, "; seen", 6);
		buf_append(b, "; of=<", 6);
		output_header_id(b, v->match.data, v->match.len);
		snprintf(sim, sizeof sim, ">; similarity=%.2f", v->sim);
		buf_append(b, sim, strlen(sim));
		if (group) {
			buf_append(b, "; group=<", 9);
			output_header_id(b, v->group.data, v->group.len);
			buf_append(b, ">", 1);
		}
	} else if (v->kind == V_UNIQUE && v->contains.len > 0) {
		buf_append(b, "; contains=<", 12);
		output_header_id(b, v->contains.data, v->contains.len);
		snprintf(sim, sizeof sim, ">; similarity=%.2f",
		    v->contains_sim);
		buf_append(b, sim, strlen(sim));
	}
}

/*
 * Copy the message [p, end) onto b: with quote 1, mboxrd quoting (one more
 * '>' before every ">*From " line), with -1 that quoting undone (one '>'
 * less before every ">+From " line); with strip, without the X-Mhfilter
 * header fields it came with, so that only mhfilter's own verdict is there
 * (a sender could forge one).
 */
static void
output_mail_copy(struct buf *b, const char *p, const char *end, int quote,
    int strip)
{
	const char	*nl, *q;
	int		 header = strip, skip = 0;

	while (p < end) {
		if (!header && !quote) {
			buf_append(b, p, end - p);
			return;
		}
		nl = memchr(p, '\n', end - p);
		nl = nl != NULL ? nl + 1 : end;
		if (header && (*p == '\n' || (*p == '\r' && nl - p == 2)))
			header = 0;	/* the blank line after the header */
		else if (header) {
			/* A continuation line goes with its field. */
			if (*p != ' ' && *p != '\t')
				skip = nl - p >= (ptrdiff_t)sizeof MAIL_FIELD &&
				    strncasecmp(p, MAIL_FIELD ":",
				    sizeof MAIL_FIELD) == 0;
			if (skip) {
				p = nl;
				continue;
			}
		}
		if (quote) {
			for (q = p; q < nl && *q == '>'; q++)
				;
			if (nl - q >= 5 && memcmp(q, "From ", 5) == 0) {
				if (quote > 0)
					buf_append(b, ">", 1);
				else if (q > p)
					p++;	/* one '>' less */
			}
		}
		buf_append(b, p, nl - p);
		p = nl;
	}
}

/*
 * Does the message start with a From_ line, which output_mail writes as
 * its own (as mbox) or leaves out (in a Maildir)?  For those, strict: a
 * first line that begins with "From " but does not read as one
 * (input_from_line: a file's "From jane@example.org", a message sent to
 * the daemon) is the message's, which an mbox would take for a separator
 * no reader knows (mhfilter, mutt), and a Maildir keeps.  Otherwise
 * (--single, -z) any such line is kept first, as read.
 */
int
output_mail_from(const struct record *r, int strict)
{
	const char	*p = r->raw.data, *nl;

	if (r->raw.len < 5 || memcmp(p, "From ", 5) != 0)
		return (0);
	if (!strict)
		return (1);
	nl = memchr(p, '\n', r->raw.len);
	return (input_from_line(p, nl != NULL ? (size_t)(nl - p) :
	    r->raw.len));
}

/*
 * The end of the lines at p that start with "From " after any number of
 * '>': envelope lines before the header fields, a From_ line that an
 * earlier delivery quoted (">From ") or one that reads as none.  Readers
 * take them there only (mutt skips them; a line that is not a field ends
 * the header for others): the X-Mhfilter field goes after them, not
 * between them and the message's other fields.
 */
static const char *
output_mail_envelope(const char *p, const char *end)
{
	const char	*q, *nl;

	for (;;) {
		for (q = p; q < end && *q == '>'; q++)
			;
		if (end - q < 5 || memcmp(q, "From ", 5) != 0 ||
		    (nl = memchr(q, '\n', end - q)) == NULL)
			return (p);
		p = nl + 1;
	}
}

/*
 * A mail message: as mbox (a From_ line, mboxrd quoting of a message that
 * had none or is a file of its own, a blank line after it), as read
 * (--single) or NUL-terminated
 * (-z); with v, the X-Mhfilter header field first, after the envelope
 * lines (output_mail_envelope).  A message over
 * --max-message comes in pieces (output_piece): first says this is its
 * first, which has the From_ line and the header, last that the message
 * ends here.  A piece after the first starts where a line does (input.c
 * cuts so), and the quoting and line ends of the first hold for it.
 */
static void
output_mail(struct output *o, const struct record *r, const struct verdict *v,
    int first, int last)
{
	const char	*p = r->raw.data, *end = p + r->raw.len, *nl, *env;
	char		 from[80];
	struct tm	 tm;
	time_t		 t;
	int		 mbox = o->framing == FRAME_MBOX, had;

	if (first) {
		had = output_mail_from(r, mbox || o->maildir != NULL);
		if (had) {
			nl = memchr(p, '\n', end - p);
			nl = nl != NULL ? nl + 1 : end;
			/* A Maildir file has no From_ line. */
			if (o->maildir == NULL)
				buf_append(&o->b, p, nl - p);
			p = nl;
		}
		/* The lines mhfilter adds end as the message's first does. */
		o->eol = "\n";
		if ((nl = memchr(p, '\n', end - p)) != NULL && nl > p &&
		    nl[-1] == '\r')
			o->eol = "\r\n";
		if (!had && mbox) {
			t = r->time != 0 ? (time_t)r->time : time(NULL);
			gmtime_r(&t, &tm);
			strftime(from, sizeof from, "From MAILER-DAEMON %a %b "
			    "%e %H:%M:%S %Y", &tm);
			buf_append(&o->b, from, strlen(from));
			buf_append(&o->b, o->eol, strlen(o->eol));
		}
		/* A file of its own has no quoting: it needs it in an mbox. */
		o->quote = mbox && (!had || r->whole);
		o->unquote = o->maildir != NULL && had && !r->whole;
		o->lastc = '\n';
		if ((env = output_mail_envelope(p, end)) > p) {
			output_mail_copy(&o->b, p, env, o->quote ? 1 :
			    o->unquote ? -1 : 0, 0);
			p = env;
		}
		/*
		 * Not into a message without a header: the field would
		 * make its first line a header field.
		 */
		if (v != NULL && !(v->kind == V_UNCHECKED && v->error != NULL &&
		    (strcmp(v->error, "no-header") == 0 ||
		    strcmp(v->error, "unreadable") == 0)))
			output_mail_header(&o->b, v, o->group, o->eol);
	}
	output_mail_copy(&o->b, p, end, o->quote ? 1 : o->unquote ? -1 : 0,
	    first && v != NULL);
	if (r->raw.len > 0)
		o->lastc = end[-1];
	if (!last)
		return;
	if (o->framing == FRAME_DELIM)
		buf_append(&o->b, "", 1);
	else if (mbox) {
		/* Its blank line, "\r\n" after a message read with CRLF. */
		if (o->lastc != '\n')
			buf_append(&o->b, o->eol, strlen(o->eol));
		buf_append(&o->b, o->eol, strlen(o->eol));
	}
	o->lastc = '\n';
}

/* Does the mode write a record with this verdict, as read? */
static int
output_wanted(const struct output *o, const struct verdict *v)
{
	return (!(o->mode == OUT_NONE || (o->mode == OUT_UNIQUE &&
	    v->kind == V_DUPLICATE) || (o->mode == OUT_DUPLICATES &&
	    v->kind != V_DUPLICATE)));
}

/*
 * Queue a piece of a record over --max-message (a format with
 * FMT_PIECES: see output_mail), as output_record queues a whole one;
 * flush past the high-water mark.
 */
int
output_piece(struct output *o, const struct record *r,
    const struct verdict *v, int first, int last, char **cause)
{
	int	 rc;

	if (!(o->fmt->flags & FMT_PIECES) || o->mode == OUT_PAIRS ||
	    o->mode == OUT_CLUSTERS || !output_wanted(o, v))
		return (0);
	if ((rc = o->fmt->write(o, r, v, first, last, cause)) != 0)
		return (rc);
	if (o->b.len >= OUTPUT_HIGH)
		return (output_flush(o, cause));
	return (0);
}

/*
 * A record of a delimited format: as read, or with --annotate as annotate
 * writes it; then the delimiter.
 */
static int
output_delimited(struct output *o, const struct record *r,
    const struct verdict *v, void (*annotate)(struct output *,
    const struct record *, const struct verdict *))
{
	char	 c = o->delim;

	if (o->mode == OUT_ANNOTATE)
		annotate(o, r, v);
	else
		buf_append(&o->b, r->raw.data, r->raw.len);
	buf_append(&o->b, &c, 1);
	return (0);
}

/* The writer of the line formats (line, tsv): -a puts the verdict first. */
int
output_write_line(struct output *o, const struct record *r,
    const struct verdict *v, int first, int last, char **cause)
{
	return (output_delimited(o, r, v, output_annotate));
}

/* The writer of JSON Lines: -a adds a "mhfilter" member (output_json). */
int
output_write_json(struct output *o, const struct record *r,
    const struct verdict *v, int first, int last, char **cause)
{
	return (output_delimited(o, r, v, output_json));
}

/*
 * The writer of mail: a message (first and last) with the X-Mhfilter
 * field under --annotate or in a quarantine, to an mbox or a Maildir's
 * file of its own; or a piece of one, with the field under --annotate.
 */
int
output_write_mail(struct output *o, const struct record *r,
    const struct verdict *v, int first, int last, char **cause)
{
	if (!first || !last) {
		output_mail(o, r, o->mode == OUT_ANNOTATE ? v : NULL, first,
		    last);
		return (0);
	}
	output_mail(o, r, o->mode == OUT_ANNOTATE || o->header ? v : NULL, 1,
	    1);
	if (o->maildir != NULL)
		return (output_maildir_file(o, cause));
	return (0);
}

/*
 * The writer of WARC: the record as read (a .warc.gz's gzip member, so
 * that the output is a .warc.gz too), or a piece of one; with --annotate
 * no record but a line for it, its verdict (as for lines) and its id.
 */
int
output_write_warc(struct output *o, const struct record *r,
    const struct verdict *v, int first, int last, char **cause)
{
	if (o->mode != OUT_ANNOTATE) {
		buf_append(&o->b, r->raw.data, r->raw.len);
		return (0);
	}
	if (first) {
		output_verdict(o, r, v);
		record_idstr(r, &o->id);
		output_field(&o->b, o->id.data, o->id.len);
		buf_append(&o->b, "\n", 1);
	}
	return (0);
}

/* Queue what the mode says of one record; flush past the high-water mark. */
int
output_record(struct output *o, const struct record *r,
    const struct verdict *v, char **cause)
{
	char	 sim[32];
	size_t	 i;
	int	 rc;

	switch (o->mode) {
	case OUT_NONE:
		return (0);
	case OUT_UNIQUE:
	case OUT_DUPLICATES:
	case OUT_ANNOTATE:
		if (!output_wanted(o, v))
			return (0);
		if ((rc = o->fmt->write(o, r, v, 1, 1, cause)) != 0 ||
		    o->maildir != NULL)
			return (rc);
		break;
	case OUT_PAIRS:
		record_idstr(r, &o->id);
		for (i = 0; i < v->npairs; i++) {
			output_field(&o->b, v->pairs[i].id.data,
			    v->pairs[i].id.len);
			buf_append(&o->b, "\t", 1);
			output_field(&o->b, o->id.data, o->id.len);
			snprintf(sim, sizeof sim, "\t%.4f", v->pairs[i].sim);
			buf_append(&o->b, sim, strlen(sim));
			/* (A unique record's group is its own.) */
			if (o->group && v->kind == V_DUPLICATE) {
				buf_append(&o->b, "\t", 1);
				output_field(&o->b, v->group.data,
				    v->group.len);
			} else if (o->group) {
				buf_append(&o->b, "\t", 1);
				output_field(&o->b, o->id.data, o->id.len);
			}
			if (v->pairs[i].contains)
				buf_append(&o->b, "\tcontains", 9);
			buf_append(&o->b, "\n", 1);
		}
		break;
	case OUT_CLUSTERS:
		if (v->kind != V_UNIQUE && v->kind != V_DUPLICATE)
			return (0);
		record_idstr(r, &o->id);
		output_field(&o->b, o->id.data, o->id.len);
		buf_append(&o->b, "\t", 1);
		output_group_id(o, r, v);
		output_field(&o->b, o->id.data, o->id.len);
		buf_append(&o->b, "\n", 1);
		break;
	}
	if (o->b.len >= OUTPUT_HIGH)
		return (output_flush(o, cause));
	return (0);
}

/* Write everything queued. */
int
output_flush(struct output *o, char **cause)
{
	size_t	 off = 0;
	ssize_t	 n;

	while (off < o->b.len) {
		n = write(o->fd, o->b.data + off, o->b.len - off);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EPIPE) {
				/* The reader is gone, as for head(1). */
				*cause = NULL;
				return (OUTPUT_CLOSED);
			}
			xasprintf(cause, "write error: %s", strerror(errno));
			return (-1);
		}
		off += n;
	}
	if (o->b.size > OUTPUT_KEEP)
		buf_free(&o->b);
	o->b.len = 0;
	return (0);
}

/*
 * Make what was written durable when it went to a regular file (before
 * its records are marked delivered); a pipe or a terminal has nothing to
 * sync.
 */
int
output_sync(struct output *o, char **cause)
{
	char	*dir;
	int	 fd, rc = 0;

	/* A Maildir's files are synced: the renames into new/ are not. */
	if (o->maildir != NULL) {
		xasprintf(&dir, "%s/new", o->maildir);
		if ((fd = open(dir, O_RDONLY|O_DIRECTORY|O_CLOEXEC)) == -1 ||
		    fsync(fd) == -1) {
			xasprintf(cause, "sync %s: %s", dir, strerror(errno));
			rc = -1;
		}
		if (fd != -1)
			close(fd);
		free(dir);
		return (rc);
	}
	if (o->file && fdatasync(o->fd) == -1 && errno != EINVAL) {
		xasprintf(cause, "sync error: %s", strerror(errno));
		return (-1);
	}
	return (0);
}

/* Free the writer (without flushing). */
void
output_close(struct output *o)
{
	if (o == NULL)
		return;
	buf_free(&o->b);
	buf_free(&o->id);
	free(o->maildir);
	if (o->ownfd)
		close(o->fd);
	free(o);
}
