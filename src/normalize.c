/*
 * Text normalisation, before shingling.  Four switchable steps, stored in
 * the index because they change every shingle:
 *
 *   casefold  Unicode full case folding (utf8proc)
 *   nfkc      compatibility normalisation, NFKC (utf8proc)
 *   space     white space runs become one space; the ends are trimmed
 *   punct     Unicode punctuation (categories P*) becomes white space
 *
 * ASCII, most of any real feed, takes a fast path of one table lookup per
 * byte, or 8 bytes at once for plain words, or with AVX2 32 bytes at once
 * whatever they are: NFKC is the identity there and case folding is
 * tolower.  Text with a few other characters takes it too
 * for its long ASCII runs; only the stretches around the others go through
 * utf8proc (see normalize), and not even those when the others map to
 * themselves wherever they stand (box drawing, dashes, quotation marks:
 * see inert); those the space step leaves alone too (box drawing) stay in
 * the byte path, whose runs thus reach past them.
 * Text that is not valid UTF-8 is not rejected: it is normalised as bytes
 * (ASCII folding, spaces, punctuation) and normalize returns 1 so that the
 * shingler treats each byte as a character.
 */

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "mhfilter.h"

#ifdef MHF_AVX2
#include <immintrin.h>
#endif

static const struct {
	const char	*name;
	int		 flag;
} norm_names[] = {
	{ "casefold", NORM_CASEFOLD },
	{ "nfkc", NORM_NFKC },
	{ "space", NORM_SPACE },
	{ "punct", NORM_PUNCT },
};
#define NNORM (sizeof norm_names / sizeof norm_names[0])

/* ASCII classes: 1 white space, 2 punctuation (Unicode category P*). */
#define C_SPACE	1
#define C_PUNCT	2
static unsigned char ascii_class[128];

/*
 * The byte path's tables, one for each setting of the flags it uses
 * (casefold, space, punct): what a byte becomes, and whether it is taken
 * by the space step instead (skip), so that the loop has no branch on the
 * class of a byte.  A byte at or above 0x80 is itself.
 */
#define NTAB(flags)	(((flags) & NORM_CASEFOLD) |			\
			    ((flags) & (NORM_SPACE|NORM_PUNCT)) >> 1)
static struct byte_tab {
	unsigned char	 map[256];
	unsigned char	 skip[256];
} byte_tab[8];

#ifdef MHF_AVX2
/*
 * The AVX2 byte path's tables (normalize_bytes_avx2).  A byte c below 0x80
 * is in the class iff lo[c & 15] & hi[c >> 4] is not 0: bit h of lo[l] is
 * set iff the byte 16h + l is in it, and hi[h] is bit h (0 for h >= 8).
 * The class is, by NIB(flags): nothing, punctuation (it becomes a space),
 * white space, white space and punctuation (the space step takes them).
 */
#define NIB(flags)	((((flags) & NORM_SPACE) ? 2 : 0) |		\
			    (((flags) & NORM_PUNCT) ? 1 : 0))
static struct nib_tab {
	unsigned char	 lo[16];
	unsigned char	 hi[16];
} nib_tab[4];

/*
 * For each set of 8 bytes kept (a bit each), a byte shuffle that packs
 * them to the front of the low (pack_tab[0]) or high (pack_tab[1]) half of
 * 16 bytes, and how many they are.
 */
static unsigned char	 pack_tab[2][256][8];
static unsigned char	 pack_count[256];
#endif

/*
 * Code points below 0x10000 that the mapping steps leave alone wherever
 * they stand (see inert), for each setting of casefold and nfkc: a bit
 * each, a block of 256 at a time, and whether the block is worked out.
 */
#define INERT_SET(flags)	((((flags) & NORM_CASEFOLD) ? 1 : 0) |	\
				    (((flags) & NORM_NFKC) ? 2 : 0))
static uint64_t		 inert_bits[4][256][4];
static atomic_uchar	 inert_ready[4][256];

/*
 * The space and punctuation step runs over the text's segments in turn, as
 * if over the whole mapped text: its state goes from one segment to the next.
 */
struct nstate {
	struct buf	*out;
	size_t		 start;		/* where this text's output begins */
	int		 flags;
	int		 pending;	/* a space is owed before the next */
};

