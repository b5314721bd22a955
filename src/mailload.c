/*
 * Mail support, loaded when it is first needed.
 *
 * mail.c reads messages with GMime and libxml2, which bring 20 of the 39
 * shared libraries a program linked with them loads (GLib, GIO, GPGME, ICU
 * and more).  Linked into the program they would cost every run about 4 ms
 * of its start, two thirds of it, mail or not: an empty program linked
 * against mhfilter's libraries starts in 6.7 ms, in 2.6 ms without those
 * two.  So the program is linked without them, and mail.c is built as a
 * module, mhfilter-mail.so, which mail_init opens (module.c) the first
 * time a run needs it.  A program that links mail.c itself (the unit
 * tests, the fuzz targets) has its functions already, found through weak
 * references, and opens nothing.
 *
 * The options of mail input need no library and are here too.
 */

#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

#define MAIL_MODULE	"mhfilter-mail.so"

typedef void	 mailmod_init_fn(void);
typedef int	 mailmod_extract_fn(const char *, size_t, int, struct buf *,
		    struct buf *, int64_t *, struct buf *, char **);
typedef void	 mailmod_html_fn(const char *, size_t, const char *,
		    struct buf *);

/* mail.c's, when the program is linked with it. */
extern mailmod_init_fn		 mailmod_init __attribute__((weak));
extern mailmod_extract_fn	 mailmod_extract __attribute__((weak));
extern mailmod_html_fn		 mailmod_html __attribute__((weak));

static pthread_once_t		 mail_load_once = PTHREAD_ONCE_INIT;
static mailmod_extract_fn	*mail_extract_fn;
static mailmod_html_fn		*mail_html_fn;
static char			*mail_load_error;
static int			 mail_global_flags = MAIL_STRIP_DEFAULT;
static uint64_t			 mail_max_text = UINT64_MAX;
static size_t			 mail_min_text;
/* --mail-allow: "key value" lines as mail.c's meta has them. */
static char			**mail_allows;
static size_t			 mail_nallows;

/* Find mail.c's functions: in the program, else in the module. */
static void
mail_load(void)
{
	static const char *const names[] = { "mailmod_init",
	    "mailmod_extract", "mailmod_html" };
	void	*fns[3];

	if (mailmod_extract != NULL && mailmod_init != NULL &&
	    mailmod_html != NULL) {
		mailmod_init();
		mail_html_fn = mailmod_html;
		mail_extract_fn = mailmod_extract;
		return;
	}
	if (module_open(MAIL_MODULE, "mail", names, fns, 3,
	    &mail_load_error) != 0)
		return;
	((mailmod_init_fn *)fns[0])();
	mail_html_fn = (mailmod_html_fn *)fns[2];
	mail_extract_fn = (mailmod_extract_fn *)fns[1];
}

/*
 * Make mail.c's functions ready (GMime and libxml2 initialised), from any
 * thread, any number of times.  0, or -1 with a cause.
 */
int
mail_init(char **cause)
{
	pthread_once(&mail_load_once, mail_load);
	if (mail_extract_fn == NULL) {
		if (cause != NULL)
			*cause = xstrdup(mail_load_error != NULL ?
			    mail_load_error : "mail support not loaded");
		return (-1);
	}
	return (0);
}

/*
 * Does a line of meta (mail.c's "key value" lines) match a --mail-allow
 * rule: the same key and value, or, for an address rule "@domain", an
 * address in that domain?
 */
static int
mail_allowed(const struct buf *meta)
{
	const char	*p, *end, *nl, *r;
	size_t		 i, n, kl;

	if (meta->len == 0)
		return (0);	/* (and no data: NULL) */
	for (p = meta->data, end = p + meta->len; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			break;
		for (i = 0; i < mail_nallows; i++) {
			r = mail_allows[i];
			kl = strcspn(r, " ") + 1;
			n = strlen(r);
			if ((size_t)(nl - p) < kl || memcmp(p, r, kl) != 0)
				continue;
			if ((size_t)(nl - p) == n && memcmp(p, r, n) == 0)
				return (1);
			if (r[kl] == '@' && (size_t)(nl - p) > n &&
			    memcmp(nl - (n - kl), r + kl, n - kl) == 0)
				return (1);
		}
	}
	return (0);
}

