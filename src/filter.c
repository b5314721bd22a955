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
	pthread_t		 thread;	/* filter_prepare_start */
	int			 running;
};

/*
 * Phase 1 is shared out PREP_CHUNK records at a time to whoever asks next:
 * the worker threads, and the writer when it is left waiting for them
 * (filter_prepare_wait).  Fixed shares left a worker finishing alone while
 * the writer slept.
 */
/* filter_exact's similarities. */
#define SIM_J		0	/* Jaccard */
#define SIM_IN		1	/* the record's share in the document */
#define SIM_OUT		2	/* the document's share in the record */
#define NSIM		3
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
	struct shset		 mine;		/* the record's shingle set */
	int			 have_mine;	/* mine is the record's */
	const struct buf	*mytext;	/* its text, or NULL (yet) */
	struct buf		 norm;		/* the record's text, decoded */
	struct shset		 theirs;	/* a candidate's shingle set */
	struct u64vec		 hashes;	/* a text's shingle keys */
	struct u64vec		 found;		/* band bucket contents */
	struct u64vec		 scratch;	/* for sort_u64 */
	struct cand		*cands;
	size_t			 candsize;
	struct buf		 text;		/* a candidate's text */
	double			 margin;	/* exact: signature prefilter */
	struct filter_stats	 st;
	/* The earlier documents this run has replayed: written again once. */
	uint64_t		*replayed;	/* open addressing, 0 free */
	size_t			 replayedsize;	/* a power of two, or 0 */
	struct u64vec		 replays;	/* the same, in order */
};

static void	*prep_run(void *);
static void	*prepare_run(void *);
static int	filter_one(struct filter *, struct index *, struct fbatch *,
		    size_t, char **);
static int	filter_exact(struct filter *, struct index *,
		    const struct slot *, uint64_t, double *, char **);
static size_t	filter_gather(struct filter *);
static void	filter_docs(struct fbatch *);
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
	shset_free(&f->mine);
	shset_free(&f->theirs);
	buf_free(&f->norm);
	u64vec_free(&f->hashes);
	u64vec_free(&f->found);
	u64vec_free(&f->scratch);
	free(f->cands);
	buf_free(&f->text);
	free(f->replayed);
	u64vec_free(&f->replays);
	free(f);
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
prep_one(struct prep *w, size_t i)
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
	filter_docs(fb);
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

