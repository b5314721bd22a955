/*
 * Text normalisation, before shingling.  Four switchable steps, stored in
 * the index because they change every shingle:
 *
 *   casefold  Unicode full case folding (utf8proc)
 *   nfkc      compatibility normalisation, NFKC (utf8proc)
 *   space     white space runs become one space; the ends are trimmed
 *   punct     Unicode punctuation (categories P*) becomes white space
 *
 * Pure ASCII text, most of any real feed, takes a fast path of one table
 * lookup per byte: NFKC is the identity there and case folding is tolower.
 * Text that is not valid UTF-8 is not rejected: it is normalised as bytes
 * (ASCII folding, spaces, punctuation) and normalize returns 1 so that the
 * shingler treats each byte as a character.
 */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "mhfilter.h"

static const struct {
	const char	*name;
	int		 flag;
} norm_names[] = {
	{ "casefold", NORM_CASEFOLD },
	{ "nfkc", NORM_NFKC },
	{ "space", NORM_SPACE },
	{ "punct", NORM_PUNCT },
};
#define NNORM (sizeof norm_names / sizeof norm_names[0])

/* ASCII classes: 1 white space, 2 punctuation (Unicode category P*). */
#define C_SPACE	1
#define C_PUNCT	2
static unsigned char ascii_class[128];

static void	normalize_init(void);
static int	normalize_bytes(const unsigned char *, size_t, int, struct buf *);
static int	normalize_utf8(const unsigned char *, size_t, int, struct buf *);

/* Parse a comma list of step names, or "none". */
int
normalize_parse(const char *list, int *flags, char **cause)
{
	char	*copy, *next, *word;
	size_t	 i;
	int	 f = 0;

	if (strcmp(list, "none") == 0) {
		*flags = 0;
		return (0);
	}
	next = copy = xstrdup(list);
	while ((word = strsep(&next, ",")) != NULL) {
		for (i = 0; i < NNORM; i++) {
			if (strcmp(word, norm_names[i].name) == 0)
				break;
		}
		if (i == NNORM) {
			xasprintf(cause, "unknown normalisation '%s' (use "
			    "casefold, nfkc, space, punct or none)", word);
			free(copy);
			return (-1);
		}
		f |= norm_names[i].flag;
	}
	free(copy);
	*flags = f;
	return (0);
}

/* Write the comma list for flags, "none" when empty. */
void
normalize_name(int flags, char *out, size_t len)
{
	size_t	 i;
	size_t	 used = 0;
	int	 n;

	for (i = 0; i < NNORM && used < len; i++) {
		if (~flags & norm_names[i].flag)
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? "," : "",
		    norm_names[i].name);
		if (n > 0)
			used += n;
	}
	if (used == 0)
		snprintf(out, len, "none");
}

/* Fill the ASCII class table from Unicode's own categories. */
static void
normalize_init(void)
{
	int	 c, cat;

	if (ascii_class[' '] != 0)
		return;
	for (c = 0; c < 128; c++) {
		cat = utf8proc_category(c);
		if (c == ' ' || (c >= '\t' && c <= '\r'))
			ascii_class[c] = C_SPACE;
		else if (cat >= UTF8PROC_CATEGORY_PC &&
		    cat <= UTF8PROC_CATEGORY_PO)
			ascii_class[c] = C_PUNCT;
	}
}

/* Classify a code point: C_SPACE, C_PUNCT or 0. */
static int
classify(utf8proc_int32_t cp)
{
	int	 cat;

	if (cp < 128)
		return (ascii_class[cp]);
	if (cp == 0x85)
		return (C_SPACE);
	cat = utf8proc_category(cp);
	if (cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
	    cat == UTF8PROC_CATEGORY_ZP)
		return (C_SPACE);
	if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO)
		return (C_PUNCT);
	return (0);
}

/*
 * The byte path, for ASCII and for invalid UTF-8: one table lookup a byte.
 * Bytes at or above 0x80 are copied as they are.
 */
static int
normalize_bytes(const unsigned char *p, size_t len, int flags,
    struct buf *out)
{
	size_t	 i;
	char	*w;
	int	 c, pending = 0, space;

	buf_reserve(out, len);
	w = out->data + out->len;
	for (i = 0; i < len; i++) {
		c = p[i];
		space = c < 128 && (ascii_class[c] == C_SPACE ||
		    ((flags & NORM_PUNCT) && ascii_class[c] == C_PUNCT));
		if (space && (flags & NORM_SPACE)) {
			pending = 1;
			continue;
		}
		if (space)
			c = (ascii_class[c] == C_PUNCT) ? ' ' : c;
		else if ((flags & NORM_CASEFOLD) && c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (pending && w != out->data + out->len)
			*w++ = ' ';
		pending = 0;
		*w++ = c;
	}
	out->len = w - out->data;
	out->data[out->len] = '\0';
	return (0);
}

/* The Unicode path: utf8proc maps, then spaces and punctuation. */
static int
normalize_utf8(const unsigned char *p, size_t len, int flags,
    struct buf *out)
{
	utf8proc_uint8_t	*mapped = NULL;
	utf8proc_ssize_t	 n, i, step;
	utf8proc_int32_t	 cp;
	int			 options, pending = 0, class;
	size_t			 start = out->len;

	options = UTF8PROC_STABLE;
	if (flags & NORM_NFKC)
		options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
	if (flags & NORM_CASEFOLD)
		options |= UTF8PROC_CASEFOLD;
	if (flags & (NORM_NFKC|NORM_CASEFOLD)) {
		if (~flags & NORM_NFKC)
			options |= UTF8PROC_COMPOSE;	/* keep NFC */
		n = utf8proc_map(p, len, &mapped, options);
		if (n < 0)
			return (-1);
		p = mapped;
		len = n;
	}
	buf_reserve(out, len);
	for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
		step = utf8proc_iterate(p + i, len - i, &cp);
		if (step < 0) {
			free(mapped);
			out->len = start;
			return (-1);
		}
		class = classify(cp);
		if (class == C_PUNCT && (~flags & NORM_PUNCT))
			class = 0;
		if (class != 0 && (flags & NORM_SPACE)) {
			pending = 1;
			continue;
		}
		if (class == C_PUNCT) {
			buf_append(out, " ", 1);
			continue;
		}
		if (pending && out->len != start)
			buf_append(out, " ", 1);
		pending = 0;
		buf_append(out, p + i, step);
	}
	free(mapped);
	return (0);
}

/*
 * Append the normalised form of text to out.  Returns 0, or 1 when the text
 * was not valid UTF-8 and was normalised as bytes.
 */
int
normalize(const char *text, size_t len, int flags, struct buf *out)
{
	const unsigned char	*p = (const unsigned char *)text;
	size_t			 i;
	unsigned char		 high = 0;

	normalize_init();
	for (i = 0; i < len; i++)
		high |= p[i];
	if (high < 0x80)
		return (normalize_bytes(p, len, flags, out));
	if (normalize_utf8(p, len, flags, out) == 0)
		return (0);
	normalize_bytes(p, len, flags, out);
	return (1);
}
