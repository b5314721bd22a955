/*
 * Records from a list of files, read with read(2) into one buffer and cut at
 * a delimiter (newline or NUL).  A record longer than the limit is not kept:
 * its bytes are discarded as they arrive, so memory stays bounded by the
 * limit whatever the input, and the caller learns its length.  The last
 * record of a file need not end with the delimiter.
 *
 * For mail (-f mail) the delimiter is a framing mode instead: INPUT_MBOX
 * cuts mbox files before each "From " line that follows a blank line (the
 * blank line, "\r\n" in an mbox from Windows, belongs to neither message)
 * and reads a Maildir, given as a directory, as one message a file from
 * cur/ and new/ in file-name order (an MH folder or a news spool: its
 * numbered files, in numeric order); INPUT_SINGLE reads each input as one
 * message.  Messages are kept byte for byte, From_ line and >From quoting
 * included; mail.c undoes the quoting.
 * A message's "line" (for warnings) is the line of its From_ line in the
 * mbox, so that an editor finds it; in a Maildir, the file names it.
 *
 * stdio is not used because the filter must know whether more input is
 * ready, or becomes ready within a few milliseconds (input_wait), to close
 * a batch early when a slow producer pauses, and stdio hides its buffer.
 */

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mhfilter.h"

#define INPUT_CHUNK	(256 * 1024)

struct input {
	char		**files;
	int		  nfiles;
	int		  next;		/* next file to open */
	int		  fd;		/* -1 when between files */
	int		  regular;	/* reads never block */
	int		  eof;		/* fd has no more data */
	const char	 *name;
	int		  delim;
	size_t		  max;
	char		 *buf;
	size_t		  size;
	size_t		  start;	/* unread data is buf[start, end) */
	size_t		  end;
	size_t		  scanned;	/* buf[start, scanned) has no delim */
	int		  skipping;	/* discarding an over-long record */
	size_t		  skipped;	/* its length so far */
	uint64_t	  line;
	/* Mail framing (INPUT_MBOX, INPUT_SINGLE) or 0. */
	int		  framing;
	char		 *whole;	/* by file: one message, not an mbox */
	char		**owned;	/* the file list, Maildirs expanded */
	char		 *error;	/* a Maildir that could not be listed */
	uint64_t	  nl;		/* newlines before start in this file */
	uint64_t	  skipline;	/* where an over-long message began */
};

static int	input_advance(struct input *, char **);
static int	input_fill(struct input *, char **);
static void	input_mail_files(struct input *);
static int	input_mail_next(struct input *, struct rawrec *, char **);

/* Prepare to read files (none: stdin) with delimiter delim and a limit. */
struct input *
input_open(char **files, int nfiles, int delim, size_t max)
{
	static char	*stdin_only[] = { "-" };
	struct input	*in;

	in = xcalloc(1, sizeof *in);
	if (nfiles == 0) {
		files = stdin_only;
		nfiles = 1;
	}
	in->files = files;
	in->nfiles = nfiles;
	in->fd = -1;
	in->delim = delim;
	in->max = max;
	in->size = INPUT_CHUNK;
	in->buf = xmalloc(in->size);
	if (delim == INPUT_MBOX || delim == INPUT_SINGLE) {
		in->framing = delim;
		input_mail_files(in);
	}
	return (in);
}

/*
 * Order message paths by file name (a Maildir's delivery order), numbers
 * by value (an MH folder or a news spool: 9 before 10).
 */
static int
input_name_cmp(const void *a, const void *b)
{
	const char	*x = *(char *const *)a, *y = *(char *const *)b;
	size_t		 nx, ny;

	x = strrchr(x, '/') + 1;
	y = strrchr(y, '/') + 1;
	nx = strlen(x);
	ny = strlen(y);
	if (strspn(x, "0123456789") == nx && strspn(y, "0123456789") == ny &&
	    nx != ny)
		return (nx < ny ? -1 : 1);
	return (strcmp(x, y));
}

