/*
 * Modules: parts of the program built as shared objects, which a run opens
 * (dlopen) only when it needs them, so that every other run is spared
 * loading their libraries: mail support (mail.c, opened by mailload.c)
 * and TLS (tls.c, opened by tls_module below); their files say what it
 * saves.
 *
 * A module is looked for in the program's own directory first (a build
 * tree), then in PKGLIBDIR, where make install puts it.  It calls back
 * into the program for the functions src/module.syms lists, which the
 * program exports, and nothing else.  Once opened, a module stays open for
 * the rest of the run.
 */

#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhfilter.h"

#define TLS_MODULE	"mhfilter-tls.so"

/* The path of module file: beside the program if there, else in PKGLIBDIR. */
static char *
module_path(const char *file)
{
	char	 exe[PATH_MAX], *slash, *path;
	ssize_t	 n;

	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			xasprintf(&path, "%s/%s", exe, file);
			if (access(path, F_OK) == 0)
				return (path);
			free(path);
		}
	}
	xasprintf(&path, "%s/%s", PKGLIBDIR, file);
	return (path);
}

/*
 * Open the module file and find its n functions names[] into fns[].  0, or
 * -1 with a cause ("cannot load WHAT support: ..." and the loader's reason,
 * which names the file).
 */
int
module_open(const char *file, const char *what, const char *const *names,
    void **fns, size_t n, char **cause)
{
	char	*path = module_path(file);
	void	*h;
	size_t	 i;

	if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		xasprintf(cause, "cannot load %s support: %s", what,
		    dlerror());
		free(path);
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if ((fns[i] = dlsym(h, names[i])) == NULL) {
			xasprintf(cause, "cannot load %s support: %s: not "
			    "mhfilter's %s module", what, path, what);
			dlclose(h);
			free(path);
			return (-1);
		}
	}
	free(path);
	return (0);
}

/*
 * The TLS module's table (tls.c), the module opened the first time; by
 * the daemon's event loop thread alone.  NULL with a cause if it cannot be
 * loaded.
 */
const struct tlsmod *
tls_module(char **cause)
{
	static const char *const names[] = { "tlsmod" };
	static const struct tlsmod	*tm;
	void				*sym;

	if (tm == NULL && module_open(TLS_MODULE, "TLS", names, &sym, 1,
	    cause) == 0)
		tm = sym;
	return (tm);
}
