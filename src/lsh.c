/*
 * Locality-sensitive hashing by banding (Leskovec, Rajaraman & Ullman,
 * Mining of Massive Datasets, ch. 3.4).  A signature of K values is cut into
 * b bands of r rows, b*r = K; two documents whose values agree on every row
 * of some band become candidates.  For a pair of similarity s:
 *
 *	P(candidate) = 1 - (1 - s^r)^b
 *
 * (b, r) is chosen from two explicit bounds around the threshold t rather
 * than by integrating that curve: a false-negative bound, the chance that a
 * pair at exactly t is missed, (1 - t^r)^b <= max_fn, and a false-positive
 * bound, the chance that a pair at t - 0.25 (t/2 for small t) is a
 * candidate.  Candidates are verified afterwards, so a false positive costs
 * time and a false negative costs a missed duplicate: when both bounds
 * cannot hold at once, the false-negative bound wins.
 */

#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "mhfilter.h"

/* The names of the measures, as --measure and the index give them. */
static const char *const measure_names[] = { "jaccard", "containment" };

/* The name of a measure. */
const char *
measure_name(int m)
{
	return (measure_names[m == MEASURE_CONTAINMENT]);
}

/* A measure by name: MEASURE_*, or -1. */
int
measure_parse(const char *s)
{
	if (strcmp(s, "jaccard") == 0)
		return (MEASURE_JACCARD);
	if (strcmp(s, "containment") == 0)
		return (MEASURE_CONTAINMENT);
	return (-1);
}

/*
 * The Jaccard similarity the bands are chosen for, for threshold t of a
 * measure: t itself, or for containment the least Jaccard similarity of
 * a record and an earlier document of its size that holds t of it.  If
 * |A & B| >= t|A| and |B| = |A|, then |A | B| <= (2 - t)|A|, so J >=
 * t / (2 - t): 0.667 for t = 0.8, 0.818 for t = 0.9.  An earlier document
 * longer than the record is a pair of lower Jaccard similarity: the bands
 * find it as they find any pair below their threshold (mhfilter(1), The
 * containment measure).
 */
double
lsh_bound(int measure, double t)
{
	return (measure == MEASURE_CONTAINMENT ? t / (2 - t) : t);
}

/*
 * Upper bounds on the containment of a record of a distinct shingles in
 * an earlier document of b_lo to b_hi, and of that document in the
 * record, when their Jaccard similarity is at most j (filter.c skips the
 * exact verification of a candidate whose bounds are below what could
 * matter).  |A & B| = J (|A| + |B|) / (1 + J), and at most the smaller of
 * the two: into *in, min(1, j (a + b) / ((1 + j) a), b / a), largest at
 * b_hi; into *out, min(1, j (a + b) / ((1 + j) b), a / b), largest at b_lo.
 * With a or b_lo 0 (not known), 1 and 1.
 */
void
contain_bounds(double j, uint64_t a, uint64_t b_lo, uint64_t b_hi,
    double *in, double *out)
{
	double	 da = (double)a, lo = (double)b_lo, hi = (double)b_hi;

	*in = *out = 1.0;
	if (a == 0 || b_lo == 0 || b_hi < b_lo)
		return;
	*in = fmin(1.0, fmin(j * (da + hi) / ((1 + j) * da), hi / da));
	*out = fmin(1.0, fmin(j * (da + lo) / ((1 + j) * lo), da / lo));
}

/* The similarity at which the false-positive bound is taken. */
static double
fp_point(double t)
{
	return (t > 2 * LSH_FP_GAP ? t - LSH_FP_GAP : t / 2);
}

/* The chance that a pair of similarity s shares at least one band. */
double
lsh_prob(double s, unsigned b, unsigned r)
{
	return (1.0 - pow(1.0 - pow(s, r), b));
}

/* Fill in the error rates of (b, r) at threshold t. */
void
lsh_rate(double t, unsigned b, unsigned r, struct lsh_choice *c)
{
	c->b = b;
	c->r = r;
	c->fn = 1.0 - lsh_prob(t, b, r);
	c->fp = lsh_prob(fp_point(t), b, r);
}