/*
 * Add a --mail-allow rule, "list-id:ID", "from:ADDR" or "to:ADDR" (ADDR
 * may be "@domain"): mail that matches it is never judged.  0, or -1 and a
 * cause.
 */
int
mail_allow_add(const char *rule, char **cause)
{
	static const char *const keys[] = { "list-id", "from", "to" };
	const char	*colon = strchr(rule, ':');
	char		*r;
	size_t		 i, k;

	for (k = 0; colon != NULL && k < sizeof keys / sizeof keys[0]; k++) {
		if ((size_t)(colon - rule) == strlen(keys[k]) &&
		    strncmp(rule, keys[k], colon - rule) == 0)
			break;
	}
	if (colon == NULL || k == sizeof keys / sizeof keys[0] ||
	    colon[1] == '\0' || strpbrk(colon + 1, " \t\n") != NULL) {
		xasprintf(cause, "'%s': use list-id:ID, from:ADDRESS or "
		    "to:ADDRESS (an ADDRESS may be @domain)", rule);
		return (-1);
	}
	xasprintf(&r, "%s %s", keys[k], colon + 1);
	for (i = strlen(keys[k]) + 1; r[i] != '\0'; i++)
		r[i] = tolower((unsigned char)r[i]);
	mail_allows = xreallocarray(mail_allows, mail_nallows + 1,
	    sizeof *mail_allows);
	mail_allows[mail_nallows++] = r;
	return (0);
}

/*
 * mail.c's mailmod_extract, wherever it is (see there), and then the
 * limits of mail_set_limits: 1 with the reason as cause for a message not
 * to judge, 0 for one to judge, -1 when mail support cannot be loaded.
 */
int
mail_extract(const char *msg, size_t len, int flags, struct buf *text,
    struct buf *id, int64_t *time, char **cause)
{
	struct buf	 meta = { 0 };
	const char	*nl;
	size_t		 body;
	int		 rc;

	if (mail_init(cause) != 0)
		return (-1);
	rc = mail_extract_fn(msg, len, flags, text, id, time,
	    mail_nallows > 0 ? &meta : NULL, cause);
	if (rc == 0 && mail_allowed(&meta)) {
		*cause = xstrdup("allowed");
		rc = 1;
	}
	buf_free(&meta);
	if (rc != 0)
		return (rc);
	if (text->len > mail_max_text) {
		*cause = xstrdup("text-too-large");
		return (1);
	}
	/* The body: what follows the Subject's line. */
	nl = text->len > 0 ? memchr(text->data, '\n', text->len) : NULL;
	body = nl != NULL ? text->len - (nl + 1 - text->data) : 0;
	if (body < mail_min_text && text->len > 0) {
		*cause = xstrdup("too-short");
		return (1);
	}
	return (0);
}

/*
 * mail.c's mailmod_html, wherever it is: an HTML page in charset cs (NULL:
 * none said) to text onto out, as HTML mail is read (warc.c).  0, or -1
 * when mail support cannot be loaded.
 */
int
mail_html(const char *html, size_t len, const char *cs, struct buf *out,
    char **cause)
{
	if (mail_init(cause) != 0)
		return (-1);
	mail_html_fn(html, len, cs, out);
	return (0);
}

/*
 * Set the limits of the text compared: a message whose text is longer
 * than max_text, or whose body (the text after the Subject) is shorter
 * than min_text, is not judged (before any thread starts).
 */
void
mail_set_limits(uint64_t max_text, size_t min_text)
{
	mail_max_text = max_text;
	mail_min_text = min_text;
}

