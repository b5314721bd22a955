/*
 * Unit tests for bandrun.c: the byte layout of runs (little-endian, 16
 * bytes an entry), run_find against a linear scan on hand-made and seeded
 * random runs of many sizes and key distributions, run_merge against
 * sort + filter + dedupe of the union, and the memtable (add, find, commit,
 * rollback, sorted, drop, clear) against a simple model, by hand and by a
 * seeded random sequence of operations.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mhfilter.h"

#define OFF_BITS	(64 - BAND_CHUNK_BITS)	/* key bits within a chunk */
#define OFF_MASK	((UINT64_C(1) << OFF_BITS) - 1)
#define SUB_BITS	4			/* memtable sub-buckets */
#define LOW_MASK	((UINT64_C(1) << (OFF_BITS - SUB_BITS)) - 1)
#define LAST_CHUNK	(BAND_CHUNKS - 1)
#define SENTINEL	UINT64_C(0x5e5e5e5e5e5e5e5e)
#define GUARD		0xa5

/* splitmix64: a fixed-seed generator, so every run draws the same data. */
static uint64_t
splitmix64(uint64_t *s)
{
	uint64_t	 z;

	z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

/* A key in chunk c at offset off within it. */
static uint64_t
ckey(unsigned c, uint64_t off)
{
	return (((uint64_t)c << OFF_BITS) | (off & OFF_MASK));
}

/* A key in chunk c, memtable sub-bucket sub, with these low bits. */
static uint64_t
skey(unsigned c, unsigned sub, uint64_t low)
{
	return (ckey(c, ((uint64_t)sub << (OFF_BITS - SUB_BITS)) |
	    (low & LOW_MASK)));
}

/* The test's own little-endian encoder, independent of put_le64. */
static void
enc_le64(unsigned char *p, uint64_t v)
{
	int	 i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The test's own decoder. */
static uint64_t
dec_le64(const unsigned char *p)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return (v);
}

/* The test's own order: key, then document number. */
static int
cmp_entry(const void *a, const void *b)
{
	const struct bentry	*x = a, *y = b;

	if (x->key != y->key)
		return (x->key < y->key ? -1 : 1);
	if (x->docid != y->docid)
		return (x->docid < y->docid ? -1 : 1);
	return (0);
}

/* Encode n entries as a run in a buffer of exactly that size. */
static unsigned char *
encode_run(const struct bentry *v, size_t n)
{
	unsigned char	*run;
	size_t		 i;

	run = xmalloc(n ? n * BENTRY_SIZE : 1);
	for (i = 0; i < n; i++) {
		enc_le64(run + i * BENTRY_SIZE, v[i].key);
		enc_le64(run + i * BENTRY_SIZE + 8, v[i].docid);
	}
	return (run);
}

/* ------------------------------------------------------------------------ */
/* Byte layout. */

/* put_le64 writes little-endian at any alignment; get_le64 reads it back. */
static void
test_le64(void **state)
{
	static const unsigned char want[8] = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01
	};
	unsigned char	 b[24];
	uint64_t	 v, s = 11;
	size_t		 i, off;

	for (off = 0; off < 8; off++) {
		memset(b, GUARD, sizeof b);
		put_le64(b + off, UINT64_C(0x0102030405060708));
		assert_memory_equal(b + off, want, 8);
		for (i = 0; i < sizeof b; i++) {
			if (i < off || i >= off + 8)
				assert_int_equal(b[i], GUARD);
		}
		assert_true(get_le64(b + off) == UINT64_C(0x0102030405060708));
	}

	put_le64(b, 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(b[i], 0);
	put_le64(b, UINT64_MAX);
	for (i = 0; i < 8; i++)
		assert_int_equal(b[i], 0xff);
	assert_true(get_le64(b) == UINT64_MAX);
	put_le64(b, 1);
	assert_int_equal(b[0], 1);
	assert_int_equal(b[7], 0);
	put_le64(b, UINT64_C(1) << 63);
	assert_int_equal(b[0], 0);
	assert_int_equal(b[7], 0x80);

	for (i = 0; i < 10000; i++) {
		v = splitmix64(&s);
		off = i % 9;
		put_le64(b + off, v);
		assert_true(dec_le64(b + off) == v);
		enc_le64(b + off + 1, v);
		assert_true(get_le64(b + off + 1) == v);
	}
}

/* run_put writes entry i at 16 * i: key then document number, LE. */
static void
test_run_layout(void **state)
{
	static const unsigned char want[16] = {
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
		0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21
	};
	struct bentry	 e = { UINT64_C(0x1112131415161718),
			       UINT64_C(0x2122232425262728) }, g;
	struct bentry	 v[50];
	unsigned char	 run[5 * BENTRY_SIZE], big[50 * BENTRY_SIZE];
	uint64_t	 s = 12;
	size_t		 i, j;

	assert_int_equal(BENTRY_SIZE, 16);
	for (i = 0; i < 5; i++) {
		memset(run, GUARD, sizeof run);
		run_put(run, i, &e);
		assert_memory_equal(run + i * BENTRY_SIZE, want, 16);
		for (j = 0; j < sizeof run; j++) {
			if (j < i * BENTRY_SIZE || j >= (i + 1) * BENTRY_SIZE)
				assert_int_equal(run[j], GUARD);
		}
		run_get(run, i, &g);
		assert_true(g.key == e.key);
		assert_true(g.docid == e.docid);
	}

	for (i = 0; i < 50; i++) {
		v[i].key = splitmix64(&s);
		v[i].docid = splitmix64(&s);
		run_put(big, i, &v[i]);
	}
	for (i = 0; i < 50; i++) {
		assert_true(dec_le64(big + i * 16) == v[i].key);
		assert_true(dec_le64(big + i * 16 + 8) == v[i].docid);
		run_get(big, i, &g);
		assert_true(g.key == v[i].key);
		assert_true(g.docid == v[i].docid);
	}
}

/* bentry_cmp orders by key then document number, without overflow. */
static void
test_bentry_cmp(void **state)
{
	static const struct bentry ordered[] = {
		{ 0, 0 }, { 0, 1 }, { 0, UINT64_MAX - 1 }, { 0, UINT64_MAX },
		{ 1, 0 }, { UINT64_C(1) << 63, 0 },
		{ (UINT64_C(1) << 63) + 1, UINT64_C(1) << 63 },
		{ UINT64_MAX, 0 }, { UINT64_MAX, UINT64_C(1) << 63 },
		{ UINT64_MAX, UINT64_MAX },
	};
	size_t		 n = sizeof ordered / sizeof ordered[0], i, j;
	struct bentry	 v[2000];
	uint64_t	 s = 13;
	int		 c;

	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++) {
			c = bentry_cmp(&ordered[i], &ordered[j]);
			if (i < j)
				assert_true(c < 0);
			else if (i > j)
				assert_true(c > 0);
			else
				assert_int_equal(c, 0);
		}
	}

	/* qsort with it agrees with the test's own order. */
	for (i = 0; i < 2000; i++) {
		v[i].key = splitmix64(&s) % 7;
		if (i % 3 == 0)
			v[i].key = splitmix64(&s);
		v[i].docid = splitmix64(&s) >> (i % 64);
	}
	qsort(v, 2000, sizeof v[0], bentry_cmp);
	for (i = 1; i < 2000; i++)
		assert_true(cmp_entry(&v[i - 1], &v[i]) <= 0);
}