/* Code points of a Unicode segment: on the stack, larger on the heap. */
#define NCP	256
struct cpbuf {
	utf8proc_int32_t	*v;
	utf8proc_ssize_t	 size;
	utf8proc_int32_t	 local[NCP];
};

static void	normalize_init(void);
static int	classify(utf8proc_int32_t);
static void	normalize_bytes(const unsigned char *, size_t, struct nstate *);
#ifdef MHF_AVX2
static size_t	normalize_bytes_simd(const unsigned char *, size_t, int,
		    char **, unsigned *, unsigned *);
static size_t	normalize_bytes_avx2(const unsigned char *, size_t, int,
		    char **, unsigned *, unsigned *);
static size_t	normalize_bytes_avx512(const unsigned char *, size_t, int,
		    char **, unsigned *, unsigned *);
#endif
static char	*put_cp(struct nstate *, char *, utf8proc_int32_t,
		    const unsigned char *, size_t);
static int	map_options(int);
static int	inert(utf8proc_int32_t, int);
static int	inert_run(const unsigned char *, size_t, int);
static int	opaque_run(const unsigned char *, size_t, int);
static void	normalize_inert(const unsigned char *, size_t,
		    struct nstate *);
static int	normalize_segment(const unsigned char *, size_t,
		    struct nstate *, struct cpbuf *);

/* Parse a comma list of step names, or "none". */
int
normalize_parse(const char *list, int *flags, char **cause)
{
	char	*copy, *next, *word;
	size_t	 i;
	int	 f = 0;

	if (strcmp(list, "none") == 0) {
		*flags = 0;
		return (0);
	}
	next = copy = xstrdup(list);
	while ((word = strsep(&next, ",")) != NULL) {
		for (i = 0; i < NNORM; i++) {
			if (strcmp(word, norm_names[i].name) == 0)
				break;
		}
		if (i == NNORM && strcmp(word, "none") == 0) {
			xasprintf(cause, "'none' goes alone, not in a list "
			    "('%s')", list);
			free(copy);
			return (-1);
		}
		if (i == NNORM) {
			xasprintf(cause, "unknown normalisation '%s' (use "
			    "casefold, nfkc, space, punct or none)", word);
			free(copy);
			return (-1);
		}
		f |= norm_names[i].flag;
	}
	free(copy);
	*flags = f;
	return (0);
}

/* Write the comma list for flags, "none" when empty. */
void
normalize_name(int flags, char *out, size_t len)
{
	size_t	 i;
	size_t	 used = 0;
	int	 n;

	for (i = 0; i < NNORM && used < len; i++) {
		if (~flags & norm_names[i].flag)
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? "," : "",
		    norm_names[i].name);
		if (n > 0)
			used += n;
	}
	if (used == 0)
		snprintf(out, len, "none");
}

/*
 * Fill the ASCII class table from Unicode's own categories, once: worker
 * threads normalise at the same time, and one of them must not see the
 * table half filled.
 */
static void
normalize_fill(void)
{
	int	 c, cat, flags, space, x;

	for (c = 0; c < 128; c++) {
		cat = utf8proc_category(c);
		if (c == ' ' || (c >= '\t' && c <= '\r'))
			ascii_class[c] = C_SPACE;
		else if (cat >= UTF8PROC_CATEGORY_PC &&
		    cat <= UTF8PROC_CATEGORY_PO)
			ascii_class[c] = C_PUNCT;
	}

#ifdef MHF_AVX2
	for (x = 0; x < 4; x++) {
		for (c = 0; c < 128; c++) {
			if ((x & 2) && ascii_class[c] == C_SPACE)
				space = 1;
			else
				space = (x & 1) && ascii_class[c] == C_PUNCT;
			if (space)
				nib_tab[x].lo[c & 15] |= 1 << (c >> 4);
		}
		for (c = 0; c < 8; c++)
			nib_tab[x].hi[c] = 1 << c;
	}
	for (c = 0; c < 256; c++) {
		for (x = 0, space = 0; x < 8; x++) {
			if (c & 1 << x) {
				pack_tab[0][c][space] = x;
				pack_tab[1][c][space] = x + 8;
				space++;
			}
		}
		pack_count[c] = space;
	}
#endif

	/* What the byte path did a byte at a time, for each setting. */
	for (flags = 0; flags <= NORM_ALL; flags++) {
		if (flags & NORM_NFKC)
			continue;	/* the same tables as without */
		x = NTAB(flags);
		for (c = 0; c < 256; c++) {
			byte_tab[x].map[c] = c;
			if (c >= 128)
				continue;
			space = ascii_class[c] == C_SPACE ||
			    ((flags & NORM_PUNCT) && ascii_class[c] == C_PUNCT);
			if (space && (flags & NORM_SPACE))
				byte_tab[x].skip[c] = 1;
			else if (space && ascii_class[c] == C_PUNCT)
				byte_tab[x].map[c] = ' ';
			else if (!space && (flags & NORM_CASEFOLD) &&
			    c >= 'A' && c <= 'Z')
				byte_tab[x].map[c] = c + 'a' - 'A';
		}
	}
}

