/*
 * Unit tests for mail.c: the text, id and time of a mail message, with
 * small messages inline: transfer encodings, charsets, RFC 2047 subjects,
 * HTML, multipart, attachments, signatures, quotes, list footers, missing
 * headers and malformed MIME.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mhfilter.h"

#define HDR	"From: a@example.org\nTo: b@example.org\n" \
		"Message-ID: <Abc.123@Example.ORG>\n" \
		"Date: Tue, 1 Jul 2025 10:00:00 +0000\n"
#define MIME	"MIME-Version: 1.0\n"

/* A message and what must (want) and must not (nowant) be in its text. */
static const struct mcase {
	const char	*name;
	const char	*msg;
	size_t		 len;		/* 0: strlen(msg) */
	int		 flags;
	const char	*want;		/* the whole text, or NULL */
	const char	*has;		/* a part of the text, or NULL */
	const char	*hasnot;	/* not in the text, or NULL */
} mcases[] = {
	{ "plain", HDR "Subject: Hello\n\nBody line.\n", 0,
	    MAIL_STRIP_DEFAULT, "Hello\nBody line.\n", NULL, NULL },
	{ "headers never in the text", HDR "Subject: s\nX-Spam: junk\n\nb\n",
	    0, MAIL_STRIP_DEFAULT, "s\nb\n", NULL, NULL },
	{ "subject prefixes", HDR "Subject: Re: AW: [debian-user] Fwd: Re[2]:"
	    " Fw: SV: boot fails\n\nx\n", 0, MAIL_STRIP_DEFAULT,
	    "boot fails\nx\n", NULL, NULL },
	{ "rfc 2047 subject", HDR "Subject: =?ISO-8859-1?Q?Gr=FC=DFe?= "
	    "=?UTF-8?B?YXVzIEvDtmxu?=\n\nx\n", 0, MAIL_STRIP_DEFAULT,
	    "Grüßeaus Köln\nx\n", NULL, NULL },
	{ "base64", HDR MIME "Subject: b\nContent-Type: text/plain; "
	    "charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
	    "SGVsbG8sIHfDtnJsZCEK\n", 0, MAIL_STRIP_DEFAULT,
	    "b\nHello, wörld!\n", NULL, NULL },
	{ "quoted-printable", HDR MIME "Subject: q\nContent-Type: text/plain;"
	    " charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable"
	    "\n\nSch=F6ne soft=\nbreak =3D ok\n", 0, MAIL_STRIP_DEFAULT,
	    "q\nSchöne softbreak = ok\n", NULL, NULL },
	{ "latin-1 8bit", HDR MIME "Subject: l\nContent-Type: text/plain; "
	    "charset=ISO-8859-1\n\ncaf\xe9\n", 0, MAIL_STRIP_DEFAULT,
	    "l\ncafé\n", NULL, NULL },
	{ "wrong charset: utf-8 labelled latin-1", HDR MIME "Subject: w\n"
	    "Content-Type: text/plain; charset=iso-8859-1\n\ncaf\xc3\xa9\n", 0,
	    MAIL_STRIP_DEFAULT, "w\ncafé\n", NULL, NULL },
	{ "wrong charset: latin-1 labelled us-ascii", HDR MIME "Subject: w\n"
	    "Content-Type: text/plain; charset=us-ascii\n\ncaf\xe9\n", 0,
	    MAIL_STRIP_DEFAULT, "w\ncafé\n", NULL, NULL },
	{ "unknown charset", HDR MIME "Subject: w\nContent-Type: text/plain; "
	    "charset=x-nonesuch\n\ncaf\xe9\n", 0, MAIL_STRIP_DEFAULT,
	    "w\ncafé\n", NULL, NULL },
	{ "html only", HDR MIME "Subject: h\nContent-Type: text/html; "
	    "charset=utf-8\n\n<html><head><title>T</title><style>p{}</style>"
	    "</head><body><p>One &amp; two</p><script>var x;</script>"
	    "<div>three<br>four</div></body></html>\n", 0, MAIL_STRIP_DEFAULT,
	    NULL, "One & two", "var x" },
	{ "html meta charset ignored", HDR MIME "Subject: h\nContent-Type: "
	    "text/html; charset=utf-8\n\n<html><head><meta charset=\"iso-8859-1"
	    "\"></head><body>caf\xc3\xa9</body></html>\n", 0,
	    MAIL_STRIP_DEFAULT, NULL, "café", NULL },
	{ "html blockquote is quoted text", HDR MIME "Subject: h\n"
	    "Content-Type: text/html\n\n<div>my answer</div><div>On Tue, Bob "
	    "wrote:<br></div><blockquote type=cite>old text</blockquote>\n", 0,
	    MAIL_STRIP_DEFAULT, NULL, "my answer", "old text" },
	{ "html blockquote kept", HDR MIME "Subject: h\n"
	    "Content-Type: text/html\n\n<blockquote>old text</blockquote>\n",
	    0, MAIL_STRIP_SIG, NULL, "old text", NULL },
	{ "alternative prefers plain", HDR MIME "Subject: a\nContent-Type: "
	    "multipart/alternative; boundary=XX\n\n--XX\nContent-Type: "
	    "text/plain\n\nplain text\n--XX\nContent-Type: text/html\n\n"
	    "<p>html text</p>\n--XX--\n", 0, MAIL_STRIP_DEFAULT,
	    "a\nplain text\n", NULL, NULL },
	{ "html body and a list's plain footer part", HDR MIME "Subject: m\n"
	    "Content-Type: multipart/mixed; boundary=XX\n\n--XX\n"
	    "Content-Type: text/html\n\n<p>the html body</p>\n--XX\n"
	    "Content-Type: text/plain\nContent-Disposition: inline\n\n"
	    "_______________________________________________\nusers mailing "
	    "list\n--XX--\n", 0, MAIL_STRIP_DEFAULT, NULL, "the html body",
	    "mailing list" },
	/* Attachments: the SHA-256 of their decoded content, not their text
	   (sha256sum of "secret" and of three NUL bytes, 32 digits). */
	{ "attachments as digests", HDR MIME "Subject: t\nContent-Type: "
	    "multipart/mixed; boundary=XX\n\n--XX\nContent-Type: text/plain\n"
	    "\nsee attached\n--XX\nContent-Type: text/plain; name=a.txt\n"
	    "Content-Disposition: attachment; filename=a.txt\n\nsecret\n"
	    "--XX\nContent-Type: application/octet-stream\n"
	    "Content-Transfer-Encoding: base64\n\nAAAA\n--XX--\n", 0,
	    MAIL_STRIP_DEFAULT, "t\nsee attached\n"
	    "attachment 2bb80d537b1da3e38bd30361aa855686\n"
	    "attachment 709e80c88487a2411e1ee4dfb9f22a86\n", NULL, NULL },
	{ "attachment only", HDR MIME "Subject: scan\nContent-Type: "
	    "multipart/mixed; boundary=XX\n\n--XX\nContent-Type: image/png\n"
	    "Content-Transfer-Encoding: base64\n\nAAAA\n--XX--\n", 0,
	    MAIL_STRIP_DEFAULT,
	    "scan\nattachment 709e80c88487a2411e1ee4dfb9f22a86\n", NULL, NULL },
	{ "pgp signature part skipped", HDR MIME "Subject: g\nContent-Type: "
	    "multipart/signed; protocol=\"application/pgp-signature\"; "
	    "micalg=pgp-sha256; boundary=XX\n\n--XX\nContent-Type: text/plain\n"
	    "\nsigned text\n--XX\nContent-Type: application/pgp-signature\n\n"
	    "-----BEGIN PGP SIGNATURE-----\nabc\n-----END PGP SIGNATURE-----\n"
	    "--XX--\n", 0, MAIL_STRIP_DEFAULT, "g\nsigned text\n", NULL, NULL },
	{ "signature stripped", HDR "Subject: s\n\nbody\n-- \nJane Doe\n"
	    "Example Corp\n", 0, MAIL_STRIP_DEFAULT, "s\nbody\n", NULL, NULL },
	{ "signature kept", HDR "Subject: s\n\nbody\n-- \nJane\n", 0, 0,
	    "s\nbody\n-- \nJane\n", NULL, NULL },
	{ "quotes stripped", HDR "Subject: q\n\nOn Tue, 1 Jul 2025, Bob "
	    "wrote:\n> old text\n> more\n\nmy answer\n", 0,
	    MAIL_STRIP_DEFAULT, "q\n\nmy answer\n", NULL, NULL },
	{ "quotes kept", HDR "Subject: q\n\n> old\nnew\n", 0,
	    MAIL_STRIP_SIG, "q\n> old\nnew\n", NULL, NULL },
	{ "outlook original message", HDR "Subject: q\n\nnew\n\n"
	    "-----Original Message-----\nFrom: x\nold\n", 0,
	    MAIL_STRIP_DEFAULT, "q\nnew\n\n", NULL, NULL },
	{ "outlook reply header", HDR "Subject: RE: q\n\nnew\n\n"
	    "________________________________\nFrom: Bob <b@example.org>\n"
	    "Sent: Tuesday, July 1, 2025 10:00 AM\nTo: a\nSubject: q\n\nold\n",
	    0, MAIL_STRIP_DEFAULT, "q\nnew\n\n", NULL, NULL },
	{ "outlook forward kept", HDR "Subject: [x] FW: q\n\nFYI\n\n"
	    "-----Original Message-----\nFrom: Bob <b@example.org>\n"
	    "Sent: Tuesday, July 1, 2025 10:00 AM\nSubject: q\n\nold text\n",
	    0, MAIL_STRIP_DEFAULT, NULL, "old text", NULL },
	{ "mailman footer", HDR "List-Id: Users <users.lists.example.org>\n"
	    "Subject: [users] f\n\ntext\n\n"
	    "_______________________________________________\nusers mailing "
	    "list\nusers@lists.example.org\nhttps://lists.example.org/"
	    "listinfo/users\n", 0, MAIL_STRIP_DEFAULT, "f\ntext\n\n", NULL,
	    NULL },
	{ "footer by list id", HDR "List-Post: <mailto:dev@lists.example.org>"
	    "\nSubject: f\n\ntext\n==========\nPosted to dev@lists.example.org"
	    "\n", 0, MAIL_STRIP_DEFAULT, "f\ntext\n", NULL, NULL },
	{ "rule without list words kept", HDR "Subject: f\n\ntext\n"
	    "__________\ntable\n", 0, MAIL_STRIP_DEFAULT,
	    "f\ntext\n__________\ntable\n", NULL, NULL },
	{ "mbox From_ line and quoting", "From a@example.org Tue Jul  1 "
	    "10:00:00 2025\n" HDR "Subject: m\n\n>From here\n>>From there\n",
	    0, 0, "m\nFrom here\n>From there\n", NULL, NULL },
	{ "truncated MIME", HDR MIME "Subject: t\nContent-Type: multipart/"
	    "mixed; boundary=XX\n\n--XX\nContent-Type: text/plain\n\npart one"
	    "\n--XX\nContent-Type: text/plain\nContent-Transfer-Encoding: "
	    "base64\n\naGVsbG8g", 0, MAIL_STRIP_DEFAULT, NULL, "part one",
	    NULL },
	{ "missing boundary", HDR MIME "Subject: t\nContent-Type: multipart/"
	    "mixed\n\n--XX\nContent-Type: text/plain\n\nfound\n--XX--\n", 0,
	    MAIL_STRIP_DEFAULT, NULL, "found", NULL },
	{ "NUL bytes", HDR "Subject: n\n\na\0b\0c\n", 19 + sizeof HDR - 1,
	    MAIL_STRIP_DEFAULT, "n\nabc\n", NULL, NULL },
	{ "forwarded message/rfc822", HDR MIME "Subject: Fwd: x\n"
	    "Content-Type: multipart/mixed; boundary=XX\n\n--XX\n"
	    "Content-Type: text/plain\n\nFYI\n--XX\nContent-Type: "
	    "message/rfc822\n\nFrom: c@example.org\nSubject: x\n\ninner body"
	    "\n--XX--\n", 0, MAIL_STRIP_DEFAULT, "x\nFYI\ninner body\n", NULL,
	    NULL },
};