/* ------------------------------------------------------------------------ */
/* run_find. */

static struct u64vec	 want_ids;
static struct u64vec	 got_ids;
static uint64_t		 finds_checked;

/*
 * Check run_find on the n-entry run (encoded from the sorted v) for key,
 * with several limits, against a linear scan of v.  The output vector is
 * appended to: two values already in it must stay.
 */
static void
check_find(const unsigned char *run, const struct bentry *v, size_t n,
    uint64_t key)
{
	size_t	 maxes[8], nmax = 0, cnt, got, want, i, m;

	want_ids.n = 0;
	for (i = 0; i < n; i++) {
		if (v[i].key == key)
			u64vec_push(&want_ids, v[i].docid);
	}
	cnt = want_ids.n;

	maxes[nmax++] = SIZE_MAX;
	maxes[nmax++] = 0;
	maxes[nmax++] = 1;
	maxes[nmax++] = 2;
	maxes[nmax++] = cnt;
	maxes[nmax++] = cnt + 1;
	if (cnt > 0)
		maxes[nmax++] = cnt - 1;
	if (cnt > 2)
		maxes[nmax++] = cnt / 2;

	for (m = 0; m < nmax; m++) {
		got_ids.n = 0;
		u64vec_push(&got_ids, SENTINEL);
		u64vec_push(&got_ids, ~SENTINEL);
		got = run_find(run, n, key, &got_ids, maxes[m]);
		want = cnt < maxes[m] ? cnt : maxes[m];
		if (got != want || got_ids.n != 2 + want ||
		    got_ids.v[0] != SENTINEL || got_ids.v[1] != ~SENTINEL ||
		    (want > 0 && memcmp(got_ids.v + 2, want_ids.v,
		    want * sizeof *want_ids.v) != 0)) {
			print_error("run_find(n=%zu, key=%#llx, max=%zu): "
			    "returned %zu, appended %zu, expected %zu\n", n,
			    (unsigned long long)key, maxes[m], got,
			    got_ids.n - 2, want);
			for (i = 0; i < want && i + 2 < got_ids.n; i++) {
				if (got_ids.v[i + 2] != want_ids.v[i]) {
					print_error("  first difference at "
					    "%zu: %#llx, expected %#llx\n", i,
					    (unsigned long long)
					    got_ids.v[i + 2],
					    (unsigned long long)
					    want_ids.v[i]);
					break;
				}
			}
			fail();
		}
		finds_checked++;
	}
}

/*
 * Check a run with every key in it, its neighbours, the chunk's extremes,
 * the keys just outside the run, random keys in the chunk and keys of
 * other chunks.
 */
static void
check_run(const struct bentry *v, size_t n, unsigned c, uint64_t *s)
{
	unsigned char	*run;
	size_t		 i;

	run = encode_run(v, n);
	for (i = 0; i < n; i++) {
		if (i > 0 && v[i].key == v[i - 1].key)
			continue;
		check_find(run, v, n, v[i].key);
		check_find(run, v, n, v[i].key - 1);
		check_find(run, v, n, v[i].key + 1);
	}
	if (n > 0) {
		check_find(run, v, n, v[0].key - 2);
		check_find(run, v, n, v[n - 1].key + 2);
		/* Halfway between neighbours. */
		for (i = 1; i < n; i += 1 + n / 64) {
			check_find(run, v, n, v[i - 1].key +
			    (v[i].key - v[i - 1].key) / 2);
		}
	}
	check_find(run, v, n, ckey(c, 0));
	check_find(run, v, n, ckey(c, 1));
	check_find(run, v, n, ckey(c, OFF_MASK - 1));
	check_find(run, v, n, ckey(c, OFF_MASK));
	check_find(run, v, n, ckey(c, OFF_MASK / 2));
	for (i = 0; i < 64; i++)
		check_find(run, v, n, ckey(c, splitmix64(s)));
	/* Other chunks: found nowhere. */
	check_find(run, v, n, 0);
	check_find(run, v, n, UINT64_MAX);
	if (c > 0) {
		check_find(run, v, n, ckey(c - 1, OFF_MASK));
		check_find(run, v, n, ckey(c - 1, 0));
	}
	if (c < LAST_CHUNK) {
		check_find(run, v, n, ckey(c + 1, 0));
		check_find(run, v, n, ckey(c + 1, OFF_MASK));
	}
	free(run);
}

