/*
 * bench_stages: time each stage of mhfilter on a corpus held in memory, so
 * that reading the input does not blur the figures.
 *
 *	bench_stages [-IT] [-B batch] [-d dir] [-f line|tsv|jsonl] [-k K]
 *	    [-N max] [-n N] [-o csv] [-r rounds] [-S simd] [-t threshold]
 *	    [file]
 *
 * The pure stages run -r times over the whole corpus (default 3) and the
 * fastest round is reported, since the machine is shared: parse (record
 * text out of its JSON), normalise, shingle (hashing only), shingle+sign
 * (the signature stage), band keys.  Normalise, shingle+sign and the
 * whole signature stage (normalise, shingle, sign: what a worker does with
 * a record's text) are timed again on the texts of LONG_TEXT bytes or more
 * alone: on short texts (most of the Debian corpus is one-line synopses)
 * the per-record work, K bins to fill and densify, outweighs the per-byte
 * work.
 *
 * The index stage then takes the band keys and signatures computed above
 * and, with nothing but the API of src/mhfilter.h, feeds them to a fresh
 * persistent index in a scratch directory (or -d dir, kept) in batches of
 * -B records (default 4000, as mhfilter): index_begin, index_prepare (the
 * batch's band keys), for each record index_candidates then index_insert
 * (with its normalised text unless -T), index_commit.  That is mhfilter's
 * access pattern without verification, so it measures the index alone,
 * fsync included.  It runs once: a second round would see a different
 * index.
 *
 * Records/s count the records with at least one shingle; MB/s are 10^6
 * bytes of their decoded text, for every stage, so that stages compare.
 * -S none, avx2 or all (the default) keeps the hashing loops to the
 * portable code, to AVX2, or lets them use what the CPU has (AVX-512 too),
 * to compare them on one machine.
 *
 * -o writes the same figures as CSV.  It reports; it asserts nothing.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhfilter.h"

#define LONG_TEXT	1024

struct corpus {
	struct buf	*raw;		/* records as read */
	struct buf	*texts;		/* their decoded text */
	struct buf	*ids;		/* their external id */
	struct buf	*norm;		/* normalised text */
	int		*bytes;		/* not UTF-8: normalised as bytes */
	int		*empty;		/* no shingles: skipped by the filter */
	size_t		 n;
	size_t		 size;
	size_t		 rawbytes;
	size_t		 textbytes;
	size_t		 bad;		/* records that did not parse */
};

struct stage {
	const char	*name;
	double		 secs;
	size_t		 records;
	size_t		 bytes;
};

static void	usage(void);
static void	load(const char *, int, size_t, struct corpus *);
static void	add(struct stage *, size_t *, const char *, double, size_t,
		    size_t);
static void	keep_best(double *, double);
static void	long_texts(const struct corpus *, const struct shingler *,
		    unsigned, int, struct buf *, struct u64vec *, uint32_t *);
static void	report(FILE *, const struct stage *, size_t);
static void	write_csv(const char *, const struct stage *, size_t);

/* Print the usage and exit 2. */
static void
usage(void)
{
	fprintf(stderr, "usage: bench_stages [-IT] [-B batch] [-d dir] "
	    "[-f line|tsv|jsonl] [-k K] [-N max]\n"
	    "                    [-n N] [-o csv] [-r rounds] [-S none|avx2|all] "
	    "[-t threshold]\n"
	    "                    [file]\n");
	exit(2);
}

