/*
 * The LMDB backend's fault guard: a damaged page met inside LMDB ends the
 * call with an error, not the process (see "Damaged pages" below).
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "mhfilter.h"
#include "lmdbint.h"

/*
 * Damaged pages.  LMDB reads its pages in place, through the map, and trusts
 * them: a damaged page number sends it outside the map (SIGSEGV) or past the
 * end of the file (SIGBUS), and a page of the wrong kind fails one of its
 * assertions (abort).  Checking every page up front would cost a read of the
 * whole file at every open, and the library has no checksums; so faults are
 * caught instead.  index.c arms this guard around each call into this
 * backend (lmdb_ops.guard; sigsetjmp there, no signal mask saved, so that
 * arming costs no system call); a SIGSEGV or SIGBUS raised, or an LMDB
 * assertion failed, while it is armed on the thread jumps back, and the call
 * returns INDEX_ERROR saying the index is damaged.  The process then uses
 * the index no more (INDEX_DAMAGED): the transaction the jump left is never
 * committed, so the damage goes no further.  A fault elsewhere is not ours:
 * the handler there was before (the default: the process dies) takes it.
 * The price: a bug of this file's own that faults inside a call is reported
 * as damage too (the sanitizer builds still see it first).  Threads must not
 * block the two signals (util.c: thread_start), or the kernel kills the
 * process instead.  The size check of lm_env_open turns the most common
 * damage, a truncated file, into a plain error before any of this.
 *
 * A damaged page can also send LMDB round in circles without a fault: a
 * branch page swapped with overflow bytes that read as a page of garbage
 * counts made a lookup search forever (damage.bats), and SIGTERM cannot
 * stop a thread that never returns to look.  So a watchdog thread
 * (guard_watch) looks once a second at the thread in a guarded call: if it
 * has spent GUARD_SPIN seconds of processor time since the last sign of
 * progress (each guarded call, each document read, each turn of the long
 * loops: lm_beat), it is taken to be looping and sent a SIGSEGV, which
 * jumps back as a fault does.  Waiting (fsync, a page read from a slow
 * disk) spends no processor time, and the LMDB calls that may rightly run
 * long on their own, a commit and a copy, are let be (lm_long); no single
 * lookup comes near.  Every thread in a guarded call is watched: the writer,
 * and the readers that look a batch up ahead of it (filter.c), each in a
 * slot of guard_w it takes at its first guarded call and gives back when
 * it ends.  A slot names its thread by its kernel id, whose clock and
 * signal (tgkill) are safe to ask for after it has ended.
 */
#define GUARD_SPIN	15	/* seconds of processor time without a beat */
#define GUARD_THREADS	64	/* watched at once; more go unwatched */

/*
 * A thread watched (guard_w).  Its thread writes on and beats at every
 * guarded call, from any core, and the watchdog reads them once a second:
 * each slot has a cache line of its own, so that threads in guarded calls
 * at once do not take the line from each other at every call (one counter
 * of beats for the process did, on the writer's path and its readers').
 */
struct gwatch {
	_Alignas(64) _Atomic pid_t tid;	/* 0: a free slot */
	_Atomic int	 on;		/* in a guarded call */
	_Atomic uint64_t beats;		/* lm_beat on its thread, ever */
};

static _Atomic uint64_t		 guard_beats;	/* threads without a slot */
__thread _Atomic uint64_t	*lm_beatp = &guard_beats;
static __thread sigjmp_buf	*guard_jmp;	/* armed on this thread */
static __thread char		 guard_what[160];	/* what was caught */
static struct sigaction		 guard_segv, guard_bus;	/* as they were */
static pthread_once_t		 guard_once = PTHREAD_ONCE_INIT;
static struct gwatch		 guard_w[GUARD_THREADS];
static __thread struct gwatch	*guard_me;	/* this thread's slot */
static pthread_key_t		 guard_key;	/* gives it back at exit */
static _Atomic int		 guard_longcall; /* lm_long */
static _Atomic int		 guard_kicked;	/* guard_watch's signal */

/* Take a slot of guard_w for this thread, if one is free. */
static void
guard_claim(void)
{
	pid_t	 tid = (pid_t)syscall(SYS_gettid), none;
	int	 i;

	guard_install();		/* guard_key */
	for (i = 0; i < GUARD_THREADS; i++) {
		none = 0;
		if (atomic_compare_exchange_strong(&guard_w[i].tid, &none,
		    tid)) {
			guard_me = &guard_w[i];
			lm_beatp = &guard_me->beats;
			pthread_setspecific(guard_key, guard_me);
			return;
		}
	}
}

/*
 * A thread that had a slot ends (guard_key's destructor).  Its beats stay,
 * for the next thread of the slot to count on from: their sum over the
 * slots (guard_beat) only grows.
 */
static void
guard_release(void *arg)
{
	struct gwatch	*w = arg;

	atomic_store(&w->on, 0);
	atomic_store(&w->tid, 0);
}

/* Arm the guard with jb (NULL disarms); returns what was armed before. */
static sigjmp_buf *
lmdb_guard_arm(sigjmp_buf *jb)
{
	sigjmp_buf	*prev = guard_jmp;

	guard_jmp = jb;
	if (jb != NULL && guard_me == NULL)
		guard_claim();
	if (guard_me != NULL)
		atomic_store_explicit(&guard_me->on, jb != NULL,
		    memory_order_release);
	lm_beat();
	return (prev);
}

/* The next LMDB call may rightly run long (on) or not (off). */
void
lm_long(int on)
{
	atomic_store(&guard_longcall, on);
	lm_beat();
}

/*
 * The processor clock of the thread of kernel id tid (Linux's encoding of
 * a thread's CPU clock, as pthread_getcpuclockid makes it): a thread that
 * has ended makes clock_gettime fail, not fault.
 */