/* Hand-made runs: empty, one entry, two, equal keys, the chunk's ends. */
static void
test_find_edges(void **state)
{
	struct bentry	 v[40];
	unsigned char	*run;
	uint64_t	 s = 21;
	size_t		 i, n;
	unsigned	 c;

	memset(v, 0, sizeof v);

	/* An empty run, even with a NULL pointer. */
	got_ids.n = 0;
	assert_int_equal(run_find(NULL, 0, 0, &got_ids, SIZE_MAX), 0);
	assert_int_equal(run_find(NULL, 0, UINT64_MAX, &got_ids, SIZE_MAX), 0);
	assert_int_equal(got_ids.n, 0);
	check_run(v, 0, 7, &s);

	/* One entry. */
	v[0].key = ckey(7, 1000);
	v[0].docid = 42;
	check_run(v, 1, 7, &s);
	run = encode_run(v, 1);
	got_ids.n = 0;
	assert_int_equal(run_find(run, 1, ckey(7, 1000), &got_ids, 5), 1);
	assert_int_equal(got_ids.n, 1);
	assert_true(got_ids.v[0] == 42);
	free(run);

	/* Two entries, equal and different keys. */
	v[0].key = v[1].key = ckey(7, 5);
	v[0].docid = 1;
	v[1].docid = 9;
	check_run(v, 2, 7, &s);
	v[1].key = ckey(7, 6);
	check_run(v, 2, 7, &s);

	/* The first and last chunks' extreme keys, in runs of 1..40. */
	for (c = 0; c < BAND_CHUNKS; c += LAST_CHUNK) {
		for (n = 1; n <= 40; n++) {
			for (i = 0; i < n; i++) {
				if (i < n / 2)
					v[i].key = ckey(c, i / 3);
				else
					v[i].key = ckey(c, OFF_MASK -
					    (n - 1 - i) / 3);
				v[i].docid = i;
			}
			check_run(v, n, c, &s);
		}
	}

	/* One key for the whole run, in runs of 1..40. */
	for (n = 1; n <= 40; n++) {
		for (i = 0; i < n; i++) {
			v[i].key = ckey(3, OFF_MASK / 3);
			v[i].docid = 100 + i;
		}
		check_run(v, n, 3, &s);
	}

	/* Every entry a different key, one apart, at the chunk's start. */
	for (n = 1; n <= 40; n++) {
		for (i = 0; i < n; i++) {
			v[i].key = ckey(LAST_CHUNK, i);
			v[i].docid = UINT64_MAX - i;
		}
		check_run(v, n, LAST_CHUNK, &s);
	}
}

#define D_UNIFORM	0	/* uniform in the chunk */
#define D_CLUSTER	1	/* a few narrow clusters */
#define D_SKEWLOW	2	/* crowded towards the chunk's start */
#define D_SKEWHIGH	3	/* crowded towards the chunk's end */
#define D_FEWKEYS	4	/* three keys: long runs of equal keys */
#define D_EXTREMES	5	/* the chunk's ends, some random */
#define D_DENSE		6	/* a narrow range: adjacent and equal keys */
#define D_DENSEHIGH	7	/* the same at the chunk's end */
#define D_ONEKEY	8	/* one key for every entry */
#define D_HALVES	9	/* half at the start, half at the end */
#define D_COUNT		10

static const char *const dist_names[D_COUNT] = {
	"uniform", "cluster", "skew-low", "skew-high", "few-keys",
	"extremes", "dense", "dense-high", "one-key", "halves"
};

/* Fill v with n sorted entries of chunk c drawn from distribution d. */
static void
random_run(struct bentry *v, size_t n, unsigned c, int d, uint64_t *s)
{
	uint64_t	 centre[3], r, off;
	size_t		 i;

	for (i = 0; i < 3; i++) {
		centre[i] = splitmix64(s) & OFF_MASK;
		if (centre[i] > OFF_MASK - 1000)
			centre[i] = OFF_MASK - 1000;
	}
	for (i = 0; i < n; i++) {
		r = splitmix64(s);
		switch (d) {
		case D_UNIFORM:
			off = r;
			break;
		case D_CLUSTER:
			off = centre[r % 3] + (r >> 32) % 200;
			break;
		case D_SKEWLOW:
			off = (r & OFF_MASK) >> (splitmix64(s) % 48);
			break;
		case D_SKEWHIGH:
			off = OFF_MASK - ((r & OFF_MASK) >>
			    (splitmix64(s) % 48));
			break;
		case D_FEWKEYS:
			off = centre[r % 3];
			break;
		case D_EXTREMES:
			switch (r % 5) {
			case 0:
				off = 0;
				break;
			case 1:
				off = OFF_MASK;
				break;
			case 2:
				off = 1;
				break;
			case 3:
				off = OFF_MASK - 1;
				break;
			default:
				off = r >> 3;
				break;
			}
			break;
		case D_DENSE:
			off = (r >> 8) % (n / 2 + 1);
			break;
		case D_DENSEHIGH:
			off = OFF_MASK - (r >> 8) % (n / 2 + 1);
			break;
		case D_ONEKEY:
			off = centre[0];
			break;
		default:
			off = (r & 1) ? (r >> 8) % 1000 :
			    OFF_MASK - (r >> 8) % 1000;
			break;
		}
		v[i].key = ckey(c, off);
		/* Sometimes few document numbers, so that entries repeat. */
		v[i].docid = (d % 2) ? splitmix64(s) : splitmix64(s) % 4;
	}
	qsort(v, n, sizeof *v, cmp_entry);
}

