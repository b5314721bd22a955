/*
 * The algorithm over one batch of records, in input order:
 *
 *   1. parse (with the caller's parser, for records read but not parsed),
 *      normalise, shingle, sign, and compute band keys (pure, no index);
 *   2. in one index transaction, for each record: gather the documents
 *      sharing a band, examine the ones sharing the most bands first (at
 *      most max_candidates), verify them, and decide; insert the novel ones
 *      (and, with chains, the duplicates) so that later records of the same
 *      batch see them;
 *   3. commit.  The caller writes the verdicts only after that.
 *
 * Phase 1 is filter_prepare_start, phases 2 and 3 filter_decide.  Phase 1
 * of the next batch runs in the background while this one is decided
 * (pipeline.c does this for every source): phase 1 reads only the batch's
 * records and writes only its struct fbatch and the workers' scratch,
 * phase 2 only the filter's own scratch and the index, so on two cores the
 * hashing and the index work overlap.  When the writer is done with a batch
 * before the next one is ready, it takes a share of that batch's phase 1
 * instead of waiting (filter_prepare_wait).
 *
 * Verification: exact computes the true Jaccard similarity of the shingle
 * sets from the stored normalised text; a candidate whose signature
 * estimate is far below the threshold (more than max(0.2, 5 standard
 * errors)) is rejected without reading its text.  signature accepts when
 * the estimate reaches the threshold; none accepts any candidate.
 *
 * A record whose best match is identical (similarity 1) is not indexed
 * again: it would add nothing but bucket entries.  A record whose own copy
 * is indexed (the same explicit id and the same text) is either seen, a
 * duplicate of itself that is not written again, or, where the copy was
 * reported unique by an earlier run that may not have written it (a crash
 * between its commit and its output: index_undelivered), a replay,
 * reported unique again.  Without an id of its own a record's copy is an
 * identical text in such an undelivered range.  With REPLAY_ALL every copy
 * from an earlier run is a replay (at least once, whatever was delivered).
 * This run's documents are those this process inserted (index_own),
 * whatever other processes writing the index inserted meanwhile; theirs
 * are earlier runs' here, and one that a process still running has not
 * delivered yet is seen: that process writes it (index_undelivered).
 */

#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mhfilter.h"

struct cand {
	uint64_t	 docid;
	unsigned	 hits;		/* bands shared with the record */
	double		 est;		/* similarity from the signatures */
	unsigned	 shingles;	/* its shingle count's code, or 0 */
};

struct slot {
	struct buf	 norm;		/* normalised text, if no enc */
	struct buf	 enc;		/* as the index keeps it (texts) */
	int		 bytes;		/* not UTF-8: shingled by bytes */
	int		 pending;	/* decided by phase 2 */
	uint64_t	 shingles;	/* distinct (containment only) */
};

/* filter_exact's similarities. */
#define SIM_J		0	/* Jaccard */
#define SIM_IN		1	/* the record's share in the document */
#define SIM_OUT		2	/* the document's share in the record */
#define NSIM		3

/* A thread's scratch for lookups and verification. */
struct vwork {
	struct shset	 mine;		/* the record's shingle set */
	int		 have_mine;	/* mine is the record's */
	const struct buf *mytext;	/* its text, or NULL (yet) */
	struct buf	 norm;		/* the record's text, decoded */
	struct shset	 theirs;	/* a candidate's shingle set */
	struct u64vec	 hashes;	/* a text's shingle keys */
	struct u64vec	 found;		/* band bucket contents */
	struct u64vec	 scratch;	/* for sort_u64 */
	struct cand	*cands;
	size_t		 candsize;
	struct buf	 text;		/* a candidate's text */
};

/*
 * A candidate the lookahead read: its estimate and, if verified, its
 * similarities (filter_exact's, ahead of it).
 */
struct amemo {
	uint64_t	 docid;
	double		 est;		/* from the signatures */
	unsigned	 shingles;	/* its shingle count's code, or 0 */
	int		 verified;	/* sim and same are set */
	double		 sim[NSIM];
	int		 same;		/* the same text */
};

/* What the lookahead found for a record of the batch. */
struct ahead {
	atomic_int	 ready;		/* the lookahead is past it */
	int		 ok;		/* looked up: what follows is its */
	unsigned	 thr;		/* in whose arena (f->athr) */
	size_t		 most;		/* entries of its fullest key */
	size_t		 found;		/* its bucket contents: offset */
	size_t		 nfound;
	size_t		 memo;		/* its similarities: offset */
	size_t		 nmemo;
};

/*
 * A lookahead thread: its reader, scratch and results.  The writer reads
 * its arena and memo while it appends to them, so they are allocated for
 * the batch's budget at the start and never moved.
 */
struct athr {
	struct filter	*f;
	struct fbatch	*fb;
	struct ixreader	*rd;
	struct vwork	 w;
	struct u64vec	 arena;		/* the records' bucket contents */
	size_t		 found_max;	/* its share of AHEAD_FOUND_MAX */
	struct amemo	*memo;
	size_t		 nmemo, memosize;
	size_t		 memo_max;	/* its share of AHEAD_MEMO_MAX */
	size_t		 nverified;	/* of the memo, verified */
	pthread_t	 thread;
};

/*
 * The batch's inserts by band key, for the lookups of the records after
 * them: what the memtable gained since the lookahead looked.
 */
struct inbent {
	uint64_t	 key;
	uint64_t	 docid;
	uint32_t	 next;		/* INB_NONE: the last */
};
struct inb {
	uint32_t	*head;		/* mask + 1 */
	size_t		 mask;
	struct inbent	*e;
	size_t		 n, size;
};
#define INB_NONE	UINT32_MAX

/*
 * A batch between the phases: what phase 1 made of each record.  Phase 1
 * of one batch may run (filter_prepare_start) while phase 2 of another
 * does, so that the writer never waits for the hashing.
 */
struct fbatch {
	struct filter		*f;
	struct record		*recs;
	struct verdict		*vs;
	size_t			 n;
	struct slot		*slots;
	size_t			 nslots;
	uint32_t		*sigs;		/* nslots x K */
	uint64_t		*keys;		/* nslots x b */
	struct ixdoc		*docs;		/* nslots, for index_prepare */
	struct buf		*ids;		/* nslots external ids */
	uint64_t		 invalid_utf8;
	atomic_size_t		 next;		/* phase 1: first unclaimed */
	struct ahead		*ahead;		/* n, when ahead_on */
	size_t			 aheadsize;
	int			 ahead_on;
	atomic_size_t		 anext;		/* lookahead: first unclaimed */
	atomic_int		 ahead_stop;	/* AHEAD_DAMAGE, AHEAD_QUIT */
	pthread_t		 thread;	/* filter_prepare_start */
	int			 running;
};

/*
 * Phase 1 is shared out PREP_CHUNK records at a time to whoever asks next:
 * the worker threads, and the writer when it is left waiting for them
 * (filter_prepare_wait).  Fixed shares left a worker finishing alone while
 * the writer slept.
 */
#define PREP_CHUNK	16

/* A worker's scratch for phase 1. */
struct prep {
	struct fbatch		*fb;
	struct buf		 text;		/* scratch: a record's text */
	struct buf		 norm;		/* scratch: normalised */
	struct buf		 enc;		/* scratch: compressed */
	struct u64vec		 hashes;	/* scratch: shingle hashes */
	struct u64vec		 distinct;	/* scratch: counts them */
	uint32_t		*part;		/* scratch: a part's signature */
	struct textenc		*te;		/* compresses texts to keep */
	uint64_t		 invalid_utf8;
	pthread_t		 thread;
};

struct filter {
	struct filter_opts	 o;
	struct prep		*preps;		/* o.threads, and the writer's */
	struct shingler		 sh;
	struct vwork		 w;		/* the writer's */
	double			 margin;	/* exact: signature prefilter */
	/* The lookahead (filter_ahead). */
	struct athr		*athr;		/* o.threads: the writer's first */
	size_t			 nathr;		/* of them with a reader */
	atomic_size_t		 arunning;	/* not yet done */
	atomic_int		 await;		/* the writer waits for one */
	pthread_mutex_t		 alock;		/* for acond */
	pthread_cond_t		 acond;		/* one is done, or a record */
	struct inb		 inb;
	const struct amemo	*memo;		/* the record's, in filter_one */
	size_t			 nmemo;
	int			 ahead_warned;	/* a reader stopped once */
	void			 (*started)(void *);	/* filter_on_ahead */
	void			*started_arg;
	int			 next_started;	/* called for this batch */
	struct filter_stats	 st;
	/* The earlier documents this run has replayed: written again once. */
	uint64_t		*replayed;	/* open addressing, 0 free */
	size_t			 replayedsize;	/* a power of two, or 0 */
	struct u64vec		 replays;	/* the same, in order */
	/*
	 * This run's documents whose output will never be written (a daemon
	 * client went away first): first, end pairs, sorted (filter_abandon).
	 */
	struct u64vec		 lost;
	/*
	 * This run's latest documents with the owner of their record (a
	 * daemon's connection), in document order (filter_owner), and the
	 * owners that ended with replies not taken, sorted
	 * (filter_owners_ended); refresh has the pipeline hand those over.
	 */
	struct owndoc		*own;
	size_t			 nown, ownsize;
	uint64_t		 own_dropped;	/* the oldest, let go */
	struct u64vec		 ended;
	void			 (*refresh)(void *);
	void			*refresh_arg;
};

