/*
 * What the index stores, byte for byte: the one description of every
 * stored layout that is not the LMDB band index's own (bandrun.c).  Both
 * backends store a document as the same record, its text in the same
 * encoding and its parameters as the same records, so that an export from
 * one imports into the other and the checks are the same; lmdb.c and
 * redis.c only say where these go.  tests/unit/test_codec.c pins each
 * layout with known-answer vectors.
 *
 * A document record (docrec_encode), 16 bytes then the signature and id:
 *
 *   offset  size  field
 *        0     1  version, DOC_VERSION (2)
 *        1     1  flags, DOC_UNIQUE | DOC_BYTES
 *        2     2  the document's distinct shingle count, as a code
 *                 (shcount_encode; little-endian), or 0: not known
 *        4     4  id length (little-endian)
 *        8     8  document time (big-endian, seconds since the epoch,
 *                 two's complement)
 *       16    2K  the K signature values, 16 bits each (little-endian)
 *    16+2K     n  the external id, n bytes
 *
 * A text (textenc_encode): u8 encoding (TEXT_RAW 0; TEXT_ZSTD 1, written
 * by index formats 1 to 3 and Redis format 2; TEXT_LZ4 2), u8 flags
 * (DOC_BYTES), then for TEXT_RAW the bytes, for TEXT_LZ4 the text's length
 * (u32, little-endian) and an LZ4 block, for TEXT_ZSTD a zstd frame.
 *
 * A time key (LMDB's times database, what retention walks): the document
 * time, big-endian with the sign bit flipped so that byte order is time
 * order, then the document number, big-endian: 16 bytes.
 *
 * The parameter records (meta_write): "format", "scheme" ("2
 * xxh3-oph16-dens-v2"), "perms", "bands", "rows", "shingle", "unit"
 * ("char" or "word"), "normalize" (normalize_name), "seed", "texts" (0 or
 * 1), "verify" (VERIFY_*), "threshold" (%.17g) and "created" (seconds
 * since the epoch), all decimal text.  LMDB keeps each as a key of its
 * meta database; Redis keeps them all in one string (metatext_*), a
 * "key=value\n" line each, in that order.
 *
 * A seal (LMDB index format 9; seal_put): the 8 bytes after a stored
 * value of docs, texts, l0, l1 and l1y, XXH3-64 of the value's bytes
 * (little-endian), seeded with where it is stored: the database's tag
 * (SEAL_*) in the top byte and the value's key, read as a big-endian
 * number (a document, l0 record or chunk number), below.  A flipped bit
 * in the value or its seal, or a value moved under another key or into
 * another database, no longer matches (seal_open).
 *
 * Redis keys (rkey_*), NS the namespace: "{NS}:WHAT" for the namespace's
 * own keys (meta, seq, floor, docs: one hash slot), "NS:d:N" for document
 * N (decimal), "NS:b:HEX" for the bucket of band key HEX (16 lowercase hex
 * digits).  A document's value (rval_encode): a state byte (RVAL_PENDING
 * 'P' or RVAL_KEPT 'K'), the document record, then its text when texts are
 * kept; layout 5 adds RVAL_GROUPED 'G' (rval_keep), a kept document in
 * the group of an earlier one, whose number follows the state byte (8
 * bytes, big-endian) before the record, and writes a pending document as
 * its state byte alone.  A bucket is the numbers of its documents, 8
 * bytes big-endian each.
 * Layout 4 adds {NS}:undelivered, a sorted set of the ranges of documents
 * whose output may not have been written (redis.c, "Delivery marks"):
 * each member "FIRST:END:OWNER" (rud_encode: decimal, the range [FIRST,
 * END) and the writer that owns it, 0 for none), its score FIRST.
 */

#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include "mhfilter.h"

#define TEXT_HEADER	2	/* u8 encoding, u8 flags */
#define TEXT_RAW	0
#define TEXT_ZSTD	1	/* written by index formats 1 to 3 */
#define TEXT_LZ4	2

/*
 * A document's distinct shingle count n in 16 bits, for containment's
 * bounds (filter.c): below 2048, n itself; above, 11 bits of it and where
 * they are, rounded down, so that the code stands for a range of counts
 * at most 1/2048 of n wide (shcount_range).  0 for 0: not known.  Kept
 * under containment, in the two bytes of the document record that were
 * zero before, without a format change: every earlier record reads as not
 * known, and a reader that ignores them reads the record as before.
 */
unsigned
shcount_encode(uint64_t n)
{
	unsigned	 e = 0;

	if (n < 2048)
		return ((unsigned)n);
	while ((n >> e) >= 4096)
		e++;
	if (e >= 30)
		return (0xffff);		/* 2^41 or more */
	return ((e + 1) << 11 | (unsigned)((n >> e) - 2048));
}

