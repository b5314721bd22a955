/*
 * Allocation that cannot fail silently: out of memory is fatal, as in tmux.
 * Growable buffers live here too, since they are only allocation.
 */

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_MALLOC_H
#include <malloc.h>
#endif
#ifdef HAVE_SYS_MMAN_H
#include <sys/mman.h>
#endif

#include "mhfilter.h"

/*
 * Set up malloc, before any thread starts.  glibc grows its heaps (sbrk
 * for the main thread's, mprotect for each thread's arena) by what a
 * request lacks plus M_TOP_PAD, 128 KB by default: a short run that
 * allocates a hundred megabytes in a few threads made thousands of such
 * calls, each splitting and merging the arena's mappings (5% of its time
 * went to mprotect).  Pages are still faulted in only when touched.
 */
void
xmalloc_init(void)
{
#if defined(HAVE_MALLOPT) && defined(M_TOP_PAD)
	mallopt(M_TOP_PAD, 16 << 20);
#endif
}

/* Allocate size bytes or die. */
void *
xmalloc(size_t size)
{
	void	*p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		fatal("malloc %zu", size);
	return (p);
}

/* Allocate a zeroed array or die. */
void *
xcalloc(size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		fatal("calloc %zu*%zu", nmemb, size);
	return (p);
}

/* Write-fault the whole pages of [p, p + size) in one call: 0, or -1. */
static int
populate(void *p, size_t size)
{
#if defined(HAVE_SYS_MMAN_H) && defined(MADV_POPULATE_WRITE)
	uintptr_t	 start, end;
	long		 pg;

	if ((pg = sysconf(_SC_PAGESIZE)) <= 0)
		return (-1);
	start = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
	end = ((uintptr_t)p + size) & ~(uintptr_t)(pg - 1);
	if (end <= start)
		return (0);
	/* Older kernels say EINVAL. */
	return (madvise((void *)start, end - start, MADV_POPULATE_WRITE));
#else
	return (-1);
#endif
}

/*
 * A zeroed array of whole pages straight from mmap, whatever malloc's
 * thresholds have become: glibc's calloc clears a block it carves from
 * its heap, faulting in every page, where a fresh mapping's pages cost
 * nothing until touched (a read-only run's memtable table, 4 MB it mostly
 * never reads, cost 1,000 faults so).  A large table that is read before
 * it is written is better populated (xpopulate_start): the read of a fresh
 * page maps the shared zero page, and the write after it is a second fault
 * whose copy flushes the TLB of every core running one of the process's
 * threads, an interprocessor interrupt each (a writer's memtable: 3% of a
 * short run's time).  Freed by xunmap with the same nmemb and size.
 */
void *
xmap(size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if (SIZE_MAX / nmemb < size)
		fatalx("xmap: %zu * %zu overflows", nmemb, size);
#ifdef HAVE_SYS_MMAN_H
	p = mmap(NULL, nmemb * size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fatal("mmap %zu*%zu", nmemb, size);
#else
	p = xcalloc(nmemb, size);
#endif
	return (p);
}

/*
 * Populate what xmap gave in a thread of its own, while the caller goes
 * on: the writer's memtable table, 4 MB, took 1.5 to 2.5 ms to fault in,
 * all of it at the start of a run, before the first record was read.  The
 * pages are all faulted in for writing, none read first, so no core's TLB
 * is flushed.  Nothing is written to them: the caller may use the table
 * meanwhile (a page it reads first is faulted in twice, as without).
 * Where the kernel cannot (older than 5.14), the pages are faulted in as
 * they are touched.  xpopulate_wait joins the thread, before the table is
 * unmapped.
 */
struct xpopulate {
	pthread_t	 thread;
	void		*p;
	size_t		 size;
};

static void *
xpopulate_run(void *arg)
{
	struct xpopulate	*xp = arg;

	(void)populate(xp->p, xp->size);
	return (NULL);
}

struct xpopulate *
xpopulate_start(void *p, size_t nmemb, size_t size)
{
	struct xpopulate	*xp;

	xp = xmalloc(sizeof *xp);
	xp->p = p;
	xp->size = nmemb * size;
	thread_start(&xp->thread, xpopulate_run, xp);
	return (xp);
}

void
xpopulate_wait(struct xpopulate *xp)
{
	if (xp == NULL)
		return;
	pthread_join(xp->thread, NULL);
	free(xp);
}

/* Free what xmap gave. */
void
xunmap(void *p, size_t nmemb, size_t size)
{
	if (p == NULL)
		return;
	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
#ifdef HAVE_SYS_MMAN_H
	munmap(p, nmemb * size);
#else
	free(p);
#endif
}

/* Resize an array, checking the multiplication for overflow. */
void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if (SIZE_MAX / nmemb < size)
		fatalx("reallocarray %zu*%zu: overflow", nmemb, size);
	if ((p = realloc(ptr, nmemb * size)) == NULL)
		fatal("realloc %zu*%zu", nmemb, size);
	return (p);
}

