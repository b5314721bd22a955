/*
 * One mail message or news article (RFC 5322, RFC 5536, MIME) to the text
 * the filter compares, its id and its time.  Pure: no I/O.
 *
 * The text is the Subject, without reply and forward prefixes and list tags,
 * a newline, and the body: its text parts in order, text/plain as it is and
 * text/html turned into text with libxml2's HTML parser, where of a
 * multipart/alternative only the text/plain alternative is read (the last
 * one when none is plain).  So HTML is read only where it is the only form
 * of its text: an HTML-only message, or an HTML body beside which a list
 * manager put its plain-text footer.  Transfer encodings are undone and
 * charsets converted to UTF-8 by GMime; a charset that is wrong or unknown
 * falls back to UTF-8 when the bytes are valid UTF-8, else to Windows-1252.
 * Attachments, signature parts and other non-text parts are never decoded:
 * GMime's parser, given a seekable stream, keeps their content as offsets
 * into the message, so a huge attachment costs no memory beyond the message.
 * Headers never enter the text.  Quoted replies, signatures and list
 * footers are cut from the body as the MAIL_STRIP_* flags say.
 *
 * Threads: GMime and libxml2 are initialised once (pthread_once).  After
 * that GMime's charset, iconv and utils functions are thread-safe and its
 * objects are not; each call here makes its own objects and shares none,
 * so mailmod_extract may run in several worker threads at once.  libxml2's
 * parser is thread-safe once xmlInitParser has run.
 */

#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gmime/gmime.h>
#include <libxml/HTMLparser.h>
#include <libxml/parser.h>

#include "mhfilter.h"

/* What the walk over the MIME tree collects. */
struct mailwalk {
	struct buf	 body;		/* the text parts, in UTF-8, in order */
	struct buf	 attach;	/* a line per attachment: its digest */
	int		 flags;		/* MAIL_* */
	int		 depth;
};

static pthread_once_t	 mail_once = PTHREAD_ONCE_INIT;

static void	mail_walk(struct mailwalk *, GMimeObject *);

/* Initialise GMime and libxml2 (once, in whichever thread comes first). */
static void
mail_init_once(void)
{
	g_mime_init();
	xmlInitParser();
}

/* Initialise the libraries; from any thread, any number of times. */
void
mailmod_init(void)
{
	pthread_once(&mail_once, mail_init_once);
}

/*
 * Append s to out as valid UTF-8 without NULs; invalid bytes are Latin-1.
 * s may be NULL when len is 0 (GMime's empty value).
 */
static void
mail_append_utf8(struct buf *out, const char *s, size_t len)
{
	const char	*end, *bad;
	gchar		*conv;
	gsize		 n;

	if (len == 0)
		return;
	for (end = s + len; s < end;) {
		if (g_utf8_validate(s, end - s, &bad)) {
			bad = end;
		}
		buf_append(out, s, bad - s);
		if (bad == end)
			break;
		if (*bad != '\0') {
			conv = g_convert(bad, 1, "UTF-8", "ISO-8859-1", NULL,
			    &n, NULL);
			if (conv != NULL)
				buf_append(out, conv, n);
			g_free(conv);
		}
		s = bad + 1;
	}
}

/* Is cs single-byte and ASCII-compatible (so UTF-8 bytes mislabel it)? */
static int
mail_charset_8bit(const char *cs)
{
	return (strncasecmp(cs, "iso-8859", 8) == 0 ||
	    strncasecmp(cs, "iso8859", 7) == 0 ||
	    strncasecmp(cs, "windows-", 8) == 0 ||
	    strncasecmp(cs, "cp125", 5) == 0 ||
	    strncasecmp(cs, "us-ascii", 8) == 0 ||
	    strncasecmp(cs, "ascii", 5) == 0 ||
	    strncasecmp(cs, "latin", 5) == 0 ||
	    strncasecmp(cs, "koi8", 4) == 0);
}

/*
 * Append decoded bytes in charset cs (NULL: none given) to out as UTF-8.
 * Bytes that are valid UTF-8 with non-ASCII characters and labelled with a
 * single-byte charset were mislabelled (Latin-1 text is almost never valid
 * UTF-8); a conversion that fails falls back to Windows-1252, then Latin-1.
 */
