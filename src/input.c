/*
 * Records from a list of files, read with read(2) into one buffer and cut at
 * a delimiter (newline or NUL).  A record longer than the limit is not kept:
 * its bytes are discarded as they arrive, so memory stays bounded by the
 * limit whatever the input, and the caller learns its length.  The last
 * record of a file need not end with the delimiter.
 *
 * For mail (-f mail) the framing is another (FRAME_*): FRAME_MBOX
 * cuts mbox files before each "From " line that follows a blank line (the
 * blank line, "\r\n" in an mbox from Windows, belongs to neither message)
 * and reads a Maildir, given as a directory, as one message a file from
 * cur/ and new/ in file-name order (an MH folder or a news spool: its
 * numbered files, in numeric order); FRAME_SINGLE reads each input as one
 * message.  Messages are kept byte for byte, From_ line and >From quoting
 * included; mail.c undoes the quoting.
 * For WARC (-f warc) FRAME_WARC cuts a record after its header, its
 * Content-Length bytes of block and two CRLFs; a .warc.gz is not
 * decompressed as a whole but cut at the end of each gzip member, one
 * record, and handed out compressed, so that it is written as it came
 * (input_warc_next).
 * A message's "line" (for warnings) is the line of its From_ line in the
 * mbox, so that an editor finds it; in a Maildir, the file names it.
 *
 * Compressed input is recognised by its first bytes, as zcat, zstdcat and
 * xzcat would (gzip, zstd, xz; concatenated members and frames too), and
 * decompressed under the framing, a chunk at a time: memory stays bounded.
 * Other input whose first block is binary (input_binary) is not text:
 * unless records are NUL-delimited or mail, the file is abandoned
 * with one error, as is a compressed file found corrupt or truncated
 * (the records before the damage are kept), and the others are read.
 *
 * stdio is not used because the filter must know whether more input is
 * ready, or becomes ready within a few milliseconds (input_wait), to close
 * a batch early when a slow producer pauses, and stdio hides its buffer.
 */

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lzma.h>
#include <utf8proc.h>
#include <zlib.h>
#include <zstd.h>

#include "mhfilter.h"

#define WHOLE_LISTED	2	/* in->whole: a file of a folder, listed */
#define INPUT_CHUNK	(256 * 1024)

/* What a file's first bytes say it is. */
enum codec { CODEC_NONE, CODEC_GZIP, CODEC_ZSTD, CODEC_XZ };
static const struct {
	const char	*name;
	const char	*magic;
	size_t		 len;
} codecs[] = {
	{ "plain", "", 0 },
	{ "gzip", "\x1f\x8b", 2 },
	{ "zstd", "\x28\xb5\x2f\xfd", 4 },
	{ "xz", "\xfd" "7zXZ\0", 6 },
};
#define MAGIC_MAX	6

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
	/* Mail framing (FRAME_MBOX, FRAME_SINGLE) or FRAME_DELIM. */
	int		  framing;
	char		 *whole;	/* by file: one message, not an mbox
					   (WHOLE_LISTED: a folder's file) */
	char		**owned;	/* the file list, Maildirs expanded */
	char		 *error;	/* a Maildir that could not be listed */
	uint64_t	  nl;		/* newlines before start in this file */
	int		  pieces;	/* hand out what is over the limit */
	int		  piece;	/* handing out a message in pieces */
	uint64_t	  pieceline;	/* where that message began */
	/* Compressed input: the codec, its state, the compressed bytes. */
	enum codec	  codec;
	int		  sniff;	/* the file's first bytes are not read */
	int		  textcheck;	/* its first data is not looked at */
	int		  failed;	/* the file is abandoned (input_next -2) */
	int		  bomcheck;	/* a byte-order mark may come first */
	/* For progress: bytes read of all files, and their total size. */
	uint64_t	  done;
	uint64_t	  total;	/* 0: unknown (not all regular files) */
	unsigned char	 *zbuf;
	size_t		  zsize;
	size_t		  zstart;	/* unused compressed bytes */
	size_t		  zend;
	uint64_t	  zpos;		/* compressed bytes decoded */
	int		  zeof;		/* no more compressed bytes */
	int		  zmore;	/* the decoder may hold more output */
	int		  zdone;	/* at the end of a member or frame */
	z_stream	  gz;
	ZSTD_DStream	 *zs;
	lzma_stream	  xz;
	/* WARC framing (FRAME_WARC): see input_warc_next. */
	int		  wgz;		/* a .warc.gz: gzip members as read */
	uint64_t	  woff;		/* the file offset of buf[start] */
	uint64_t	  wrecoff;	/* the current record's */
	int		  wpiece;	/* handing out a record in pieces */
	uint64_t	  wleft;	/* a plain one's bytes still to come */
	int		  wzon;		/* inflating a member: wz is set up */
	int		  wzinit;	/* wz was ever set up */
	z_stream	  wz;
	size_t		  wzin;		/* the member's bytes from start */
	uint64_t	  wzout;	/* its decompressed bytes */
	struct buf	  whead;	/* the first of them, the header */
	unsigned char	  wtail[4];	/* the last 4 of them */
	unsigned char	 *wscratch;	/* where the rest is inflated to */
};

static int	input_advance(struct input *, char **);
static void	input_mbox_lead(struct input *);
static int	input_fill(struct input *, char **);
static int	input_failed(struct input *, char **);
static void	input_bom(struct input *);
static uint64_t	input_total(struct input *);
static void	input_codec_end(struct input *);
static ssize_t	input_decode(struct input *, char **);
static int	input_fail(struct input *, char **, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	input_mail_files(struct input *);
static int	input_mail_next(struct input *, struct rawrec *, char **);
static int	input_warc_next(struct input *, struct rawrec *, char **);

/*
 * Prepare to read files (none: stdin) framed by framing (FRAME_*) or, for
 * FRAME_DELIM, delimiter delim, with a limit.
 */
struct input *
input_open(char **files, int nfiles, int framing, int delim, size_t max)
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
	if (framing == FRAME_MBOX || framing == FRAME_SINGLE) {
		in->framing = framing;
		in->pieces = 1;
		input_mail_files(in);
	} else if (framing == FRAME_WARC) {
		in->framing = framing;
		in->pieces = 1;
	}
	in->total = input_total(in);
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
		in->whole[(*n)++] = WHOLE_LISTED;
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
		in->whole[n++] = in->framing == FRAME_SINGLE;
	}
	in->files = in->owned;
	in->nfiles = n;
}

