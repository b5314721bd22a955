/*
 * The maintenance modes: one operation on an existing index, then exit.
 *
 *	--info		the stored parameters, counts, times and sizes
 *	--expire	apply --retain and --max-docs now, in one transaction
 *	--remove FILE	remove documents by external id, --batch at a time
 *	--check		the index's internal consistency
 *	--compact DIR	a compacted copy
 *	--export FILE	the documents as JSON Lines
 *	--import FILE	documents from an export
 *
 * The work is index.c's (export.c's for the last two); this file opens
 * the index, runs the operation in the transactions it needs, and prints
 * the result on stdout as "key: value" lines.  It returns an exit status of
 * mhfilter(1) (index_exit_status for the index's errors).
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mhfilter.h"

/* An id read by --remove, kept until its batch is committed. */
struct rmid {
	char		*id;
	size_t		 len;
	uint64_t	 line;
	uint64_t	 removed;
};

static int	maint_status(int, char *);
static int	maint_open(const struct maint_opts *, int, struct index **);
static int	maint_flush(FILE *, const char *);
static const char *maint_time(int64_t, char *, size_t);
static int	maint_info(const struct maint_opts *, struct index *);
static int	maint_expire(const struct maint_opts *, struct index *);
static int	maint_remove_batch(struct index *, struct rmid *, size_t,
		    char **);
static int	maint_remove(const struct maint_opts *, struct index *);
static int	maint_check(const struct maint_opts *, struct index *);
static int	maint_compact(const struct maint_opts *, struct index *);
static int	maint_export(const struct maint_opts *, struct index *);
static int	maint_import(const struct maint_opts *, struct index *);

/* Log an index error and give its exit status. */
static int
maint_status(int rc, char *cause)
{
	if (cause != NULL) {
		log_warnx("%s", cause);
		free(cause);
	}
	return (index_exit_status(rc));
}

/* "what name: cause", for cause (freed; NULL stays NULL). */
static char *
maint_name(char *cause, const char *what, const char *name)
{
	char	*c;

	if (cause == NULL)
		return (NULL);
	xasprintf(&c, "%s %s: %s", what, name, cause);
	free(cause);
	return (c);
}

/*
 * Open the index for a mode.  Only --import may create one: the others on
 * a directory without an index, or whose data.mdb is empty (the run that
 * was creating it failed), would make an empty one and report on it.
 */
static int
maint_open(const struct maint_opts *mo, int flags, struct index **ixp)
{
	struct index_params	 p = mo->p;
	char			*cause;
	uint64_t		 size;
	int			 rc;

	if (mo->mode != MAINT_IMPORT && !index_exists(mo->db, &size)) {
		log_warnx("no index at %s", mo->db);
		return (EXIT_ERROR);
	}
	if (mo->mode != MAINT_IMPORT && !index_is_remote(mo->db) &&
	    size == 0) {
		log_warnx("no index at %s yet (its data.mdb is empty: the run "
		    "creating it failed)", mo->db);
		return (EXIT_ERROR);
	}
	if ((rc = index_open(ixp, mo->db, flags, &p, mo->given, &cause)) != 0)
		return (maint_status(rc, cause));
	return (EXIT_OK);
}

/*
 * Flush a stream written to; a write error (a full disk) fails, and a
 * reader that went away (--export - | head) ends the run quietly with the
 * status of a process killed by SIGPIPE, as the filter's.
 */
static int
maint_flush(FILE *f, const char *name)
{
	if (fflush(f) != 0 || ferror(f)) {
		if (errno == EPIPE)
			return (128 + SIGPIPE);
		log_warn("write error: %s", name);
		return (EXIT_ERROR);
	}
	return (EXIT_OK);
}

/* A time as RFC 3339, or "-" for none (0: an empty index). */
static const char *
maint_time(int64_t t, char *out, size_t len)
{
	if (t == 0)
		snprintf(out, len, "-");
	else
		format_time(t, out, len);
	return (out);
}