static void
normalize_init(void)
{
	static pthread_once_t	 once = PTHREAD_ONCE_INIT;

	pthread_once(&once, normalize_fill);
}

/* Classify a code point: C_SPACE, C_PUNCT or 0. */
static int
classify(utf8proc_int32_t cp)
{
	int	 cat;

	if (cp < 128)
		return (ascii_class[cp]);
	if (cp == 0x85)
		return (C_SPACE);
	cat = utf8proc_category(cp);
	if (cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
	    cat == UTF8PROC_CATEGORY_ZP)
		return (C_SPACE);
	if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO)
		return (C_PUNCT);
	return (0);
}

/*
 * Tests of the 8 bytes of a uint64_t at once (SWAR): the result is 0x80 in
 * each byte where the test holds, 0 elsewhere.  GE is exact in every byte,
 * not only the first that holds, as each byte of l is below 0x80 and t is
 * 1 to 0x80: no sum carries into the next byte.
 */
#define ONES		0x0101010101010101ULL
#define HIGH		0x8080808080808080ULL
#define GE(l, t)	(((l) + ONES * (0x80 - (t))) & HIGH)
#define IN(l, a, b)	(GE(l, a) & ~GE(l, (b) + 1))

/*
 * One byte of the byte path, without a branch on its class: a space owed
 * goes before a byte that is kept (and not before the text's first), and a
 * byte taken by the space step leaves one owed.  Two bytes at w may be
 * written; at most the ones kept count.
 */
#define BYTE_STEP(c) do {						\
	unsigned	 s_ = tab->skip[(c)];				\
									\
	*w = ' ';							\
	w += pending & started & (s_ ^ 1);				\
	*w = tab->map[(c)];						\
	w += s_ ^ 1;							\
	started |= s_ ^ 1;						\
	pending = s_;							\
} while (0)

/*
 * The byte path, for ASCII and for invalid UTF-8: one table lookup a byte.
 * Bytes at or above 0x80 are copied as they are.
 *
 * Most of the text is words with one space between them, and that comes
 * out as it went in, but for case folding.  So the text is taken 8 bytes
 * at a time, and 8 bytes that are plain (each becomes itself or, folded,
 * its lower case) and spaces (0x20), no two spaces together when runs of
 * them are collapsed, are folded and stored at once; any other 8 go
 * through BYTE_STEP one by one.  Without NORM_PUNCT every byte but white
 * space is plain; with it, only letters, digits and bytes at or above 0x80
 * are taken as plain (ASCII symbols are, too, but punctuation is not, and
 * which is which comes from Unicode's tables).  The tables alone say what
 * a byte becomes; the test only picks bytes whose fate is known.
 *
 * Under NORM_SPACE a space first in the 8 merges with a space owed (and is
 * dropped if nothing was written yet: then the 8 go byte by byte), and a
 * space last in them is stored but left owed, where the next kept byte
 * would write it again.
 */