/* Seeded random runs of many sizes and distributions, against a scan. */
static void
test_find_random(void **state)
{
	static const size_t sizes[] = {
		0, 1, 2, 3, 8, 15, 16, 17, 18, 24, 31, 32, 33, 100, 257, 1000,
		5000
	};
	struct bentry	*v;
	uint64_t	 s = 22;
	size_t		 si, n;
	unsigned	 c, rep, reps;
	int		 d;

	v = xcalloc(5000, sizeof *v);
	finds_checked = 0;
	for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		n = sizes[si];
		reps = n <= 100 ? 8 : (n <= 1000 ? 2 : 1);
		for (d = 0; d < D_COUNT; d++) {
			for (rep = 0; rep < reps; rep++) {
				switch (rep % 4) {
				case 0:
					c = (unsigned)(splitmix64(&s) %
					    BAND_CHUNKS);
					break;
				case 1:
					c = 0;
					break;
				case 2:
					c = LAST_CHUNK;
					break;
				default:
					c = 1;
					break;
				}
				random_run(v, n, c, d, &s);
				check_run(v, n, c, &s);
			}
		}
	}
	print_message("# %llu run_find calls checked (%s ... %s)\n",
	    (unsigned long long)finds_checked, dist_names[0],
	    dist_names[D_COUNT - 1]);
	free(v);
}

/*
 * Runs whose keys span many chunks.  The chunked run never holds one, but
 * run_find only guesses from the key's place in its chunk and must still
 * be exact.
 */
static void
test_find_any_keys(void **state)
{
	struct bentry	*v;
	uint64_t	 s = 23;
	size_t		 i, n;

	v = xcalloc(3000, sizeof *v);
	for (n = 17; n <= 3000; n = n * 3 + 1) {
		for (i = 0; i < n; i++) {
			v[i].key = splitmix64(&s);
			if (i % 4 == 0)
				v[i].key >>= splitmix64(&s) % 64;
			v[i].docid = i;
		}
		qsort(v, n, sizeof *v, cmp_entry);
		check_run(v, n, (unsigned)(splitmix64(&s) % BAND_CHUNKS), &s);
	}
	free(v);
}

/* ------------------------------------------------------------------------ */
/* run_merge. */

/*
 * Check run_merge of the sorted old (nold) and add (nadd) with live against
 * sort + filter + dedupe of their union; out has one guard entry beyond
 * the room run_merge is promised.
 */
static void
check_merge(const struct bentry *old, size_t nold, const struct bentry *add,
    size_t nadd, uint64_t live)
{
	struct bentry	*all, e;
	unsigned char	*oldrun, *out;
	size_t		 i, n, want, room = nold + nadd;

	all = xcalloc(room + 1, sizeof *all);
	if (nold > 0)
		memcpy(all, old, nold * sizeof *all);
	if (nadd > 0)
		memcpy(all + nold, add, nadd * sizeof *all);
	qsort(all, room, sizeof *all, cmp_entry);
	for (i = 0, want = 0; i < room; i++) {
		if (all[i].docid < live)
			continue;
		if (want > 0 && cmp_entry(&all[want - 1], &all[i]) == 0)
			continue;
		all[want++] = all[i];
	}

	oldrun = encode_run(old, nold);
	out = xmalloc((room + 1) * BENTRY_SIZE);
	memset(out, GUARD, (room + 1) * BENTRY_SIZE);
	n = run_merge(nold ? oldrun : NULL, nold, nadd ? add : NULL, nadd,
	    live, out);
	if (n != want) {
		print_error("run_merge(nold=%zu, nadd=%zu, live=%llu): %zu "
		    "entries, expected %zu\n", nold, nadd,
		    (unsigned long long)live, n, want);
		fail();
	}
	for (i = 0; i < n; i++) {
		e.key = dec_le64(out + i * BENTRY_SIZE);
		e.docid = dec_le64(out + i * BENTRY_SIZE + 8);
		if (cmp_entry(&e, &all[i]) != 0) {
			print_error("run_merge(nold=%zu, nadd=%zu, live=%llu): "
			    "entry %zu is (%#llx, %llu), expected (%#llx, "
			    "%llu)\n", nold, nadd, (unsigned long long)live,
			    i, (unsigned long long)e.key,
			    (unsigned long long)e.docid,
			    (unsigned long long)all[i].key,
			    (unsigned long long)all[i].docid);
			fail();
		}
	}
	for (i = room * BENTRY_SIZE; i < (room + 1) * BENTRY_SIZE; i++)
		assert_int_equal(out[i], GUARD);
	free(out);
	free(oldrun);
	free(all);
}

/* Hand-made merges: empty inputs, repeats, removed documents. */
static void
test_merge_edges(void **state)
{
	static const struct bentry a[] = {
		{ 1, 1 }, { 1, 2 }, { 2, 1 }, { 5, 0 }, { 5, 7 },
		{ UINT64_MAX, UINT64_MAX }
	};
	static const struct bentry b[] = {
		{ 0, 9 }, { 1, 2 }, { 1, 3 }, { 5, 7 }, { 6, 0 },
		{ UINT64_MAX, UINT64_MAX }
	};
	static const struct bentry rep[] = {
		{ 4, 4 }, { 4, 4 }, { 4, 4 }, { 4, 5 }, { 4, 5 }
	};
	static const struct bentry zero[] = { { 0, 0 }, { 0, 0 } };
	unsigned char	 out[16 * BENTRY_SIZE];
	size_t		 na = sizeof a / sizeof a[0], nb = sizeof b / sizeof b[0];
	size_t		 nr = sizeof rep / sizeof rep[0];
	struct bentry	 e;

	/* Both empty: nothing written. */
	memset(out, GUARD, sizeof out);
	assert_int_equal(run_merge(NULL, 0, NULL, 0, 0, out), 0);
	assert_int_equal(out[0], GUARD);
	check_merge(NULL, 0, NULL, 0, 0);
	check_merge(NULL, 0, NULL, 0, UINT64_MAX);

	/* One side empty. */
	check_merge(a, na, NULL, 0, 0);
	check_merge(NULL, 0, a, na, 0);
	check_merge(a, na, NULL, 0, 2);
	check_merge(NULL, 0, b, nb, 7);

	/* Both, with entries in common. */
	check_merge(a, na, b, nb, 0);
	check_merge(b, nb, a, na, 0);
	check_merge(a, na, b, nb, 1);
	check_merge(a, na, b, nb, 3);
	check_merge(a, na, b, nb, UINT64_MAX);
	check_merge(a, na, a, na, 0);

	/* Exact repeats within and across the inputs. */
	check_merge(rep, nr, NULL, 0, 0);
	check_merge(NULL, 0, rep, nr, 0);
	check_merge(rep, nr, rep, nr, 0);
	check_merge(rep, nr, rep, nr, 5);
	check_merge(zero, 2, zero, 2, 0);

	/* The same, spelled out. */
	assert_int_equal(run_merge(NULL, 0, rep, nr, 0, out), 2);
	run_get(out, 0, &e);
	assert_true(e.key == 4 && e.docid == 4);
	run_get(out, 1, &e);
	assert_true(e.key == 4 && e.docid == 5);
	/* (0, 0) is an entry like any other, kept when live is 0. */
	assert_int_equal(run_merge(NULL, 0, zero, 2, 0, out), 1);
	run_get(out, 0, &e);
	assert_true(e.key == 0 && e.docid == 0);
	assert_int_equal(run_merge(NULL, 0, zero, 2, 1, out), 0);
	/* live keeps its own document number. */
	assert_int_equal(run_merge(NULL, 0, a, na, 7, out), 2);
	run_get(out, 0, &e);
	assert_true(e.key == 5 && e.docid == 7);
	run_get(out, 1, &e);
	assert_true(e.key == UINT64_MAX && e.docid == UINT64_MAX);
}

