/*
 * MinHash signatures by one-permutation hashing with optimal densification
 * (Li, Owen & Zhang 2012; Shrivastava, "Optimal Densification for Fast and
 * Accurate Minwise Hashing", ICML 2017).
 *
 * Classic MinHash hashes every shingle K times; here each shingle hash (from
 * shingle.c, already XXH3 output) is used once: its high 32 bits choose one
 * of K bins by multiply-shift, its low 32 bits are the value, and each bin
 * keeps its minimum.  That is O(n + K) for n shingles.  A bin no shingle fell
 * into is filled from another bin chosen by a hash of (bin, attempt) alone,
 * retried until a non-empty bin is hit.  Because the probe sequence is the
 * same for every document, two documents' values at a position agree with
 * probability equal to their Jaccard similarity, so equal-position counting
 * stays an unbiased estimator.
 *
 * Each bin keeps the least low half (32 bits) of its hashes; UINT32_MAX
 * marks an empty bin during signing.  The finished signature keeps the top
 * 16 bits of each minimum (b-bit minwise hashing, Li & Koenig 2010, with
 * b = 16): two different minima collide with probability 2^-16, which
 * biases an estimate by at most (1 - J) / 65536, far below its standard
 * error, and halves what the index stores.  The band keys are made from
 * these 16-bit values too, so a stored signature is all that is needed to
 * rebuild a document's band entries.  Values travel in uint32_t arrays.
 */

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL		/* the probes hash 8 bytes: inline it */
#include <xxhash.h>

#include "mhfilter.h"

#ifdef MHF_AVX2
#include <immintrin.h>
#endif

#define EMPTY		UINT32_MAX
#define NONE		(1ULL << 32)	/* no hash in a bin yet */
#define PROBE_SALT	0x9e3779b97f4a7c15ULL

/* The bin a 64-bit hash falls into, by multiply-shift on its high half. */
static inline unsigned
bin_of(uint64_t x, unsigned k)
{
	return ((unsigned)(((x >> 32) * (uint64_t)k) >> 32));
}

/* The bin that probe attempt a for empty bin i looks at. */
static unsigned
probe(unsigned i, unsigned a, unsigned k, uint64_t seed)
{
	unsigned char	 in[8];

	put_le32(in, i);
	put_le32(in + 4, a);
	return (bin_of(XXH3_64bits_withSeed(in, sizeof in, seed ^ PROBE_SALT),
	    k));
}

/*
 * The probe sequence does not depend on the document, and short texts
 * leave most bins empty (a 70-character text fills about 40 of 128), so
 * the first PROBES_CACHED probes of every bin are computed once for the
 * (k, seed) in use and shared by all threads.  Later attempts, and other
 * (k, seed) pairs, are computed as needed.
 */
#define PROBES_CACHED	32
#define TABLES		8

static pthread_mutex_t	 probes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint16_t	*t;		/* k x PROBES_CACHED */
	unsigned	 k;
	uint64_t	 seed;
} tables[TABLES];			/* kept to the end: threads share them */
static atomic_uint	 ntables;	/* tables[0, ntables) are complete */

/* The table for (k, seed) among the first n, or NULL. */
static const uint16_t *
probe_find(unsigned n, unsigned k, uint64_t seed)
{
	unsigned	 x;

	for (x = 0; x < n; x++)
		if (tables[x].k == k && tables[x].seed == seed)
			return (tables[x].t);
	return (NULL);
}

/*
 * The cached probe table for (k, seed), made on first use, or NULL.  Every
 * signature asks, from every worker thread: a table is published by
 * ntables (release) once complete and never changes, so finding one takes
 * no lock; only making one does.
 */
static const uint16_t *
probe_table(unsigned k, uint64_t seed)
{
	const uint16_t	*t;
	uint16_t	*n;
	unsigned	 i, a, x;

	x = atomic_load_explicit(&ntables, memory_order_acquire);
	if ((t = probe_find(x, k, seed)) != NULL)
		return (t);
	pthread_mutex_lock(&probes_lock);
	x = atomic_load_explicit(&ntables, memory_order_relaxed);
	if ((t = probe_find(x, k, seed)) == NULL && x < TABLES) {
		n = xreallocarray(NULL, k, PROBES_CACHED * sizeof *n);
		for (i = 0; i < k; i++)
			for (a = 0; a < PROBES_CACHED; a++)
				n[i * PROBES_CACHED + a] = probe(i, a + 1, k,
				    seed);
		tables[x].t = n;
		tables[x].k = k;
		tables[x].seed = seed;
		atomic_store_explicit(&ntables, x + 1, memory_order_release);
		t = n;
	}
	pthread_mutex_unlock(&probes_lock);
	return (t);
}

