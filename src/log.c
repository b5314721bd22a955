/*
 * Messages on stderr, prefixed with the program name.  log_warn adds
 * strerror(errno), log_warnx does not (OpenSMTPD's convention); neither
 * changes errno.  fatal and fatalx are for bugs and exhausted resources only.
 */

#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

static const char *log_name = "mhfilter";

static void	log_vwrite(int, const char *, va_list);

/* Set the name messages start with. */
void
log_init(const char *name)
{
	log_name = name;
}

/* Write one message, with strerror(errsv) when errsv is not 0. */
static void
log_vwrite(int errsv, const char *fmt, va_list ap)
{
	char	 msg[1024];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (errsv != 0)
		fprintf(stderr, "%s: %s: %s\n", log_name, msg, strerror(errsv));
	else
		fprintf(stderr, "%s: %s\n", log_name, msg);
}

/* Warn, adding the reason errno gives. */
void
log_warn(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(errsv, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Warn. */
void
log_warnx(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(0, fmt, ap);
	va_end(ap);
	errno = errsv;
}

/* Report errno's reason and exit. */
void
fatal(const char *fmt, ...)
{
	va_list	 ap;
	int	 errsv = errno;

	va_start(ap, fmt);
	log_vwrite(errsv, fmt, ap);
	va_end(ap);
	exit(EXIT_ERROR);
}

/* Report and exit. */
void
fatalx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vwrite(0, fmt, ap);
	va_end(ap);
	exit(EXIT_ERROR);
}
