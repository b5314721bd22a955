/*
 * Fuzz target: what a daemon client sends, as the daemon splits it: lines
 * (newline-delimited; NUL with the first byte's low bit set), each either
 * a command ("#mhfilter ...": daemon_command) or a record of the format the
 * first byte picks, parsed as the pipeline parses a client's record (an id
 * made of the connection and record numbers when it has none).
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

#define COMMAND		"#mhfilter "

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int formats[] = { FORMAT_LINE, FORMAT_TSV, FORMAT_JSONL };
	struct record	 r = { 0 };
	const char	*p, *end, *eol;
	char		*cause;
	size_t		 len;
	uint64_t	 recno = 0;
	int		 delim, format;
	uint64_t	 n;

	if (size < 1)
		return (0);
	delim = data[0] & 1 ? '\0' : '\n';
	format = formats[(data[0] >> 1) % 3];
	p = (const char *)data + 1;
	end = (const char *)data + size;
	for (; p < end; p = eol + 1) {
		if ((eol = memchr(p, delim, end - p)) == NULL)
			eol = end;
		len = eol - p;
		if (len >= strlen(COMMAND) &&
		    memcmp(p, COMMAND, strlen(COMMAND)) == 0) {
			daemon_command(p + strlen(COMMAND),
			    len - strlen(COMMAND));
			(void)daemon_taken(p + strlen(COMMAND),
			    len - strlen(COMMAND), &n);
			continue;
		}
		record_reset(&r);
		buf_append(&r.raw, p, len);
		r.owner = 1;
		r.recno = r.line = ++recno;
		cause = NULL;
		if (record_parse(&r, format, "text", "id", &cause) != 0)
			free(cause);
		if (r.id.len == 0)
			record_connid(&r.id, 1, r.owner, r.line);
	}
	record_free(&r);
	return (0);
}