/*
 * Choose (b, r) with b*r <= k for threshold t: of the pairs meeting both
 * bounds the one with the least fn+fp; failing that, of those meeting the
 * fn bound the one with the least fp; failing that, the least fn.  Ties go
 * to fewer bands: every band costs a lookup and an entry per document.
 *
 * b*r need not be k.  With k = 128 and t = 0.8, insisting on b*r = k
 * leaves r = 4, b = 32 (fp 0.95 at s = 0.55); r = 6, b = 16 meets the fn
 * bound with half the bands and fp 0.36.
 */
int
lsh_choose(unsigned k, double t, double max_fn, double max_fp,
    struct lsh_choice *out)
{
	struct lsh_choice	 c, both = { 0 }, fnonly = { 0 }, any = { 0 };
	unsigned		 r, b;

	if (k == 0 || t <= 0 || t > 1)
		return (-1);
	for (r = 1; r <= k; r++) {
		for (b = 1; b * r <= k; b++) {
			lsh_rate(t, b, r, &c);
			if (c.fn <= max_fn && c.fp <= max_fp &&
			    (both.b == 0 || c.fn + c.fp < both.fn + both.fp))
				both = c;
			if (c.fn <= max_fn &&
			    (fnonly.b == 0 || c.fp < fnonly.fp))
				fnonly = c;
			if (any.b == 0 || c.fn < any.fn)
				any = c;
		}
	}
	if (both.b != 0)
		*out = both;
	else if (fnonly.b != 0)
		*out = fnonly;
	else
		*out = any;
	return (0);
}

/*
 * Band keys: band j's key is XXH3-64, seeded with seed + j, of its r
 * 16-bit values (rows j*r to j*r+r-1) as little-endian bytes.  The seed
 * keeps bands apart, so one keyspace holds them all.  Rows past b*r are not
 * banded; they still sharpen the similarity estimates.
 */
void
lsh_keys(const uint32_t *sig, unsigned b, unsigned r, uint64_t seed,
    uint64_t *keys)
{
	unsigned char	 bytes[2 * MHF_MAX_PERMS];
	unsigned	 j, i;

	for (j = 0; j < b; j++) {
		for (i = 0; i < r; i++) {
			bytes[2 * i] = sig[j * r + i] & 0xff;
			bytes[2 * i + 1] = (sig[j * r + i] >> 8) & 0xff;
		}
		keys[j] = XXH3_64bits_withSeed(bytes, 2 * (size_t)r, seed + j);
	}
}

/*
 * Parts (the containment measure).  A record that is the first half or
 * the first quarter of a longer document has a Jaccard similarity of
 * about 0.5 or 0.25 with it, which bands chosen for 0.667 seldom find.
 * So under containment a document's band keys come from LSH_PARTS
 * signatures: of its whole text, of its first half and of its first
 * quarter (in shingles, LSH_PART_MIN at least), each banded alike, band j
 * keyed with seed + j whichever part it is of, so that a part of one
 * document meets the whole or a part of another: a record that is a
 * fraction f of an earlier document from its start has similarity
 * min(f, p) / max(f, p) with the part p nearest to f: at least sqrt(1/2)
 * = 0.71 for f from 1/4 to 1, 4f below.  The parts of a record's own keys
 * find the documents it holds the start of.  What is stored is the whole
 * text's signature; the parts' keys are made again from the text.
 */
#define LSH_PART_MIN	64

/* How many parts a document's band keys come from, under measure m. */
unsigned
lsh_parts(int m)
{
	return (m == MEASURE_CONTAINMENT ? LSH_PARTS : 1);
}

/* The shingles in part i of n shingles: n, n / 2, n / 4. */
size_t
lsh_part_len(size_t n, unsigned i)
{
	size_t	 len = n >> i;

	if (len < LSH_PART_MIN)
		len = n < LSH_PART_MIN ? n : LSH_PART_MIN;
	return (len);
}