/* --info: one "key: value" line each, in a fixed order. */
static int
maint_info(const struct maint_opts *mo, struct index *ix)
{
	static const char *verify[] = { "exact", "signature", "none" };
	struct index_info	 in;
	char			*cause, norm[64], t[32];
	int			 rc;

	memset(&in, 0, sizeof in);
	if ((rc = index_info(ix, &in, &cause)) != 0)
		return (maint_status(rc, cause));
	normalize_name(in.p.norm, norm, sizeof norm);

#define KEY(key, fmt, v) printf(key ": " fmt "\n", v)
	KEY("path", "%s", mo->db);
	KEY("format", "%d", in.format);
	KEY("perms", "%u", in.p.perms);
	KEY("bands", "%u", in.p.bands);
	KEY("rows", "%u", in.p.rows);
	KEY("shingle", "%u", in.p.shingle);
	KEY("unit", "%s", in.p.unit == UNIT_WORD ? "word" : "char");
	KEY("normalize", "%s", norm);
	KEY("seed", "%" PRIu64, in.p.seed);
	KEY("texts", "%s", in.p.texts ? "yes" : "no");
	KEY("verify", "%s", in.p.verify >= 0 && in.p.verify <= 2 ?
	    verify[in.p.verify] : "?");
	KEY("threshold", "%g", in.p.threshold);
	KEY("measure", "%s", measure_name(in.p.measure));
	KEY("documents", "%" PRIu64, in.docs);
	KEY("next_document", "%" PRIu64, in.next_doc);
	KEY("created", "%s", maint_time(in.created, t, sizeof t));
	KEY("oldest", "%s", maint_time(in.oldest, t, sizeof t));
	KEY("newest", "%s", maint_time(in.newest, t, sizeof t));
	KEY("band_entries", "%" PRIu64, in.band_entries);
	KEY("size", "%" PRIu64, in.size);
	KEY("size_bands", "%" PRIu64, in.bands_bytes);
	KEY("size_docs", "%" PRIu64, in.docs_bytes);
	KEY("size_texts", "%" PRIu64, in.texts_bytes);
	KEY("file_size", "%" PRIu64, in.file_size);
	if (in.remote) {
		KEY("pending", "%" PRIu64, in.pending);
		KEY("undelivered_ranges", "%" PRIu64, in.undelivered);
		KEY("memory", "%" PRIu64, in.memory);
	}
#undef KEY
	return (maint_flush(stdout, "stdout"));
}

/* --expire: every document the retention limits allow, in one go. */
static int
maint_expire(const struct maint_opts *mo, struct index *ix)
{
	char		*cause = NULL;
	uint64_t	 removed;
	int		 rc;

	for (;;) {
		removed = 0;
		if ((rc = index_begin(ix, &cause)) == 0) {
			rc = index_expire(ix, &mo->ret, time(NULL), UINT64_MAX,
			    &removed, &cause);
			if (rc == 0)
				rc = index_commit(ix, &cause);
			else
				index_abort(ix);
		}
		if (rc != INDEX_AGAIN)
			break;
	}
	if (rc != 0)
		return (maint_status(rc, cause));
	printf("expired: %" PRIu64 "\n", removed);
	return (maint_flush(stdout, "stdout"));
}

/*
 * Remove a batch of ids in one transaction, redone if the map was full.
 * Each id's count is set only when the transaction commits.
 */
static int
maint_remove_batch(struct index *ix, struct rmid *ids, size_t n,
    char **cause)
{
	size_t	 i;
	int	 rc;

	for (;;) {
		for (i = 0; i < n; i++)
			ids[i].removed = 0;
		if ((rc = index_begin(ix, cause)) == 0) {
			for (i = 0; i < n && rc == 0; i++)
				rc = index_remove(ix, ids[i].id, ids[i].len,
				    &ids[i].removed, cause);
			if (rc == 0)
				rc = index_commit(ix, cause);
			else
				index_abort(ix);
		}
		if (rc != INDEX_AGAIN)
			return (rc);
	}
}

