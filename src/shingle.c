/*
 * Shingles: every run of n consecutive units of the normalised text, hashed
 * with XXH3-64 and the index's seed.  A unit is a character (a Unicode code
 * point, or a byte when the text is not valid UTF-8) or a word (a maximal
 * run of bytes that are not ASCII white space).  A text shorter than n units
 * is one shingle; an empty text has none.
 *
 * A shingle's hash is XXH3_64bits_withSeed() over its UTF-8 bytes exactly as
 * they stand in the normalised text (for words, with the separators between
 * them), so the value depends on nothing but the text, n and the seed.
 *
 * Exact verification needs the shingles' identity, not the signature
 * scheme's hash, and hashing every shingle of a candidate's text would be
 * a tenth of the index writer's time.  So shingle_keys gives each shingle a
 * key instead: a shingle of at most 7 ASCII bytes (at the default of 5
 * characters, nearly all of them) is its own key, its bytes as a
 * little-endian number with the length in the top byte; any other is
 * keyed by its hash with the top bit set, which no such number has.  A key
 * depends on the shingle's bytes alone, whichever loop below made it, and
 * is never 0.  Keys stay in memory; nothing stores them.
 */

#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Hashing a shingle is the inner loop: compile XXH3 in (Debian's xxhash.h
 * carries the implementation) so the short-input path is inlined.  The
 * values are XXH3's, the same as the library's.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mhfilter.h"

#ifdef MHF_AVX2
#include <immintrin.h>
#endif

/* The ring of character starts: a power of two above MHF_MAX_SHINGLE. */
#define RING		128

/* ASCII in UTF-8 text: runs of n + RUN_MIN bytes are hashed at once. */
#define RUN_MIN		16

static size_t	shingle_chars(const struct shingler *, const unsigned char *,
		    size_t, int, int, struct u64vec *);
static void	ascii_hashes(const struct shingler *, const unsigned char *,
		    size_t, size_t, uint64_t *);
static void	ascii_windows(const struct shingler *, const unsigned char *,
		    size_t, size_t, int, uint64_t *);
#ifdef MHF_AVX2
static size_t	ascii_keys_avx2(const unsigned char *, size_t, size_t,
		    uint64_t *);
static size_t	ascii_hashes_avx2(const unsigned char *, size_t, size_t,
		    uint64_t, uint64_t *);
static size_t	ascii_hashes_avx512(const unsigned char *, size_t, size_t,
		    uint64_t, uint64_t *);
#endif
static size_t	shingle_words(const struct shingler *, const unsigned char *,
		    size_t, int, struct u64vec *);

/* Is this byte a word separator? */
static inline int
is_sep(unsigned char c)
{
	return (c == ' ' || (c >= '\t' && c <= '\r'));
}

#define KEY_MAX		7		/* bytes of a shingle that is its key */
#define KEY_HASHED	(1ULL << 63)

