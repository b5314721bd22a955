/*
 * Fault injection for the tests, by LD_PRELOAD: the Nth call of the write
 * family (write, pwrite, writev, pwritev) or of the sync family (fsync,
 * fdatasync, msync) fails, or writes short.  Set by the environment:
 *
 *   FAULT_CALLS  the calls counted, comma-separated (default "write,pwrite,
 *                writev,pwritev,fsync,fdatasync,msync"); "write" also
 *                counts pwrite's 64-bit alias.
 *   FAULT_PATH   only calls on a file whose path contains this string
 *                (from /proc/self/fd); msync, which has no descriptor,
 *                is counted only without FAULT_PATH.
 *   FAULT_AT     the first failing call, from 1 (unset: none fails).
 *   FAULT_TIMES  how many calls fail from there (default 1; 0: all).
 *   FAULT_ERRNO  EIO (default), ENOSPC or EDQUOT.
 *   FAULT_SHORT  1: a failing write writes half its bytes (at least one)
 *                instead, as a full disk may.
 *   FAULT_LOG    a file that gets one line per call that failed.
 *   FAULT_FREE   fstatvfs64 reports this many free blocks (a full disk: 0).
 *   FAULT_SPIN   the Nth call of LMDB's mdb_get in a read-only transaction
 *                begun while a write transaction was open (a reader of the
 *                lookahead: filter.c), whichever thread makes it, never
 *                returns: it spins, as LMDB does in a cycle of damaged
 *                pages, until a signal takes it away.
 *
 * Calls from glibc's own stdio go through its internal aliases and are not
 * seen; mhfilter writes its output and LMDB its pages with write(2) and
 * friends, which are.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static unsigned long	 calls;		/* counted so far */

/* Is function name counted (FAULT_CALLS)? */
static int
counted(const char *name)
{
	const char	*list = getenv("FAULT_CALLS"), *p;
	size_t		 n = strlen(name);

	if (list == NULL || *list == '\0')
		return (1);
	for (p = list; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == list || p[-1] == ',') &&
		    (p[n] == '\0' || p[n] == ','))
			return (1);
	}
	return (0);
}

/* Is fd a file FAULT_PATH names (fd -1: no file)? */
static int
on_path(int fd)
{
	const char	*want = getenv("FAULT_PATH");
	char		 link[64], path[4096];
	ssize_t		 n;

	if (want == NULL || *want == '\0')
		return (1);
	if (fd < 0)
		return (0);
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof path - 1)) == -1)
		return (0);
	path[n] = '\0';
	return (strstr(path, want) != NULL);
}

/* The C library's function name. */
static void *
real(const char *name)
{
	void	*f;

	if ((f = dlsym(RTLD_NEXT, name)) == NULL)
		abort();
	return (f);
}

/* The errno of a failure (FAULT_ERRNO). */
static int
fault_errno(void)
{
	const char	*e = getenv("FAULT_ERRNO");

	if (e != NULL && strcmp(e, "ENOSPC") == 0)
		return (ENOSPC);
	if (e != NULL && strcmp(e, "EDQUOT") == 0)
		return (EDQUOT);
	return (EIO);
}

/*
 * Count this call of name on fd; 1 if it is to fail (logged to
 * FAULT_LOG).
 */
static int
fault(const char *name, int fd)
{
	ssize_t		(*wr)(int, const void *, size_t);
	const char	*at = getenv("FAULT_AT"), *times = getenv("FAULT_TIMES");
	const char	*log = getenv("FAULT_LOG");
	unsigned long	 n, first, many;
	char		 line[128];
	int		 lfd, len, saved = errno;

	if (at == NULL || !counted(name) || !on_path(fd))
		return (0);
	n = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
	first = strtoul(at, NULL, 10);
	many = times != NULL ? strtoul(times, NULL, 10) : 1;
	if (first == 0 || n < first || (many != 0 && n >= first + many))
		return (0);
	if (log != NULL &&
	    (lfd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0666)) != -1) {
		len = snprintf(line, sizeof line, "%s fd %d call %lu\n", name,
		    fd, n);
		wr = real("write");
		if (len > 0)
			(void)!wr(lfd, line, (size_t)len);
		close(lfd);
	}
	errno = saved;
	return (1);
}

/*
 * The fate of a call of name on fd: 1 to go on (with *len shortened when
 * FAULT_SHORT says so; len NULL for a sync), 0 to fail with errno set.
 */
static int
fate(const char *name, int fd, size_t *len)
{
	const char	*s = getenv("FAULT_SHORT");

	if (!fault(name, fd))
		return (1);
	if (len != NULL && *len >= 2 && s != NULL && strcmp(s, "1") == 0) {
		*len /= 2;
		return (1);
	}
	errno = fault_errno();
	return (0);
}

ssize_t
write(int fd, const void *buf, size_t len)
{
	ssize_t	(*f)(int, const void *, size_t) = real("write");

	return (fate("write", fd, &len) ? f(fd, buf, len) : -1);
}

ssize_t
pwrite(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t	(*f)(int, const void *, size_t, off_t) = real("pwrite");

	return (fate("pwrite", fd, &len) ? f(fd, buf, len, off) : -1);
}