/* Set the MAIL_* flags of FORMAT_MAIL records (before any thread starts). */
void
mail_set_flags(int flags)
{
	mail_global_flags = flags;
}

/* The MAIL_* flags in force. */
int
mail_flags(void)
{
	return (mail_global_flags);
}

/* White space around an attachment's words (mail_attach_prev). */
#define MAIL_SPACE(c)	((c) == ' ' || (c) == '\n' || (c) == '\t' || \
			 (c) == '\r')

/*
 * The attachment before position *end of a mail text (mail.c ends it with
 * a line "attachment" and 32 hex digits for each; normalised, the lines are
 * words): its digest, with *end moved before it, or NULL when the words
 * there are not one.
 */
static const char *
mail_attach_prev(const char *p, size_t *end)
{
	const char	*d;
	size_t		 i = *end, n = sizeof MAIL_ATTACH - 1, k;

	while (i > 0 && MAIL_SPACE(p[i - 1]))
		i--;
	if (i < n + 1 + MAIL_DIGEST)
		return (NULL);
	d = p + i - MAIL_DIGEST;
	for (k = 0; k < MAIL_DIGEST; k++) {
		if (!((d[k] >= '0' && d[k] <= '9') ||
		    (d[k] >= 'a' && d[k] <= 'f')))
			return (NULL);
	}
	i -= MAIL_DIGEST;
	if (!MAIL_SPACE(p[i - 1]))
		return (NULL);
	while (i > 0 && MAIL_SPACE(p[i - 1]))
		i--;
	if (i < n || memcmp(p + i - n, MAIL_ATTACH, n) != 0 ||
	    (i > n && !MAIL_SPACE(p[i - n - 1])))
		return (NULL);
	*end = i - n;
	return (d);
}

/* Order attachments' digests (pointers to MAIL_DIGEST hex digits). */
static int
mail_digest_cmp(const void *a, const void *b)
{
	return (memcmp(*(const char *const *)a, *(const char *const *)b,
	    MAIL_DIGEST));
}

/*
 * The digests of the attachments that end text p into *d (sorted; *d is
 * the caller's array of max, or one allocated when more are there), and
 * their number.
 */
static size_t
mail_attach_list(const char *p, size_t len, const char ***d, size_t max)
{
	const char	**v = *d;
	size_t		 n = 0, i = len;

	for (;;) {
		if (n == max) {
			max *= 2;
			v = v == *d ? memcpy(xreallocarray(NULL, max,
			    sizeof *v), v, n * sizeof *v) :
			    xreallocarray(v, max, sizeof *v);
		}
		if ((v[n] = mail_attach_prev(p, &i)) == NULL)
			break;
		n++;
	}
	if (n > 1)
		qsort(v, n, sizeof *v, mail_digest_cmp);
	*d = v;
	return (n);
}

/*
 * May a message of text a be a copy of one of text b (both as the filter
 * compares them, normalised)?  Not when it has an attachment that b has
 * not: one text with other attachments (this month's invoice with last
 * month's text) is another message, and so is one that brings a file the
 * first did not (the text sent again with a screenshot); one with fewer
 * (a copy whose attachment a list stripped) brings nothing new.  Sorted,
 * so that a message of many attachments costs no more than its reading.
 */
int
mail_attach_within(const char *a, size_t alen, const char *b, size_t blen)
{
	const char	*sa[16], *sb[16], **da = sa, **db = sb;
	size_t		 na, nb, i, j = 0;
	int		 c, within = 1;

	if ((na = mail_attach_list(a, alen, &da, 16)) == 0)
		return (1);
	nb = mail_attach_list(b, blen, &db, 16);
	for (i = 0; i < na && within; i++) {
		while (j < nb && (c = memcmp(db[j], da[i], MAIL_DIGEST)) < 0)
			j++;
		within = j < nb && c == 0;
	}
	if (da != sa)
		free(da);
	if (db != sb)
		free(db);
	return (within);
}