static void
normalize_bytes(const unsigned char *p, size_t len, struct nstate *st)
{
	const struct byte_tab	*tab = &byte_tab[NTAB(st->flags)];
	struct buf		*out = st->out;
	uint64_t		 x, l, ok, sp, fold;
	size_t			 i = 0, j;
	char			*w;
	unsigned		 pending = st->pending, started, collapse;
	unsigned		 last, punct;

	/*
	 * A space owed from before, and room for the 8- or 32-byte stores
	 * and the bytes BYTE_STEP writes ahead of what it keeps.
	 */
	buf_reserve(out, len + 1 + 40);
	w = out->data + out->len;
	started = w != out->data + st->start;
	fold = (st->flags & NORM_CASEFOLD) ? ~0ULL : 0;
	collapse = (st->flags & NORM_SPACE) != 0;
	punct = (st->flags & NORM_PUNCT) != 0;
#ifdef MHF_AVX2
	if (len >= 32 && simd_avx2())
		i = normalize_bytes_simd(p, len, st->flags, &w, &pending,
		    &started);
#endif
	for (; len - i >= 8; i += 8) {
		memcpy(&x, p + i, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		x = __builtin_bswap64(x);
#endif
		l = x & ~HIGH;
		sp = ~GE(l ^ ONES * ' ', 1) & ~x & HIGH;
		if (punct)
			ok = IN(l | ONES * 0x20, 'a', 'z') | IN(l, '0', '9') |
			    (x & HIGH) | sp;
		else
			ok = ~(IN(l, '\t', '\r') & ~x) & HIGH;
		if (ok != HIGH || (collapse && ((sp & sp << 8) ||
		    ((sp & 0x80) && !started)))) {
			for (j = i; j < i + 8; j++)
				BYTE_STEP(p[j]);
			continue;
		}

		/* A space owed goes before a kept byte, not before a space. */
		*w = ' ';
		w += pending & started & (unsigned)(~sp >> 7 & 1);
		x += (IN(l, 'A', 'Z') & ~x & fold) >> 2;  /* 'A' + 0x20 = 'a' */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		x = __builtin_bswap64(x);
#endif
		memcpy(w, &x, 8);
		last = (unsigned)(sp >> 63) & collapse;
		w += 8 - last;
		pending = last;
		started = 1;
	}
	for (; i < len; i++)
		BYTE_STEP(p[i]);
	out->len = w - out->data;
	out->data[out->len] = '\0';
	st->pending = pending;
}

#ifdef MHF_AVX2
/*
 * normalize_bytes' SIMD loops, while there are 32 bytes: AVX-512 while
 * there are 64 (where the CPU has VBMI2), then AVX2.  They write the space
 * of a run of spacing bytes when the run begins, where normalize_bytes
 * writes it (pending) before the next byte kept.  So a space owed on entry
 * is written first, and the byte before the first taken as spacing when
 * it is owed or nothing was written yet (the text's start is trimmed); and
 * a space written last is taken back and owed again on the way out.  *wp,
 * *pendingp and *startedp are the state, in and out.  Returns how many
 * bytes were done.
 */
static size_t
normalize_bytes_simd(const unsigned char *p, size_t len, int flags,
    char **wp, unsigned *pendingp, unsigned *startedp)
{
	unsigned	 prev = 0, collapse = (flags & NORM_SPACE) != 0;
	size_t		 i = 0;

	if (collapse) {
		if (*startedp && *pendingp)
			*(*wp)++ = ' ';
		prev = !*startedp || *pendingp;
	}
	if (len >= 64 && simd_avx512_vbmi2())
		i = normalize_bytes_avx512(p, len, flags, wp, &prev, startedp);
	if (len - i >= 32)
		i += normalize_bytes_avx2(p + i, len - i, flags, wp, &prev,
		    startedp);
	if (collapse) {
		if (prev && *startedp)
			(*wp)--;	/* owed again, as normalize_bytes does */
		*pendingp = prev;
	}
	return (i);
}

/*
 * normalize_bytes' loop over 32 bytes at a time, while there are 32.
 * Where the 8-byte loop must take most of the 8s of indented or justified
 * text (a new line and spaces, two spaces) a byte at a time, this one has
 * no case that is slower than the others:
 *
 * Each byte's class comes from two 16-byte tables looked up by its two
 * halves (nib_tab): under NORM_SPACE whether the space step takes it (the
 * byte is "spacing": white space, or punctuation under NORM_PUNCT), else
 * whether it becomes a space (punctuation under NORM_PUNCT).  Each byte
 * is mapped (folded; a spacing byte becomes a space), and under NORM_SPACE
 * a spacing byte is dropped when the byte before it was spacing too.
 * Those kept are packed by a byte shuffle from a table, 8 at a time
 * (pack_tab), unless all 32 are kept.
 *
 * Bytes at or above 0x80 are never spacing and become themselves.  *wp,
 * *prevp (was the byte before spacing?) and *startedp are the state, in
 * and out, as normalize_bytes_simd keeps it.  Returns how many bytes were
 * done.
 */
#define PACK8(half, h, k) do {						\
	_mm_storel_epi64((__m128i *)w, _mm_shuffle_epi8((half),		\
	    _mm_loadl_epi64((const __m128i *)pack_tab[(h)][(k)])));	\
	w += pack_count[(k)];						\
} while (0)

