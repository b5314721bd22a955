/*
 * The index: band keys to candidate documents, and the documents
 * themselves.  This file picks a storage backend and holds what the
 * backends share; the storage is theirs:
 *
 *   lmdb.c   an LMDB environment in a directory (the default): one
 *            machine, one writer at a time, a log-structured band index;
 *   redis.c  a Redis Cluster (or one Redis) shared by many processes on
 *            many machines: --db redis://host:port[,host:port...][/ns].
 *
 * Every backend stores a document as the same record (docrec_encode), its
 * text in the same encoding (textenc_encode) and its parameters as the
 * same "key = value" records (meta_write, meta_read), so that an export
 * from one imports into the other and the checks are the same.
 *
 * The calling sequence for a batch is index_begin, index_prepare (the
 * whole batch, once), then per record index_candidates, index_doc,
 * index_text and index_insert_encoded, then index_commit (or index_abort).
 * The caller reports a verdict only after index_commit succeeds.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <lz4.h>
#include <zstd.h>

#include "mhfilter.h"

#define TEXT_HEADER	2	/* u8 encoding, u8 flags */
#define TEXT_RAW	0
#define TEXT_ZSTD	1	/* written by index formats 1 to 3 */
#define TEXT_LZ4	2

/* Does path name an index on a server (a redis:// URL)? */
int
index_is_remote(const char *path)
{
	return (path != NULL && strncmp(path, "redis://", 8) == 0);
}

/*
 * Open the index named by path: a redis:// URL or an LMDB directory (NULL
 * makes a temporary one).  See lmdb_ops.open for the arguments.
 */
int
index_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	const struct index_ops	*ops = &lmdb_ops;
	int			 rc;

	if (index_is_remote(path))
		ops = &redis_ops;
	if ((rc = ops->open(ixp, path, flags, p, given, cause)) != 0)
		return (rc);
	(*ixp)->ops = ops;
	return (0);
}

void
index_close(struct index *ix)
{
	if (ix != NULL)
		ix->ops->close(ix);
}

int
index_begin(struct index *ix, char **cause)
{
	return (ix->ops->begin(ix, cause));
}

/* Tell the backend a batch's records before they are looked up. */
int
index_prepare(struct index *ix, const struct ixdoc *docs, size_t n,
    char **cause)
{
	if (ix->ops->prepare == NULL)
		return (0);
	return (ix->ops->prepare(ix, docs, n, cause));
}

int
index_commit(struct index *ix, char **cause)
{
	return (ix->ops->commit(ix, cause));
}

void
index_abort(struct index *ix)
{
	ix->ops->abort(ix);
}

/*
 * Append to out the documents sharing each of the b band keys, once for
 * each band they share (so a document's count is its number of shared
 * bands).  slot is the record's place in the batch given to index_prepare,
 * or INDEX_NOSLOT.
 */
int
index_candidates(struct index *ix, size_t slot, const uint64_t *keys,
    struct u64vec *out, char **cause)
{
	return (ix->ops->candidates(ix, slot, keys, out, cause));
}

/* A document's record; its signature stays valid until the next call. */
int
index_doc(struct index *ix, uint64_t docid, struct docinfo *d, char **cause)
{
	return (ix->ops->doc(ix, docid, d, cause));
}

/* A document's normalised text; returns its DOC_BYTES flag, or -1. */
int
index_text(struct index *ix, uint64_t docid, struct buf *out, char **cause)
{
	return (ix->ops->text(ix, docid, out, cause));
}

/* Insert a document (not prepared), encoding its text here. */
int
index_insert(struct index *ix, const uint64_t *keys, const uint32_t *sig,
    const char *id, size_t idlen, const char *text, size_t textlen,
    int flags, int64_t when, char **cause)
{
	return (ix->ops->insert(ix, INDEX_NOSLOT, keys, sig, id, idlen, text,
	    textlen, NULL, 0, flags, when, cause));
}