/* Fill v with n sorted random entries, from a narrow range if narrow. */
static void
random_entries(struct bentry *v, size_t n, int narrow, unsigned c,
    uint64_t *s)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (narrow) {
			v[i].key = ckey(c, splitmix64(s) % 6);
			v[i].docid = splitmix64(s) % 8;
		} else {
			v[i].key = ckey(c, splitmix64(s));
			v[i].docid = splitmix64(s) % 100000;
		}
	}
	qsort(v, n, sizeof *v, cmp_entry);
}

/* Seeded random merges, with and without many repeats. */
static void
test_merge_random(void **state)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 17, 100, 1000 };
	size_t		 ns = sizeof sizes / sizeof sizes[0], i, j;
	struct bentry	*old, *add;
	uint64_t	 s = 31, lives[5];
	unsigned	 c;
	int		 narrow, k;

	old = xcalloc(1000, sizeof *old);
	add = xcalloc(1000, sizeof *add);
	for (i = 0; i < ns; i++) {
		for (j = 0; j < ns; j++) {
			for (narrow = 0; narrow < 2; narrow++) {
				c = (unsigned)(splitmix64(&s) % BAND_CHUNKS);
				random_entries(old, sizes[i], narrow, c, &s);
				random_entries(add, sizes[j], narrow, c, &s);
				lives[0] = 0;
				lives[1] = 1;
				lives[2] = narrow ? 4 : 50000;
				lives[3] = sizes[i] ? old[sizes[i] / 2].docid :
				    3;
				lives[4] = UINT64_MAX;
				for (k = 0; k < 5; k++)
					check_merge(old, sizes[i], add,
					    sizes[j], lives[k]);
			}
		}
	}
	/* Old entries merged again with a copy of some of them. */
	random_entries(old, 1000, 0, 9, &s);
	for (i = 0; i < 500; i++)
		add[i] = old[2 * i + (i % 2)];
	check_merge(old, 1000, add, 500, 0);
	check_merge(old, 1000, add, 500, 30000);
	free(add);
	free(old);
}

/* ------------------------------------------------------------------------ */
/* The memtable. */

/* The model: every entry in insertion order, and how many are committed. */
struct model {
	struct bentry	*v;
	size_t		 n;
	size_t		 size;
	size_t		 committed;
};

/* Add to the memtable and the model. */
static void
madd(struct memtable *mt, struct model *m, uint64_t key, uint64_t docid)
{
	if (m->n == m->size) {
		m->size = m->size ? 2 * m->size : 256;
		m->v = xreallocarray(m->v, m->size, sizeof *m->v);
	}
	m->v[m->n].key = key;
	m->v[m->n].docid = docid;
	m->n++;
	memtable_add(mt, key, docid);
}

/* Commit both. */
static void
mcommit(struct memtable *mt, struct model *m)
{
	memtable_commit(mt);
	m->committed = m->n;
}

/* Roll both back. */
static void
mrollback(struct memtable *mt, struct model *m)
{
	memtable_rollback(mt);
	m->n = m->committed;
}

/* Drop chunk c from both (after a commit, as index.c does). */
static void
mdrop(struct memtable *mt, struct model *m, unsigned c)
{
	size_t	 i, j;

	memtable_drop(mt, c);
	for (i = 0, j = 0; i < m->n; i++) {
		if (band_chunk(m->v[i].key) != c)
			m->v[j++] = m->v[i];
	}
	m->n = j;
	if (m->committed > m->n)
		m->committed = m->n;
}

/* Clear both. */
static void
mclear(struct memtable *mt, struct model *m)
{
	memtable_clear(mt);
	m->n = m->committed = 0;
}

/*
 * memtable_find for key, with several limits, against the model: the
 * entries with that key in insertion order.
 */
static void
check_mfind(struct memtable *mt, const struct model *m, uint64_t key)
{
	size_t	 maxes[6], nmax = 0, i, k, cnt, got, want;

	want_ids.n = 0;
	for (i = 0; i < m->n; i++) {
		if (m->v[i].key == key)
			u64vec_push(&want_ids, m->v[i].docid);
	}
	cnt = want_ids.n;
	maxes[nmax++] = SIZE_MAX;
	maxes[nmax++] = 0;
	maxes[nmax++] = 1;
	maxes[nmax++] = cnt;
	maxes[nmax++] = cnt + 1;
	if (cnt > 1)
		maxes[nmax++] = cnt - 1;
	for (k = 0; k < nmax; k++) {
		got_ids.n = 0;
		u64vec_push(&got_ids, SENTINEL);
		got = memtable_find(mt, key, &got_ids, maxes[k]);
		want = cnt < maxes[k] ? cnt : maxes[k];
		if (got != want || got_ids.n != 1 + want ||
		    got_ids.v[0] != SENTINEL || (want > 0 &&
		    memcmp(got_ids.v + 1, want_ids.v, want *
		    sizeof *want_ids.v) != 0)) {
			print_error("memtable_find(key=%#llx, max=%zu): "
			    "returned %zu, appended %zu, expected %zu\n",
			    (unsigned long long)key, maxes[k], got,
			    got_ids.n - 1, want);
			fail();
		}
	}
}

