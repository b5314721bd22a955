/*
 * Export and import: an index's documents as JSON Lines, independent of
 * the backend (mhfilter --export, --import).  The first line holds the
 * parameters (export_header), each other line one document (export_doc):
 *
 *   {"mhfilter_export":1,"scheme":"xxh3-oph16-dens-v2","perms":128,...}
 *   {"id":"doc-1","time":1700000000,"flags":1,"sig":"be0a...","text":"..."}
 *
 * "sig" is the stored 16-bit signature values (little-endian) in hex;
 * "text", the normalised text, only when texts are kept; an id or text that
 * is not UTF-8 goes under "id_hex" or "text_hex"; "group", only for a
 * duplicate kept in the index, the position (1 for the first document line)
 * of the first document of its group, an earlier line.  An export walks the
 * documents through the backend (index_ops.each); an import inserts them
 * through index.c, band keys recomputed from the signatures.
 * tests/unit/test_codec.c and tests/e2e/stored.bats pin the format.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mhfilter.h"

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

/* Write a JSON object as one line, and free it.  -1 on a write error. */
static int
json_line(FILE *f, json_t *o)
{
	char	*line;
	int	 rc = 0;

	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (line == NULL || fprintf(f, "%s\n", line) < 0)
		rc = -1;
	free(line);
	return (rc);
}

/* The header line of an export: the parameters. */
int
export_header(FILE *f, const struct index_params *p)
{
	json_t	*o;
	char	 seed[32];

	o = params_json(p);
	snprintf(seed, sizeof seed, "%" PRIu64, p->seed);
	json_object_set_new(o, "seed", json_string(seed));
	/* None is Jaccard: an export of a Jaccard index is as before. */
	if (p->measure != MEASURE_JACCARD)
		json_object_set_new(o, "measure",
		    json_string(measure_name(p->measure)));
	return (json_line(f, o));
}

/*
 * One document of an export: id, time, flags, sig, when text is not NULL
 * the normalised text, and when group is not 0 its group's position.
 * Returns -1 on a write error.
 */
int
export_doc(FILE *f, const struct docinfo *d, unsigned K,
    const struct buf *text, uint64_t group)
{
	json_t		*o;
	unsigned char	 sb[2 * MHF_MAX_PERMS];
	char		*h;

	o = json_object();
	json_bytes(o, "id", d->id, d->idlen);
	json_object_set_new(o, "time", json_integer((json_int_t)d->time));
	json_object_set_new(o, "flags", json_integer(d->flags));
	sig_encode16(d->sig, K, sb);
	h = hexstr(sb, 2 * (size_t)K);
	json_object_set_new(o, "sig", json_string(h));
	free(h);
	if (text != NULL)
		json_bytes(o, "text", text->data, text->len);
	if (group != 0)
		json_object_set_new(o, "group",
		    json_integer((json_int_t)group));
	return (json_line(f, o));
}

/* What index_export's walk writes to. */
struct exporting {
	struct index	*ix;
	FILE		*f;
	unsigned	 K;
	struct u64vec	 docs;		/* written, in order (LMDB: sorted) */
};

/*
 * The position in the export of the first document of d's group, or 0
 * (its own group, or one not exported).
 */
static int
export_group(struct exporting *ex, const struct docinfo *d, uint64_t *pos,
    char **cause)
{
	uint64_t	 g;
	size_t		 lo = 0, hi = ex->docs.n, mid;
	int		 rc;

	*pos = 0;
	if ((rc = index_group(ex->ix, d->docid, &g, cause)) != 0)
		return (rc);
	while (g != d->docid && lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ex->docs.v[mid] == g) {
			*pos = mid + 1;
			break;
		}
		if (ex->docs.v[mid] < g)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (0);
}

/*
 * A write of the export failed: INDEX_ERROR with a cause, or with none
 * when the reader went away (EPIPE), which is no error to report: the run
 * ends quietly, as the filter's does under head(1).
 */
static int
export_write_error(char **cause)
{
	*cause = NULL;
	if (errno != EPIPE)
		xasprintf(cause, "write error: %s", strerror(errno));
	return (INDEX_ERROR);
}

/* Write one document of the walk (an index_each_fn). */
static int
export_one(void *arg, const struct docinfo *d, const struct buf *text,
    char **cause)
{
	struct exporting	*ex = arg;
	uint64_t		 group;
	int			 rc;

	if ((rc = export_group(ex, d, &group, cause)) != 0)
		return (rc);
	u64vec_push(&ex->docs, d->docid);
	if (export_doc(ex->f, d, ex->K, text, group) != 0) {
		return (export_write_error(cause));
	}
	return (0);
}

/*
 * Write the index as an export to f: the header, then every document, in
 * the backend's order (LMDB: oldest first).  Returns 0, or INDEX_ERROR with
 * a cause (a write error, or one of the walk).
 */