/* Up to 8 bytes as a little-endian number (len < 8: zero-extended). */
static inline uint64_t
load_le(const unsigned char *p, size_t len)
{
	uint64_t	 x = 0;
	size_t		 i;

	if (len == 8) {
		memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		x = __builtin_bswap64(x);
#endif
		return (x);
	}
	for (i = 0; i < len; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return (x);
}

/*
 * The key of a shingle of len <= KEY_MAX ASCII bytes, avail of them
 * readable from p: one 8-byte load when there is room for it.
 */
static inline uint64_t
ascii_key(const unsigned char *p, size_t len, size_t avail)
{
	uint64_t	 tag = (uint64_t)len << 56;

	if (avail >= 8)
		return ((load_le(p, 8) & ((1ULL << (8 * len)) - 1)) | tag);
	return (load_le(p, len) | tag);
}

/*
 * A shingle's key for verification (see the top of the file), when it is
 * not known to be ASCII.  Its few bytes are tested inline: this runs once
 * per window of texts that are not valid UTF-8.
 */
static inline uint64_t
shingle_key(const struct shingler *sh, const unsigned char *p, size_t len,
    size_t avail)
{
	unsigned char	 any = 0;
	size_t		 i;

	if (len <= KEY_MAX) {
		for (i = 0; i < len; i++)
			any |= p[i];
		if (any < 0x80)
			return (ascii_key(p, len, avail));
	}
	return (XXH3_64bits_withSeed(p, len, sh->seed) | KEY_HASHED);
}

/*
 * Add one shingle's hash, or with keys its key; avail bytes are readable
 * from p.
 */
static inline void
shingle_add(const struct shingler *sh, const unsigned char *p, size_t len,
    size_t avail, int keys, struct u64vec *out)
{
	u64vec_push(out, keys ? shingle_key(sh, p, len, avail) :
	    XXH3_64bits_withSeed(p, len, sh->seed));
}

/*
 * The keys of every n-byte window of p[0, len), ASCII, n <= KEY_MAX: one
 * 8-byte load per window while 8 bytes are left, then byte by byte.
 */
static void
ascii_keys(const unsigned char *p, size_t len, size_t n, uint64_t *out)
{
	size_t	 i = 0;

#ifdef MHF_AVX2
	if (simd_avx2())
		i = ascii_keys_avx2(p, len, n, out);
#endif
	for (; i + n <= len; i++)
		out[i] = ascii_key(p + i, n, len - i);
}

/*
 * XXH3_64bits_withSeed of 4 to 8 bytes, as XXH3_len_4to8_64b in xxhash.h
 * computes it: the first 4 bytes as the high half of a number and the last
 * 4 as its low half, xored with bitflip (a function of the seed and XXH3's
 * secret alone, so computed once a text: see xxh3_bitflip), then mixed.
 * shingle_chars calls this for every window of ASCII text, the most common
 * case there is; the compiler did not hoist the seed's part out of the
 * loop, as each store to out->v might have changed sh->seed.
 */
static inline uint64_t
xxh3_4to8(uint64_t in, uint64_t bitflip, size_t n)
{
	uint64_t	 h = in ^ bitflip;

	h ^= (h << 49 | h >> 15) ^ (h << 24 | h >> 40);
	h *= 0x9fb21c651e98df25ULL;
	h ^= (h >> 35) + n;
	h *= 0x9fb21c651e98df25ULL;
	return (h ^ h >> 28);
}

/* The part of XXH3_len_4to8_64b that depends on the seed alone. */
static inline uint64_t
xxh3_bitflip(uint64_t seed)
{
	seed ^= (uint64_t)XXH_swap32((uint32_t)seed) << 32;
	return ((XXH_readLE64(XXH3_kSecret + 8) ^
	    XXH_readLE64(XXH3_kSecret + 16)) - seed);
}

/*
 * Hash every n-byte window (4 <= n <= 8) of p[0, len) into out: one 8-byte
 * load a window while there are 8 bytes, then two 4-byte loads.  With n
 * a constant the shifts are too.
 */
#define ASCII_4TO8(n) do {						\
	for (; i + 8 <= len; i++) {					\
		x = load_le(p + i, 8);					\
		out[i] = xxh3_4to8(x << 32 | (uint32_t)(x >> 8 * ((n) - 4)), \
		    bitflip, (n));					\
	}								\
	for (; i + (n) <= len; i++) {					\
		x = (uint64_t)XXH_readLE32(p + i) << 32 |		\
		    XXH_readLE32(p + i + (n) - 4);			\
		out[i] = xxh3_4to8(x, bitflip, (n));			\
	}								\
} while (0)

/*
 * Hash every n-byte window of p[0, len), ASCII or bytes, len >= n, into
 * out; the usual shingle sizes get a loop of their own.  Other sizes take
 * XXH3_64bits_withSeed, inlined (see shingle_chars): with the length a
 * constant (3), the compiler folds its dispatch on the length, and with
 * the seed in a local, the seed's part is computed once.
 */