/* Every key the model holds, and the other keys given, are found right. */
static void
check_model(struct memtable *mt, const struct model *m,
    const uint64_t *extra, size_t nextra)
{
	size_t	 i;

	assert_int_equal(memtable_entries(mt), m->n);
	for (i = 0; i < m->n; i++)
		check_mfind(mt, m, m->v[i].key);
	for (i = 0; i < nextra; i++)
		check_mfind(mt, m, extra[i]);
}

/*
 * memtable_sorted for chunk c against the model's entries of that chunk,
 * sorted.  Called with whatever buffer the caller holds.
 */
static void
check_sorted(struct memtable *mt, const struct model *m, unsigned c,
    struct bentry **buf, size_t *bufsize)
{
	struct bentry	*want;
	size_t		 i, n, got, before = *bufsize;

	want = xcalloc(m->n + 1, sizeof *want);
	for (i = 0, n = 0; i < m->n; i++) {
		if (band_chunk(m->v[i].key) == c)
			want[n++] = m->v[i];
	}
	qsort(want, n, sizeof *want, cmp_entry);
	got = memtable_sorted(mt, c, buf, bufsize);
	if (got != n) {
		print_error("memtable_sorted(chunk %u): %zu entries, expected "
		    "%zu\n", c, got, n);
		fail();
	}
	assert_true(*bufsize >= n);
	assert_true(*bufsize >= before);
	for (i = 0; i < n; i++) {
		if (cmp_entry(&(*buf)[i], &want[i]) != 0) {
			print_error("memtable_sorted(chunk %u): entry %zu is "
			    "(%#llx, %llu), expected (%#llx, %llu)\n", c, i,
			    (unsigned long long)(*buf)[i].key,
			    (unsigned long long)(*buf)[i].docid,
			    (unsigned long long)want[i].key,
			    (unsigned long long)want[i].docid);
			fail();
		}
	}
	free(want);
}

/* Keys of chunks 0, 1, 77 and the last, in every sub-bucket. */
static const uint64_t probe_keys[] = {
	0, 1, UINT64_MAX, UINT64_MAX - 1,
	(UINT64_C(1) << OFF_BITS) - 1, UINT64_C(1) << OFF_BITS,
	((uint64_t)77 << OFF_BITS), ((uint64_t)78 << OFF_BITS) - 1,
	((uint64_t)77 << OFF_BITS) | (UINT64_C(5) << (OFF_BITS - SUB_BITS)),
	((uint64_t)77 << OFF_BITS) |
	    ((UINT64_C(6) << (OFF_BITS - SUB_BITS)) - 1),
};
#define NPROBE	(sizeof probe_keys / sizeof probe_keys[0])

/* Add and find: same key many times, same and different sub-buckets. */
static void
test_memtable_basic(void **state)
{
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	size_t		 i;
	unsigned	 sub;

	mt = memtable_create();
	assert_int_equal(memtable_entries(mt), 0);
	check_model(mt, &m, probe_keys, NPROBE);

	/* The extremes of the key space. */
	madd(mt, &m, 0, 1);
	madd(mt, &m, UINT64_MAX, 2);
	madd(mt, &m, 0, 0);
	madd(mt, &m, UINT64_MAX, UINT64_MAX);
	check_model(mt, &m, probe_keys, NPROBE);

	/* 3000 entries of one key, beyond every initial allocation. */
	for (i = 0; i < 3000; i++)
		madd(mt, &m, skey(77, 5, 1234), 3000 - i);
	/* Neighbours in the same sub-bucket, interleaved with it. */
	for (i = 0; i < 200; i++) {
		madd(mt, &m, skey(77, 5, 1233), i);
		madd(mt, &m, skey(77, 5, 1235), i);
		madd(mt, &m, skey(77, 5, 1234), 10000 + i);
	}
	/* Every sub-bucket of the chunk, and its ends. */
	for (sub = 0; sub < (1U << SUB_BITS); sub++) {
		madd(mt, &m, skey(77, sub, 0), sub);
		madd(mt, &m, skey(77, sub, LOW_MASK), sub);
		madd(mt, &m, skey(77, sub, 1234), sub);
	}
	/* The same key low bits in other chunks. */
	madd(mt, &m, skey(76, 5, 1234), 1);
	madd(mt, &m, skey(78, 5, 1234), 2);
	madd(mt, &m, skey(LAST_CHUNK, 5, 1234), 3);
	madd(mt, &m, skey(0, 5, 1234), 4);
	check_model(mt, &m, probe_keys, NPROBE);
	assert_int_equal(memtable_entries(mt), 4 + 3000 + 600 + 48 + 4);

	/* The first found are the first added. */
	got_ids.n = 0;
	assert_int_equal(memtable_find(mt, skey(77, 5, 1234), &got_ids, 3), 3);
	assert_true(got_ids.v[0] == 3000);
	assert_true(got_ids.v[1] == 2999);
	assert_true(got_ids.v[2] == 2998);
	got_ids.n = 0;
	assert_int_equal(memtable_find(mt, skey(77, 5, 1236), &got_ids,
	    SIZE_MAX), 0);

	memtable_free(mt);
	memtable_free(NULL);
	free(m.v);
}