/* (The same call on 64-bit systems.) */
ssize_t	pwrite64(int, const void *, size_t, off_t)
    __attribute__((alias("pwrite")));

ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t	(*f)(int, const struct iovec *, int) = real("writev");
	struct iovec	 one;

	if (cnt < 1)
		return (f(fd, iov, cnt));
	one = iov[0];
	if (!fate("writev", fd, &one.iov_len))
		return (-1);
	/* Shortened: half of the first buffer. */
	return (one.iov_len != iov[0].iov_len ? f(fd, &one, 1) :
	    f(fd, iov, cnt));
}

ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	ssize_t	(*f)(int, const struct iovec *, int, off_t) = real("pwritev");
	struct iovec	 one;

	if (cnt < 1)
		return (f(fd, iov, cnt, off));
	one = iov[0];
	if (!fate("pwritev", fd, &one.iov_len))
		return (-1);
	return (one.iov_len != iov[0].iov_len ? f(fd, &one, 1, off) :
	    f(fd, iov, cnt, off));
}

int
fsync(int fd)
{
	int	(*f)(int) = real("fsync");

	return (fate("fsync", fd, NULL) ? f(fd) : -1);
}

int
fdatasync(int fd)
{
	int	(*f)(int) = real("fdatasync");

	return (fate("fdatasync", fd, NULL) ? f(fd) : -1);
}

int
msync(void *addr, size_t len, int flags)
{
	int	(*f)(void *, size_t, int) = real("msync");

	return (fate("msync", -1, NULL) ? f(addr, len, flags) : -1);
}

/* FAULT_FREE as a number of blocks, or -1. */
static long long
free_blocks(void)
{
	const char	*s = getenv("FAULT_FREE");

	return (s != NULL ? strtoll(s, NULL, 10) : -1);
}

/* fstatvfs, as mhfilter calls it (with 64-bit file offsets). */
int
fstatvfs64(int fd, struct statvfs64 *sv)
{
	int	(*f)(int, struct statvfs64 *) = real("fstatvfs64");

	if (f(fd, sv) == -1)
		return (-1);
	if (free_blocks() >= 0)
		sv->f_bfree = sv->f_bavail = free_blocks();
	return (0);
}

/*
 * LMDB, for FAULT_SPIN (its prototypes, so that this needs no lmdb.h: the
 * types are opaque here).  A reader of the lookahead is a read-only
 * transaction begun while the process has a write transaction open: its
 * handle is kept in spin_readers until it ends.
 */
#define SPIN_RDONLY	0x20000		/* MDB_RDONLY */
#define SPIN_READERS	64
static void		*spin_write;		/* the write transaction */
static void		*spin_readers[SPIN_READERS];
static unsigned long	 reader_gets;

/* Forget txn, which ends. */
static void
spin_forget(void *txn)
{
	void	*t = txn;
	int	 i;

	__atomic_compare_exchange_n(&spin_write, &t, NULL, 0,
	    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	for (i = 0; i < SPIN_READERS; i++) {
		t = txn;
		__atomic_compare_exchange_n(&spin_readers[i], &t, NULL, 0,
		    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
}

int
mdb_txn_begin(void *env, void *parent, unsigned flags, void **txn)
{
	int	(*f)(void *, void *, unsigned, void **) = real("mdb_txn_begin");
	void	*none;
	int	 i, rc;

	if ((rc = f(env, parent, flags, txn)) != 0)
		return (rc);
	if (!(flags & SPIN_RDONLY))
		__atomic_store_n(&spin_write, *txn, __ATOMIC_SEQ_CST);
	else if (__atomic_load_n(&spin_write, __ATOMIC_SEQ_CST) != NULL) {
		for (i = 0; i < SPIN_READERS; i++) {
			none = NULL;
			if (__atomic_compare_exchange_n(&spin_readers[i],
			    &none, *txn, 0, __ATOMIC_SEQ_CST,
			    __ATOMIC_SEQ_CST))
				break;
		}
	}
	return (0);
}

int
mdb_txn_commit(void *txn)
{
	int	(*f)(void *) = real("mdb_txn_commit");

	spin_forget(txn);
	return (f(txn));
}

void
mdb_txn_abort(void *txn)
{
	void	(*f)(void *) = real("mdb_txn_abort");

	spin_forget(txn);
	f(txn);
}

/* Is txn a reader of the lookahead? */
static int
spin_reader(void *txn)
{
	int	 i;

	for (i = 0; i < SPIN_READERS; i++) {
		if (__atomic_load_n(&spin_readers[i], __ATOMIC_SEQ_CST) ==
		    txn)
			return (1);
	}
	return (0);
}

int
mdb_get(void *txn, unsigned dbi, void *key, void *data)
{
	int		(*f)(void *, unsigned, void *, void *) = real("mdb_get");
	const char	*at = getenv("FAULT_SPIN");
	volatile unsigned long spin = 0;

	if (at != NULL && spin_reader(txn) &&
	    __atomic_add_fetch(&reader_gets, 1, __ATOMIC_SEQ_CST) ==
	    strtoul(at, NULL, 10)) {
		for (;;)
			spin++;
	}
	return (f(txn, dbi, key, data));
}