/* A document of this run and its record's owner. */
struct owndoc {
	uint64_t	 docid;
	uint64_t	 owner;
};
#define OWN_MAX		(1U << 18)	/* documents kept, the latest */
#define ENDED_MAX	(1U << 16)	/* owners kept, the latest */

static void	*prep_run(void *);
static void	*prepare_run(void *);
static void	vwork_free(struct vwork *);
static void	vwork_trim(struct vwork *);
static void	ahead_wake(struct filter *);
static int	ahead_keep_up(struct filter *, struct index *,
		    struct fbatch *, size_t, char **);
static int	ahead_end(struct filter *, struct index *, struct fbatch *,
		    int, char **);
static int	filter_ahead(struct filter *, struct index *, struct fbatch *,
		    size_t, char **);
static int	filter_ahead_wanted(const struct filter *, struct index *,
		    const struct fbatch *, size_t *);
static int	filter_ahead_found(struct filter *, struct fbatch *, size_t,
		    const uint64_t *);
static int	amemo_cmp(const void *, const void *);
static int	amemo_est_cmp(const void *, const void *);
static const struct amemo *filter_memo(const struct filter *, uint64_t);
static void	inb_reset(struct inb *, size_t);
static void	inb_add(struct inb *, const uint64_t *, unsigned, uint64_t);
static void	inb_prefetch(const struct inb *, const uint64_t *, unsigned,
		    int);
static int	filter_one(struct filter *, struct index *, struct fbatch *,
		    size_t, char **);
static int	filter_exact(struct filter *, struct index *,
		    const struct slot *, uint64_t, double *, char **);
static size_t	filter_gather(struct vwork *, uint64_t *, size_t);
static void	filter_doc(struct fbatch *, size_t);
static int	cand_cmp(const void *, const void *);
static int	est_cmp(const void *, const void *);
static int	replayed_has(const struct filter *, uint64_t);
static void	replayed_add(struct filter *, uint64_t);
static void	replayed_truncate(struct filter *, size_t);
static int	u64_cmp(const void *, const void *);

/* Make a filter for the parameters in force (after index_open). */
struct filter *
filter_create(const struct filter_opts *o)
{
	struct filter	*f;
	double		 se;

	f = xcalloc(1, sizeof *f);
	f->o = *o;
	if (f->o.threads == 0)
		f->o.threads = 1;
	f->preps = xcalloc(f->o.threads + 1, sizeof *f->preps);
	f->sh.unit = o->p.unit;
	f->sh.n = o->p.shingle;
	f->sh.seed = o->p.seed;
	se = sqrt(o->p.threshold * (1 - o->p.threshold) / o->p.perms);
	f->margin = fmax(0.2, 5 * se);
	pthread_mutex_init(&f->alock, NULL);
	pthread_cond_init(&f->acond, NULL);
	return (f);
}

/* Free a filter. */
void
filter_free(struct filter *f)
{
	size_t	 i;

	if (f == NULL)
		return;
	for (i = 0; i <= f->o.threads; i++) {
		buf_free(&f->preps[i].text);
		buf_free(&f->preps[i].norm);
		buf_free(&f->preps[i].enc);
		u64vec_free(&f->preps[i].hashes);
		u64vec_free(&f->preps[i].distinct);
		free(f->preps[i].part);
		textenc_free(f->preps[i].te);
	}
	free(f->preps);
	vwork_free(&f->w);
	for (i = 0; f->athr != NULL && i < f->o.threads; i++) {
		vwork_free(&f->athr[i].w);
		u64vec_free(&f->athr[i].arena);
		free(f->athr[i].memo);
	}
	free(f->athr);
	pthread_mutex_destroy(&f->alock);
	pthread_cond_destroy(&f->acond);
	free(f->inb.head);
	free(f->inb.e);
	free(f->replayed);
	u64vec_free(&f->replays);
	u64vec_free(&f->lost);
	free(f->own);
	u64vec_free(&f->ended);
	free(f);
}

/* Free a thread's scratch. */
static void
vwork_free(struct vwork *w)
{
	shset_free(&w->mine);
	shset_free(&w->theirs);
	buf_free(&w->norm);
	u64vec_free(&w->hashes);
	u64vec_free(&w->found);
	u64vec_free(&w->scratch);
	free(w->cands);
	buf_free(&w->text);
}

/* Keep the scratch of ordinary records, not of a huge one. */
static void
vwork_trim(struct vwork *w)
{
	shset_trim(&w->mine);
	shset_trim(&w->theirs);
	u64vec_trim(&w->hashes);
	buf_trim(&w->text);
	buf_trim(&w->norm);
}

/*
 * Run fn(arg) once the lookahead of each batch is done (or known not to
 * happen), its decisions going on: pipeline.c starts the next batch's
 * phase 1 there, so that the lookahead has the cores first.
 */
void
filter_on_ahead(struct filter *f, void (*fn)(void *), void *arg)
{
	f->started = fn;
	f->started_arg = arg;
}

/* Start the next batch's phase 1 (filter_on_ahead), once a batch. */
static void
filter_start_next(struct filter *f)
{
	if (f->next_started || f->started == NULL)
		return;
	f->started(f->started_arg);
	f->next_started = 1;
}

