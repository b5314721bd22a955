/*
 * The input formats (-f), one entry each: how a file is framed into
 * records, which line is blank, how a record is parsed into (id, text,
 * time) and how output.c writes it back.  Every source reads a record the
 * same way through its format's entry (as libarchive's formats register a
 * table of callbacks): adding a format is adding an entry here, its parser
 * and, if it is not written as read, its writer.
 */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

static const struct format formats[FORMAT_COUNT] = {
	[FORMAT_LINE] = {
		.name = "line",
		.framing = FRAME_DELIM,
		.parse = record_parse_line,
		.write = output_write_line,
	},
	[FORMAT_TSV] = {
		.name = "tsv",
		.framing = FRAME_DELIM,
		.blank = " \r",
		.parse = record_parse_tsv,
		.prefix_id = record_prefix_tsv,
		.write = output_write_line,
	},
	[FORMAT_JSONL] = {
		.name = "jsonl",
		.alias = "json",
		.framing = FRAME_DELIM,
		.flags = FMT_FIELDS,
		.blank = " \t\r",
		.parse = record_parse_jsonl,
		.prefix_id = record_prefix_json,
		.write = output_write_json,
	},
	[FORMAT_MAIL] = {
		.name = "mail",
		.alias = "news",
		.framing = FRAME_MBOX,
		.flags = FMT_PIECES|FMT_MAILBOX|FMT_LOG_ALL,
		.parse = record_parse_mail,
		.write = output_write_mail,
	},
	[FORMAT_WARC] = {
		.name = "warc",
		.framing = FRAME_WARC,
		.flags = FMT_PIECES|FMT_FILES,
		.parse = warc_parse,
		.write = output_write_warc,
		.init = warc_init,
	},
};

/* The entry of format id (FORMAT_*). */
const struct format *
format_get(int id)
{
	if (id < 0 || id >= FORMAT_COUNT)
		fatalx("format_get: no format %d", id);
	return (&formats[id]);
}

/* The format called name (or by its alias): its FORMAT_*, or -1. */
int
format_find(const char *name)
{
	int	 i;

	for (i = 0; i < FORMAT_COUNT; i++) {
		if (strcmp(name, formats[i].name) == 0 ||
		    (formats[i].alias != NULL &&
		    strcmp(name, formats[i].alias) == 0))
			return (i);
	}
	return (-1);
}

/* The formats' names for a message: "line, tsv, jsonl, mail or warc". */
const char *
format_list(void)
{
	static char	 list[256];
	size_t		 n = 0;
	int		 i;

	for (i = 0; i < FORMAT_COUNT && n < sizeof list; i++) {
		n += snprintf(list + n, sizeof list - n, "%s%s", i == 0 ? "" :
		    i == FORMAT_COUNT - 1 ? " or " : ", ", formats[i].name);
	}
	return (list);
}