/*
 * Insert a document whose text was encoded by textenc_encode (enc not
 * NULL), so that worker threads compress while the writer writes.  slot
 * is its place in the prepared batch, or INDEX_NOSLOT.
 */
int
index_insert_encoded(struct index *ix, size_t slot, const uint64_t *keys,
    const uint32_t *sig, const char *id, size_t idlen, const char *text,
    size_t textlen, const char *enc, size_t enclen, int flags, int64_t when,
    char **cause)
{
	return (ix->ops->insert(ix, slot, keys, sig, id, idlen, text, textlen,
	    enc, enclen, flags, when, cause));
}

int
index_stats(struct index *ix, struct index_stats *st, char **cause)
{
	return (ix->ops->stats(ix, st, cause));
}

int
index_expire(struct index *ix, const struct retention *ret, int64_t now,
    uint64_t budget, uint64_t *removed, char **cause)
{
	return (ix->ops->expire(ix, ret, now, budget, removed, cause));
}

int
index_remove(struct index *ix, const char *id, size_t idlen,
    uint64_t *removed, char **cause)
{
	return (ix->ops->remove(ix, id, idlen, removed, cause));
}

int
index_info(struct index *ix, struct index_info *in, char **cause)
{
	return (ix->ops->info(ix, in, cause));
}

int
index_check(struct index *ix, FILE *f, uint64_t *problems, char **cause)
{
	return (ix->ops->check(ix, f, problems, cause));
}

int
index_compact(struct index *ix, const char *dest, char **cause)
{
	if (ix->ops->compact == NULL) {
		xasprintf(cause, "--compact does not apply to a %s index",
		    ix->ops->name);
		return (-1);
	}
	return (ix->ops->compact(ix, dest, cause));
}

int
index_export(struct index *ix, FILE *f, char **cause)
{
	return (ix->ops->export(ix, f, cause));
}

/* The first document number this process could have inserted. */
uint64_t
index_run_start(struct index *ix)
{
	return (ix->run_doc);
}

/* The index's name as given (a directory or a URL). */
const char *
index_path(struct index *ix)
{
	return (ix->path);
}

/*
 * A document record, into out (emptied first):
 *   u8 version (2), u8 flags (DOC_*), u16 0, u32 id length,
 *   i64 document time (big-endian, seconds since the epoch),
 *   K x u16 signature (little-endian), the external id.
 * The caller checks that the id length fits 32 bits.
 */
void
docrec_encode(struct buf *out, unsigned K, const uint32_t *sig,
    const char *id, size_t idlen, int flags, int64_t when)
{
	unsigned char	*p;
	unsigned	 i;

	out->len = 0;
	buf_reserve(out, DOC_HEADER + 2 * (size_t)K + idlen);
	p = (unsigned char *)out->data;
	p[0] = DOC_VERSION;
	p[1] = flags;
	p[2] = p[3] = 0;
	put_le32(p + 4, idlen);
	put_be64(p + 8, (uint64_t)when);
	for (i = 0; i < K; i++) {
		p[DOC_HEADER + 2 * i] = sig[i] & 0xff;
		p[DOC_HEADER + 2 * i + 1] = (sig[i] >> 8) & 0xff;
	}
	memcpy(p + DOC_HEADER + 2 * K, id, idlen);
	out->len = DOC_HEADER + 2 * (size_t)K + idlen;
}

/*
 * Decode a document record of len bytes (more is allowed: what follows
 * the id is the caller's); the signature goes to sig (K values).  d->id
 * points into p.  Returns the record's length, or 0 if it is corrupt.
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
	sig_decode16(p + DOC_HEADER, K, sig);
	d->flags = p[1];
	d->time = (int64_t)get_be64(p + 8);
	d->sig = sig;
	d->id = (const char *)p + DOC_HEADER + 2 * K;
	d->idlen = idlen;
	return (DOC_HEADER + 2 * K + idlen);
}

/* K stored 16-bit little-endian signature values into sig. */
void
sig_decode16(const unsigned char *p, unsigned K, uint32_t *sig)
{
	unsigned	 i;

	for (i = 0; i < K; i++)
		sig[i] = p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
}