/* Each case of the table. */
static void
test_cases(void **state)
{
	const struct mcase	*c;
	struct buf		 text = { 0 }, id = { 0 };
	int64_t			 t;
	char			*cause;
	size_t			 i;
	int			 rv;

	for (i = 0; i < sizeof mcases / sizeof *mcases; i++) {
		c = &mcases[i];
		cause = NULL;
		rv = mail_extract(c->msg, c->len ? c->len : strlen(c->msg),
		    c->flags, &text, &id, &t, &cause);
		if (rv != 0)
			fail_msg("%s: %s", c->name, cause);
		buf_append(&text, "", 1);
		if (c->want != NULL && strcmp(text.data, c->want) != 0)
			fail_msg("%s: got \"%s\"", c->name, text.data);
		if (c->has != NULL && strstr(text.data, c->has) == NULL)
			fail_msg("%s: no \"%s\" in \"%s\"", c->name, c->has,
			    text.data);
		if (c->hasnot != NULL && strstr(text.data, c->hasnot) != NULL)
			fail_msg("%s: \"%s\" in \"%s\"", c->name, c->hasnot,
			    text.data);
	}
	buf_free(&text);
	buf_free(&id);
}

/* Extract one message that must parse; returns its text as a C string. */
static char *
extract(const char *msg, int flags, struct buf *id, int64_t *t)
{
	struct buf	 text = { 0 };
	char		*cause = NULL;

	if (mail_extract(msg, strlen(msg), flags, &text, id, t, &cause) != 0)
		fail_msg("%s", cause);
	buf_append(&text, "", 1);
	return (text.data);
}