/* What index_prepare is told about each record of the batch. */
static void
filter_docs(struct fbatch *fb)
{
	struct filter	*f = fb->f;
	struct ixdoc	*d;
	struct slot	*s;
	size_t		 i;

	for (i = 0; i < fb->n; i++) {
		s = &fb->slots[i];
		d = &fb->docs[i];
		memset(d, 0, sizeof *d);
		if (!(d->pending = s->pending))
			continue;
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

/* Order candidates: highest estimate first, then the earliest. */
static int
est_cmp(const void *a, const void *b)
{
	const struct cand	*x = a, *y = b;

	if (x->est != y->est)
		return (x->est > y->est ? -1 : 1);
	return ((x->docid > y->docid) - (x->docid < y->docid));
}

/* Turn the bucket contents into candidates with their shared-band counts. */
static size_t
filter_gather(struct filter *f)
{
	size_t	 i, n = 0;

	if (f->found.n == 0)
		return (0);
	sort_u64(f->found.v, f->found.n, &f->scratch);
	if (f->found.n > f->candsize) {
		f->candsize = f->found.n;
		f->cands = xreallocarray(f->cands, f->candsize,
		    sizeof *f->cands);
	}
	for (i = 0; i < f->found.n; i++) {
		if (n > 0 && f->cands[n - 1].docid == f->found.v[i])
			f->cands[n - 1].hits++;
		else {
			f->cands[n].docid = f->found.v[i];
			f->cands[n].hits = 1;
			n++;
		}
	}
	if (n > 1)
		qsort(f->cands, n, sizeof *f->cands, cand_cmp);
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
 * The exact similarity of slot s's text and a document's: into sim[SIM_J]
 * their Jaccard similarity, and into sim[SIM_IN] and sim[SIM_OUT] the
 * share of the record's shingles in the document and of the document's
 * in the record (containment, both ways).
 */
static int
filter_exact(struct filter *f, struct index *ix, const struct slot *s,
    uint64_t docid, double *sim, char **cause)
{
	const struct buf	*norm = f->mytext;
	size_t			 both, theirs, mine;
	int			 bytes;

	if (norm == NULL) {
		/* Its text was compressed and not kept (prep_one). */
		norm = &s->norm;
		if (f->o.p.texts && !f->o.query_only) {
			if (text_decode((const unsigned char *)s->enc.data,
			    s->enc.len, &f->norm) < 0)
				fatalx("a batch's compressed text is corrupt");
			norm = &f->norm;
		}
		f->mytext = norm;
	}
	if ((bytes = index_text(ix, docid, &f->text, cause)) < 0)
		return (-1);
	/*
	 * The same text (a copy sent again, a feed polled again) has the
	 * same shingles, whatever they are: no set to build.
	 */
	if (bytes == s->bytes && f->text.len == norm->len &&
	    memcmp(f->text.data, norm->data, norm->len) == 0) {
		sim[SIM_J] = sim[SIM_IN] = sim[SIM_OUT] = 1.0;
		f->st.verified++;
		f->st.verified_same++;
		return (0);
	}
	if (!f->have_mine) {
		shingle_keys(&f->sh, norm->data, norm->len, s->bytes,
		    &f->hashes);
		shset_build(&f->mine, f->hashes.v, f->hashes.n);
		f->have_mine = 1;
	}
	shingle_keys(&f->sh, f->text.data, f->text.len, bytes, &f->hashes);
	both = shset_overlap(&f->mine, &f->theirs, f->hashes.v, f->hashes.n,
	    &theirs);
	mine = f->mine.n;
	sim[SIM_J] = mine + theirs == 0 ? 1.0 :
	    (double)both / (double)(mine + theirs - both);
	sim[SIM_IN] = mine == 0 ? 1.0 : (double)both / (double)mine;
	sim[SIM_OUT] = theirs == 0 ? 1.0 : (double)both / (double)theirs;
	f->st.verified++;
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
 * earlier run only).  Without one: a unique document of an earlier run
 * that may be missing from its output and that this run has not written
 * again yet (REPLAY_UNDELIVERED only).  1, 0, or an INDEX_* code.
 */
static int
filter_self(struct filter *f, struct index *ix, const struct record *r,
    const struct docinfo *d, char **cause)
{
	int	 earlier = !index_own(ix, d->docid);	/* another run's */

	if (r->id.len != 0) {
		if (d->idlen != r->id.len ||
		    memcmp(d->id, r->id.data, r->id.len) != 0)
			return (0);
		return (earlier || f->o.replay != REPLAY_ALL);
	}
	if (f->o.replay == REPLAY_ALL || !earlier ||
	    !(d->flags & DOC_UNIQUE) || replayed_has(f, d->docid))
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

	if ((index_own(ix, self) && !f->o.run_unsure) ||
	    (f->o.replay != REPLAY_ALL && replayed_has(f, self)))
		pending = 0;		/* this run writes it, once */
	else if (f->o.replay != REPLAY_ALL && r->id.len != 0 &&
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
	double		 t = f->o.p.threshold, sim, best = -1, cut, ex[NSIM];
	double		 held = -1;
	struct docinfo	 d;
	struct cand	*cd;
	size_t		 c, n, kept;
	uint64_t	 best_doc = 0, self = 0, group = 0, held_doc = 0;
	int		 rc, flags, self_unique = 0, indexed = 0;
	int		 pairs = f->o.want_pairs || r->pairs;
	int		 contain = f->o.p.measure == MEASURE_CONTAINMENT;

	f->found.n = 0;
	f->have_mine = 0;
	f->mytext = NULL;
	if ((rc = index_candidates(ix, i, keys, &f->found, cause)) != 0)
		return (rc);
	n = filter_gather(f);
	if (n > f->o.max_candidates)
		n = f->o.max_candidates;
	for (c = kept = 0; c < n; c++) {
		rc = index_doc(ix, f->cands[c].docid, &d, cause);
		if (rc == INDEX_GONE)
			continue;	/* removed by retention */
		if (rc != 0)
			return (rc);
		f->cands[c].est = minhash_similarity(sig, d.sig, K);
		f->cands[c].shingles = d.shingles;
		if (self == 0 && f->cands[c].est >= 1.0) {
			if ((rc = filter_self(f, ix, r, &d, cause)) < 0)
				return (rc);
			if (rc > 0) {
				self = d.docid;
				self_unique = (d.flags & DOC_UNIQUE) != 0;
				continue;
			}
		}
		f->cands[kept++] = f->cands[c];
	}
	f->st.candidates += n;

	if (self != 0) {
		ex[SIM_J] = 1.0;
		if (f->o.verify == VERIFY_EXACT &&
		    filter_exact(f, ix, s, self, ex, cause) != 0)
			return (-1);
		if (ex[SIM_J] < 1.0) {
			/* Same id, other text: an ordinary candidate. */
			f->cands[kept].docid = self;
			f->cands[kept++].est = 1.0;
		} else {
			if ((rc = filter_copy(f, ix, r, v, self, self_unique,
			    cause)) != 0)
				return (rc < 0 ? rc : 0);
			indexed = 1;	/* this record is in the index */
		}
	}
	n = kept;

	if (n > 1)
		qsort(f->cands, n, sizeof *f->cands, est_cmp);
	for (c = 0; c < n; c++) {
		cd = &f->cands[c];
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
			cut = (pairs ? t : fmax(t, best)) - f->margin;
			if (!contain && cd->est < cut)
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
	size_t			 i, n = fb->n, replays = f->replays.n;
	int			 rc;

	filter_prepare_wait(fb);
	f->st.invalid_utf8 += fb->invalid_utf8;
	saved = f->st;
	for (;;) {
		if ((rc = index_begin(ix, cause)) != 0)
			goto again;
		if ((rc = index_prepare(ix, fb->docs, n, cause)) != 0) {
			index_abort(ix);
			goto again;
		}
		for (i = 0; i < n; i++) {
			if (!fb->slots[i].pending)
				continue;
			verdict_reset(&fb->vs[i]);
			if ((rc = filter_one(f, ix, fb, i, cause)) != 0)
				break;
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
	}
	/* Keep the scratch of ordinary records, not of a huge one. */
	shset_trim(&f->mine);
	shset_trim(&f->theirs);
	u64vec_trim(&f->hashes);
	buf_trim(&f->text);
	buf_trim(&f->norm);
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