/* Is the word at s, n bytes, one of the names (3 letters, any case)? */
static int
input_name3(const char *s, size_t n, const char *names)
{
	const char	*p;

	if (n < 3)
		return (0);
	for (p = names; *p != '\0'; p += 3) {
		if (strncasecmp(s, p, 3) == 0)
			return (1);
	}
	return (0);
}

/* Are the n bytes at s all digits, and from min to max of them? */
static int
input_digits(const char *s, size_t n, size_t min, size_t max)
{
	size_t	 i;

	if (n < min || n > max)
		return (0);
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (0);
	}
	return (1);
}

/* Is the word at s, n bytes, a time zone: +hhmm, -hhmm or CEST? */
static int
input_zone(const char *s, size_t n)
{
	size_t	 i;

	if (n == 5 && (s[0] == '+' || s[0] == '-'))
		return (input_digits(s + 1, 4, 4, 4));
	if (n < 1 || n > 5)
		return (0);
	for (i = 0; i < n; i++) {
		if (s[i] < 'A' || s[i] > 'Z')
			return (0);
	}
	return (1);
}

/*
 * Is the line at s (len bytes, without its newline) an mbox From_ line:
 * "From ", a sender (one word, a quoted string, or a list archive's
 * "user at host"), then a date as ctime(3) writes it, "Www Mmm dd
 * hh:mm[:ss]" and a year, with a time zone before or after it?  Only then
 * does a "From " line start a message: a body line such as "From now on,
 * ..." in an mbox written without >From quoting is text (mutt's is_from
 * decides the same way).
 */
int
input_from_line(const char *s, size_t len)
{
	static const char	 days[] = "MonTueWedThuFriSatSun";
	static const char	 months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	const char		*end = s + len, *w[12];
	size_t			 n[12], nw = 0, i, last;
	int			 q = 0;

	if (len < 5 || memcmp(s, "From ", 5) != 0)
		return (0);
	if (len > 0 && end[-1] == '\r')
		end--;
	for (s += 5; s < end && nw < 12;) {
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s == end)
			break;
		w[nw] = s;
		/* A quoted sender may hold spaces. */
		for (; s < end && (q || (*s != ' ' && *s != '\t')); s++) {
			if (*s == '"')
				q = !q;
			else if (*s == '\\' && s + 1 < end)
				s++;
		}
		n[nw] = s - w[nw];
		nw++;
	}
	if (q || s < end)
		return (0);
	i = 0;
	/* The sender, unless the date comes first (an empty sender). */
	if (!(nw > 1 && input_name3(w[0], n[0], days) &&
	    input_name3(w[1], n[1], months))) {
		i = 1;
		if (nw > 2 && n[1] == 2 && strncasecmp(w[1], "at", 2) == 0)
			i = 3;
	}
	if (i + 4 > nw || n[i] > 4 || !input_name3(w[i], n[i], days) ||
	    n[i + 1] != 3 || !input_name3(w[i + 1], n[i + 1], months) ||
	    !input_digits(w[i + 2], n[i + 2], 1, 2))
		return (0);
	/* hh:mm or hh:mm:ss */
	if ((n[i + 3] != 5 && n[i + 3] != 8) ||
	    !input_digits(w[i + 3], 2, 2, 2) || w[i + 3][2] != ':' ||
	    !input_digits(w[i + 3] + 3, 2, 2, 2) || (n[i + 3] == 8 &&
	    (w[i + 3][5] != ':' || !input_digits(w[i + 3] + 6, 2, 2, 2))))
		return (0);
	/*
	 * A year, after at most two words of a time zone (a name, +hhmm);
	 * what follows the year does not matter (UUCP's "remote from").
	 */
	for (i += 4, last = i + 3; i < nw && i < last; i++) {
		if (input_digits(w[i], n[i], 4, 4) ||
		    input_digits(w[i], n[i], 2, 2))
			return (1);
		if (!input_zone(w[i], n[i]))
			return (0);
	}
	return (0);
}

/*
 * Where the next message of an mbox starts: the end of the line before the
 * blank line ahead of a From_ line (input_from_line), or NULL.  The blank
 * line, "\n" or, in an mbox written on Windows, "\r\n", is *blank bytes
 * long.  When there is none, in->scanned says where the next search starts:
 * at a "From " line not read whole yet, or near the end.
 */