/* Message-ID normalised, Date parsed (also the obsolete forms). */
static void
test_id_time(void **state)
{
	struct buf	 id = { 0 };
	int64_t		 t;
	char		*s, first[21];

	s = extract(HDR "Subject: x\n\ny\n", MAIL_STRIP_DEFAULT, &id, &t);
	assert_int_equal(id.len, strlen("Abc.123@example.org"));
	assert_memory_equal(id.data, "Abc.123@example.org", id.len);
	assert_int_equal(t, 1751364000);
	free(s);

	/* Obsolete: two-digit year, zone name, comments. */
	s = extract("Message-ID: < x@Y >\nDate: 1 Jul 25 10:00:00 GMT "
	    "(comment)\nSubject: x\n\ny\n", MAIL_STRIP_DEFAULT, &id, &t);
	assert_int_equal(id.len, 3);
	assert_memory_equal(id.data, "x@y", 3);
	assert_int_equal(t, 1751364000);
	free(s);

	/*
	 * Missing: an id of the content (Date, From and the text), time 0
	 * (now).  The same again (other Received fields) has the same id;
	 * another text or sender, another.
	 */
	s = extract("From: a@b\nSubject: x\n\ny\n", MAIL_STRIP_DEFAULT, &id,
	    &t);
	assert_int_equal(id.len, 21);
	assert_memory_equal(id.data, "noid-", 5);
	memcpy(first, id.data, 21);
	assert_int_equal(t, 0);
	free(s);
	s = extract("Received: from x\nFrom: a@b\nSubject: x\n\ny\n",
	    MAIL_STRIP_DEFAULT, &id, &t);
	assert_int_equal(id.len, 21);
	assert_memory_equal(id.data, first, 21);
	free(s);
	s = extract("From: c@d\nSubject: x\n\ny\n", MAIL_STRIP_DEFAULT, &id,
	    &t);
	assert_int_equal(id.len, 21);
	assert_memory_not_equal(id.data, first, 21);
	free(s);
	s = extract("From: a@b\nSubject: x\n\nz\n", MAIL_STRIP_DEFAULT, &id,
	    &t);
	assert_memory_not_equal(id.data, first, 21);
	free(s);

	/* Nonsense date: time 0; news: Injection-Date. */
	s = extract("From: a@b\nDate: yesterday\nSubject: x\n\ny\n",
	    MAIL_STRIP_DEFAULT, &id, &t);
	assert_int_equal(t, 0);
	free(s);
	s = extract("From: a@b\nInjection-Date: Tue, 1 Jul 2025 10:00:00 "
	    "+0000\nSubject: x\n\ny\n", MAIL_STRIP_DEFAULT, &id, &t);
	assert_int_equal(t, 1751364000);
	free(s);

	/* --mda: no id. */
	s = extract(HDR "Subject: x\n\ny\n", MAIL_STRIP_DEFAULT | MAIL_NO_ID,
	    &id, &t);
	assert_int_equal(id.len, 0);
	free(s);
	buf_free(&id);
}