/*
 * The counts that code c stands for, [*lo, *hi]; 0 and UINT64_MAX for 0,
 * not known.
 */
void
shcount_range(unsigned c, uint64_t *lo, uint64_t *hi)
{
	unsigned	 e = c >> 11;

	if (c == 0) {
		*lo = 0;
		*hi = UINT64_MAX;
	} else if (e == 0)
		*lo = *hi = c;
	else if (e == 31) {
		*lo = (uint64_t)1 << 41;
		*hi = UINT64_MAX;
	} else {
		*lo = (uint64_t)(2048 + (c & 2047)) << (e - 1);
		*hi = *lo + ((uint64_t)1 << (e - 1)) - 1;
	}
}

/*
 * A document record, appended to out: flags holds the DOC_* bits and,
 * from bit 16 (DOC_SHINGLES), the code of its shingle count.  The caller
 * checks that the id length fits 32 bits.
 */
void
docrec_append(struct buf *out, unsigned K, const uint32_t *sig,
    const char *id, size_t idlen, int flags, int64_t when)
{
	unsigned char	*p;

	buf_reserve(out, out->len + DOC_HEADER + 2 * (size_t)K + idlen);
	p = (unsigned char *)out->data + out->len;
	p[0] = DOC_VERSION;
	p[1] = flags & DOC_FLAGS;
	p[2] = ((unsigned)flags >> 16) & 0xff;
	p[3] = ((unsigned)flags >> 24) & 0xff;
	put_le32(p + 4, idlen);
	put_be64(p + 8, (uint64_t)when);
	sig_encode16(sig, K, p + DOC_HEADER);
	memcpy(p + DOC_HEADER + 2 * K, id, idlen);
	out->len += DOC_HEADER + 2 * (size_t)K + idlen;
}

/* A document record, into out (emptied first). */
void
docrec_encode(struct buf *out, unsigned K, const uint32_t *sig,
    const char *id, size_t idlen, int flags, int64_t when)
{
	out->len = 0;
	docrec_append(out, K, sig, id, idlen, flags, when);
}

/*
 * Decode a document record of len bytes (more is allowed: what follows
 * the id is the caller's); the signature goes to sig (K values), unless
 * sig is NULL (then d->sig is NULL too).  d->id points into p.  Returns
 * the record's length, or 0 if it is corrupt.
 */
size_t
docrec_decode(const unsigned char *p, size_t len, unsigned K, uint32_t *sig,
    struct docinfo *d)
{
	uint32_t	 idlen;

	if (len < DOC_HEADER + 2 * (size_t)K || p[0] != DOC_VERSION)
		return (0);
	idlen = get_le32(p + 4);
	if (len - DOC_HEADER - 2 * (size_t)K < idlen)
		return (0);
	if (sig != NULL)
		sig_decode16(p + DOC_HEADER, K, sig);
	d->flags = p[1];
	d->shingles = p[2] | (unsigned)p[3] << 8;
	d->time = (int64_t)get_be64(p + 8);
	d->sig = sig;
	d->id = (const char *)p + DOC_HEADER + 2 * K;
	d->idlen = idlen;
	return (DOC_HEADER + 2 * K + idlen);
}

/* Set the flags of an encoded document record. */
void
docrec_set_flags(unsigned char *p, int flags)
{
	p[1] = flags & DOC_FLAGS;
}

/*
 * The signature's 16-bit values, stored little-endian: on x86-64 eight at
 * a time with SSE2 (the writer encodes a record's 128 for every document
 * it inserts, and a lookup decodes them for every candidate; a byte at a
 * time, 1% of a short run).  The same bytes either way.
 */

/* K stored 16-bit little-endian signature values into sig. */
void
sig_decode16(const unsigned char *p, unsigned K, uint32_t *sig)
{
	unsigned	 i = 0;
#ifdef __SSE2__
	__m128i		 v, zero = _mm_setzero_si128();

	for (; i + 8 <= K; i += 8) {
		v = _mm_loadu_si128((const __m128i *)(p + 2 * i));
		_mm_storeu_si128((__m128i *)(sig + i),
		    _mm_unpacklo_epi16(v, zero));
		_mm_storeu_si128((__m128i *)(sig + i + 4),
		    _mm_unpackhi_epi16(v, zero));
	}
#endif
	for (; i < K; i++)
		sig[i] = p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
}

