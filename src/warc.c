/*
 * WARC (ISO 28500, WARC/1.0 and WARC/1.1), -f warc: a web archive's
 * records, of which the documents are the HTML pages of its responses.
 *
 * A record is a version line, header fields, a blank line, a block of
 * Content-Length bytes and two CRLFs.  input.c frames the records (plain,
 * or in a .warc.gz one gzip member each, kept compressed so that they are
 * written back as they came) and checks their framing with warc_header;
 * warc_parse makes the text, id and time of one.
 *
 * A document is a response record whose block is an HTTP response
 * (application/http) with a 2xx status and an HTML payload (text/html,
 * application/xhtml+xml): the payload, its transfer and content encoding
 * undone (chunked; gzip, deflate), is converted from its charset and
 * turned into text by the mail module's HTML reader (mail_html), the one
 * that reads HTML mail.  Its id is WARC-Target-URI (WARC-Record-ID when
 * there is none), its time WARC-Date.  Every other record (warcinfo,
 * request, metadata, resource, revisit, a response that is not an HTML
 * page) has no text: the filter passes it through as empty.
 */

#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "mhfilter.h"

/* The limits warc_parse keeps to (warc_init). */
static uint64_t	 warc_max_record = 256U << 20;	/* a record, decompressed */
static uint64_t	 warc_max_text = 8U << 20;	/* a page's text */

/*
 * The value of header field name among the lines at p (len bytes, field
 * lines ending with CRLF), without its white space: 1 and *val, *vlen, or
 * 0 when the field is not there.
 */
static int
warc_field(const char *p, size_t len, const char *name, const char **val,
    size_t *vlen)
{
	const char	*end = p + len, *nl, *v, *ve;
	size_t		 n = strlen(name);

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			nl = end;
		if ((size_t)(nl - p) <= n || p[n] != ':' ||
		    strncasecmp(p, name, n) != 0)
			continue;
		for (v = p + n + 1; v < nl && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = nl; ve > v && isspace((unsigned char)ve[-1]); ve--)
			;
		*val = v;
		*vlen = ve - v;
		return (1);
	}
	return (0);
}

/*
 * Read the header of the WARC record at p, of which len bytes are there:
 * 1 with h filled, 0 when its end is not there yet (read more), -1 when it
 * is malformed, with why (static text or, for a value, allocated in
 * *whyp).
 */
int
warc_header(const char *p, size_t len, struct warc_hdr *h, char **why)
{
	static const char *const versions[] = { "WARC/1.0\r\n",
	    "WARC/1.1\r\n" };
	const char	*end, *v;
	size_t		 vlen, i, n;
	uint64_t	 cl;

	memset(h, 0, sizeof *h);
	/* The version line, checked as soon as its bytes are there. */
	for (i = 0; i < sizeof versions / sizeof versions[0]; i++) {
		n = strlen(versions[i]);
		if (memcmp(p, versions[i], len < n ? len : n) == 0)
			break;
	}
	if (i == sizeof versions / sizeof versions[0]) {
		for (n = 0; n < len && n < 40 && isprint((unsigned char)p[n]);
		    n++)
			;
		xasprintf(why, "bad version line '%.*s' (not WARC/1.0 or "
		    "WARC/1.1)", (int)n, p);
		return (-1);
	}
	if ((end = memmem(p, len < WARC_HEADER_MAX ? len : WARC_HEADER_MAX,
	    "\r\n\r\n", 4)) == NULL) {
		if (len >= WARC_HEADER_MAX) {
			xasprintf(why, "no end of its header in its first "
			    "%d bytes", WARC_HEADER_MAX);
			return (-1);
		}
		return (0);
	}
	h->hlen = end + 4 - p;
	n = strlen(versions[0]);
	if (!warc_field(p + n, h->hlen - n, "Content-Length", &v, &vlen)) {
		xasprintf(why, "no Content-Length");
		return (-1);
	}
	for (cl = 0, i = 0; i < vlen; i++) {
		if (!isdigit((unsigned char)v[i]) || cl > UINT64_MAX / 20)
			break;
		cl = cl * 10 + (v[i] - '0');
	}
	if (vlen == 0 || i < vlen || vlen > 18) {
		xasprintf(why, "bad Content-Length '%.*s'", vlen > 40 ? 40 :
		    (int)vlen, v);
		return (-1);
	}
	h->clen = cl;
	h->total = h->hlen + cl + 4;
	return (1);
}

/*
 * Inflate the gzip member (wbits 15 + 16) or the zlib or gzip data (15 +
 * 32, what a payload is cut short of taken as it is) at p into out, at
 * most max bytes: 0, -1 when it is corrupt, -2 when it is larger.
 */