static void
ascii_hashes(const struct shingler *sh, const unsigned char *p, size_t len,
    size_t n, uint64_t *out)
{
	uint64_t	 x, seed = sh->seed, bitflip = xxh3_bitflip(seed);
	size_t		 i = 0;

	if (n == 3) {
		for (i = 0; i + 3 <= len; i++)
			out[i] = XXH3_64bits_withSeed(p + i, 3, seed);
		return;
	}
	if (n < 4 || n > 8) {
		for (i = 0; i + n <= len; i++)
			out[i] = XXH3_64bits_withSeed(p + i, n, seed);
		return;
	}
#ifdef MHF_AVX2
	if (simd_avx512())
		i = ascii_hashes_avx512(p, len, n, bitflip, out);
	else if (simd_avx2())
		i = ascii_hashes_avx2(p, len, n, bitflip, out);
#endif
	switch (n) {
	case 4:
		ASCII_4TO8(4);
		break;
	case 5:
		ASCII_4TO8(5);
		break;
	case 6:
		ASCII_4TO8(6);
		break;
	case 7:
		ASCII_4TO8(7);
		break;
	default:
		ASCII_4TO8(8);
		break;
	}
}

/*
 * The hashes, or with keys the keys, of every n-byte window of p[0, len),
 * len >= n, into out; the text is ASCII, or for hashes any bytes.
 */
static void
ascii_windows(const struct shingler *sh, const unsigned char *p, size_t len,
    size_t n, int keys, uint64_t *out)
{
	size_t	 i;

	if (keys && n <= KEY_MAX) {
		ascii_keys(p, len, n, out);
		return;
	}
	ascii_hashes(sh, p, len, n, out);
	if (keys) {
		for (i = 0; i + n <= len; i++)
			out[i] |= KEY_HASHED;
	}
}

#ifdef MHF_AVX2
/*
 * ascii_keys' windows 8 at a time while 16 bytes are left: windows i to
 * i + 7 of up to 7 bytes lie in p[i, i + 16), loaded once into both halves
 * of a register; a byte shuffle puts window k's bytes in 64-bit lane k
 * (k + 4 for the second shuffle), zeros above them, and the length goes in
 * the top byte.  Returns the first window not done.
 */
__attribute__((target("avx2"))) static size_t
ascii_keys_avx2(const unsigned char *p, size_t len, size_t n, uint64_t *out)
{
	__m256i		 x, shuf_lo, shuf_hi, tag;
	signed char	 idx[32];
	size_t		 i, lane, b;

	/* Shuffle indices are within each 16-byte half; -1 gives a zero. */
	for (lane = 0; lane < 4; lane++)
		for (b = 0; b < 8; b++)
			idx[lane * 8 + b] = b < n ? (signed char)(lane + b) :
			    -1;
	shuf_lo = _mm256_loadu_si256((const __m256i *)idx);
	for (lane = 0; lane < 4; lane++)
		for (b = 0; b < n; b++)
			idx[lane * 8 + b] += 4;
	shuf_hi = _mm256_loadu_si256((const __m256i *)idx);
	tag = _mm256_set1_epi64x((long long)((uint64_t)n << 56));
	for (i = 0; i + 16 <= len; i += 8) {
		x = _mm256_broadcastsi128_si256(
		    _mm_loadu_si128((const __m128i *)(p + i)));
		_mm256_storeu_si256((__m256i *)(out + i), _mm256_or_si256(
		    _mm256_shuffle_epi8(x, shuf_lo), tag));
		_mm256_storeu_si256((__m256i *)(out + i + 4), _mm256_or_si256(
		    _mm256_shuffle_epi8(x, shuf_hi), tag));
	}
	return (i);
}

/*
 * xxh3_4to8 in each 64-bit lane.  AVX2 has no 64-bit multiply: a * C mod
 * 2^64 is lo(a) lo(C) + (hi(a) lo(C) + lo(a) hi(C)) << 32, three 32-bit
 * multiplies, and no rotate: two shifts.
 */