/*
 * What is not a message at all is not judged (1) and says why; nor is a
 * text over the limit or a body under it (mail_set_limits).
 */
static void
test_errors(void **state)
{
	static const char two[] = "From: a@b\nSubject: Lunch\n\nYes, at 4pm.\n";
	struct buf	 text = { 0 }, id = { 0 };
	int64_t		 t;
	char		*cause = NULL;

	assert_int_equal(mail_extract("", 0, 0, &text, &id, &t, &cause), 1);
	assert_string_equal(cause, "unreadable");
	free(cause);
	cause = NULL;
	assert_int_equal(mail_extract("\0\0\0\n", 4, 0, &text, &id, &t,
	    &cause), 1);
	assert_non_null(cause);
	free(cause);
	cause = NULL;
	/* Headers but no text: not an error, an empty text. */
	assert_int_equal(mail_extract("From: a@b\n\n", 11, 0, &text, &id, &t,
	    &cause), 0);
	assert_int_equal(text.len, 0);
	/* The body is 13 bytes: judged at 13, not at 14. */
	mail_set_limits(UINT64_MAX, 13);
	assert_int_equal(mail_extract(two, strlen(two), 0, &text, &id, &t,
	    &cause), 0);
	mail_set_limits(UINT64_MAX, 14);
	assert_int_equal(mail_extract(two, strlen(two), 0, &text, &id, &t,
	    &cause), 1);
	assert_string_equal(cause, "too-short");
	free(cause);
	/* The text is 19 bytes ("Lunch\nYes, at 4pm.\n"). */
	mail_set_limits(19, 0);
	assert_int_equal(mail_extract(two, strlen(two), 0, &text, &id, &t,
	    &cause), 0);
	mail_set_limits(18, 0);
	assert_int_equal(mail_extract(two, strlen(two), 0, &text, &id, &t,
	    &cause), 1);
	assert_string_equal(cause, "text-too-large");
	free(cause);
	mail_set_limits(UINT64_MAX, 0);
	buf_free(&text);
	buf_free(&id);
}