/* Append the files of sub named by digits only, or any name (all). */
static int
input_dir_files(struct input *in, const char *sub, int all, int *n)
{
	struct dirent	*de;
	DIR		*d;

	if ((d = opendir(sub)) == NULL)
		return (0);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || (!all &&
		    strspn(de->d_name, "0123456789") != strlen(de->d_name)))
			continue;
		in->owned = xreallocarray(in->owned, *n + 1,
		    sizeof *in->owned);
		in->whole = xreallocarray(in->whole, *n + 1, 1);
		xasprintf(&in->owned[*n], "%s/%s", sub, de->d_name);
		in->whole[(*n)++] = 1;
	}
	closedir(d);
	return (1);
}

/*
 * Append the messages of directory dir to the file list: a Maildir's cur/
 * and new/, else the numbered files of an MH folder or a news spool.
 */
static void
input_maildir(struct input *in, const char *dir, int *n)
{
	static const char *const subs[] = { "cur", "new" };
	char		*sub;
	int		 k, first = *n, found = 0;

	for (k = 0; k < 2; k++) {
		xasprintf(&sub, "%s/%s", dir, subs[k]);
		found |= input_dir_files(in, sub, 1, n);
		free(sub);
	}
	if (!found)
		input_dir_files(in, dir, 0, n);
	if (*n == first && !found && in->error == NULL)
		xasprintf(&in->error, "%s: a directory but not a Maildir (no "
		    "cur/ or new/), MH folder or news spool (no numbered "
		    "files)", dir);
	if (*n > first)
		qsort(in->owned + first, *n - first, sizeof *in->owned,
		    input_name_cmp);
}