static char *
input_mbox_sep(struct input *in, size_t *blank)
{
	char	*p, *first = in->buf + in->start, *end = in->buf + in->end;
	char	*nl;
	size_t	 from = in->scanned;

	if (from < in->start + 6)
		from = in->start;
	else
		from -= 6;	/* a separator across two reads */
	for (p = in->buf + from; (p = memmem(p, end - p, "\nFrom ", 6)) !=
	    NULL; p++) {
		if (p - 1 >= first && p[-1] == '\n')
			*blank = 1;
		else if (p - 2 >= first && p[-1] == '\r' && p[-2] == '\n')
			*blank = 2;
		else
			continue;
		if ((nl = memchr(p + 1, '\n', end - p - 1)) == NULL &&
		    !in->eof) {
			/* Its line is not all here: look again with more. */
			in->scanned = p - in->buf;
			return (NULL);
		}
		if (input_from_line(p + 1, (nl != NULL ? nl : end) - p - 1))
			return (p - *blank);
	}
	in->scanned = in->end;
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
	if (in->skipping || (len > in->max && !in->pieces)) {
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
 * Where to cut a message over the limit that is handed out in pieces: at
 * the last line end in the data, less the run of line ends before it, so
 * that a separator (a blank line and a From_ line) is never cut; a
 * whole-file message, which has none, after its last line end, so that the
 * next piece starts a line (output_mail quotes a piece's lines); the whole
 * data when it has no line end.
 */
static size_t
input_mail_cut(struct input *in)
{
	const char	*first = in->buf + in->start, *p;

	p = memrchr(first, '\n', in->end - in->start);
	if (p == NULL)
		return (in->end - in->start);
	if (in->whole[in->next - 1])
		return (p + 1 - first);
	while (p > first && (p[-1] == '\n' || p[-1] == '\r'))
		p--;
	return (p - first);
}

/*
 * Blank lines before an mbox's first From_ line (an mbox put together by
 * hand, or by a tool that starts each message with one) are no message:
 * the first is the From_ line's, and starts there.  Until the line after
 * them is read whole, nothing is decided (the caller reads on).
 */
static void
input_mbox_lead(struct input *in)
{
	const char	*p = in->buf + in->start, *end = in->buf + in->end;
	const char	*q = p, *nl;
	uint64_t	 n = 0;

	while (q < end && (*q == '\n' || (*q == '\r' && q + 1 < end &&
	    q[1] == '\n'))) {
		q += *q == '\r' ? 2 : 1;
		n++;
	}
	if (q == p || (nl = memchr(q, '\n', end - q)) == NULL ||
	    !input_from_line(q, nl - q))
		return;
	in->start = q - in->buf;
	in->nl += n;
	if (in->scanned < in->start)
		in->scanned = in->start;
}

/*
 * The next message (input_next with mail framing): an mbox is cut before
 * each separator; a Maildir file or a single message is a whole input.
 * A message over the limit is not dropped: it comes in pieces of about
 * the limit each (rr->piece 1, then 2; rr->more until its last), for the
 * caller to pass through unread, so that memory stays bounded.
 */
static int
input_mail_next(struct input *in, struct rawrec *rr, char **cause)
{
	char		*p;
	size_t		 len, next, blank;
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
		if (!in->whole[in->next - 1]) {
			if (in->line == 0)
				input_mbox_lead(in);
			p = input_mbox_sep(in, &blank);
		} else
			in->scanned = in->end;
		if (p != NULL || in->eof) {
			len = (p != NULL ? (size_t)(p + 1 - in->buf) :
			    in->end) - in->start;
			next = in->start + len + (p != NULL ? blank : 0);
			/* The blank line before the end of an mbox. */
			if (p == NULL && !in->whole[in->next - 1])
				len -= input_blank_end(in->buf + in->start,
				    len);
			/*
			 * Blank lines between two messages of an mbox are
			 * no message; a file of its own (--single, a
			 * Maildir's) is one, whatever it holds but nothing
			 * (the end of one taken): passed through, not lost.
			 */
			if (!in->piece && (in->whole[in->next - 1] ?
			    len == 0 : input_blank(in->buf + in->start,
			    len))) {
				in->start = in->scanned = next;
				if (p == NULL && (rv = input_advance(in,
				    cause)) <= 0)
					return (rv);
				continue;
			}
			/* Its position: the line of its From_ line. */
			line = in->piece ? in->pieceline : in->nl + 1;
			in->nl += input_count_nl(in->buf + in->start,
			    next - in->start);
			input_take(in, rr, len, p != NULL, next);
			rr->line = line;
			rr->whole = in->whole[in->next - 1] != 0;
			if (in->piece) {
				rr->piece = 2;
				in->piece = 0;
			}
			return (1);
		}
		if (in->end - in->start > in->max &&
		    (len = input_mail_cut(in)) > 0) {
			line = in->piece ? in->pieceline : in->nl + 1;
			in->pieceline = line;
			in->nl += input_count_nl(in->buf + in->start, len);
			input_take(in, rr, len, 0, in->start + len);
			rr->line = line;
			rr->whole = in->whole[in->next - 1] != 0;
			rr->piece = in->piece ? 2 : 1;
			rr->more = 1;
			in->piece = 1;
			return (1);
		}
		if (input_fill(in, cause) == -1)
			return (input_failed(in, cause));
	}
}

/* Give up the current WARC file at its current record: why says why. */
static int
input_warc_fail(struct input *in, char **cause, char *why)
{
	input_fail(in, cause, "WARC record at byte %" PRIu64 ": %s",
	    in->wrecoff, why);
	free(why);
	return (-1);
}

/*
 * Cut the next plain WARC record from the data: 1 with *len its bytes
 * (*more: a piece of a record over the limit, more to come), 0 when more
 * data is needed, 2 at the end of the file, -1 (a malformed record, with a
 * cause).
 */
static int
input_warc_plain(struct input *in, size_t *len, int *more, char **cause)
{
	struct warc_hdr	 h;
	const char	*p = in->buf + in->start;
	size_t		 have = in->end - in->start;
	char		*why;
	int		 rv;

	if (in->wpiece) {
		if (have == 0) {
			if (!in->eof)
				return (0);
			xasprintf(&why, "cut short: %" PRIu64 " bytes missing",
			    in->wleft);
			return (input_warc_fail(in, cause, why));
		}
		*len = have < in->wleft ? have : in->wleft;
		in->wleft -= *len;
		*more = in->wleft > 0;
		return (1);
	}
	if (have == 0)
		return (in->eof ? 2 : 0);
	in->wrecoff = in->woff;
	if ((rv = warc_header(p, have, &h, &why)) == -1)
		return (input_warc_fail(in, cause, why));
	if (rv == 0) {
		if (!in->eof)
			return (0);
		return (input_warc_fail(in, cause, xstrdup("cut short in its "
		    "header")));
	}
	if (h.total > in->max) {
		/* Over the limit: handed out in pieces as it comes. */
		*len = have < in->max ? have : in->max;
		in->wleft = h.total - *len;
		*more = 1;
		return (1);
	}
	if (have < h.total) {
		if (!in->eof)
			return (0);
		xasprintf(&why, "cut short: %zu of its %" PRIu64 " bytes", have,
		    h.total);
		return (input_warc_fail(in, cause, why));
	}
	if (memcmp(p + h.total - 4, "\r\n\r\n", 4) != 0) {
		xasprintf(&why, "no two CRLFs after its block of %" PRIu64
		    " bytes (a wrong Content-Length?)", h.clen);
		return (input_warc_fail(in, cause, why));
	}
	*len = h.total;
	*more = 0;
	return (1);
}

/* Keep the n bytes a member inflated to: its first, its last 4. */
static void
input_warc_keep(struct input *in, const unsigned char *p, size_t n)
{
	size_t	 keep;

	if (in->whead.len < WARC_HEADER_MAX) {
		keep = WARC_HEADER_MAX - in->whead.len;
		buf_append(&in->whead, p, n < keep ? n : keep);
	}
	if (n >= 4)
		memcpy(in->wtail, p + n - 4, 4);
	else {
		memmove(in->wtail, in->wtail + n, 4 - n);
		memcpy(in->wtail + 4 - n, p, n);
	}
	in->wzout += n;
}

/*
 * Check the member just inflated holds one WARC record, whole: 0; 1 when
 * its block is not as long as its Content-Length says (the member, well
 * formed, is handed out, and the record judged malformed by the bad-input
 * policy: the members after it are read); or -1 with a cause (the file
 * is given up).
 */
static int
input_warc_check(struct input *in, char **cause)
{
	struct warc_hdr	 h;
	char		*why;
	int		 rv;

	if ((rv = warc_header(in->whead.data, in->whead.len, &h, &why)) == -1)
		return (input_warc_fail(in, cause, why));
	if (rv == 0)
		return (input_warc_fail(in, cause, xstrdup("its gzip member "
		    "ends in its header")));
	if (in->wzout < h.total)
		return (1);	/* a Content-Length too large (warc_parse) */
	if (in->wzout > h.total) {
		xasprintf(&why, "its gzip member holds %" PRIu64 " bytes "
		    "after it (a .warc.gz has one member a record: the file "
		    "was compressed whole?)", in->wzout - h.total);
		return (input_warc_fail(in, cause, why));
	}
	if (memcmp(in->wtail, "\r\n\r\n", 4) != 0)
		return (1);	/* (warc_parse says it) */
	return (0);
}

/*
 * input_warc_plain for a .warc.gz: the next gzip member, inflated (to
 * find its end and check it) but handed out compressed.  Zeros after a
 * member pad it (gzip's rule).
 */
static int
input_warc_member(struct input *in, size_t *len, int *more, char **cause)
{
	unsigned char	*p;
	size_t		 have = in->end - in->start;
	char		*why;
	int		 r;

	if (!in->wzon) {
		while (have > 0 && in->buf[in->start] == '\0') {
			in->start++;
			in->woff++;
			have--;
		}
		in->scanned = in->start;
		if (have == 0)
			return (in->eof ? 2 : 0);
		if (have < 2 && !in->eof)
			return (0);
		in->wrecoff = in->woff;
		p = (unsigned char *)in->buf + in->start;
		if (have < 2 || p[0] != 0x1f || p[1] != 0x8b)
			return (input_warc_fail(in, cause, xstrdup("not a gzip "
			    "member (a .warc.gz is gzip members throughout)")));
		if (!in->wzinit) {
			if (inflateInit2(&in->wz, 15 + 16) != Z_OK)
				fatalx("inflateInit2: out of memory");
			in->wzinit = 1;
			in->wscratch = xmalloc(INPUT_CHUNK);
		} else
			inflateReset(&in->wz);
		in->wzon = 1;
		in->wzin = 0;
		in->wzout = 0;
		in->whead.len = 0;
		memset(in->wtail, 0, sizeof in->wtail);
	}
	in->wz.next_in = (unsigned char *)in->buf + in->start + in->wzin;
	in->wz.avail_in = have - in->wzin;
	do {
		in->wz.next_out = in->wscratch;
		in->wz.avail_out = INPUT_CHUNK;
		r = inflate(&in->wz, Z_NO_FLUSH);
		input_warc_keep(in, in->wscratch, INPUT_CHUNK -
		    in->wz.avail_out);
	} while (r == Z_OK && (in->wz.avail_in > 0 ||
	    in->wz.avail_out == 0));
	in->wzin = have - in->wz.avail_in;
	if (r != Z_OK && r != Z_BUF_ERROR && r != Z_STREAM_END) {
		xasprintf(&why, "bad gzip member (%s, at byte %" PRIu64 ")",
		    in->wz.msg != NULL ? in->wz.msg : zError(r),
		    in->wrecoff + in->wzin);
		in->wzon = 0;
		return (input_warc_fail(in, cause, why));
	}
	if (r == Z_STREAM_END) {
		in->wzon = 0;
		if (!in->wpiece && input_warc_check(in, cause) < 0)
			return (-1);
		*len = in->wzin;
		*more = 0;
		return (1);
	}
	if (in->eof) {
		in->wzon = 0;
		xasprintf(&why, "cut short: its gzip member ends after %" PRIu64
		    " bytes", in->woff - in->wrecoff + in->wzin);
		return (input_warc_fail(in, cause, why));
	}
	if (in->wzin > in->max) {
		/* Over the limit: handed out in pieces as it comes. */
		*len = in->wzin;
		in->wzin = 0;
		*more = 1;
		return (1);
	}
	return (0);
}

/*
 * The next WARC record (input_next with FRAME_WARC), checked as it is
 * cut: a malformed one abandons its file with an error naming the
 * record's byte offset (in a .warc.gz the compressed file's), the records
 * before it handed out.  A record over the limit is not dropped but comes
 * in pieces (rr->piece, rr->more), as mail does.  Its line is its number
 * in the file.
 */
static int
input_warc_next(struct input *in, struct rawrec *rr, char **cause)
{
	size_t	 len;
	int	 rv, more;

	for (;;) {
		if (in->fd == -1) {
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
		}
		if (in->sniff)
			rv = 0;		/* nothing read yet: gzip or not */
		else if (in->wgz)
			rv = input_warc_member(in, &len, &more, cause);
		else
			rv = input_warc_plain(in, &len, &more, cause);
		if (rv == -1)
			return (input_failed(in, cause));
		if (rv == 2) {
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
			continue;
		}
		if (rv == 1) {
			in->line -= in->wpiece;	/* a piece's is its first's */
			input_take(in, rr, len, 0, in->start + len);
			in->woff += len;
			rr->piece = in->wpiece ? 2 : more ? 1 : 0;
			rr->more = more;
			in->wpiece = more;
			return (1);
		}
		if (input_fill(in, cause) == -1)
			return (input_failed(in, cause));
	}
}

/* Is the regular file out also one of the inputs (none: stdin)? */
static int
input_is_file(const struct stat *out, char **files, int nfiles)
{
	struct stat	 in;
	int		 i, rc;

	if (!S_ISREG(out->st_mode))
		return (0);
	for (i = 0; i < (nfiles > 0 ? nfiles : 1); i++) {
		if (nfiles == 0 || strcmp(files[i], "-") == 0)
			rc = fstat(STDIN_FILENO, &in);
		else
			rc = stat(files[i], &in);
		if (rc == 0 && in.st_dev == out->st_dev &&
		    in.st_ino == out->st_ino)
			return (1);
	}
	return (0);
}

/*
 * Is path a regular file that is also one of the inputs (none: standard
 * input)?  Opening it for output would empty it before it is read.
 */
int
input_is_one(const char *path, char **files, int nfiles)
{
	struct stat	 out;

	return (stat(path, &out) == 0 && input_is_file(&out, files, nfiles));
}

/*
 * Where a folder's message listed as path is now, if a mail reader moved
 * it since (as Maildir readers do, from new/ to cur/, a flag changed in
 * its name after a colon): the file in the Maildir's cur/ with its base
 * name, whatever its flags.  A new path, or NULL.
 */
static char *
input_moved(const char *path)
{
	const char	*name, *sub;
	struct dirent	*de;
	char		*dir, *cur, *found = NULL;
	size_t		 base;
	DIR		*d;

	if ((name = strrchr(path, '/')) == NULL || name == path)
		return (NULL);
	for (sub = name - 1; sub > path && sub[-1] != '/'; sub--)
		;
	if ((size_t)(name - sub) != 3 || (strncmp(sub, "new", 3) != 0 &&
	    strncmp(sub, "cur", 3) != 0))
		return (NULL);		/* not in a Maildir */
	name++;
	base = strcspn(name, ":");
	dir = xstrndup(path, (size_t)(sub - path));
	xasprintf(&cur, "%scur", dir);
	free(dir);
	if ((d = opendir(cur)) != NULL) {
		while (found == NULL && (de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, name, base) == 0 &&
			    (de->d_name[base] == ':' ||
			    de->d_name[base] == '\0'))
				xasprintf(&found, "%s/%s", cur, de->d_name);
		}
		closedir(d);
	}
	free(cur);
	return (found);
}

/*
 * Close the current file, if any, and open the next.  0 when none left.
 * A folder's message that is gone since the folder was listed (deleted,
 * or moved where input_moved does not find it) was never this run's to
 * lose: it is passed over, said.
 */
static int
input_advance(struct input *in, char **cause)
{
	struct stat	 st;
	const char	*f;
	char		*moved;

	if (in->fd > STDIN_FILENO)
		close(in->fd);
	in->fd = -1;
	input_codec_end(in);
again:
	if (in->next == in->nfiles)
		return (0);
	f = in->files[in->next++];
	if (strcmp(f, "-") == 0) {
		in->fd = STDIN_FILENO;
		in->name = "stdin";
	} else {
		if ((in->fd = open(f, O_RDONLY|O_CLOEXEC)) == -1 &&
		    errno == ENOENT && in->whole != NULL &&
		    in->whole[in->next - 1] == WHOLE_LISTED) {
			if ((moved = input_moved(f)) != NULL) {
				free(in->owned[in->next - 1]);
				in->owned[in->next - 1] = moved;
				f = moved;
				in->fd = open(f, O_RDONLY|O_CLOEXEC);
			}
			if (in->fd == -1 && errno == ENOENT) {
				log_warnx("%s: gone since its folder was "
				    "listed: passed over", f);
				goto again;
			}
		}
		if (in->fd == -1) {
			xasprintf(cause, "%s: %s", f, strerror(errno));
			return (-1);
		}
		in->name = f;
	}
	in->regular = fstat(in->fd, &st) == 0 && S_ISREG(st.st_mode);
	in->eof = 0;
	in->line = 0;
	in->nl = 0;
	in->sniff = 1;
	in->textcheck = in->framing == 0 && in->delim != '\0';
	in->bomcheck = 1;
	in->failed = 0;
	in->wgz = in->wpiece = in->wzon = 0;
	in->woff = in->wrecoff = in->wleft = 0;
	return (1);
}

/* Forget the current file's decoder, if any. */
static void
input_codec_end(struct input *in)
{
	switch (in->codec) {
	case CODEC_GZIP:
		inflateEnd(&in->gz);
		break;
	case CODEC_ZSTD:
		ZSTD_freeDStream(in->zs);
		in->zs = NULL;
		break;
	case CODEC_XZ:
		lzma_end(&in->xz);
		break;
	default:
		break;
	}
	in->codec = CODEC_NONE;
	in->zstart = in->zend = 0;
	in->zpos = 0;
	in->zeof = in->zmore = in->zdone = 0;
}

/*
 * After a read that failed (*cause set, or NULL for a signal): the current
 * file is abandoned after an error found in its data (what is left of it
 * is dropped, and input_next returns INPUT_ABANDONED: the caller reports
 * the cause and calls again for the next file); a signal is INPUT_RETRY,
 * any other error MHF_ERROR.
 */
static int
input_failed(struct input *in, char **cause)
{
	if (!in->failed)
		return (*cause == NULL ? INPUT_RETRY : MHF_ERROR);
	if (in->fd > STDIN_FILENO)
		close(in->fd);
	in->fd = -1;
	input_codec_end(in);
	in->start = in->end = in->scanned = 0;
	in->skipping = 0;
	in->skipped = 0;
	in->wpiece = in->wzon = 0;
	return (INPUT_ABANDONED);
}

/* Give up the current file: cause names it and what is wrong. */
static int
input_fail(struct input *in, char **cause, const char *fmt, ...)
{
	va_list	 ap;
	char	*why;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) == -1)
		fatalx("vasprintf: out of memory");
	va_end(ap);
	xasprintf(cause, "%s: %s", in->name, why);
	free(why);
	in->failed = 1;
	return (-1);
}