/* Parameters that make sense together (stored or imported). */
int
params_ok(const struct index_params *p)
{
	return (p->perms != 0 && p->perms <= MHF_MAX_PERMS && p->rows != 0 &&
	    p->bands != 0 && (uint64_t)p->bands * p->rows <= p->perms &&
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
}

/*
 * A text encoder: LZ4 compression state (one per thread).
 *
 * Texts are compressed one at a time, and most are a few hundred bytes.
 * On such texts (the 1M synthetic stream, 600 bytes on average) zstd level
 * 1 compresses 112 MB/s and decompresses 330 MB/s to a ratio of 2.35; LZ4
 * compresses 390 MB/s and decompresses 2,260 MB/s to 1.74.  zstd was the
 * largest single cost of hashing a record, and its decompression a tenth of
 * verifying a candidate, so texts are stored as LZ4 since index format 4
 * (about 35% more bytes of texts).  Older indexes' zstd texts still read.
 */
struct textenc {
	void		*state;		/* LZ4_sizeofState() bytes */
};

struct textenc *
textenc_create(void)
{
	struct textenc	*te;

	te = xcalloc(1, sizeof *te);
	te->state = xmalloc(LZ4_sizeofState());
	return (te);
}

void
textenc_free(struct textenc *te)
{
	if (te == NULL)
		return;
	free(te->state);
	free(te);
}

/*
 * Encode a normalised text as the index stores it: u8 encoding, u8 flags
 * (DOC_BYTES), then for TEXT_RAW the bytes, for TEXT_LZ4 the text's length
 * (u32, little-endian) and an LZ4 block, used when the text is 64 bytes or
 * more and that makes it smaller.  Into out, emptied first.
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
 * Decode a stored text into out (emptied first).  Returns its DOC_BYTES
 * flag, or -1 if it is corrupt.
 */
int
text_decode(const unsigned char *rec, size_t reclen, struct buf *out)
{
	static __thread ZSTD_DCtx *dctx;
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
		if (dctx == NULL && (dctx = ZSTD_createDCtx()) == NULL)
			fatalx("zstd: out of memory");
		buf_reserve(out, size);
		n = ZSTD_decompressDCtx(dctx, out->data, size, p, len);
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

/*
 * Write the parameter records of a new index through put: "format",
 * "scheme", every parameter that changes signatures or band keys, whether
 * texts are kept, the defaults later runs take, and "created".  Returns
 * put's first failure.
 */
int
meta_write(const struct index_params *p, int format, meta_put_fn put,
    void *arg)
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
	PUT("created", "%lld", (long long)time(NULL));
#undef PUT
	return (rc);
}

/*
 * Compare the stored parameters (read through get: 0 found, else missing)
 * with the ones given, and take the stored ones for the rest.  Returns
 * INDEX_MISMATCH with a cause naming the option.
 */
int
meta_read(struct index_params *p, int format, int given, const char *where,
    meta_get_fn get, void *arg, char **cause)
{
	static const struct {
		const char	*key;
		const char	*option;
		int		 bit;
	} params[] = {
		{ "perms", "--perms", IP_PERMS },
		{ "bands", "--bands", IP_BANDS },
		{ "rows", "--rows", IP_ROWS },
		{ "shingle", "--shingle", IP_SHINGLE },
		{ "unit", "--unit", IP_UNIT },
		{ "normalize", "--normalize", IP_NORM },
		{ "seed", "--seed", IP_SEED },
	};
	char			 stored[128], want[128];
	size_t			 i;
	unsigned long long	 u;
	int			 f;

	if (get(arg, "format", stored, sizeof stored) != 0 ||
	    get(arg, "scheme", want, sizeof want) != 0) {
		xasprintf(cause, "%s is not an mhfilter index (no format "
		    "record)", where);
		return (INDEX_MISMATCH);
	}
	if (atoi(stored) != format) {
		xasprintf(cause, "%s has index format %s; this mhfilter reads "
		    "format %d", where, stored, format);
		return (INDEX_MISMATCH);
	}
	if (atoi(want) != MHF_SCHEME) {
		xasprintf(cause, "%s uses signature scheme %s; this mhfilter "
		    "makes scheme %d %s", where, want, MHF_SCHEME,
		    MHF_SCHEME_NAME);
		return (INDEX_MISMATCH);
	}

	for (i = 0; i < sizeof params / sizeof params[0]; i++) {
		if (get(arg, params[i].key, stored, sizeof stored) != 0) {
			xasprintf(cause, "%s: meta record \"%s\" is missing",
			    where, params[i].key);
			return (INDEX_MISMATCH);
		}
		switch (params[i].bit) {
		case IP_PERMS:
			snprintf(want, sizeof want, "%u", p->perms);
			break;
		case IP_BANDS:
			snprintf(want, sizeof want, "%u", p->bands);
			break;
		case IP_ROWS:
			snprintf(want, sizeof want, "%u", p->rows);
			break;
		case IP_SHINGLE:
			snprintf(want, sizeof want, "%u", p->shingle);
			break;
		case IP_UNIT:
			snprintf(want, sizeof want, "%s",
			    p->unit == UNIT_WORD ? "word" : "char");
			break;
		case IP_NORM:
			normalize_name(p->norm, want, sizeof want);
			break;
		case IP_SEED:
			snprintf(want, sizeof want, "%" PRIu64, p->seed);
			break;
		}
		if ((given & params[i].bit) && strcmp(stored, want) != 0) {
			xasprintf(cause, "%s was made with %s %s; you gave %s "
			    "%s (leave the option out, or use another --db)",
			    where, params[i].option, stored,
			    params[i].option, want);
			return (INDEX_MISMATCH);
		}
		u = strtoull(stored, NULL, 10);
		if (params[i].bit != IP_SEED && params[i].bit != IP_UNIT &&
		    params[i].bit != IP_NORM && u > MHF_MAX_PERMS) {
			xasprintf(cause, "%s: stored %s %s is out of range",
			    where, params[i].key, stored);
			return (INDEX_MISMATCH);
		}
		switch (params[i].bit) {
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
		case IP_UNIT:
			p->unit = strcmp(stored, "word") == 0 ? UNIT_WORD :
			    UNIT_CHAR;
			break;
		case IP_NORM:
			if (normalize_parse(stored, &f, cause) != 0)
				return (INDEX_MISMATCH);
			p->norm = f;
			break;
		case IP_SEED:
			p->seed = u;
			break;
		}
	}
	if (!params_ok(p)) {
		xasprintf(cause, "%s: the stored parameters are invalid",
		    where);
		return (INDEX_MISMATCH);
	}

	if (get(arg, "texts", stored, sizeof stored) != 0) {
		xasprintf(cause, "%s: meta record \"texts\" is missing",
		    where);
		return (INDEX_MISMATCH);
	}
	p->texts = atoi(stored);
	if (get(arg, "verify", stored, sizeof stored) == 0 &&
	    (~given & IP_VERIFY))
		p->verify = atoi(stored);
	if (p->verify == VERIFY_EXACT && !p->texts) {
		xasprintf(cause, "%s keeps no texts, so --verify exact is not "
		    "possible (it was made with --verify signature or none)",
		    where);
		return (INDEX_MISMATCH);
	}
	if (get(arg, "threshold", stored, sizeof stored) == 0 &&
	    (~given & IP_THRESHOLD)) {
		p->threshold = strtod(stored, NULL);
		if (!(p->threshold >= 0.01 && p->threshold <= 1.0)) {
			xasprintf(cause, "%s: stored threshold %s is out of "
			    "range", where, stored);
			return (INDEX_MISMATCH);
		}
	}
	if (p->verify < VERIFY_EXACT || p->verify > VERIFY_NONE) {
		xasprintf(cause, "%s: stored verify mode is out of range",
		    where);
		return (INDEX_MISMATCH);
	}
	return (0);
}

/* Hex of bytes, into a new string. */
static char *
hexstr(const unsigned char *p, size_t n)
{
	static const char	 digits[] = "0123456789abcdef";
	char			*s;
	size_t			 i;

	s = xmalloc(2 * n + 1);
	for (i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 0xf];
	}
	s[2 * n] = '\0';
	return (s);
}