static void
mail_convert(struct buf *out, const char *data, size_t len, const char *cs)
{
	gchar	*conv = NULL;
	gsize	 n;
	int	 utf8;

	if (len == 0)
		return;		/* (GMime's empty content may be NULL) */
	utf8 = g_utf8_validate(data, len, NULL);
	if (cs == NULL || strcasecmp(cs, "utf-8") == 0 ||
	    strcasecmp(cs, "utf8") == 0 ||
	    (utf8 && mail_charset_8bit(cs))) {
		if (utf8 || cs != NULL || (conv = g_convert(data, len,
		    "UTF-8", "WINDOWS-1252", NULL, &n, NULL)) == NULL) {
			mail_append_utf8(out, data, len);
			return;
		}
	}
	if (conv == NULL)
		conv = g_convert(data, len, "UTF-8",
		    g_mime_charset_iconv_name(cs), NULL, &n, NULL);
	if (conv == NULL && !utf8)
		conv = g_convert(data, len, "UTF-8", "WINDOWS-1252", NULL,
		    &n, NULL);
	if (conv == NULL) {
		mail_append_utf8(out, data, len);
		return;
	}
	mail_append_utf8(out, conv, n);
	g_free(conv);
}

/* A leaf part's content, transfer encoding undone, in UTF-8, onto out. */
static void
mail_part_text(GMimePart *part, struct buf *out)
{
	GMimeDataWrapper	*w;
	GMimeStream		*ms;
	GByteArray		*ba;
	const char		*cs;

	if ((w = g_mime_part_get_content(part)) == NULL)
		return;
	ms = g_mime_stream_mem_new();
	if (g_mime_data_wrapper_write_to_stream(w, ms) >= 0) {
		ba = g_mime_stream_mem_get_byte_array(GMIME_STREAM_MEM(ms));
		cs = g_mime_object_get_content_type_parameter(
		    GMIME_OBJECT(part), "charset");
		if (out->len > 0 && out->data[out->len - 1] != '\n')
			buf_append(out, "\n", 1);
		mail_convert(out, (const char *)ba->data, ba->len, cs);
	}
	g_object_unref(ms);
}

/*
 * A line for an attachment onto out: "attachment " and the SHA-256 of its
 * decoded content, as 32 hex digits.  It is decoded through a digest
 * filter into a null stream, a block at a time: a 40 MB attachment costs
 * no memory beyond the message.
 */
static void
mail_part_digest(GMimePart *part, struct buf *out)
{
	GMimeDataWrapper	*w;
	GMimeStream		*null, *fs;
	GMimeFilter		*ck;
	gchar			*hex;

	if ((w = g_mime_part_get_content(part)) == NULL)
		return;
	null = g_mime_stream_null_new();
	fs = g_mime_stream_filter_new(null);
	ck = g_mime_filter_checksum_new(G_CHECKSUM_SHA256);
	g_mime_stream_filter_add(GMIME_STREAM_FILTER(fs), ck);
	if (g_mime_data_wrapper_write_to_stream(w, fs) >= 0 &&
	    g_mime_stream_flush(fs) == 0 &&
	    (hex = g_mime_filter_checksum_get_string(
	    GMIME_FILTER_CHECKSUM(ck))) != NULL) {
		buf_append(out, MAIL_ATTACH " ", sizeof MAIL_ATTACH);
		buf_append(out, hex, strlen(hex) < MAIL_DIGEST ? strlen(hex) :
		    MAIL_DIGEST);
		buf_append(out, "\n", 1);
		g_free(hex);
	}
	g_object_unref(ck);
	g_object_unref(fs);
	g_object_unref(null);
}

/* Is the part a signature, which says nothing of the message's content? */
static int
mail_signature(GMimeContentType *ct)
{
	return (g_mime_content_type_is_type(ct, "application",
	    "pgp-signature") || g_mime_content_type_is_type(ct,
	    "application", "pkcs7-signature") ||
	    g_mime_content_type_is_type(ct, "application",
	    "x-pkcs7-signature"));
}

/* Is this HTML element a block, which starts a new line in text? */
static int
mail_html_block(const char *name)
{
	static const char *const blocks[] = {
		"p", "div", "br", "li", "tr", "td", "th", "h1", "h2", "h3",
		"h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol",
		"dl", "dt", "dd", "hr", "section", "article", "header",
		"footer", "address", "center", "body", NULL
	};
	int	 i;

	for (i = 0; blocks[i] != NULL; i++) {
		if (strcasecmp(name, blocks[i]) == 0)
			return (1);
	}
	return (0);
}

/*
 * The text of an HTML subtree onto out; script, style and head left out,
 * and with noquote blockquote (HTML's quoted reply text).
 */