/* Parse "quotes,signature,footer" or "none" into MAIL_STRIP_* flags. */
int
mail_strip_parse(const char *s, int *flags, char **cause)
{
	char	*copy, *p, *w;
	int	 f = 0;

	if (strcmp(s, "none") == 0) {
		*flags = (*flags & ~MAIL_STRIP_ALL);
		return (0);
	}
	copy = p = xstrdup(s);
	while ((w = strsep(&p, ",")) != NULL) {
		if (strcmp(w, "none") == 0) {
			xasprintf(cause, "'none' goes alone (--mail-strip none "
			    "cuts nothing); a list names what to cut: quotes, "
			    "signature, footer");
			free(copy);
			return (-1);
		}
		if (strcmp(w, "quotes") == 0)
			f |= MAIL_STRIP_QUOTES;
		else if (strcmp(w, "signature") == 0)
			f |= MAIL_STRIP_SIG;
		else if (strcmp(w, "footer") == 0)
			f |= MAIL_STRIP_FOOTER;
		else {
			xasprintf(cause, "unknown part '%s' (use quotes, "
			    "signature, footer or none)", w);
			free(copy);
			return (-1);
		}
	}
	free(copy);
	*flags = (*flags & ~MAIL_STRIP_ALL) | f;
	return (0);
}

/*
 * The exit status of the MDA hook (--mda): MAIL_EXIT_DUPLICATE when the
 * message was a duplicate, MAIL_EXIT_UNIQUE otherwise (new, or not judged),
 * as formail -D does; an error keeps its own status, which a hook also
 * reads as "deliver".  With print, the verdict is on standard output
 * instead ("duplicate", "unique", "empty" for a message with no text to
 * compare, as its X-Mhfilter field says, or "unchecked", also for no
 * message at all; no newline: what Sieve's execute :output compares) and
 * the status 0, but for an error.
 */
int
mail_mda_status(const struct pl_counts *ct, int status, int print)
{
	const char	*word = "unique";

	if (status != EXIT_OK)
		return (status);
	if (ct->duplicates > 0 && ct->unique == 0)
		word = "duplicate";
	else if (ct->unchecked > 0 || ct->records == 0)
		word = "unchecked";
	else if (ct->empty > 0 && ct->unique == 0)
		word = "empty";
	if (!print)
		return (strcmp(word, "duplicate") == 0 ? MAIL_EXIT_DUPLICATE :
		    MAIL_EXIT_UNIQUE);
	if (fputs(word, stdout) == EOF || fflush(stdout) == EOF) {
		log_warn("write error");
		return (EXIT_ERROR);
	}
	return (EXIT_OK);
}

/*
 * Say that the message at file:line was passed through without being
 * judged, and why: mail.c's and mail_extract's reasons, or too-large for a
 * message over --max-message.  Short and allowed mail is ordinary: that is
 * said only with -v.
 */
void
mail_warn_unchecked(const char *file, uint64_t line, const char *why)
{
	static const char *const reasons[][2] = {
		{ "too-large", "over --max-message" },
		{ "text-too-large", "its text is over --max-bytes" },
		{ "too-short", "its text is under --mail-min-text" },
		{ "allowed", "it is on a --mail-allow list" },
		{ "no-header", "not a mail message (no header fields)" },
		{ "unreadable", "not a mail message (nothing readable)" },
	};
	const char	*say = why != NULL ? why : "";
	size_t		 i;

	for (i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
		if (strcmp(say, reasons[i][0]) == 0)
			say = reasons[i][1];
	}
	if (file == NULL)
		file = "-";
	if (why != NULL && (strcmp(why, "too-short") == 0 ||
	    strcmp(why, "allowed") == 0))
		log_debug("%s:%" PRIu64 ": %s: passed through unchecked",
		    file, line, say);
	else
		log_warnx("%s:%" PRIu64 ": %s: passed through unchecked",
		    file, line, say);
}