__attribute__((target("avx2"))) static size_t
normalize_bytes_avx2(const unsigned char *p, size_t len, int flags,
    char **wp, unsigned *prevp, unsigned *startedp)
{
	const struct nib_tab	*nt;
	const __m256i		 low4 = _mm256_set1_epi8(0x0f);
	const __m256i		 space = _mm256_set1_epi8(' ');
	__m256i			 lo_t, hi_t, x, cls, upper, fold;
	__m128i			 half;
	uint32_t		 sm, drop, keep, prev = *prevp;
	unsigned		 started = *startedp, collapse;
	size_t			 i;
	char			*w = *wp;

	collapse = (flags & NORM_SPACE) != 0;
	nt = &nib_tab[NIB(flags)];
	lo_t = _mm256_broadcastsi128_si256(_mm_loadu_si128(
	    (const __m128i *)nt->lo));
	hi_t = _mm256_broadcastsi128_si256(_mm_loadu_si128(
	    (const __m128i *)nt->hi));
	fold = _mm256_set1_epi8((flags & NORM_CASEFOLD) ? 0x20 : 0);
	for (i = 0; len - i >= 32; i += 32) {
		x = _mm256_loadu_si256((const __m256i *)(p + i));
		/* Bytes at or above 0x80 find 0 in hi_t: never spacing. */
		cls = _mm256_and_si256(_mm256_shuffle_epi8(lo_t,
		    _mm256_and_si256(x, low4)), _mm256_shuffle_epi8(hi_t,
		    _mm256_and_si256(_mm256_srli_epi16(x, 4), low4)));
		cls = _mm256_cmpeq_epi8(cls, _mm256_setzero_si256());
		/* Signed compares: bytes at or above 0x80 are not A-Z. */
		upper = _mm256_and_si256(
		    _mm256_cmpgt_epi8(x, _mm256_set1_epi8('A' - 1)),
		    _mm256_cmpgt_epi8(_mm256_set1_epi8('Z' + 1), x));
		x = _mm256_add_epi8(x, _mm256_and_si256(upper, fold));
		x = _mm256_blendv_epi8(space, x, cls);
		if (!collapse) {
			_mm256_storeu_si256((__m256i *)w, x);
			w += 32;
			continue;
		}
		sm = ~(uint32_t)_mm256_movemask_epi8(cls);
		drop = sm & (sm << 1 | prev);
		prev = sm >> 31;
		keep = ~drop;
		started |= keep != 0;
		half = _mm256_castsi256_si128(x);
		PACK8(half, 0, keep & 0xff);
		PACK8(half, 1, keep >> 8 & 0xff);
		half = _mm256_extracti128_si256(x, 1);
		PACK8(half, 0, keep >> 16 & 0xff);
		PACK8(half, 1, keep >> 24);
	}
	*prevp = prev;
	*wp = w;
	*startedp = started;
	return (i);
}