/*
 * A message of one text with attachments whose contents are a and b (none
 * when NULL), in that order, and its text as the filter compares it
 * (normalised as norm says).
 */
static char *
attach_text(const char *a, const char *b, int norm)
{
	struct buf	 text = { 0 }, id = { 0 }, out = { 0 };
	int64_t		 t;
	char		*m, *cause = NULL;

	xasprintf(&m, "From: a@b\nSubject: Invoice\nMIME-Version: 1.0\n"
	    "Content-Type: multipart/mixed; boundary=\"X\"\n\n"
	    "--X\nContent-Type: text/plain\n\nYour invoice is attached.\n"
	    "%s%s%s%s%s--X--\n",
	    a != NULL ? "--X\nContent-Type: application/pdf\n"
	    "Content-Disposition: attachment\n\n" : "", a != NULL ? a : "",
	    b != NULL ? "\n--X\nContent-Type: image/png\n"
	    "Content-Disposition: attachment\n\n" : "", b != NULL ? b : "",
	    a != NULL || b != NULL ? "\n" : "");
	if (mail_extract(m, strlen(m), MAIL_STRIP_DEFAULT, &text, &id, &t,
	    &cause) != 0)
		fail_msg("%s", cause);
	if (norm != -1)
		(void)normalize(text.data, text.len, norm, &out);
	else
		buf_append(&out, text.data, text.len);
	buf_append(&out, "", 1);
	free(m);
	buf_free(&text);
	buf_free(&id);
	return (out.data);
}

/* mail_attach_within of two NUL-terminated texts. */
static int
within(const char *a, const char *b)
{
	return (mail_attach_within(a, strlen(a), b, strlen(b)));
}

/*
 * Texts of many attachments (more than mail_attach_within holds on its
 * stack), in other orders: a text of attachments 0 to 299 in one order,
 * the same in another, a part of them, and one with another besides.
 */