/*
 * Is this first block of a file binary?  grep -I's test, a NUL byte, made
 * less eager: a text with a stray NUL (a logger's, in UTF-8 or Latin-1)
 * is read, and NULs are taken for binary only with invalid UTF-8 and more
 * than two bytes, and one in 64, control characters or NULs (an
 * executable, an archive), or
 * with a third of the bytes control characters (UTF-16 text).
 */
static int
input_binary(const char *p, size_t len)
{
	const unsigned char	*u = (const unsigned char *)p;
	size_t			 i, ctl = 0, cut;
	utf8proc_int32_t	 cp;
	utf8proc_ssize_t	 n;

	if (memchr(p, '\0', len) == NULL)
		return (0);
	for (i = 0; i < len; i++) {
		if (u[i] == 0 || (u[i] < 0x20 &&
		    strchr("\t\n\v\f\r", u[i]) == NULL))
			ctl++;		/* (strchr finds NUL: its end) */
	}
	if (ctl > len / 3)
		return (1);
	/*
	 * Else invalid UTF-8 with more than a stray control byte or two: an
	 * executable, an archive, an image, not a Latin-1 text with a NUL.
	 */
	if (ctl <= 2 || ctl <= len / 64)
		return (0);
	cut = len > 4 ? len - 4 : 0;	/* a character cut by the block */
	for (i = 0; i < cut; i++) {
		if (u[i] < 0x80)
			continue;
		n = utf8proc_iterate(u + i, (utf8proc_ssize_t)(len - i), &cp);
		if (n < 0)
			return (1);
		i += (size_t)n - 1;
	}
	return (0);
}