/* K signature values as stored, 16-bit little-endian, into p. */
void
sig_encode16(const uint32_t *sig, unsigned K, unsigned char *p)
{
	unsigned	 i = 0;
#ifdef __SSE2__
	__m128i		 a, b, low = _mm_set1_epi32(0xffff);
	__m128i		 bias32 = _mm_set1_epi32(0x8000);
	__m128i		 bias16 = _mm_set1_epi16((short)0x8000);

	/*
	 * SSE2 packs with signed saturation only: the low 16 bits, less
	 * 0x8000, fit a signed 16-bit lane exactly, and the 0x8000 is put
	 * back by flipping each lane's top bit.
	 */
	for (; i + 8 <= K; i += 8) {
		a = _mm_sub_epi32(_mm_and_si128(_mm_loadu_si128(
		    (const __m128i *)(sig + i)), low), bias32);
		b = _mm_sub_epi32(_mm_and_si128(_mm_loadu_si128(
		    (const __m128i *)(sig + i + 4)), low), bias32);
		_mm_storeu_si128((__m128i *)(p + 2 * i),
		    _mm_xor_si128(_mm_packs_epi32(a, b), bias16));
	}
#endif
	for (; i < K; i++) {
		p[2 * i] = sig[i] & 0xff;
		p[2 * i + 1] = (sig[i] >> 8) & 0xff;
	}
}

/* The time key of a document, into kb (TIMEKEY_SIZE bytes). */
void
timekey_put(unsigned char *kb, int64_t t, uint64_t docid)
{
	put_be64(kb, (uint64_t)t ^ (1ULL << 63));
	put_be64(kb + 8, docid);
}

/* The time in a time key. */
int64_t
timekey_time(const unsigned char *kb)
{
	return ((int64_t)(get_be64(kb) ^ (1ULL << 63)));
}

/* The document number in a time key. */
uint64_t
timekey_doc(const unsigned char *kb)
{
	return (get_be64(kb + 8));
}

/* The seal of the len bytes at p, stored in database tag under key. */
uint64_t
seal_of(const void *p, size_t len, unsigned tag, uint64_t key)
{
	return (XXH3_64bits_withSeed(p, len, (uint64_t)tag << 56 ^ key));
}

/* Write the seal of the len bytes at p after them (SEAL_SIZE bytes). */
void
seal_put(unsigned char *p, size_t len, unsigned tag, uint64_t key)
{
	put_le64(p + len, seal_of(p, len, tag, key));
}

/*
 * A sealed value of size bytes at p, stored in database tag under key:
 * its length without the seal in *len, and 0 if the seal matches, -1 if
 * it does not (or the value is too short to have one).
 */
int
seal_open(const void *p, size_t size, unsigned tag, uint64_t key,
    size_t *len)
{
	*len = 0;
	if (size < SEAL_SIZE)
		return (-1);
	*len = size - SEAL_SIZE;
	return (get_le64((const unsigned char *)p + *len) ==
	    seal_of(p, *len, tag, key) ? 0 : -1);
}

/*
 * A text encoder: LZ4 compression state (one per thread).
 *
 * Texts are compressed one at a time, and most are a few hundred bytes.
 * On such texts LZ4 compresses about 3.5 times and decompresses 7 times as
 * fast as zstd level 1, for about a third more bytes; compression is paid
 * for every record hashed and decompression for every candidate verified,
 * so texts are stored as LZ4.  Indexes before format 4 hold zstd texts,
 * which still read.
 */
struct textenc {
	void		*state;		/* LZ4_sizeofState() bytes */
};

/* A new text encoder. */
struct textenc *
textenc_create(void)
{
	struct textenc	*te;

	te = xcalloc(1, sizeof *te);
	te->state = xmalloc(LZ4_sizeofState());
	return (te);
}

/* Free a text encoder (NULL is allowed). */
void
textenc_free(struct textenc *te)
{
	if (te == NULL)
		return;
	free(te->state);
	free(te);
}

/*
 * Encode a normalised text as the index stores it (above): LZ4 when the
 * text is 64 bytes or more and that makes it smaller, else raw.  Into out,
 * emptied first.
 */
void
textenc_encode(struct textenc *te, const char *text, size_t len, int flags,
    struct buf *out)
{
	unsigned char	*p;
	size_t		 room = len;
	int		 bound = 0, n = 0;

	if (len >= 64 && len <= LZ4_MAX_INPUT_SIZE) {
		bound = LZ4_compressBound((int)len);
		if ((size_t)bound > room)
			room = bound;
	}
	out->len = 0;
	buf_reserve(out, TEXT_HEADER + 4 + room);
	p = (unsigned char *)out->data;
	p[1] = flags & DOC_BYTES;
	if (bound > 0)
		n = LZ4_compress_fast_extState(te->state, text,
		    (char *)p + TEXT_HEADER + 4, (int)len, bound, 1);
	if (n > 0 && (size_t)n + 4 < len) {
		p[0] = TEXT_LZ4;
		put_le32(p + TEXT_HEADER, (uint32_t)len);
		out->len = TEXT_HEADER + 4 + (size_t)n;
	} else {
		p[0] = TEXT_RAW;
		if (len > 0)		/* text may be NULL then */
			memcpy(p + TEXT_HEADER, text, len);
		out->len = TEXT_HEADER + len;
	}
}