static clockid_t
guard_clock(pid_t tid)
{
	return ((clockid_t)((~(unsigned)tid << 3) | 6));
}

/* The process's beats: every thread's, summed. */
static uint64_t
guard_beat(void)
{
	uint64_t	 n;
	int		 i;

	n = atomic_load_explicit(&guard_beats, memory_order_relaxed);
	for (i = 0; i < GUARD_THREADS; i++)
		n += atomic_load_explicit(&guard_w[i].beats,
		    memory_order_relaxed);
	return (n);
}

/*
 * The watchdog: once a second, the processor time of each thread in a
 * guarded call since the last beat; past GUARD_SPIN, a SIGSEGV for it.
 * The beats are the process's: a thread looping is seen once the others
 * stop making progress too (a writer waits for its readers).
 */
static void *
guard_watch(void *arg)
{
	struct timespec	 ts;
	pid_t		 tid, was[GUARD_THREADS] = { 0 };
	uint64_t	 beat, seen[GUARD_THREADS] = { 0 };
	double		 cpu, from[GUARD_THREADS];
	int		 i;

	(void)arg;
	for (i = 0; i < GUARD_THREADS; i++)
		from[i] = -1;
	for (;;) {
		sleep(1);
		for (i = 0; i < GUARD_THREADS; i++) {
			tid = atomic_load(&guard_w[i].tid);
			if (tid == 0 || tid != was[i] ||
			    !atomic_load_explicit(&guard_w[i].on,
			    memory_order_acquire) ||
			    atomic_load(&guard_longcall)) {
				was[i] = tid;
				from[i] = -1;
				continue;
			}
			beat = guard_beat();
			if (clock_gettime(guard_clock(tid), &ts) != 0) {
				from[i] = -1;
				continue;
			}
			cpu = ts.tv_sec + ts.tv_nsec / 1e9;
			if (from[i] < 0 || beat != seen[i]) {
				seen[i] = beat;
				from[i] = cpu;
				continue;
			}
			if (cpu - from[i] < GUARD_SPIN ||
			    guard_beat() != seen[i] ||
			    !atomic_load(&guard_w[i].on) ||
			    atomic_load(&guard_w[i].tid) != tid)
				continue;
			atomic_store(&guard_kicked, 1);
			syscall(SYS_tgkill, getpid(), tid, SIGSEGV);
			from[i] = -1;
		}
	}
	return (NULL);
}

/*
 * SIGSEGV and SIGBUS: jump back if armed, else let the old action act.  A
 * SIGSEGV from guard_watch (SI_TKILL) that finds the call over is dropped.
 */
static void
guard_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGSEGV && si != NULL && si->si_code == SI_TKILL &&
	    atomic_exchange(&guard_kicked, 0)) {
		if (guard_jmp == NULL)
			return;
		strcpy(guard_what, "LMDB went round in circles: a cycle "
		    "of damaged pages");
		siglongjmp(*guard_jmp, 1);
	}
	if (guard_jmp != NULL) {
		/* (strcpy, not snprintf: async-signal-safe.) */
		strcpy(guard_what, sig == SIGBUS ? "a read past the end of "
		    "data.mdb (SIGBUS)" : "a read outside the map (SIGSEGV)");
		siglongjmp(*guard_jmp, 1);
	}
	sigaction(sig, sig == SIGBUS ? &guard_bus : &guard_segv, NULL);
}

/* An LMDB assertion: jump back if armed, else LMDB aborts. */
void
guard_assert(MDB_env *env, const char *msg)
{
	(void)env;
	if (guard_jmp != NULL) {
		snprintf(guard_what, sizeof guard_what, "LMDB: %s", msg);
		siglongjmp(*guard_jmp, 1);
	}
}

/* Install guard_fault and start guard_watch (guard_install). */
static void
guard_init(void)
{
	struct sigaction	 sa;
	pthread_t		 t;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = guard_fault;
	/* No mask to restore after the jump (sigsetjmp saves none). */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &guard_segv) == -1 ||
	    sigaction(SIGBUS, &sa, &guard_bus) == -1)
		fatal("sigaction");
	if (pthread_key_create(&guard_key, guard_release) != 0)
		fatalx("cannot make a thread key");
	thread_start(&t, guard_watch, NULL);
	pthread_detach(t);
}

/* Install guard_fault, once in the process. */
void
guard_install(void)
{
	pthread_once(&guard_once, guard_init);
}

/*
 * After the guard caught something in a call on ix (NULL: the open of
 * path), with prev armed before: INDEX_ERROR, with the cause and what to
 * do.  What the call had made (the open's index, ix's transactions) is
 * left unused: it may be what the fault left half done.
 */
static int
lmdb_guard_caught(struct index *base, const char *path, sigjmp_buf *prev,
    char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;

	(void)lmdb_guard_arm(prev);
	if (ix != NULL) {
		ix->base.flags |= INDEX_DAMAGED;
		ix->db.txn = NULL;
		lsm_lost(&ix->lsm);
	}
	xasprintf(cause, "index %s is damaged (%s): see what --check says, "
	    "then rebuild it: --export what can be read and --import that "
	    "into a new index (see mhfilter(1), Damaged indexes)",
	    path != NULL ? path : "", guard_what);
	return (INDEX_ERROR);
}

/* A call on an index damaged before (INDEX_DAMAGED): INDEX_ERROR. */
static int
lmdb_damaged(struct index *ix, char **cause)
{
	xasprintf(cause, "index %s is damaged: not used after the error above",
	    ix->path);
	return (INDEX_ERROR);
}

const struct index_guard lmdb_guard = {
	.arm = lmdb_guard_arm,
	.caught = lmdb_guard_caught,
	.damaged = lmdb_damaged,
};