/*
 * Read the first bytes of the file into buf: enough to tell a compressed
 * one by its magic number.  A pipe is not read further than needed: a
 * short first record that is no magic's prefix is answered at once.
 */
static ssize_t
input_sniff(struct input *in, char **cause)
{
	unsigned char	*p = (unsigned char *)in->buf + in->end;
	ssize_t		 n, got = 0;
	size_t		 k;
	int		 prefix;

	for (;;) {
		n = read(in->fd, p + got, in->size - in->end - got);
		if (n == -1)
			return (-1);
		got += n;
		in->done += n;
		prefix = 0;
		for (k = 1; k < sizeof codecs / sizeof codecs[0]; k++) {
			if (memcmp(p, codecs[k].magic, (size_t)got <
			    codecs[k].len ? (size_t)got : codecs[k].len) != 0)
				continue;
			if ((size_t)got >= codecs[k].len) {
				in->codec = k;
				break;
			}
			prefix = 1;
		}
		if (n == 0 || in->codec != CODEC_NONE || !prefix)
			break;
	}
	in->sniff = 0;
	if (in->codec == CODEC_GZIP && in->framing == FRAME_WARC) {
		/* A .warc.gz: its members are its records, kept as read. */
		in->codec = CODEC_NONE;
		in->wgz = 1;
	}
	if (in->codec == CODEC_NONE)
		return (got);
	/* Compressed: what was read is the decoder's. */
	if (in->zsize < (size_t)got || in->zbuf == NULL) {
		in->zsize = got > INPUT_CHUNK ? (size_t)got : INPUT_CHUNK;
		free(in->zbuf);
		in->zbuf = xmalloc(in->zsize);
	}
	memcpy(in->zbuf, p, got);
	in->zstart = 0;
	in->zend = got;
	in->zeof = n == 0;
	switch (in->codec) {
	case CODEC_GZIP:
		memset(&in->gz, 0, sizeof in->gz);
		if (inflateInit2(&in->gz, 15 + 16) != Z_OK)
			fatalx("inflateInit2: out of memory");
		break;
	case CODEC_ZSTD:
		if ((in->zs = ZSTD_createDStream()) == NULL)
			fatalx("ZSTD_createDStream: out of memory");
		ZSTD_initDStream(in->zs);
		break;
	case CODEC_XZ:
		memset(&in->xz, 0, sizeof in->xz);
		if (lzma_stream_decoder(&in->xz, UINT64_MAX,
		    LZMA_CONCATENATED) != LZMA_OK)
			fatalx("lzma_stream_decoder: out of memory");
		break;
	default:
		break;
	}
	return (input_decode(in, cause));
}