/*
 * The most a compressed text of len bytes can expand to, so that a damaged
 * or hostile length is refused before memory is reserved for it.  An LZ4
 * sequence adds at most 255 bytes of match per byte of input; a zstd block
 * has a 3-byte header and holds at most 128 KiB (RLE: one byte for all).
 */
#define LZ4_MAX_RATIO		255
#define ZSTD_BLOCK_MAX		(128 * 1024)

/*
 * Each thread's zstd decompression context (made on its first zstd text),
 * freed when the thread ends: the pipeline's writer thread ends before
 * the process does.
 */
static pthread_key_t	 dctx_key;
static pthread_once_t	 dctx_once = PTHREAD_ONCE_INIT;

/* Free a thread's context at its end (pthread_key_create). */
static void
dctx_free(void *dctx)
{
	ZSTD_freeDCtx(dctx);
}

/* Make the key of the contexts, once. */
static void
dctx_init(void)
{
	if (pthread_key_create(&dctx_key, dctx_free) != 0)
		fatalx("cannot make a thread key");
}

/* This thread's zstd decompression context. */
static ZSTD_DCtx *
dctx_get(void)
{
	ZSTD_DCtx	*dctx;

	pthread_once(&dctx_once, dctx_init);
	if ((dctx = pthread_getspecific(dctx_key)) == NULL) {
		if ((dctx = ZSTD_createDCtx()) == NULL)
			fatalx("zstd: out of memory");
		if (pthread_setspecific(dctx_key, dctx) != 0)
			fatalx("cannot set a thread key");
	}
	return (dctx);
}

/*
 * Decode a stored text into out (emptied first).  Returns its DOC_BYTES
 * flag, or -1 if it is corrupt.
 */
int
text_decode(const unsigned char *rec, size_t reclen, struct buf *out)
{
	const unsigned char	*p = rec + TEXT_HEADER;
	unsigned long long	 size;
	size_t			 n, len;
	int			 got;

	out->len = 0;
	if (reclen < TEXT_HEADER)
		return (-1);
	len = reclen - TEXT_HEADER;
	switch (rec[0]) {
	case TEXT_RAW:
		buf_append(out, p, len);
		break;
	case TEXT_LZ4:
		if (len < 4 || (size = get_le32(p)) > LZ4_MAX_INPUT_SIZE ||
		    len - 4 > INT_MAX ||
		    size > (unsigned long long)(len - 4) * LZ4_MAX_RATIO + 16)
			return (-1);
		buf_reserve(out, size);
		got = LZ4_decompress_safe((const char *)p + 4, out->data,
		    (int)(len - 4), (int)size);
		if (got < 0 || (unsigned long long)got != size)
			return (-1);
		out->len = size;
		out->data[size] = '\0';
		break;
	case TEXT_ZSTD:		/* index formats 1 to 3 */
		size = ZSTD_getFrameContentSize(p, len);
		if (size == ZSTD_CONTENTSIZE_ERROR ||
		    size == ZSTD_CONTENTSIZE_UNKNOWN ||
		    size > ((unsigned long long)len / 3 + 1) * ZSTD_BLOCK_MAX)
			return (-1);
		buf_reserve(out, size);
		n = ZSTD_decompressDCtx(dctx_get(), out->data, size, p, len);
		if (ZSTD_isError(n) || n != size)
			return (-1);
		out->len = n;
		out->data[n] = '\0';
		break;
	default:
		return (-1);
	}
	return (rec[1] & DOC_BYTES);
}

/* Parameters that make sense together (stored or imported). */
int
params_ok(const struct index_params *p)
{
	unsigned	 parts = lsh_parts(p->measure);

	return (p->perms != 0 && p->perms <= MHF_MAX_PERMS && p->rows != 0 &&
	    p->bands != 0 && p->bands % parts == 0 &&
	    (uint64_t)(p->bands / parts) * p->rows <= p->perms &&
	    p->shingle != 0 && p->shingle <= MHF_MAX_SHINGLE);
}

/* Take the stored parameters of src (an export's), for index_import. */
void
params_take(struct index_params *dst, const struct index_params *src)
{
	dst->perms = src->perms;
	dst->bands = src->bands;
	dst->rows = src->rows;
	dst->shingle = src->shingle;
	dst->unit = src->unit;
	dst->norm = src->norm;
	dst->seed = src->seed;
	dst->texts = src->texts;
	dst->verify = src->verify;
	dst->threshold = src->threshold;
	dst->measure = src->measure;
}

