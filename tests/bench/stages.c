/*
 * bench_stages: time each pure stage of mhfilter on a corpus held in
 * memory, so that I/O and the index do not blur the figures.
 *
 *	bench_stages [-f line|jsonl] [-k K] [-n N] [-r rounds] [file]
 *
 * Prints records/s and MB/s (10^6 bytes of input text) for: normalise;
 * shingle + sign (the signature stage); band keys; and all three together.
 * It reports; it asserts nothing.
 */

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhfilter.h"

struct corpus {
	struct buf	*texts;
	size_t		 n;
	size_t		 bytes;
};

/* Read every record's text into memory. */
static void
load(const char *file, int format, struct corpus *c)
{
	char		*files[1], *cause;
	struct input	*in;
	struct rawrec	 rr;
	struct record	 r;
	size_t		 size = 0;
	int		 rc;

	memset(&r, 0, sizeof r);
	files[0] = (char *)file;
	in = input_open(files, file != NULL, '\n', 1 << 30);
	while ((rc = input_next(in, &rr, &cause)) == 1) {
		record_reset(&r);
		buf_append(&r.raw, rr.data, rr.len);
		if (record_parse(&r, format, "text", "id", &cause) != 0) {
			free(cause);
			continue;
		}
		if (c->n == size) {
			size = size ? 2 * size : 1024;
			c->texts = xreallocarray(c->texts, size,
			    sizeof *c->texts);
		}
		memset(&c->texts[c->n], 0, sizeof c->texts[c->n]);
		buf_append(&c->texts[c->n], r.text.data, r.text.len);
		c->bytes += r.text.len;
		c->n++;
	}
	if (rc < 0)
		fatalx("%s", cause);
	input_close(in);
	record_free(&r);
}

/* Print one stage's figures. */
static void
report(const char *stage, const struct corpus *c, int rounds, double secs)
{
	printf("%-22s %10.0f records/s %9.1f MB/s\n", stage,
	    c->n * rounds / secs, c->bytes * rounds / secs / 1e6);
}

int
main(int argc, char **argv)
{
	struct corpus	 c = { 0 };
	struct shingler	 sh = { UNIT_CHAR, 5, 0 };
	struct buf	*norm;
	struct u64vec	 h = { 0 };
	uint32_t	*sig;
	uint64_t	*keys;
	unsigned	 K = 128, b, r;
	struct lsh_choice lc;
	double		 t0, tn = 0, ts = 0, tk = 0;
	int		 ch, format = FORMAT_JSONL, rounds = 3, round, *bytes;
	size_t		 i;

	while ((ch = getopt(argc, argv, "f:k:n:r:")) != -1) {
		switch (ch) {
		case 'f':
			format = strcmp(optarg, "line") == 0 ? FORMAT_LINE :
			    FORMAT_JSONL;
			break;
		case 'k':
			K = atoi(optarg);
			break;
		case 'n':
			sh.n = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: bench_stages [-f line|jsonl] "
			    "[-k K] [-n N] [-r rounds] [file]\n");
			return (2);
		}
	}
	if (K < 1 || K > MHF_MAX_PERMS || sh.n < 1 || sh.n > MHF_MAX_SHINGLE ||
	    rounds < 1) {
		fprintf(stderr, "bench_stages: bad -k, -n or -r\n");
		return (2);
	}
	load(optind < argc ? argv[optind] : NULL, format, &c);
	lsh_choose(K, 0.8, 0.01, 0.05, &lc);
	b = lc.b;
	r = lc.r;
	norm = xcalloc(c.n, sizeof *norm);
	bytes = xcalloc(c.n, sizeof *bytes);
	sig = xcalloc(K, sizeof *sig);
	keys = xcalloc(b, sizeof *keys);
	printf("%zu records, %.1f MB of text, K=%u, %u-grams, %u bands x %u "
	    "rows, %d rounds\n", c.n, c.bytes / 1e6, K, sh.n, b, r, rounds);

	for (round = 0; round < rounds; round++) {
		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			norm[i].len = 0;
			bytes[i] = normalize(c.texts[i].data, c.texts[i].len,
			    NORM_DEFAULT, &norm[i]);
		}
		tn += now_seconds() - t0;
		t0 = now_seconds();
		for (i = 0; i < c.n; i++) {
			shingle_hash(&sh, norm[i].data, norm[i].len, bytes[i],
			    &h);
			minhash_sign(h.v, h.n, K, 0, sig);
		}
		ts += now_seconds() - t0;
		t0 = now_seconds();
		for (i = 0; i < c.n; i++)
			lsh_keys(sig, b, r, 0, keys);
		tk += now_seconds() - t0;
	}
	report("normalise", &c, rounds, tn);
	report("shingle+sign", &c, rounds, ts);
	report("band keys", &c, rounds, tk);
	report("all pure stages", &c, rounds, tn + ts + tk);
	return (0);
}