__attribute__((target("avx2"))) static inline __m256i
xxh3_4to8_avx2(__m256i h, __m256i bitflip, __m256i n)
{
	const __m256i	 clo = _mm256_set1_epi64x(0x1e98df25);
	const __m256i	 chi = _mm256_set1_epi64x(0x9fb21c65);
	__m256i		 cross;

	h = _mm256_xor_si256(h, bitflip);
	h = _mm256_xor_si256(h, _mm256_xor_si256(
	    _mm256_or_si256(_mm256_slli_epi64(h, 49), _mm256_srli_epi64(h, 15)),
	    _mm256_or_si256(_mm256_slli_epi64(h, 24),
	    _mm256_srli_epi64(h, 40))));
	cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(h, 32),
	    clo), _mm256_mul_epu32(h, chi));
	h = _mm256_add_epi64(_mm256_mul_epu32(h, clo),
	    _mm256_slli_epi64(cross, 32));
	h = _mm256_xor_si256(h, _mm256_add_epi64(_mm256_srli_epi64(h, 35), n));
	cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(h, 32),
	    clo), _mm256_mul_epu32(h, chi));
	h = _mm256_add_epi64(_mm256_mul_epu32(h, clo),
	    _mm256_slli_epi64(cross, 32));
	return (_mm256_xor_si256(h, _mm256_srli_epi64(h, 28)));
}

/*
 * The byte shuffle that makes 64-bit lane k the number xxh3_4to8 takes for
 * window k of n bytes (4 to 8) of 16 bytes, for lanes 0 to lanes - 1.
 */
static void
window_shuffle(signed char *idx, size_t lanes, size_t n)
{
	size_t	 lane, b;

	for (lane = 0; lane < lanes; lane++) {
		for (b = 0; b < 8; b++)
			idx[lane * 8 + b] = lane + (b < 4 ? n - 4 + b : b - 4);
	}
}

/*
 * ascii_hashes' windows 8 at a time while 16 bytes are left: windows i to
 * i + 7 of up to 8 bytes lie in p[i, i + 16), loaded once into both halves
 * of a register; a byte shuffle builds each window's number (xxh3_4to8)
 * in a 64-bit lane.  Returns the first window not done.
 */
__attribute__((target("avx2"))) static size_t
ascii_hashes_avx2(const unsigned char *p, size_t len, size_t n,
    uint64_t bitflip, uint64_t *out)
{
	__m256i		 x, shuf_lo, shuf_hi, vflip, vn;
	signed char	 idx[32];
	size_t		 i;

	/* Lane k of the low shuffle is window k; of the high, k + 4. */
	window_shuffle(idx, 4, n);
	shuf_lo = _mm256_loadu_si256((const __m256i *)idx);
	shuf_hi = _mm256_add_epi8(shuf_lo, _mm256_set1_epi8(4));
	vflip = _mm256_set1_epi64x((long long)bitflip);
	vn = _mm256_set1_epi64x((long long)n);
	for (i = 0; i + 16 <= len; i += 8) {
		x = _mm256_broadcastsi128_si256(
		    _mm_loadu_si128((const __m128i *)(p + i)));
		_mm256_storeu_si256((__m256i *)(out + i), xxh3_4to8_avx2(
		    _mm256_shuffle_epi8(x, shuf_lo), vflip, vn));
		_mm256_storeu_si256((__m256i *)(out + i + 4), xxh3_4to8_avx2(
		    _mm256_shuffle_epi8(x, shuf_hi), vflip, vn));
	}
	return (i);
}

/*
 * ascii_hashes' windows with AVX-512, 8 at a time while 16 bytes are left,
 * as ascii_hashes_avx2 but for the whole of xxh3_4to8 in one register: the
 * 16 bytes in each of its four 128-bit lanes, lane L shuffled into windows
 * 2L and 2L + 1; 64-bit multiplies and rotates of its own, and the three
 * xors of the rotates in one instruction (ternary logic 0x96: a ^ b ^ c).
 * Returns the first window not done.
 */