/*
 * Write the parameter records of a new index through put (above), with
 * "created" the time given.  Returns put's first failure.
 */
int
meta_write(const struct index_params *p, int format, int64_t created,
    meta_put_fn put, void *arg)
{
	char	 v[64];
	int	 rc = 0;

#define PUT(key, ...) do {						\
	snprintf(v, sizeof v, __VA_ARGS__);				\
	if (rc == 0)							\
		rc = put(arg, key, v);					\
} while (0)
	PUT("format", "%d", format);
	PUT("scheme", "%d %s", MHF_SCHEME, MHF_SCHEME_NAME);
	PUT("perms", "%u", p->perms);
	PUT("bands", "%u", p->bands);
	PUT("rows", "%u", p->rows);
	PUT("shingle", "%u", p->shingle);
	PUT("unit", "%s", p->unit == UNIT_WORD ? "word" : "char");
	normalize_name(p->norm, v, sizeof v);
	if (rc == 0)
		rc = put(arg, "normalize", v);
	PUT("seed", "%" PRIu64, p->seed);
	PUT("texts", "%d", p->texts);
	PUT("verify", "%d", p->verify);
	PUT("threshold", "%.17g", p->threshold);
	/* None is Jaccard: an index made before the record, or for it. */
	if (p->measure != MEASURE_JACCARD)
		PUT("measure", "%s", measure_name(p->measure));
	PUT("created", "%lld", (long long)created);
#undef PUT
	return (rc);
}

/* A stored number, at most max, by parse_uint.  0 or -1. */
int
meta_number(const char *v, uint64_t max, uint64_t *out)
{
	char	*cause;

	if (parse_uint(v, 0, max, out, &cause) != 0) {
		free(cause);
		return (-1);
	}
	return (0);
}

/* The number a "scheme" record begins with ("2 xxh3-..." gives 2). */
static int
meta_scheme(const char *v, uint64_t *out)
{
	char	 num[32];
	size_t	 n = strcspn(v, " ");

	if (n >= sizeof num || v[n] != ' ')
		return (-1);
	memcpy(num, v, n);
	num[n] = '\0';
	return (meta_number(num, INT_MAX, out));
}

/* The parameters meta_read compares, with their options. */
static const struct {
	const char	*key;
	const char	*option;
	int		 bit;
} meta_params[] = {
	{ "perms", "--perms", IP_PERMS },
	{ "bands", "--bands", IP_BANDS },
	{ "rows", "--rows", IP_ROWS },
	{ "shingle", "--shingle", IP_SHINGLE },
	{ "unit", "--unit", IP_UNIT },
	{ "normalize", "--normalize", IP_NORM },
	{ "seed", "--seed", IP_SEED },
};

/* A parameter of p as meta_write stores it. */
static void
meta_param(const struct index_params *p, int bit, char *out, size_t len)
{
	switch (bit) {
	case IP_PERMS:
		snprintf(out, len, "%u", p->perms);
		break;
	case IP_BANDS:
		snprintf(out, len, "%u", p->bands);
		break;
	case IP_ROWS:
		snprintf(out, len, "%u", p->rows);
		break;
	case IP_SHINGLE:
		snprintf(out, len, "%u", p->shingle);
		break;
	case IP_UNIT:
		snprintf(out, len, "%s", p->unit == UNIT_WORD ? "word" :
		    "char");
		break;
	case IP_NORM:
		normalize_name(p->norm, out, len);
		break;
	case IP_SEED:
		snprintf(out, len, "%" PRIu64, p->seed);
		break;
	}
}

/* Take a stored parameter into p; -1 if it is out of range. */
static int
meta_take(struct index_params *p, int bit, const char *stored, char **cause)
{
	uint64_t	 u;
	int		 f;

	switch (bit) {
	case IP_UNIT:
		p->unit = strcmp(stored, "word") == 0 ? UNIT_WORD : UNIT_CHAR;
		return (0);
	case IP_NORM:
		if (normalize_parse(stored, &f, cause) != 0)
			return (-1);
		p->norm = f;
		return (0);
	case IP_SEED:
		if (meta_number(stored, UINT64_MAX, &u) != 0)
			return (-1);
		p->seed = u;
		return (0);
	}
	if (meta_number(stored, MHF_MAX_PERMS, &u) != 0)
		return (-1);
	switch (bit) {
	case IP_PERMS:
		p->perms = u;
		break;
	case IP_BANDS:
		p->bands = u;
		break;
	case IP_ROWS:
		p->rows = u;
		break;
	case IP_SHINGLE:
		p->shingle = u;
		break;
	}
	return (0);
}

/*
 * The "format" and "scheme" records: present, and the ones this mhfilter
 * reads.
 */
