/*
 * One raw record to the (id, text) pair the filter compares, for each input
 * format, and with --time-field the document time of a JSON record.  JSON
 * is parsed with jansson; a record that does not fit its format is
 * reported with a cause and left to the bad-input policy.
 */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mhfilter.h"

static int	record_jsonl(struct record *, const char *, const char *,
		    const char *, char **);
static int	record_time(struct record *, json_t *, const char *, char **);

/*
 * The document time from a JSON member: an RFC 3339 string, or seconds
 * since the epoch as a number or a numeric string (fractions truncated).
 */
static int
record_time(struct record *r, json_t *root, const char *time_field,
    char **cause)
{
	json_t		*v;
	double		 d;
	char		*why;

	v = json_object_get(root, time_field);
	if (v == NULL) {
		xasprintf(cause, "no \"%s\" field", time_field);
		return (-1);
	}
	if (json_is_string(v)) {
		if (strlen(json_string_value(v)) != json_string_length(v)) {
			xasprintf(cause, "field \"%s\" is not a time (it holds "
			    "a NUL)", time_field);
			return (-1);
		}
		if (parse_time(json_string_value(v), &r->time, &why) != 0) {
			xasprintf(cause, "field \"%s\": %s", time_field, why);
			free(why);
			return (-1);
		}
		return (0);
	}
	if (json_is_integer(v)) {
		if (json_integer_value(v) < TIME_MIN ||
		    json_integer_value(v) > TIME_MAX)
			goto range;
		r->time = json_integer_value(v);
		return (0);
	}
	if (json_is_real(v)) {
		d = json_real_value(v);
		if (!(d >= TIME_MIN && d < (double)TIME_MAX + 1))
			goto range;
		r->time = (int64_t)d;
		return (0);
	}
	xasprintf(cause, "field \"%s\" is not a time (a string or a number)",
	    time_field);
	return (-1);
range:
	xasprintf(cause, "field \"%s\" is out of range (%d to %lld seconds "
	    "since the epoch)", time_field, TIME_MIN, TIME_MAX);
	return (-1);
}

/* Take id, text and, with a time field, the time from a JSON object. */
static int
record_jsonl(struct record *r, const char *text_field, const char *id_field,
    const char *time_field, char **cause)
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
	if (time_field != NULL &&
	    record_time(r, root, time_field, cause) != 0)
		goto out;
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
	return (record_parse_timed(r, format, text_field, id_field, NULL,
	    cause));
}

/*
 * record_parse, and with a time_field (jsonl only) r->time from that
 * member, which must then be present and valid; otherwise r->time is 0.
 */
int
record_parse_timed(struct record *r, int format, const char *text_field,
    const char *id_field, const char *time_field, char **cause)
{
	const char	*tab;

	r->text.len = r->id.len = 0;
	r->time = 0;
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
		return (record_jsonl(r, text_field, id_field, time_field,
		    cause));
	default:
		buf_append(&r->text, r->raw.data, r->raw.len);
		return (0);
	}
}

/* Empty a record for reuse, keeping its memory. */
void
record_reset(struct record *r)
{
	buf_trim(&r->raw);
	buf_trim(&r->text);
	buf_trim(&r->id);
	r->recno = r->line = 0;
	r->file = NULL;
	r->time = 0;
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