/* Rollback takes back exactly the additions since the commit. */
static void
test_memtable_rollback(void **state)
{
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	uint64_t	 s = 41;
	size_t		 i;
	unsigned	 sub;

	mt = memtable_create();

	/* With no commit at all, a rollback empties the memtable. */
	for (i = 0; i < 50; i++)
		madd(mt, &m, skey(3, (unsigned)i % 16, i % 3), i);
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	assert_int_equal(memtable_entries(mt), 0);

	/* Committed entries in several buckets. */
	for (i = 0; i < 300; i++) {
		madd(mt, &m, skey(77, (unsigned)i % 16, i % 5), i);
		madd(mt, &m, skey((unsigned)(i * 37) % BAND_CHUNKS, 0, 9), i);
	}
	mcommit(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);

	/* A rollback with nothing added since changes nothing. */
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);

	/* More than the undo log's first size, into the same buckets. */
	for (i = 0; i < 2500; i++) {
		sub = (unsigned)(splitmix64(&s) % 16);
		madd(mt, &m, skey(77, sub, splitmix64(&s) % 5),
		    1000000 + i);
		if (i % 7 == 0)
			madd(mt, &m, skey((unsigned)(i * 37) % BAND_CHUNKS, 0,
			    9), 2000000 + i);
		if (i % 11 == 0)
			madd(mt, &m, splitmix64(&s), i);
	}
	check_model(mt, &m, probe_keys, NPROBE);
	mrollback(mt, &m);
	assert_int_equal(memtable_entries(mt), 600);
	check_model(mt, &m, probe_keys, NPROBE);

	/* A second rollback does nothing; additions after it work. */
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	madd(mt, &m, skey(77, 0, 0), 77);
	madd(mt, &m, skey(77, 0, 0), 78);
	check_model(mt, &m, probe_keys, NPROBE);
	mcommit(mt, &m);
	madd(mt, &m, skey(77, 0, 0), 79);
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	got_ids.n = 0;
	memtable_find(mt, skey(77, 0, 0), &got_ids, SIZE_MAX);
	assert_true(got_ids.n > 2);
	assert_true(got_ids.v[got_ids.n - 2] == 77);
	assert_true(got_ids.v[got_ids.n - 1] == 78);

	memtable_free(mt);
	free(m.v);
}

/*
 * memtable_sorted: a chunk's entries in (key, docid) order, across its
 * sub-buckets, without reordering what find returns or rollback undoes.
 */
static void
test_memtable_sorted(void **state)
{
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	struct bentry	*buf = NULL;
	size_t		 bufsize = 0, i;
	unsigned	 sub;
	uint64_t	 s = 51;

	mt = memtable_create();

	/* An empty chunk: nothing, and the buffer left alone. */
	assert_int_equal(memtable_sorted(mt, 77, &buf, &bufsize), 0);
	check_sorted(mt, &m, 0, &buf, &bufsize);
	check_sorted(mt, &m, LAST_CHUNK, &buf, &bufsize);

	/* Sub-buckets added in reverse order, docids descending. */
	for (sub = 16; sub-- > 0;) {
		for (i = 0; i < 20; i++)
			madd(mt, &m, skey(77, sub, (19 - i) % 4), 100 - i);
	}
	/* Neighbouring chunks, which must not show up. */
	madd(mt, &m, ckey(76, OFF_MASK), 1);
	madd(mt, &m, ckey(78, 0), 2);
	/* Exact repeats are kept: the memtable does not dedupe. */
	madd(mt, &m, skey(77, 3, 2), 90);
	madd(mt, &m, skey(77, 3, 2), 90);
	mcommit(mt, &m);

	check_sorted(mt, &m, 77, &buf, &bufsize);
	check_sorted(mt, &m, 76, &buf, &bufsize);
	check_sorted(mt, &m, 78, &buf, &bufsize);
	check_sorted(mt, &m, 79, &buf, &bufsize);
	/* find still returns insertion order. */
	check_model(mt, &m, probe_keys, NPROBE);

	/* Uncommitted additions in the same buckets, then sorted, then undo. */
	for (i = 0; i < 500; i++) {
		madd(mt, &m, skey(77, (unsigned)(splitmix64(&s) % 16),
		    splitmix64(&s) % 4), splitmix64(&s) % 1000);
	}
	check_sorted(mt, &m, 77, &buf, &bufsize);
	check_model(mt, &m, probe_keys, NPROBE);
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	check_sorted(mt, &m, 77, &buf, &bufsize);

	/* A caller's buffer bigger than needed is used, not shrunk. */
	free(buf);
	bufsize = 10000;
	buf = xcalloc(bufsize, sizeof *buf);
	check_sorted(mt, &m, 77, &buf, &bufsize);
	assert_int_equal(bufsize, 10000);

	/* Chunks 0 and the last, random keys, with a fresh buffer. */
	free(buf);
	buf = NULL;
	bufsize = 0;
	for (i = 0; i < 3000; i++) {
		madd(mt, &m, ckey(0, splitmix64(&s) >> (i % 50)), i % 13);
		madd(mt, &m, ckey(LAST_CHUNK, ~(splitmix64(&s) >> (i % 50))),
		    i % 17);
	}
	check_sorted(mt, &m, 0, &buf, &bufsize);
	check_sorted(mt, &m, LAST_CHUNK, &buf, &bufsize);
	check_sorted(mt, &m, 77, &buf, &bufsize);
	check_model(mt, &m, probe_keys, NPROBE);
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	check_sorted(mt, &m, 0, &buf, &bufsize);

	free(buf);
	memtable_free(mt);
	free(m.v);
}