/* A JSON string if the bytes are UTF-8, else under key "<name>_hex". */
static void
json_bytes(json_t *o, const char *name, const char *p, size_t n)
{
	json_t	*j;
	char	*h, *hk;

	if ((j = json_stringn(p, n)) != NULL) {
		json_object_set_new(o, name, j);
		return;
	}
	h = hexstr((const unsigned char *)p, n);
	xasprintf(&hk, "%s_hex", name);
	json_object_set_new(o, hk, json_string(h));
	free(hk);
	free(h);
}

/* The parameters an export carries, as a JSON object. */
static json_t *
params_json(const struct index_params *p)
{
	char	 norm[64];

	normalize_name(p->norm, norm, sizeof norm);
	return (json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:b,"
	    " s:i, s:f}",
	    "mhfilter_export", 1,
	    "scheme", MHF_SCHEME_NAME,
	    "perms", (json_int_t)p->perms,
	    "bands", (json_int_t)p->bands,
	    "rows", (json_int_t)p->rows,
	    "shingle", (json_int_t)p->shingle,
	    "unit", p->unit == UNIT_WORD ? "word" : "char",
	    "normalize", norm,
	    "texts", p->texts,
	    "verify", p->verify,
	    "threshold", p->threshold));
}


/* The header line of an export: the parameters. */
int
export_header(FILE *f, const struct index_params *p)
{
	json_t	*o;
	char	*line, seed[32];
	int	 rc = 0;

	o = params_json(p);
	snprintf(seed, sizeof seed, "%" PRIu64, p->seed);
	json_object_set_new(o, "seed", json_string(seed));
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (line == NULL || fprintf(f, "%s\n", line) < 0)
		rc = -1;
	free(line);
	return (rc);
}