/*
 * A document's signature, scoped (lsh_scope), into sig, and its band
 * keys, every part's, into keys (p->bands of them): from its n shingle
 * hashes in text order.  part is scratch for K values.
 */
void
lsh_doc_keys(const struct index_params *p, const uint64_t *h, size_t n,
    uint64_t scope, uint32_t *sig, uint32_t *part, uint64_t *keys)
{
	unsigned	 parts = lsh_parts(p->measure), b = p->bands / parts, i;

	minhash_sign(h, n, p->perms, p->seed, sig);
	lsh_scope(sig, p->perms, scope);
	lsh_keys(sig, b, p->rows, p->seed, keys);
	for (i = 1; i < parts; i++) {
		minhash_sign(h, lsh_part_len(n, i), p->perms, p->seed, part);
		lsh_scope(part, p->perms, scope);
		lsh_keys(part, b, p->rows, p->seed, keys + i * b);
	}
}

/*
 * Scopes (the milter's recipients: "has this recipient had it?").  A
 * scope is a 64-bit key, lsh_scope_key of its name; a scoped signature is
 * its 16-bit values each XORed with 16 bits of XXH3-64 of the scope key
 * and the position.  Equal positions stay equal within a scope, so its
 * estimates are those of the plain signatures, while a document of another
 * scope shares a band with it only by chance (2^-16r a band).  The scope is
 * in what is stored, the signature: --check, --export and --import, and
 * Redis's removal, which rebuild band keys from stored signatures, need to
 * know nothing of it.  Scope 0 is no scope: the signature is left as it
 * is, which the known-answer tests pin.  Both functions are stored in
 * every scoped document: test_lsh pins them too.
 */
#define SCOPE_SEED	0x6d6866696c746572ULL	/* "mhfilter" */

/* The scope key of a name (the milter: a lower-cased address); never 0. */
uint64_t
lsh_scope_key(const char *name, size_t len)
{
	uint64_t	 k = XXH3_64bits_withSeed(name, len, SCOPE_SEED);

	return (k != 0 ? k : 1);
}

/* Salt the k values of sig with the scope (0: leave them). */
void
lsh_scope(uint32_t *sig, unsigned k, uint64_t scope)
{
	unsigned char	 in[12];
	uint64_t	 h = 0;
	unsigned	 i;

	if (scope == 0)
		return;
	put_le64(in, scope);
	for (i = 0; i < k; i++) {
		if (i % 4 == 0) {
			put_le32(in + 8, i / 4);
			h = XXH3_64bits_withSeed(in, sizeof in, SCOPE_SEED);
		}
		sig[i] ^= (uint32_t)(h >> (16 * (i % 4))) & 0xffff;
	}
}

/* Print the choice, a table of the S-curve and a small plot of it. */
void
lsh_explain(FILE *f, unsigned k, double t, const struct lsh_choice *c)
{
	int	 i, j, width = 50;
	double	 s, p;

	fprintf(f, "perms %u, threshold %.2f: bands %u x rows %u\n", k, t,
	    c->b, c->r);
	fprintf(f, "missed at s = %.2f (fn): %.6f\n", t, c->fn);
	fprintf(f, "candidate at s = %.2f (fp): %.6f\n", fp_point(t), c->fp);
	fprintf(f, "approximate threshold (1/b)^(1/r): %.3f\n\n",
	    pow(1.0 / c->b, 1.0 / c->r));
	fprintf(f, "similarity  P(candidate)\n");
	for (i = 1; i <= 10; i++) {
		s = i / 10.0;
		p = lsh_prob(s, c->b, c->r);
		fprintf(f, "%10.1f  %12.6f  |", s, p);
		for (j = 0; j < (int)(p * width + 0.5); j++)
			fputc(s + 1e-9 >= t ? '#' : '*', f);
		fputc('\n', f);
	}
	fprintf(f, "\n'#' at or above the threshold, where a miss is a false "
	    "negative;\n'*' below it, where a candidate costs a verification.\n");
}