static int
meta_version(int format, const char *where, meta_get_fn get, void *arg,
    char **cause)
{
	char		 stored[128], scheme[128];
	uint64_t	 u;

	if (get(arg, "format", stored, sizeof stored) != 0 ||
	    get(arg, "scheme", scheme, sizeof scheme) != 0) {
		xasprintf(cause, "%s is not an mhfilter index (no format "
		    "record)", where);
		return (INDEX_MISMATCH);
	}
	if (meta_number(stored, INT_MAX, &u) != 0 || u != (uint64_t)format) {
		xasprintf(cause, "%s has index format %s; this mhfilter reads "
		    "format %d", where, stored, format);
		return (INDEX_MISMATCH);
	}
	if (meta_scheme(scheme, &u) != 0 || u != MHF_SCHEME) {
		xasprintf(cause, "%s uses signature scheme %s; this mhfilter "
		    "makes scheme %d %s", where, scheme, MHF_SCHEME,
		    MHF_SCHEME_NAME);
		return (INDEX_MISMATCH);
	}
	return (0);
}

/*
 * The records that are defaults for later runs ("texts", "verify",
 * "threshold"), taken unless given.
 */
static int	meta_measure(struct index_params *, int, const char *,
		    meta_get_fn, void *, char **);

static int
meta_defaults(struct index_params *p, int given, const char *where,
    meta_get_fn get, void *arg, char **cause)
{
	char		 stored[128];
	uint64_t	 u;
	double		 t;
	char		*c;

	if (get(arg, "texts", stored, sizeof stored) != 0) {
		xasprintf(cause, "%s: meta record \"texts\" is missing",
		    where);
		return (INDEX_MISMATCH);
	}
	if (meta_number(stored, 1, &u) != 0) {
		xasprintf(cause, "%s: stored texts %s is out of range", where,
		    stored);
		return (INDEX_MISMATCH);
	}
	p->texts = u;
	if (get(arg, "verify", stored, sizeof stored) == 0 &&
	    (~given & IP_VERIFY)) {
		if (meta_number(stored, VERIFY_NONE, &u) != 0) {
			xasprintf(cause, "%s: stored verify mode is out of "
			    "range", where);
			return (INDEX_MISMATCH);
		}
		p->verify = u;
	}
	if (p->verify == VERIFY_EXACT && !p->texts) {
		xasprintf(cause, "%s keeps no texts, so --verify exact is not "
		    "possible (it was made with --verify signature or none)",
		    where);
		return (INDEX_MISMATCH);
	}
	if (get(arg, "threshold", stored, sizeof stored) == 0 &&
	    (~given & IP_THRESHOLD)) {
		if (parse_double(stored, 0.01, 1.0, &t, &c) != 0) {
			free(c);
			xasprintf(cause, "%s: stored threshold %s is out of "
			    "range", where, stored);
			return (INDEX_MISMATCH);
		}
		p->threshold = t;
	}
	if (p->verify < VERIFY_EXACT || p->verify > VERIFY_NONE) {
		xasprintf(cause, "%s: stored verify mode is out of range",
		    where);
		return (INDEX_MISMATCH);
	}
	return (0);
}

/*
 * The "measure" record: what the bands were chosen for, never changed
 * (an index made before it has none: Jaccard).  A measure given that is
 * not the index's is refused.
 */
static int
meta_measure(struct index_params *p, int given, const char *where,
    meta_get_fn get, void *arg, char **cause)
{
	char	 stored[128];
	int	 m = MEASURE_JACCARD;

	if (get(arg, "measure", stored, sizeof stored) == 0 &&
	    (m = measure_parse(stored)) == -1) {
		xasprintf(cause, "%s was made for measure '%s', which this "
		    "mhfilter does not know", where, stored);
		return (INDEX_MISMATCH);
	}
	if ((given & IP_MEASURE) && m != p->measure) {
		xasprintf(cause, "%s was made with --measure %s; you gave "
		    "--measure %s (leave the option out, or use another --db)",
		    where, measure_name(m), measure_name(p->measure));
		return (INDEX_MISMATCH);
	}
	p->measure = m;
	return (0);
}

/*
 * Compare the stored parameters (read through get) with the ones given,
 * and take the stored ones for the rest.  Returns 0, or INDEX_MISMATCH
 * with a cause naming the option.
 */
