/*
 * Unit tests for bandrun.c: the byte layout of the l0 log (little-endian,
 * 16 bytes an entry) and of l1 runs (big-endian, 10 bytes an entry: 40 key
 * bits below the chunk's, 40 bits of document number), the order of
 * bentry_cmp (the 54 key bits an l1 run keeps, document number, whole key),
 * run_find against a linear scan on hand-made and seeded random l1 runs of
 * many sizes and key distributions, run_merge against filter + dedupe of
 * the sorted union, and the memtable (add, find, commit, rollback, sorted,
 * drop, clear) against a simple model, by hand and by a seeded random
 * sequence of operations.
 */

#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "mhfilter.h"

#define OFF_BITS	(64 - BAND_CHUNK_BITS)	/* key bits within a chunk */
#define OFF_MASK	((UINT64_C(1) << OFF_BITS) - 1)
#define DROP_BITS	(OFF_BITS - L1E_BITS)	/* key bits an l1 run drops */
#define DROP_MASK	((UINT64_C(1) << DROP_BITS) - 1)
#define FRAG_MASK	((UINT64_C(1) << L1E_BITS) - 1)
#define TOP54(k)	((uint64_t)(k) >> DROP_BITS)	/* what a run keeps */
#define SUB_BITS	4			/* memtable sub-buckets */
#define LOW_MASK	((UINT64_C(1) << (OFF_BITS - SUB_BITS)) - 1)
#define LAST_CHUNK	(BAND_CHUNKS - 1)
#define SENTINEL	UINT64_C(0x5e5e5e5e5e5e5e5e)
#define GUARD		0xa5

/* A key of chunk c, l1 fragment f and dropped low bits l (constant). */
#define K(c, f, l)	(((uint64_t)(c) << OFF_BITS) |			\
			    ((uint64_t)(f) << DROP_BITS) | (uint64_t)(l))

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

/* n entries of uniform keys from s, of documents 1 to n. */
static void
uniform_entries(struct bentry *e, size_t n, uint64_t *s)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		e[i].key = splitmix64(s);
		e[i].docid = i + 1;
	}
}

/* A key in chunk c at offset off within it. */
static uint64_t
ckey(unsigned c, uint64_t off)
{
	return (((uint64_t)c << OFF_BITS) | (off & OFF_MASK));
}

/* A key in chunk c with l1 fragment frag and dropped low bits low. */
static uint64_t
fkey(unsigned c, uint64_t frag, uint64_t low)
{
	return (ckey(c, ((frag & FRAG_MASK) << DROP_BITS) |
	    (low & DROP_MASK)));
}

/* A key in chunk c, memtable sub-bucket sub, with these low bits. */
static uint64_t
skey(unsigned c, unsigned sub, uint64_t low)
{
	return (ckey(c, ((uint64_t)sub << (OFF_BITS - SUB_BITS)) |
	    (low & LOW_MASK)));
}

/* The sign of a comparison result. */
static int
sgn(int x)
{
	return ((x > 0) - (x < 0));
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

/* The test's own 40-bit big-endian encoder. */
static void
enc_be40(unsigned char *p, uint64_t v)
{
	int	 i;

	for (i = 4; i >= 0; i--) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

/* The test's own 40-bit big-endian decoder. */
static uint64_t
dec_be40(const unsigned char *p)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 0; i < 5; i++)
		v = (v << 8) | p[i];
	return (v);
}

/* The test's own l1 entry: the fragment, then the document number. */
static void
enc_l1(unsigned char *p, const struct bentry *e)
{
	enc_be40(p, TOP54(e->key) & FRAG_MASK);
	enc_be40(p + 5, e->docid);
}

/*
 * The test's own order, as l1 runs keep entries: the top 54 key bits, then
 * document number, then the whole key.
 */
static int
cmp_l1(const void *a, const void *b)
{
	const struct bentry	*x = a, *y = b;

	if (TOP54(x->key) != TOP54(y->key))
		return (TOP54(x->key) < TOP54(y->key) ? -1 : 1);
	if (x->docid != y->docid)
		return (x->docid < y->docid ? -1 : 1);
	if (x->key != y->key)
		return (x->key < y->key ? -1 : 1);
	return (0);
}

/*
 * Encode n entries as an l1 run in a buffer of exactly that size, with the
 * test's encoder, and check that l1_put writes the same bytes.
 */