/* The slot of docid in the set of replayed documents, or a free one. */
static size_t
replayed_slot(const struct filter *f, uint64_t docid)
{
	size_t	 mask = f->replayedsize - 1, i;

	i = (size_t)((docid * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
	while (f->replayed[i] != 0 && f->replayed[i] != docid)
		i = (i + 1) & mask;
	return (i);
}

/* Has this run replayed the document already? */
static int
replayed_has(const struct filter *f, uint64_t docid)
{
	if (f->replayedsize == 0)
		return (0);
	return (f->replayed[replayed_slot(f, docid)] == docid);
}

/* Remember a replayed document (the table is kept at most half full). */
static void
replayed_add(struct filter *f, uint64_t docid)
{
	size_t	 n = f->replays.n;

	u64vec_push(&f->replays, docid);
	if (2 * (n + 1) > f->replayedsize) {
		replayed_truncate(f, n + 1);	/* rebuilt, larger */
		return;
	}
	f->replayed[replayed_slot(f, docid)] = docid;
}

/*
 * Keep the first n replays only (a batch redone forgets its own), and
 * rebuild the table for them.
 */
static void
replayed_truncate(struct filter *f, size_t n)
{
	size_t	 i, size = 16;

	f->replays.n = n;
	while (size < 2 * n)
		size *= 2;
	if (size != f->replayedsize) {
		free(f->replayed);
		f->replayed = xcalloc(size, sizeof *f->replayed);
		f->replayedsize = size;
	} else
		memset(f->replayed, 0, size * sizeof *f->replayed);
	for (i = 0; i < n; i++)
		f->replayed[replayed_slot(f, f->replays.v[i])] =
		    f->replays.v[i];
}

/*
 * These replays' output was never written (a daemon's client went away
 * first): forget them, so that a later copy is a replay again, not seen.
 * Between batches only.
 */
void
filter_unreplay(struct filter *f, const uint64_t *docids, size_t n)
{
	uint64_t	*gone;
	size_t		 i, j;

	if (n == 0 || f->replays.n == 0)
		return;
	gone = xreallocarray(NULL, n, sizeof *gone);
	memcpy(gone, docids, n * sizeof *gone);
	qsort(gone, n, sizeof *gone, u64_cmp);
	for (i = j = 0; i < f->replays.n; i++) {
		if (bsearch(&f->replays.v[i], gone, n, sizeof *gone,
		    u64_cmp) == NULL)
			f->replays.v[j++] = f->replays.v[i];
	}
	free(gone);
	if (j != f->replays.n)
		replayed_truncate(f, j);
}

/*
 * This run's documents [first, end) of each range given will never have
 * their output written (a daemon's client went away first:
 * pipeline_marks_losing).  A record without an id of its own may be one
 * of them sent again: filter_self.  Between batches only.
 */
void
filter_abandon(struct filter *f, const uint64_t *ranges, size_t n)
{
	struct u64vec	*v = &f->lost;
	size_t		 i, j;
	int		 resort = 0;

	/*
	 * Pairs ordered by their first documents (ranges never overlap),
	 * adjacent ones merged: a client that never reads its replies loses
	 * batch after batch, mostly in order.
	 */
	for (i = 0; i < n; i++) {
		if (v->n == 0 || v->v[v->n - 1] <= ranges[2 * i])
			pairs_add(v, ranges[2 * i], ranges[2 * i + 1]);
		else {
			u64vec_push(v, ranges[2 * i]);
			u64vec_push(v, ranges[2 * i + 1]);
			resort = 1;
		}
	}
	if (!resort)
		return;
	qsort(v->v, v->n / 2, 2 * sizeof *v->v, u64_cmp);
	for (i = j = 2; i < v->n; i += 2) {
		if (v->v[j - 1] == v->v[i])
			v->v[j - 1] = v->v[i + 1];
		else {
			v->v[j++] = v->v[i];
			v->v[j++] = v->v[i + 1];
		}
	}
	v->n = j;
}

/*
 * These owners (a daemon's connections) ended with replies not taken: a
 * copy of a record they sent is theirs no more (filter_owner).
 */
void
filter_owners_ended(struct filter *f, const uint64_t *owners, size_t n)
{
	struct u64vec	*v = &f->ended;
	size_t		 i, j;

	if (n == 0)
		return;
	for (i = 0; i < n; i++)
		u64vec_push(v, owners[i]);
	qsort(v->v, v->n, sizeof *v->v, u64_cmp);
	for (i = j = 0; i < v->n; i++)
		if (j == 0 || v->v[j - 1] != v->v[i])
			v->v[j++] = v->v[i];
	v->n = j;
	/* Connections are numbered in order: the oldest go first. */
	if (v->n > ENDED_MAX) {
		memmove(v->v, v->v + v->n - ENDED_MAX / 2,
		    ENDED_MAX / 2 * sizeof *v->v);
		v->n = ENDED_MAX / 2;
	}
}

/*
 * Have fn(arg) hand the filter what filter_abandon and filter_owners_ended
 * take, when a decision needs the latest (pipeline.c).
 */
void
filter_on_refresh(struct filter *f, void (*fn)(void *), void *arg)
{
	f->refresh = fn;
	f->refresh_arg = arg;
}

/* Document docid of this run was inserted for a record of owner. */
static void
own_add(struct filter *f, uint64_t docid, uint64_t owner)
{
	if (f->nown == OWN_MAX) {
		memmove(f->own, f->own + OWN_MAX / 2,
		    OWN_MAX / 2 * sizeof *f->own);
		f->nown = OWN_MAX / 2;
		f->own_dropped += OWN_MAX / 2;
	}
	if (f->nown == f->ownsize) {
		f->ownsize = f->ownsize ? 2 * f->ownsize : 1024;
		f->own = xreallocarray(f->own, f->ownsize, sizeof *f->own);
	}
	f->own[f->nown].docid = docid;
	f->own[f->nown++].owner = owner;
}

/* Forget the documents added since there were n in all (a batch undone). */
static void
own_truncate(struct filter *f, uint64_t n)
{
	f->nown = n > f->own_dropped ? (size_t)(n - f->own_dropped) : 0;
}

/* The owner of this run's document docid's record, or 0 (not known). */
static uint64_t
own_find(const struct filter *f, uint64_t docid)
{
	size_t	 lo = 0, hi = f->nown, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (f->own[mid].docid < docid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < f->nown && f->own[lo].docid == docid ? f->own[lo].owner :
	    0);
}

/* What filter_owner tells of a document's owner. */
#define OWNER_UNKNOWN	0	/* not a daemon's, or too long ago */
#define OWNER_THERE	1	/* the record's own, or still connected */
#define OWNER_GONE	2	/* ended with replies not taken */

/*
 * Whose is this run's document docid, as far as a record r sent again can
 * tell, while its delivery is not known: its owner is the record's own (a
 * connection sending what it sent before: its first reply goes before
 * this one, or neither does) or a connection still there, whose reply
 * will go; or it ended with replies not taken (the pipeline's latest
 * news); or it is not known.
 */
static int
filter_owner(struct filter *f, const struct record *r, uint64_t docid)
{
	uint64_t	 owner = own_find(f, docid);

	if (owner == 0)
		return (OWNER_UNKNOWN);
	if (owner == r->owner)
		return (OWNER_THERE);
	if (f->refresh != NULL)
		f->refresh(f->refresh_arg);
	return (u64_sorted_has(f->ended.v, f->ended.n, owner) ? OWNER_GONE :
	    OWNER_THERE);
}

/* qsort and bsearch order of uint64_t. */
static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/* A batch for filter_prepare and filter_decide. */
struct fbatch *
fbatch_create(struct filter *f)
{
	struct fbatch	*fb;

	fb = xcalloc(1, sizeof *fb);
	fb->f = f;
	return (fb);
}

/* Free a batch (not its records or verdicts, which are the caller's). */
void
fbatch_free(struct fbatch *fb)
{
	size_t	 i;

	if (fb == NULL)
		return;
	filter_prepare_wait(fb);
	for (i = 0; i < fb->nslots; i++) {
		buf_free(&fb->slots[i].norm);
		buf_free(&fb->slots[i].enc);
		buf_free(&fb->ids[i]);
	}
	free(fb->slots);
	free(fb->sigs);
	free(fb->keys);
	free(fb->ids);
	free(fb->docs);
	free(fb->ahead);
	free(fb);
}

/* Counters since the filter was made. */
void
filter_stats(struct filter *f, struct filter_stats *st)
{
	*st = f->st;
}

/*
 * Phase 1 for record i: parse, normalise, shingle, sign, band, compress.
 * Nothing reads a record's text after its normalisation, so it is parsed
 * into the worker's buffer, lent to the record meanwhile: a text buffer in
 * each of a batch's slots was 14 MB of fresh memory (page faults) for
 * three batches of 4000 records of 1 KB.  For the same reason a record
 * whose text is compressed for the index keeps that alone, at its size
 * (phase 2 decodes it when it verifies a candidate), not its normalised
 * text as well, nor the compressor's worst-case room.
 */
static void
prep_record(struct prep *w, size_t i)
{
	struct fbatch	*fb = w->fb;
	struct filter	*f = fb->f;
	unsigned	 K = f->o.p.perms, b = f->o.p.bands;
	struct record	*r = &fb->recs[i];
	struct slot	*s = &fb->slots[i];
	struct buf	 own = r->text, *norm = &w->norm;
	int		 lent = fb->vs[i].kind == V_UNPARSED;
	int		 enc = f->o.p.texts && !f->o.query_only;

	if (lent) {
		r->text = w->text;
		switch (f->o.parse(r, f->o.parse_arg, &fb->vs[i].error)) {
		case 0:
			fb->vs[i].kind = V_PENDING;
			break;
		case 1:
			fb->vs[i].kind = V_UNCHECKED;
			break;
		default:
			fb->vs[i].kind = V_BAD;
			break;
		}
	}
	s->pending = fb->vs[i].kind == V_PENDING;
	buf_trim(&s->norm);
	if (!enc)
		norm = &s->norm;
	if (s->pending) {
		buf_trim(norm);
		s->bytes = normalize(r->text.data, r->text.len, f->o.p.norm,
		    norm);
	}
	if (lent) {
		w->text = r->text;
		r->text = own;
		buf_trim(&w->text);
	}
	if (!s->pending)
		return;
	if (s->bytes)
		w->invalid_utf8++;
	/* No shingles (no text, or no words): nothing to compare. */
	if (norm->len == 0 || shingle_hash(&f->sh, norm->data, norm->len,
	    s->bytes, &w->hashes) == 0) {
		fb->vs[i].kind = V_EMPTY;
		s->pending = 0;
		return;
	}
	/* A milter recipient's record meets only that recipient's. */
	if (w->part == NULL)
		w->part = xcalloc(K, sizeof *w->part);
	lsh_doc_keys(&f->o.p, w->hashes.v, w->hashes.n, r->scope,
	    fb->sigs + i * K, w->part, fb->keys + i * b);
	/*
	 * Containment's bounds need the record's size, and later records'
	 * bounds its size as a candidate: kept with it (filter_one).
	 */
	s->shingles = f->o.p.measure == MEASURE_CONTAINMENT ?
	    shingle_distinct(w->hashes.v, w->hashes.n, &w->distinct) : 0;
	/* Compression is the costliest part of an insertion. */
	if (enc) {
		if (w->te == NULL)
			w->te = textenc_create();
		textenc_encode(w->te, norm->data, norm->len,
		    s->bytes ? DOC_BYTES : 0, &w->enc);
		buf_trim(&s->enc);
		buf_append(&s->enc, w->enc.data, w->enc.len);
	}
}

/*
 * Phase 1 for record i, and what index_prepare is to be told of it: here,
 * in the worker that has the record in its cache, not by the writer for
 * the whole batch once phase 1 is done.
 */
static void
prep_one(struct prep *w, size_t i)
{
	prep_record(w, i);
	filter_doc(w->fb, i);
}

/* Take chunks of the batch w->fb until none is left. */
static void
prep_share(struct prep *w)
{
	struct fbatch	*fb = w->fb;
	size_t		 i, end;

	w->invalid_utf8 = 0;
	for (;;) {
		i = atomic_fetch_add(&fb->next, PREP_CHUNK);
		if (i >= fb->n)
			break;
		end = fb->n - i < PREP_CHUNK ? fb->n : i + PREP_CHUNK;
		for (; i < end; i++)
			prep_one(w, i);
	}
	u64vec_trim(&w->hashes);
	u64vec_trim(&w->distinct);
	buf_trim(&w->norm);
	buf_trim(&w->enc);
}

/* prep_share in a thread of its own. */
static void *
prep_run(void *arg)
{
	prep_share(arg);
	return (NULL);
}

/* Make room for n records in a batch and mark them all unclaimed. */
static void
fbatch_setup(struct fbatch *fb, struct record *recs, struct verdict *vs,
    size_t n)
{
	struct filter	*f = fb->f;
	unsigned	 K = f->o.p.perms, b = f->o.p.bands;

	if (n > fb->nslots) {
		fb->slots = xreallocarray(fb->slots, n, sizeof *fb->slots);
		memset(fb->slots + fb->nslots, 0,
		    (n - fb->nslots) * sizeof *fb->slots);
		fb->ids = xreallocarray(fb->ids, n, sizeof *fb->ids);
		memset(fb->ids + fb->nslots, 0,
		    (n - fb->nslots) * sizeof *fb->ids);
		fb->nslots = n;
		fb->sigs = xreallocarray(fb->sigs, n, K * sizeof *fb->sigs);
		fb->keys = xreallocarray(fb->keys, n, b * sizeof *fb->keys);
		fb->docs = xreallocarray(fb->docs, n, sizeof *fb->docs);
	}
	fb->recs = recs;
	fb->vs = vs;
	fb->n = n;
	fb->invalid_utf8 = 0;
	atomic_store(&fb->next, 0);
}

/*
 * Phase 1 of the batch set up by fbatch_setup, by the worker threads and
 * the calling thread, until every record is claimed and the workers are
 * done.  Records claimed by a thread that helps (filter_prepare_wait) may
 * still be in progress when this returns.
 */
static void
fbatch_run(struct fbatch *fb)
{
	struct filter	*f = fb->f;
	unsigned	 t, nt;

	/* Threads only pay for themselves on more than a few records. */
	nt = f->o.threads;
	if (fb->n < 64 * (size_t)nt)
		nt = 1;
	for (t = 0; t < nt; t++) {
		f->preps[t].fb = fb;
		if (t > 0)
			thread_start(&f->preps[t].thread, prep_run,
			    &f->preps[t]);
	}
	prep_share(&f->preps[0]);
	for (t = 0; t < nt; t++) {
		if (t > 0 && pthread_join(f->preps[t].thread, NULL) != 0)
			fatalx("cannot join a worker thread");
		fb->invalid_utf8 += f->preps[t].invalid_utf8;
	}
}

/* fbatch_run in a thread of its own. */
static void *
prepare_run(void *arg)
{
	struct fbatch	*fb = arg;

	fbatch_run(fb);
	return (NULL);
}

/*
 * Start phase 1 of a batch of n records in the background: pure work on
 * separate records, shared out among the worker threads.  It touches
 * nothing phase 2 uses, so it may run while phase 2 of another batch does.
 * filter_prepare_wait finishes it.  Only one batch of a filter may be in
 * phase 1 at a time.
 */
void
filter_prepare_start(struct fbatch *fb, struct record *recs,
    struct verdict *vs, size_t n)
{
	fbatch_setup(fb, recs, vs, n);
	thread_start(&fb->thread, prepare_run, fb);
	fb->running = 1;
}

/*
 * Finish filter_prepare_start's phase 1, if any: the calling thread (the
 * writer) takes what is still unclaimed rather than wait.
 */
void
filter_prepare_wait(struct fbatch *fb)
{
	struct prep	*w = &fb->f->preps[fb->f->o.threads];

	if (!fb->running)
		return;
	w->fb = fb;
	prep_share(w);
	if (pthread_join(fb->thread, NULL) != 0)
		fatalx("cannot join a worker thread");
	fb->invalid_utf8 += w->invalid_utf8;
	fb->running = 0;
}

/* Leave out the records from n on, before filter_decide. */
void
fbatch_truncate(struct fbatch *fb, size_t n)
{
	filter_prepare_wait(fb);
	if (n < fb->n)
		fb->n = n;
}

/* Leave record i out of filter_decide (after phase 1). */
void
fbatch_skip(struct fbatch *fb, size_t i)
{
	filter_prepare_wait(fb);
	if (i < fb->n) {
		fb->slots[i].pending = 0;
		fb->docs[i].pending = 0;
	}
}

/* What index_prepare is told about record i of the batch. */
static void
filter_doc(struct fbatch *fb, size_t i)
{
	struct filter	*f = fb->f;
	struct ixdoc	*d = &fb->docs[i];
	struct slot	*s = &fb->slots[i];

	memset(d, 0, sizeof *d);
	if (!(d->pending = s->pending))
		return;
	record_idstr(&fb->recs[i], &fb->ids[i]);
	d->keys = fb->keys + i * f->o.p.bands;
	d->sig = fb->sigs + i * f->o.p.perms;
	d->id = fb->ids[i].data;
	d->idlen = fb->ids[i].len;
	d->enc = f->o.p.texts ? s->enc.data : NULL;
	d->enclen = f->o.p.texts ? s->enc.len : 0;
	d->flags = s->bytes ? DOC_BYTES : 0;
	d->time = fb->recs[i].time;
}

/* Order candidates: most shared bands first, then the earliest. */
static int
cand_cmp(const void *a, const void *b)
{
	const struct cand	*x = a, *y = b;

	if (x->hits != y->hits)
		return (x->hits > y->hits ? -1 : 1);
	return ((x->docid > y->docid) - (x->docid < y->docid));
}

/* The order of est_cmp for estimates ex, ey of documents dx, dy. */
static int
est_order(double ex, uint64_t dx, double ey, uint64_t dy)
{
	if (ex != ey)
		return (ex > ey ? -1 : 1);
	return ((dx > dy) - (dx < dy));
}

/* Order candidates: highest estimate first, then the earliest. */
static int
est_cmp(const void *a, const void *b)
{
	const struct cand	*x = a, *y = b;

	return (est_order(x->est, x->docid, y->est, y->docid));
}

/*
 * Candidates verified after the first match, for a better one (but for
 * --pairs, which wants them all): in a family of near-copies every earlier
 * member's estimate is within the margin of the best, and each new member
 * verified --max-candidates of them.
 */
#define VERIFY_MORE	8

/*
 * Does exact verification stop before a candidate of estimate est, taken
 * in est_cmp's order, with best the best match so far (-1: none) and
 * *more the candidates verified since it (counted here)?  filter_one's
 * rule, which the lookahead follows.
 */
static int
verify_done(const struct filter *f, double est, double best, int pairs,
    size_t *more)
{
	double	 t = f->o.p.threshold;

	if (est < (pairs ? t : fmax(t, best)) - f->margin)
		return (1);
	return (!pairs && best >= 0 && ++*more > VERIFY_MORE);
}

/*
 * Turn bucket contents (found[0..nfound), sorted here) into candidates in
 * w->cands with their shared-band counts, most shared first.
 */
static size_t
filter_gather(struct vwork *w, uint64_t *found, size_t nfound)
{
	size_t	 i, n = 0;

	if (nfound == 0)
		return (0);
	sort_u64(found, nfound, &w->scratch);
	if (nfound > w->candsize) {
		w->candsize = nfound;
		w->cands = xreallocarray(w->cands, w->candsize,
		    sizeof *w->cands);
	}
	for (i = 0; i < nfound; i++) {
		if (n > 0 && w->cands[n - 1].docid == found[i])
			w->cands[n - 1].hits++;
		else {
			w->cands[n].docid = found[i];
			w->cands[n].hits = 1;
			n++;
		}
	}
	if (n > 1)
		qsort(w->cands, n, sizeof *w->cands, cand_cmp);
	return (n);
}

/* Remember a verified match for --pairs. */
void
verdict_pair(struct verdict *v, uint64_t docid, const char *id, size_t idlen,
    double sim)
{
	struct pair	*p;

	if (v->npairs == v->pairsize) {
		v->pairsize = v->pairsize ? 2 * v->pairsize : 4;
		v->pairs = xreallocarray(v->pairs, v->pairsize,
		    sizeof *v->pairs);
		memset(v->pairs + v->npairs, 0,
		    (v->pairsize - v->npairs) * sizeof *v->pairs);
	}
	p = &v->pairs[v->npairs++];
	p->docid = docid;
	p->contains = 0;
	p->id.len = 0;
	buf_append(&p->id, id, idlen);
	p->sim = sim;
}

/*
 * The exact similarity of slot s's text and a document's text (of its
 * DOC_BYTES flag bytes), with w's scratch: see filter_exact.  1 when the
 * texts are the same, else 0.
 */
static int
filter_similarity(const struct filter *f, struct vwork *w,
    const struct slot *s, const struct buf *text, int bytes, double *sim)
{
	const struct buf	*norm = w->mytext;
	size_t			 both, theirs, mine;

	if (norm == NULL) {
		/* Its text was compressed and not kept (prep_one). */
		norm = &s->norm;
		if (f->o.p.texts && !f->o.query_only) {
			if (text_decode((const unsigned char *)s->enc.data,
			    s->enc.len, &w->norm) < 0)
				fatalx("a batch's compressed text is corrupt");
			norm = &w->norm;
		}
		w->mytext = norm;
	}
	/*
	 * The same text (a copy sent again, a feed polled again) has the
	 * same shingles, whatever they are: no set to build.
	 */
	if (bytes == s->bytes && text->len == norm->len &&
	    memcmp(text->data, norm->data, norm->len) == 0) {
		sim[SIM_J] = sim[SIM_IN] = sim[SIM_OUT] = 1.0;
		return (1);
	}
	if (!w->have_mine) {
		shingle_keys(&f->sh, norm->data, norm->len, s->bytes,
		    &w->hashes);
		shset_build(&w->mine, w->hashes.v, w->hashes.n);
		w->have_mine = 1;
	}
	shingle_keys(&f->sh, text->data, text->len, bytes, &w->hashes);
	both = shset_overlap(&w->mine, &w->theirs, w->hashes.v, w->hashes.n,
	    &theirs);
	mine = w->mine.n;
	sim[SIM_J] = mine + theirs == 0 ? 1.0 :
	    (double)both / (double)(mine + theirs - both);
	sim[SIM_IN] = mine == 0 ? 1.0 : (double)both / (double)mine;
	sim[SIM_OUT] = theirs == 0 ? 1.0 : (double)both / (double)theirs;
	/*
	 * Mail with an attachment the document has not is no copy of it,
	 * nor held in it, however similar the texts; the document is held
	 * in the record only with what it attached.
	 */
	if (f->o.within != NULL) {
		if (!f->o.within(norm->data, norm->len, text->data, text->len))
			sim[SIM_J] = sim[SIM_IN] = 0.0;
		if (!f->o.within(text->data, text->len, norm->data, norm->len))
			sim[SIM_OUT] = 0.0;
	}
	return (0);
}

/* What the lookahead read of candidate docid of the record, or NULL. */
static const struct amemo *
filter_memo(const struct filter *f, uint64_t docid)
{
	struct amemo	 key;

	if (f->nmemo == 0)
		return (NULL);
	key.docid = docid;
	return (bsearch(&key, f->memo, f->nmemo, sizeof *f->memo,
	    amemo_cmp));
}

/*
 * The exact similarity of slot s's text and a document's: into sim[SIM_J]
 * their Jaccard similarity, and into sim[SIM_IN] and sim[SIM_OUT] the
 * share of the record's shingles in the document and of the document's
 * in the record (containment, both ways).  The lookahead's, if it computed
 * it (the same function of the same two texts), else computed here.
 */
static int
filter_exact(struct filter *f, struct index *ix, const struct slot *s,
    uint64_t docid, double *sim, char **cause)
{
	const struct amemo	*m;
	int			 bytes, same;

	if ((m = filter_memo(f, docid)) != NULL && m->verified) {
		memcpy(sim, m->sim, NSIM * sizeof *sim);
		same = m->same;
	} else {
		if ((bytes = index_text(ix, docid, &f->w.text, cause)) < 0)
			return (-1);
		same = filter_similarity(f, &f->w, s, &f->w.text, bytes, sim);
	}
	f->st.verified++;
	if (same)
		f->st.verified_same++;
	return (0);
}

/*
 * Under containment, may candidate cd, of signature estimate est, hold
 * `in' or more of the record in slot s, or the record `out' or more of it
 * (0 if surely not)?  Its Jaccard similarity is taken to be at most est
 * plus the margin (whose miss rate mhfilter(1) gives), and its size what
 * the index keeps of it (contain_bounds); one stored without a size
 * (before the index kept them) may.
 */
static int
contain_may(const struct filter *f, const struct slot *s,
    const struct cand *cd, double in, double out)
{
	uint64_t	 lo, hi;
	double		 bin, bout;

	if (cd->shingles == 0)
		return (1);
	shcount_range(cd->shingles, &lo, &hi);
	contain_bounds(fmin(1.0, cd->est + f->margin), s->shingles, lo, hi,
	    &bin, &bout);
	return (bin >= in || bout >= out);
}

/*
 * The group of a duplicate of docid: the first document of docid's group
 * into *group, and its id into v->group unless that is docid itself (the
 * caller has its id).  A group whose first document was removed is
 * docid's own.  0, or an INDEX_* code.
 */
static int
filter_group(struct index *ix, struct verdict *v, uint64_t docid,
    uint64_t *group, char **cause)
{
	struct docinfo	 d;
	int		 rc;

	if ((rc = index_group(ix, docid, group, cause)) != 0)
		return (rc);
	if (*group == docid)
		return (0);
	if ((rc = index_doc(ix, *group, &d, cause)) == INDEX_GONE) {
		*group = docid;
		return (0);
	}
	if (rc == 0)
		buf_append(&v->group, d.id, d.idlen);
	return (rc);
}

/*
 * Is candidate d, of estimated similarity 1, the record's own copy?  With
 * an explicit id: a document with that id (with REPLAY_ALL, from an
 * earlier run only).  Without one: a unique document that may be missing
 * from its output and that this run has not written again yet
 * (REPLAY_UNDELIVERED only), of an earlier run, or of this one when its
 * output will never be written (filter_abandon).  An id the source gave
 * (the daemon's RUN:CONN:RECNO) is not the record's own: sent again, on
 * another connection or to the daemon restarted, the record has another.
 * 1, 0, or an INDEX_* code.
 */
static int
filter_self(struct filter *f, struct index *ix, const struct record *r,
    const struct docinfo *d, char **cause)
{
	int	 earlier = !index_own(ix, d->docid);	/* another run's */

	if (r->id.len != 0 && !r->genid) {
		if (d->idlen != r->id.len ||
		    memcmp(d->id, r->id.data, r->id.len) != 0)
			return (0);
		return (earlier || f->o.replay != REPLAY_ALL);
	}
	if (f->o.replay == REPLAY_ALL || (!earlier &&
	    !pairs_has(&f->lost, d->docid) && filter_owner(f, r, d->docid) !=
	    OWNER_GONE) || !(d->flags & DOC_UNIQUE) ||
	    replayed_has(f, d->docid))
		return (0);
	return (index_undelivered(ix, d->docid, cause));
}

/*
 * The record's identical copy self is indexed: decide the record.  A copy
 * reported unique whose output may never have been written (an earlier
 * run's, undelivered, or any earlier run's with REPLAY_ALL) makes the
 * record a replay, unique again.  A copy reported duplicate there leaves
 * the record to the other candidates (0), as the first run judged it.
 * Otherwise the record was seen: a duplicate of itself.  1 when decided,
 * 0 to go on, or an INDEX_* code.
 */
static int
filter_copy(struct filter *f, struct index *ix, const struct record *r,
    struct verdict *v, uint64_t self, int self_unique, char **cause)
{
	uint64_t	 group;
	int		 pending = 1, rc;

	/*
	 * This run's copy, sent by a connection still there (or the one
	 * sending this record), is written by it, once: only one whose
	 * reply was lost, or whose owner is not known, may be owed.
	 */
	if ((index_own(ix, self) && (!f->o.run_unsure ||
	    (!pairs_has(&f->lost, self) &&
	    filter_owner(f, r, self) == OWNER_THERE))) ||
	    (f->o.replay != REPLAY_ALL && replayed_has(f, self)))
		pending = 0;		/* this run writes it, once */
	else if (f->o.replay != REPLAY_ALL && r->id.len != 0 && !r->genid &&
	    (pending = index_undelivered(ix, self, cause)) < 0)
		return (pending);
	if (pending && self_unique) {
		v->kind = V_UNIQUE;
		v->replay = 1;
		v->self = self;
		if (f->o.replay != REPLAY_ALL)
			replayed_add(f, self);
		return (1);
	}
	if (pending) {
		v->self = self;		/* decided again: delivered with it */
		return (0);
	}
	if (f->o.replay == REPLAY_ALL)
		return (0);
	if ((rc = filter_group(ix, v, self, &group, cause)) != 0)
		return (rc);
	v->kind = V_DUPLICATE;
	v->seen = 1;
	v->sim = 1.0;
	buf_append(&v->match, r->id.data, r->id.len);
	/* A redelivery is a pair too: the message and its own copy. */
	if (f->o.want_pairs || r->pairs)
		verdict_pair(v, self, r->id.data, r->id.len, 1.0);
	if (group == self)
		buf_append(&v->group, r->id.data, r->id.len);
	return (1);
}

/*
 * The lookahead.  Of the writer's work on a batch, the lookups and the
 * verification need not wait for the decisions of the records before:
 * every record is looked up in the index as the batch's transaction found
 * it (index_reader_candidates), and its candidates that filter_one may
 * verify (an estimate within the margin of the threshold) are verified,
 * by the o.threads - 1 other threads, each with an index reader of its
 * own, AHEAD_CHUNK records at a time in input order.  The writer follows
 * them: it decides record i once they are past it (ahead_keep_up),
 * taking its candidates from there and from the batch's own inserts
 * before it (inb: what the band index has not shown the readers), and a
 * similarity from there when it has one (filter_exact), so that its
 * verdicts are the same as without: the same candidates, the same
 * similarities, the same rules, in input order.  Its inserts meanwhile
 * write documents and texts, which readers do not see (LMDB keeps their
 * snapshot), and keep their band entries from the memtable, which they
 * read in place, until the lookahead ends (index_settle).  A record whose
 * fullest band bucket could have passed INDEX_BUCKET_MAX with the batch's
 * inserts (where a lookup leaves some out), or that the lookahead could
 * not look up, is looked up by the writer as before, once the lookahead
 * has ended.  Containment is looked up ahead, not verified.
 *
 * It needs two threads, a backend with readers, and a batch large enough
 * to be worth a fork and join (AHEAD_MIN records to decide).  The next
 * batch's phase 1 starts when its threads are done, before the settle
 * (filter_on_ahead), so that the two do not share the cores with the
 * writer at once.
 */
#define AHEAD_MIN	256
#define AHEAD_CHUNK	16
#define AHEAD_FOUND_MAX	(1U << 20)	/* bucket entries kept, a batch */
#define AHEAD_MEMO_MAX	(1U << 18)	/* similarities kept, a batch */
#define AHEAD_DAMAGE	1		/* ahead_stop: a reader met damage */
#define AHEAD_QUIT	2		/* the writer needs no more */

/* Look record i of the batch up ahead, and verify what may be asked. */
static void
ahead_one(struct athr *a, size_t i)
{
	struct filter	*f = a->f;
	struct fbatch	*fb = a->fb;
	struct ahead	*ah = &fb->ahead[i];
	const struct slot *s = &fb->slots[i];
	struct vwork	*w = &a->w;
	struct amemo	*m;
	struct docinfo	 d;
	unsigned	 K = f->o.p.perms;
	const uint32_t	*sig = fb->sigs + i * K;
	double		 t = f->o.p.threshold;
	double		 best = -1;
	size_t		 c, n, start = a->arena.n, more = 0;
	int		 bytes, rc, verify, pairs;

	if (!s->pending || a->arena.n > a->found_max)
		return;		/* (past its budget: the writer looks) */
	if ((rc = index_reader_candidates(a->rd, fb->keys +
	    i * f->o.p.bands, &a->arena, &ah->most)) != 0) {
		a->arena.n = start;
		if (rc < 0)
			atomic_store(&fb->ahead_stop, AHEAD_DAMAGE);
		return;
	}
	ah->thr = (unsigned)(a - f->athr);
	ah->found = start;
	ah->nfound = a->arena.n - start;
	ah->memo = a->nmemo;
	ah->nmemo = 0;
	ah->ok = 1;
	if (ah->nfound == 0)
		return;
	verify = f->o.verify == VERIFY_EXACT &&
	    f->o.p.measure != MEASURE_CONTAINMENT;
	pairs = f->o.want_pairs || fb->recs[i].pairs;
	/* The arena's order does not matter: filter_one gathers again. */
	n = filter_gather(w, a->arena.v + start, ah->nfound);
	if (n > f->o.max_candidates)
		n = f->o.max_candidates;
	w->have_mine = 0;
	w->mytext = NULL;
	for (c = 0; c < n && a->nmemo < a->memo_max; c++) {
		if ((rc = index_reader_doc(a->rd, w->cands[c].docid,
		    &d)) != 0) {
			if (rc < 0) {
				atomic_store(&fb->ahead_stop, AHEAD_DAMAGE);
				break;
			}
			continue;	/* the writer finds out */
		}
		m = &a->memo[a->nmemo++];
		ah->nmemo++;
		m->docid = w->cands[c].docid;
		m->est = minhash_similarity(sig, d.sig, K);
		m->shingles = d.shingles;
		m->verified = 0;
	}
	/*
	 * Verified in filter_one's order and by its rules (verify_done), as
	 * far as this lookup tells (the batch's own inserts
	 * may add candidates: the writer verifies what it lacks).
	 */
	if (verify && ah->nmemo > 1)
		qsort(a->memo + ah->memo, ah->nmemo, sizeof *a->memo,
		    amemo_est_cmp);
	for (c = 0; verify && c < ah->nmemo; c++) {
		m = &a->memo[ah->memo + c];
		if (verify_done(f, m->est, best, pairs, &more))
			break;
		if ((rc = index_reader_text(a->rd, m->docid, &w->text,
		    &bytes)) != 0) {
			if (rc < 0) {
				atomic_store(&fb->ahead_stop, AHEAD_DAMAGE);
				break;
			}
			continue;
		}
		m->same = filter_similarity(f, w, s, &w->text, bytes, m->sim);
		m->verified = 1;
		a->nverified++;
		if (m->sim[SIM_J] >= t && m->sim[SIM_J] > best)
			best = m->sim[SIM_J];
		if (!pairs && best >= 1.0)
			break;
	}
	if (ah->nmemo > 1)
		qsort(a->memo + ah->memo, ah->nmemo, sizeof *a->memo,
		    amemo_cmp);
}

/* Order similarities by document. */
static int
amemo_cmp(const void *a, const void *b)
{
	const struct amemo	*x = a, *y = b;

	return ((x->docid > y->docid) - (x->docid < y->docid));
}

/* Order similarities as filter_one takes candidates (est_cmp). */
static int
amemo_est_cmp(const void *a, const void *b)
{
	const struct amemo	*x = a, *y = b;

	return (est_order(x->est, x->docid, y->est, y->docid));
}

/*
 * Look up the records of the chunk from i, AHEAD_CHUNK of them; say each
 * one done (ready) to the writer, waking it if it waits.
 */
static void
ahead_chunk(struct athr *a, size_t i)
{
	struct filter	*f = a->f;
	struct fbatch	*fb = a->fb;
	size_t		 end, bands = f->o.p.bands;

	end = i + AHEAD_CHUNK < fb->n ? i + AHEAD_CHUNK : fb->n;
	/*
	 * A lookup is a few cache misses: those of the next two records are
	 * started while this one is looked up and verified, as
	 * index_candidates does for the writer.
	 */
	index_reader_prefetch(a->rd, fb->keys + i * bands, 0);
	index_reader_prefetch(a->rd, fb->keys + i * bands, 1);
	if (i + 1 < end)
		index_reader_prefetch(a->rd, fb->keys + (i + 1) * bands, 0);
	for (; i < end; i++) {
		if (i + 1 < end)
			index_reader_prefetch(a->rd,
			    fb->keys + (i + 1) * bands, 1);
		if (i + 2 < end)
			index_reader_prefetch(a->rd,
			    fb->keys + (i + 2) * bands, 0);
		if (!atomic_load_explicit(&fb->ahead_stop,
		    memory_order_relaxed))
			ahead_one(a, i);
		atomic_store_explicit(&fb->ahead[i].ready, 1,
		    memory_order_release);
	}
	/* (Against the writer's store of await and load of ready.) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&f->await))
		ahead_wake(f);
}

/* Wake the writer, waiting in ahead_keep_up. */
static void
ahead_wake(struct filter *f)
{
	pthread_mutex_lock(&f->alock);
	pthread_cond_broadcast(&f->acond);
	pthread_mutex_unlock(&f->alock);
}

/* The first record of the next chunk not yet claimed, or fb->n. */
static size_t
ahead_claim(struct fbatch *fb)
{
	size_t	 i;

	if (atomic_load(&fb->ahead_stop))
		return (fb->n);
	i = atomic_fetch_add(&fb->anext, AHEAD_CHUNK);
	return (i < fb->n ? i : fb->n);
}

/* A lookahead thread: chunk after chunk, until none is left. */
static void *
ahead_run(void *arg)
{
	struct athr	*a = arg;
	struct filter	*f = a->f;
	struct fbatch	*fb = a->fb;
	size_t		 i;

	while ((i = ahead_claim(fb)) < fb->n)
		ahead_chunk(a, i);
	vwork_trim(&a->w);
	atomic_fetch_sub(&f->arunning, 1);
	ahead_wake(f);
	return (NULL);
}

/*
 * Is the batch worth a lookahead (pending records into *pending): two
 * threads, a backend with readers, AHEAD_MIN records to decide.
 */
static int
filter_ahead_wanted(const struct filter *f, struct index *ix,
    const struct fbatch *fb, size_t *pending)
{
	size_t	 i;

	*pending = 0;
	if (f->o.threads < 2 || !index_has_readers(ix))
		return (0);
	for (i = 0; i < fb->n; i++)
		*pending += fb->slots[i].pending != 0;
	return (*pending >= AHEAD_MIN);
}

/*
 * Start the lookahead of a prepared batch of pending records to decide,
 * worth one (filter_ahead_wanted), on the other threads that get a reader
 * (the writer's own, f->athr[0], is for ahead_keep_up); fb->ahead_on says
 * if it started.  0, or index_settle's code (none started).
 */
static int
filter_ahead(struct filter *f, struct index *ix, struct fbatch *fb,
    size_t pending, char **cause)
{
	struct athr	*a;
	size_t		 t, nt = f->o.threads, cap;

	fb->ahead_on = 0;
	if (f->athr == NULL)
		f->athr = xcalloc(nt, sizeof *f->athr);
	for (f->nathr = 0; f->nathr < nt; f->nathr++) {
		if (index_reader_open(ix, &f->athr[f->nathr].rd) != 0) {
			f->athr[f->nathr].rd = NULL;
			break;
		}
	}
	if (f->nathr < 2) {
		/* Nobody to look ahead: the writer looks up itself. */
		if (f->nathr == 1)
			index_reader_close(f->athr[0].rd);
		f->athr[0].rd = NULL;
		f->nathr = 0;
		filter_start_next(f);
		return (index_settle(ix, cause));
	}
	if (fb->n > fb->aheadsize) {
		fb->aheadsize = fb->n;
		fb->ahead = xreallocarray(fb->ahead, fb->aheadsize,
		    sizeof *fb->ahead);
	}
	memset(fb->ahead, 0, fb->n * sizeof *fb->ahead);
	atomic_store(&fb->anext, 0);
	atomic_store(&fb->ahead_stop, 0);
	atomic_store(&f->await, 0);
	atomic_store(&f->arunning, f->nathr - 1);
	inb_reset(&f->inb, pending * f->o.p.bands);
	fb->ahead_on = 1;
	for (t = 0; t < f->nathr; t++) {
		a = &f->athr[t];
		a->f = f;
		a->fb = fb;
		/* Room for the budget and one more lookup, made once. */
		a->found_max = AHEAD_FOUND_MAX / f->nathr;
		cap = a->found_max + (size_t)f->o.p.bands * INDEX_BUCKET_MAX;
		if (a->arena.size < cap) {
			free(a->arena.v);
			a->arena.v = xreallocarray(NULL, cap,
			    sizeof *a->arena.v);
			a->arena.size = cap;
		}
		a->arena.n = 0;
		a->memo_max = AHEAD_MEMO_MAX / f->nathr;
		if (a->memosize < a->memo_max) {
			free(a->memo);
			a->memosize = a->memo_max;
			a->memo = xreallocarray(NULL, a->memosize,
			    sizeof *a->memo);
		}
		a->nmemo = a->nverified = 0;
		if (t > 0)
			thread_start(&a->thread, ahead_run, a);
	}
	return (0);
}

/*
 * Before deciding record i of a batch with a lookahead running, see that
 * the lookahead is past it: while it is not, the writer looks up the next
 * chunk nobody has claimed, or, with none left, waits.  If the lookahead
 * has ended, end it (ahead_end).  0, or index_settle's code.
 */
static int
ahead_keep_up(struct filter *f, struct index *ix, struct fbatch *fb,
    size_t i, char **cause)
{
	atomic_int	*ready = &fb->ahead[i].ready;
	size_t		 c;

	while (!atomic_load_explicit(ready, memory_order_acquire) &&
	    atomic_load(&f->arunning) > 0) {
		if ((c = ahead_claim(fb)) < fb->n) {
			ahead_chunk(&f->athr[0], c);
			continue;
		}
		pthread_mutex_lock(&f->alock);
		atomic_store(&f->await, 1);
		atomic_thread_fence(memory_order_seq_cst);
		while (!atomic_load(ready) && atomic_load(&f->arunning) > 0)
			pthread_cond_wait(&f->acond, &f->alock);
		atomic_store(&f->await, 0);
		pthread_mutex_unlock(&f->alock);
	}
	if (atomic_load(&f->arunning) == 0)
		return (ahead_end(f, ix, fb, 1, cause));
	return (0);
}

/*
 * End the lookahead: with settle, once every record is looked up (the
 * writer taking what is left) and its threads are done, and then have the
 * inserts made meanwhile reach the lookups (index_settle); without (the
 * batch failed), as soon as its threads have stopped.  0, or
 * index_settle's code.
 */
static int
ahead_end(struct filter *f, struct index *ix, struct fbatch *fb, int settle,
    char **cause)
{
	size_t	 i, t;
	int	 stop = 0;

	if (f->nathr == 0)
		return (0);
	if (!settle)
		atomic_compare_exchange_strong(&fb->ahead_stop, &stop,
		    AHEAD_QUIT);
	else {
		/* (What nobody has claimed, the writer looks up itself.) */
		while ((i = ahead_claim(fb)) < fb->n)
			ahead_chunk(&f->athr[0], i);
	}
	for (t = 0; t < f->nathr; t++) {
		if (t > 0)
			pthread_join(f->athr[t].thread, NULL);
		index_reader_close(f->athr[t].rd);
		f->athr[t].rd = NULL;
		f->st.verified_ahead += f->athr[t].nverified;
	}
	f->nathr = 0;
	for (i = 0; i < fb->n; i++)
		f->st.ahead += fb->ahead[i].ok != 0;
	/*
	 * A reader met a damaged page, or a call that never came back (the
	 * fault guard's watchdog ended it): the writer's own calls will say
	 * if the index is damaged where it looks.
	 */
	if (atomic_load(&fb->ahead_stop) == AHEAD_DAMAGE && !f->ahead_warned) {
		log_warnx("%s: the lookahead stopped at a page it could not "
		    "read; the writer looks up the rest of the batch itself",
		    index_path(ix));
		f->ahead_warned = 1;
	}
	/*
	 * The lookahead's threads are done: the next batch's phase 1 may
	 * have the cores, beside the settle, which is the writer's alone (a
	 * batch's band entries into the memtable, a cache miss each).  When
	 * phase 1 waited for the settle, the other core sat idle for 6% of
	 * a run of 200,000 records of 1 KB.
	 */
	filter_start_next(f);
	return (settle ? index_settle(ix, cause) : 0);
}

/* Empty the batch's inserts, with room for n entries. */
static void
inb_reset(struct inb *m, size_t n)
{
	size_t	 size = 1024;

	while (size < 2 * n)
		size *= 2;
	if (size != m->mask + 1 || m->head == NULL) {
		free(m->head);
		m->head = xreallocarray(NULL, size, sizeof *m->head);
		m->mask = size - 1;
	}
	memset(m->head, 0xff, size * sizeof *m->head);
	m->n = 0;
}

/* An inserted document's band keys. */
static void
inb_add(struct inb *m, const uint64_t *keys, unsigned bands, uint64_t docid)
{
	size_t		 h;
	unsigned	 j;

	if (m->n + bands > m->size) {
		m->size = m->size ? 2 * m->size : 4096;
		if (m->size < m->n + bands)
			m->size = m->n + bands;
		m->e = xreallocarray(m->e, m->size, sizeof *m->e);
	}
	for (j = 0; j < bands; j++) {
		h = (size_t)(keys[j] ^ keys[j] >> 32) & m->mask;
		m->e[m->n].key = keys[j];
		m->e[m->n].docid = docid;
		m->e[m->n].next = m->head[h];
		m->head[h] = (uint32_t)m->n++;
	}
}

/*
 * Start the loads of an inserted band's list heads for keys (stage 0), or,
 * once they are in, of the first entries they name (stage 1): the lists
 * are a cache miss or two each, for every band of every record.
 */
static void
inb_prefetch(const struct inb *m, const uint64_t *keys, unsigned bands,
    int stage)
{
	size_t		 h;
	uint32_t	 x;
	unsigned	 j;

	for (j = 0; j < bands; j++) {
		h = (size_t)(keys[j] ^ keys[j] >> 32) & m->mask;
		if (stage == 0)
			__builtin_prefetch(&m->head[h]);
		else if ((x = m->head[h]) != INB_NONE)
			__builtin_prefetch(&m->e[x]);
	}
}

/*
 * Record i's bucket contents from the lookahead and the batch's inserts
 * since, into f->w.found, and its similarities into f->memo: 1, or 0 when
 * the writer is to look it up itself.
 */
static int
filter_ahead_found(struct filter *f, struct fbatch *fb, size_t i,
    const uint64_t *keys)
{
	const struct ahead	*ah;
	const struct athr	*a;
	struct inb		*m = &f->inb;
	size_t			 got, h;
	uint32_t		 x;
	unsigned		 j;

	if (!fb->ahead_on || !(ah = &fb->ahead[i])->ok)
		return (0);
	a = &f->athr[ah->thr];
	for (j = 0; j < f->o.p.bands; j++) {
		h = (size_t)(keys[j] ^ keys[j] >> 32) & m->mask;
		got = 0;
		for (x = m->head[h]; x != INB_NONE; x = m->e[x].next) {
			if (m->e[x].key == keys[j]) {
				u64vec_push(&f->w.found, m->e[x].docid);
				got++;
			}
		}
		if (ah->most + got >= INDEX_BUCKET_MAX) {
			f->w.found.n = 0;	/* may have lost some */
			f->st.ahead_again++;
			return (0);
		}
	}
	for (got = 0; got < ah->nfound; got++)
		u64vec_push(&f->w.found, a->arena.v[ah->found + got]);
	f->memo = a->memo + ah->memo;
	f->nmemo = ah->nmemo;
	return (1);
}

/*
 * Phase 2 for record i: look up, verify, decide, insert.
 *
 * The candidates sharing the most bands (at most max_candidates) get a
 * signature estimate each, then are taken in order of estimate.  Exact
 * verification stops at the first candidate whose estimate is more than the
 * margin below both the threshold and the best similarity found so far
 * (with --pairs, below the threshold): neither it nor any after it can
 * plausibly matter.
 *
 * A candidate that is the record's own copy (filter_self) is never its
 * match: filter_copy decides.  An earlier version with the same id but
 * another text is an ordinary candidate.
 */
static int
filter_one(struct filter *f, struct index *ix, struct fbatch *fb, size_t i,
    char **cause)
{
	struct slot	*s = &fb->slots[i];
	struct record	*r = &fb->recs[i];
	struct verdict	*v = &fb->vs[i];
	unsigned	 K = f->o.p.perms;
	const uint32_t	*sig = fb->sigs + i * K;
	const uint64_t	*keys = fb->keys + i * f->o.p.bands;
	double		 t = f->o.p.threshold, sim, best = -1, ex[NSIM];
	double		 held = -1;
	struct docinfo	 d;
	struct cand	*cd;
	const struct amemo *m;
	size_t		 c, n, kept, more = 0;
	uint64_t	 best_doc = 0, self = 0, group = 0, held_doc = 0;
	int		 rc, flags, self_unique = 0, indexed = 0;
	int		 pairs = f->o.want_pairs || r->pairs;
	int		 contain = f->o.p.measure == MEASURE_CONTAINMENT;

	f->w.found.n = 0;
	f->w.have_mine = 0;
	f->w.mytext = NULL;
	f->nmemo = 0;
	if (!filter_ahead_found(f, fb, i, keys) &&
	    ((rc = ahead_end(f, ix, fb, 1, cause)) != 0 ||
	    (rc = index_candidates(ix, i, keys, &f->w.found, cause)) != 0))
		return (rc);
	n = filter_gather(&f->w, f->w.found.v, f->w.found.n);
	if (n > f->o.max_candidates)
		n = f->o.max_candidates;
	for (c = kept = 0; c < n; c++) {
		/*
		 * The lookahead's estimate, the same; not for a possible copy
		 * of the record, which filter_self judges from the record.
		 */
		if ((m = filter_memo(f, f->w.cands[c].docid)) != NULL &&
		    m->est < 1.0) {
			f->w.cands[c].est = m->est;
			f->w.cands[c].shingles = m->shingles;
			f->w.cands[kept++] = f->w.cands[c];
			continue;
		}
		rc = index_doc(ix, f->w.cands[c].docid, &d, cause);
		if (rc == INDEX_GONE)
			continue;	/* removed by retention */
		if (rc != 0)
			return (rc);
		f->w.cands[c].est = minhash_similarity(sig, d.sig, K);
		f->w.cands[c].shingles = d.shingles;
		if (self == 0 && f->w.cands[c].est >= 1.0) {
			if ((rc = filter_self(f, ix, r, &d, cause)) < 0)
				return (rc);
			if (rc > 0) {
				self = d.docid;
				self_unique = (d.flags & DOC_UNIQUE) != 0;
				continue;
			}
		}
		f->w.cands[kept++] = f->w.cands[c];
	}
	f->st.candidates += n;

	if (self != 0) {
		ex[SIM_J] = 1.0;
		if (f->o.verify == VERIFY_EXACT &&
		    filter_exact(f, ix, s, self, ex, cause) != 0)
			return (-1);
		if (ex[SIM_J] < 1.0) {
			/* Same id, other text: an ordinary candidate. */
			f->w.cands[kept].docid = self;
			f->w.cands[kept++].est = 1.0;
		} else {
			if ((rc = filter_copy(f, ix, r, v, self, self_unique,
			    cause)) != 0)
				return (rc < 0 ? rc : 0);
			indexed = 1;	/* this record is in the index */
		}
	}
	/*
	 * Judged again as its copy was (filter_copy): against the documents
	 * before that copy, not those indexed after it, the later records
	 * of its batch, which would make it a duplicate of a record that
	 * came after it, and that one of it.
	 */
	if (v->self != 0) {
		for (c = n = 0; c < kept; c++) {
			if (f->w.cands[c].docid < v->self)
				f->w.cands[n++] = f->w.cands[c];
		}
		kept = n;
	}
	n = kept;

	if (n > 1)
		qsort(f->w.cands, n, sizeof *f->w.cands, est_cmp);
	for (c = 0; c < n; c++) {
		cd = &f->w.cands[c];
		sim = cd->est;
		if (f->o.verify == VERIFY_EXACT) {
			/*
			 * --pairs wants every match, not just the best, and
			 * under containment every document the record holds
			 * too.  Under containment the estimate, of Jaccard
			 * similarity, bounds a share only with the sizes, and
			 * in no order: contain_may decides candidate by
			 * candidate.
			 */
			if (!contain && verify_done(f, cd->est, best, pairs,
			    &more))
				break;
			if (contain && !contain_may(f, s, cd, pairs ? t :
			    fmax(t, best), !f->o.want_held ? 2.0 : pairs ?
			    t : best < 0 ? fmax(t, held) : 2.0))
				continue;
			if (filter_exact(f, ix, s, cd->docid, ex, cause) != 0)
				return (-1);
			sim = ex[contain ? SIM_IN : SIM_J];
			/* An earlier document this record holds. */
			if (contain && f->o.want_held && ex[SIM_OUT] >= t &&
			    ex[SIM_OUT] > held) {
				held = ex[SIM_OUT];
				held_doc = cd->docid;
			}
			if (contain && pairs && sim < t && ex[SIM_OUT] >= t) {
				if ((rc = index_doc(ix, cd->docid, &d,
				    cause)) != 0)
					return (rc);
				verdict_pair(v, d.docid, d.id, d.idlen,
				    ex[SIM_OUT]);
				v->pairs[v->npairs - 1].contains = 1;
			}
			if (sim < t)
				continue;
		} else if (f->o.verify == VERIFY_SIGNATURE && sim < t)
			break;		/* sorted: no later one reaches t */
		if (pairs) {
			if ((rc = index_doc(ix, cd->docid, &d, cause)) != 0)
				return (rc);
			verdict_pair(v, d.docid, d.id, d.idlen, sim);
		}
		if (sim > best) {
			best = sim;
			best_doc = cd->docid;
		}
		if (pairs)
			continue;
		if (best >= 1.0 || f->o.verify != VERIFY_EXACT)
			break;		/* nothing better can follow */
	}

	flags = s->bytes ? DOC_BYTES : 0;
	if (contain)
		flags |= DOC_SHINGLES(shcount_encode(s->shingles));
	if (best < 0) {
		v->kind = V_UNIQUE;
		flags |= DOC_UNIQUE;
		if (held_doc != 0) {
			if ((rc = index_doc(ix, held_doc, &d, cause)) != 0)
				return (rc);
			buf_append(&v->contains, d.id, d.idlen);
			v->contains_sim = held;
		}
	} else {
		if ((rc = filter_group(ix, v, best_doc, &group, cause)) != 0 ||
		    (rc = index_doc(ix, best_doc, &d, cause)) != 0)
			return (rc);
		v->kind = V_DUPLICATE;
		v->sim = best;
		buf_append(&v->match, d.id, d.idlen);
		if (group == best_doc)
			buf_append(&v->group, d.id, d.idlen);
		if (best >= 1.0 || !f->o.chain)
			return (0);	/* nothing new to index */
	}
	if (f->o.query_only || indexed)
		return (0);
	rc = index_insert_encoded(ix, i, keys, sig,
	    fb->ids[i].data, fb->ids[i].len, s->norm.data, s->norm.len,
	    f->o.p.texts ? s->enc.data : NULL, s->enc.len, flags, r->time,
	    cause);
	if (rc == 0)
		v->doc = index_last_doc(ix);
	if (rc == 0 && fb->ahead_on)
		inb_add(&f->inb, keys, f->o.p.bands, v->doc);
	if (rc == 0 && f->o.run_unsure && r->owner != 0)
		own_add(f, v->doc, r->owner);
	if (rc == 0 && v->kind == V_DUPLICATE)
		rc = index_set_group(ix, group, cause);
	return (rc);
}

/*
 * Phase 2 and the commit: decide every pending verdict of a prepared batch.
 * When the index map fills up, it is grown and the transaction redone.
 */
int
filter_decide(struct fbatch *fb, struct index *ix, char **cause)
{
	struct filter		*f = fb->f;
	struct filter_stats	 saved;
	uint64_t		 expired;
	size_t			 i, n = fb->n, replays = f->replays.n, pending;
	uint64_t		 owns = f->own_dropped + f->nown;
	int			 rc, ahead;

	filter_prepare_wait(fb);
	f->st.invalid_utf8 += fb->invalid_utf8;
	saved = f->st;
	f->next_started = 0;
	/* No lookahead: the next batch's phase 1 need not wait. */
	if (!(ahead = filter_ahead_wanted(f, ix, fb, &pending)))
		filter_start_next(f);
	for (;;) {
		fb->ahead_on = 0;
		if ((rc = index_begin(ix, cause)) != 0)
			goto again;
		if ((rc = index_prepare(ix, fb->docs, n, cause)) != 0) {
			index_abort(ix);
			goto again;
		}
		if (ahead && (rc = filter_ahead(f, ix, fb, pending,
		    cause)) != 0) {
			index_abort(ix);
			goto again;
		}
		for (i = 0; i < n; i++) {
			if (f->nathr > 0 &&
			    (rc = ahead_keep_up(f, ix, fb, i, cause)) != 0)
				break;
			/*
			 * Looked up ahead, the records' buckets in the
			 * memtable are not in the cache when they are
			 * inserted (after the lookahead): their loads start
			 * two records ahead.
			 */
			if (fb->ahead_on && f->nathr == 0 && i + 2 < n) {
				index_insert_prefetch(ix, fb->keys +
				    (i + 1) * f->o.p.bands, 1);
				index_insert_prefetch(ix, fb->keys +
				    (i + 2) * f->o.p.bands, 0);
			}
			/* And of the batch's inserts (filter_ahead_found). */
			if (fb->ahead_on && f->inb.n > 0) {
				if (i + 1 < n)
					inb_prefetch(&f->inb, fb->keys +
					    (i + 1) * f->o.p.bands,
					    f->o.p.bands, 1);
				if (i + 2 < n)
					inb_prefetch(&f->inb, fb->keys +
					    (i + 2) * f->o.p.bands,
					    f->o.p.bands, 0);
			}
			if (!fb->slots[i].pending)
				continue;
			verdict_reset(&fb->vs[i]);
			if ((rc = filter_one(f, ix, fb, i, cause)) != 0)
				break;
		}
		if (f->nathr > 0) {
			if (rc == 0)
				rc = ahead_end(f, ix, fb, 1, cause);
			else
				(void)ahead_end(f, ix, fb, 0, cause);
		}
		/* Retention: a bounded amount per batch, never a stall. */
		if (rc == 0 && !f->o.query_only && (f->o.ret.max_age != 0 ||
		    f->o.ret.max_docs != 0)) {
			rc = index_expire(ix, &f->o.ret, (int64_t)time(NULL),
			    2 * (uint64_t)n + 16, &expired, cause);
			f->st.expired += expired;
		}
		if (rc == 0)
			rc = index_commit(ix, cause);
		else
			index_abort(ix);
	again:
		if (rc != INDEX_AGAIN)
			break;
		f->st = saved;		/* the batch is counted once */
		replayed_truncate(f, replays);
		own_truncate(f, owns);
	}
	/*
	 * A batch that failed wrote nothing: its replays are replays again
	 * when sent again (a daemon goes on after it), not seen.
	 */
	if (rc != 0 && f->replays.n > replays)
		replayed_truncate(f, replays);
	if (rc != 0)
		own_truncate(f, owns);	/* its documents were not kept */
	filter_start_next(f);
	fb->ahead_on = 0;
	vwork_trim(&f->w);
	return (rc);
}

/* Clear a verdict for reuse, keeping its memory. */
void
verdict_reset(struct verdict *v)
{
	v->kind = V_PENDING;
	v->replay = 0;
	v->seen = 0;
	v->self = 0;
	v->doc = 0;
	free(v->error);
	v->error = NULL;
	v->sim = 0;
	buf_trim(&v->match);
	buf_trim(&v->group);
	buf_trim(&v->contains);
	v->contains_sim = 0;
	v->npairs = 0;
}

/* Free a verdict's memory. */
void
verdict_free(struct verdict *v)
{
	size_t	 i;

	for (i = 0; i < v->pairsize; i++)
		buf_free(&v->pairs[i].id);
	free(v->pairs);
	free(v->error);
	buf_free(&v->match);
	buf_free(&v->group);
	buf_free(&v->contains);
	memset(v, 0, sizeof *v);
}
