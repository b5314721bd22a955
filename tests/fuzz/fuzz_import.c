/*
 * Fuzz target: an export read into a new temporary index (index_import,
 * which takes the export's parameters), then checked (index_check): a
 * hostile export is refused or imported, and what it imports is a sound
 * index.
 */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mhfilter.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct index_params	 p;
	struct index		*ix;
	FILE			*f, *report;
	uint64_t		 n, problems;
	char			*cause = NULL;

	/* (The export's header sets them: these only open the index.) */
	p = (struct index_params){ .perms = 64, .bands = 16, .rows = 4,
	    .shingle = 5, .unit = UNIT_CHAR, .norm = NORM_DEFAULT, .texts = 1,
	    .verify = VERIFY_EXACT, .threshold = 0.8, .mapsize = 1 << 20 };
	if (index_open(&ix, NULL, 0, &p, 0, &cause) != 0)
		abort();
	if ((f = fmemopen((void *)data, size, "r")) == NULL)
		f = fopen("/dev/null", "r");
	if (index_import(ix, f, &n, &cause) == 0) {
		report = fopen("/dev/null", "w");
		if (index_check(ix, report, &problems, &cause) != 0 ||
		    problems != 0)
			abort();	/* an import made a broken index */
		fclose(report);
	} else
		free(cause);
	fclose(f);
	index_close(ix);
	return (0);
}