/* Read up to max records (0: all) into memory, parsed once. */
static void
load(const char *file, int format, size_t max, struct corpus *c)
{
	char		*files[1], *cause;
	struct input	*in;
	struct rawrec	 rr;
	struct record	 r;
	size_t		 i;
	int		 rc;

	memset(&r, 0, sizeof r);
	files[0] = (char *)file;
	in = input_open(files, file != NULL, FRAME_DELIM, '\n',
	    1 << 30);
	while ((max == 0 || c->n < max) &&
	    (rc = input_next(in, &rr, &cause)) == 1) {
		record_reset(&r);
		buf_append(&r.raw, rr.data, rr.len);
		r.recno = c->n + c->bad + 1;
		if (record_parse(&r, format, "text", "id", &cause) != 0) {
			free(cause);
			c->bad++;
			continue;
		}
		if (c->n == c->size) {
			c->size = c->size ? 2 * c->size : 1024;
			c->raw = xreallocarray(c->raw, c->size,
			    sizeof *c->raw);
			c->texts = xreallocarray(c->texts, c->size,
			    sizeof *c->texts);
			c->ids = xreallocarray(c->ids, c->size,
			    sizeof *c->ids);
		}
		i = c->n++;
		memset(&c->raw[i], 0, sizeof c->raw[i]);
		memset(&c->texts[i], 0, sizeof c->texts[i]);
		memset(&c->ids[i], 0, sizeof c->ids[i]);
		buf_append(&c->raw[i], rr.data, rr.len);
		buf_append(&c->texts[i], r.text.data, r.text.len);
		record_idstr(&r, &c->ids[i]);
		c->rawbytes += rr.len + 1;
	}
	if (max != 0 && c->n >= max)
		rc = 0;
	if (rc < 0)
		fatalx("%s", cause);
	input_close(in);
	record_free(&r);
	if (c->n == 0)
		fatalx("no records in %s", file ? file : "the input");
	c->norm = xcalloc(c->n, sizeof *c->norm);
	c->bytes = xcalloc(c->n, sizeof *c->bytes);
	c->empty = xcalloc(c->n, sizeof *c->empty);
}

/* Append a stage's figures to the list. */
static void
add(struct stage *st, size_t *n, const char *name, double secs,
    size_t records, size_t bytes)
{
	st[*n].name = name;
	st[*n].secs = secs > 0 ? secs : 1e-9;
	st[*n].records = records;
	st[*n].bytes = bytes;
	(*n)++;
}

/* Keep the time since t0 in *best if it is the first or the least. */
static void
keep_best(double *best, double t0)
{
	double	 t = now_seconds() - t0;

	if (*best < 0 || t < *best)
		*best = t;
}

/*
 * Normalise the texts of LONG_TEXT bytes or more from their decoded text,
 * and with sign shingle and sign each one too, into sigs.
 */
static void
long_texts(const struct corpus *c, const struct shingler *sh, unsigned K,
    int sign, struct buf *norm, struct u64vec *h, uint32_t *sigs)
{
	size_t	 i;
	int	 bytes;

	for (i = 0; i < c->n; i++) {
		if (c->texts[i].len < LONG_TEXT)
			continue;
		norm->len = 0;
		bytes = normalize(c->texts[i].data, c->texts[i].len,
		    NORM_DEFAULT, norm);
		if (sign && shingle_hash(sh, norm->data, norm->len, bytes,
		    h) != 0)
			minhash_sign(h->v, h->n, K, 0, sigs + i * K);
	}
}

/* Print the stages as a table. */
static void
report(FILE *f, const struct stage *st, size_t n)
{
	size_t	 i;

	fprintf(f, "%-22s %12s %9s %9s\n", "stage", "records/s", "MB/s",
	    "seconds");
	for (i = 0; i < n; i++)
		fprintf(f, "%-22s %12.0f %9.1f %9.3f\n", st[i].name,
		    st[i].records / st[i].secs, st[i].bytes / st[i].secs / 1e6,
		    st[i].secs);
}

/* Write the stages as CSV. */
static void
write_csv(const char *path, const struct stage *st, size_t n)
{
	FILE	*f;
	size_t	 i;

	if ((f = fopen(path, "w")) == NULL)
		fatal("%s", path);
	fprintf(f, "stage,records,bytes,seconds,records_per_s,mb_per_s\n");
	for (i = 0; i < n; i++)
		fprintf(f, "%s,%zu,%zu,%.6f,%.0f,%.2f\n", st[i].name,
		    st[i].records, st[i].bytes, st[i].secs,
		    st[i].records / st[i].secs, st[i].bytes / st[i].secs / 1e6);
	if (ferror(f) | fclose(f))
		fatal("%s", path);
}