/* --remove: ids one per line, in transactions of --batch ids. */
static int
maint_remove(const struct maint_opts *mo, struct index *ix)
{
	struct rmid	*ids;
	struct buf	 esc = { 0 };
	FILE		*f;
	const char	*name;
	char		*line = NULL, *cause = NULL;
	size_t		 size = 0, n = 0, i;
	ssize_t		 len;
	uint64_t	 lineno = 0, removed = 0, missing = 0;
	int		 rc = 0, status = EXIT_OK, eof = 0;

	if (strcmp(mo->arg, "-") == 0) {
		f = stdin;
		name = "stdin";
	} else if ((f = fopen(mo->arg, "r")) == NULL) {
		log_warn("%s", mo->arg);
		return (EXIT_ERROR);
	} else
		name = mo->arg;

	ids = xcalloc(mo->batch, sizeof *ids);
	while (!eof) {
		if ((len = getline(&line, &size, f)) == -1) {
			if (ferror(f)) {
				log_warn("read error: %s", name);
				status = EXIT_ERROR;
				break;
			}
			eof = 1;
		} else {
			lineno++;
			if (len > 0 && line[len - 1] == '\n')
				len--;
			/* A file of ids written on Windows: CRLF. */
			if (len > 0 && line[len - 1] == '\r')
				len--;
			if (len == 0)
				continue;
			ids[n].id = xstrndup(line, len);
			ids[n].len = len;
			ids[n].line = lineno;
			n++;
		}
		if (n == 0 || (n < mo->batch && !eof))
			continue;

		rc = maint_remove_batch(ix, ids, n, &cause);
		for (i = 0; i < n; i++) {
			if (rc == 0 && ids[i].removed == 0 && !mo->quiet) {
				esc.len = 0;
				output_field(&esc, ids[i].id, ids[i].len);
				log_warnx("%s:%" PRIu64 ": id '%.*s' not found",
				    name, ids[i].line, (int)esc.len, esc.data);
			}
			if (rc == 0) {
				removed += ids[i].removed;
				missing += ids[i].removed == 0;
			}
			free(ids[i].id);
		}
		n = 0;
		if (rc != 0) {
			status = maint_status(rc, cause);
			break;
		}
	}
	for (i = 0; i < n; i++)
		free(ids[i].id);
	free(ids);
	free(line);
	buf_free(&esc);
	if (f != stdin)
		fclose(f);

	/* What was committed, even after an error. */
	printf("removed: %" PRIu64 "\n", removed);
	printf("not_found: %" PRIu64 "\n", missing);
	if (maint_flush(stdout, "stdout") != EXIT_OK)
		return (EXIT_ERROR);
	return (status);
}

/* --check: the report on stdout; problems make the exit status 1. */
static int
maint_check(const struct maint_opts *mo, struct index *ix)
{
	char		*cause;
	uint64_t	 problems = 0;
	int		 rc;

	if ((rc = index_check(ix, stdout, &problems, &cause)) != 0)
		return (maint_status(rc, cause));
	if (maint_flush(stdout, "stdout") != EXIT_OK)
		return (EXIT_ERROR);
	if (problems != 0) {
		log_warnx("%s: %" PRIu64 " problem%s found: the index is "
		    "damaged (see mhfilter(1), Damaged indexes)", mo->db,
		    problems, problems == 1 ? "" : "s");
		return (EXIT_ERROR);
	}
	return (EXIT_OK);
}

/*
 * --compact: a compacted copy in a new directory (created if missing,
 * refused if it already holds an index); the sizes before and after.
 */