/*
 * normalize_bytes_avx2's loop with AVX-512, 64 bytes at a time: the same
 * tables and the same state in and out, each byte's class and case in mask
 * registers, and the bytes kept packed by one compress (VBMI2) rather than
 * four shuffles from pack_tab.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) static size_t
normalize_bytes_avx512(const unsigned char *p, size_t len, int flags,
    char **wp, unsigned *prevp, unsigned *startedp)
{
	const struct nib_tab	*nt;
	const __m512i		 low4 = _mm512_set1_epi8(0x0f);
	const __m512i		 space = _mm512_set1_epi8(' ');
	__m512i			 lo_t, hi_t, x;
	__mmask64		 sm, upper, fold, drop, keep, prev = *prevp;
	unsigned		 started = *startedp, collapse;
	size_t			 i;
	char			*w = *wp;

	collapse = (flags & NORM_SPACE) != 0;
	nt = &nib_tab[NIB(flags)];
	lo_t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)nt->lo));
	hi_t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)nt->hi));
	fold = (flags & NORM_CASEFOLD) ? ~(__mmask64)0 : 0;
	for (i = 0; len - i >= 64; i += 64) {
		x = _mm512_loadu_si512(p + i);
		/* Bytes at or above 0x80 find 0 in hi_t: never spacing. */
		sm = _mm512_test_epi8_mask(_mm512_shuffle_epi8(lo_t,
		    _mm512_and_si512(x, low4)), _mm512_shuffle_epi8(hi_t,
		    _mm512_and_si512(_mm512_srli_epi16(x, 4), low4)));
		/* Unsigned: bytes at or above 0x80 are not A-Z. */
		upper = _mm512_cmplt_epu8_mask(_mm512_sub_epi8(x,
		    _mm512_set1_epi8('A')), _mm512_set1_epi8(26));
		x = _mm512_mask_add_epi8(x, upper & fold, x,
		    _mm512_set1_epi8(0x20));
		x = _mm512_mask_mov_epi8(x, sm, space);
		if (!collapse) {
			_mm512_storeu_si512(w, x);
			w += 64;
			continue;
		}
		drop = sm & (sm << 1 | prev);
		prev = sm >> 63;
		keep = ~drop;
		started |= keep != 0;
		_mm512_storeu_si512(w, _mm512_maskz_compress_epi8(keep, x));
		w += __builtin_popcountll(keep);
	}
	*prevp = (unsigned)prev;
	*wp = w;
	*startedp = started;
	return (i);
}
#endif

/*
 * The space and punctuation step for one mapped code point, written at w
 * (room reserved): its UTF-8 is n bytes at src, or encoded when src is NULL.
 * Returns the new end.
 */
static char *
put_cp(struct nstate *st, char *w, utf8proc_int32_t cp,
    const unsigned char *src, size_t n)
{
	int	 class;

	class = classify(cp);
	if (class == C_PUNCT && (~st->flags & NORM_PUNCT))
		class = 0;
	if (class != 0 && (st->flags & NORM_SPACE)) {
		st->pending = 1;
		return (w);
	}
	if (class == C_PUNCT) {
		*w++ = ' ';
		return (w);
	}
	if (st->pending && w != st->out->data + st->start)
		*w++ = ' ';
	st->pending = 0;
	if (src == NULL)
		return (w + utf8proc_encode_char(cp, (utf8proc_uint8_t *)w));
	memcpy(w, src, n);
	return (w + n);
}

/* utf8proc's options for the mapping steps of flags. */
static int
map_options(int flags)
{
	int	 options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;	/* keep NFC */

	if (flags & NORM_NFKC)
		options |= UTF8PROC_COMPAT;
	if (flags & NORM_CASEFOLD)
		options |= UTF8PROC_CASEFOLD;
	return (options);
}

/*
 * Is code point cp (below 0x10000) inert under the mapping steps of flags:
 * mapped to itself wherever it stands?  It is when it decomposes (and
 * folds) to itself, is a starter (combining class 0: never reordered) and
 * has no part in any composition (comb_index): then utf8proc's mapping of
 * a text is the same with cp cut out of it, and cp can be put as it is.
 * Hangul composes by rule, not by table: its jamo and syllables are not
 * inert.  The answers are worked out a block of 256 at a time, on first
 * use, and shared by the worker threads: a block is published by its
 * ready flag (release) once complete and never changes.
 */