/*
 * One document of an export: id, time, flags, sig (the stored 16-bit
 * values, little-endian, in hex) and, when texts are kept, the normalised
 * text.  Returns -1 on a write error.
 */
int
export_doc(FILE *f, const struct docinfo *d, const unsigned char *sig,
    unsigned K, const struct buf *text)
{
	json_t	*o;
	char	*line, *h;
	int	 rc = 0;

	o = json_object();
	json_bytes(o, "id", d->id, d->idlen);
	json_object_set_new(o, "time", json_integer((json_int_t)d->time));
	json_object_set_new(o, "flags", json_integer(d->flags));
	h = hexstr(sig, 2 * (size_t)K);
	json_object_set_new(o, "sig", json_string(h));
	free(h);
	if (text != NULL)
		json_bytes(o, "text", text->data, text->len);
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (line == NULL || fprintf(f, "%s\n", line) < 0)
		rc = -1;
	free(line);
	return (rc);
}

/* A string member of a JSON object, or dflt. */
static const char *
json_str(json_t *o, const char *key, const char *dflt)
{
	const char	*v = json_string_value(json_object_get(o, key));

	return (v != NULL ? v : dflt);
}

/* Bytes from hex; -1 if it is not hex of the expected length. */
static int
unhex(const char *h, unsigned char *out, size_t n)
{
	size_t	 i;
	int	 hi, lo;

	if (strlen(h) != 2 * n)
		return (-1);
	for (i = 0; i < n; i++) {
		hi = h[2 * i];
		lo = h[2 * i + 1];
		hi = hi >= '0' && hi <= '9' ? hi - '0' :
		    hi >= 'a' && hi <= 'f' ? hi - 'a' + 10 : -1;
		lo = lo >= '0' && lo <= '9' ? lo - '0' :
		    lo >= 'a' && lo <= 'f' ? lo - 'a' + 10 : -1;
		if (hi < 0 || lo < 0)
			return (-1);
		out[i] = hi << 4 | lo;
	}
	return (0);
}