static int
maint_compact(const struct maint_opts *mo, struct index *ix)
{
	uint64_t	 size;
	char		*cause;
	int		 rc, made = 0;

	if (mkdir(mo->arg, 0777) == 0)
		made = 1;
	else if (errno != EEXIST) {
		log_warn("mkdir %s", mo->arg);
		return (EXIT_ERROR);
	}
	if (index_exists(mo->arg, NULL)) {
		log_warnx("%s already holds an index", mo->arg);
		return (EXIT_ERROR);
	}
	if ((rc = index_compact(ix, mo->arg, &cause)) != 0) {
		if (made)
			rmdir(mo->arg);	/* fails, harmlessly, unless empty */
		return (maint_status(rc, cause));
	}
	if (index_exists(mo->arg, &size))
		printf("compacted_size: %" PRIu64 "\n", size);
	if (index_exists(mo->db, &size))
		printf("file_size: %" PRIu64 "\n", size);
	return (maint_flush(stdout, "stdout"));
}

/* --export: JSON Lines to a file or stdout. */
static int
maint_export(const struct maint_opts *mo, struct index *ix)
{
	FILE		*f;
	const char	*name;
	char		*cause;
	int		 rc, status;

	if (strcmp(mo->arg, "-") == 0) {
		f = stdout;
		name = "stdout";
	} else if ((f = fopen(mo->arg, "w")) == NULL) {
		log_warn("%s", mo->arg);
		return (EXIT_ERROR);
	} else
		name = mo->arg;
	if ((rc = index_export(ix, f, &cause)) != 0) {
		if (f != stdout)
			fclose(f);
		if (rc == INDEX_ERROR && cause == NULL)
			return (128 + SIGPIPE);	/* the reader went away */
		return (maint_status(rc, maint_name(cause, "export", name)));
	}
	status = maint_flush(f, name);
	if (f != stdout && fclose(f) != 0 && status == EXIT_OK) {
		log_warn("write error: %s", name);
		status = EXIT_ERROR;
	}
	return (status);
}

/* --import: documents from an export, into --db. */
static int
maint_import(const struct maint_opts *mo, struct index *ix)
{
	FILE		*f;
	char		*cause;
	uint64_t	 n = 0;
	int		 rc;

	if (strcmp(mo->arg, "-") == 0)
		f = stdin;
	else if ((f = fopen(mo->arg, "r")) == NULL) {
		log_warn("%s", mo->arg);
		return (EXIT_ERROR);
	}
	rc = index_import(ix, f, &n, &cause);
	if (f != stdin)
		fclose(f);
	if (rc != 0)
		return (maint_status(rc, maint_name(cause, "import",
		    f != stdin ? mo->arg : "stdin")));
	printf("imported: %" PRIu64 "\n", n);
	return (maint_flush(stdout, "stdout"));
}

/* Run one maintenance mode; returns the exit status. */
int
maint_run(const struct maint_opts *mo)
{
	struct sigaction	 sa;
	struct index		*ix = NULL;
	char			*cause;
	int			 status, flags = 0;

	/* A closed output pipe is a write error, not a silent death. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	switch (mo->mode) {
	case MAINT_INFO:
	case MAINT_CHECK:
	case MAINT_COMPACT:
	case MAINT_EXPORT:
		flags = INDEX_RDONLY;
		break;
	default:	/* --expire, --remove, --import: they write */
		flags = INDEX_WALK;
		break;
	}
	if (mo->mode == MAINT_COMPACT &&
	    index_compactable(mo->db, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		return (EXIT_USAGE);
	}
	if ((status = maint_open(mo, flags, &ix)) != EXIT_OK)
		return (status);
	switch (mo->mode) {
	case MAINT_INFO:
		status = maint_info(mo, ix);
		break;
	case MAINT_EXPIRE:
		status = maint_expire(mo, ix);
		break;
	case MAINT_REMOVE:
		status = maint_remove(mo, ix);
		break;
	case MAINT_CHECK:
		status = maint_check(mo, ix);
		break;
	case MAINT_COMPACT:
		status = maint_compact(mo, ix);
		break;
	case MAINT_EXPORT:
		status = maint_export(mo, ix);
		break;
	case MAINT_IMPORT:
		status = maint_import(mo, ix);
		break;
	default:
		fatalx("unknown maintenance mode %d", mo->mode);
	}
	index_close(ix);
	return (status);
}