__attribute__((target("avx512f,avx512bw,avx512dq"))) static size_t
ascii_hashes_avx512(const unsigned char *p, size_t len, size_t n,
    uint64_t bitflip, uint64_t *out)
{
	__m512i		 h, c, shuf, vflip, vn;
	signed char	 idx[64];
	size_t		 i;

	window_shuffle(idx, 8, n);
	shuf = _mm512_loadu_si512(idx);
	c = _mm512_set1_epi64((long long)0x9fb21c651e98df25ULL);
	vflip = _mm512_set1_epi64((long long)bitflip);
	vn = _mm512_set1_epi64((long long)n);
	for (i = 0; i + 16 <= len; i += 8) {
		h = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(
		    _mm_loadu_si128((const __m128i *)(p + i))), shuf);
		h = _mm512_xor_si512(h, vflip);
		h = _mm512_ternarylogic_epi64(h, _mm512_rol_epi64(h, 49),
		    _mm512_rol_epi64(h, 24), 0x96);
		h = _mm512_mullo_epi64(h, c);
		h = _mm512_xor_si512(h, _mm512_add_epi64(_mm512_srli_epi64(h,
		    35), vn));
		h = _mm512_mullo_epi64(h, c);
		h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 28));
		_mm512_storeu_si512(out + i, h);
	}
	return (i);
}
#endif

/*
 * Character shingles: code points, or bytes when bytes is set; their
 * hashes, or with keys their keys.  flatten inlines XXH3 here, where the
 * length is small and known.
 */
#if defined(__GNUC__)
__attribute__((flatten))
#endif
static size_t
shingle_chars(const struct shingler *sh, const unsigned char *p, size_t len,
    int bytes, int keys, struct u64vec *out)
{
	size_t		 ring[RING], i, count = 0, n = sh->n, at;
	size_t		 head = 0, run, end = 0;
	uint64_t	 h, bitflip;
	int		 ascii = 0;

	if (bytes || (ascii = ascii_span(p, len) == len)) {
		/* One byte one character: the fast path for ASCII. */
		if (len <= n) {
			shingle_add(sh, p, len, len, keys, out);
			return (1);
		}
		if (out->size < len - n + 1) {
			out->size = len - n + 1;
			out->v = xreallocarray(out->v, out->size,
			    sizeof *out->v);
		}
		out->n = len - n + 1;
		if (keys && !ascii) {
			for (i = 0; i + n <= len; i++)
				out->v[i] = shingle_key(sh, p + i, n, len - i);
			return (len - n + 1);
		}
		ascii_windows(sh, p, len, n, keys, out->v);
		return (len - n + 1);
	}

	/*
	 * UTF-8: keep the offsets of the last n+1 character starts in a ring;
	 * each new start (or the end) closes the shingle that began n
	 * characters before it.  A shingle of n characters in n bytes is
	 * ASCII.  There is at most one shingle a character: out gets room
	 * for them first.  Shingles of 4 to 8 bytes, most of them at the
	 * usual sizes, are hashed as in ascii_hashes.
	 *
	 * Most UTF-8 text is ASCII with a few other characters, so a run of
	 * ASCII long enough (RUN_MIN more than n) is taken at once when the
	 * loop reaches it: its first n starts go through the ring, closing
	 * the shingles that began before the run; the shingles that begin
	 * and end inside it but for the last are ascii_windows' (in the
	 * same order); then the ring holds the run's last n + 1 starts, as
	 * if each had gone through it, and the last byte of the run closes
	 * the next shingle as the loop goes on.
	 */
	if (out->size < len) {
		out->size = len;
		out->v = xreallocarray(out->v, out->size, sizeof *out->v);
	}
	bitflip = xxh3_bitflip(sh->seed);
	run = 0;
	for (i = 0; i <= len; i++) {
		if (i < len && (p[i] & 0xc0) == 0x80)
			continue;	/* a continuation byte */
		if (i < len && p[i] < 0x80 && run == 0 &&
		    (i == 0 || p[i - 1] >= 0x80)) {
			run = ascii_span(p + i, len - i);
			if (run >= n + RUN_MIN)
				end = i + run;
			else
				run = 0;
		}
		if (run != 0 && i == end - run + n) {
			/* The run's first n starts are in the ring. */
			ascii_windows(sh, p + i - n, run - 1, n, keys,
			    out->v + count);
			count += run - n;
			head += run - n;
			for (at = 0; at <= n; at++)
				ring[(head - 1 - at) & (RING - 1)] =
				    end - 1 - at;
			i = end - 1;
			run = 0;
			continue;
		}
		ring[head & (RING - 1)] = i;
		head++;
		if (head > n) {
			at = ring[(head - n - 1) & (RING - 1)];
			if (keys && i - at == n && n <= KEY_MAX)
				h = ascii_key(p + at, n, len - at);
			else if (keys)
				h = shingle_key(sh, p + at, i - at, len - at);
			else if (i - at >= 4 && i - at <= 8)
				h = xxh3_4to8((uint64_t)XXH_readLE32(p + at) <<
				    32 | XXH_readLE32(p + i - 4), bitflip,
				    i - at);
			else
				h = XXH3_64bits_withSeed(p + at, i - at,
				    sh->seed);
			out->v[count++] = h;
		}
	}
	out->n = count;
	if (count == 0) {
		shingle_add(sh, p, len, len, keys, out);
		count = 1;
	}
	return (count);
}