static void
mail_html_walk(xmlNode *n, struct buf *out, int noquote, int depth)
{
	const char	*name;
	int		 block;

	for (; n != NULL; n = n->next) {
		if (n->type == XML_TEXT_NODE || n->type ==
		    XML_CDATA_SECTION_NODE) {
			if (n->content != NULL)
				buf_append(out, n->content,
				    strlen((char *)n->content));
			continue;
		}
		if (n->type != XML_ELEMENT_NODE || depth > 256)
			continue;
		name = (const char *)n->name;
		if (strcasecmp(name, "script") == 0 ||
		    strcasecmp(name, "style") == 0 ||
		    strcasecmp(name, "head") == 0 ||
		    (noquote && strcasecmp(name, "blockquote") == 0))
			continue;
		if ((block = mail_html_block(name)))
			buf_append(out, "\n", 1);
		mail_html_walk(n->children, out, noquote, depth + 1);
		if (block)
			buf_append(out, "\n", 1);
	}
}

/* HTML (UTF-8) to text with libxml2's HTML parser, onto out. */
static void
mail_html_text(const char *html, size_t len, int noquote, struct buf *out)
{
	htmlDocPtr	 doc;

	if (len == 0 || len > INT32_MAX)
		return;
	doc = htmlReadMemory(html, (int)len, NULL, "UTF-8",
	    HTML_PARSE_RECOVER|HTML_PARSE_NOERROR|HTML_PARSE_NOWARNING|
	    HTML_PARSE_NONET|HTML_PARSE_COMPACT|HTML_PARSE_IGNORE_ENC);
	if (doc == NULL)
		return;
	if (out->len > 0 && out->data[out->len - 1] != '\n')
		buf_append(out, "\n", 1);
	mail_html_walk(xmlDocGetRootElement(doc), out, noquote, 0);
	xmlFreeDoc(doc);
}

/*
 * HTML in charset cs (NULL: none said) to text onto out, as an HTML part
 * of a message is read: converted to UTF-8 (mail_convert), then through
 * libxml2's HTML parser.  For WARC's pages (warc.c, through mail_html).
 */
void
mailmod_html(const char *html, size_t len, const char *cs, struct buf *out)
{
	struct buf	 utf8 = { 0 };

	mailmod_init();
	mail_convert(&utf8, html, len, cs);
	mail_html_text(utf8.data, utf8.len, 0, out);
	buf_free(&utf8);
}

/* Does this object (or a part in it) hold text/plain that is not attached? */
static int
mail_has_plain(GMimeObject *o, int depth)
{
	GMimeContentType	*ct = g_mime_object_get_content_type(o);
	GMimeMultipart		*mp;
	int			 i, n;

	if (depth > 32)
		return (0);
	if (GMIME_IS_MULTIPART(o)) {
		mp = GMIME_MULTIPART(o);
		n = g_mime_multipart_get_count(mp);
		for (i = 0; i < n; i++) {
			if (mail_has_plain(g_mime_multipart_get_part(mp, i),
			    depth + 1))
				return (1);
		}
		return (0);
	}
	return (GMIME_IS_PART(o) && ct != NULL &&
	    g_mime_content_type_is_type(ct, "text", "plain") &&
	    !g_mime_part_is_attachment(GMIME_PART(o)));
}

/* The alternative to read: the last with text/plain, else the last. */
static GMimeObject *
mail_alternative(GMimeMultipart *mp)
{
	GMimeObject	*o, *pick = NULL;
	int		 i, n;

	n = g_mime_multipart_get_count(mp);
	for (i = 0; i < n; i++) {
		o = g_mime_multipart_get_part(mp, i);
		if (mail_has_plain(o, 0))
			pick = o;
	}
	if (pick == NULL && n > 0)
		pick = g_mime_multipart_get_part(mp, n - 1);
	return (pick);
}