/*
 * Decode what the compressed bytes give into buf[end, size): the bytes
 * made (0 at the end of the data), or -1 with a cause.  zcat's rules: a
 * file ends at the end of a member or frame; another may follow.
 */
static ssize_t
input_decode(struct input *in, char **cause)
{
	const char	*name = codecs[in->codec].name;
	const char	*why = NULL;
	size_t		 used, made, avail = in->size - in->end;
	ssize_t		 n;
	lzma_ret	 lr;
	size_t		 zr;
	int		 r;

	for (;;) {
		if (in->zstart == in->zend && !in->zeof && !in->zmore) {
			n = read(in->fd, in->zbuf, in->zsize);
			if (n == -1)
				return (-1);
			in->done += n;
			in->zstart = 0;
			in->zend = n;
			in->zeof = n == 0;
		}
		if (in->zstart == in->zend && in->zeof && !in->zmore &&
		    (in->zdone || in->codec != CODEC_XZ)) {
			if (in->zdone)
				break;
			return (input_fail(in, cause, "%s data cut short "
			    "(%" PRIu64 " bytes)", name, in->zpos));
		}
		used = in->zend - in->zstart;
		switch (in->codec) {
		case CODEC_GZIP:
			/* Zeros after a member pad it (tar's blocks): gzip's. */
			while (in->zdone && used > 0 &&
			    in->zbuf[in->zstart] == 0) {
				in->zstart++;
				in->zpos++;
				used--;
			}
			if (in->zdone && used == 0)
				continue;
			if (in->zdone) {
				inflateReset(&in->gz);	/* the next member */
				in->zdone = 0;
			}
			in->gz.next_in = in->zbuf + in->zstart;
			in->gz.avail_in = used;
			in->gz.next_out = (unsigned char *)in->buf + in->end;
			in->gz.avail_out = avail;
			r = inflate(&in->gz, Z_NO_FLUSH);
			used -= in->gz.avail_in;
			made = avail - in->gz.avail_out;
			if (r == Z_STREAM_END)
				in->zdone = 1;
			else if (r != Z_OK && r != Z_BUF_ERROR)
				why = in->gz.msg != NULL ? in->gz.msg :
				    zError(r);
			break;
		case CODEC_ZSTD: {
			ZSTD_inBuffer	 zin = { in->zbuf + in->zstart, used, 0 };
			ZSTD_outBuffer	 zout = { in->buf + in->end, avail, 0 };

			zr = ZSTD_decompressStream(in->zs, &zout, &zin);
			used = zin.pos;
			made = zout.pos;
			if (ZSTD_isError(zr))
				why = ZSTD_getErrorName(zr);
			else
				in->zdone = zr == 0;
			break;
		}
		default:
			in->xz.next_in = in->zbuf + in->zstart;
			in->xz.avail_in = used;
			in->xz.next_out = (uint8_t *)in->buf + in->end;
			in->xz.avail_out = avail;
			lr = lzma_code(&in->xz, in->zeof ? LZMA_FINISH :
			    LZMA_RUN);
			used -= in->xz.avail_in;
			made = avail - in->xz.avail_out;
			if (lr == LZMA_STREAM_END)
				in->zdone = 1;
			else if (lr == LZMA_BUF_ERROR && in->zeof)
				return (input_fail(in, cause, "xz data cut "
				    "short (%" PRIu64 " bytes)",
				    in->zpos + used));
			else if (lr != LZMA_OK && lr != LZMA_BUF_ERROR)
				why = lr == LZMA_MEM_ERROR ? "out of memory" :
				    "corrupt or unsupported data";
			break;
		}
		if (why != NULL)
			return (input_fail(in, cause, "corrupt %s data at "
			    "byte %" PRIu64 " (%s)", name, in->zpos + used,
			    why));
		in->zstart += used;
		in->zpos += used;
		in->zmore = made == avail;
		if (made > 0)
			return ((ssize_t)made);
		if (in->codec == CODEC_XZ && in->zdone)
			break;
	}
	return (0);
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
	*cause = NULL;
	if (in->sniff)
		n = input_sniff(in, cause);
	else if (in->codec != CODEC_NONE)
		n = input_decode(in, cause);
	else if ((n = read(in->fd, in->buf + in->end, in->size - in->end)) > 0)
		in->done += n;
	if (n == -1) {
		if (in->failed)
			return (-1);
		if (errno == EINTR)
			*cause = NULL;
		else
			xasprintf(cause, "read %s: %s", in->name,
			    strerror(errno));
		return (-1);
	}
	if (n > 0 && in->textcheck) {
		in->textcheck = 0;
		if (input_binary(in->buf + in->end, n))
			return (input_fail(in, cause, "binary data (NUL and "
			    "control bytes in its first %zd bytes)", n));
	}
	if (n == 0)
		in->eof = 1;
	in->end += n;
	if (in->bomcheck)
		input_bom(in);
	return (0);
}