static int
warc_inflate(const char *p, size_t len, int wbits, uint64_t max,
    struct buf *out)
{
	z_stream	 z;
	int		 r;

	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, wbits) != Z_OK)
		fatalx("inflateInit2: out of memory");
	z.next_in = (unsigned char *)p;
	z.avail_in = len;
	do {
		buf_reserve(out, 64 * 1024);
		z.next_out = (unsigned char *)out->data + out->len;
		z.avail_out = out->size - out->len;
		r = inflate(&z, Z_NO_FLUSH);
		out->len = out->size - z.avail_out;
		if (out->len > max) {
			inflateEnd(&z);
			return (-2);
		}
	} while (r == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
	inflateEnd(&z);
	/* A payload cut short (auto): what there is of it. */
	if (r == Z_STREAM_END || (wbits != 15 + 16 && (r == Z_OK ||
	    r == Z_BUF_ERROR)))
		return (0);
	return (-1);
}

/* Undo chunked transfer coding into out: 0, or -1 when it is broken. */
static int
warc_dechunk(const char *p, size_t len, struct buf *out)
{
	const char	*end = p + len, *nl;
	uint64_t	 n;
	int		 d;

	while (p < end) {
		for (n = 0; p < end && isxdigit((unsigned char)*p); p++) {
			d = isdigit((unsigned char)*p) ? *p - '0' :
			    tolower((unsigned char)*p) - 'a' + 10;
			if (n > UINT64_MAX / 16)
				return (-1);
			n = n * 16 + d;
		}
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			return (-1);
		p = nl + 1;
		if (n == 0)
			return (0);
		if (n > (uint64_t)(end - p))
			n = end - p;	/* a truncated payload: what is there */
		buf_append(out, p, n);
		p += n;
		if (p < end && *p == '\r')
			p++;
		if (p < end && *p == '\n')
			p++;
	}
	return (0);
}

/*
 * The charset of an HTML payload: the HTTP Content-Type's, else a meta
 * tag's near the start (charset=...); into cs (empty: none said).
 */
static void
warc_charset(const char *ct, size_t ctlen, const char *body, size_t blen,
    char *cs, size_t cssize)
{
	const char	*p = NULL, *end;
	size_t		 n;

	cs[0] = '\0';
	if (ct != NULL && (p = memmem(ct, ctlen, "charset=", 8)) != NULL)
		end = ct + ctlen;
	else if ((p = memmem(body, blen < 2048 ? blen : 2048, "charset=",
	    8)) != NULL)
		end = body + (blen < 2048 ? blen : 2048);
	if (p == NULL)
		return;
	p += 8;
	if (p < end && (*p == '"' || *p == '\''))
		p++;
	for (n = 0; p + n < end && n + 1 < cssize && (isalnum((unsigned
	    char)p[n]) || strchr("-_.:", p[n]) != NULL); n++)
		cs[n] = p[n];
	cs[n] = '\0';
}

/*
 * The text of the HTTP response in the block [p, p + len) onto r->text,
 * if it is an HTML page with a 2xx status; else nothing.  0, 1 (not to
 * judge, cause its reason), or -1 (no mail module).
 */
static int
warc_http(struct record *r, const char *p, size_t len, char **cause)
{
	const char	*end = p + len, *hend, *v, *ct = NULL, *body;
	struct buf	 dechunked = { 0 }, plain = { 0 };
	size_t		 vlen, ctlen = 0, blen, hl;
	char		 cs[64];
	uint64_t	 cl;
	int		 rc = 0;

	/* "HTTP/1.1 200 OK": a 2xx status. */
	if (len < 12 || memcmp(p, "HTTP/", 5) != 0 ||
	    (v = memchr(p, ' ', len < 16 ? len : 16)) == NULL ||
	    end - v < 4 || v[1] != '2' || !isdigit((unsigned char)v[2]) ||
	    !isdigit((unsigned char)v[3]))
		return (0);
	if ((hend = memmem(p, len, "\r\n\r\n", 4)) != NULL)
		hl = 4;
	else if ((hend = memmem(p, len, "\n\n", 2)) != NULL)
		hl = 2;
	else
		return (0);
	hl += hend - p;
	body = p + hl;
	blen = len - hl;
	if (warc_field(p, hend - p, "Content-Type", &ct, &ctlen) == 0 ||
	    !((ctlen >= 9 && strncasecmp(ct, "text/html", 9) == 0) ||
	    (ctlen >= 21 && strncasecmp(ct, "application/xhtml+xml",
	    21) == 0)))
		return (0);
	if (warc_field(p, hend - p, "Transfer-Encoding", &v, &vlen) &&
	    vlen >= 7 && strncasecmp(v, "chunked", 7) == 0) {
		if (warc_dechunk(body, blen, &dechunked) != 0)
			goto out;
		body = dechunked.data;
		blen = dechunked.len;
	} else if (warc_field(p, hend - p, "Content-Length", &v, &vlen)) {
		/* What the server said: fewer bytes when it sent more. */
		for (cl = 0; vlen > 0 && isdigit((unsigned char)*v) &&
		    cl < UINT64_MAX / 20; v++, vlen--)
			cl = cl * 10 + (*v - '0');
		if (vlen == 0 && cl < blen)
			blen = cl;
	}
	if (warc_field(p, hend - p, "Content-Encoding", &v, &vlen) &&
	    !(vlen == 8 && strncasecmp(v, "identity", 8) == 0)) {
		if (!((vlen == 4 && strncasecmp(v, "gzip", 4) == 0) ||
		    (vlen == 6 && strncasecmp(v, "x-gzip", 6) == 0) ||
		    (vlen == 7 && strncasecmp(v, "deflate", 7) == 0)))
			goto out;	/* (br, zstd: not read) */
		if ((rc = warc_inflate(body, blen, 15 + 32, warc_max_record,
		    &plain)) != 0) {
			/* Too large is not to judge; corrupt, no page. */
			if (rc == -2)
				*cause = xstrdup("too-large");
			rc = rc == -2;
			goto out;
		}
		body = plain.data;
		blen = plain.len;
	}
	if (blen == 0)
		goto out;
	warc_charset(ct, ctlen, body, blen, cs, sizeof cs);
	rc = mail_html(body, blen, cs[0] != '\0' ? cs : NULL, &r->text,
	    cause);
	if (rc == 0 && r->text.len > warc_max_text) {
		*cause = xstrdup("text-too-large");
		rc = 1;
	}
out:
	buf_free(&dechunked);
	buf_free(&plain);
	return (rc);
}

