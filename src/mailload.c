/*
 * Mail support, loaded when it is first needed.
 *
 * mail.c reads messages with GMime and libxml2, which bring 20 of the 39
 * shared libraries the program loaded (GLib, GIO, GPGME, ICU and more).
 * Linked into the program they cost every run 4 ms of its start, two
 * thirds of it, mail or not: an empty program linked against mhfilter's
 * libraries started in 6.7 ms, in 2.6 ms without those two.  So the
 * program is linked without them, and mail.c is built as a module,
 * mhfilter-mail.so, which mail_init opens (module.c) the first time a run
 * needs it.  A program that links mail.c itself (the unit tests, the fuzz
 * targets) has its functions already, found through weak references, and
 * opens nothing.
 *
 * The options of mail input need no library and are here too.
 */

#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mhfilter.h"

#define MAIL_MODULE	"mhfilter-mail.so"

typedef void	 mailmod_init_fn(void);
typedef int	 mailmod_extract_fn(const char *, size_t, int, struct buf *,
		    struct buf *, int64_t *, char **);

/* mail.c's, when the program is linked with it. */
extern mailmod_init_fn		 mailmod_init __attribute__((weak));
extern mailmod_extract_fn	 mailmod_extract __attribute__((weak));

static pthread_once_t		 mail_load_once = PTHREAD_ONCE_INIT;
static mailmod_extract_fn	*mail_extract_fn;
static char			*mail_load_error;
static int			 mail_global_flags = MAIL_STRIP_DEFAULT;

/* Find mail.c's functions: in the program, else in the module. */
static void
mail_load(void)
{
	static const char *const names[] = { "mailmod_init",
	    "mailmod_extract" };
	void	*fns[2];

	if (mailmod_extract != NULL && mailmod_init != NULL) {
		mailmod_init();
		mail_extract_fn = mailmod_extract;
		return;
	}
	if (module_open(MAIL_MODULE, "mail", names, fns, 2,
	    &mail_load_error) != 0)
		return;
	((mailmod_init_fn *)fns[0])();
	mail_extract_fn = (mailmod_extract_fn *)fns[1];
}

/*
 * Make mail.c's functions ready (GMime and libxml2 initialised), from any
 * thread, any number of times.  0, or -1 with a cause.
 */
int
mail_init(char **cause)
{
	pthread_once(&mail_load_once, mail_load);
	if (mail_extract_fn == NULL) {
		if (cause != NULL)
			*cause = xstrdup(mail_load_error != NULL ?
			    mail_load_error : "mail support not loaded");
		return (-1);
	}
	return (0);
}

/* mail.c's mailmod_extract, wherever it is: see there. */
int
mail_extract(const char *msg, size_t len, int flags, struct buf *text,
    struct buf *id, int64_t *time, char **cause)
{
	if (mail_init(cause) != 0)
		return (-1);
	return (mail_extract_fn(msg, len, flags, text, id, time, cause));
}

/* Set the MAIL_* flags of FORMAT_MAIL records (before any thread starts). */
void
mail_set_flags(int flags)
{
	mail_global_flags = flags;
}

/* The MAIL_* flags in force. */
int
mail_flags(void)
{
	return (mail_global_flags);
}

/* Parse "quotes,signature,footer" or "none" into MAIL_STRIP_* flags. */
int
mail_strip_parse(const char *s, int *flags, char **cause)
{
	char	*copy, *p, *w;
	int	 f = 0;

	if (strcmp(s, "none") == 0) {
		*flags = (*flags & ~MAIL_STRIP_ALL);
		return (0);
	}
	copy = p = xstrdup(s);
	while ((w = strsep(&p, ",")) != NULL) {
		if (strcmp(w, "quotes") == 0)
			f |= MAIL_STRIP_QUOTES;
		else if (strcmp(w, "signature") == 0)
			f |= MAIL_STRIP_SIG;
		else if (strcmp(w, "footer") == 0)
			f |= MAIL_STRIP_FOOTER;
		else {
			xasprintf(cause, "unknown part '%s' (use quotes, "
			    "signature, footer or none)", w);
			free(copy);
			return (-1);
		}
	}
	free(copy);
	*flags = (*flags & ~MAIL_STRIP_ALL) | f;
	return (0);
}

/*
 * The exit status of the MDA hook (--mda): MAIL_EXIT_DUPLICATE when the
 * message was a duplicate, MAIL_EXIT_UNIQUE otherwise, as formail -D does;
 * an error keeps its own status, which a hook also reads as "deliver".
 */
int
mail_exit_status(uint64_t unique, uint64_t duplicates, int status)
{
	if (status != EXIT_OK)
		return (status);
	if (duplicates > 0 && unique == 0)
		return (MAIL_EXIT_DUPLICATE);
	return (MAIL_EXIT_UNIQUE);
}