/* memtable_drop empties exactly one chunk, every sub-bucket of it. */
static void
test_memtable_drop(void **state)
{
	static const unsigned chunks[] = { 0, 1, 76, 77, 78, LAST_CHUNK - 1,
	    LAST_CHUNK };
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	struct bentry	*buf = NULL;
	size_t		 bufsize = 0, i, k, nc = sizeof chunks / sizeof chunks[0];
	size_t		 before;
	unsigned	 sub;

	mt = memtable_create();
	for (k = 0; k < nc; k++) {
		for (sub = 0; sub < 16; sub++) {
			/* Sub-bucket 5 big enough to be freed by a drop. */
			for (i = 0; i < (sub == 5 ? 100U : 3U); i++)
				madd(mt, &m, skey(chunks[k], sub, i % 4), i);
		}
	}
	mcommit(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);

	/* Dropping an empty chunk changes nothing. */
	mdrop(mt, &m, 500);
	check_model(mt, &m, probe_keys, NPROBE);

	for (k = 0; k < nc; k++) {
		before = memtable_entries(mt);
		mdrop(mt, &m, chunks[k]);
		assert_int_equal(memtable_entries(mt), before - (100 + 15 * 3));
		check_model(mt, &m, probe_keys, NPROBE);
		check_sorted(mt, &m, chunks[k], &buf, &bufsize);
		got_ids.n = 0;
		assert_int_equal(memtable_find(mt, skey(chunks[k], 5, 0),
		    &got_ids, SIZE_MAX), 0);
		/* The dropped chunk takes new entries again. */
		madd(mt, &m, skey(chunks[k], 5, 0), 999);
		madd(mt, &m, skey(chunks[k], 15, 3), 998);
		mcommit(mt, &m);
		check_model(mt, &m, probe_keys, NPROBE);
		check_sorted(mt, &m, chunks[k], &buf, &bufsize);
		/* A rollback after drop and commit takes back nothing. */
		mrollback(mt, &m);
		check_model(mt, &m, probe_keys, NPROBE);
	}

	free(buf);
	memtable_free(mt);
	free(m.v);
}

/* memtable_clear empties everything, undo log included. */
static void
test_memtable_clear(void **state)
{
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	uint64_t	 s = 61;
	size_t		 i;

	mt = memtable_create();
	mclear(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	for (i = 0; i < 5000; i++)
		madd(mt, &m, splitmix64(&s) >> (i % 20), i);
	madd(mt, &m, 0, 0);
	madd(mt, &m, UINT64_MAX, 0);
	mcommit(mt, &m);
	for (i = 0; i < 500; i++)
		madd(mt, &m, skey(77, (unsigned)i % 16, 0), i);
	mclear(mt, &m);
	assert_int_equal(memtable_entries(mt), 0);
	check_model(mt, &m, probe_keys, NPROBE);
	/* Nothing left to roll back. */
	mrollback(mt, &m);
	assert_int_equal(memtable_entries(mt), 0);
	check_model(mt, &m, probe_keys, NPROBE);

	/* Usable again. */
	for (i = 0; i < 100; i++)
		madd(mt, &m, skey(77, (unsigned)i % 16, i % 3), i);
	check_model(mt, &m, probe_keys, NPROBE);
	mrollback(mt, &m);
	check_model(mt, &m, probe_keys, NPROBE);
	assert_int_equal(memtable_entries(mt), 0);

	memtable_free(mt);
	free(m.v);
}

/* A seeded random sequence of operations against the model. */
static void
test_memtable_model(void **state)
{
	static const unsigned chunks[] = { 0, 77, 78, LAST_CHUNK };
	struct memtable	*mt;
	struct model	 m = { NULL, 0, 0, 0 };
	struct bentry	*buf = NULL;
	size_t		 bufsize = 0, step;
	uint64_t	 s = 71, pool[64], r, keys[4];
	unsigned	 op, i;

	/* A small pool of keys, so that keys and buckets repeat. */
	for (i = 0; i < 64; i++) {
		pool[i] = skey(chunks[i % 4], (unsigned)(splitmix64(&s) % 16),
		    splitmix64(&s) % 3);
	}

	mt = memtable_create();
	for (step = 0; step < 20000; step++) {
		r = splitmix64(&s);
		op = (unsigned)(r % 1000);
		if (op < 800) {
			madd(mt, &m, pool[(r >> 16) % 64], (r >> 32) % 50);
		} else if (op < 860) {
			mcommit(mt, &m);
		} else if (op < 900) {
			mrollback(mt, &m);
		} else if (op < 920) {
			mcommit(mt, &m);
			mdrop(mt, &m, chunks[(r >> 16) % 4]);
		} else if (op < 950) {
			check_sorted(mt, &m, chunks[(r >> 16) % 4], &buf,
			    &bufsize);
		} else if (op < 999) {
			for (i = 0; i < 4; i++)
				keys[i] = pool[(r >> (16 + 6 * i)) % 64];
			assert_int_equal(memtable_entries(mt), m.n);
			for (i = 0; i < 4; i++)
				check_mfind(mt, &m, keys[i]);
		} else
			mclear(mt, &m);
		assert_int_equal(memtable_entries(mt), m.n);
	}
	for (i = 0; i < 64; i++)
		check_mfind(mt, &m, pool[i]);
	for (i = 0; i < 4; i++)
		check_sorted(mt, &m, chunks[i], &buf, &bufsize);

	free(buf);
	memtable_free(mt);
	free(m.v);
}

/* Free the shared vectors. */
static int
teardown_group(void **state)
{
	u64vec_free(&want_ids);
	u64vec_free(&got_ids);
	return (0);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_le64),
		cmocka_unit_test(test_run_layout),
		cmocka_unit_test(test_bentry_cmp),
		cmocka_unit_test(test_find_edges),
		cmocka_unit_test(test_find_random),
		cmocka_unit_test(test_find_any_keys),
		cmocka_unit_test(test_merge_edges),
		cmocka_unit_test(test_merge_random),
		cmocka_unit_test(test_memtable_basic),
		cmocka_unit_test(test_memtable_rollback),
		cmocka_unit_test(test_memtable_sorted),
		cmocka_unit_test(test_memtable_drop),
		cmocka_unit_test(test_memtable_clear),
		cmocka_unit_test(test_memtable_model),
	};

	alarm(120);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, teardown_group));
}
