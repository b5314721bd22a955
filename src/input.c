/*
 * Records from a list of files, read with read(2) into one buffer and cut at
 * a delimiter (newline or NUL).  A record longer than the limit is not kept:
 * its bytes are discarded as they arrive, so memory stays bounded by the
 * limit whatever the input, and the caller learns its length.  The last
 * record of a file need not end with the delimiter.
 *
 * stdio is not used because the filter must know whether more input is
 * ready, or becomes ready within a few milliseconds (input_wait), to close
 * a batch early when a slow producer pauses, and stdio hides its buffer.
 */

#include "config.h"

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
};

static int	input_advance(struct input *, char **);
static int	input_fill(struct input *, char **);

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
	return (in);
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
			rr->delimited = p != NULL;
			in->start += len + (p != NULL);
			in->scanned = in->start;
			in->skipping = 0;
			in->skipped = 0;
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

	if (in->fd == -1 || in->regular || in->eof)
		return (1);
	if (memchr(in->buf + in->scanned, in->delim,
	    in->end - in->scanned) != NULL)
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
	free(in->buf);
	free(in);
}