/*
 * -f warc: the text, id and time of one WARC record, as read (one gzip
 * member of a .warc.gz, or plain).  0 (a record without text passes as
 * empty), 1 (not to judge, cause its reason), -1 and a cause.
 */
int
warc_parse(struct record *r, const char *text_field, const char *id_field,
    const char *time_field, char **cause)
{
	struct warc_hdr	 h;
	struct buf	 plain = { 0 };
	const char	*p = r->raw.data, *v;
	char		*why = NULL, *s;
	size_t		 len = r->raw.len, vlen, n;
	int64_t		 t;
	int		 rc = 0;

	if (len >= 2 && (unsigned char)p[0] == 0x1f &&
	    (unsigned char)p[1] == 0x8b) {
		if ((rc = warc_inflate(p, len, 15 + 16, warc_max_record,
		    &plain)) != 0) {
			/* (input.c has read it whole: only a caller of its own.) */
			*cause = xstrdup(rc == -2 ? "too-large" : "not a WARC "
			    "record (a bad gzip member)");
			rc = rc == -2 ? 1 : -1;
			goto out;
		}
		p = plain.data;
		len = plain.len;
	}
	if (warc_header(p, len, &h, &why) != 1) {
		/* (input.c has checked it: only a caller of its own.) */
		xasprintf(cause, "not a WARC record (%s)", why);
		free(why);
		rc = -1;
		goto out;
	}
	/* A .warc.gz member whose block is not its Content-Length's. */
	if (h.total != len || memcmp(p + len - 4, "\r\n\r\n", 4) != 0) {
		xasprintf(cause, "not a WARC record (its block and two CRLFs "
		    "are %zu bytes, not the %" PRIu64 " its Content-Length "
		    "says)", len - h.hlen, h.clen + 4);
		rc = -1;
		goto out;
	}
	n = strlen("WARC/1.0\r\n");
	if (warc_field(p + n, h.hlen - n, "WARC-Target-URI", &v, &vlen)) {
		/* (WARC/1.0's examples put the URI in angle brackets.) */
		if (vlen >= 2 && v[0] == '<' && v[vlen - 1] == '>') {
			v++;
			vlen -= 2;
		}
		buf_append(&r->id, v, vlen);
	} else if (warc_field(p + n, h.hlen - n, "WARC-Record-ID", &v, &vlen))
		buf_append(&r->id, v, vlen);
	if (warc_field(p + n, h.hlen - n, "WARC-Date", &v, &vlen)) {
		s = xstrndup(v, vlen);
		if (parse_time(s, &t, &why) == 0)
			r->time = t;
		free(why);
		why = NULL;
		free(s);
	}
	if (warc_field(p + n, h.hlen - n, "WARC-Type", &v, &vlen) &&
	    vlen == 8 && strncasecmp(v, "response", 8) == 0 &&
	    warc_field(p + n, h.hlen - n, "Content-Type", &v, &vlen) &&
	    vlen >= 16 && strncasecmp(v, "application/http", 16) == 0)
		rc = warc_http(r, p + h.hlen, h.clen, cause);
out:
	buf_free(&plain);
	return (rc);
}

/*
 * Set the limits of warc_parse from the options: a record decompressed at
 * most --max-message, a page's text at most --max-bytes (over either, it
 * is passed through unjudged); and load the mail module, whose HTML
 * reader it uses.  0, or -1 and a cause.
 */
int
warc_init(const struct pipeline_opts *po, char **cause)
{
	warc_max_record = po->max_message;
	warc_max_text = po->max_bytes;
	return (mail_init(cause));
}