/* Copy a string or die. */
char *
xstrdup(const char *s)
{
	return (xstrndup(s, strlen(s)));
}

/* Copy at most n bytes of a string, NUL-terminated, or die. */
char *
xstrndup(const char *s, size_t n)
{
	char	*p;

	p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return (p);
}

/* Format into a new string or die. */
int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n == -1)
		fatal("vasprintf");
	return (n);
}

/* Make room for at least more bytes after the buffer's contents. */
void
buf_reserve(struct buf *b, size_t more)
{
	size_t	 need = b->len + more + 1;	/* room for a terminator */

	if (need < b->len)
		fatalx("buffer size overflow");
	if (need <= b->size)
		return;
	if (need < 2 * b->size)
		need = 2 * b->size;
	if (need < 64)
		need = 64;
	b->data = xreallocarray(b->data, need, 1);
	b->size = need;
}

/* Append bytes; the contents stay NUL-terminated. */
void
buf_append(struct buf *b, const void *p, size_t len)
{
	buf_reserve(b, len);
	if (len != 0)
		memcpy(b->data + b->len, p, len);
	b->len += len;
	b->data[b->len] = '\0';
}

/* Release a buffer's memory. */
void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->size = 0;
}

/* Append one value to a vector. */
void
u64vec_push(struct u64vec *v, uint64_t x)
{
	if (v->n == v->size) {
		v->size = v->size ? 2 * v->size : 256;
		v->v = xreallocarray(v->v, v->size, sizeof *v->v);
	}
	v->v[v->n++] = x;
}

/* Release a vector's memory. */
void
u64vec_free(struct u64vec *v)
{
	free(v->v);
	v->v = NULL;
	v->n = v->size = 0;
}

/*
 * Buffers reused record after record keep the capacity of the largest
 * record they ever held; a batch of them would keep batch x the largest
 * record.  Past TRIM_BYTES a buffer is freed when it is reset instead.
 * Each of the two batches in flight has 4000 slots of five such buffers
 * (raw record, text, id, normalised and compressed text): at 32 KB each,
 * a stream with some long records kept 500 MB more of heap by 3 million
 * records than with 1000 slots; at 8 KB, records of a few KB still reuse
 * their buffers.
 */
void
buf_trim(struct buf *b)
{
	if (b->size > TRIM_BYTES)
		buf_free(b);
	b->len = 0;
}

/* The same for a vector, emptied. */
void
u64vec_trim(struct u64vec *v)
{
	if (v->size * sizeof *v->v > TRIM_BYTES)
		u64vec_free(v);
	v->n = 0;
}

/* Hold no more memory than a vector kept as it is needs. */
void
u64vec_fit(struct u64vec *v)
{
	if (v->n == v->size)
		return;
	if (v->n == 0) {
		u64vec_free(v);
		return;
	}
	v->v = xreallocarray(v->v, v->n, sizeof *v->v);
	v->size = v->n;
}