static int
inert(utf8proc_int32_t cp, int flags)
{
	static pthread_mutex_t	 lock = PTHREAD_MUTEX_INITIALIZER;
	const utf8proc_property_t *pr;
	utf8proc_int32_t	 c, one[4];
	utf8proc_ssize_t	 n;
	unsigned		 x = INERT_SET(flags), b = cp >> 8;
	uint64_t		 bits[4];
	int			 last = 0;

	if (!atomic_load_explicit(&inert_ready[x][b], memory_order_acquire)) {
		memset(bits, 0, sizeof bits);
		for (c = cp & ~0xff; c <= (cp | 0xff); c++) {
			if ((c >= 0x1100 && c <= 0x11ff) ||
			    (c >= 0xac00 && c <= 0xd7a3) ||
			    (c >= 0xd800 && c <= 0xdfff))
				continue;
			pr = utf8proc_get_property(c);
			if (pr->combining_class != 0 ||
			    pr->comb_index != UINT16_MAX)
				continue;
			n = utf8proc_decompose_char(c, one, 4,
			    map_options(flags), &last);
			if (n == 1 && one[0] == c)
				bits[(c & 0xff) >> 6] |= 1ULL << (c & 63);
		}
		pthread_mutex_lock(&lock);
		if (!atomic_load_explicit(&inert_ready[x][b],
		    memory_order_relaxed)) {
			memcpy(inert_bits[x][b], bits, sizeof bits);
			atomic_store_explicit(&inert_ready[x][b], 1,
			    memory_order_release);
		}
		pthread_mutex_unlock(&lock);
	}
	return (inert_bits[x][b][(cp & 0xff) >> 6] >> (cp & 63) & 1);
}

/* Is p[0, len) valid UTF-8 of inert characters only (see inert)? */
static int
inert_run(const unsigned char *p, size_t len, int flags)
{
	utf8proc_ssize_t	 i, step;
	utf8proc_int32_t	 cp;

	for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
		step = utf8proc_iterate(p + i, len - i, &cp);
		if (step < 0 || cp >= 0x10000 || !inert(cp, flags))
			return (0);
	}
	return (1);
}

/*
 * Is p[0, len) valid UTF-8 of inert characters (see inert) that the space
 * and punctuation step leaves as they are too (not white space, nor
 * punctuation under NORM_PUNCT: box drawing, symbols, letters)?  Then the
 * byte path, which keeps each byte at or above 0x80 as it is, gives the
 * same as the Unicode path, and takes the run into its segment.
 */
static int
opaque_run(const unsigned char *p, size_t len, int flags)
{
	utf8proc_ssize_t	 i, step;
	utf8proc_int32_t	 cp;
	int			 class;

	for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
		step = utf8proc_iterate(p + i, len - i, &cp);
		if (step < 0 || cp >= 0x10000 || !inert(cp, flags))
			return (0);
		class = classify(cp);
		if (class == C_SPACE ||
		    (class == C_PUNCT && (flags & NORM_PUNCT)))
			return (0);
	}
	return (1);
}

/*
 * A run of inert characters (inert_run): mapped to themselves, so only the
 * space and punctuation step, without utf8proc.
 */
static void
normalize_inert(const unsigned char *p, size_t len, struct nstate *st)
{
	struct buf		*out = st->out;
	utf8proc_ssize_t	 i, step;
	utf8proc_int32_t	 cp;
	char			*w;

	buf_reserve(out, 2 * len);	/* each character and a space */
	w = out->data + out->len;
	for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
		step = utf8proc_iterate(p + i, len - i, &cp);
		w = put_cp(st, w, cp, p + i, step);
	}
	out->len = w - out->data;
	out->data[out->len] = '\0';
}

/*
 * The Unicode path for one segment: utf8proc maps (as utf8proc_map would,
 * into cb rather than a new allocation), then spaces and punctuation.
 * Returns -1 if the segment is not valid UTF-8.
 */
static int
normalize_segment(const unsigned char *p, size_t len, struct nstate *st,
    struct cpbuf *cb)
{
	struct buf		*out = st->out;
	utf8proc_ssize_t	 n, i, step;
	utf8proc_int32_t	 cp;
	char			*w;
	int			 options;

	if ((st->flags & (NORM_NFKC|NORM_CASEFOLD)) == 0) {
		/* No mapping: copy each code point; 2 bytes a byte at most. */
		buf_reserve(out, 2 * len);
		w = out->data + out->len;
		for (i = 0; i < (utf8proc_ssize_t)len; i += step) {
			step = utf8proc_iterate(p + i, len - i, &cp);
			if (step < 0)
				return (-1);
			w = put_cp(st, w, cp, p + i, step);
		}
		out->len = w - out->data;
		out->data[out->len] = '\0';
		return (0);
	}