static unsigned char *
encode_run(const struct bentry *v, size_t n)
{
	unsigned char	*run, *put;
	size_t		 i;

	run = xmalloc(n ? n * L1E_SIZE : 1);
	put = xmalloc(n ? n * L1E_SIZE : 1);
	for (i = 0; i < n; i++) {
		enc_l1(run + i * L1E_SIZE, &v[i]);
		l1_put(put, i, &v[i]);
	}
	if (n > 0)
		assert_memory_equal(run, put, n * L1E_SIZE);
	free(put);
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

/* run_put writes l0 entry i at 16 * i: key then document number, LE. */
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

	/* Whole 64-bit keys and document numbers, no bit dropped. */
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

/*
 * l1_put writes entry i at 10 * i: the 40 key bits below the chunk's, then
 * the document number, big-endian; l1_get reads the top 54 key bits back,
 * the chunk's from its argument, and zero below.
 */
static void
test_l1_layout(void **state)
{
	static const unsigned char want[10] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e
	};
	static const unsigned chunks[] = { 0, 1, 77, 0x2abc, LAST_CHUNK - 1,
	    LAST_CHUNK };
	struct bentry	 e = { K(0x2abc, 0x0102030405, 0x3ff),
			       UINT64_C(0x0a0b0c0d0e) }, f, g, v[200];
	unsigned char	 run[5 * L1E_SIZE], big[200 * L1E_SIZE], b[L1E_SIZE];
	unsigned char	 ea[L1E_SIZE], eb[L1E_SIZE];
	uint64_t	 s = 14, x;
	size_t		 i, j, k;
	unsigned	 c, c2;
	int		 want_sign;

	assert_int_equal(L1E_SIZE, 10);
	assert_int_equal(L1E_BITS, 40);
	assert_int_equal(BAND_CHUNK_BITS + L1E_BITS, 54);
	assert_true(L1E_DOCMAX == (UINT64_C(1) << 40) - 1);
	assert_int_equal(DROP_BITS, 10);

	/* l1_key is the top 54 bits. */
	for (i = 0; i < 1000; i++) {
		x = splitmix64(&s) >> (i % 64);
		assert_true(l1_key(x) == x >> 10);
	}
	assert_true(l1_key(0) == 0);
	assert_true(l1_key(DROP_MASK) == 0);
	assert_true(l1_key(DROP_MASK + 1) == 1);
	assert_true(l1_key(UINT64_MAX) == (UINT64_C(1) << 54) - 1);

	/* At every index, and nowhere else. */
	for (i = 0; i < 5; i++) {
		memset(run, GUARD, sizeof run);
		l1_put(run, i, &e);
		assert_memory_equal(run + i * L1E_SIZE, want, L1E_SIZE);
		for (j = 0; j < sizeof run; j++) {
			if (j < i * L1E_SIZE || j >= (i + 1) * L1E_SIZE)
				assert_int_equal(run[j], GUARD);
		}
		l1_get(run, i, 0x2abc, &g);
		assert_true(g.key == K(0x2abc, 0x0102030405, 0));
		assert_true(g.docid == UINT64_C(0x0a0b0c0d0e));
		/* The chunk comes from the argument. */
		l1_get(run, i, 0, &g);
		assert_true(g.key == K(0, 0x0102030405, 0));
		l1_get(run, i, LAST_CHUNK, &g);
		assert_true(g.key == K(LAST_CHUNK, 0x0102030405, 0));
		assert_true(g.docid == UINT64_C(0x0a0b0c0d0e));
		l1_get(run, i, 1, &g);
		assert_true(g.key == K(1, 0x0102030405, 0));
	}

	/* Neither the chunk's bits nor the low 10 are written. */
	f.key = K(0, 0x0102030405, 0);
	f.docid = e.docid;
	memset(b, GUARD, sizeof b);
	l1_put(b, 0, &f);
	assert_memory_equal(b, want, L1E_SIZE);
	f.key = K(LAST_CHUNK, 0, DROP_MASK);
	f.docid = 0;
	memset(b, GUARD, sizeof b);
	l1_put(b, 0, &f);
	for (j = 0; j < L1E_SIZE; j++)
		assert_int_equal(b[j], 0);

	/* Extremes and single bits. */
	f.key = UINT64_MAX;
	f.docid = L1E_DOCMAX;
	l1_put(b, 0, &f);
	for (j = 0; j < L1E_SIZE; j++)
		assert_int_equal(b[j], 0xff);
	l1_get(b, 0, LAST_CHUNK, &g);
	assert_true(g.key == UINT64_MAX - DROP_MASK);
	assert_true(g.docid == L1E_DOCMAX);
	l1_get(b, 0, 0, &g);
	assert_true(g.key == (OFF_MASK & ~DROP_MASK));
	f.key = K(5, UINT64_C(1) << 39, 0);
	f.docid = 1;
	l1_put(b, 0, &f);
	assert_int_equal(b[0], 0x80);
	for (j = 1; j < 9; j++)
		assert_int_equal(b[j], 0);
	assert_int_equal(b[9], 1);
	f.key = K(5, 1, 0);
	f.docid = UINT64_C(1) << 39;
	l1_put(b, 0, &f);
	for (j = 0; j < L1E_SIZE; j++)
		assert_int_equal(b[j], j == 4 ? 1 : (j == 5 ? 0x80 : 0));
	l1_get(b, 0, 5, &g);
	assert_true(g.key == K(5, 1, 0));
	assert_true(g.docid == UINT64_C(1) << 39);

	/* Seeded random entries of several chunks, round trip. */
	for (k = 0; k < sizeof chunks / sizeof chunks[0] + 2; k++) {
		if (k < sizeof chunks / sizeof chunks[0])
			c = chunks[k];
		else
			c = (unsigned)(splitmix64(&s) % BAND_CHUNKS);
		for (i = 0; i < 200; i++) {
			v[i].key = ckey(c, splitmix64(&s));
			switch (i % 7) {
			case 0:
				v[i].docid = 0;
				break;
			case 1:
				v[i].docid = L1E_DOCMAX;
				break;
			default:
				v[i].docid = splitmix64(&s) >> (24 + i % 40);
				break;
			}
			l1_put(big, i, &v[i]);
		}
		for (i = 0; i < 200; i++) {
			assert_true(dec_be40(big + i * L1E_SIZE) ==
			    ((v[i].key >> DROP_BITS) & FRAG_MASK));
			assert_true(dec_be40(big + i * L1E_SIZE + 5) ==
			    v[i].docid);
			l1_get(big, i, c, &g);
			assert_true(g.key == (v[i].key & ~DROP_MASK));
			assert_true(l1_key(g.key) == l1_key(v[i].key));
			assert_true(band_chunk(g.key) == c);
			assert_true(g.docid == v[i].docid);
			/* Another chunk's: only the top 14 bits change. */
			c2 = c ^ 0x1555;
			l1_get(big, i, c2, &g);
			assert_true(g.key == (((uint64_t)c2 << OFF_BITS) |
			    (v[i].key & OFF_MASK & ~DROP_MASK)));
			assert_true(g.docid == v[i].docid);
			/* Put back what was got: the same bytes. */
			l1_put(b, 0, &g);
			assert_memory_equal(b, big + i * L1E_SIZE, L1E_SIZE);
		}
	}

	/*
	 * Within a chunk the bytes compare as the kept key bits, then the
	 * document number: memcmp is the run's order.
	 */
	for (i = 0; i < 20000; i++) {
		c = (unsigned)(splitmix64(&s) % BAND_CHUNKS);
		v[0].key = ckey(c, splitmix64(&s) >> (i % 3 ? 0 : 30));
		v[0].docid = splitmix64(&s) & L1E_DOCMAX;
		v[1] = v[0];
		switch (i % 5) {
		case 0:
			v[1].key = ckey(c, splitmix64(&s));
			break;
		case 1:
			v[1].key ^= splitmix64(&s) & DROP_MASK;
			break;
		case 2:
			v[1].docid ^= UINT64_C(1) << (splitmix64(&s) % 40);
			break;
		case 3:
			v[1].key ^= (splitmix64(&s) & OFF_MASK) >>
			    (splitmix64(&s) % OFF_BITS);
			v[1].docid = splitmix64(&s) & L1E_DOCMAX;
			break;
		default:
			break;
		}
		if (TOP54(v[0].key) != TOP54(v[1].key))
			want_sign = TOP54(v[0].key) < TOP54(v[1].key) ? -1 : 1;
		else if (v[0].docid != v[1].docid)
			want_sign = v[0].docid < v[1].docid ? -1 : 1;
		else
			want_sign = 0;
		l1_put(ea, 0, &v[0]);
		l1_put(eb, 0, &v[1]);
		assert_int_equal(sgn(memcmp(ea, eb, L1E_SIZE)), want_sign);
	}
}

/* bentry_cmp orders by l1_key, document number, key, without overflow. */
static void
test_bentry_cmp(void **state)
{
	static const struct bentry ordered[] = {
		{ 0, 0 }, { 1, 0 }, { DROP_MASK, 0 },
		{ 0, 1 }, { DROP_MASK, 1 },
		{ 0, UINT64_C(1) << 32 }, { 0, L1E_DOCMAX },
		{ 0, UINT64_MAX - 1 }, { 0, UINT64_MAX },
		{ DROP_MASK, UINT64_MAX },
		{ DROP_MASK + 1, 0 }, { UINT64_C(1) << 42, 0 },
		{ UINT64_C(1) << 63, 0 },
		{ (UINT64_C(1) << 63) + DROP_MASK, 0 },
		{ UINT64_C(1) << 63, UINT64_C(1) << 63 },
		{ (UINT64_C(1) << 63) + 1, UINT64_MAX },
		{ UINT64_MAX - DROP_MASK - 1, UINT64_MAX },
		{ UINT64_MAX, 0 }, { UINT64_MAX - DROP_MASK, 1 },
		{ UINT64_MAX - DROP_MASK, UINT64_C(1) << 63 },
		{ UINT64_MAX - 1, UINT64_MAX }, { UINT64_MAX, UINT64_MAX },
	};
	static const uint64_t bases[] = {
		0, K(1, 0, 0), K(77, 12345, 0), K(LAST_CHUNK, FRAG_MASK, 0),
		K(LAST_CHUNK, 0, 0)
	};
	size_t		 n = sizeof ordered / sizeof ordered[0], i, j;
	struct bentry	 v[2000];
	uint64_t	 s = 13, r;
	int		 c, d;

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

	/* Keys that share their kept bits, and keys that do not. */
	for (i = 0; i < 2000; i++) {
		r = splitmix64(&s);
		switch (i % 4) {
		case 0:
			v[i].key = splitmix64(&s);
			break;
		case 1:
			v[i].key = bases[r % 5] | (splitmix64(&s) & DROP_MASK);
			break;
		case 2:
			v[i].key = bases[r % 5] | (r >> 60);
			break;
		default:
			v[i].key = splitmix64(&s) % 7;
			break;
		}
		v[i].docid = (i % 3) ? (r >> 32) % 5 : splitmix64(&s) >>
		    (i % 64);
	}

	/* Antisymmetric, agreeing with the test's order, 0 only if equal. */
	for (i = 0; i < 2000; i++) {
		for (j = i; j < 2000; j += 1 + i % 7) {
			c = bentry_cmp(&v[i], &v[j]);
			d = bentry_cmp(&v[j], &v[i]);
			assert_int_equal(sgn(c), sgn(cmp_l1(&v[i], &v[j])));
			assert_int_equal(sgn(c), -sgn(d));
			if (c == 0) {
				assert_true(v[i].key == v[j].key);
				assert_true(v[i].docid == v[j].docid);
			}
		}
	}

	/* qsort with it agrees with the test's own order. */
	qsort(v, 2000, sizeof v[0], bentry_cmp);
	for (i = 1; i < 2000; i++)
		assert_true(cmp_l1(&v[i - 1], &v[i]) <= 0);
}

/* ------------------------------------------------------------------------ */
/* run_find. */

static struct u64vec	 want_ids;
static struct u64vec	 got_ids;
static uint64_t		 finds_checked;

/*
 * Check run_find on the n-entry l1 run of chunk c (encoded from v, sorted
 * by bentry_cmp) for key, with several limits, against a linear scan of v
 * for the entries whose top 54 key bits are the key's.  The run cannot
 * tell keys apart below those.  Keys of other chunks are not asked for:
 * a run is only searched for its own chunk's keys.  The output vector is
 * appended to: two values already in it must stay.
 */