int
meta_read(struct index_params *p, int format, int given, const char *where,
    meta_get_fn get, void *arg, char **cause)
{
	char	 stored[128], want[128];
	size_t	 i;
	int	 rc, bit;

	if ((rc = meta_version(format, where, get, arg, cause)) != 0)
		return (rc);
	for (i = 0; i < sizeof meta_params / sizeof meta_params[0]; i++) {
		bit = meta_params[i].bit;
		if (get(arg, meta_params[i].key, stored, sizeof stored) != 0) {
			xasprintf(cause, "%s: meta record \"%s\" is missing",
			    where, meta_params[i].key);
			return (INDEX_MISMATCH);
		}
		meta_param(p, bit, want, sizeof want);
		if ((given & bit) && strcmp(stored, want) != 0) {
			xasprintf(cause, "%s was made with %s %s; you gave %s "
			    "%s (leave the option out, or use another --db)",
			    where, meta_params[i].option, stored,
			    meta_params[i].option, want);
			return (INDEX_MISMATCH);
		}
		if (meta_take(p, bit, stored, cause) != 0) {
			if (bit != IP_NORM)
				xasprintf(cause, "%s: stored %s %s is out of "
				    "range", where, meta_params[i].key, stored);
			return (INDEX_MISMATCH);
		}
	}
	if ((rc = meta_measure(p, given, where, get, arg, cause)) != 0)
		return (rc);
	if (!params_ok(p)) {
		xasprintf(cause, "%s: the stored parameters are invalid",
		    where);
		return (INDEX_MISMATCH);
	}
	return (meta_defaults(p, given, where, get, arg, cause));
}

/*
 * Redis's meta string: find key's "key=value" line.  A meta_get_fn: 0
 * found, INDEX_NOTFOUND, or INDEX_ERROR if the value is size bytes or more.
 */
int
metatext_get(void *arg, const char *key, char *out, size_t size)
{
	struct metatext	*m = arg;
	const char	*p = m->s, *end = m->s + m->len, *nl;
	size_t		 kl = strlen(key);

	while (p < end) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			nl = end;
		if ((size_t)(nl - p) > kl && memcmp(p, key, kl) == 0 &&
		    p[kl] == '=') {
			if ((size_t)(nl - p - kl - 1) >= size)
				return (INDEX_ERROR);
			memcpy(out, p + kl + 1, nl - p - kl - 1);
			out[nl - p - kl - 1] = '\0';
			return (0);
		}
		p = nl + 1;
	}
	return (INDEX_NOTFOUND);
}

/* Redis's meta string: append a "key=value" line to m->out (meta_put_fn). */
int
metatext_put(void *arg, const char *key, const char *value)
{
	struct metatext	*m = arg;

	buf_append(m->out, key, strlen(key));
	buf_append(m->out, "=", 1);
	buf_append(m->out, value, strlen(value));
	buf_append(m->out, "\n", 1);
	return (0);
}

/* The meta string m with its "format" line saying format, into out. */
void
metatext_set_format(const struct metatext *m, int format, struct buf *out)
{
	const char	*p = m->s, *end = m->s + m->len, *nl;
	char		 line[32];

	while (p < end) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			nl = end;
		if (nl - p > 7 && memcmp(p, "format=", 7) == 0) {
			snprintf(line, sizeof line, "format=%d", format);
			buf_append(out, line, strlen(line));
		} else
			buf_append(out, p, nl - p);
		if (nl < end)
			buf_append(out, "\n", 1);
		p = nl + 1;
	}
}

/* {NS}:WHAT, one of the namespace's own keys, into k. */
void
rkey_ns(struct buf *k, const char *ns, const char *what)
{
	k->len = 0;
	buf_append(k, "{", 1);
	buf_append(k, ns, strlen(ns));
	buf_append(k, "}:", 2);
	buf_append(k, what, strlen(what));
}

/* NS then a suffix, into k. */
static void
rkey_item(struct buf *k, const char *ns, const char *suffix)
{
	k->len = 0;
	buf_append(k, ns, strlen(ns));
	buf_append(k, suffix, strlen(suffix));
}

/*
 * NS:d:N, document N, into k.  These two are written by hand: a batch
 * makes one key for each of its records' bands, and snprintf was a
 * tenth of the Redis backend's CPU.
 */
void
rkey_doc(struct buf *k, const char *ns, uint64_t docid)
{
	char	 name[32], *p = name + sizeof name;

	*--p = '\0';
	do {
		*--p = (char)('0' + docid % 10);
		docid /= 10;
	} while (docid != 0);
	p -= 3;
	memcpy(p, ":d:", 3);
	rkey_item(k, ns, p);
}

/* NS:b:HEX, the bucket of a band key, into k. */
void
rkey_band(struct buf *k, const char *ns, uint64_t key)
{
	static const char hex[] = "0123456789abcdef";
	char	 name[20];
	int	 i;

	memcpy(name, ":b:", 3);
	for (i = 0; i < 16; i++)
		name[3 + i] = hex[(key >> (60 - 4 * i)) & 0xf];
	name[19] = '\0';
	rkey_item(k, ns, name);
}

/*
 * The document number of a document key of namespace ns (NS:d:N); 0 if
 * the key is not one.
 */