	options = map_options(st->flags);
	n = utf8proc_decompose_custom(p, len, cb->v, cb->size, options, NULL,
	    NULL);
	if (n > cb->size) {
		if (cb->v != cb->local)
			free(cb->v);
		cb->v = xreallocarray(NULL, n, sizeof *cb->v);
		cb->size = n;
		n = utf8proc_decompose_custom(p, len, cb->v, cb->size, options,
		    NULL, NULL);
	}
	if (n >= 0)
		n = utf8proc_normalize_utf32(cb->v, n, options);
	if (n < 0)
		return (-1);

	/* At most 4 bytes a code point and a space before it. */
	buf_reserve(out, 5 * (size_t)n);
	w = out->data + out->len;
	for (i = 0; i < n; i++)
		w = put_cp(st, w, cb->v[i], NULL, 0);
	out->len = w - out->data;
	out->data[out->len] = '\0';
	return (0);
}

/*
 * Append the normalised form of text to out.  Returns 0, or 1 when the text
 * was not valid UTF-8 and was normalised as bytes.
 *
 * The text is cut into segments: runs of ASCII take the byte path, the
 * rest the Unicode path, and the output is the same as the Unicode path's
 * over the whole text.  A cut is made only just before an ASCII character,
 * and the ASCII character just before a non-ASCII one goes with the Unicode
 * segment, since it may compose with what follows (e and U+0301).  Such a
 * cut changes nothing: utf8proc decomposes (and folds) each character on its
 * own; canonical reordering moves only marks of nonzero combining class,
 * and ASCII is class 0; and composition never takes an ASCII character as
 * the second of a pair, so an ASCII character always begins a new starter
 * and composition from there on does not see what came before.  Whatever a
 * segment maps to (ASCII from U+212A, marks from U+0130) is thus its share
 * of the whole text's mapping.  A segment that is not valid UTF-8 makes the
 * whole text so, as an ASCII byte is never part of a multibyte sequence.
 * When every character of a segment's non-ASCII run is inert, nothing
 * composes with the ASCII character before it, which stays in the byte
 * path, and the run skips utf8proc (normalize_inert), or, when the space
 * and punctuation step leaves it alone too (opaque_run), stays in the
 * byte path's segment, which keeps bytes at or above 0x80 as they are.
 */
int
normalize(const char *text, size_t len, int flags, struct buf *out)
{
	const unsigned char	*p = (const unsigned char *)text;
	struct nstate		 st;
	struct cpbuf		 cb;
	size_t			 pos, high, cut, end;
	int			 rv = 0;

	normalize_init();
	st.out = out;
	st.start = out->len;
	st.flags = flags;
	st.pending = 0;
	high = ascii_span(p, len);
	if (high == len) {
		normalize_bytes(p, len, &st);
		return (0);
	}

	cb.v = cb.local;
	cb.size = NCP;
	pos = 0;
	for (;;) {
		/*
		 * The byte path's segment from pos (0 or after a Unicode
		 * segment, where the byte is ASCII) up to the non-ASCII run
		 * at high; when the byte path keeps the run as it is, the
		 * segment goes on past it.  Else up to the character before
		 * the run, which is ASCII (the run is all the non-ASCII bytes
		 * there), unless nothing composes with it.
		 */
		for (end = high; end < len && p[end] >= 0x80; end++)
			/* nothing */;
		if (!opaque_run(p + high, end - high, flags)) {
			cut = high > pos ? high - 1 : high;
			if ((flags & (NORM_NFKC|NORM_CASEFOLD)) &&
			    inert_run(p + high, end - high, flags)) {
				normalize_bytes(p + pos, high - pos, &st);
				normalize_inert(p + high, end - high, &st);
			} else {
				normalize_bytes(p + pos, cut - pos, &st);
				if (normalize_segment(p + cut, end - cut, &st,
				    &cb) != 0) {
					rv = 1;
					break;
				}
			}
			pos = end;
		}
		high = end + ascii_span(p + end, len - end);
		if (high == len) {
			normalize_bytes(p + pos, len - pos, &st);
			break;
		}
	}
	if (cb.v != cb.local)
		free(cb.v);
	if (rv == 1) {
		out->len = st.start;
		st.pending = 0;
		normalize_bytes(p, len, &st);
	}
	return (rv);
}