/* Word shingles: n consecutive words with what separates them. */
static size_t
shingle_words(const struct shingler *sh, const unsigned char *p, size_t len,
    int keys, struct u64vec *out)
{
	size_t	 starts[MHF_MAX_SHINGLE], i, j, count = 0, words = 0;
	size_t	 n = sh->n, first = 0, last = 0;

	i = 0;
	for (;;) {
		while (i < len && is_sep(p[i]))
			i++;
		if (i == len)
			break;
		j = i;
		while (j < len && !is_sep(p[j]))
			j++;
		/* A word at [i, j). */
		if (words == 0)
			first = i;
		last = j;
		starts[words % n] = i;
		words++;
		if (words >= n) {
			shingle_add(sh, p + starts[(words - n) % n],
			    j - starts[(words - n) % n],
			    len - starts[(words - n) % n], keys, out);
			count++;
		}
		i = j;
	}
	if (count == 0 && words > 0) {
		shingle_add(sh, p + first, last - first, len - first, keys,
		    out);
		count = 1;
	}
	return (count);
}

/* shingle_hash and shingle_keys. */
static size_t
shingle_any(const struct shingler *sh, const char *text, size_t len,
    int bytes, int keys, struct u64vec *out)
{
	const unsigned char	*p = (const unsigned char *)text;

	out->n = 0;
	if (len == 0)
		return (0);
	if (sh->unit == UNIT_WORD)
		return (shingle_words(sh, p, len, keys, out));
	return (shingle_chars(sh, p, len, bytes, keys, out));
}

/*
 * Hash the shingles of a normalised text into out (which is emptied
 * first).  bytes says the text is not valid UTF-8.  Returns how many.
 */
size_t
shingle_hash(const struct shingler *sh, const char *text, size_t len,
    int bytes, struct u64vec *out)
{
	return (shingle_any(sh, text, len, bytes, 0, out));
}

/* The same, but the shingles' keys for verification (never 0). */
size_t
shingle_keys(const struct shingler *sh, const char *text, size_t len,
    int bytes, struct u64vec *out)
{
	return (shingle_any(sh, text, len, bytes, 1, out));
}

/*
 * Shingle sets by hashing, for exact verification, where sorting both sets
 * would be the cost.  Open addressing with linear probing.  The values are
 * shingle keys, many of them a few bytes of text: the home slot is a
 * multiplicative hash (shset_home).  Any value is legal (0 too), so a slot
 * is in use by the set iff its mark is the set's generation (own); a build
 * takes a new generation instead of clearing the table, which is cleared
 * only when the generation counter wraps.
 *
 * shset_jaccard walks the candidate's values through the set's own table,
 * one probe sequence per value: a member is counted once, the first time
 * it is met (seen takes the walk's generation), and a value that is not a
 * member is put in the first free slot with the walk's generation as its
 * mark, so that its repeats are not counted again.  Slots of earlier walks
 * count as free: they were filled after the set was built, so they never
 * lie on the probe sequence of a member, and the sequence of a value of
 * this walk stops where the walk put it.  The table is sized at build for
 * a load of a quarter, so a candidate about as large as the record fits
 * (at most half full); a larger one goes through a scratch set.  Adding
 * every value to a scratch set and then looking it up in the set would
 * take two tables, two probe sequences, twice the misses.
 */