/* A string or "<name>_hex" member of an exported document, as bytes. */
static int
json_getbytes(json_t *o, const char *name, struct buf *out)
{
	json_t	*j;
	char	*hk;
	size_t	 n;

	out->len = 0;
	if ((j = json_object_get(o, name)) != NULL && json_is_string(j)) {
		buf_append(out, json_string_value(j), json_string_length(j));
		return (0);
	}
	xasprintf(&hk, "%s_hex", name);
	j = json_object_get(o, hk);
	free(hk);
	if (j == NULL || !json_is_string(j))
		return (1);
	n = json_string_length(j) / 2;
	buf_reserve(out, n);
	if (unhex(json_string_value(j), (unsigned char *)out->data, n) != 0)
		return (-1);
	out->len = n;
	return (0);
}

#define IMPORT_BATCH	1000

/*
 * Insert n exported document lines (the first is line first+1) in one
 * transaction.  0, -1 with a cause, or INDEX_AGAIN (the map was grown: do
 * it again).
 */
static int
import_batch(struct index *ix, char **lines, const size_t *lens, size_t n,
    uint64_t first, uint64_t *keys, unsigned char *sb, uint32_t *sig,
    struct buf *id, struct buf *text, char **cause)
{
	json_t		*o;
	json_error_t	 jerr;
	size_t		 i;
	int		 rc, flags;

	if ((rc = index_begin(ix, cause)) != 0)
		return (rc);
	for (i = 0; i < n; i++) {
		if ((o = json_loadb(lines[i], lens[i], 0, &jerr)) == NULL) {
			xasprintf(cause, "import: line %" PRIu64 ": %s",
			    first + i + 1, jerr.text);
			index_abort(ix);
			return (-1);
		}
		if (json_getbytes(o, "id", id) != 0 ||
		    !json_is_string(json_object_get(o, "sig")) ||
		    unhex(json_string_value(json_object_get(o, "sig")), sb,
		    2 * ix->p.perms) != 0 ||
		    (ix->p.texts && json_getbytes(o, "text", text) != 0)) {
			json_decref(o);
			xasprintf(cause, "import: line %" PRIu64 ": not a "
			    "document of this export", first + i + 1);
			index_abort(ix);
			return (-1);
		}
		sig_decode16(sb, ix->p.perms, sig);
		lsh_keys(sig, ix->p.bands, ix->p.rows, ix->p.seed, keys);
		flags = json_integer_value(json_object_get(o, "flags")) &
		    (DOC_UNIQUE | DOC_BYTES);
		rc = index_insert(ix, keys, sig, id->data, id->len,
		    ix->p.texts ? text->data : "", ix->p.texts ? text->len : 0,
		    flags, json_integer_value(json_object_get(o, "time")),
		    cause);
		json_decref(o);
		if (rc != 0) {
			index_abort(ix);
			return (rc);
		}
	}
	return (index_commit(ix, cause));
}

/*
 * Read an export into this index, in transactions of 1,000 documents.
 * The export's parameters must be the index's; an index with no documents
 * yet takes them from the export.  Band keys are recomputed from the
 * signatures.  Returns 0 with the count, or -1 with a cause naming the
 * line.
 */