static void
check_find(const unsigned char *run, const struct bentry *v, size_t n,
    unsigned c, uint64_t key)
{
	size_t	 maxes[8], nmax = 0, cnt, got, want, i, m;

	if (band_chunk(key) != c)
		return;
	want_ids.n = 0;
	for (i = 0; i < n; i++) {
		if (TOP54(v[i].key) == TOP54(key))
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
			print_error("run_find(chunk %u, n=%zu, key=%#llx, "
			    "max=%zu): returned %zu, appended %zu, expected "
			    "%zu\n", c, n, (unsigned long long)key, maxes[m],
			    got, got_ids.n - 2, want);
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
 * Check a run with every kept key in it, the same with other low bits,
 * the neighbouring kept keys, the chunk's extremes, the keys just outside
 * the run and random keys in the chunk.
 */
static void
check_run(const struct bentry *v, size_t n, unsigned c, uint64_t *s)
{
	unsigned char	*run;
	uint64_t	 k;
	size_t		 i;

	for (i = 0; i < n; i++) {
		assert_true(band_chunk(v[i].key) == c);
		assert_true(v[i].docid <= L1E_DOCMAX);
		if (i > 0)
			assert_true(cmp_l1(&v[i - 1], &v[i]) <= 0);
	}
	run = encode_run(v, n);
	for (i = 0; i < n; i++) {
		if (i > 0 && TOP54(v[i].key) == TOP54(v[i - 1].key))
			continue;
		k = v[i].key;
		check_find(run, v, n, c, k);
		/* Other low bits: the same entries. */
		check_find(run, v, n, c, k ^ (1 + splitmix64(s) % DROP_MASK));
		/* The kept keys either side. */
		check_find(run, v, n, c, (k & ~DROP_MASK) - 1);
		check_find(run, v, n, c, (k | DROP_MASK) + 1);
	}
	if (n > 0) {
		check_find(run, v, n, c, v[0].key - DROP_MASK - 2);
		check_find(run, v, n, c, v[n - 1].key + DROP_MASK + 2);
		/* Halfway between neighbours. */
		for (i = 1; i < n; i += 1 + n / 64) {
			if (v[i].key > v[i - 1].key)
				check_find(run, v, n, c, v[i - 1].key +
				    (v[i].key - v[i - 1].key) / 2);
		}
	}
	check_find(run, v, n, c, ckey(c, 0));
	check_find(run, v, n, c, ckey(c, 1));
	check_find(run, v, n, c, ckey(c, DROP_MASK));
	check_find(run, v, n, c, ckey(c, DROP_MASK + 1));
	check_find(run, v, n, c, ckey(c, OFF_MASK - DROP_MASK - 1));
	check_find(run, v, n, c, ckey(c, OFF_MASK - 1));
	check_find(run, v, n, c, ckey(c, OFF_MASK));
	check_find(run, v, n, c, ckey(c, OFF_MASK / 2));
	for (i = 0; i < 64; i++)
		check_find(run, v, n, c, ckey(c, splitmix64(s)));
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

	/* One entry, found whatever the key's low 10 bits. */
	v[0].key = fkey(7, 1000, 5);
	v[0].docid = 42;
	check_run(v, 1, 7, &s);
	run = encode_run(v, 1);
	got_ids.n = 0;
	assert_int_equal(run_find(run, 1, fkey(7, 1000, 5), &got_ids, 5), 1);
	assert_int_equal(got_ids.n, 1);
	assert_true(got_ids.v[0] == 42);
	assert_int_equal(run_find(run, 1, fkey(7, 1000, 0), &got_ids, 5), 1);
	assert_int_equal(run_find(run, 1, fkey(7, 1000, DROP_MASK), &got_ids,
	    5), 1);
	assert_int_equal(got_ids.n, 3);
	assert_true(got_ids.v[1] == 42 && got_ids.v[2] == 42);
	assert_int_equal(run_find(run, 1, fkey(7, 999, DROP_MASK), &got_ids,
	    5), 0);
	assert_int_equal(run_find(run, 1, fkey(7, 1001, 0), &got_ids, 5), 0);
	assert_int_equal(got_ids.n, 3);
	free(run);

	/* Two entries, equal and different keys. */
	v[0].key = v[1].key = fkey(7, 5, 0);
	v[0].docid = 1;
	v[1].docid = 9;
	check_run(v, 2, 7, &s);
	v[1].key = fkey(7, 6, 0);
	check_run(v, 2, 7, &s);
	/* Equal but for the low bits, the larger key first. */
	v[0].key = fkey(7, 5, DROP_MASK);
	v[1].key = fkey(7, 5, 0);
	check_run(v, 2, 7, &s);
	run = encode_run(v, 2);
	got_ids.n = 0;
	assert_int_equal(run_find(run, 2, fkey(7, 5, 0x155), &got_ids,
	    SIZE_MAX), 2);
	assert_int_equal(got_ids.n, 2);
	assert_true(got_ids.v[0] == 1 && got_ids.v[1] == 9);
	free(run);

	/* Keys differing only in their low bits: one kept key, runs 1..40. */
	for (n = 1; n <= 40; n++) {
		for (i = 0; i < n; i++) {
			v[i].key = fkey(11, 77, (i * 389) & DROP_MASK);
			v[i].docid = n - i;
		}
		qsort(v, n, sizeof *v, cmp_l1);
		check_run(v, n, 11, &s);
		run = encode_run(v, n);
		got_ids.n = 0;
		assert_int_equal(run_find(run, n, fkey(11, 77, 0), &got_ids,
		    SIZE_MAX), n);
		for (i = 0; i < n; i++)
			assert_true(got_ids.v[i] == i + 1);
		free(run);
	}

	/* The first and last chunks' extreme keys, in runs of 1..40. */
	for (c = 0; c < BAND_CHUNKS; c += LAST_CHUNK) {
		for (n = 1; n <= 40; n++) {
			for (i = 0; i < n; i++) {
				if (i < n / 2)
					v[i].key = fkey(c, i / 3, i * 7);
				else
					v[i].key = fkey(c, FRAG_MASK -
					    (n - 1 - i) / 3, DROP_MASK - i);
				v[i].docid = i;
			}
			qsort(v, n, sizeof *v, cmp_l1);
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

	/* Every entry a different kept key, one apart, at the chunk's start. */
	for (n = 1; n <= 40; n++) {
		for (i = 0; i < n; i++) {
			v[i].key = fkey(LAST_CHUNK, i, DROP_MASK - i);
			v[i].docid = L1E_DOCMAX - i;
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
#define D_LOWBITS	10	/* two kept keys, the low bits all different */
#define D_COUNT		11

static const char *const dist_names[D_COUNT] = {
	"uniform", "cluster", "skew-low", "skew-high", "few-keys",
	"extremes", "dense", "dense-high", "one-key", "halves", "low-bits"
};

/*
 * Fill v with n entries of chunk c drawn from distribution d, sorted by
 * the run's order; with few document numbers if fewdocs, so that entries
 * repeat.
 */
static void
random_run(struct bentry *v, size_t n, unsigned c, int d, int fewdocs,
    uint64_t *s)
{
	uint64_t	 centre[3], r, frag, low;
	size_t		 i;

	for (i = 0; i < 3; i++) {
		centre[i] = splitmix64(s) & FRAG_MASK;
		if (centre[i] > FRAG_MASK - 1000)
			centre[i] = FRAG_MASK - 1000;
	}
	for (i = 0; i < n; i++) {
		r = splitmix64(s);
		switch (d) {
		case D_UNIFORM:
			frag = r;
			break;
		case D_CLUSTER:
			frag = centre[r % 3] + (r >> 32) % 200;
			break;
		case D_SKEWLOW:
			frag = (r & FRAG_MASK) >> (splitmix64(s) % 40);
			break;
		case D_SKEWHIGH:
			frag = FRAG_MASK - ((r & FRAG_MASK) >>
			    (splitmix64(s) % 40));
			break;
		case D_FEWKEYS:
			frag = centre[r % 3];
			break;
		case D_EXTREMES:
			switch (r % 5) {
			case 0:
				frag = 0;
				break;
			case 1:
				frag = FRAG_MASK;
				break;
			case 2:
				frag = 1;
				break;
			case 3:
				frag = FRAG_MASK - 1;
				break;
			default:
				frag = r >> 3;
				break;
			}
			break;
		case D_DENSE:
			frag = (r >> 8) % (n / 2 + 1);
			break;
		case D_DENSEHIGH:
			frag = FRAG_MASK - (r >> 8) % (n / 2 + 1);
			break;
		case D_ONEKEY:
			frag = centre[0];
			break;
		case D_LOWBITS:
			frag = centre[r % 2];
			break;
		default:
			frag = (r & 1) ? (r >> 8) % 1000 :
			    FRAG_MASK - (r >> 8) % 1000;
			break;
		}
		switch ((r >> 58) % 4) {
		case 0:
			low = 0;
			break;
		case 1:
			low = DROP_MASK;
			break;
		default:
			low = splitmix64(s);
			break;
		}
		v[i].key = fkey(c, frag, low);
		v[i].docid = fewdocs ? splitmix64(s) % 4 :
		    splitmix64(s) & L1E_DOCMAX;
	}
	qsort(v, n, sizeof *v, cmp_l1);
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
				random_run(v, n, c, d, (d + rep) % 2, &s);
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
 * Runs whose kept keys are far from uniform in the chunk, crowded at
 * either end and spread over powers of two: run_find only guesses from the
 * key's place in its chunk and must still be exact.
 */
static void
test_find_any_keys(void **state)
{
	struct bentry	*v;
	uint64_t	 s = 23, frag;
	size_t		 i, n;
	unsigned	 c;

	v = xcalloc(3000, sizeof *v);
	for (n = 17; n <= 3000; n = n * 3 + 1) {
		c = (unsigned)(splitmix64(&s) % BAND_CHUNKS);
		for (i = 0; i < n; i++) {
			frag = (splitmix64(&s) & FRAG_MASK) >>
			    (splitmix64(&s) % (L1E_BITS + 1));
			if (i % 4 == 1)
				frag = FRAG_MASK - frag;
			v[i].key = fkey(c, frag, splitmix64(&s));
			v[i].docid = i;
		}
		qsort(v, n, sizeof *v, cmp_l1);
		check_run(v, n, c, &s);
	}
	free(v);
}

/* ------------------------------------------------------------------------ */
/* run_merge. */

/*
 * Check run_merge into chunk c's l1 run of the run encoded from old (nold
 * entries) and add (nadd), both sorted by bentry_cmp, with live, against
 * the sorted union of what a run keeps of them, less the document numbers
 * below live and the repeats; out has one guard entry beyond the room
 * run_merge is promised.  The run is old without its repeats, as every run
 * run_merge writes is.  The merged run is searched too.
 */
static void
check_merge(unsigned c, const struct bentry *old, size_t nold,
    const struct bentry *add, size_t nadd, uint64_t live)
{
	struct bentry	*all, *run, e;
	unsigned char	*oldrun, *out, b[L1E_SIZE];
	size_t		 i, n, want, room;

	/* The inputs are what run_merge is promised. */
	for (i = 0; i < nold; i++) {
		assert_true(band_chunk(old[i].key) == c);
		assert_true(old[i].docid <= L1E_DOCMAX);
		if (i > 0)
			assert_true(cmp_l1(&old[i - 1], &old[i]) <= 0);
	}
	for (i = 0; i < nadd; i++) {
		assert_true(band_chunk(add[i].key) == c);
		assert_true(add[i].docid <= L1E_DOCMAX);
		if (i > 0)
			assert_true(cmp_l1(&add[i - 1], &add[i]) <= 0);
	}

	/* The run: repeats (of kept key bits and document) left out. */
	run = xcalloc(nold + 1, sizeof *run);
	for (i = 0, n = 0; i < nold; i++) {
		if (n > 0 && TOP54(run[n - 1].key) == TOP54(old[i].key) &&
		    run[n - 1].docid == old[i].docid)
			continue;
		run[n++] = old[i];
	}
	nold = n;
	old = run;
	room = nold + nadd;

	all = xcalloc(room + 1, sizeof *all);
	if (nold > 0)
		memcpy(all, old, nold * sizeof *all);
	if (nadd > 0)
		memcpy(all + nold, add, nadd * sizeof *all);
	for (i = 0; i < room; i++)
		all[i].key &= ~DROP_MASK;
	qsort(all, room, sizeof *all, cmp_l1);
	for (i = 0, want = 0; i < room; i++) {
		if (all[i].docid < live)
			continue;
		if (want > 0 && cmp_l1(&all[want - 1], &all[i]) == 0)
			continue;
		all[want++] = all[i];
	}

	oldrun = encode_run(old, nold);
	out = xmalloc((room + 1) * L1E_SIZE);
	memset(out, GUARD, (room + 1) * L1E_SIZE);
	n = run_merge(c, nold ? oldrun : NULL, nold, nadd ? add : NULL, nadd,
	    live, out);
	if (n != want) {
		print_error("run_merge(chunk %u, nold=%zu, nadd=%zu, "
		    "live=%llu): %zu entries, expected %zu\n", c, nold, nadd,
		    (unsigned long long)live, n, want);
		fail();
	}
	for (i = 0; i < n; i++) {
		enc_l1(b, &all[i]);
		if (memcmp(out + i * L1E_SIZE, b, L1E_SIZE) != 0) {
			e.key = ((uint64_t)c << OFF_BITS) |
			    (dec_be40(out + i * L1E_SIZE) << DROP_BITS);
			e.docid = dec_be40(out + i * L1E_SIZE + 5);
			print_error("run_merge(chunk %u, nold=%zu, nadd=%zu, "
			    "live=%llu): entry %zu is (%#llx, %llu), expected "
			    "(%#llx, %llu)\n", c, nold, nadd,
			    (unsigned long long)live, i,
			    (unsigned long long)e.key,
			    (unsigned long long)e.docid,
			    (unsigned long long)all[i].key,
			    (unsigned long long)all[i].docid);
			fail();
		}
		/* The l1 byte order: strictly increasing, no repeat. */
		if (i > 0 && memcmp(out + (i - 1) * L1E_SIZE,
		    out + i * L1E_SIZE, L1E_SIZE) >= 0) {
			print_error("run_merge(chunk %u): entries %zu and %zu "
			    "out of order\n", c, i - 1, i);
			fail();
		}
	}
	for (i = room * L1E_SIZE; i < (room + 1) * L1E_SIZE; i++)
		assert_int_equal(out[i], GUARD);

	/* Found again, whatever the low bits asked with. */
	for (i = 0; i < n; i += 1 + n / 8) {
		check_find(out, all, n, c, all[i].key |
		    ((i * 0x2f5) & DROP_MASK));
	}
	free(out);
	free(oldrun);
	free(all);
	free(run);
}

/* Hand-made merges: empty inputs, repeats, removed documents. */
static void
test_merge_edges(void **state)
{
#define MC	5000	/* the chunk of the hand-made entries */
	static const struct bentry a[] = {
		{ K(MC, 1, 0), 1 }, { K(MC, 1, 7), 2 }, { K(MC, 2, 0), 1 },
		{ K(MC, 5, 0), 0 }, { K(MC, 5, DROP_MASK), 7 },
		{ K(MC, FRAG_MASK, DROP_MASK), L1E_DOCMAX }
	};
	/* (1, 2), (5, 7) and the last repeat a's, with other low bits. */
	static const struct bentry b[] = {
		{ K(MC, 0, 3), 9 }, { K(MC, 1, DROP_MASK), 2 },
		{ K(MC, 1, 0), 3 }, { K(MC, 5, 7), 7 }, { K(MC, 6, 0), 0 },
		{ K(MC, FRAG_MASK, 0), L1E_DOCMAX }
	};
	static const struct bentry rep[] = {
		{ K(MC, 4, 0), 4 }, { K(MC, 4, 1), 4 },
		{ K(MC, 4, DROP_MASK), 4 }, { K(MC, 4, 0), 5 },
		{ K(MC, 4, 0x200), 5 }
	};
	static const struct bentry zero[] = {
		{ K(MC, 0, 0), 0 }, { K(MC, 0, 0), 0 }
	};
	static const struct bentry z0[] = { { 0, 0 }, { DROP_MASK, 0 } };
	static const struct bentry top[] = {
		{ UINT64_MAX - DROP_MASK, L1E_DOCMAX },
		{ UINT64_MAX, L1E_DOCMAX }
	};
	static const unsigned char rep0[L1E_SIZE] = {
		0, 0, 0, 0, 4, 0, 0, 0, 0, 4
	};
	unsigned char	 out[16 * L1E_SIZE], *arun;
	size_t		 na = sizeof a / sizeof a[0];
	size_t		 nb = sizeof b / sizeof b[0];
	size_t		 nr = sizeof rep / sizeof rep[0], i;
	struct bentry	 e;

	/* Both empty: nothing written. */
	memset(out, GUARD, sizeof out);
	assert_int_equal(run_merge(MC, NULL, 0, NULL, 0, 0, out), 0);
	assert_int_equal(out[0], GUARD);
	check_merge(MC, NULL, 0, NULL, 0, 0);
	check_merge(MC, NULL, 0, NULL, 0, UINT64_MAX);

	/* One side empty. */
	check_merge(MC, a, na, NULL, 0, 0);
	check_merge(MC, NULL, 0, a, na, 0);
	check_merge(MC, a, na, NULL, 0, 2);
	check_merge(MC, NULL, 0, b, nb, 7);

	/* Both, with entries in common. */
	check_merge(MC, a, na, b, nb, 0);
	check_merge(MC, b, nb, a, na, 0);
	check_merge(MC, a, na, b, nb, 1);
	check_merge(MC, a, na, b, nb, 3);
	check_merge(MC, a, na, b, nb, L1E_DOCMAX);
	check_merge(MC, a, na, b, nb, L1E_DOCMAX + 1);
	check_merge(MC, a, na, b, nb, UINT64_MAX);
	check_merge(MC, a, na, a, na, 0);

	/* Repeats within and across the inputs. */
	check_merge(MC, rep, nr, NULL, 0, 0);
	check_merge(MC, NULL, 0, rep, nr, 0);
	check_merge(MC, rep, nr, rep, nr, 0);
	check_merge(MC, rep, nr, rep, nr, 5);
	check_merge(MC, zero, 2, zero, 2, 0);
	check_merge(0, z0, 2, z0, 2, 0);
	check_merge(0, NULL, 0, z0, 2, 1);
	check_merge(LAST_CHUNK, top, 2, top, 2, 0);
	check_merge(LAST_CHUNK, NULL, 0, top, 2, L1E_DOCMAX);

	/* The same, spelled out: a repeat is one of (l1_key, docid). */
	assert_int_equal(run_merge(MC, NULL, 0, rep, nr, 0, out), 2);
	assert_memory_equal(out, rep0, L1E_SIZE);
	l1_get(out, 0, MC, &e);
	assert_true(e.key == K(MC, 4, 0) && e.docid == 4);
	l1_get(out, 1, MC, &e);
	assert_true(e.key == K(MC, 4, 0) && e.docid == 5);
	/* A run's entries repeated by new ones with other low bits. */
	arun = encode_run(a, na);
	assert_int_equal(run_merge(MC, arun, na, b, nb, 0, out), 9);
	assert_int_equal(run_merge(MC, arun, na, b, nb, 1, out), 7);
	assert_int_equal(run_merge(MC, arun, na, a, na, 0, out), na);
	assert_memory_equal(out, arun, na * L1E_SIZE);
	assert_int_equal(run_merge(MC, arun, na, NULL, 0, 0, out), na);
	assert_memory_equal(out, arun, na * L1E_SIZE);
	free(arun);
	/* (0, 0) is an entry like any other, kept when live is 0. */
	assert_int_equal(run_merge(MC, NULL, 0, zero, 2, 0, out), 1);
	l1_get(out, 0, MC, &e);
	assert_true(e.key == K(MC, 0, 0) && e.docid == 0);
	for (i = 0; i < L1E_SIZE; i++)
		assert_int_equal(out[i], 0);
	assert_int_equal(run_merge(0, NULL, 0, z0, 2, 0, out), 1);
	assert_int_equal(run_merge(MC, NULL, 0, zero, 2, 1, out), 0);
	/* live keeps its own document number. */
	assert_int_equal(run_merge(MC, NULL, 0, a, na, 7, out), 2);
	l1_get(out, 0, MC, &e);
	assert_true(e.key == K(MC, 5, 0) && e.docid == 7);
	l1_get(out, 1, MC, &e);
	assert_true(e.key == K(MC, FRAG_MASK, 0) && e.docid == L1E_DOCMAX);
	for (i = L1E_SIZE; i < 2 * L1E_SIZE; i++)
		assert_int_equal(out[i], 0xff);
#undef MC
}

#define M_WIDE		0	/* random keys, document numbers to 10^5 */
#define M_NARROW	1	/* six kept keys, eight document numbers */
#define M_HIGH		2	/* the same at the top of both ranges */
#define M_COUNT		3

/* Fill v with n random entries of chunk c, sorted, of kind kind. */
static void
random_entries(struct bentry *v, size_t n, int kind, unsigned c,
    uint64_t *s)
{
	uint64_t	 r, low;
	size_t		 i;

	for (i = 0; i < n; i++) {
		r = splitmix64(s);
		switch ((r >> 60) % 4) {
		case 0:
			low = 0;
			break;
		case 1:
			low = DROP_MASK;
			break;
		default:
			low = r;
			break;
		}
		switch (kind) {
		case M_NARROW:
			v[i].key = fkey(c, splitmix64(s) % 6, low);
			v[i].docid = splitmix64(s) % 8;
			break;
		case M_HIGH:
			v[i].key = fkey(c, FRAG_MASK - splitmix64(s) % 6, low);
			v[i].docid = L1E_DOCMAX - splitmix64(s) % 8;
			break;
		default:
			v[i].key = ckey(c, splitmix64(s));
			v[i].docid = splitmix64(s) % 100000;
			break;
		}
	}
	qsort(v, n, sizeof *v, cmp_l1);
}

/* Seeded random merges, with and without many repeats. */
static void
test_merge_random(void **state)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 17, 100, 1000 };
	size_t		 ns = sizeof sizes / sizeof sizes[0], i, j;
	struct bentry	*old, *add;
	uint64_t	 s = 31, lives[7];
	unsigned	 c;
	int		 kind, k;

	old = xcalloc(1000, sizeof *old);
	add = xcalloc(1000, sizeof *add);
	for (i = 0; i < ns; i++) {
		for (j = 0; j < ns; j++) {
			for (kind = 0; kind < M_COUNT; kind++) {
				switch ((i + j + kind) % 4) {
				case 0:
					c = 0;
					break;
				case 1:
					c = LAST_CHUNK;
					break;
				default:
					c = (unsigned)(splitmix64(&s) %
					    BAND_CHUNKS);
					break;
				}
				random_entries(old, sizes[i], kind, c, &s);
				random_entries(add, sizes[j], kind, c, &s);
				lives[0] = 0;
				lives[1] = 1;
				lives[2] = kind == M_WIDE ? 50000 : (kind ==
				    M_NARROW ? 4 : L1E_DOCMAX - 3);
				lives[3] = sizes[i] ? old[sizes[i] / 2].docid :
				    3;
				lives[4] = L1E_DOCMAX;
				lives[5] = L1E_DOCMAX + 1;
				lives[6] = UINT64_MAX;
				for (k = 0; k < 7; k++)
					check_merge(c, old, sizes[i], add,
					    sizes[j], lives[k]);
			}
		}
	}
	/* Old entries merged again with a copy of some of them. */
	random_entries(old, 1000, M_WIDE, 9, &s);
	for (i = 0; i < 500; i++)
		add[i] = old[2 * i + (i % 2)];
	check_merge(9, old, 1000, add, 500, 0);
	check_merge(9, old, 1000, add, 500, 30000);
	/* The same with other low bits: still repeats. */
	for (i = 0; i < 500; i++)
		add[i].key ^= 1 + i % DROP_MASK;
	qsort(add, 500, sizeof *add, cmp_l1);
	check_merge(9, old, 1000, add, 500, 0);
	check_merge(9, old, 1000, add, 500, 30000);
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

/* Drop chunk c from both (after a commit, as lmdb.c does). */
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
 * sorted by the run's order (kept key bits, document number, key).  The
 * result, encoded, is in the l1 byte order, and merged into an empty run
 * it makes the run check_merge expects.  Called with whatever buffer the
 * caller holds.
 */
static void
check_sorted(struct memtable *mt, const struct model *m, unsigned c,
    struct bentry **buf, size_t *bufsize)
{
	struct bentry	*want;
	unsigned char	 ea[L1E_SIZE], eb[L1E_SIZE];
	size_t		 i, n, got, before = *bufsize;
	int		 small = 1;

	want = xcalloc(m->n + 1, sizeof *want);
	for (i = 0, n = 0; i < m->n; i++) {
		if (band_chunk(m->v[i].key) == c)
			want[n++] = m->v[i];
	}
	qsort(want, n, sizeof *want, cmp_l1);
	got = memtable_sorted(mt, c, buf, bufsize);
	if (got != n) {
		print_error("memtable_sorted(chunk %u): %zu entries, expected "
		    "%zu\n", c, got, n);
		fail();
	}
	assert_true(*bufsize >= n);
	assert_true(*bufsize >= before);
	for (i = 0; i < n; i++) {
		if (cmp_l1(&(*buf)[i], &want[i]) != 0) {
			print_error("memtable_sorted(chunk %u): entry %zu is "
			    "(%#llx, %llu), expected (%#llx, %llu)\n", c, i,
			    (unsigned long long)(*buf)[i].key,
			    (unsigned long long)(*buf)[i].docid,
			    (unsigned long long)want[i].key,
			    (unsigned long long)want[i].docid);
			fail();
		}
		if (want[i].docid > L1E_DOCMAX)
			small = 0;
	}
	if (small) {
		for (i = 1; i < n; i++) {
			enc_l1(ea, &(*buf)[i - 1]);
			enc_l1(eb, &(*buf)[i]);
			assert_true(memcmp(ea, eb, L1E_SIZE) <= 0);
		}
		check_merge(c, NULL, 0, *buf, n, 0);
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

	mt = memtable_create(1);
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

	mt = memtable_create(1);

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
 * memtable_sorted: a chunk's entries in bentry_cmp order, across its
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

	mt = memtable_create(1);

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

	/* One kept key: document number before the low bits, then key. */
	madd(mt, &m, skey(9, 3, 3), 2);
	madd(mt, &m, skey(9, 3, 0), 3);
	madd(mt, &m, skey(9, 3, DROP_MASK + 1), 1);
	madd(mt, &m, skey(9, 3, 1), 2);
	mcommit(mt, &m);
	assert_int_equal(memtable_sorted(mt, 9, &buf, &bufsize), 4);
	assert_true(buf[0].key == skey(9, 3, 1) && buf[0].docid == 2);
	assert_true(buf[1].key == skey(9, 3, 3) && buf[1].docid == 2);
	assert_true(buf[2].key == skey(9, 3, 0) && buf[2].docid == 3);
	assert_true(buf[3].key == skey(9, 3, DROP_MASK + 1) &&
	    buf[3].docid == 1);
	check_sorted(mt, &m, 9, &buf, &bufsize);
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

	mt = memtable_create(1);
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

	mt = memtable_create(1);
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

	mt = memtable_create(1);
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

/*
 * run_young: no young run for an old run below min (or none); a young run
 * while it stays within sqrt(2 * old * new).  Then a chunk that gets 128
 * entries a merge, from 10,000 to 110,000 entries: what the merges write in
 * all (young runs and old runs rewritten) stays within 2 * sqrt(2 * old *
 * new) + new a merge of the largest old run, and is at least five times
 * less than rewriting the old run every time.
 */
static void
test_run_young(void **state)
{
	size_t		 nold = 10000, ny = 0, nadd = 128, merges = 0;
	double		 written = 0, always = 0, bound;

	(void)state;
	assert_false(run_young(0, 0, 128, 0));
	assert_false(run_young(1000, 0, 128, 1024));
	assert_true(run_young(1024, 0, 128, 1024));
	assert_true(run_young(10000, 1400, 128, 1024));	/* 1528^2 <= 2.56M */
	assert_false(run_young(10000, 1500, 128, 1024));	/* 1628^2 > 2.56M */
	assert_true(run_young(10000, 0, 10000, 1024));
	assert_false(run_young(10000, 5000, 10000, 1024));	/* 15000^2 > 200M */

	while (nold + ny < 110000) {
		always += nold + ny + nadd;
		if (run_young(nold, ny, nadd, 1024)) {
			ny += nadd;
			written += ny;
		} else {
			nold += ny + nadd;
			ny = 0;
			written += nold;
		}
		merges++;
	}
	bound = 2 * sqrt(2.0 * nold * nadd) + nadd;
	if (written / merges > bound)
		fail_msg("%.0f entries written a merge, bound %.0f",
		    written / merges, bound);
	if (written * 5 > always)
		fail_msg("%.0f entries written, %.0f with one run", written,
		    always);
}

/* The known lengths of n runs by size_of, each read back by yrun_count. */
static void
run_size_kat(size_t (*size_of)(size_t), const size_t (*kat)[2], size_t n)
{
	size_t	 i, got;

	for (i = 0; i < n; i++) {
		assert_int_equal(size_of(kat[i][0]), kat[i][1]);
		assert_int_equal(yrun_count(kat[i][1], &got), 0);
		assert_int_equal(got, kat[i][0]);
	}
}

/*
 * yrun_size and yrun_count (index format 6): the lengths pinned; a run
 * under YRUN_PAD bytes padded past it, in one 4 KB page with LMDB's
 * 16-byte header, to a length that is no multiple of L1E_SIZE; longer
 * runs as they are; every length read back to its count, and every other
 * length either whole entries (format 5) or refused.
 */
static void
test_yrun(void **state)
{
	static const size_t	 kat[][2] = {
		{ 0, 2051 }, { 1, 2052 }, { 8, 2059 }, { 9, 2061 },
		{ 17, 2069 }, { 18, 2071 }, { 204, 2277 }, { 205, 2050 },
		{ 1000, 10000 },
	};
	unsigned char		 seen[4096] = { 0 };
	size_t			 i, n, size;

	(void)state;
	run_size_kat(yrun_size, kat, sizeof kat / sizeof kat[0]);
	for (n = 0; n < 100000; n++) {
		size = yrun_size(n);
		assert_true(size >= n * L1E_SIZE);
		if (n * L1E_SIZE < YRUN_PAD) {
			assert_true(size > YRUN_PAD && size + 16 <= 4096);
			assert_int_not_equal(size % L1E_SIZE, 0);
			assert_int_equal(seen[size], 0);
			seen[size] = 1;
		} else
			assert_int_equal(size, n * L1E_SIZE);
		assert_int_equal(yrun_count(size, &i), 0);
		assert_int_equal(i, n);
	}
	for (size = 0; size < sizeof seen; size++) {
		if (size % L1E_SIZE == 0) {
			assert_int_equal(yrun_count(size, &n), 0);
			assert_int_equal(n, size / L1E_SIZE);
		} else if (yrun_count(size, &n) == 0)
			assert_true(seen[size] && yrun_size(n) == size);
		else
			assert_false(seen[size]);
	}
}

/*
 * The stored lengths of old runs (index format 7): whole entries up to
 * ORUN_PAD bytes, then yrun_size's padded lengths up to half a page, then
 * whole entries; yrun_count reads each back.
 */
static void
test_orun(void **state)
{
	static const size_t	 kat[][2] = {
		{ 0, 0 }, { 1, 10 }, { 51, 510 }, { 52, 2108 },
		{ 204, 2277 }, { 205, 2050 }, { 1000, 10000 },
	};
	size_t			 i, n, size;

	(void)state;
	run_size_kat(orun_size, kat, sizeof kat / sizeof kat[0]);
	for (n = 0; n < 100000; n++) {
		size = orun_size(n);
		if (n * L1E_SIZE < ORUN_PAD || n * L1E_SIZE >= YRUN_PAD)
			assert_int_equal(size, n * L1E_SIZE);
		else
			assert_int_equal(size, yrun_size(n));
		assert_int_equal(yrun_count(size, &i), 0);
		assert_int_equal(i, n);
	}
}

/*
 * run_window_len and run_window_short: the widths pinned, and on uniform
 * runs of 1,000 to a million entries, the window run_window places around
 * where each of 2,000 keys of the run should be holds all of that key's
 * entries (run_find_window finds them, as run_find does), or says it may
 * not: the wide one all but once in the 8,000 lookups, the short one all
 * but 1% (about 0.3% expected).
 */
static void
test_window(void **state)
{
	static const size_t	 sizes[] = { 1000, 10000, 100000, 1000000 };
	struct bentry		*v;
	struct u64vec		 a = { 0 }, b = { 0 };
	unsigned char		*run;
	uint64_t		 s = 5;
	size_t			 si, n, i, k, from, m, w, misses[2] = { 0, 0 };
	unsigned		 c = 77, wide;

	(void)state;
	assert_int_equal(run_window_len(1000, 4096), 222);
	assert_int_equal(run_window_len(10000, 4096), 564);
	assert_int_equal(run_window_len(1000000, 4096), 4096);
	assert_int_equal(run_window_len(0, 4096), 64);
	assert_int_equal(run_window_short(1000, 4096), 95);
	assert_int_equal(run_window_short(0, 4096), 16);
	v = xcalloc(1000000, sizeof *v);
	run = xcalloc(1000000, L1E_SIZE);
	for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		n = sizes[si];
		random_run(v, n, c, D_UNIFORM, 0, &s);
		for (i = 0; i < n; i++)
			l1_put(run, i, &v[i]);
		for (k = 0; k < 4000; k++) {
			i = (size_t)(splitmix64(&s) % n);
			wide = k % 2;
			w = wide ? run_window_len(n, SIZE_MAX) :
			    run_window_short(n, SIZE_MAX);
			m = run_window(n, v[i].key, w, &from);
			a.n = b.n = 0;
			if (run_find_window(run + from * L1E_SIZE, from, m, n,
			    v[i].key, &a, 100) != 0) {
				assert_int_equal(a.n, 0);
				misses[wide]++;
				continue;
			}
			run_find(run, n, v[i].key, &b, 100);
			assert_true(a.n > 0 && a.n == b.n);
			assert_memory_equal(a.v, b.v, a.n * sizeof *a.v);
		}
	}
	if (misses[1] > 1 || misses[0] > 80)
		fail_msg("of 8000 windows, %zu wide and %zu short missed "
		    "their key", misses[1], misses[0]);
	u64vec_free(&a);
	u64vec_free(&b);
	free(run);
	free(v);
}

/*
 * l0_sort: for several sweep positions, the record holds the same entries,
 * in order of l0_offset, and in the given order within one offset (here
 * the document numbers, which grow); l0_in_order agrees, and finds two
 * entries of different offsets swapped.  Keys fall in 64 chunks, so that
 * offsets repeat.
 */
static void
test_l0_sort(void **state)
{
	static const unsigned	 wms[] = { 0, 1, 5000, BAND_CHUNKS - 1 };
	struct bentry		 e[2000], g, h;
	unsigned char		 rec[2000 * BENTRY_SIZE], t[BENTRY_SIZE];
	size_t			*count, i, n = 2000, w, last = 0;
	uint64_t		 s = 7, sum = 0, got;

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	for (i = 0; i < n; i++) {
		e[i].key = (splitmix64(&s) % 64 * 257) <<
		    (64 - BAND_CHUNK_BITS) | splitmix64(&s) >> BAND_CHUNK_BITS;
		e[i].docid = i + 1;
		sum += e[i].key ^ e[i].docid;
	}
	for (w = 0; w < sizeof wms / sizeof wms[0]; w++) {
		l0_sort(e, n, wms[w], count, rec);
		got = 0;
		for (i = 0; i < n; i++) {
			run_get(rec, i, &g);
			got += g.key ^ g.docid;
			if (i == 0)
				continue;
			run_get(rec, i - 1, &h);
			assert_true(l0_offset(h.key, wms[w]) <=
			    l0_offset(g.key, wms[w]));
			if (l0_offset(h.key, wms[w]) == l0_offset(g.key,
			    wms[w]))
				assert_true(h.docid < g.docid);
			else
				last = i;
		}
		assert_true(got == sum);
		assert_true(l0_in_order(rec, n, wms[w]));
		memcpy(t, rec, BENTRY_SIZE);		/* the first and the */
		memcpy(rec, rec + last * BENTRY_SIZE, BENTRY_SIZE);
		memcpy(rec + last * BENTRY_SIZE, t, BENTRY_SIZE);
		assert_false(l0_in_order(rec, n, wms[w]));
	}
	free(count);
}

/*
 * l0_live_window, on the window l0_window places, gives the first entry
 * of l0_offset passed or more, as a scan does, or says it cannot: for
 * records of uniform keys it almost always can.  A window that misses
 * the entry says so, and one that starts at the record's start or ends at
 * its end needs nothing beyond it.
 */
static void
test_l0_window(void **state)
{
	static const size_t	 sizes[] = { 0, 1, 10, 1000, 49000 };
	struct bentry		*e;
	unsigned char		*rec;
	size_t			*count, k, n, from, m, at, want, t, found = 0,
				 tries = 0;
	uint64_t		 s = 11, passed;
	unsigned		 wm;

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	e = xcalloc(49000, sizeof *e);
	rec = xmalloc(49000 * BENTRY_SIZE);
	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		n = sizes[k];
		for (t = 0; t < 20; t++) {
			wm = (unsigned)(splitmix64(&s) % BAND_CHUNKS);
			uniform_entries(e, n, &s);
			l0_sort(e, n, wm, count, rec);
			passed = t == 0 ? 0 : t == 1 ? BAND_CHUNKS - 1 :
			    splitmix64(&s) % BAND_CHUNKS;
			for (want = 0; want < n && l0_offset(get_le64(rec +
			    want * BENTRY_SIZE), wm) < passed; want++)
				;
			m = l0_window(n, passed, run_window_len(n, 4096),
			    &from);
			assert_true(from + m <= n);
			tries++;
			if (l0_live_window(rec + from * BENTRY_SIZE, from, m,
			    n, wm, passed, &at)) {
				assert_int_equal(at, want);
				found++;
			}
			/* A window of 10 entries at the start, or the end. */
			if (n < 1000)
				continue;
			if (l0_live_window(rec, 0, 10, n, wm, passed, &at))
				assert_int_equal(at, want);
			else
				assert_true(want >= 10);
			if (l0_live_window(rec + (n - 10) * BENTRY_SIZE,
			    n - 10, 10, n, wm, passed, &at))
				assert_int_equal(at, want);
			else
				assert_true(want <= n - 10);
		}
	}
	assert_true(found >= tries - 2);
	free(rec);
	free(e);
	free(count);
}

/*
 * l0f_write: for records of several sizes and sweep positions, the header
 * reads back as the layout (l0f_parse); the entries are l0_sort's; the
 * directory places each group's entries (all of them of that group, in
 * their l0_offset order) and is sound; every entry's key tests positive in
 * its block, which lies at or past the first block of its offset; and of
 * 100,000 keys in no record, few do (16 bits an entry: about 1 in 750 in
 * 4 million probes of 20 records of 64,000 entries; the test allows 1 in
 * 400).
 */
static void
test_l0f_write(void **state)
{
	static const size_t	 sizes[] = { L0F_MIN, 5000, 64000 };
	static const unsigned	 wms[] = { 0, 9000, BAND_CHUNKS - 1 };
	struct l0layout		 l, p;
	struct bentry		*e, g;
	uint32_t		 dir[(1U << L0F_GBITS_MAX) + 1];
	unsigned char		*rec, *want;
	size_t			*count, i, k, w, n, gr, G, blk, fp = 0, probes = 0;
	uint64_t		 s = 23, m[4], key;
	unsigned		 shift, o;

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	e = xcalloc(64000, sizeof *e);
	want = xmalloc(64000 * BENTRY_SIZE);
	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		n = sizes[k];
		l0f_layout(n, &l);
		G = (size_t)1 << l.gbits;
		shift = BAND_CHUNK_BITS - l.gbits;
		assert_true(l.nb * L0F_BLOCK * 8 >= n * L0F_BITS);
		assert_true(n / G >= 64 || l.gbits == 0);
		assert_true(n / G < 128 || l.gbits == L0F_GBITS_MAX);
		for (w = 0; w < sizeof wms / sizeof wms[0]; w++) {
			uniform_entries(e, n, &s);
			rec = xmalloc(l.size);
			l0f_write(e, wms[w] + 3 * BAND_CHUNKS, count, &l, rec);
			assert_int_equal(get_le64(rec), (wms[w] + 3 *
			    BAND_CHUNKS) | L0_SORTED | L0_FILTERED);
			assert_int_equal(l0f_parse(rec, l.size, &p), 0);
			assert_int_equal(p.n, l.n);
			assert_int_equal(p.gbits, l.gbits);
			assert_int_equal(p.nb, l.nb);
			assert_int_equal(p.entries, l.entries);
			assert_int_equal(p.size, l.size);
			l0_sort(e, n, wms[w], count, want);
			assert_memory_equal(rec + l.entries, want,
			    n * BENTRY_SIZE);
			assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir),
			    0);
			for (gr = 0; gr < G; gr++)
				for (i = dir[gr]; i < dir[gr + 1]; i++) {
					run_get(rec + l.entries, i, &g);
					assert_int_equal(l0_offset(g.key,
					    wms[w]) >> shift, gr);
				}
			for (i = 0; i < n; i++) {
				key = e[i].key;
				o = l0_offset(key, wms[w]);
				blk = l0f_block(key, wms[w], l.nb);
				assert_true(blk < l.nb);
				assert_true(blk >= l0f_first_block(o, l.nb));
				l0f_mask(key, m);
				assert_true(l0f_has(rec + l.filter + blk *
				    L0F_BLOCK, m));
			}
			for (i = 0; i < 100000 / 9; i++) {
				key = splitmix64(&s);
				l0f_mask(key, m);
				fp += l0f_has(rec + l.filter + L0F_BLOCK *
				    l0f_block(key, wms[w], l.nb), m);
				probes++;
			}
			free(rec);
		}
	}
	assert_int_equal(l0f_first_block(BAND_CHUNKS, 10), 10);
	assert_int_equal(l0f_first_block(0, 10), 0);
	if (fp * 400 > probes)
		fail_msg("%zu of %zu keys in no record test positive", fp,
		    probes);
	free(want);
	free(e);
	free(count);
}

/*
 * l0f_probe marks the group of every key of a record whose chunk the sweep
 * has not passed, from the filter's blocks of those chunks alone, and
 * none for keys of passed chunks; of keys in no record, it marks few
 * groups beyond the first (where the entries not merged begin, which a
 * reader marks itself) for all those it tests.
 */
static void
test_l0f_probe(void **state)
{
	static const uint64_t	 passes[] = { 0, 1, 5000, BAND_CHUNKS - 1 };
	struct l0layout		 l;
	struct bentry		*e;
	struct l0key		*k;
	unsigned char		*rec, gm[(1U << L0F_GBITS_MAX) / 8 + 1];
	size_t			*count, i, t, n = 20000, nk = 1600, b0, marked;
	uint64_t		 s = 41, passed;
	unsigned		 wm = 9000, shift, o, g;

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	e = xcalloc(n, sizeof *e);
	k = xcalloc(nk, sizeof *k);
	uniform_entries(e, n, &s);
	l0f_layout(n, &l);
	shift = BAND_CHUNK_BITS - l.gbits;
	rec = xmalloc(l.size);
	l0f_write(e, wm, count, &l, rec);
	for (t = 0; t < sizeof passes / sizeof passes[0]; t++) {
		passed = passes[t];
		b0 = l0f_first_block(passed, l.nb);
		/* Every 20th entry's key, sorted, as a batch's keys are. */
		for (i = 0; i < nk; i++)
			k[i].key = e[i * (n / nk)].key;
		qsort(k, nk, sizeof *k, bentry_cmp);	/* key first */
		for (i = 0; i < nk; i++)
			l0f_mask(k[i].key, k[i].m);
		memset(gm, 0, sizeof gm);
		l0f_probe(rec + l.filter + b0 * L0F_BLOCK, b0, &l, wm,
		    passed, k, nk, gm);
		for (i = 0; i < nk; i++) {
			o = l0_offset(k[i].key, wm);
			g = o >> shift;
			if (o >= passed)
				assert_true(gm[g / 8] >> (g % 8) & 1);
		}
		for (g = 0; g < (passed >> shift); g++)
			assert_false(gm[g / 8] >> (g % 8) & 1);
		/* Keys in no record. */
		for (i = 0; i < nk; i++)
			k[i].key = splitmix64(&s);
		qsort(k, nk, sizeof *k, bentry_cmp);
		for (i = 0; i < nk; i++)
			l0f_mask(k[i].key, k[i].m);
		memset(gm, 0, sizeof gm);
		l0f_probe(rec + l.filter + b0 * L0F_BLOCK, b0, &l, wm,
		    passed, k, nk, gm);
		for (g = 0, marked = 0; g < (1U << l.gbits); g++)
			marked += gm[g / 8] >> (g % 8) & 1;
		assert_true(marked <= 10);
	}
	/*
	 * A key of a chunk before wm alone (all the keys after the first
	 * chunk not passed, here wm): the first live key is the first.
	 */
	for (i = 0, nk = 0; i < n && nk < 20; i++) {
		if (band_chunk(e[i].key) >= wm)
			continue;
		k[0].key = e[i].key;
		l0f_mask(k[0].key, k[0].m);
		memset(gm, 0, sizeof gm);
		l0f_probe(rec + l.filter, 0, &l, wm, 0, k, 1, gm);
		g = l0_offset(k[0].key, wm) >> shift;
		assert_true(gm[g / 8] >> (g % 8) & 1);
		nk++;
	}
	assert_int_equal(nk, 20);
	free(rec);
	free(k);
	free(e);
	free(count);
}

/*
 * Known answers for format 8's filtered l0 record, so that a change to
 * what is stored fails here: 1,024 entries of splitmix64 keys from seed 1
 * (documents 1 to 1,024), written at sweep position 12,345, hash to this
 * (XXH3-64 of the whole record); and one key's mask and block.
 */
static void
test_l0f_vector(void **state)
{
	static const uint64_t	 want[4] = {
		0x0008000000040000ULL, 0x0080000040000000ULL,
		0x0001000000000010ULL, 0x0100000000001000ULL
	};
	struct bentry		 e[1024];
	struct l0layout		 l;
	unsigned char		*rec;
	size_t			*count;
	uint64_t		 s = 1, m[4];

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	uniform_entries(e, 1024, &s);
	l0f_layout(1024, &l);
	assert_int_equal(l.size, 18516);
	assert_int_equal(l.gbits, 4);
	assert_int_equal(l.nb, 64);
	rec = xmalloc(l.size);
	l0f_write(e, 12345, count, &l, rec);
	assert_int_equal(XXH3_64bits(rec, l.size), 0xcdd5cff5f32c509aULL);
	l0f_mask(0x0123456789abcdefULL, m);
	assert_memory_equal(m, want, sizeof want);
	assert_int_equal(l0f_block(0x0123456789abcdefULL, 12345 % BAND_CHUNKS,
	    l.nb), 16);
	free(rec);
	free(count);
}

/*
 * A damaged header or directory is refused: a count, group bits or length
 * that do not agree, a non-zero reserved byte; a directory that does not
 * start at 0, end at n, or goes down.
 */
static void
test_l0f_damage(void **state)
{
	struct l0layout		 l, p;
	struct bentry		*e;
	uint32_t		 dir[(1U << L0F_GBITS_MAX) + 1];
	unsigned char		*rec, save[4];
	size_t			*count, i, n = 3000;
	uint64_t		 s = 5;

	(void)state;
	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	e = xcalloc(n, sizeof *e);
	uniform_entries(e, n, &s);
	l0f_layout(n, &l);
	rec = xmalloc(l.size);
	l0f_write(e, 77, count, &l, rec);
	assert_int_equal(l0f_parse(rec, l.size, &p), 0);
	assert_int_equal(l0f_parse(rec, l.size - 1, &p), -1);
	assert_int_equal(l0f_parse(rec, l.size + BENTRY_SIZE, &p), -1);
	rec[8]++;					/* n */
	assert_int_equal(l0f_parse(rec, l.size, &p), -1);
	rec[8]--;
	rec[12]++;					/* gbits */
	assert_int_equal(l0f_parse(rec, l.size, &p), -1);
	rec[12]--;
	rec[14] = 1;
	assert_int_equal(l0f_parse(rec, l.size, &p), -1);
	rec[14] = 0;
	put_le32(rec + 8, 100);				/* under L0F_MIN */
	assert_int_equal(l0f_parse(rec, l.size, &p), -1);
	put_le32(rec + 8, (uint32_t)n);
	assert_int_equal(l0f_parse(rec, l.size, &p), 0);

	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), 0);
	memcpy(save, rec + l.dir, 4);
	put_le32(rec + l.dir, 1);			/* dir[0] */
	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), -1);
	memcpy(rec + l.dir, save, 4);
	i = 4 * ((size_t)1 << l.gbits);
	memcpy(save, rec + l.dir + i, 4);
	put_le32(rec + l.dir + i, (uint32_t)n + 1);	/* dir[G] */
	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), -1);
	memcpy(rec + l.dir + i, save, 4);
	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), 0);
	memcpy(save, rec + l.dir + 8, 4);
	put_le32(rec + l.dir + 8, dir[3] + 1);		/* dir[2] > dir[3] */
	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), -1);
	memcpy(rec + l.dir + 8, save, 4);
	assert_int_equal(l0f_dir_read(rec + l.dir, &l, dir), 0);
	free(rec);
	free(e);
	free(count);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_le64),
		cmocka_unit_test(test_run_layout),
		cmocka_unit_test(test_l1_layout),
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
		cmocka_unit_test(test_run_young),
		cmocka_unit_test(test_yrun),
		cmocka_unit_test(test_orun),
		cmocka_unit_test(test_l0_sort),
		cmocka_unit_test(test_l0_window),
		cmocka_unit_test(test_l0f_write),
		cmocka_unit_test(test_l0f_vector),
		cmocka_unit_test(test_l0f_probe),
		cmocka_unit_test(test_l0f_damage),
		cmocka_unit_test(test_window),
	};

	alarm(120);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, teardown_group));
}