uint64_t
rkey_docid(const char *key, size_t len, const char *ns)
{
	char		 num[32], *cause;
	size_t		 nl = strlen(ns);
	uint64_t	 u;

	if (len <= nl + 3 || len - nl - 3 >= sizeof num ||
	    memcmp(key, ns, nl) != 0 || memcmp(key + nl, ":d:", 3) != 0)
		return (0);
	memcpy(num, key + nl + 3, len - nl - 3);
	num[len - nl - 3] = '\0';
	if (parse_uint(num, 1, UINT64_MAX, &u, &cause) != 0) {
		free(cause);
		return (0);
	}
	return (u);
}

/* An undelivered range's member, "FIRST:END:OWNER", into out. */
void
rud_encode(struct buf *out, uint64_t first, uint64_t end, uint64_t owner)
{
	char	 m[80];
	int	 n;

	n = snprintf(m, sizeof m, "%" PRIu64 ":%" PRIu64 ":%" PRIu64, first,
	    end, owner);
	out->len = 0;
	buf_append(out, m, (size_t)n);
}

/*
 * Decode an undelivered range's member of len bytes: 0, or -1 if it is
 * not one (three decimal numbers, FIRST at least 1 and below END).
 */
int
rud_decode(const char *m, size_t len, uint64_t *first, uint64_t *end,
    uint64_t *owner)
{
	uint64_t	*out[3] = { first, end, owner }, v;
	size_t		 i = 0, f;

	for (f = 0; f < 3; f++) {
		if (i == len || m[i] < '0' || m[i] > '9')
			return (-1);
		for (v = 0; i < len && m[i] >= '0' && m[i] <= '9'; i++) {
			if (v > (UINT64_MAX - (uint64_t)(m[i] - '0')) / 10)
				return (-1);
			v = v * 10 + (uint64_t)(m[i] - '0');
		}
		*out[f] = v;
		if (f < 2 && (i == len || m[i++] != ':'))
			return (-1);
	}
	if (i != len || *first == 0 || *first >= *end)
		return (-1);
	return (0);
}

/*
 * A document's Redis value, appended to out: the state byte, the document
 * record, then the encoded text (enc, enclen; none if enc is NULL).
 */
void
rval_encode(struct buf *out, int state, unsigned K, const uint32_t *sig,
    const char *id, size_t idlen, int flags, int64_t when, const char *enc,
    size_t enclen)
{
	char	 c = state;

	buf_append(out, &c, 1);
	docrec_append(out, K, sig, id, idlen, flags, when);
	if (enc != NULL)
		buf_append(out, enc, enclen);
}

/*
 * Append to out the kept value of v (len bytes, a value of state
 * RVAL_PENDING or RVAL_KEPT), with flags (if not negative) and in the
 * group of document group (0: its own).  Of its own group it is
 * RVAL_KEPT and the rest of v; in another's, RVAL_GROUPED, the group's
 * number (8 bytes, big-endian), then the rest of v (layout 5).
 */
void
rval_keep(struct buf *out, const char *v, size_t len, int flags,
    uint64_t group)
{
	unsigned char	 g[8];
	char		 c = group != 0 ? RVAL_GROUPED : RVAL_KEPT;
	size_t		 at;

	buf_append(out, &c, 1);
	if (group != 0) {
		put_be64(g, group);
		buf_append(out, g, sizeof g);
	}
	at = out->len;
	buf_append(out, v + 1, len - 1);
	if (flags >= 0)
		docrec_set_flags((unsigned char *)out->data + at, flags);
}

/*
 * Decode a document's Redis value of len bytes: its state (RVAL_PENDING
 * or RVAL_KEPT, which RVAL_GROUPED is too) into *state, the first
 * document of its group into *group (0: its own; group may be NULL), its
 * record into d and sig (as docrec_decode).  Returns where its text
 * begins, or 0 if it is corrupt.
 */
size_t
rval_decode(const char *v, size_t len, unsigned K, uint32_t *sig,
    struct docinfo *d, int *state, uint64_t *group)
{
	size_t	 h = 1, n;
	uint64_t g = 0;

	if (len < 1)
		return (0);
	switch (v[0]) {
	case RVAL_PENDING:
	case RVAL_KEPT:
		*state = v[0];
		break;
	case RVAL_GROUPED:
		if (len < 9 || (g = get_be64((const unsigned char *)v + 1)) == 0)
			return (0);
		*state = RVAL_KEPT;
		h = 9;
		break;
	default:
		return (0);
	}
	if ((n = docrec_decode((const unsigned char *)v + h, len - h, K, sig,
	    d)) == 0)
		return (0);
	if (group != NULL)
		*group = g;
	return (h + n);
}