/* Collect the text of a MIME object into w. */
static void
mail_walk(struct mailwalk *w, GMimeObject *o)
{
	GMimeContentType	*ct;
	GMimeMultipart		*mp;
	GMimeMessage		*inner;
	struct buf		 html = { 0 };
	const char		*pro;
	int			 i, n;

	if (o == NULL || w->depth > 32)
		return;
	w->depth++;
	ct = g_mime_object_get_content_type(o);
	if (GMIME_IS_MULTIPART(o)) {
		mp = GMIME_MULTIPART(o);
		if (GMIME_IS_MULTIPART_ENCRYPTED(o))
			;	/* nothing readable */
		else if (GMIME_IS_MULTIPART_SIGNED(o))
			mail_walk(w, g_mime_multipart_get_part(mp, 0));
		else if (ct != NULL &&
		    g_mime_content_type_is_type(ct, "multipart", "alternative"))
			mail_walk(w, mail_alternative(mp));
		else {
			n = g_mime_multipart_get_count(mp);
			for (i = 0; i < n; i++)
				mail_walk(w, g_mime_multipart_get_part(mp, i));
			/* No parts (no boundary): the text is all prologue. */
			if (n == 0 && (pro = g_mime_multipart_get_prologue(mp))
			    != NULL)
				mail_convert(&w->body, pro, strlen(pro), NULL);
		}
	} else if (GMIME_IS_MESSAGE_PART(o)) {
		/* A forwarded message: its body is part of the text. */
		inner = g_mime_message_part_get_message(GMIME_MESSAGE_PART(o));
		if (inner != NULL)
			mail_walk(w, g_mime_message_get_mime_part(inner));
	} else if (GMIME_IS_PART(o) && ct != NULL &&
	    !g_mime_part_is_attachment(GMIME_PART(o)) &&
	    g_mime_content_type_is_type(ct, "text", "plain"))
		mail_part_text(GMIME_PART(o), &w->body);
	else if (GMIME_IS_PART(o) && ct != NULL &&
	    !g_mime_part_is_attachment(GMIME_PART(o)) &&
	    g_mime_content_type_is_type(ct, "text", "html")) {
		mail_part_text(GMIME_PART(o), &html);
		mail_html_text(html.data, html.len,
		    w->flags & MAIL_STRIP_QUOTES, &w->body);
		buf_free(&html);
	} else if (GMIME_IS_PART(o) && (ct == NULL || !mail_signature(ct))) {
		/* An attachment, an image...: its digest, not its text. */
		mail_part_digest(GMIME_PART(o), &w->attach);
	}
	w->depth--;
}

/*
 * The length of a prefix of the Subject at s to drop: a reply or forward
 * marker with its colon (Re:, Fwd:, AW:, Re[2]:, ...) or a [tag]; 0 if none.
 */
static size_t
mail_prefix(const char *s)
{
	static const char *const words[] = {
		"re", "fwd", "fw", "aw", "wg", "sv", "vs", "antw", "tr", "rif",
		"odp", "res", "enc", NULL
	};
	size_t	 len, i;
	int	 k;

	if (*s == '[') {
		for (i = 1; s[i] != '\0' && s[i] != ']' && i < 80; i++)
			;
		return (s[i] == ']' ? i + 1 : 0);
	}
	for (k = 0; words[k] != NULL; k++) {
		len = strlen(words[k]);
		if (strncasecmp(s, words[k], len) != 0)
			continue;
		i = len;
		if (s[i] == '[' || s[i] == '(') {	/* Re[2]: */
			while (isdigit((unsigned char)s[++i]))
				;
			if (s[i] != ']' && s[i] != ')')
				continue;
			i++;
		}
		if (s[i] == ' ' && s[i + 1] == ':')	/* French "Re :" */
			i++;
		if (s[i] == ':')
			return (i + 1);
	}
	return (0);
}

/* The Subject without Re:, Fwd:, [list] and the like, onto out. */
static void
mail_subject(const char *subj, struct buf *out)
{
	size_t	 n, len;

	if (subj == NULL)
		return;
	for (;;) {
		while (isspace((unsigned char)*subj))
			subj++;
		if ((n = mail_prefix(subj)) == 0)
			break;
		subj += n;
	}
	len = strlen(subj);
	while (len > 0 && isspace((unsigned char)subj[len - 1]))
		len--;
	mail_append_utf8(out, subj, len);
}

/* A line of text: [s, s + len), without its newline (or CR LF). */
struct mline {
	const char	*s;
	size_t		 len;
	size_t		 off;		/* of the line in the text */
};

/* Split text into lines; returns how many. */
static size_t
mail_lines(const char *t, size_t len, struct mline **lp)
{
	struct mline	*l = NULL;
	size_t		 n = 0, size = 0, start = 0, i, e;

	for (i = 0; i <= len; i++) {
		if (i < len && t[i] != '\n')
			continue;
		if (i == len && start == len)
			break;
		if (n == size) {
			size = size ? size * 2 : 64;
			l = xreallocarray(l, size, sizeof *l);
		}
		e = i;
		if (e > start && t[e - 1] == '\r')
			e--;
		l[n].s = t + start;
		l[n].len = e - start;
		l[n].off = start;
		n++;
		start = i + 1;
	}
	*lp = l;
	return (n);
}

