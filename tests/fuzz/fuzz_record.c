/*
 * Fuzz target: one input record (record_parse_timed), in the format the
 * first byte picks (line, TSV, JSON Lines with or without a time field,
 * mail, WARC), then its id as written out (record_idstr).  A JSON record is
 * parsed both ways, by the fast path and by the slow one (yajl), which
 * must agree on everything: verdict, cause, text, id and time.
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "mhfilter.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int formats[] = { FORMAT_LINE, FORMAT_TSV, FORMAT_JSONL,
	    FORMAT_JSONL, FORMAT_MAIL, FORMAT_WARC };
	struct record	 r = { 0 };
	struct buf	 id = { 0 };
	char		*cause = NULL;
	int		 pick;

	if (size < 1)
		return (0);
	pick = data[0] % (sizeof formats / sizeof formats[0]);
	if (mail_init(NULL) != 0)
		abort();	/* (mail.c is linked in) */
	buf_append(&r.raw, data + 1, size - 1);
	r.recno = r.line = 1;
	if (record_parse_timed(&r, formats[pick], "text", "id",
	    pick == 3 ? "ts" : NULL, &cause) != 0)
		free(cause);
	record_idstr(&r, &id);
	buf_free(&id);
	record_free(&r);
	if (formats[pick] == FORMAT_JSONL &&
	    record_json_agree((const char *)data + 1, size - 1,
	    pick == 3 ? "ts" : NULL) < 0)
		abort();
	return (0);
}