int
main(int argc, char **argv)
{
	struct corpus		 c = { 0 };
	struct shingler		 sh = { UNIT_CHAR, 5, 0 };
	struct index_params	 p;
	struct index_stats	 is;
	struct index		*ix;
	struct record		 r;
	struct u64vec		 h = { 0 }, found = { 0 };
	struct buf		 norm = { 0 };
	struct lsh_choice	 lc;
	struct ixdoc		*ixd = NULL;
	struct stage		 st[16];
	uint32_t		*sigs;
	uint64_t		*keys, u, cands = 0, regrown = 0, batches = 0;
	unsigned		 K = 128, b;
	double			 t, t0, thr = 0.8, best[8], tq, ti, tc, tb = 0;
	const char		*dir = NULL, *csv = NULL, *tmp;
	char			*cause, *scratch = NULL;
	size_t			 i, j, end, n = 0, docs = 0, docbytes = 0;
	size_t			 max = 0, batch = 4000, nlong = 0, longbytes = 0;
	int			 ch, format = FORMAT_JSONL, rounds = 3, round;
	int			 rc, do_index = 1, texts = 1;

	log_init("bench_stages");
	memset(&r, 0, sizeof r);
	while ((ch = getopt(argc, argv, "B:d:f:Ik:N:n:o:r:S:Tt:")) != -1) {
		cause = NULL;
		switch (ch) {
		case 'B':
			if (parse_uint(optarg, 1, 1000000, &u, &cause) == 0)
				batch = u;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "line") == 0)
				format = FORMAT_LINE;
			else if (strcmp(optarg, "tsv") == 0)
				format = FORMAT_TSV;
			else if (strcmp(optarg, "jsonl") == 0)
				format = FORMAT_JSONL;
			else
				usage();
			break;
		case 'I':
			do_index = 0;
			break;
		case 'k':
			if (parse_uint(optarg, 1, MHF_MAX_PERMS, &u,
			    &cause) == 0)
				K = u;
			break;
		case 'N':
			if (parse_uint(optarg, 0, SIZE_MAX, &u, &cause) == 0)
				max = u;
			break;
		case 'n':
			if (parse_uint(optarg, 1, MHF_MAX_SHINGLE, &u,
			    &cause) == 0)
				sh.n = u;
			break;
		case 'o':
			csv = optarg;
			break;
		case 'r':
			if (parse_uint(optarg, 1, 1000, &u, &cause) == 0)
				rounds = u;
			break;
		case 'S':
			if (strcmp(optarg, "none") == 0)
				simd_allow(SIMD_NONE);
			else if (strcmp(optarg, "avx2") == 0)
				simd_allow(SIMD_AVX2);
			else if (strcmp(optarg, "all") == 0)
				simd_allow(SIMD_ALL);
			else
				usage();
			break;
		case 'T':
			texts = 0;
			break;
		case 't':
			parse_double(optarg, 0.01, 1.0, &thr, &cause);
			break;
		default:
			usage();
		}
		if (cause != NULL)
			fatalx("-%c: %s", ch, cause);
	}
	argc -= optind;
	argv += optind;
	if (argc > 1)
		usage();

	load(argc == 1 ? argv[0] : NULL, format, max, &c);
	if (lsh_choose(K, thr, 0.01, 0.05, &lc) != 0)
		log_warnx("no bands for -t %g meet the bounds; using %u x %u",
		    thr, lc.b, lc.r);
	b = lc.b;
	sigs = xcalloc(c.n, K * sizeof *sigs);
	keys = xcalloc(c.n, b * sizeof *keys);
	for (i = 0; i < c.n; i++)
		c.textbytes += c.texts[i].len;
	printf("bench_stages: %zu records (%zu unparsable skipped), %.1f MB "
	    "as read, %.1f MB of text\n", c.n, c.bad, c.rawbytes / 1e6,
	    c.textbytes / 1e6);
	printf("K=%u, %u-grams, %u bands x %u rows (t=%g); pure stages: best "
	    "of %d rounds; hashing loops: %s\n", K, sh.n, b, lc.r, thr,
	    rounds, simd_avx512() ? "AVX-512" : simd_avx2() ? "AVX2" :
	    "portable");

	for (i = 0; i < c.n; i++) {
		if (c.texts[i].len >= LONG_TEXT) {
			nlong++;
			longbytes += c.texts[i].len;
		}
	}
	for (j = 0; j < 8; j++)
		best[j] = -1;
	for (round = 0; round < rounds; round++) {
		/* Parse: what mhfilter does with a record it has read. */
		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			record_reset(&r);
			buf_append(&r.raw, c.raw[i].data, c.raw[i].len);
			if (record_parse(&r, format, "text", "id",
			    &cause) != 0)
				fatalx("record %zu: %s", i + 1, cause);
		}
		keep_best(&best[0], t0);

		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			c.norm[i].len = 0;
			c.bytes[i] = normalize(c.texts[i].data, c.texts[i].len,
			    NORM_DEFAULT, &c.norm[i]);
		}
		keep_best(&best[1], t0);

		t0 = now_seconds();
		for (i = 0; i < c.n; i++)
			c.empty[i] = shingle_hash(&sh, c.norm[i].data,
			    c.norm[i].len, c.bytes[i], &h) == 0;
		keep_best(&best[2], t0);

		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			if (shingle_hash(&sh, c.norm[i].data, c.norm[i].len,
			    c.bytes[i], &h) != 0)
				minhash_sign(h.v, h.n, K, 0, sigs + i * K);
		}
		keep_best(&best[3], t0);

		/* The same on the longer texts alone. */
		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			if (c.texts[i].len >= LONG_TEXT &&
			    shingle_hash(&sh, c.norm[i].data, c.norm[i].len,
			    c.bytes[i], &h) != 0)
				minhash_sign(h.v, h.n, K, 0, sigs + i * K);
		}
		keep_best(&best[5], t0);

		t0 = now_seconds();
		long_texts(&c, &sh, K, 0, &norm, &h, sigs);
		keep_best(&best[6], t0);

		/* All three, record by record, as a worker thread does. */
		t0 = now_seconds();
		long_texts(&c, &sh, K, 1, &norm, &h, sigs);
		keep_best(&best[7], t0);

		t0 = now_seconds();
		for (i = 0; i < c.n; i++)
			lsh_keys(sigs + i * K, b, lc.r, 0, keys + i * b);
		keep_best(&best[4], t0);
	}
	for (i = 0; i < c.n; i++) {
		if (!c.empty[i]) {
			docs++;
			docbytes += c.texts[i].len;
		}
	}
	add(st, &n, "parse", best[0], c.n, c.textbytes);
	add(st, &n, "normalise", best[1], c.n, c.textbytes);
	add(st, &n, "parse+normalise", best[0] + best[1], c.n, c.textbytes);
	add(st, &n, "shingle", best[2], c.n, c.textbytes);
	add(st, &n, "shingle+sign", best[3], c.n, c.textbytes);
	if (nlong > 0) {
		add(st, &n, "normalise >= 1 KB", best[6], nlong, longbytes);
		add(st, &n, "shingle+sign >= 1 KB", best[5], nlong, longbytes);
		add(st, &n, "signature >= 1 KB", best[7], nlong, longbytes);
	}
	add(st, &n, "band keys", best[4], c.n, c.textbytes);
	add(st, &n, "pure stages", best[0] + best[1] + best[3] + best[4], c.n,
	    c.textbytes);

	if (do_index) {
		if (dir == NULL) {
			if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
				tmp = "/tmp";
			xasprintf(&scratch, "%s/bench_stages.XXXXXX", tmp);
			if (mkdtemp(scratch) == NULL)
				fatal("mkdtemp %s", scratch);
			dir = scratch;
		}
		memset(&p, 0, sizeof p);
		p.perms = K;
		p.bands = b;
		p.rows = lc.r;
		p.shingle = sh.n;
		p.unit = sh.unit;
		p.norm = NORM_DEFAULT;
		p.texts = texts;
		p.verify = texts ? VERIFY_EXACT : VERIFY_SIGNATURE;
		p.threshold = thr;
		if ((rc = index_open(&ix, dir, 0, &p, IP_PERMS | IP_BANDS |
		    IP_ROWS | IP_SHINGLE | IP_UNIT | IP_NORM | IP_SEED |
		    IP_VERIFY | IP_THRESHOLD, &cause)) != 0)
			fatalx("%s", cause);

		ixd = xcalloc(batch, sizeof *ixd);
		tq = ti = tc = 0;
		for (i = 0; i < c.n; i = end) {
			end = i + batch < c.n ? i + batch : c.n;
			t0 = now_seconds();
			if ((rc = index_begin(ix, &cause)) != 0)
				goto fail;
			tb = now_seconds() - t0;
			/* As mhfilter: the batch's keys first, then lookups. */
			for (j = i; j < end; j++) {
				memset(&ixd[j - i], 0, sizeof *ixd);
				ixd[j - i].keys = keys + j * b;
				ixd[j - i].pending = !c.empty[j];
			}
			t0 = now_seconds();
			rc = index_prepare(ix, ixd, end - i, &cause);
			tq += now_seconds() - t0;
			if (rc != 0)
				goto fail;
			for (j = i; j < end; j++) {
				if (c.empty[j])
					continue;
				found.n = 0;
				t0 = now_seconds();
				rc = index_candidates(ix, j - i, keys + j * b, &found,
				    &cause);
				t = now_seconds();
				tq += t - t0;
				if (rc != 0)
					goto fail;
				cands += found.n;
				rc = index_insert(ix, keys + j * b,
				    sigs + j * K, c.ids[j].data, c.ids[j].len,
				    c.norm[j].data, c.norm[j].len, DOC_UNIQUE |
				    (c.bytes[j] ? DOC_BYTES : 0), 0, &cause);
				ti += now_seconds() - t;
				if (rc != 0)
					goto fail;
			}
			t0 = now_seconds();
			rc = index_commit(ix, &cause);
			tc += tb + now_seconds() - t0;
			batches++;
fail:
			if (rc == INDEX_AGAIN) {
				/* Map full: grown by index_abort; redo. */
				index_abort(ix);
				regrown++;
				end = i;
				continue;
			}
			if (rc != 0)
				fatalx("%s", cause);
		}
		free(ixd);
		add(st, &n, "index query", tq, docs, docbytes);
		add(st, &n, "index insert", ti, docs, docbytes);
		add(st, &n, "index begin+commit", tc, docs, docbytes);
		add(st, &n, "index query+insert", tq + ti + tc, docs,
		    docbytes);
	}

	report(stdout, st, n);
	if (do_index) {
		if (index_stats(ix, &is, &cause) != 0)
			fatalx("%s", cause);
		printf("index: %" PRIu64 " documents, %" PRIu64 " band entries,"
		    " %.1f MB (%.0f bytes/document%s); %.2f candidates per "
		    "record; %" PRIu64 " batches of up to %zu, %" PRIu64
		    " map regrowths\n", is.docs, is.band_entries,
		    is.size / 1e6, is.docs ? (double)is.size / is.docs : 0.0,
		    texts ? ", texts kept" : ", no texts",
		    docs ? (double)cands / docs : 0.0, batches, batch, regrown);
		index_close(ix);
		if (scratch != NULL && lmdb_remove_dir(scratch) != 0)
			log_warn("rmdir %s", scratch);
	}
	if (csv != NULL)
		write_csv(csv, st, n);
	return (0);
}
