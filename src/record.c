/*
 * One raw record to the (id, text) pair the filter compares, for each input
 * format.  JSON is parsed with jansson; a record that does not fit its
 * format is reported with a cause and left to the bad-input policy.
 */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mhfilter.h"

static int	record_jsonl(struct record *, const char *, const char *,
		    char **);

/* Take id and text from a JSON object. */
static int
record_jsonl(struct record *r, const char *text_field, const char *id_field,
    char **cause)
{
	json_t		*root, *v;
	json_error_t	 err;
	char		 num[32];
	int		 rv = -1;

	root = json_loadb(r->raw.data, r->raw.len, JSON_ALLOW_NUL, &err);
	if (root == NULL) {
		xasprintf(cause, "invalid JSON at column %d: %s", err.column,
		    err.text);
		return (-1);
	}
	if (!json_is_object(root)) {
		xasprintf(cause, "not a JSON object");
		goto out;
	}
	v = json_object_get(root, text_field);
	if (v == NULL) {
		xasprintf(cause, "no \"%s\" field", text_field);
		goto out;
	}
	if (!json_is_string(v)) {
		xasprintf(cause, "field \"%s\" is not a string", text_field);
		goto out;
	}
	buf_append(&r->text, json_string_value(v), json_string_length(v));
	v = json_object_get(root, id_field);
	if (json_is_string(v))
		buf_append(&r->id, json_string_value(v), json_string_length(v));
	else if (json_is_integer(v)) {
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		buf_append(&r->id, num, strlen(num));
	} else if (v != NULL && !json_is_null(v)) {
		xasprintf(cause, "field \"%s\" is not a string or an integer",
		    id_field);
		goto out;
	}
	rv = 0;
out:
	json_decref(root);
	return (rv);
}

/*
 * Fill r->text and r->id from r->raw.  Returns 0, or -1 with a cause when
 * the record is malformed for its format.
 */
int
record_parse(struct record *r, int format, const char *text_field,
    const char *id_field, char **cause)
{
	const char	*tab;

	r->text.len = r->id.len = 0;
	switch (format) {
	case FORMAT_TSV:
		tab = memchr(r->raw.data, '\t', r->raw.len);
		if (tab == NULL) {
			xasprintf(cause, "no TAB between id and text");
			return (-1);
		}
		buf_append(&r->id, r->raw.data, tab - r->raw.data);
		buf_append(&r->text, tab + 1,
		    r->raw.len - (tab + 1 - r->raw.data));
		return (0);
	case FORMAT_JSONL:
		return (record_jsonl(r, text_field, id_field, cause));
	default:
		buf_append(&r->text, r->raw.data, r->raw.len);
		return (0);
	}
}

/* Empty a record for reuse, keeping its memory. */
void
record_reset(struct record *r)
{
	r->raw.len = r->text.len = r->id.len = 0;
	r->recno = r->line = 0;
	r->file = NULL;
}

/* Free a record's memory. */
void
record_free(struct record *r)
{
	buf_free(&r->raw);
	buf_free(&r->text);
	buf_free(&r->id);
}

/* The record's external id: its own, or its record number. */
void
record_idstr(const struct record *r, struct buf *out)
{
	char	 num[32];

	out->len = 0;
	if (r->id.len != 0) {
		buf_append(out, r->id.data, r->id.len);
		return;
	}
	snprintf(num, sizeof num, "%" PRIu64, r->recno);
	buf_append(out, num, strlen(num));
}