/* Was bin i filled by a hash (not by densification)? */
#define IS_FULL(full, i)	((full)[(i) / 64] >> ((i) % 64) & 1)

/*
 * The first of a bin's cached probes that hits a full bin, or
 * PROBES_CACHED.  Short texts leave many bins empty, and testing the probes
 * one by one mispredicted a branch per probe: test eight at a time into a
 * mask instead, the loop has no data-dependent branch inside.
 */
static unsigned
first_full(const uint16_t *t, const uint64_t *full)
{
	unsigned	 a, x, hit;

	for (a = 0; a < PROBES_CACHED; a += 8) {
		hit = 0;
		for (x = 0; x < 8; x++)
			hit |= (unsigned)IS_FULL(full, t[a + x]) << x;
		if (hit != 0) {
#if defined(__GNUC__)
			return (a + (unsigned)__builtin_ctz(hit));
#else
			for (x = 0; !(hit & 1U << x); x++)
				;
			return (a + x);
#endif
		}
	}
	return (PROBES_CACHED);
}

/*
 * A hash x into bin b: the bin keeps the least of their low halves (in 64
 * bits, NONE while no hash fell into it).
 */
#define LEAST(b, x) do {						\
	uint64_t	 v_ = (uint32_t)(x);				\
	unsigned	 b_ = (unsigned)(b);				\
									\
	least[b_] = v_ < least[b_] ? v_ : least[b_];			\
} while (0)

#ifdef MHF_AVX2
/*
 * Long texts with AVX-512 and K = 128, the default: most hashes cannot
 * lower their bin's least (about 2^32 K / n of n hashes), and looking each
 * one's bin up is most of the plain loop's signing.  So the 128 leasts, in
 * 32 bits (l32: NONE becomes EMPTY), are held in eight registers and
 * looked up 16 hashes at once (two-table permutes of 32 entries, then two
 * blends by the bin's top bits).  A chunk of up to FILTER_CHUNK hashes
 * leaves a bit for each hash at or below its bin's least in the bitmap
 * pass; those hashes then go to their bins one by one, and the registers
 * are loaded again for the next chunk.  The leasts a chunk compares with
 * may be a chunk old: larger, never smaller, so no hash that lowers one is
 * left out (nor one of low half EMPTY in a bin that had none: "at or
 * below"), and each least is what the plain loop finds.  Returns how many
 * hashes were done, a whole number of groups of 16.
 *
 * Why a bitmap and chunks of 256.  Compressing the passing hashes into an
 * array (vpcompressq) made each group's store wait on the count before
 * it, and reloading the registers right after the scalar stores to l32
 * stalls on store forwarding once a chunk: with chunks of 128 the filter
 * took 0.64 ns a hash on the corpus's texts of 1 KB or more, with the
 * bitmap and chunks of 256 0.43 (512 and 1,024 were slower again: staler
 * leasts let more hashes through).  Each 64-bit word of the bitmap is
 * built in a register and stored once: or-ed into in memory, it made each
 * group of 16 wait for the store of the one before.
 */
#define FILTER_MIN	256
#define FILTER_CHUNK	256

__attribute__((target("avx512f"))) static size_t
sign_filter_avx512(const uint64_t *h, size_t n, uint64_t *least)
{
	uint64_t	 pass[FILTER_CHUNK / 64], m, v, x;
	uint32_t	 l32[128];
	__m512i		 l[8], a, b, lo, hi, bin, t, even, odd;
	size_t		 s, g, ng, j;
	int		 r;

	for (j = 0; j < 128; j++)
		l32[j] = least[j] < EMPTY ? least[j] : EMPTY;
	even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
	    24, 26, 28, 30);
	odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	for (s = 0; n - s >= 16; s += 16 * ng) {
		ng = (n - s) / 16;
		if (ng > FILTER_CHUNK / 16)
			ng = FILTER_CHUNK / 16;
		for (r = 0; r < 8; r++)
			l[r] = _mm512_loadu_si512(l32 + 16 * r);
		for (g = 0; g < ng; g++) {
			if (g % 4 == 0)
				m = 0;
			a = _mm512_loadu_si512(h + s + 16 * g);
			b = _mm512_loadu_si512(h + s + 16 * g + 8);
			lo = _mm512_permutex2var_epi32(a, even, b);
			hi = _mm512_permutex2var_epi32(a, odd, b);
			bin = _mm512_srli_epi32(hi, 25);
			/* Bins 0-31, 32-63, 64-95, 96-127 by bit 5, then 6. */
			t = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(bin,
			    _mm512_set1_epi32(64)), _mm512_mask_blend_epi32(
			    _mm512_test_epi32_mask(bin, _mm512_set1_epi32(32)),
			    _mm512_permutex2var_epi32(l[0], bin, l[1]),
			    _mm512_permutex2var_epi32(l[2], bin, l[3])),
			    _mm512_mask_blend_epi32(_mm512_test_epi32_mask(bin,
			    _mm512_set1_epi32(32)),
			    _mm512_permutex2var_epi32(l[4], bin, l[5]),
			    _mm512_permutex2var_epi32(l[6], bin, l[7])));
			/* Lane i is hash s + 16 g + i (the permutes above). */
			m |= (uint64_t)_mm512_cmple_epu32_mask(lo, t) <<
			    (16 * (g % 4));
			if (g % 4 == 3 || g + 1 == ng)
				pass[g / 4] = m;
		}
		for (j = 0; j < (ng + 3) / 4; j++) {
			for (m = pass[j]; m != 0; m &= m - 1) {
				x = h[s + 64 * j + (size_t)__builtin_ctzll(m)];
				LEAST(x >> 57, x);
				v = least[x >> 57];
				l32[x >> 57] = v < EMPTY ? v : EMPTY;
			}
		}
	}
	return (s);
}
#endif