#define SHSET_MIN	16
#define SHSET_KEEP	(1U << 16)	/* slots kept by shset_trim */

/* The next generation; on a wrap, the table is renumbered first. */
static uint32_t
shset_next(struct shset *s)
{
	size_t	 i;

	if (++s->gen != 0)
		return (s->gen);
	/* The set's own values become generation 1; the rest is free. */
	for (i = 0; i < s->size; i++) {
		s->slot[i].mark = s->own != 0 && s->slot[i].mark == s->own;
		s->slot[i].seen = 0;
	}
	s->own = s->own != 0;
	s->gen = 2;
	return (s->gen);
}

/* Start an empty set with room for n values, and as many more. */
static void
shset_reset(struct shset *s, size_t n)
{
	size_t	 want = SHSET_MIN;

	while (want / 4 < n)
		want <<= 1;
	if (want > s->size) {
		/*
		 * Cleared by writing, not by calloc: a large table comes
		 * straight from mmap, and a build reads a slot before it
		 * writes it, so each of its pages would be faulted in twice,
		 * first as the shared zero page and then copied, the copy
		 * flushing the TLB of every core running one of the
		 * process's threads.
		 */
		free(s->slot);
		s->slot = xreallocarray(NULL, want, sizeof *s->slot);
		memset(s->slot, 0, want * sizeof *s->slot);
		s->size = want;
		s->gen = s->own = 0;
	}
	s->mask = want - 1;
	for (s->shift = 64; want > 1; want >>= 1)
		s->shift--;
	s->own = 0;
	s->own = shset_next(s);
	s->n = 0;
}

/*
 * A value's home slot: the top bits of its product with 2^64 / phi
 * (Fibonacci hashing), as keys are not uniform in their low bits.
 */
#define FIB_HOME(x, shift)	((size_t)(((x) * 0x9e3779b97f4a7c15ULL) >> (shift)))

static inline size_t
shset_home(const struct shset *s, uint64_t x)
{
	return (FIB_HOME(x, s->shift));
}

/* Add a value to a set; returns 1 if it was not there before. */
static inline int
shset_add(struct shset *s, uint64_t x)
{
	struct shslot	*sl;
	size_t		 i = shset_home(s, x);

	for (;; i = (i + 1) & s->mask) {
		sl = &s->slot[i];
		if (sl->mark != s->own)
			break;
		if (sl->v == x)
			return (0);
	}
	sl->v = x;
	sl->mark = s->own;
	sl->seen = 0;
	s->n++;
	return (1);
}

/* Is a value in a set?  Inlined where it is the inner loop. */
static inline int
shset_find(const struct shset *s, uint64_t x)
{
	const struct shslot	*sl;
	size_t			 i;

	if (s->n == 0)
		return (0);
	for (i = shset_home(s, x);; i = (i + 1) & s->mask) {
		sl = &s->slot[i];
		if (sl->mark != s->own)
			return (0);
		if (sl->v == x)
			return (1);
	}
}

/* Free a set's memory; it is empty again. */
void
shset_free(struct shset *s)
{
	free(s->slot);
	memset(s, 0, sizeof *s);
}

/* Free a set's memory if it grew past what is worth keeping for reuse. */
void
shset_trim(struct shset *s)
{
	if (s->size > SHSET_KEEP)
		shset_free(s);
}

/*
 * How many distinct values the n hashes h hold (a text's distinct
 * shingles: the size containment's bounds need, and the index keeps),
 * with table as scratch: an open-addressing table of at least twice n
 * slots, homed as a shset's (Fibonacci hashing: no pattern in the values'
 * bits makes long runs), 0 its empty slot and counted apart.  Lighter
 * than a shset (8 bytes a slot, not 16, at half the load): phase 1
 * counts every record's.
 */