static void
attach_many(void)
{
	struct buf	 all = { 0 }, rev = { 0 }, part = { 0 }, more = { 0 };
	char		 line[64];
	int		 i, n;

	buf_append(&all, "text", 4);
	buf_append(&rev, "text", 4);
	buf_append(&part, "text", 4);
	buf_append(&more, "text", 4);
	for (i = 0; i < 300; i++) {
		n = snprintf(line, sizeof line, "\nattachment %032x", i * 7919);
		buf_append(&all, line, n);
		if (i % 3 == 0)
			buf_append(&part, line, n);
		buf_append(&more, line, n);
		n = snprintf(line, sizeof line, " attachment %032x",
		    (299 - i) * 7919);
		buf_append(&rev, line, n);
	}
	n = snprintf(line, sizeof line, "\nattachment %032x", 1);
	buf_append(&more, line, n);
	assert_true(mail_attach_within(all.data, all.len, rev.data, rev.len));
	assert_true(mail_attach_within(rev.data, rev.len, all.data, all.len));
	assert_true(mail_attach_within(part.data, part.len, rev.data,
	    rev.len));
	assert_false(mail_attach_within(rev.data, rev.len, part.data,
	    part.len));
	assert_false(mail_attach_within(more.data, more.len, rev.data,
	    rev.len));
	assert_true(mail_attach_within(rev.data, rev.len, more.data,
	    more.len));
	buf_free(&all);
	buf_free(&rev);
	buf_free(&part);
	buf_free(&more);
}

/*
 * A message may be a copy of another only if that one has every attachment
 * it has, in any order, whatever the normalisation made of their lines; a
 * line that only looks like an attachment's somewhere else is text.
 */
static void
test_attach_within(void **state)
{
	static const int norms[] = { -1, 0, NORM_DEFAULT, NORM_ALL };
	const char	*june = "%PDF June", *july = "%PDF July", *logo = "PNG";
	char		*t[6];
	size_t		 i, k;

	(void)state;
	for (i = 0; i < sizeof norms / sizeof norms[0]; i++) {
		t[0] = attach_text(NULL, NULL, norms[i]);
		t[1] = attach_text(june, NULL, norms[i]);
		t[2] = attach_text(july, NULL, norms[i]);
		t[3] = attach_text(june, logo, norms[i]);
		t[4] = attach_text(logo, june, norms[i]);
		t[5] = attach_text(NULL, logo, norms[i]);
		assert_non_null(strstr(t[1], "attachment "));
		assert_true(within(t[0], t[0]) && within(t[1], t[1]));
		assert_true(within(t[0], t[1]));	/* fewer: a copy */
		assert_false(within(t[1], t[0]));	/* one more: new */
		assert_false(within(t[1], t[2]));	/* another file */
		assert_false(within(t[2], t[1]));
		assert_true(within(t[3], t[4]) && within(t[4], t[3]));
		assert_true(within(t[1], t[3]) && within(t[5], t[4]));
		assert_false(within(t[3], t[1]));
		assert_false(within(t[4], t[5]));
		for (k = 0; k < 6; k++)
			free(t[k]);
	}
	/* Its own words at the end of the text, nothing else. */
	assert_false(within("x\nattachment 0123456789abcdef0123456789abcdef",
	    "x"));
	assert_false(within("attachment 0123456789abcdef0123456789abcdef",
	    ""));
	assert_true(within("x myattachment 0123456789abcdef0123456789abcdef",
	    "x"));
	assert_true(within("x attachment 0123456789ABCDEF0123456789abcdef",
	    "x"));
	assert_true(within("x attachment 0123456789abcdef0123456789abcdef0",
	    "x"));
	assert_true(within("x attachment 123456789abcdef0123456789abcdef",
	    "x"));
	assert_true(within("attachment 0123456789abcdef0123456789abcdef x",
	    ""));
	attach_many();
}

/* Re-sent copies (other headers, base64, HTML alternative) give one text. */
static void
test_same_text(void **state)
{
	struct buf	 id = { 0 };
	int64_t		 t;
	char		*a, *b, *c;

	a = extract("Received: from x\nMessage-ID: <1@a>\nDate: Tue, 1 Jul "
	    "2025 10:00:00 +0000\nSubject: Meeting\n\nSee you at noon.\n",
	    MAIL_STRIP_DEFAULT, &id, &t);
	b = extract("Received: from y\nMessage-ID: <2@b>\nSubject: Re: "
	    "Meeting\n" MIME "Content-Transfer-Encoding: base64\n\n"
	    "U2VlIHlvdSBhdCBub29uLgo=\n", MAIL_STRIP_DEFAULT, &id, &t);
	c = extract("Subject: Meeting\n" MIME "Content-Type: multipart/"
	    "alternative; boundary=B\n\n--B\nContent-Type: text/html\n\n"
	    "<p>See you at noon.</p>\n--B--\n", MAIL_STRIP_DEFAULT, &id, &t);
	assert_string_equal(a, b);
	assert_non_null(strstr(c, "See you at noon."));
	free(a);
	free(b);
	free(c);
	buf_free(&id);
}

