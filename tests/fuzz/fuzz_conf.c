/*
 * Fuzz target: a configuration file (conf_load), written to a temporary
 * file first: conf_load reads a path.
 */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mhfilter.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char		 path[] = "/tmp/fuzz_conf.XXXXXX";
	static int		 fd = -1;
	struct conf_entry	*e;
	size_t			 n;
	char			*cause = NULL;

	if (fd == -1 && (fd = mkstemp(path)) == -1)
		abort();
	if (ftruncate(fd, 0) == -1 ||
	    pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (conf_load(path, &e, &n, &cause) != 0)
		free(cause);
	else
		conf_free(e, n);
	return (0);
}