size_t
shingle_distinct(const uint64_t *h, size_t n, struct u64vec *table)
{
	size_t		 size = 64, mask, i, j, count = 0;
	uint64_t	*t;
	unsigned	 shift = 64 - 6;
	int		 zero = 0;

	while (size < 2 * n) {
		size <<= 1;
		shift--;
	}
	if (table->size < size) {
		free(table->v);
		table->v = xreallocarray(NULL, size, sizeof *table->v);
		table->size = size;
	}
	t = table->v;
	memset(t, 0, size * sizeof *t);
	mask = size - 1;
	for (i = 0; i < n; i++) {
		if (h[i] == 0) {
			zero = 1;
			continue;
		}
		for (j = (size_t)((h[i] * 0x9e3779b97f4a7c15ULL) >> shift);
		    t[j] != 0 && t[j] != h[i]; j = (j + 1) & mask)
			;
		if (t[j] == 0) {
			t[j] = h[i];
			count++;
		}
	}
	return (count + zero);
}

/* Make s the set of the values h[0..n) (with repeats).  Returns its size. */
size_t
shset_build(struct shset *s, const uint64_t *h, size_t n)
{
	struct shslot	*slot, *sl;
	size_t		 i, j, mask, count = 0;
	unsigned	 shift;
	uint32_t	 own;

	/*
	 * The table's fields and the count in locals: through s, every
	 * store to a slot would make the compiler load them again, and the
	 * count's store and load chained one insertion to the next.
	 */
	shset_reset(s, n);
	slot = s->slot;
	mask = s->mask;
	shift = s->shift;
	own = s->own;
	for (i = 0; i < n; i++) {
		for (j = FIB_HOME(h[i], shift);; j = (j + 1) & mask) {
			sl = &slot[j];
			if (sl->mark != own) {
				sl->v = h[i];
				sl->mark = own;
				sl->seen = 0;
				count++;
				break;
			}
			if (sl->v == h[i])
				break;
		}
	}
	s->n = count;
	return (count);
}

/* Is a value in the set? */
int
shset_has(const struct shset *s, uint64_t x)
{
	return (shset_find(s, x));
}

/*
 * Jaccard similarity of the set mine and the set of the values h[0..n)
 * (with repeats); see above.  mine keeps its values; scratch is used when
 * the values do not fit beside them.  The same value as sorting both sets
 * and merging them; two empty sets are equal.
 */
double
shset_jaccard(struct shset *mine, struct shset *scratch, const uint64_t *h,
    size_t n)
{
	size_t	 both, theirs;

	both = shset_overlap(mine, scratch, h, n, &theirs);
	if (mine->n == 0 && theirs == 0)
		return (1.0);
	return ((double)both / (double)(mine->n + theirs - both));
}

/*
 * How many values the set mine and the set of the values h[0..n) (with
 * repeats) have in common, and into *theirs how many distinct values h
 * holds: what both Jaccard similarity and containment are made of.
 */
size_t
shset_overlap(struct shset *mine, struct shset *scratch, const uint64_t *h,
    size_t n, size_t *theirsp)
{
	struct shslot	*slot, *sl;
	size_t		 i, j, mask, both = 0, theirs = 0;
	unsigned	 shift;
	uint32_t	 g, own;

	if (mine->n + n > (mine->mask + 1) / 2) {
		shset_reset(scratch, n);
		for (i = 0; i < n; i++) {
			if (shset_add(scratch, h[i]) && shset_find(mine, h[i]))
				both++;
		}
		theirs = scratch->n;
	} else {
		g = shset_next(mine);
		slot = mine->slot;	/* in locals, as in shset_build */
		mask = mine->mask;
		shift = mine->shift;
		own = mine->own;
		for (i = 0; i < n; i++) {
			for (j = FIB_HOME(h[i], shift);; j = (j + 1) & mask) {
				sl = &slot[j];
				if (sl->mark == own) {
					if (sl->v != h[i])
						continue;
					if (sl->seen != g) {
						sl->seen = g;
						both++;
						theirs++;
					}
				} else if (sl->mark == g) {
					if (sl->v != h[i])
						continue;
				} else {
					sl->v = h[i];
					sl->mark = g;
					theirs++;
				}
				break;
			}
		}
	}
	*theirsp = theirs;
	return (both);
}