/* Is the line blank? */
static int
mail_blank(const struct mline *l)
{
	size_t	 i;

	for (i = 0; i < l->len; i++) {
		if (!isspace((unsigned char)l->s[i]))
			return (0);
	}
	return (1);
}

/* Does the line hold the word (case aside)? */
static int
mail_has(const struct mline *l, const char *word)
{
	size_t	 n = strlen(word), i;

	for (i = 0; i + n <= l->len; i++) {
		if (strncasecmp(l->s + i, word, n) == 0)
			return (1);
	}
	return (0);
}

/* Is the line an attribution ("On ... wrote:") before a quote? */
static int
mail_attribution(const struct mline *l)
{
	static const char *const verbs[] = {
		"wrote", "writes", "schrieb", "crit", "escribi", "scritto",
		"skrev", "napisa", "kirjoitti", "schreef", NULL
	};
	size_t	 len = l->len;
	int	 i;

	while (len > 0 && isspace((unsigned char)l->s[len - 1]))
		len--;
	if (len == 0 || l->s[len - 1] != ':')
		return (0);
	for (i = 0; verbs[i] != NULL; i++) {
		if (mail_has(l, verbs[i]))
			return (1);
	}
	return (0);
}

/* Is the line a separator of a list footer (a rule of _, -, = or *)? */
static int
mail_rule(const struct mline *l)
{
	size_t	 i, len = l->len;

	while (len > 0 && isspace((unsigned char)l->s[len - 1]))
		len--;
	if (len < 10 || strchr("_-=*~", l->s[0]) == NULL)
		return (0);
	for (i = 1; i < len; i++) {
		if (l->s[i] != l->s[0])
			return (0);
	}
	return (1);
}

/*
 * The words that mark a list footer: the usual ones and the list's own
 * names from its List-* headers (List-Id's <id>, List-Post's address).
 */
static int
mail_footer_marked(const struct mline *l, size_t n, char **marks)
{
	static const char *const words[] = {
		"unsubscribe", "listinfo", "mailing list", "mailman", NULL
	};
	size_t	 i;
	int	 k;

	for (i = 0; i < n; i++) {
		for (k = 0; words[k] != NULL; k++) {
			if (mail_has(&l[i], words[k]))
				return (1);
		}
		for (k = 0; marks[k] != NULL; k++) {
			if (mail_has(&l[i], marks[k]))
				return (1);
		}
	}
	return (0);
}

/* The list's own names from a List-* header value, into marks. */
static void
mail_list_marks(GMimeObject *o, char **marks, size_t max)
{
	static const char *const hdrs[] = {
		"List-Id", "List-Post", "List-Unsubscribe", "List-Archive",
		NULL
	};
	const char	*v, *a, *b;
	size_t		 n = 0;
	int		 k;

	for (k = 0; hdrs[k] != NULL && n + 1 < max; k++) {
		if ((v = g_mime_object_get_header(o, hdrs[k])) == NULL)
			continue;
		if ((a = strchr(v, '<')) == NULL || (b = strchr(a, '>')) ==
		    NULL || b - a < 4)
			continue;
		a++;
		if (strncasecmp(a, "mailto:", 7) == 0)
			a += 7;
		marks[n++] = xstrndup(a, strcspn(a, "?>"));
	}
	marks[n] = NULL;
}

/*
 * Does an Outlook reply header ("From: ..." then "Sent: ..." within three
 * lines) start at l?  What follows it is the message replied to.
 */
static int
mail_outlook(const struct mline *l, size_t n)
{
	static const char *const sent[] = {
		"Sent:", "Gesendet:", "Envoy", "Enviado", "Inviato:", NULL
	};
	size_t	 i;
	int	 k;

	if (l[0].len < 6 || strncasecmp(l[0].s, "From:", 5) != 0)
		return (0);
	for (i = 1; i < n && i <= 3; i++) {
		for (k = 0; sent[k] != NULL; k++) {
			if (l[i].len > strlen(sent[k]) &&
			    strncasecmp(l[i].s, sent[k], strlen(sent[k])) == 0)
				return (1);
		}
	}
	return (0);
}

/* Is the Subject a forward's (Fwd:, Fw:, WG:, TR:, Enc:, after any tags)? */
static int
mail_forward(const char *subj)
{
	size_t	 n;

	while (subj != NULL) {
		while (isspace((unsigned char)*subj))
			subj++;
		if ((n = mail_prefix(subj)) == 0)
			return (0);
		if (strncasecmp(subj, "fw", 2) == 0 ||
		    strncasecmp(subj, "wg", 2) == 0 ||
		    strncasecmp(subj, "tr", 2) == 0 ||
		    strncasecmp(subj, "enc", 3) == 0)
			return (1);
		subj += n;
	}
	return (0);
}