int
index_import(struct index *ix, FILE *f, uint64_t *count, char **cause)
{
	struct index_params	 want;
	json_t			*hdr;
	json_error_t		 jerr;
	struct buf		 id = { 0 }, text = { 0 };
	unsigned char		*sb = NULL;
	uint32_t		*sig = NULL;
	uint64_t		*keys = NULL, lineno = 0;
	char			*line = NULL, *batch[IMPORT_BATCH];
	size_t			 linesize = 0, nb = 0, blen[IMPORT_BATCH];
	ssize_t			 len;
	int			 rc = 0, rv = -1, texts, norm;

	*count = 0;
	if ((len = getline(&line, &linesize, f)) <= 0) {
		xasprintf(cause, "import: no header line");
		free(line);
		return (-1);
	}
	lineno = 1;
	if ((hdr = json_loadb(line, len, 0, &jerr)) == NULL ||
	    json_integer_value(json_object_get(hdr, "mhfilter_export")) != 1) {
		xasprintf(cause, "import: line 1: not an mhfilter export");
		goto out;
	}
	want = ix->p;
	if (strcmp(json_str(hdr, "scheme", ""), MHF_SCHEME_NAME) != 0) {
		xasprintf(cause, "import: line 1: signature scheme is not %s",
		    MHF_SCHEME_NAME);
		goto out;
	}
	want.perms = json_integer_value(json_object_get(hdr, "perms"));
	want.bands = json_integer_value(json_object_get(hdr, "bands"));
	want.rows = json_integer_value(json_object_get(hdr, "rows"));
	want.shingle = json_integer_value(json_object_get(hdr, "shingle"));
	want.unit = strcmp(json_str(hdr, "unit", ""), "word") == 0 ?
	    UNIT_WORD : UNIT_CHAR;
	if (normalize_parse(json_str(hdr, "normalize", ""), &norm,
	    cause) != 0)
		goto out;
	want.norm = norm;
	want.seed = strtoull(json_str(hdr, "seed", "0"), NULL, 10);
	texts = json_is_true(json_object_get(hdr, "texts"));
	if (!params_ok(&want)) {
		xasprintf(cause, "import: line 1: bad parameters");
		goto out;
	}
	want.texts = texts;
	want.verify = json_integer_value(json_object_get(hdr, "verify"));
	want.threshold = json_real_value(json_object_get(hdr, "threshold"));
	if (want.verify < VERIFY_EXACT || want.verify > VERIFY_NONE ||
	    (want.verify == VERIFY_EXACT && !texts) ||
	    !(want.threshold >= 0.01 && want.threshold <= 1.0)) {
		xasprintf(cause, "import: line 1: bad verify or threshold");
		goto out;
	}
	if (want.perms != ix->p.perms || want.bands != ix->p.bands ||
	    want.rows != ix->p.rows || want.shingle != ix->p.shingle ||
	    want.unit != ix->p.unit || want.norm != ix->p.norm ||
	    want.seed != ix->p.seed || ix->p.texts != texts) {
		if ((rc = ix->ops->adopt(ix, &want, cause)) != 0)
			goto out;
	}
	keys = xcalloc(ix->p.bands, sizeof *keys);
	sb = xmalloc(2 * ix->p.perms);
	sig = xcalloc(ix->p.perms, sizeof *sig);

	/*
	 * A thousand lines at a time, kept until committed: when the map
	 * fills up, index_abort has grown it and the block is redone.
	 */
	for (;;) {
		while (nb < IMPORT_BATCH &&
		    (len = getline(&line, &linesize, f)) > 0) {
			batch[nb] = xstrndup(line, len);
			blen[nb++] = len;
		}
		if (nb == 0)
			break;
		while ((rc = import_batch(ix, batch, blen, nb, lineno, keys,
		    sb, sig, &id, &text, cause)) == INDEX_AGAIN)
			;
		if (rc != 0)
			goto out;
		*count += nb;
		lineno += nb;
		while (nb > 0)
			free(batch[--nb]);
	}
	if (ferror(f)) {
		xasprintf(cause, "import: read error: %s", strerror(errno));
		goto out;
	}
	rv = 0;
out:
	while (nb > 0)
		free(batch[--nb]);
	json_decref(hdr);
	free(line);
	free(keys);
	free(sb);
	free(sig);
	buf_free(&id);
	buf_free(&text);
	return (rv);
}