/* Every prefix of a rich message, and bytes flipped: read, never a crash. */
static void
test_truncated(void **state)
{
	static const char msg[] = "From x Tue Jul  1 10:00:00 2025\n" HDR
	    MIME "Subject: =?UTF-8?B?w6k=?= t\nContent-Type: multipart/mixed;"
	    " boundary=\"o\"\n\n--o\nContent-Type: multipart/alternative; "
	    "boundary=i\n\n--i\nContent-Type: text/plain; charset=latin1\n"
	    "Content-Transfer-Encoding: quoted-printable\n\ncaf=E9 =\nok\n"
	    ">From x\n--i\nContent-Type: text/html\n\n<p>caf&eacute;<b>x"
	    "\n--i--\n--o\nContent-Type: message/rfc822\n\nSubject: in\n\n"
	    "inner\n--o\nContent-Type: application/pdf\n"
	    "Content-Transfer-Encoding: base64\n\nJVBERi0=\n--o--\n";
	struct buf	 text = { 0 }, id = { 0 };
	char		 copy[sizeof msg], *cause;
	int64_t		 t;
	size_t		 len, i;
	int		 rv;

	for (len = 0; len < sizeof msg; len++) {
		cause = NULL;
		rv = mail_extract(msg, len, MAIL_STRIP_DEFAULT, &text, &id, &t,
		    &cause);
		assert_true(rv == 0 || (rv == 1 && cause != NULL));
		free(cause);
	}
	for (i = 0; i < sizeof msg - 1; i++) {
		memcpy(copy, msg, sizeof msg);
		copy[i] = (i % 3 == 0) ? '\0' : (i % 3 == 1) ? '\n' : '\xff';
		cause = NULL;
		rv = mail_extract(copy, sizeof msg - 1, MAIL_STRIP_DEFAULT,
		    &text, &id, &t, &cause);
		assert_true(rv == 0 || (rv == 1 && cause != NULL));
		free(cause);
	}
	buf_free(&text);
	buf_free(&id);
}

/* --mail-strip's list, and the MDA exit statuses. */
static void
test_options(void **state)
{
	struct pl_counts ct;
	int	 f = MAIL_STRIP_DEFAULT;
	char	*cause;

	assert_int_equal(mail_strip_parse("none", &f, &cause), 0);
	assert_int_equal(f, 0);
	assert_int_equal(mail_strip_parse("quotes,footer", &f, &cause), 0);
	assert_int_equal(f, MAIL_STRIP_QUOTES | MAIL_STRIP_FOOTER);
	assert_int_equal(mail_strip_parse("quotes,bogus", &f, &cause), -1);
	free(cause);
	/* "none" goes alone. */
	assert_int_equal(mail_strip_parse("none,quotes", &f, &cause), -1);
	assert_non_null(strstr(cause, "'none' goes alone"));
	free(cause);
	memset(&ct, 0, sizeof ct);
	ct.duplicates = 1;
	assert_int_equal(mail_mda_status(&ct, EXIT_OK, 0), MAIL_EXIT_DUPLICATE);
	assert_int_equal(mail_mda_status(&ct, EXIT_ERROR, 0), EXIT_ERROR);
	ct.duplicates = 0;
	ct.unique = 1;
	assert_int_equal(mail_mda_status(&ct, EXIT_OK, 0), MAIL_EXIT_UNIQUE);
	/* A message not judged (too large, no header) is delivered. */
	ct.unique = 0;
	ct.unchecked = 1;
	assert_int_equal(mail_mda_status(&ct, EXIT_OK, 0), MAIL_EXIT_UNIQUE);
	ct.unchecked = 0;
	assert_int_equal(mail_mda_status(&ct, EXIT_OK, 0), MAIL_EXIT_UNIQUE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_id_time),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_same_text),
		cmocka_unit_test(test_attach_within),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_options),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