/*
 * Cut what the flags say from the body text t: the list footer (a rule in
 * the last 20 lines followed by list words), the signature (from the last
 * "-- " line), quoted lines with their attribution, and (unless the message
 * is a forward, whose point is the message below) an Outlook-style
 * "Original Message" or reply header with everything after it.  The rest
 * goes onto out.
 */
static void
mail_strip(const char *t, size_t len, int flags, int forward, char **marks,
    struct buf *out)
{
	struct mline	*l;
	size_t		 n, i, j, end;

	n = mail_lines(t, len, &l);
	end = n;
	while (end > 0 && mail_blank(&l[end - 1]))
		end--;
	if (flags & MAIL_STRIP_FOOTER) {
		for (i = end > 20 ? end - 20 : 0; i < end; i++) {
			if (mail_rule(&l[i]) &&
			    mail_footer_marked(l + i + 1, end - i - 1, marks)) {
				end = i;
				break;
			}
		}
	}
	if (flags & MAIL_STRIP_SIG) {
		for (i = end; i > 0; i--) {
			if ((l[i - 1].len == 3 && memcmp(l[i - 1].s, "-- ", 3)
			    == 0) || (l[i - 1].len == 2 && end - i < 10 &&
			    memcmp(l[i - 1].s, "--", 2) == 0)) {
				end = i - 1;
				break;
			}
		}
	}
	if ((flags & MAIL_STRIP_QUOTES) && !forward) {
		for (i = 0; i < end; i++) {
			if ((mail_has(&l[i], "original message") &&
			    l[i].len > 0 && l[i].s[0] == '-') ||
			    mail_outlook(l + i, end - i)) {
				end = i;
				/* And the rule Outlook draws above it. */
				if (i > 0 && mail_rule(&l[i - 1]))
					end--;
				break;
			}
		}
	}
	for (i = 0; i < end; i++) {
		if (flags & MAIL_STRIP_QUOTES) {
			if (l[i].len > 0 && l[i].s[0] == '>')
				continue;
			if (mail_attribution(&l[i])) {
				for (j = i + 1; j < end && mail_blank(&l[j]);
				    j++)
					;
				if (j == end || (l[j].len > 0 &&
				    l[j].s[0] == '>'))
					continue;
			}
		}
		buf_append(out, l[i].s, l[i].len);
		buf_append(out, "\n", 1);
	}
	free(l);
}

/*
 * The message's id: Message-ID without angle brackets and white space, the
 * domain (after the last @) in lower case.  Empty when there is none.
 */
static void
mail_id(GMimeMessage *m, struct buf *id)
{
	const char	*v, *at;
	size_t		 len, i;

	v = g_mime_message_get_message_id(m);
	if (v == NULL || *v == '\0')
		v = g_mime_object_get_header(GMIME_OBJECT(m), "Message-ID");
	if (v == NULL)
		return;
	while (isspace((unsigned char)*v) || *v == '<')
		v++;
	len = strcspn(v, ">");
	while (len > 0 && isspace((unsigned char)v[len - 1]))
		len--;
	for (i = 0; i < len; i++) {
		if (isspace((unsigned char)v[i]))
			return;	/* not an id: better none than a wrong one */
	}
	buf_append(id, v, len);
	if ((at = memrchr(id->data, '@', id->len)) != NULL) {
		for (i = at - id->data; i < id->len; i++)
			id->data[i] = tolower((unsigned char)id->data[i]);
	}
}

/*
 * An id for a message without a Message-ID: "noid-" and 16 hex digits of
 * the SHA-256 of its Date and From fields and its text, so that the same
 * message delivered again has the same id (and is seen), whatever Received
 * fields it gathered on the way, and two such messages never share one.
 */
static void
mail_content_id(GMimeMessage *m, const struct buf *text, struct buf *id)
{
	static const char *const hdrs[] = { "Date", "From" };
	GChecksum	*ck;
	const char	*v, *hex;
	size_t		 k;

	ck = g_checksum_new(G_CHECKSUM_SHA256);
	for (k = 0; k < sizeof hdrs / sizeof hdrs[0]; k++) {
		v = g_mime_object_get_header(GMIME_OBJECT(m), hdrs[k]);
		if (v != NULL)
			g_checksum_update(ck, (const guchar *)v, strlen(v));
		g_checksum_update(ck, (const guchar *)"", 1);
	}
	if (text->len > 0)
		g_checksum_update(ck, (const guchar *)text->data, text->len);
	hex = g_checksum_get_string(ck);
	buf_append(id, "noid-", 5);
	buf_append(id, hex, 16);
	g_checksum_free(ck);
}

