/*
 * The configuration file (--config FILE, mhfilter.conf(5)): one setting a
 * line, "key = value" or a bare "key", where the keys are the long option
 * names.  Blank lines and lines whose first non-blank character is '#' are
 * ignored; white space around the key and the value is not part of them,
 * and a value may be put in double quotes to keep such white space.
 * A file is at most 1 MB, is read whole, and may not hold a NUL byte.
 *
 * This file only splits the lines.  Which keys exist and what their values
 * mean is the option table's business (mhfilter.c), so that the file and
 * the command line cannot drift apart.
 */

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mhfilter.h"

#define CONF_LINE_MAX	4096
#define CONF_SIZE_MAX	(1024 * 1024)	/* a file, not a stream */

static char	*conf_trim(char *);

/* Remove white space at both ends of s, in place. */
static char *
conf_trim(char *s)
{
	char	*e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	*e = '\0';
	return (s);
}

/*
 * Read the settings of a file into *entries (*n of them), in file order.
 * Returns 0, or -1 with a cause naming the file and line.
 */
int
conf_load(const char *path, struct conf_entry **entries, size_t *n,
    char **cause)
{
	FILE			*f;
	struct stat		 st;
	struct conf_entry	*e = NULL;
	char			 line[CONF_LINE_MAX + 2], *key, *value, *eq;
	char			*text = NULL, *p, *nl, *end;
	size_t			 len, ne = 0;
	unsigned		 lineno = 0;
	const char		*k;

	*entries = NULL;
	*n = 0;
	if ((f = fopen(path, "r")) == NULL) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return (-1);
	}
	/* Not a device (/dev/zero would never end) nor a directory. */
	if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode) &&
	    !S_ISFIFO(st.st_mode)) {
		xasprintf(cause, "%s: not a regular file", path);
		fclose(f);
		return (-1);
	}
	text = xmalloc(CONF_SIZE_MAX + 1);
	len = fread(text, 1, CONF_SIZE_MAX + 1, f);
	if (ferror(f)) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (len > CONF_SIZE_MAX) {
		xasprintf(cause, "%s: larger than %d bytes: not a "
		    "configuration file", path, CONF_SIZE_MAX);
		goto fail;
	}
	for (p = text, end = text + len; p < end; p = nl + 1) {
		lineno++;
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			nl = end;
		if ((size_t)(nl - p) > CONF_LINE_MAX) {
			xasprintf(cause, "%s:%u: line longer than %d bytes",
			    path, lineno, CONF_LINE_MAX);
			goto fail;
		}
		if (memchr(p, '\0', nl - p) != NULL) {
			xasprintf(cause, "%s:%u: a NUL byte in the line",
			    path, lineno);
			goto fail;
		}
		memcpy(line, p, nl - p);
		line[nl - p] = '\0';
		key = conf_trim(line);
		if (*key == '\0' || *key == '#')
			continue;
		value = NULL;
		if ((eq = strchr(key, '=')) != NULL) {
			*eq = '\0';
			value = conf_trim(eq + 1);
			key = conf_trim(key);
			len = strlen(value);
			if (len >= 2 && value[0] == '"' &&
			    value[len - 1] == '"') {
				value[len - 1] = '\0';
				value++;
			} else if (len >= 1 && value[0] == '"') {
				xasprintf(cause, "%s:%u: unterminated quote",
				    path, lineno);
				goto fail;
			}
		}
		if (*key == '\0') {
			xasprintf(cause, "%s:%u: no key before '='", path,
			    lineno);
			goto fail;
		}
		for (k = key; *k != '\0'; k++) {
			if (!isalnum((unsigned char)*k) && *k != '-') {
				xasprintf(cause, "%s:%u: bad key '%s' (keys "
				    "are long option names, such as "
				    "batch-delay)", path, lineno, key);
				goto fail;
			}
		}
		e = xreallocarray(e, ne + 1, sizeof *e);
		e[ne].key = xstrdup(key);
		e[ne].value = value != NULL ? xstrdup(value) : NULL;
		e[ne].line = lineno;
		ne++;
	}
	fclose(f);
	free(text);
	*entries = e;
	*n = ne;
	return (0);

fail:
	fclose(f);
	free(text);
	conf_free(e, ne);
	return (-1);
}

/* Free what conf_load returned. */
void
conf_free(struct conf_entry *e, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(e[i].key);
		free(e[i].value);
	}
	free(e);
}