/*
 * Sign a multiset of n shingle hashes into k values.  An empty set gives an
 * all-EMPTY signature (callers do not index empty texts).
 */
void
minhash_sign(const uint64_t *h, size_t n, unsigned k, uint64_t seed,
    uint32_t *sig)
{
	uint64_t	 least[MHF_MAX_PERMS];
	unsigned	 i, j, a, shift, filled = 0;
	size_t		 s;
	uint64_t	 full[MHF_MAX_PERMS / 64];	/* bins filled by hashes */
	const uint16_t	*table;

	/*
	 * A bin's least value is kept in 64 bits, NONE while no hash fell
	 * into it, so that a low half of EMPTY needs no test in this loop,
	 * the inner loop of signing: it becomes EMPTY - 1 below, as the least
	 * of a bin it is the only value that bin had.
	 */
	for (i = 0; i < k; i++)
		least[i] = NONE;
	if (k > 1 && (k & (k - 1)) == 0) {
		/*
		 * K = 2^m, the default: bin_of is the top m bits, one shift
		 * instead of a multiply and a shift.  Without a branch: which
		 * way it goes is a coin toss.
		 */
		for (shift = 64, j = k; j > 1; j >>= 1)
			shift--;
		s = 0;
#ifdef MHF_AVX2
		if (k == 128 && n >= FILTER_MIN && simd_avx512())
			s = sign_filter_avx512(h, n, least);
#endif
		for (; s < n; s++)
			LEAST(h[s] >> shift, h[s]);
	} else {
		for (s = 0; s < n; s++)
			LEAST(bin_of(h[s], k), h[s]);
	}

	memset(full, 0, sizeof full);
	for (i = 0; i < k; i++) {
		if (least[i] == NONE)
			sig[i] = EMPTY;
		else
			sig[i] = least[i] < EMPTY ? least[i] : EMPTY - 1;
		full[i / 64] |= (uint64_t)(least[i] != NONE) << (i % 64);
		filled += least[i] != NONE;
	}
	if (filled == 0 || filled == k)
		goto done;
	table = probe_table(k, seed);
	for (i = 0; i < k; i++) {
		if (IS_FULL(full, i))
			continue;
		a = 1;
		if (table != NULL) {
			a = first_full(table + i * PROBES_CACHED, full);
			if (a < PROBES_CACHED) {
				sig[i] = sig[table[i * PROBES_CACHED + a]];
				continue;
			}
			a = PROBES_CACHED + 1;
		}
		for (;; a++) {
			j = probe(i, a, k, seed);
			if (IS_FULL(full, j)) {
				sig[i] = sig[j];
				break;
			}
			if (a == 64 * k) {
				/* Astronomically rare: take the next full bin. */
				for (j = (i + 1) % k; !IS_FULL(full, j);
				    j = (j + 1) % k)
					;
				sig[i] = sig[j];
				break;
			}
		}
	}
done:
	for (i = 0; i < k; i++)
		sig[i] >>= 16;
}

/* Estimated Jaccard similarity: the share of equal positions. */
double
minhash_similarity(const uint32_t *a, const uint32_t *b, unsigned k)
{
	unsigned	 i, same = 0;

	for (i = 0; i < k; i++)
		same += a[i] == b[i];
	return ((double)same / k);
}