/*
 * The message's time, seconds since the epoch: its Date, else (news) its
 * Injection-Date or NNTP-Posting-Date; 0 (the time it is read) when none
 * of them is there or makes sense.
 */
static int64_t
mail_time(GMimeMessage *m)
{
	static const char *const hdrs[] = {
		"Injection-Date", "NNTP-Posting-Date", NULL
	};
	GDateTime	*dt;
	const char	*v;
	int64_t		 t = 0;
	int		 k;

	if ((dt = g_mime_message_get_date(m)) != NULL)
		t = g_date_time_to_unix(dt);
	for (k = 0; t == 0 && hdrs[k] != NULL; k++) {
		v = g_mime_object_get_header(GMIME_OBJECT(m), hdrs[k]);
		if (v != NULL && (dt = g_mime_utils_header_decode_date(v)) !=
		    NULL) {
			t = g_date_time_to_unix(dt);
			g_date_time_unref(dt);
		}
	}
	if (t < TIME_MIN || t > TIME_MAX)
		t = 0;
	return (t);
}

/* The addresses of an address header field onto meta as "key addr" lines. */
static void
mail_meta_addrs(GMimeMessage *m, const char *field, const char *key,
    struct buf *meta)
{
	InternetAddressList	*list;
	InternetAddress		*a;
	const char		*v, *addr;
	size_t			 i, n;
	int			 k;

	if ((v = g_mime_object_get_header(GMIME_OBJECT(m), field)) == NULL ||
	    (list = internet_address_list_parse(NULL, v)) == NULL)
		return;
	n = internet_address_list_length(list);
	for (k = 0; (size_t)k < n; k++) {
		a = internet_address_list_get_address(list, k);
		if (!INTERNET_ADDRESS_IS_MAILBOX(a))
			continue;
		addr = internet_address_mailbox_get_addr(
		    INTERNET_ADDRESS_MAILBOX(a));
		if (addr == NULL || *addr == '\0' || strchr(addr, '\n'))
			continue;
		buf_append(meta, key, strlen(key));
		buf_append(meta, " ", 1);
		for (i = 0; addr[i] != '\0'; i++) {
			char c = tolower((unsigned char)addr[i]);
			buf_append(meta, &c, 1);
		}
		buf_append(meta, "\n", 1);
	}
	g_object_unref(list);
}

/*
 * What an allow-list looks at (mailload.c), onto meta, a line each: "list-id
 * ID" (List-Id's <id>), "from ADDR" (From, Sender), "to ADDR" (To, Cc,
 * Delivered-To, X-Original-To), addresses in lower case.
 */
static void
mail_meta(GMimeMessage *m, struct buf *meta)
{
	static const char *const tos[] = {
		"To", "Cc", "Delivered-To", "X-Original-To"
	};
	const char	*v, *a, *b;
	size_t		 i;

	if ((v = g_mime_object_get_header(GMIME_OBJECT(m), "List-Id")) !=
	    NULL && (a = strchr(v, '<')) != NULL &&
	    (b = strchr(a, '>')) != NULL && b > a + 1) {
		buf_append(meta, "list-id ", 8);
		for (a++; a < b; a++) {
			char c = tolower((unsigned char)*a);
			if (c != '\n' && c != '\r')
				buf_append(meta, &c, 1);
		}
		buf_append(meta, "\n", 1);
	}
	mail_meta_addrs(m, "From", "from", meta);
	mail_meta_addrs(m, "Sender", "from", meta);
	for (i = 0; i < sizeof tos / sizeof tos[0]; i++)
		mail_meta_addrs(m, tos[i], "to", meta);
}

/*
 * An mbox message (after its From_ line) with >From quoting undone, in a
 * copy, or NULL when it has none to undo (the usual case: no copy made).
 */