/*
 * A UTF-8 byte-order mark at the start of a file (some Windows tools write
 * one) is not part of the first record: skip it.  Its bytes may come in
 * more than one read from a pipe.
 */
static void
input_bom(struct input *in)
{
	static const char	 bom[] = "\xef\xbb\xbf";
	size_t			 have = in->end - in->start;

	if (have > 3)
		have = 3;
	if (memcmp(in->buf + in->start, bom, have) != 0 || have == 3 ||
	    in->eof)
		in->bomcheck = 0;
	if (have == 3 && memcmp(in->buf + in->start, bom, 3) == 0)
		in->start = in->scanned = in->start + 3;
}

/*
 * Hand out a record over the limit in pieces (rr->piece, rr->more) instead
 * of its length alone, as mail framing always does: mail is never dropped.
 */
void
input_set_pieces(struct input *in)
{
	in->pieces = 1;
}

/*
 * The next record: 1 and rr filled, 0 at the end of all input, MHF_ERROR
 * on a read error, INPUT_RETRY after a signal (call again to go on),
 * INPUT_ABANDONED when the current file is abandoned (binary, corrupt: the
 * cause says; call again for the next file).
 * rr->data stays valid until the next call.
 */
int
input_next(struct input *in, struct rawrec *rr, char **cause)
{
	char	*p;
	size_t	 len;
	int	 rv;

	if (in->framing == FRAME_WARC)
		return (input_warc_next(in, rr, cause));
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
		    (in->end > in->start || in->skipping || in->piece))) {
			len = (p != NULL ? (size_t)(p - in->buf) : in->end) -
			    in->start;
			in->line -= in->piece;	/* a piece's line is its first's */
			input_take(in, rr, len, p != NULL,
			    in->start + len + (p != NULL));
			if (in->piece) {
				rr->piece = 2;
				in->piece = 0;
			}
			return (1);
		}
		in->scanned = in->end;
		if (in->eof) {
			if ((rv = input_advance(in, cause)) <= 0)
				return (rv);
			continue;
		}
		if (in->end - in->start > in->max && in->pieces) {
			in->line -= in->piece;
			input_take(in, rr, in->end - in->start, 0, in->end);
			rr->piece = in->piece ? 2 : 1;
			rr->more = 1;
			in->piece = 1;
			return (1);
		}
		if (in->end - in->start > in->max) {
			/* Over the limit: drop what we have of it. */
			in->skipping = 1;
			in->skipped += in->end - in->start;
			in->start = in->scanned = in->end;
		}
		if (input_fill(in, cause) == -1)
			return (input_failed(in, cause));
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

	if (in->fd == -1 || in->regular || in->eof ||
	    in->zstart < in->zend || in->zmore)
		return (1);
	/* (WARC: bytes of a record, whole or not, are as good.) */
	if (in->framing == FRAME_WARC ? in->end > in->start :
	    in->framing != 0 ? !in->whole[in->next - 1] &&
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

/*
 * How far the reading is: bytes read of all the inputs (compressed ones as
 * they are stored) and, when every input is a regular file, their size;
 * 0 when not known.
 */
void
input_progress(struct input *in, uint64_t *done, uint64_t *total)
{
	*done = in->done;
	*total = in->total;
}

/* The size of all the inputs, if they are all regular files; else 0. */
static uint64_t
input_total(struct input *in)
{
	struct stat	 st;
	uint64_t	 total = 0;
	int		 i;

	for (i = 0; i < in->nfiles; i++) {
		if ((strcmp(in->files[i], "-") == 0 ? fstat(STDIN_FILENO,
		    &st) : stat(in->files[i], &st)) != 0 ||
		    !S_ISREG(st.st_mode))
			return (0);
		total += st.st_size;
	}
	return (total);
}

/*
 * input_next for the readers of records (stream.c, client.c), with what
 * both do alike: a file abandoned is said and counted in *skipped, and
 * stops the reading only under fail (*status EXIT_DATA); a read error is
 * said and stops it (*status EXIT_ERROR).  A record over the limit (not
 * in pieces) gets in *over the cause to give it, else NULL.  1: a record
 * (or the first piece of mail over --max-message); 0: the end of input;
 * INPUT_RETRY: nothing this time (a signal, a file skipped): call again;
 * INPUT_STOP: stop, with *status.
 */
int
input_read(struct input *in, int fail, struct rawrec *rr, uint64_t *skipped,
    char **over, int *status)
{
	char	*cause;
	int	 rc;

	*over = NULL;
	if ((rc = input_next(in, rr, &cause)) == 1) {
		if (rr->toolong)
			xasprintf(over, "record of %zu bytes is over "
			    "--max-bytes %zu", rr->fulllen, in->max);
		return (1);
	}
	if (rc == 0 || rc == INPUT_RETRY)
		return (rc);
	log_warnx("%s", cause);
	free(cause);
	if (rc == INPUT_ABANDONED) {
		(*skipped)++;
		if (!fail)
			return (INPUT_RETRY);
		*status = EXIT_DATA;
	} else
		*status = EXIT_ERROR;
	return (INPUT_STOP);
}

/*
 * The next piece of a record handed out in pieces (the last had
 * rr->more), for the stream and the client alike: a signal waits until
 * the record is through.  1 and rr; 0 when input.c ended the record
 * instead; MHF_ERROR on a read error, INPUT_ABANDONED when its file was
 * abandoned (counted in *skipped), said both, the caller ending the record
 * where it broke.
 */
int
input_next_piece(struct input *in, struct rawrec *rr, uint64_t *skipped)
{
	char	*cause;
	int	 rc;

	while ((rc = input_next(in, rr, &cause)) == INPUT_RETRY)
		;
	if (rc >= 0)
		return (rc);
	log_warnx("%s", cause);
	free(cause);
	if (rc == INPUT_ABANDONED)
		(*skipped)++;
	return (rc);
}

/*
 * The file descriptor of --output path (NULL or "-": the standard
 * output), refused if it is one of the inputs, which it would empty before
 * they are read; and the --duplicates-to file dups (or NULL), refused if
 * it is one of them, which it would grow as they are read, or the output
 * too.  0, or the exit status, said.
 */
int
input_output_fd(const char *path, const char *dups, char **files,
    int nfiles, int *fd)
{
	struct stat	 out, dst;

	*fd = STDOUT_FILENO;
	if (path != NULL && strcmp(path, "-") != 0 &&
	    input_is_one(path, files, nfiles)) {
		log_warnx("--output %s is also an input: it would be emptied "
		    "before it is read (write to another file, then rename "
		    "it)", path);
		return (EXIT_USAGE);
	}
	if ((path == NULL || strcmp(path, "-") == 0) &&
	    fstat(STDOUT_FILENO, &out) == 0 &&
	    input_is_file(&out, files, nfiles)) {
		log_warnx("the standard output is also an input: it would "
		    "read what it writes (write to another file)");
		return (EXIT_USAGE);
	}
	if (dups != NULL && input_is_one(dups, files, nfiles)) {
		log_warnx("--duplicates-to %s is also an input: it would "
		    "read the duplicates it writes", dups);
		return (EXIT_USAGE);
	}
	/* The output, if it is a file already, or the same name. */
	if (dups != NULL && ((path != NULL && strcmp(path, dups) == 0) ||
	    (stat(dups, &dst) == 0 && S_ISREG(dst.st_mode) &&
	    (path == NULL || strcmp(path, "-") == 0 ? fstat(STDOUT_FILENO,
	    &out) == 0 : stat(path, &out) == 0) && out.st_dev == dst.st_dev &&
	    out.st_ino == dst.st_ino))) {
		log_warnx("--duplicates-to %s is the output too: give each a "
		    "file of its own", dups);
		return (EXIT_USAGE);
	}
	if (path != NULL && strcmp(path, "-") != 0 && (*fd = open(path,
	    O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666)) == -1) {
		log_warn("--output %s", path);
		return (EXIT_ERROR);
	}
	return (0);
}

/* Close the current file and free the reader. */
void
input_close(struct input *in)
{
	if (in == NULL)
		return;
	if (in->fd > STDIN_FILENO)
		close(in->fd);
	input_codec_end(in);
	free(in->zbuf);
	while (in->owned != NULL && in->nfiles > 0)
		free(in->owned[--in->nfiles]);
	free(in->owned);
	free(in->whole);
	free(in->error);
	if (in->wzinit)
		inflateEnd(&in->wz);
	buf_free(&in->whead);
	free(in->wscratch);
	free(in->buf);
	free(in);
}