int
index_export(struct index *ix, FILE *f, char **cause)
{
	struct exporting	 ex = { ix, f, ix->p.perms, { 0 } };
	int			 rc;

	if (export_header(f, &ix->p) != 0) {
		return (export_write_error(cause));
	}
	rc = index_each(ix, export_one, &ex, cause);
	u64vec_free(&ex.docs);
	if (rc != 0)
		return (rc);
	if (fflush(f) != 0) {
		return (export_write_error(cause));
	}
	return (0);
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

/* An import's scratch, for a document line at a time. */
struct import_buf {
	uint64_t	*keys;		/* its band keys */
	unsigned char	*sb;		/* its signature as exported */
	uint32_t	*sig;		/* and decoded */
	uint32_t	*whole;		/* made again from its text */
	uint32_t	*part;		/* a part's */
	struct u64vec	 hashes;	/* its shingles' */
	struct u64vec	 table;		/* shingle_distinct's */
	struct buf	 id;
	struct buf	 text;
};

/*
 * The band keys of a document: from its signature, or under containment
 * (whose parts' signatures are not stored) from its text, as phase 1 makes
 * them (lsh_doc_keys).  Returns flags, under containment with the code of
 * the text's distinct shingle count, as phase 1 counts them.
 */
static int
import_keys(struct index *ix, struct import_buf *ib, int flags)
{
	struct shingler	 sh;

	if (lsh_parts(ix->p.measure) == 1) {
		lsh_keys(ib->sig, ix->p.bands, ix->p.rows, ix->p.seed,
		    ib->keys);
		return (flags);
	}
	sh.unit = ix->p.unit;
	sh.n = ix->p.shingle;
	sh.seed = ix->p.seed;
	shingle_hash(&sh, ib->text.data, ib->text.len, flags & DOC_BYTES,
	    &ib->hashes);
	lsh_doc_keys(&ix->p, ib->hashes.v, ib->hashes.n, 0, ib->whole,
	    ib->part, ib->keys);
	return (flags | DOC_SHINGLES(shcount_encode(shingle_distinct(
	    ib->hashes.v, ib->hashes.n, &ib->table))));
}

/*
 * Insert n exported document lines (the first is line first+1) in one
 * transaction.  0, INDEX_AGAIN (the map was grown: do it again), or
 * another INDEX_* code with a cause.
 */
static int
import_batch(struct index *ix, char **lines, const size_t *lens, size_t n,
    uint64_t first, struct import_buf *ib, struct u64vec *docs, char **cause)
{
	json_t		*o;
	json_error_t	 jerr;
	json_int_t	 group;
	struct buf	*id = &ib->id, *text = &ib->text;
	size_t		 i, had = docs->n;
	int		 rc, flags;

	if ((rc = index_begin(ix, cause)) != 0)
		return (rc);
	for (i = 0; i < n; i++) {
		/* A text may hold NUL bytes (as \u0000). */
		if ((o = json_loadb(lines[i], lens[i], JSON_ALLOW_NUL,
		    &jerr)) == NULL) {
			xasprintf(cause, "line %" PRIu64 ": %s",
			    first + i + 1, jerr.text);
			index_abort(ix);
			return (INDEX_ERROR);
		}
		if (json_getbytes(o, "id", id) != 0 ||
		    !json_is_string(json_object_get(o, "sig")) ||
		    unhex(json_string_value(json_object_get(o, "sig")), ib->sb,
		    2 * ix->p.perms) != 0 ||
		    (ix->p.texts && json_getbytes(o, "text", text) != 0)) {
			json_decref(o);
			xasprintf(cause, "line %" PRIu64 ": not a "
			    "document of this export", first + i + 1);
			index_abort(ix);
			return (INDEX_ERROR);
		}
		sig_decode16(ib->sb, ix->p.perms, ib->sig);
		flags = json_integer_value(json_object_get(o, "flags")) &
		    (DOC_UNIQUE | DOC_BYTES);
		flags = import_keys(ix, ib, flags);
		group = json_integer_value(json_object_get(o, "group"));
		if (group < 0 || (uint64_t)group > docs->n) {
			json_decref(o);
			xasprintf(cause, "line %" PRIu64 ": its group "
			    "is not an earlier document", first + i + 1);
			index_abort(ix);
			docs->n = had;
			return (INDEX_ERROR);
		}
		rc = index_insert(ix, ib->keys, ib->sig, id->data, id->len,
		    ix->p.texts ? text->data : "", ix->p.texts ? text->len : 0,
		    flags, json_integer_value(json_object_get(o, "time")),
		    cause);
		json_decref(o);
		if (rc == 0 && group != 0)
			rc = index_set_group(ix, docs->v[group - 1], cause);
		if (rc != 0) {
			index_abort(ix);
			docs->n = had;
			return (rc);
		}
		u64vec_push(docs, index_last_doc(ix));
	}
	if ((rc = index_commit(ix, cause)) != 0)
		docs->n = had;
	return (rc);
}

/*
 * The header line of an export: its parameters, checked; an index with no
 * documents yet takes them if they are not its own.  0, or INDEX_ERROR.
 */
static int
import_header(struct index *ix, const char *line, size_t len, char **cause)
{
	struct index_params	 want = ix->p;
	json_t			*hdr;
	json_error_t		 jerr;
	char			*c;
	int			 rc = INDEX_ERROR, norm;

	if ((hdr = json_loadb(line, len, 0, &jerr)) == NULL ||
	    json_integer_value(json_object_get(hdr, "mhfilter_export")) != 1) {
		xasprintf(cause, "line 1: not an mhfilter export");
		goto out;
	}
	if (strcmp(json_str(hdr, "scheme", ""), MHF_SCHEME_NAME) != 0) {
		xasprintf(cause, "line 1: signature scheme is not %s",
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
	if (parse_uint(json_str(hdr, "seed", "0"), 0, UINT64_MAX, &want.seed,
	    &c) != 0) {
		free(c);
		xasprintf(cause, "line 1: bad seed");
		goto out;
	}
	if ((want.measure = measure_parse(json_str(hdr, "measure",
	    "jaccard"))) == -1) {
		xasprintf(cause, "line 1: unknown measure '%s'",
		    json_str(hdr, "measure", ""));
		goto out;
	}
	if (!params_ok(&want)) {
		xasprintf(cause, "line 1: bad parameters");
		goto out;
	}
	want.texts = json_is_true(json_object_get(hdr, "texts"));
	want.verify = json_integer_value(json_object_get(hdr, "verify"));
	want.threshold = json_real_value(json_object_get(hdr, "threshold"));
	if (want.verify < VERIFY_EXACT || want.verify > VERIFY_NONE ||
	    (want.verify == VERIFY_EXACT && !want.texts) ||
	    !(want.threshold >= 0.01 && want.threshold <= 1.0)) {
		xasprintf(cause, "line 1: bad verify or threshold");
		goto out;
	}
	if (want.perms != ix->p.perms || want.bands != ix->p.bands ||
	    want.rows != ix->p.rows || want.shingle != ix->p.shingle ||
	    want.unit != ix->p.unit || want.norm != ix->p.norm ||
	    want.seed != ix->p.seed || ix->p.texts != want.texts ||
	    want.measure != ix->p.measure) {
		if (index_adopt(ix, &want, cause) != 0)
			goto out;
	}
	rc = 0;
out:
	json_decref(hdr);
	return (rc);
}

/*
 * Read an export into this index, in transactions of 1,000 documents.
 * The export's parameters must be the index's; an index with no documents
 * yet takes them from the export.  Band keys are recomputed from the
 * signatures.  Returns 0 with the count, or INDEX_ERROR with a cause
 * naming the line.
 */
int
index_import(struct index *ix, FILE *f, uint64_t *count, char **cause)
{
	struct import_buf	 ib;
	struct u64vec		 docs = { 0 };	/* the new numbers, in order */
	uint64_t		 lineno = 1;
	char			*line = NULL, *batch[IMPORT_BATCH];
	size_t			 linesize = 0, nb = 0, blen[IMPORT_BATCH];
	ssize_t			 len;
	int			 rc = INDEX_ERROR;

	*count = 0;
	if ((len = getline(&line, &linesize, f)) <= 0) {
		if (ferror(f))
			xasprintf(cause, "read error: %s", strerror(errno));
		else
			xasprintf(cause, "empty: not an mhfilter export");
		free(line);
		return (INDEX_ERROR);
	}
	if (import_header(ix, line, len, cause) != 0) {
		free(line);
		return (INDEX_ERROR);
	}
	memset(&ib, 0, sizeof ib);
	ib.keys = xcalloc(ix->p.bands, sizeof *ib.keys);
	ib.sb = xmalloc(2 * ix->p.perms);
	ib.sig = xcalloc(ix->p.perms, sizeof *ib.sig);
	ib.whole = xcalloc(ix->p.perms, sizeof *ib.whole);
	ib.part = xcalloc(ix->p.perms, sizeof *ib.part);

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
		while ((rc = import_batch(ix, batch, blen, nb, lineno, &ib,
		    &docs, cause)) == INDEX_AGAIN)
			;
		if (rc != 0)
			goto out;
		*count += nb;
		lineno += nb;
		while (nb > 0)
			free(batch[--nb]);
	}
	rc = 0;
	if (ferror(f)) {
		xasprintf(cause, "read error: %s", strerror(errno));
		rc = INDEX_ERROR;
	}
out:
	while (nb > 0)
		free(batch[--nb]);
	free(line);
	free(ib.keys);
	free(ib.sb);
	free(ib.sig);
	free(ib.whole);
	free(ib.part);
	u64vec_free(&ib.hashes);
	u64vec_free(&ib.table);
	buf_free(&ib.id);
	buf_free(&ib.text);
	u64vec_free(&docs);
	return (rc);
}