/* The file list for mail: Maildirs expanded, each file's framing noted. */
static void
input_mail_files(struct input *in)
{
	struct stat	 st;
	int		 i, n = 0;

	for (i = 0; i < in->nfiles; i++) {
		if (strcmp(in->files[i], "-") != 0 &&
		    stat(in->files[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			input_maildir(in, in->files[i], &n);
			continue;
		}
		in->owned = xreallocarray(in->owned, n + 1, sizeof *in->owned);
		in->whole = xreallocarray(in->whole, n + 1, 1);
		in->owned[n] = xstrdup(in->files[i]);
		in->whole[n++] = in->framing == INPUT_SINGLE;
	}
	in->files = in->owned;
	in->nfiles = n;
}

/*
 * Where the next message of an mbox starts: the end of the line before the
 * blank line ahead of a "From " line, or NULL.  The blank line, "\n" or,
 * in an mbox written on Windows, "\r\n", is *blank bytes long.
 */
static char *
input_mbox_sep(struct input *in, size_t *blank)
{
	char	*p, *first = in->buf + in->start, *end = in->buf + in->end;
	size_t	 from = in->scanned;

	if (from < in->start + 6)
		from = in->start;
	else
		from -= 6;	/* a separator across two reads */
	for (p = in->buf + from; (p = memmem(p, end - p, "\nFrom ", 6)) !=
	    NULL; p++) {
		if (p - 1 >= first && p[-1] == '\n') {
			*blank = 1;
			return (p - 1);
		}
		if (p - 2 >= first && p[-1] == '\r' && p[-2] == '\n') {
			*blank = 2;
			return (p - 2);
		}
	}
	return (NULL);
}

/*
 * Hand out the record of len bytes at the start of the unread data (or
 * its length only, when over the limit); the next starts at next.
 */
static void
input_take(struct input *in, struct rawrec *rr, size_t len, int delimited,
    size_t next)
{
	memset(rr, 0, sizeof *rr);
	rr->file = in->name;
	rr->line = ++in->line;
	if (in->skipping || len > in->max) {
		rr->toolong = 1;
		rr->fulllen = in->skipped + len;
		rr->data = "";
	} else {
		rr->data = in->buf + in->start;
		rr->len = len;
	}
	rr->delimited = delimited;
	in->start = in->scanned = next;
	in->skipping = 0;
	in->skipped = 0;
}

/* The newlines in [p, p + len). */
static uint64_t
input_count_nl(const char *p, size_t len)
{
	const char	*end = p + len;
	uint64_t	 n = 0;

	while (p < end && (p = memchr(p, '\n', end - p)) != NULL) {
		n++;
		p++;
	}
	return (n);
}

/* Is this (between two mbox separators) only blank lines? */
static int
input_blank(const char *p, size_t len)
{
	size_t	 i;

	for (i = 0; i < len; i++) {
		if (p[i] != '\n' && p[i] != '\r' && p[i] != ' ')
			return (0);
	}
	return (1);
}

/*
 * The length of the blank line ending the len bytes at p after a line of
 * its own ("\n\n" or "\r\n\r\n": 1 or 2), or 0.
 */
static size_t
input_blank_end(const char *p, size_t len)
{
	if (len >= 2 && memcmp(p + len - 2, "\n\n", 2) == 0)
		return (1);
	if (len >= 3 && memcmp(p + len - 3, "\n\r\n", 3) == 0)
		return (2);
	return (0);
}

/*
 * The next message (input_next with mail framing): an mbox is cut before
 * each separator; a Maildir file or a single message is a whole input.
 */
static int
input_mail_next(struct input *in, struct rawrec *rr, char **cause)
{
	char		*p;
	size_t		 len, keep, next, blank;
	uint64_t	 line;
	int		 rv;

	for (;;) {
		if (in->fd == -1) {
			if (in->error != NULL) {
				*cause = in->error;
				in->error = NULL;
				return (-1);
			}
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
		}
		p = NULL;
		if (!in->whole[in->next - 1])
			p = input_mbox_sep(in, &blank);
		if (p != NULL || in->eof) {
			len = (p != NULL ? (size_t)(p + 1 - in->buf) :
			    in->end) - in->start;
			next = in->start + len + (p != NULL ? blank : 0);
			/* The blank line before the end of an mbox. */
			if (p == NULL && !in->whole[in->next - 1])
				len -= input_blank_end(in->buf + in->start,
				    len);
			if (!in->skipping && input_blank(in->buf + in->start,
			    len)) {
				in->start = in->scanned = next;
				if (p == NULL && (rv = input_advance(in,
				    cause)) <= 0)
					return (rv);
				continue;
			}
			/* Its position: the line of its From_ line. */
			line = in->skipping ? in->skipline : in->nl + 1;
			in->nl += input_count_nl(in->buf + in->start,
			    next - in->start);
			input_take(in, rr, len, p != NULL, next);
			rr->line = line;
			return (1);
		}
		in->scanned = in->end;
		if (in->end - in->start > in->max) {
			/*
			 * Over the limit: drop it, not what may be the start
			 * of a separator ("\n\r\nFrom", or less of one).
			 */
			keep = in->whole[in->next - 1] ? 0 : 7;
			if (keep > in->end - in->start)
				keep = in->end - in->start;
			if (!in->skipping)
				in->skipline = in->nl + 1;
			in->nl += input_count_nl(in->buf + in->start,
			    in->end - in->start - keep);
			in->skipping = 1;
			in->skipped += in->end - in->start - keep;
			in->start = in->scanned = in->end - keep;
		}
		if (input_fill(in, cause) == -1)
			return (-1);
	}
}

/* Close the current file, if any, and open the next.  0 when none left. */
static int
input_advance(struct input *in, char **cause)
{
	struct stat	 st;
	const char	*f;

	if (in->fd > STDIN_FILENO)
		close(in->fd);
	in->fd = -1;
	if (in->next == in->nfiles)
		return (0);
	f = in->files[in->next++];
	if (strcmp(f, "-") == 0) {
		in->fd = STDIN_FILENO;
		in->name = "stdin";
	} else {
		if ((in->fd = open(f, O_RDONLY|O_CLOEXEC)) == -1) {
			xasprintf(cause, "%s: %s", f, strerror(errno));
			return (-1);
		}
		in->name = f;
	}
	in->regular = fstat(in->fd, &st) == 0 && S_ISREG(st.st_mode);
	in->eof = 0;
	in->line = 0;
	in->nl = 0;
	return (1);
}

/*
 * Read more of the current file into the buffer.  Sets eof at its end.
 * A signal interrupting the read returns -1 with no cause, so that the
 * caller can stop (mhfilter's handlers are installed without SA_RESTART).
 */
static int
input_fill(struct input *in, char **cause)
{
	ssize_t	 n;

	if (in->start > 0) {
		memmove(in->buf, in->buf + in->start, in->end - in->start);
		in->end -= in->start;
		in->scanned -= in->start;
		in->start = 0;
	}
	if (in->size - in->end < INPUT_CHUNK / 2) {
		in->size *= 2;
		in->buf = xreallocarray(in->buf, in->size, 1);
	}
	n = read(in->fd, in->buf + in->end, in->size - in->end);
	if (n == -1) {
		if (errno == EINTR)
			*cause = NULL;
		else
			xasprintf(cause, "read %s: %s", in->name,
			    strerror(errno));
		return (-1);
	}
	if (n == 0)
		in->eof = 1;
	in->end += n;
	return (0);
}

/*
 * The next record: 1 and rr filled, 0 at the end of all input, -1 on a read
 * error (with a cause) or a signal (cause NULL; call again to go on).
 * rr->data stays valid until the next call.
 */
int
input_next(struct input *in, struct rawrec *rr, char **cause)
{
	char	*p;
	size_t	 len;
	int	 rv;

	if (in->framing != 0)
		return (input_mail_next(in, rr, cause));
	for (;;) {
		if (in->fd == -1) {
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
		}
		p = memchr(in->buf + in->scanned, in->delim,
		    in->end - in->scanned);
		if (p != NULL || (in->eof &&
		    (in->end > in->start || in->skipping))) {
			len = (p != NULL ? (size_t)(p - in->buf) : in->end) -
			    in->start;
			input_take(in, rr, len, p != NULL,
			    in->start + len + (p != NULL));
			return (1);
		}
		in->scanned = in->end;
		if (in->eof) {
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
			continue;
		}
		if (in->end - in->start > in->max) {
			/* Over the limit: drop what we have of it. */
			in->skipping = 1;
			in->skipped += in->end - in->start;
			in->start = in->scanned = in->end;
		}
		if (input_fill(in, cause) == -1)
			return (-1);
	}
}

/*
 * Could input_next return a record now, or after the producer has had up
 * to ms milliseconds to write one?
 */
int
input_wait(struct input *in, int ms)
{
	struct pollfd	 pfd;
	size_t		 blank;

	if (in->fd == -1 || in->regular || in->eof)
		return (1);
	if (in->framing != 0 ? !in->whole[in->next - 1] &&
	    input_mbox_sep(in, &blank) != NULL : memchr(in->buf + in->scanned,
	    in->delim, in->end - in->scanned) != NULL)
		return (1);
	pfd.fd = in->fd;
	pfd.events = POLLIN;
	return (poll(&pfd, 1, ms) > 0);
}

/*
 * Wait until input_next could return a record or fd becomes readable:
 * 1 for the input (or a signal: the caller decides), 0 for fd.
 */
int
input_wait_or(struct input *in, int fd)
{
	struct pollfd	 pfd[2];

	if (input_wait(in, 0))
		return (1);
	pfd[0].fd = in->fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = fd;
	pfd[1].events = POLLIN;
	if (poll(pfd, 2, -1) == -1)
		return (1);
	return (pfd[0].revents != 0 || pfd[1].revents == 0);
}

/* Close the current file and free the reader. */
void
input_close(struct input *in)
{
	if (in == NULL)
		return;
	if (in->fd > STDIN_FILENO)
		close(in->fd);
	while (in->owned != NULL && in->nfiles > 0)
		free(in->owned[--in->nfiles]);
	free(in->owned);
	free(in->whole);
	free(in->error);
	free(in->buf);
	free(in);
}