static char *
mail_unquote(const char *s, size_t len, size_t *outlen)
{
	const char	*p, *end = s + len, *q;
	char		*copy = NULL, *w = NULL;
	int		 bol;

	for (p = s, bol = 1; p < end; p++) {
		if (bol && *p == '>') {
			for (q = p; q < end && *q == '>'; q++)
				;
			if (end - q >= 5 && memcmp(q, "From ", 5) == 0) {
				if (copy == NULL) {
					copy = w = xmalloc(len);
					memcpy(w, s, p - s);
					w += p - s;
				}
				p++;	/* drop one '>' */
			}
		}
		bol = *p == '\n';
		if (copy != NULL)
			*w++ = *p;
	}
	*outlen = copy != NULL ? (size_t)(w - copy) : 0;
	return (copy);
}

/*
 * Read one message: fill text (Subject, newline, body), id and *time.
 * flags are MAIL_*.  A leading mbox From_ line is skipped and its >From
 * quoting undone.  Returns 0, or 1 when the message cannot be judged, with
 * its reason as a cause: "no-header" (no header fields: not a message),
 * "unreadable" (GMime read nothing) or "too-large" (for GMime).  A message
 * without text is not one of them: its text is empty.  With meta, what an
 * allow-list looks at too (mail_meta).
 */
int
mailmod_extract(const char *msg, size_t len, int flags, struct buf *text,
    struct buf *id, int64_t *time, struct buf *meta, char **cause)
{
	GMimeParser	*parser;
	GMimeStream	*stream;
	GMimeMessage	*m;
	GByteArray	*ba;
	struct mailwalk	 w;
	const char	*nl;
	char		*copy, *marks[8];
	size_t		 copylen, i;
	int		 forward, rv = -1;

	mailmod_init();
	text->len = id->len = 0;
	*time = 0;
	if (len >= 5 && memcmp(msg, "From ", 5) == 0) {
		nl = memchr(msg, '\n', len);
		len = nl != NULL ? len - (nl + 1 - msg) : 0;
		msg = nl != NULL ? nl + 1 : msg + 5;
	}
	if ((copy = mail_unquote(msg, len, &copylen)) != NULL) {
		msg = copy;
		len = copylen;
	}
	if (len > G_MAXUINT) {
		*cause = xstrdup("too-large");
		free(copy);
		return (1);
	}

	/*
	 * The stream reads the message in place: the GByteArray takes the
	 * buffer and gives it back (g_byte_array_steal), nothing is copied,
	 * and the stream does not own (free) the array.
	 */
	ba = g_byte_array_new_take((guint8 *)msg, len);
	stream = g_mime_stream_mem_new_with_byte_array(ba);
	g_mime_stream_mem_set_owner(GMIME_STREAM_MEM(stream), FALSE);
	parser = g_mime_parser_new_with_stream(stream);
	g_mime_parser_set_persist_stream(parser, TRUE);
	m = g_mime_parser_construct_message(parser, NULL);
	g_object_unref(parser);

	rv = 1;
	if (m == NULL) {
		*cause = xstrdup("unreadable");
		goto out;
	}
	if (g_mime_header_list_get_count(
	    g_mime_object_get_header_list(GMIME_OBJECT(m))) == 0) {
		*cause = xstrdup("no-header");
		goto out;
	}
	memset(&w, 0, sizeof w);
	w.flags = flags;
	mail_walk(&w, g_mime_message_get_mime_part(m));
	if (!(flags & MAIL_NO_ID))
		mail_id(m, id);
	*time = mail_time(m);
	if (meta != NULL)
		mail_meta(m, meta);

	mail_subject(g_mime_message_get_subject(m), text);
	forward = mail_forward(g_mime_message_get_subject(m));
	buf_append(text, "\n", 1);
	mail_list_marks(GMIME_OBJECT(m), marks, sizeof marks / sizeof *marks);
	mail_strip(w.body.data, w.body.len, flags, forward, marks, text);
	for (i = 0; marks[i] != NULL; i++)
		free(marks[i]);
	/*
	 * The attachments' digests after the text: two messages that differ
	 * only in what they attach are not copies, and one with nothing but
	 * attachments is compared by them rather than passed as empty.
	 */
	buf_append(text, w.attach.data, w.attach.len);
	buf_free(&w.attach);
	/* Only a newline: nothing to compare (the filter passes it). */
	if (text->len == 1)
		text->len = 0;
	if (id->len == 0 && !(flags & MAIL_NO_ID))
		mail_content_id(m, text, id);
	buf_free(&w.body);
	rv = 0;
out:
	if (m != NULL)
		g_object_unref(m);
	g_object_unref(stream);
	(void)g_byte_array_steal(ba, NULL);	/* ours again */
	g_byte_array_unref(ba);
	free(copy);
	return (rv);
}
