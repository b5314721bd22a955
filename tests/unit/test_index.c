/*
 * Unit tests of the index API (index.c), each in its own mkdtemp
 * directory.
 *
 * A conformance suite first: the cases of the conformance table run on
 * every backend, LMDB and Redis (a redis-server of the suite's own, on a
 * free port of 127.0.0.1 with its files under a temporary directory;
 * left out, saying so, when redis-server is not installed).  They use only
 * the index_* API, insert as filter.c does where it matters (a batch
 * told to index_prepare, then each record in its slot: Redis tracks
 * delivery for such batches only), and say where the backends
 * legitimately differ: a number never handed out (LMDB: an error, Redis:
 * gone, as it cannot tell it from an expired document), a missing index
 * (Redis: an empty namespace), retention by age (LMDB removes old
 * documents, Redis gives each document an expiry at commit), --stats
 * (Redis counts documents only), the number an untracked insert took
 * (Redis cannot say), groups and compaction (LMDB only).
 *
 * Then LMDB's own: texts as stored (raw, LZ4, and zstd as older formats
 * wrote them), a full map, temporary indexes, foreign files, the upgrades
 * of format 2 and 3 indexes (made here by today's writer; upgrade.bats
 * opens real old ones; their values unsealed, as before format 9), the
 * band runs, damage and seals.  The stored layouts' known answers are
 * test_codec.c's.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>
#include <xxhash.h>
#include <zstd.h>

#include "mhfilter.h"

#define K	8
#define B	4
#define R	2

/* The backends. */
#define BE_LMDB		0
#define BE_REDIS	1

/* A case of the conformance table: run on every backend. */
struct conformance {
	const char		*name;
	CMUnitTestFunction	 fn;
};

/* The suite's Redis: its port (0: none, -1: failed), directory, process. */
static int	 redis_port;
static char	 redis_dir[PATH_MAX];
static pid_t	 redis_pid;
static int	 redis_namespaces;	/* one per case, never reused */

/* A test's directory, and what teardown must release if the test fails. */
struct fixture {
	char		 dir[PATH_MAX];
	char		 path[PATH_MAX + 16];	/* the index: dir/ix, or a URL */
	int		 backend;		/* BE_* */
	CMUnitTestFunction fn;			/* a conformance case's */
	struct index	*ix;
	char		*cause;
	struct buf	 text;
	struct u64vec	 out;
};

/* Three documents, inserted by fill in one transaction. */
static const struct tdoc {
	const char	*id;
	uint64_t	 keys[B];
	uint32_t	 sig[K];
	int		 flags;
	const char	*text;
} docs[] = {
	{ "alpha", { 10, 20, 30, 40 }, { 1, 2, 3, 4, 5, 6, 7, 8 }, DOC_UNIQUE,
	    "the quick brown fox jumps over the lazy dog; "
	    "the quick brown fox jumps over the lazy dog; "
	    "the quick brown fox jumps over the lazy dog; "
	    "the quick brown fox jumps over the lazy dog; "
	    "the quick brown fox jumps over the lazy dog." },
	{ "b", { 10, 21, 31, 41 }, { 11, 12, 13, 14, 15, 16, 17, 65535 },
	    DOC_UNIQUE, "short text" },
	{ "gamma", { 11, 20, 30, 42 }, { 0, 0, 0, 0, 9, 9, 9, 9 }, DOC_BYTES,
	    "\xff\xfe raw bytes" },
};
#define NDOCS	(sizeof docs / sizeof docs[0])

/* Remove one file or directory of a tree (for nftw). */
static int
remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return (remove(path));
}

/* Make the test's directory. */
static int
setup(void **state)
{
	struct fixture	*f;
	const char	*tmp;

	f = xcalloc(1, sizeof *f);
	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(f->dir, sizeof f->dir, "%s/mhf-test-index.XXXXXX", tmp);
	if (mkdtemp(f->dir) == NULL)
		return (-1);
	snprintf(f->path, sizeof f->path, "%s/ix", f->dir);
	*state = f;
	return (0);
}

/*
 * Make the test's directory; the index is a namespace of the suite's Redis
 * of its own.  The case comes as the initial state.
 */
static int
setup_redis(void **state)
{
	const struct conformance	*c = *state;
	struct fixture			*f;

	if (setup(state) != 0)
		return (-1);
	f = *state;
	f->backend = BE_REDIS;
	f->fn = c->fn;
	snprintf(f->path, sizeof f->path, "redis://127.0.0.1:%d/t%d"
	    "?timeout=10", redis_port, ++redis_namespaces);
	return (0);
}

/* Run a conformance case on the suite's Redis. */
static void
on_redis(void **state)
{
	struct fixture	*f = *state;

	if (redis_port <= 0)
		fail_msg("the suite's redis-server did not start");
	f->fn(state);
}

/* Close what a test left open and remove its directory. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;
	int		 rc;

	index_close(f->ix);
	free(f->cause);
	buf_free(&f->text);
	u64vec_free(&f->out);
	rc = nftw(f->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return (rc);
}

/* The parameters of the test indexes. */
static void
params(struct index_params *p)
{
	memset(p, 0, sizeof *p);
	p->perms = K;
	p->bands = B;
	p->rows = R;
	p->shingle = 5;
	p->unit = UNIT_CHAR;
	p->norm = NORM_DEFAULT;
	p->seed = 0;
	p->texts = 1;
	p->verify = VERIFY_EXACT;
	p->threshold = 0.8;
}

/* Fail with the cause when rc is not 0. */
#define CHECK(f, call) do {						\
	int	 rc_ = (call);						\
	if (rc_ != 0)							\
		fail_msg("%s: %d: %s", #call, rc_,			\
		    (f)->cause ? (f)->cause : "no cause");		\
} while (0)

/* Assert that cause holds want, then free it. */
static void
check_cause(struct fixture *f, const char *want)
{
	if (f->cause == NULL || strstr(f->cause, want) == NULL)
		fail_msg("cause \"%s\" does not mention \"%s\"",
		    f->cause ? f->cause : "(none)", want);
	free(f->cause);
	f->cause = NULL;
}

/* Open the index at f->path with the test parameters. */
static void
open_ix(struct fixture *f, int flags)
{
	struct index_params	 p;

	params(&p);
	CHECK(f, index_open(&f->ix, f->path, flags, &p, 0, &f->cause));
}

/* Close the test's index. */
static void
close_ix(struct fixture *f)
{
	index_close(f->ix);
	f->ix = NULL;
}

/* Create the index at f->path and insert the three documents. */
static void
fill(struct fixture *f)
{
	const struct tdoc	*d;
	size_t			 i;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < NDOCS; i++) {
		d = &docs[i];
		CHECK(f, index_insert(f->ix, d->keys, d->sig, d->id,
		    strlen(d->id), d->text, strlen(d->text), d->flags,
		    0, &f->cause));
	}
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/*
 * index_doc of a number never handed out, or of one removed or expired: a
 * difference between the backends.  LMDB says so (INDEX_ERROR naming the
 * document) for a number never handed out; Redis cannot tell one from a
 * document that expired, and both are gone (INDEX_GONE).  A removed or
 * expired document is gone on both.
 */
static void
doc_missing(struct fixture *f, uint64_t docid, int removed)
{
	struct docinfo	 d;
	int		 rc;

	rc = index_doc(f->ix, docid, &d, &f->cause);
	if (removed || f->backend == BE_REDIS)
		assert_int_equal(rc, INDEX_GONE);
	else {
		assert_int_equal(rc, INDEX_ERROR);
		check_cause(f, "document");
	}
}

/* How many times x is in v. */
static size_t
count(const struct u64vec *v, uint64_t x)
{
	size_t	 i, n = 0;

	for (i = 0; i < v->n; i++)
		n += v->v[i] == x;
	return (n);
}

/*
 * The band keys and encoded texts of docs[], for prepared batches, and
 * what index_prepare was told: the index keeps that until the transaction
 * ends.
 */
static uint64_t		 dockeys[NDOCS][B];
static struct buf	 docencs[NDOCS];
static struct ixdoc	 docprep[NDOCS];

/* Make dockeys and docencs once. */
static void
docs_encode(void)
{
	struct textenc	*te;
	size_t		 i;

	if (docencs[0].len != 0)
		return;
	te = textenc_create();
	for (i = 0; i < NDOCS; i++) {
		lsh_keys(docs[i].sig, B, R, 0, dockeys[i]);
		textenc_encode(te, docs[i].text, strlen(docs[i].text),
		    docs[i].flags & DOC_BYTES, &docencs[i]);
	}
	textenc_free(te);
}

/*
 * In the open transaction, tell the index of a batch of docs[first] to
 * docs[first + n - 1], the way filter.c does before its lookups and
 * inserts (Redis writes them here, pending, for other writers to see).
 * With ix NULL, only fill docprep.
 */
static int
prepare_docs(struct index *ix, size_t first, size_t n, char **cause)
{
	struct ixdoc		*d = docprep;
	const struct tdoc	*t;
	size_t			 i;

	docs_encode();
	memset(docprep, 0, sizeof docprep);
	for (i = 0; i < n; i++) {
		t = &docs[first + i];
		d[i].keys = dockeys[first + i];
		d[i].sig = t->sig;
		d[i].id = t->id;
		d[i].idlen = strlen(t->id);
		d[i].enc = docencs[first + i].data;
		d[i].enclen = docencs[first + i].len;
		d[i].flags = t->flags & DOC_BYTES;
		d[i].pending = 1;
	}
	if (ix == NULL)
		return (0);
	return (index_prepare(ix, d, n, cause));
}

/* Insert docs[i], prepared in slot, under its signature's band keys. */
static int
insert_slot(struct index *ix, size_t slot, size_t i, char **cause)
{
	const struct tdoc	*t = &docs[i];

	docs_encode();
	return (index_insert_encoded(ix, slot, dockeys[i], t->sig, t->id,
	    strlen(t->id), t->text, strlen(t->text), docencs[i].data,
	    docencs[i].len, t->flags, 0, cause));
}

/* Prepare and insert docs[first] to docs[first + n - 1] as one batch. */
static int
insert_docs(struct index *ix, size_t first, size_t n, char **cause)
{
	size_t	 i;
	int	 rc;

	if ((rc = prepare_docs(ix, first, n, cause)) != 0)
		return (rc);
	for (i = 0; i < n; i++) {
		if ((rc = insert_slot(ix, i, first + i, cause)) != 0)
			return (rc);
	}
	return (0);
}

/* index_open creates the directory and an empty index in it. */
static void
test_create(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct index_stats	 st;
	struct stat		 sb;
	char			 file[PATH_MAX + 32];

	params(&p);
	assert_int_equal(stat(f->path, &sb), -1);
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	assert_string_equal(index_path(f->ix), f->path);
	assert_int_equal(index_is_remote(f->path), f->backend == BE_REDIS);
	if (f->backend == BE_LMDB) {
		snprintf(file, sizeof file, "%s/data.mdb", f->path);
		assert_int_equal(stat(file, &sb), 0);
	}
	assert_int_equal(p.perms, K);
	assert_int_equal(p.bands, B);
	CHECK(f, index_stats(f->ix, &st, &f->cause));
	assert_int_equal(st.docs, 0);
	assert_int_equal(st.band_entries, 0);
	close_ix(f);
}

/* Documents come back with their id, flags, signature and time. */
static void
test_docs(void **state)
{
	struct fixture		*f = *state;
	struct docinfo		 d;
	struct index_stats	 st;
	time_t			 t0, t1;
	size_t			 i;

	t0 = time(NULL);
	fill(f);
	t1 = time(NULL);

	open_ix(f, 0);
	/* --stats: Redis counts documents only (--info counts the rest). */
	CHECK(f, index_stats(f->ix, &st, &f->cause));
	assert_int_equal(st.docs, NDOCS);
	if (f->backend == BE_LMDB) {
		assert_int_equal(st.band_entries, NDOCS * B);
		assert_true(st.size > 0);
	}
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < NDOCS; i++) {
		memset(&d, 0, sizeof d);
		CHECK(f, index_doc(f->ix, i + 1, &d, &f->cause));
		assert_int_equal(d.docid, i + 1);
		assert_int_equal(d.flags, docs[i].flags);
		assert_memory_equal(d.sig, docs[i].sig, sizeof docs[i].sig);
		assert_int_equal(d.idlen, strlen(docs[i].id));
		assert_memory_equal(d.id, docs[i].id, d.idlen);
		assert_in_range(d.time, t0, t1);
	}
	doc_missing(f, NDOCS + 1, 0);
	doc_missing(f, 0, 0);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/* Texts come back exactly, with the DOC_BYTES flag. */
static void
test_texts(void **state)
{
	struct fixture	*f = *state;
	size_t		 i;
	int		 rc;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < NDOCS; i++) {
		buf_append(&f->text, "junk", 4);	/* emptied first */
		rc = index_text(f->ix, i + 1, &f->text, &f->cause);
		assert_int_equal(rc, docs[i].flags & DOC_BYTES);
		assert_int_equal(f->text.len, strlen(docs[i].text));
		assert_memory_equal(f->text.data, docs[i].text, f->text.len);
		assert_int_equal(f->text.data[f->text.len], '\0');
	}
	assert_int_equal(index_text(f->ix, NDOCS + 1, &f->text, &f->cause),
	    INDEX_ERROR);
	check_cause(f, f->backend == BE_LMDB ? "text" : "document 4 is gone");
	index_abort(f->ix);
	close_ix(f);
}

/*
 * The texts database as format 4 lays it out: u8 encoding (0 raw, 2 LZ4),
 * u8 flags, then the bytes, for LZ4 after the text's length (u32,
 * little-endian), and from format 9 the seal (SEAL_TEXTS, the document
 * number).  The long text (over 64 bytes, repetitive) is stored
 * compressed, the short ones raw.
 */
static void
test_texts_layout(void **state)
{
	struct fixture		*f = *state;
	MDB_env			*env;
	MDB_txn			*txn;
	MDB_dbi			 dbi;
	MDB_val			 k, v;
	unsigned char		 kb[8];
	const unsigned char	*p;
	size_t			 i, len, size;

	fill(f);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
	assert_int_equal(mdb_env_open(env, f->path, MDB_RDONLY, 0), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "texts", 0, &dbi), 0);
	for (i = 0; i < NDOCS; i++) {
		put_be64(kb, i + 1);
		k.mv_data = kb;
		k.mv_size = sizeof kb;
		assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
		p = v.mv_data;
		/* The seal is right, and the text is what comes before it. */
		assert_int_equal(seal_open(p, v.mv_size, SEAL_TEXTS, i + 1,
		    &size), 0);
		assert_int_equal(size, v.mv_size - SEAL_SIZE);
		len = strlen(docs[i].text);
		assert_int_equal(p[1], docs[i].flags & DOC_BYTES);
		if (len > 64) {
			assert_int_equal(p[0], 2);		/* LZ4 */
			assert_int_equal(get_le32(p + 2), len);
			assert_true(size < 2 + len);
		} else {
			assert_int_equal(p[0], 0);		/* raw */
			assert_int_equal(size, 2 + len);
			assert_memory_equal(p + 2, docs[i].text, len);
		}
		/* Under another document's number, it would not be. */
		assert_int_equal(seal_open(p, v.mv_size, SEAL_TEXTS, i + 2,
		    &size), -1);
		assert_int_equal(seal_open(p, v.mv_size, SEAL_DOCS, i + 1,
		    &size), -1);
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

/* A stored text as format 3 wrote a long one: encoding 1, flags, zstd. */
static void
zstd_text(const char *text, int flags, struct buf *out)
{
	size_t	 len = strlen(text), bound = ZSTD_compressBound(len), n;

	out->len = 0;
	buf_reserve(out, 2 + bound);
	out->data[0] = 1;
	out->data[1] = flags;
	n = ZSTD_compress(out->data + 2, bound, text, len, 3);
	assert_false(ZSTD_isError(n));
	out->len = 2 + n;
}

/*
 * text_decode: what textenc_encode makes comes back with its flag, at every
 * size around the 64-byte limit and for text that does not compress; zstd
 * texts of older formats still read; damaged records are refused.
 */
static void
test_text_decode(void **state)
{
	static const size_t	 sizes[] = { 0, 1, 63, 64, 65, 300, 5000 };
	static const unsigned char bigframe[] = {
		1, 0, 0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x58,
		0, 0, 0, 0, 0, 1, 0, 0, 0x01, 0, 0
	};
	struct textenc		*te;
	struct buf		 text = { 0 }, enc = { 0 }, out = { 0 };
	uint64_t		 x = 88172645463325252ULL;
	size_t			 i, j;
	unsigned char		*p;
	char			 c;
	int			 flags;

	(void)state;
	te = textenc_create();
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		for (j = 0; j < 2; j++) {
			/* j 0: repetitive words; j 1: random letters. */
			text.len = 0;
			while (text.len < sizes[i]) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				c = j == 0 ? "lorem ipsum "[text.len % 12] :
				    (char)('a' + x % 26);
				buf_append(&text, &c, 1);
			}
			flags = (i + j) % 2 ? DOC_BYTES : 0;
			textenc_encode(te, text.data, text.len, flags, &enc);
			p = (unsigned char *)enc.data;
			if (j == 0 && sizes[i] >= 64)
				assert_int_equal(p[0], 2);	/* LZ4 */
			if (sizes[i] < 64)
				assert_int_equal(p[0], 0);	/* raw */
			buf_append(&out, "junk", 4);
			assert_int_equal(text_decode(p, enc.len, &out), flags);
			assert_int_equal(out.len, text.len);
			assert_memory_equal(out.data, text.data, text.len);
			assert_int_equal(out.data[out.len], '\0');
		}
	}

	/* As compressible as can be: 'a' over and over. */
	for (i = 64; i <= 4 * 1024 * 1024; i *= 8) {
		text.len = 0;
		buf_reserve(&text, i);
		memset(text.data, 'a', i);
		text.len = i;
		textenc_encode(te, text.data, text.len, 0, &enc);
		assert_int_equal(((unsigned char *)enc.data)[0], 2);
		assert_int_equal(text_decode((unsigned char *)enc.data,
		    enc.len, &out), 0);
		assert_int_equal(out.len, i);
		assert_memory_equal(out.data, text.data, i);
	}
	buf_free(&out);

	/* A length no block of its size can reach: refused, not reserved. */
	textenc_encode(te, docs[0].text, strlen(docs[0].text), 0, &enc);
	p = (unsigned char *)enc.data;
	assert_int_equal(p[0], 2);
	put_le32(p + 2, 0x7e000000);
	assert_int_equal(text_decode(p, enc.len, &out), -1);
	assert_true(out.size < 1024 * 1024);
	/*
	 * A zstd frame claiming 2^40 bytes: magic, a header with an 8-byte
	 * content size after the window byte, one empty last raw block.
	 */
	assert_int_equal(text_decode(bigframe, sizeof bigframe, &out), -1);
	assert_true(out.size < 1024 * 1024);

	/* Format 3's zstd. */
	zstd_text(docs[0].text, DOC_BYTES, &enc);
	assert_int_equal(text_decode((unsigned char *)enc.data, enc.len,
	    &out), DOC_BYTES);
	assert_int_equal(out.len, strlen(docs[0].text));
	assert_memory_equal(out.data, docs[0].text, out.len);

	/* Damaged: truncated, unknown encoding, wrong length, cut block. */
	textenc_encode(te, docs[0].text, strlen(docs[0].text), 0, &enc);
	p = (unsigned char *)enc.data;
	assert_int_equal(p[0], 2);
	assert_int_equal(text_decode(p, 1, &out), -1);
	assert_int_equal(text_decode(p, 5, &out), -1);
	assert_int_equal(text_decode(p, enc.len - 1, &out), -1);
	put_le32(p + 2, strlen(docs[0].text) + 1);
	assert_int_equal(text_decode(p, enc.len, &out), -1);
	put_le32(p + 2, strlen(docs[0].text) - 1);
	assert_int_equal(text_decode(p, enc.len, &out), -1);
	put_le32(p + 2, strlen(docs[0].text));
	assert_int_equal(text_decode(p, enc.len, &out), 0);
	p[0] = 3;
	assert_int_equal(text_decode(p, enc.len, &out), -1);
	zstd_text(docs[0].text, 0, &enc);
	assert_int_equal(text_decode((unsigned char *)enc.data, enc.len - 1,
	    &out), -1);

	textenc_free(te);
	buf_free(&text);
	buf_free(&enc);
	buf_free(&out);
}

/* A document is a candidate once for each band it shares with the query. */
static void
test_candidates(void **state)
{
	static const uint64_t	 q1[B] = { 10, 20, 30, 43 };
	static const uint64_t	 q2[B] = { 99, 98, 97, 96 };
	static const uint64_t	 q3[B] = { 40, 30, 20, 10 };	/* same keys */
	struct fixture		*f = *state;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));

	u64vec_push(&f->out, 12345);		/* appended to, not emptied */
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, q1, &f->out, &f->cause));
	assert_int_equal(f->out.v[0], 12345);
	assert_int_equal(f->out.n, 1 + 3 + 1 + 2);
	assert_int_equal(count(&f->out, 1), 3);	/* bands 0, 1, 2 */
	assert_int_equal(count(&f->out, 2), 1);	/* band 0 */
	assert_int_equal(count(&f->out, 3), 2);	/* bands 1, 2 */

	f->out.n = 0;
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, q2, &f->out, &f->cause));
	assert_int_equal(f->out.n, 0);

	/* Band keys are one keyspace: the position does not matter here. */
	f->out.n = 0;
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, q3, &f->out, &f->cause));
	assert_int_equal(count(&f->out, 1), 4);
	assert_int_equal(count(&f->out, 2), 1);
	assert_int_equal(count(&f->out, 3), 2);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/*
 * A big bucket: every document in it comes back, in docid order.  The
 * other keys are multiples of 1024: an l1 run keeps a key's top 54 bits.
 */
static void
test_big_bucket(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 keys[B] = { 7, 0, 0, 0 };
	uint32_t	 sig[K] = { 0 };
	size_t		 i, n = 1000;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < n; i++) {
		keys[1] = (1000 + i) << 10;
		keys[2] = (100000 + i) << 10;
		keys[3] = (200000 + i) << 10;
		CHECK(f, index_insert(f->ix, keys, sig, "x", 1, "t", 1, 0,
		    0, &f->cause));
	}
	CHECK(f, index_commit(f->ix, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	keys[1] = keys[2] = keys[3] = 1 << 10;
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, keys, &f->out, &f->cause));
	assert_int_equal(f->out.n, n);
	for (i = 0; i < n; i++)
		assert_int_equal(f->out.v[i], i + 1);
	index_abort(f->ix);
	close_ix(f);
}

/*
 * A write transaction sees its own inserts: a record of a batch finds an
 * earlier one of the same batch, prepared as filter.c prepares them.
 */
static void
test_same_txn(void **state)
{
	struct fixture	*f = *state;
	struct docinfo	 d;

	/* Two records of docs[0]'s signature and text, ids x and y. */
	CHECK(f, prepare_docs(NULL, 0, 1, &f->cause));
	docprep[1] = docprep[0];
	docprep[0].id = "x";
	docprep[1].id = "y";
	docprep[0].idlen = docprep[1].idlen = 1;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_prepare(f->ix, docprep, 2, &f->cause));
	CHECK(f, index_candidates(f->ix, 0, dockeys[0], &f->out, &f->cause));
	assert_int_equal(f->out.n, 0);
	CHECK(f, index_insert_encoded(f->ix, 0, dockeys[0], docs[0].sig, "x",
	    1, docs[0].text, strlen(docs[0].text), docencs[0].data,
	    docencs[0].len, 0, 0, &f->cause));
	CHECK(f, index_candidates(f->ix, 1, dockeys[0], &f->out, &f->cause));
	assert_int_equal(f->out.n, B);
	assert_int_equal(count(&f->out, 1), B);
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	assert_memory_equal(d.sig, docs[0].sig, sizeof docs[0].sig);
	assert_memory_equal(d.id, "x", 1);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/*
 * Reopening with a different parameter that the user gave is a mismatch
 * naming the option; equal values are fine.
 */
static void
test_mismatch(void **state)
{
	static const struct {
		int		 bit;
		const char	*option;
	} cases[] = {
		{ IP_PERMS, "--perms" },
		{ IP_BANDS, "--bands" },
		{ IP_ROWS, "--rows" },
		{ IP_SHINGLE, "--shingle" },
		{ IP_UNIT, "--unit" },
		{ IP_NORM, "--normalize" },
		{ IP_SEED, "--seed" },
	};
	struct fixture		*f = *state;
	struct index_params	 p;
	size_t			 i;
	int			 rc;

	fill(f);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		params(&p);
		switch (cases[i].bit) {
		case IP_PERMS:
			p.perms = 16;
			break;
		case IP_BANDS:
			p.bands = 8;
			break;
		case IP_ROWS:
			p.rows = 4;
			break;
		case IP_SHINGLE:
			p.shingle = 7;
			break;
		case IP_UNIT:
			p.unit = UNIT_WORD;
			break;
		case IP_NORM:
			p.norm = NORM_ALL;
			break;
		case IP_SEED:
			p.seed = 1;
			break;
		}
		rc = index_open(&f->ix, f->path, 0, &p, cases[i].bit,
		    &f->cause);
		if (rc != INDEX_MISMATCH)
			fail_msg("%s: index_open returned %d", cases[i].option,
			    rc);
		check_cause(f, cases[i].option);

		/* Not given: the stored value is taken. */
		CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
		close_ix(f);
		assert_int_equal(p.perms, K);
		assert_int_equal(p.bands, B);
		assert_int_equal(p.rows, R);
		assert_int_equal(p.shingle, 5);
		assert_int_equal(p.unit, UNIT_CHAR);
		assert_int_equal(p.norm, NORM_DEFAULT);
		assert_int_equal(p.seed, 0);
	}

	/* Given and equal. */
	params(&p);
	CHECK(f, index_open(&f->ix, f->path, 0, &p, IP_PERMS | IP_BANDS |
	    IP_ROWS | IP_SHINGLE | IP_UNIT | IP_NORM | IP_SEED, &f->cause));
	close_ix(f);
}

/* Reopened without options, an index brings back its own parameters. */
static void
test_stored_params(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;

	params(&p);
	p.perms = 16;
	p.bands = 8;
	p.rows = 2;
	p.shingle = 7;
	p.unit = UNIT_WORD;
	p.norm = NORM_ALL;
	p.seed = 12345678901234567890ULL;
	p.verify = VERIFY_SIGNATURE;
	p.threshold = 0.7;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	close_ix(f);

	params(&p);
	p.texts = 0;
	p.threshold = 0.5;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	close_ix(f);
	assert_int_equal(p.perms, 16);
	assert_int_equal(p.bands, 8);
	assert_int_equal(p.rows, 2);
	assert_int_equal(p.shingle, 7);
	assert_int_equal(p.unit, UNIT_WORD);
	assert_int_equal(p.norm, NORM_ALL);
	assert_int_equal(p.seed, 12345678901234567890ULL);
	assert_int_equal(p.texts, 1);
	assert_int_equal(p.verify, VERIFY_SIGNATURE);
	assert_true(p.threshold == 0.7);

	/* verify and threshold are only defaults: given ones win. */
	params(&p);
	p.threshold = 0.9;
	p.verify = VERIFY_NONE;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, IP_THRESHOLD | IP_VERIFY,
	    &f->cause));
	close_ix(f);
	assert_true(p.threshold == 0.9);
	assert_int_equal(p.verify, VERIFY_NONE);
	assert_int_equal(p.shingle, 7);
}

/* An index without texts cannot verify exactly. */
static void
test_no_texts(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;

	params(&p);
	p.texts = 0;
	p.verify = VERIFY_SIGNATURE;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	close_ix(f);
	params(&p);
	p.verify = VERIFY_EXACT;
	assert_int_equal(index_open(&f->ix, f->path, 0, &p, IP_VERIFY,
	    &f->cause), INDEX_MISMATCH);
	check_cause(f, "exact");
}

/* index_abort discards the transaction, and its document numbers. */
static void
test_abort(void **state)
{
	static const uint64_t	 keys[B] = { 50, 51, 52, 53 };
	struct fixture		*f = *state;
	struct docinfo		 d;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, keys, docs[0].sig, "lost", 4, "t", 1, 0,
	    0, &f->cause));
	index_abort(f->ix);

	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, keys, &f->out, &f->cause));
	assert_int_equal(f->out.n, 0);
	doc_missing(f, NDOCS + 1, 0);
	CHECK(f, index_insert(f->ix, keys, docs[1].sig, "kept", 4, "t", 1, 0,
	    0, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_doc(f->ix, NDOCS + 1, &d, &f->cause));
	assert_int_equal(d.idlen, 4);
	assert_memory_equal(d.id, "kept", 4);
	doc_missing(f, NDOCS + 2, 0);
	index_abort(f->ix);
	close_ix(f);
}

/*
 * A small map fills up: index_insert or index_commit says INDEX_AGAIN,
 * index_abort grows the map, and the same batch then goes in.
 */
static void
test_map_full(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct docinfo		 d;
	uint64_t		 keys[32], s = 1;
	uint32_t		 sig[128];
	char			 text[256], id[32];
	size_t			 i, j, n = 1000;
	int			 rc, attempt, again = 0;

	params(&p);
	p.perms = 128;
	p.bands = 32;
	p.rows = 4;
	p.mapsize = 1 << 20;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	for (attempt = 1; attempt <= 4; attempt++) {
		CHECK(f, index_begin(f->ix, &f->cause));
		for (i = 0, rc = 0; i < n && rc == 0; i++) {
			s = i + 1;
			for (j = 0; j < 32; j++)
				keys[j] = (s = s * 6364136223846793005ULL +
				    1442695040888963407ULL);
			for (j = 0; j < 128; j++)
				sig[j] = (uint32_t)(keys[j % 32] >> (j % 7));
			snprintf(id, sizeof id, "doc-%zu", i);
			for (j = 0; j + 16 < sizeof text; j += 16)
				snprintf(text + j, sizeof text - j, "%015llx ",
				    (unsigned long long)keys[j / 16]);
			rc = index_insert(f->ix, keys, sig, id, strlen(id),
			    text, strlen(text), 0, 0, &f->cause);
		}
		if (rc == 0)
			rc = index_commit(f->ix, &f->cause);
		if (rc == 0)
			break;
		if (rc != INDEX_AGAIN)
			fail_msg("attempt %d: %d: %s", attempt, rc,
			    f->cause ? f->cause : "no cause");
		again++;
		index_abort(f->ix);
	}
	print_message("# map full: %d attempt(s) with INDEX_AGAIN\n", again);
	assert_true(again >= 1);
	assert_true(attempt <= 4);
	close_ix(f);

	/* All of it, numbered from 1 as if the failed attempts never were. */
	params(&p);
	p.perms = 128;
	p.bands = 32;
	p.rows = 4;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	assert_memory_equal(d.id, "doc-0", 5);
	CHECK(f, index_doc(f->ix, n, &d, &f->cause));
	snprintf(id, sizeof id, "doc-%zu", n - 1);
	assert_int_equal(d.idlen, strlen(id));
	assert_memory_equal(d.id, id, d.idlen);
	assert_int_equal(index_doc(f->ix, n + 1, &d, &f->cause), INDEX_ERROR);
	check_cause(f, "document");
	index_abort(f->ix);
	close_ix(f);
}

/* A read-only open of a missing index fails and creates nothing. */
static void
test_rdonly_missing(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct stat		 sb;

	params(&p);
	assert_int_equal(index_open(&f->ix, f->path, INDEX_RDONLY, &p, 0,
	    &f->cause), INDEX_ERROR);
	assert_null(f->ix);
	/* A namespace Redis has no keys of is an empty index. */
	check_cause(f, f->backend == BE_LMDB ? "no index" : "an empty index");
	assert_int_equal(stat(f->path, &sb), -1);
	if (f->backend != BE_LMDB)
		return;

	/* An existing but empty directory is no index either. */
	assert_int_equal(mkdir(f->path, 0777), 0);
	assert_int_not_equal(index_open(&f->ix, f->path, INDEX_RDONLY, &p, 0,
	    &f->cause), 0);
	assert_null(f->ix);
	assert_non_null(f->cause);
	free(f->cause);
	f->cause = NULL;
}

/* A read-only index answers queries (--query-only). */
static void
test_rdonly(void **state)
{
	static const uint64_t	 q[B] = { 10, 20, 30, 43 };
	struct fixture		*f = *state;
	struct docinfo		 d;

	fill(f);
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, q, &f->out, &f->cause));
	assert_int_equal(count(&f->out, 1), 3);
	assert_int_equal(count(&f->out, 3), 2);
	CHECK(f, index_doc(f->ix, 2, &d, &f->cause));
	assert_memory_equal(d.sig, docs[1].sig, sizeof docs[1].sig);
	assert_int_equal(index_text(f->ix, 3, &f->text, &f->cause), DOC_BYTES);
	assert_string_equal(f->text.data, docs[2].text);
	CHECK(f, index_commit(f->ix, &f->cause));

	/* And again, in a second transaction. */
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/* A temporary index (NULL path) lives in TMPDIR and is removed on close. */
static void
test_temp(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct stat		 sb;
	char			*saved, *path;

	saved = getenv("TMPDIR") ? xstrdup(getenv("TMPDIR")) : NULL;
	setenv("TMPDIR", f->dir, 1);
	params(&p);
	CHECK(f, index_open(&f->ix, NULL, 0, &p, 0, &f->cause));
	if (saved != NULL)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);

	path = xstrdup(index_path(f->ix));
	assert_memory_equal(path, f->dir, strlen(f->dir));
	/* Gone from the file system as soon as it is open (kill -9). */
	assert_int_equal(stat(path, &sb), -1);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[0].keys, docs[0].sig, "x", 1, "t", 1,
	    0, 0, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
	assert_int_equal(stat(path, &sb), -1);
	free(path);
}

/* A directory holding something that is not LMDB is a mismatch. */
static void
test_not_lmdb(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	char			 file[PATH_MAX + 32], junk[16384];
	FILE			*fp;

	assert_int_equal(mkdir(f->path, 0777), 0);
	snprintf(file, sizeof file, "%s/data.mdb", f->path);
	assert_non_null(fp = fopen(file, "w"));
	memset(junk, 'x', sizeof junk);
	assert_int_equal(fwrite(junk, 1, sizeof junk, fp), sizeof junk);
	assert_int_equal(fclose(fp), 0);
	params(&p);
	assert_int_equal(index_open(&f->ix, f->path, 0, &p, 0, &f->cause),
	    INDEX_MISMATCH);
	assert_null(f->ix);
	check_cause(f, "not");
}

/* A band key for the upgrade test: a hash with its low 10 bits zero. */
static uint64_t
upg_key(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return (x & ~(uint64_t)1023);
}

/* The band keys of document i (from 0) of the upgrade test. */
static void
upg_keys(size_t i, uint64_t *keys)
{
	size_t	 j;

	for (j = 0; j < B; j++)
		keys[j] = upg_key(i * B + j);
	keys[1] = upg_key(1000000 + i / 5);	/* shared by 5 documents */
}

/*
 * Make the index with the smallest memtable, so that the sweep merges into
 * l1 at every commit, and insert n documents in batches of per, document i
 * with the band keys keys_of(i) gives it.  The index is left open.
 */
static void
fill_swept(struct fixture *f, size_t n, size_t per,
    void (*keys_of)(size_t, uint64_t *))
{
	struct index_params	 p;
	uint64_t		 keys[B];
	uint32_t		 sig[K] = { 0 };
	size_t			 i;

	params(&p);
	p.memtable = 1024 * sizeof(struct bentry);	/* the minimum */
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	for (i = 0; i < n; i++) {
		if (i % per == 0)
			CHECK(f, index_begin(f->ix, &f->cause));
		keys_of(i, keys);
		CHECK(f, index_insert(f->ix, keys, sig, "x", 1, "t", 1, 0,
		    0, &f->cause));
		if (i % per == per - 1)
			CHECK(f, index_commit(f->ix, &f->cause));
	}
}

/* Open the index at path straight in LMDB, in a transaction, at meta. */
static void
raw_open(const char *path, unsigned flags, MDB_env **env, MDB_txn **txn,
    MDB_dbi *meta)
{
	assert_int_equal(mdb_env_create(env), 0);
	assert_int_equal(mdb_env_set_maxdbs(*env, 8), 0);
	assert_int_equal(mdb_env_open(*env, path, flags, 0666), 0);
	assert_int_equal(mdb_txn_begin(*env, NULL, flags, txn), 0);
	assert_int_equal(mdb_dbi_open(*txn, "meta", 0, meta), 0);
}

/* A meta value of the index at path, read straight from LMDB. */
static void
raw_meta(const char *path, const char *key, char *out, size_t len)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_dbi		 meta;
	MDB_val		 k, v;

	raw_open(path, MDB_RDONLY, &env, &txn, &meta);
	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	assert_int_equal(mdb_get(txn, meta, &k, &v), 0);
	assert_true(v.mv_size < len);
	memcpy(out, v.mv_data, v.mv_size);
	out[v.mv_size] = '\0';
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

/* Set a meta value of the index at path straight in LMDB. */
static void
raw_meta_put(const char *path, const char *key, const char *value)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_dbi		 meta;
	MDB_val		 k, v;

	raw_open(path, 0, &env, &txn, &meta);
	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	v.mv_data = (void *)value;
	v.mv_size = strlen(value);
	assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

/* A meta record of the index at path, straight from LMDB: is it there? */
static int
raw_has_meta(const char *path, const char *key)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_dbi		 meta;
	MDB_val		 k, v;
	int		 rc;

	raw_open(path, MDB_RDONLY, &env, &txn, &meta);
	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	rc = mdb_get(txn, meta, &k, &v);
	assert_true(rc == 0 || rc == MDB_NOTFOUND);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return (rc == 0);
}

/* The databases whose values format 9 seals, with their SEAL_* tags. */
static const struct {
	const char	*name;
	unsigned	 tag;
} sealed_dbs[] = {
	{ "docs", SEAL_DOCS },
	{ "texts", SEAL_TEXTS },
	{ "l0", SEAL_L0 },
	{ "l1", SEAL_L1 },
	{ "l1y", SEAL_L1Y },
};

/* An LMDB key as the number a seal is seeded with (big-endian). */
static uint64_t
raw_key(const MDB_val *k)
{
	const unsigned char	*p = k->mv_data;
	uint64_t		 key = 0;
	size_t			 i;

	assert_true(k->mv_size == 4 || k->mv_size == 8);
	for (i = 0; i < k->mv_size; i++)
		key = key << 8 | p[i];
	return (key);
}

/*
 * Every value of the sealed databases of the index at path, straight from
 * LMDB, whose seals must all be right (format 9).  With unseal, each is
 * stored again without its seal, as formats before 9 stored it.  Returns
 * how many values there are.
 */
static size_t
raw_seals(const char *path, int unseal)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_dbi		 meta, dbi;
	MDB_val		 k, v;
	unsigned char	 kb[8];
	size_t		 i, len, n = 0;
	int		 rc;

	raw_open(path, unseal ? 0 : MDB_RDONLY, &env, &txn, &meta);
	for (i = 0; i < sizeof sealed_dbs / sizeof sealed_dbs[0]; i++) {
		if ((rc = mdb_dbi_open(txn, sealed_dbs[i].name, 0,
		    &dbi)) == MDB_NOTFOUND)
			continue;
		assert_int_equal(rc, 0);
		assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
		while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
			if (seal_open(v.mv_data, v.mv_size, sealed_dbs[i].tag,
			    raw_key(&k), &len) != 0)
				fail_msg("%s key %" PRIu64 ": its seal does "
				    "not match", sealed_dbs[i].name,
				    raw_key(&k));
			n++;
			if (!unseal)
				continue;
			/* (Copies: k, v are LMDB's pages.) */
			memcpy(kb, k.mv_data, k.mv_size);
			k.mv_data = kb;
			v.mv_data = memcpy(xmalloc(v.mv_size), v.mv_data,
			    v.mv_size);
			v.mv_size = len;
			assert_int_equal(mdb_cursor_put(cur, &k, &v,
			    MDB_CURRENT), 0);
			free(v.mv_data);
		}
		mdb_cursor_close(cur);
	}
	if (unseal)
		assert_int_equal(mdb_txn_commit(txn), 0);
	else
		mdb_txn_abort(txn);
	mdb_env_close(env);
	return (n);
}

/*
 * The value under key (a document number) in database name of the index
 * at path, straight from LMDB: copied into out (in NULL), or replaced by
 * in's bytes.
 */
static void
raw_value(const char *path, const char *name, uint64_t key, struct buf *out,
    const struct buf *in)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_dbi		 meta, dbi;
	MDB_val		 k, v;
	unsigned char	 kb[8];

	raw_open(path, in == NULL ? MDB_RDONLY : 0, &env, &txn, &meta);
	assert_int_equal(mdb_dbi_open(txn, name, 0, &dbi), 0);
	put_be64(kb, key);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	if (in == NULL) {
		assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
		out->len = 0;
		buf_append(out, v.mv_data, v.mv_size);
		mdb_txn_abort(txn);
	} else {
		v.mv_data = in->data;
		v.mv_size = in->len;
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
		assert_int_equal(mdb_txn_commit(txn), 0);
	}
	mdb_env_close(env);
}

/*
 * Rewrite the index at path as format 2, straight through LMDB: every
 * value without its seal (new in format 9), every l1 run, with its young
 * run (l1y, new in format 5, which goes), in 16-byte entries sorted by
 * whole key then document number, and meta "format" 2.  Returns the
 * entries rewritten.
 */
static size_t
downgrade(const char *path)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_dbi		 l1, l1y, meta;
	MDB_val		 k, v, yv;
	struct bentry	*e;
	unsigned char	 kb[4], *run;
	size_t		 i, n, ny, total = 0;
	unsigned	 c;

	raw_seals(path, 1);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
	assert_int_equal(mdb_env_set_mapsize(env, 1ULL << 30), 0);
	assert_int_equal(mdb_env_open(env, path, 0, 0666), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "l1", 0, &l1), 0);
	assert_int_equal(mdb_dbi_open(txn, "l1y", 0, &l1y), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	for (c = 0; c < BAND_CHUNKS; c++) {
		kb[0] = c >> 24;
		kb[1] = c >> 16;
		kb[2] = c >> 8;
		kb[3] = c;
		k.mv_data = kb;
		k.mv_size = sizeof kb;
		if (mdb_get(txn, l1, &k, &v) == MDB_NOTFOUND)
			v.mv_size = 0;
		if (mdb_get(txn, l1y, &k, &yv) == MDB_NOTFOUND)
			yv.mv_size = 0;
		if (v.mv_size == 0 && yv.mv_size == 0)
			continue;
		assert_int_equal(v.mv_size % L1E_SIZE, 0);
		n = v.mv_size / L1E_SIZE;
		assert_int_equal(yrun_count(yv.mv_size, &ny), 0);
		e = xcalloc(n + ny, sizeof *e);
		for (i = 0; i < n; i++)
			l1_get(v.mv_data, i, c, &e[i]);
		for (i = 0; i < ny; i++)
			l1_get(yv.mv_data, i, c, &e[n + i]);
		n += ny;
		qsort(e, n, sizeof *e, bentry_cmp);	/* key, then docid */
		run = xcalloc(n, BENTRY_SIZE);
		for (i = 0; i < n; i++)
			run_put(run, i, &e[i]);
		v.mv_data = run;
		v.mv_size = n * BENTRY_SIZE;
		assert_int_equal(mdb_put(txn, l1, &k, &v, 0), 0);
		free(run);
		free(e);
		total += n;
	}
	assert_int_equal(mdb_drop(txn, l1y, 1), 0);
	k.mv_data = (void *)"format";
	k.mv_size = 6;
	v.mv_data = (void *)"2";
	v.mv_size = 1;
	assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	return (total);
}

/*
 * A format 3 index (its long texts in zstd, no value sealed) reads as it
 * is, read-only too, and the first writable open marks it format 9, so
 * that an older mhfilter refuses it, and seals every value; its zstd texts
 * still read, new ones are LZ4.
 */
static void
test_upgrade_format3(void **state)
{
	struct fixture		*f = *state;
	static const char	 added[] = "a text added after the upgrade, long "
	    "enough to be compressed, long enough to be compressed";
	struct buf		 enc = { 0 }, raw = { 0 };
	struct index_info	 in;
	uint64_t		 keys[B] = { 1, 2, 3, 4 };
	uint32_t		 sig[K] = { 0 };
	char			 fmt[32];
	size_t			 i, n, len;
	int			 pass;

	fill(f);
	/*
	 * As format 3 wrote it: no seals, meta "format" 3, the long text in
	 * zstd.
	 */
	n = raw_seals(f->path, 1);
	assert_true(n >= 2 * NDOCS);		/* docs, texts, l0 */
	raw_meta_put(f->path, "format", "3");
	zstd_text(docs[0].text, docs[0].flags & DOC_BYTES, &enc);
	raw_value(f->path, "texts", 1, NULL, &enc);

	/*
	 * Read-only, then writable: every text reads; format 3 and nothing
	 * sealed, then 9 and everything.
	 */
	for (pass = 0; pass < 2; pass++) {
		open_ix(f, pass == 0 ? INDEX_RDONLY : 0);
		CHECK(f, index_info(f->ix, &in, &f->cause));
		assert_int_equal(in.format, pass == 0 ? 3 : 9);
		CHECK(f, index_begin(f->ix, &f->cause));
		for (i = 0; i < NDOCS; i++) {
			assert_int_equal(index_text(f->ix, i + 1, &f->text,
			    &f->cause), docs[i].flags & DOC_BYTES);
			assert_int_equal(f->text.len, strlen(docs[i].text));
			assert_memory_equal(f->text.data, docs[i].text,
			    f->text.len);
		}
		if (pass == 1)
			CHECK(f, index_insert(f->ix, keys, sig, "new", 3,
			    added, strlen(added), 0, 0, &f->cause));
		CHECK(f, index_commit(f->ix, &f->cause));
		close_ix(f);
		raw_meta(f->path, "format", fmt, sizeof fmt);
		assert_string_equal(fmt, pass == 0 ? "3" : "9");
		assert_false(raw_has_meta(f->path, "sealing"));
		raw_value(f->path, "texts", 1, &raw, NULL);
		if (pass == 0) {
			assert_int_equal(raw.len, enc.len);
			assert_memory_equal(raw.data, enc.data, enc.len);
		}
	}
	assert_true(raw_seals(f->path, 0) >= n + 2);

	/* The zstd text as it was, sealed; the text added since is LZ4. */
	assert_int_equal(seal_open(raw.data, raw.len, SEAL_TEXTS, 1, &len),
	    0);
	assert_int_equal(len, enc.len);
	assert_memory_equal(raw.data, enc.data, enc.len);
	raw_value(f->path, "texts", NDOCS + 1, &raw, NULL);
	assert_int_equal(seal_open(raw.data, raw.len, SEAL_TEXTS, NDOCS + 1,
	    &len), 0);
	assert_int_equal(((unsigned char *)raw.data)[0], 2);

	/* Both kinds read. */
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	assert_int_equal(index_text(f->ix, NDOCS + 1, &f->text, &f->cause),
	    0);
	assert_int_equal(f->text.len, strlen(added));
	assert_memory_equal(f->text.data, added, f->text.len);
	assert_int_equal(index_text(f->ix, 1, &f->text, &f->cause),
	    docs[0].flags & DOC_BYTES);
	assert_memory_equal(f->text.data, docs[0].text, f->text.len);
	index_abort(f->ix);
	close_ix(f);
	buf_free(&enc);
	buf_free(&raw);
}

/*
 * A format 2 index (l1 in 16-byte entries, no seals) cannot be opened
 * read-only, and the first writable open upgrades it to format 9 with the
 * same answers, every value sealed.
 */
static void
test_upgrade_format2(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct u64vec		 want[5] = { { 0 } };
	uint64_t		 keys[B], none[B];
	static const size_t	 probe[] = { 0, 7, 1234, 2999 };
	size_t			 j, n = 3000, nprobe = 4;
	char			 fmt[32];

	fill_swept(f, n, 500, upg_keys);
	for (j = 0; j < B; j++)
		none[j] = upg_key(5000000 + j);

	/* What the format 9 index answers. */
	CHECK(f, index_begin(f->ix, &f->cause));
	for (j = 0; j < nprobe; j++) {
		upg_keys(probe[j], keys);
		CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, keys, &want[j],
		    &f->cause));
		assert_int_equal(want[j].n, B + 4);	/* itself, 4 mates */
		assert_int_equal(count(&want[j], probe[j] + 1), B);
	}
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, none, &want[nprobe],
	    &f->cause));
	assert_int_equal(want[nprobe].n, 0);
	index_abort(f->ix);
	close_ix(f);

	/* Back to format 2: every entry was merged into l1. */
	assert_int_equal(downgrade(f->path), n * B);
	raw_meta(f->path, "format", fmt, sizeof fmt);
	assert_string_equal(fmt, "2");

	/* Read-only cannot upgrade. */
	params(&p);
	assert_int_equal(index_open(&f->ix, f->path, INDEX_RDONLY, &p, 0,
	    &f->cause), INDEX_MISMATCH);
	assert_null(f->ix);
	check_cause(f, "format 2");
	raw_meta(f->path, "format", fmt, sizeof fmt);
	assert_string_equal(fmt, "2");

	/* Writable upgrades and seals, and the answers are the same. */
	open_ix(f, 0);
	close_ix(f);
	raw_meta(f->path, "format", fmt, sizeof fmt);
	assert_string_equal(fmt, "9");
	assert_false(raw_has_meta(f->path, "sealing"));
	assert_true(raw_seals(f->path, 0) >= 2 * n);	/* docs, texts */
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (j = 0; j < nprobe; j++) {
		upg_keys(probe[j], keys);
		f->out.n = 0;
		CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, keys, &f->out,
		    &f->cause));
		assert_int_equal(f->out.n, want[j].n);
		assert_memory_equal(f->out.v, want[j].v,
		    want[j].n * sizeof *want[j].v);
	}
	f->out.n = 0;
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, none, &f->out,
	    &f->cause));
	assert_int_equal(f->out.n, 0);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
	for (j = 0; j <= nprobe; j++)
		u64vec_free(&want[j]);
}

/* A 64-bit generator for the tests' keys (splitmix64). */
static uint64_t
next64(uint64_t *s)
{
	uint64_t	 z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

/* Random band keys for document i, in the first 256 chunks. */
static void
leaf_keys(size_t i, uint64_t *keys)
{
	uint64_t	 s = i * B, x;
	size_t		 j;

	for (j = 0; j < B; j++) {
		x = next64(&s);
		keys[j] = (x % 256) << (64 - BAND_CHUNK_BITS) |
		    x >> (BAND_CHUNK_BITS + 8);
	}
}

/*
 * Runs that grow out of their leaf pages into overflow pages leave no
 * sparse leaves behind: 256 chunks whose runs grow past 3 KB, batch after
 * batch, keep the l1 tree to a few leaf pages (without the delete before
 * the rewrite, about one per chunk stays).
 */
static void
test_l1_leaves(void **state)
{
	struct fixture		*f = *state;
	MDB_env			*env;
	MDB_txn			*txn;
	MDB_dbi			 meta, l1;
	MDB_stat		 st;

	fill_swept(f, 20000, 500, leaf_keys);
	close_ix(f);

	raw_open(f->path, MDB_RDONLY, &env, &txn, &meta);
	assert_int_equal(mdb_dbi_open(txn, "l1", 0, &l1), 0);
	assert_int_equal(mdb_stat(txn, l1, &st), 0);
	assert_int_equal(st.ms_entries, 256);
	assert_true(st.ms_overflow_pages >= 256);	/* runs grew out */
	if (st.ms_leaf_pages > 8)
		fail_msg("l1 has %zu leaf pages for 256 runs",
		    (size_t)st.ms_leaf_pages);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

#define SNAP_DOCS	1100	/* x B keys: lmdb_prepare reads l1map */
#define SNAP_BATCHES	40
#define SNAP_WANT	64	/* room for a lookup's expected documents */

/*
 * A brute-force model of the band index for test_snapshot and
 * test_partial: every document's keys, and the (key, document) pairs of
 * the batches inserted, sorted.
 */
struct model {
	uint64_t	*keys;
	uint64_t	*pairs;
	size_t		 npairs;
	size_t		 n;		/* documents inserted */
	struct ixdoc	*d;		/* the batch */
	size_t		*shared;	/* its key taken from earlier, or B */
	size_t		 nd;
	uint64_t	 s;		/* random state */
	unsigned	 chunks;	/* keys in so many, spread; 0: all */
};

/* A model for batches of nd documents. */
static void
model_init(struct model *m, size_t nd, size_t batches, uint64_t seed)
{
	memset(m, 0, sizeof *m);
	m->keys = xcalloc(nd * batches, B * sizeof *m->keys);
	m->pairs = xcalloc(nd * batches * B, 2 * sizeof *m->pairs);
	m->d = xcalloc(nd, sizeof *m->d);
	m->shared = xcalloc(nd, sizeof *m->shared);
	m->nd = nd;
	m->s = seed;
}

static void
model_free(struct model *m)
{
	free(m->keys);
	free(m->pairs);
	free(m->d);
	free(m->shared);
}

/*
 * The next batch: random band keys, each document's but the first
 * batch's with one taken from an earlier document.
 */
static void
model_batch(struct model *m)
{
	uint64_t	*nk;
	size_t		 i, j;

	for (i = 0; i < m->nd; i++) {
		nk = m->keys + (m->n + i) * B;
		for (j = 0; j < B; j++) {
			nk[j] = next64(&m->s);
			if (m->chunks > 0)
				nk[j] = (nk[j] % m->chunks) *
				    (BAND_CHUNKS / m->chunks) <<
				    (64 - BAND_CHUNK_BITS) |
				    nk[j] >> (BAND_CHUNK_BITS + 8);
		}
		m->shared[i] = B;	/* none */
		if (m->n > 0) {
			m->shared[i] = next64(&m->s) % B;
			nk[m->shared[i]] = m->keys[next64(&m->s) % (m->n * B)];
		}
		m->d[i].keys = nk;
		m->d[i].pending = 1;
	}
}

/*
 * Look up each document of the prepared batch (numbered from n + 1) and,
 * with insert, insert it: every lookup must return exactly the documents
 * holding its keys, as the model has them: the pairs of earlier batches,
 * and this batch's shared keys if inserted.
 */
static void
model_lookups(struct fixture *f, const struct model *m, size_t b,
    int insert)
{
	const uint64_t	*k, *hit;
	uint64_t	 want[SNAP_WANT];
	uint32_t	 sig[K] = { 0 };
	size_t		 nwant, i, j, o;

	for (i = 0; i < m->nd; i++) {
		k = m->d[i].keys;
		nwant = 0;
		for (j = 0; j < B; j++) {
			hit = bsearch(&k[j], m->pairs, m->npairs,
			    2 * sizeof *m->pairs, u64_cmp);
			while (hit != NULL && hit > m->pairs && hit[-2] == k[j])
				hit -= 2;
			for (; hit != NULL && hit < m->pairs + 2 * m->npairs &&
			    hit[0] == k[j]; hit += 2) {
				assert_true(nwant < SNAP_WANT);
				want[nwant++] = hit[1];
			}
			for (o = 0; o < i && insert; o++) {
				if (m->shared[o] < B &&
				    m->d[o].keys[m->shared[o]] == k[j]) {
					assert_true(nwant < SNAP_WANT);
					want[nwant++] = m->n + o + 1;
				}
			}
		}
		f->out.n = 0;
		CHECK(f, index_candidates(f->ix, i, k, &f->out, &f->cause));
		if (nwant > 1)
			qsort(want, nwant, sizeof *want, u64_cmp);
		if (f->out.n > 1)
			qsort(f->out.v, f->out.n, sizeof *f->out.v, u64_cmp);
		if (f->out.n != nwant || (nwant > 0 && memcmp(want, f->out.v,
		    nwant * sizeof *want) != 0))
			fail_msg("batch %zu, document %zu: %zu candidates, "
			    "want %zu", b, m->n + i + 1, f->out.n, nwant);
		if (insert)
			CHECK(f, index_insert(f->ix, k, sig, "x", 1, "t", 1, 0,
			    0, &f->cause));
	}
}

/* Begin, prepare and look up the next batch, then commit it. */
static void
model_run(struct fixture *f, struct model *m, size_t b, int insert)
{
	size_t	 i;

	model_batch(m);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_prepare(f->ix, m->d, m->nd, &f->cause));
	model_lookups(f, m, b, insert);
	CHECK(f, index_commit(f->ix, &f->cause));
	if (!insert)
		return;
	for (i = 0; i < m->nd * B; i++) {
		m->pairs[2 * m->npairs] = m->keys[m->n * B + i];
		m->pairs[2 * m->npairs++ + 1] = m->n + i / B + 1;
	}
	qsort(m->pairs, m->npairs, 2 * sizeof *m->pairs, u64_cmp);
	m->n += m->nd;
}

/*
 * Lookups across many batches while the sweep merges.  lmdb_prepare finds
 * the l1 runs through a snapshot kept across batches plus the chunks merged
 * since, re-read each batch.  The memtable budget makes the sweep advance
 * about 550 chunks a batch, so snapshots are renewed every few batches; the
 * sweep starts 300 chunks before the last one (an empty index may start it
 * anywhere), so the first merged range wraps past it.  Each new document takes one band key from a document
 * of an earlier batch; every lookup must return exactly the documents
 * holding its keys, as a brute-force model has them.
 */
static void
test_snapshot(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct model		 m;
	size_t			 b;
	char			 v[32];

	model_init(&m, SNAP_DOCS, SNAP_BATCHES, 7);
	params(&p);
	p.memtable = 4 << 20;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	close_ix(f);
	snprintf(v, sizeof v, "%u", BAND_CHUNKS - 300);
	raw_meta_put(f->path, "sweep", v);
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	for (b = 0; b < SNAP_BATCHES; b++)
		model_run(f, &m, b, 1);
	close_ix(f);
	raw_meta(f->path, "sweep", v, sizeof v);
	if (strtoull(v, NULL, 10) < 2 * BAND_CHUNKS)
		fail_msg("the sweep is at %s: not round", v);
	model_free(&m);
}

#define PART_DOCS	200	/* x B keys: under BAND_CHUNKS / 4, no l1map */
#define PART_BATCHES	60
#define PART_OPEN	5	/* batches between opens */
#define PART_FDOCS	300	/* x B keys: at least L0F_MIN, filtered */

/*
 * Small batches, each few after an open, so that the memtable holds only
 * what each batch needs of l0 (lsm_hold): the entries of its keys, and for
 * a writer the chunks its commit merges, whole; every other open is
 * read-only.  The budget makes the sweep go round
 * in about 40 batches, so merges meet chunks held and not.  Every lookup
 * must return exactly the documents holding its keys, as a brute-force
 * model has them; a read-only batch inserts nothing.
 */
static void
partial_run(struct fixture *f, size_t nd, uint64_t seed)
{
	struct index_params	 p;
	struct index_stats	 st;
	struct model		 m;
	size_t			 b;
	int			 rdonly = 0;

	model_init(&m, nd, PART_BATCHES, seed);
	params(&p);
	p.memtable = 1 << 20;
	for (b = 0; b < PART_BATCHES; b++) {
		if (b % PART_OPEN == 0) {
			if (b > 0)
				close_ix(f);
			rdonly = b > 0 && (b / PART_OPEN) % 2 == 1;
			CHECK(f, index_open(&f->ix, f->path,
			    rdonly ? INDEX_RDONLY : 0, &p, 0, &f->cause));
		}
		model_run(f, &m, b, !rdonly);
		/* What the batch read of l0 counts the rest exactly. */
		CHECK(f, index_stats(f->ix, &st, &f->cause));
		if (st.band_entries != m.npairs)
			fail_msg("batch %zu: %" PRIu64 " band entries, want "
			    "%zu", b, st.band_entries, m.npairs);
	}
	close_ix(f);
	model_free(&m);
}

static void
test_partial(void **state)
{
	partial_run(*state, PART_DOCS, 11);
}

/*
 * The same with batches whose l0 records have filters (index format 8):
 * a small batch reads the groups of chunks that its keys' filter bits
 * point to, and those of the chunks to be held whole.
 */
static void
test_partial_filtered(void **state)
{
	partial_run(*state, PART_FDOCS, 13);
}

#define YOUNG_DOCS	1100	/* x B keys: lmdb_prepare reads l1map */
#define YOUNG_SMALL	900	/* x B keys: lookups one by one */
#define YOUNG_CHUNKS	64
#define OLD_DOCS	400	/* x B keys: 25 entries a chunk a batch */

/*
 * A cursor on database name of the index at path, straight from LMDB, in
 * a transaction writable or not; raw_done ends both, committing or not.
 */
static void
raw_cursor(const char *path, const char *name, int writable, MDB_env **env,
    MDB_txn **txn, MDB_cursor **cur)
{
	MDB_dbi	 meta, dbi;

	raw_open(path, writable ? 0 : MDB_RDONLY, env, txn, &meta);
	assert_int_equal(mdb_dbi_open(*txn, name, 0, &dbi), 0);
	assert_int_equal(mdb_cursor_open(*txn, dbi, cur), 0);
}

static void
raw_done(MDB_env *env, MDB_txn *txn, MDB_cursor *cur, int commit)
{
	mdb_cursor_close(cur);
	if (commit)
		assert_int_equal(mdb_txn_commit(txn), 0);
	else
		mdb_txn_abort(txn);
	mdb_env_close(env);
}

/*
 * The pages a transaction allocated and freed again are never written:
 * LMDB leaves data.mdb short of its last page when they are its last
 * ones.  Such an index is whole, and opens and checks so; one cut short
 * of a page in use is damaged.  (A run of 93,021 documents with a small
 * --memtable ended so, and every mode refused its index.)
 */
static void
test_free_tail(void **state)
{
	struct fixture		*f = *state;
	MDB_env			*env;
	MDB_txn			*txn;
	MDB_cursor		*cur;
	MDB_envinfo		 info;
	MDB_val			 k, v;
	static char		 big[400000];
	char			 file[PATH_MAX + 32];
	unsigned char		 kb[8];
	struct stat		 sb;
	FILE			*out;
	uint64_t		 problems, before;
	int			 i;

	fill(f);
	/* (The three documents' keys are not their signatures'.) */
	open_ix(f, INDEX_RDONLY);
	assert_non_null(out = fopen("/dev/null", "w"));
	CHECK(f, index_check(f->ix, out, &before, &f->cause));
	fclose(out);
	close_ix(f);
	/* Free pages to reuse, then a large text put and deleted. */
	put_be64(kb, UINT64_MAX);
	k.mv_data = kb;
	k.mv_size = sizeof kb;
	for (i = 0; i < 4; i++) {
		raw_cursor(f->path, "texts", 1, &env, &txn, &cur);
		v.mv_data = big;
		v.mv_size = i < 3 ? 20000 : sizeof big;
		assert_int_equal(mdb_cursor_put(cur, &k, &v, 0), 0);
		if (i >= 2)
			assert_int_equal(mdb_cursor_del(cur, 0), 0);
		raw_done(env, txn, cur, 1);
	}
	raw_cursor(f->path, "texts", 0, &env, &txn, &cur);
	assert_int_equal(mdb_env_info(env, &info), 0);
	raw_done(env, txn, cur, 0);
	snprintf(file, sizeof file, "%s/data.mdb", f->path);
	assert_int_equal(stat(file, &sb), 0);
	/* The case itself: the file ends before the last page. */
	assert_true((uint64_t)sb.st_size < (info.me_last_pgno + 1) * 4096ULL);

	/* It opens, and checks as it did before (its pages whole). */
	open_ix(f, 0);
	close_ix(f);
	open_ix(f, INDEX_RDONLY);
	assert_non_null(out = fopen("/dev/null", "w"));
	CHECK(f, index_check(f->ix, out, &problems, &f->cause));
	fclose(out);
	assert_int_equal(problems, before);
	close_ix(f);

	/* Cut short of a page in use (its last page in use): damaged. */
	assert_int_equal(truncate(file, sb.st_size - 4096), 0);
	{
		struct index_params	 p;

		params(&p);
		assert_int_equal(index_open(&f->ix, f->path, 0, &p, 0,
		    &f->cause), INDEX_ERROR);
		check_cause(f, "is damaged");
	}
}

/*
 * The entries of the runs of database name (l1 or l1y), straight from
 * LMDB, as yrun_count reads them, whose padding must be zeros (and an old
 * run's entries ORUN_PAD bytes at least), and whose seals must be right
 * where the index is format 9.  *runs gets the runs, *padded (when not
 * NULL) those padded.  With unpad, every padded run is stored again as
 * formats 5 (young) and 6 (old) stored it, its entries alone (unsealed:
 * the index must be of a format before 9 already).
 */
static size_t
raw_run_entries(const char *path, const char *name, size_t *runs,
    size_t *padded, int unpad)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v;
	unsigned char	 kb[4];
	size_t		 n = 0, m, i, len;
	char		 fmt[32];
	int		 sealed;

	*runs = 0;
	if (padded != NULL)
		*padded = 0;
	raw_meta(path, "format", fmt, sizeof fmt);
	sealed = strcmp(fmt, "9") == 0;
	assert_false(sealed && unpad);
	raw_cursor(path, name, unpad, &env, &txn, &cur);
	while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
		assert_int_equal(k.mv_size, sizeof kb);
		if (sealed) {
			if (seal_open(v.mv_data, v.mv_size, strcmp(name,
			    "l1") == 0 ? SEAL_L1 : SEAL_L1Y, raw_key(&k),
			    &len) != 0)
				fail_msg("%s chunk %" PRIu64 ": its seal does "
				    "not match", name, raw_key(&k));
			v.mv_size = len;
		}
		assert_int_equal(yrun_count(v.mv_size, &m), 0);
		if (v.mv_size != m * L1E_SIZE) {
			if (strcmp(name, "l1") == 0)
				assert_true(m * L1E_SIZE >= ORUN_PAD);
			for (i = m * L1E_SIZE; i < v.mv_size; i++)
				assert_int_equal(((unsigned char *)
				    v.mv_data)[i], 0);
			if (padded != NULL)
				(*padded)++;
			if (unpad) {	/* (copies: k, v are LMDB's pages) */
				memcpy(kb, k.mv_data, sizeof kb);
				k.mv_data = kb;
				v.mv_data = memcpy(xmalloc(v.mv_size),
				    v.mv_data, v.mv_size);
				v.mv_size = m * L1E_SIZE;
				assert_int_equal(mdb_cursor_put(cur, &k, &v,
				    MDB_CURRENT), 0);
				free(v.mv_data);
			}
		}
		n += m;
		(*runs)++;
	}
	raw_done(env, txn, cur, unpad);
	return (n);
}

/*
 * l1 of the index at path straight from LMDB: a hash of its keys and runs
 * in order, and its leaf pages in *leaves.
 */
static uint64_t
raw_l1_hash(const char *path, size_t *leaves)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v;
	MDB_stat	 st;
	uint64_t	 h = 0;

	raw_cursor(path, "l1", 0, &env, &txn, &cur);
	assert_int_equal(mdb_stat(txn, mdb_cursor_dbi(cur), &st), 0);
	*leaves = st.ms_leaf_pages;
	while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
		h = XXH3_64bits_withSeed(k.mv_data, k.mv_size, h);
		h = XXH3_64bits_withSeed(&v.mv_size, sizeof v.mv_size, h);
		h = XXH3_64bits_withSeed(v.mv_data, v.mv_size, h);
	}
	raw_done(env, txn, cur, 0);
	return (h);
}

/*
 * Rewrite l1 of the index at path as the runs that grew out of their
 * leaves leave it: each key put first with a value that stays in its leaf
 * (one or two a page), then with its run, so that the leaves keep a
 * pointer or two each.  With bad, chunk 0's run ends in its leaf (its first 100
 * entries) and chunk 1's is stored twice over, one overflow page more: as
 * many overflow pages as runs, and a run in a leaf.  Returns how many.
 */
static size_t
raw_l1_sparse(const char *path, int bad)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v, *kv = NULL;
	unsigned char	 filler[1500] = { 0 };
	size_t		 n = 0, i;

	raw_cursor(path, "l1", 1, &env, &txn, &cur);
	while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
		kv = xreallocarray(kv, n + 1, 2 * sizeof *kv);
		kv[2 * n].mv_size = k.mv_size;
		kv[2 * n].mv_data = memcpy(xmalloc(k.mv_size), k.mv_data,
		    k.mv_size);
		kv[2 * n + 1].mv_size = v.mv_size;
		kv[2 * n + 1].mv_data = xmalloc(2 * v.mv_size);
		memcpy(kv[2 * n + 1].mv_data, v.mv_data, v.mv_size);
		memcpy((char *)kv[2 * n + 1].mv_data + v.mv_size, v.mv_data,
		    v.mv_size);
		n++;
	}
	assert_true(n >= 2);
	if (bad) {
		kv[1].mv_size = 100 * L1E_SIZE;
		kv[3].mv_size *= 2;
	}
	assert_int_equal(mdb_drop(txn, mdb_cursor_dbi(cur), 0), 0);
	for (i = 0; i < n; i++) {
		v.mv_data = filler;
		v.mv_size = sizeof filler;
		assert_int_equal(mdb_put(txn, mdb_cursor_dbi(cur), &kv[2 * i],
		    &v, 0), 0);
	}
	for (i = 0; i < n; i++) {
		assert_int_equal(mdb_put(txn, mdb_cursor_dbi(cur), &kv[2 * i],
		    &kv[2 * i + 1], 0), 0);
		free(kv[2 * i].mv_data);
		free(kv[2 * i + 1].mv_data);
	}
	free(kv);
	raw_done(env, txn, cur, 1);
	return (n);
}

/* An empty batch, committed: what lets lsm_repack look. */
static void
empty_commit(struct fixture *f)
{
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/*
 * A commit repacks an l1 whose runs have all left sparse leaves (the 256
 * chunks' runs of test_l1_leaves, spread by raw_l1_sparse over about as
 * many leaves) into two full leaves, without changing a byte of what it holds;
 * the documents' lookups find them.  Not while a run is still in its
 * leaf.
 */
static void
test_l1_repack(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 keys[B], h;
	size_t		 leaves, again, i, n;

	fill_swept(f, 20000, 500, leaf_keys);
	close_ix(f);
	n = raw_l1_sparse(f->path, 0);
	assert_int_equal(n, 256);
	h = raw_l1_hash(f->path, &leaves);
	if (leaves < n / 4)
		fail_msg("raw_l1_sparse left %zu leaves", leaves);
	empty_commit(f);
	assert_int_equal(raw_l1_hash(f->path, &again), h);
	assert_int_equal(again, 2);		/* 256 pointers of 22 bytes */

	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < 20000; i += 997) {
		leaf_keys(i, keys);
		f->out.n = 0;
		CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, keys, &f->out,
		    &f->cause));
		if (count(&f->out, i + 1) != B)
			fail_msg("document %zu: %zu of its %d bands", i + 1,
			    count(&f->out, i + 1), B);
	}
	index_abort(f->ix);
	close_ix(f);

	/* Sparse again, with a run in its leaf: left as it is. */
	raw_l1_sparse(f->path, 1);
	h = raw_l1_hash(f->path, &leaves);
	empty_commit(f);
	assert_int_equal(raw_l1_hash(f->path, &again), h);
	assert_int_equal(again, leaves);
}

/*
 * The runs of database name (l1 or l1y) of the index at path stored again
 * as format fmt stored them, unpadded, every value without its seal, and
 * "format" made fmt: read-only, n batches of lookups of the model's
 * documents (nds[i] of them in batch i) find what the model has and leave
 * the index format fmt; a writable open and batches up to batch end make
 * it format 9, every value sealed, and the sweep pads some of the runs
 * again.  *b counts the batches.
 */
static void
check_unpadded(struct fixture *f, struct index_params *p, struct model *m,
    size_t *b, size_t end, const char *name, const char *fmt,
    const size_t *nds, size_t n)
{
	size_t	 entries, runs, padded, i;
	char	 v[32];

	raw_seals(f->path, 1);
	raw_meta_put(f->path, "format", fmt);
	entries = raw_run_entries(f->path, name, &runs, &padded, 1);
	assert_true(padded > 0);
	assert_int_equal(raw_run_entries(f->path, name, &runs, &padded, 0),
	    entries);
	assert_int_equal(padded, 0);
	CHECK(f, index_open(&f->ix, f->path, INDEX_RDONLY, p, 0,
	    &f->cause));
	for (i = 0; i < n; i++) {
		m->nd = nds[i];
		model_run(f, m, (*b)++, 0);
	}
	close_ix(f);
	raw_meta(f->path, "format", v, sizeof v);
	assert_string_equal(v, fmt);
	CHECK(f, index_open(&f->ix, f->path, 0, p, 0, &f->cause));
	for (; *b < end; (*b)++)
		model_run(f, m, *b, 1);
	close_ix(f);
	raw_meta(f->path, "format", v, sizeof v);
	assert_string_equal(v, "9");
	assert_false(raw_has_meta(f->path, "sealing"));
	raw_seals(f->path, 0);
	raw_run_entries(f->path, name, &runs, &padded, 0);
	if (padded == 0)
		fail_msg("none of %zu runs of %s is padded", runs, name);
}

/*
 * Young runs (l1y): keys in 64 chunks only (spread over the sweep, so
 * that their merges are not all in step), so that each chunk's old run
 * grows out of its leaf page and the sweep merges into young runs, and
 * young runs into old ones (run_young).  Every lookup must return exactly
 * the documents holding its keys, as the brute-force model has them:
 * batches that find the runs through l1map, smaller ones that look them
 * up one by one (by pread), and read-only ones after a reopen.  Then both
 * levels hold entries, the young one less than the old, as many in all as
 * meta says.
 */
static void
test_young(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct model		 m;
	size_t			 b, old, young, oldruns, youngruns, padded;
	const size_t		 young_nds[] = { YOUNG_DOCS, YOUNG_SMALL };
	char			 v[32];

	model_init(&m, YOUNG_DOCS, 65, 5);
	m.chunks = YOUNG_CHUNKS;
	params(&p);
	p.memtable = 64 << 10;	/* 32 entries a chunk a sweep */
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	for (b = 0; b < 40; b++)
		model_run(f, &m, b, 1);
	m.nd = YOUNG_SMALL;
	for (; b < 50; b++)
		model_run(f, &m, b, 1);
	close_ix(f);
	CHECK(f, index_open(&f->ix, f->path, INDEX_RDONLY, &p, 0,
	    &f->cause));
	for (; b < 55; b++)
		model_run(f, &m, b, 0);
	close_ix(f);

	old = raw_run_entries(f->path, "l1", &oldruns, NULL, 0);
	young = raw_run_entries(f->path, "l1y", &youngruns, &padded, 0);
	if (young == 0 || young >= old)
		fail_msg("l1 holds %zu entries, l1y %zu", old, young);
	assert_true(oldruns <= YOUNG_CHUNKS && youngruns <= YOUNG_CHUNKS);
	if (padded == 0)
		fail_msg("none of %zu young runs is padded", youngruns);
	raw_meta(f->path, "l1_entries", v, sizeof v);
	assert_int_equal(strtoull(v, NULL, 10), old + young);

	/*
	 * Format 5's young runs, unpadded: read-only, the lookups are the
	 * same and the index stays format 5; a writable open makes it
	 * format 9, sealing every value, and the sweep pads the young runs
	 * it rewrites.
	 */
	check_unpadded(f, &p, &m, &b, 65, "l1y", "5", young_nds, 2);
	model_free(&m);
}

/*
 * Old runs of ORUN_PAD bytes to half a page are padded (format 7): keys in
 * 64 chunks, about 125 entries each, none of them young (the old runs are
 * shorter than half a page), the lookups of every batch exact as the model
 * has them, and read-only after a reopen.  Then those runs as format 6
 * stored them, unpadded: read-only, the lookups are the same and the index
 * stays format 6; a writable open makes it format 9, sealing every value,
 * and the sweep pads the runs it rewrites.
 */
static void
test_old_padded(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct model		 m;
	size_t			 b, n, runs, padded, young, nd = OLD_DOCS;
	char			 v[32];

	model_init(&m, OLD_DOCS, 14, 7);
	m.chunks = 64;
	params(&p);
	p.memtable = 64 << 10;
	CHECK(f, index_open(&f->ix, f->path, 0, &p, 0, &f->cause));
	for (b = 0; b < 5; b++)
		model_run(f, &m, b, 1);
	close_ix(f);
	CHECK(f, index_open(&f->ix, f->path, INDEX_RDONLY, &p, 0,
	    &f->cause));
	model_run(f, &m, b++, 0);
	close_ix(f);
	n = raw_run_entries(f->path, "l1", &runs, &padded, 0);
	assert_true(runs <= 64 && n > 64 * ORUN_PAD / L1E_SIZE);
	if (padded == 0)
		fail_msg("none of %zu old runs is padded", runs);
	raw_run_entries(f->path, "l1y", &young, NULL, 0);
	assert_int_equal(young, 0);
	raw_meta(f->path, "l1_entries", v, sizeof v);
	assert_int_equal(strtoull(v, NULL, 10), n);

	check_unpadded(f, &p, &m, &b, 14, "l1", "6", &nd, 1);
	model_free(&m);
}

/* --check of the index of f: problems, and its report contains want. */
static void
check_finds(struct fixture *f, uint64_t want_problems, const char *want)
{
	uint64_t	 problems;
	char		*out = NULL;
	size_t		 len = 0;
	FILE		*fp;

	open_ix(f, INDEX_RDONLY);
	assert_non_null(fp = open_memstream(&out, &len));
	CHECK(f, index_check(f->ix, fp, &problems, &f->cause));
	fclose(fp);
	close_ix(f);
	if (problems != want_problems || (want != NULL &&
	    strstr(out, want) == NULL))
		fail_msg("%" PRIu64 " problems: %s", problems, out);
	free(out);
}

/* --check of the index of f: some problems, one of which contains want. */
static void
check_reports(struct fixture *f, const char *want)
{
	uint64_t	 problems;
	char		*out = NULL;
	size_t		 len = 0;
	FILE		*fp;

	open_ix(f, INDEX_RDONLY);
	assert_non_null(fp = open_memstream(&out, &len));
	CHECK(f, index_check(f->ix, fp, &problems, &f->cause));
	fclose(fp);
	close_ix(f);
	if (problems == 0 || strstr(out, want) == NULL)
		fail_msg("%" PRIu64 " problems, want \"%s\": %s", problems,
		    want, out);
	free(out);
}

/*
 * Create the index at f->path with n documents of their own band keys (of
 * their signatures, so that --check finds them where it looks) and texts,
 * in one transaction: document i + 1's text is "text of document i".
 */
static void
fill_lsh(struct fixture *f, size_t n)
{
	uint64_t	 keys[B];
	uint32_t	 sig[K];
	char		 text[64];
	size_t		 i, j;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < n; i++) {
		for (j = 0; j < K; j++)
			sig[j] = (uint32_t)(i * K + j + 3);
		lsh_keys(sig, B, R, 0, keys);
		snprintf(text, sizeof text, "text of document %zu", i);
		CHECK(f, index_insert(f->ix, keys, sig, "d", 1, text,
		    strlen(text), 0, 0, &f->cause));
	}
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/* The bytes of an l0 record of n entries without a filter (format 7). */
#define L0_PLAIN(n)	(8 + (n) * BENTRY_SIZE)

/* How raw_l0 replaces a record: sealed again, or under its old seal. */
#define RESEAL		1
#define OLD_SEAL	0

/*
 * The first l0 record of the index at path, of size bytes and its seal
 * (which must be right), straight from LMDB: a copy of the record without
 * its seal (raw_l0 with rec NULL), or replaced by rec, sealed (RESEAL: a
 * damaged structure, which the seal does not catch) or with the seal it
 * had (OLD_SEAL: a flipped bit, which it does).
 */
static unsigned char *
raw_l0(const char *path, size_t size, const unsigned char *rec, int reseal)
{
	MDB_env		*env;
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v;
	unsigned char	*copy = NULL, *sealed;
	size_t		 len;

	raw_cursor(path, "l0", rec != NULL, &env, &txn, &cur);
	assert_int_equal(mdb_cursor_get(cur, &k, &v, MDB_FIRST), 0);
	assert_int_equal(v.mv_size, size + SEAL_SIZE);
	if (rec == NULL) {
		assert_int_equal(seal_open(v.mv_data, v.mv_size, SEAL_L0,
		    raw_key(&k), &len), 0);
		copy = memcpy(xmalloc(size), v.mv_data, size);
	} else {
		sealed = xmalloc(size + SEAL_SIZE);
		memcpy(sealed, rec, size);
		if (reseal)
			seal_put(sealed, size, SEAL_L0, raw_key(&k));
		else
			memcpy(sealed + size, (unsigned char *)v.mv_data +
			    size, SEAL_SIZE);
		v.mv_data = sealed;
		assert_int_equal(mdb_cursor_put(cur, &k, &v, MDB_CURRENT), 0);
		free(sealed);
	}
	raw_done(env, txn, cur, rec != NULL);
	return (copy);
}

/*
 * A damaged l0 entry (the third document's band key 42, its document
 * number past next_doc, the record sealed again) is an error for the
 * batches that read it back: a read-only one whose keys include 42, and a
 * writer's.  A read-only batch of other keys does not read it, and finds
 * what it would have.  A bit of the entry flipped under the record's old
 * seal instead (document 3 made 2: a record sound as far as its structure
 * goes) is an error for a writer that reads l0 whole, and --check finds
 * it.
 */
static void
test_l0_damage(void **state)
{
	static const uint64_t	 q1[B] = { 10, 20, 30, 43 };
	static const uint64_t	 q2[B] = { 42, 98, 97, 96 };
	struct fixture		*f = *state;
	struct ixdoc		 d;
	unsigned char		*rec, *bad;
	size_t			 e, size = L0_PLAIN(NDOCS * B);
	int			 pass, rc;

	fill(f);
	rec = raw_l0(f->path, size, NULL, 0);
	e = 8 + (NDOCS * B - 1) * BENTRY_SIZE;	/* the last entry */
	assert_int_equal(get_le64(rec + e), 42);
	assert_int_equal(get_le64(rec + e + 8), 3);
	bad = memcpy(xmalloc(size), rec, size);
	put_le64(bad + e + 8, 1000);
	raw_l0(f->path, size, bad, RESEAL);

	/* Read-only: q1 does not read the entry, q2 does; then a writer. */
	for (pass = 0; pass < 3; pass++) {
		memset(&d, 0, sizeof d);
		d.keys = pass == 0 ? q1 : q2;
		d.pending = 1;
		open_ix(f, pass < 2 ? INDEX_RDONLY : 0);
		CHECK(f, index_begin(f->ix, &f->cause));
		rc = index_prepare(f->ix, &d, 1, &f->cause);
		if (rc == 0)
			rc = index_candidates(f->ix, 0, d.keys, &f->out,
			    &f->cause);
		if (pass == 0) {
			assert_int_equal(rc, 0);
			assert_int_equal(f->out.n, 3 + 1 + 2);
			assert_int_equal(count(&f->out, 3), 2);
		} else {
			assert_int_equal(rc, INDEX_ERROR);
			check_cause(f, "not of a document below next_doc");
		}
		index_abort(f->ix);
		close_ix(f);
	}

	/*
	 * Sound again, then document 3 made 2 under the old seal: a
	 * writer's lookup of keys no prepare announced reads l0 whole, and
	 * fails; sound again, it finds what q1 found.
	 */
	for (pass = 0; pass < 2; pass++) {
		memcpy(bad, rec, size);
		if (pass == 0)
			bad[e + 8] ^= 1;	/* document 3 made 2 */
		raw_l0(f->path, size, bad, pass == 0 ? OLD_SEAL : RESEAL);
		open_ix(f, 0);
		CHECK(f, index_begin(f->ix, &f->cause));
		f->out.n = 0;
		rc = index_candidates(f->ix, INDEX_NOSLOT, q1, &f->out,
		    &f->cause);
		if (pass == 0) {
			assert_int_equal(rc, INDEX_ERROR);
			check_cause(f, "l0 record 1 is corrupt");
		} else {
			assert_int_equal(rc, 0);
			assert_int_equal(f->out.n, 3 + 1 + 2);
			assert_int_equal(count(&f->out, 3), 2);
		}
		index_abort(f->ix);
		close_ix(f);
	}
	free(bad);
	free(rec);
}

/*
 * --check finds an l0 record whose seal does not match (a bit of an entry
 * flipped under its old seal), as a problem.
 */
static void
test_l0_seal_check(void **state)
{
	struct fixture	*f = *state;
	unsigned char	*rec;
	size_t		 n = 5;

	fill_lsh(f, n);
	check_finds(f, 0, NULL);
	rec = raw_l0(f->path, L0_PLAIN(n * B), NULL, 0);
	rec[8 + 2 * BENTRY_SIZE + 8] ^= 0x04;	/* a document number */
	raw_l0(f->path, L0_PLAIN(n * B), rec, OLD_SEAL);
	free(rec);
	check_reports(f, "l0 record 1 fails its checksum");
}

/* The documents under the band keys k (all B of them) into f->out. */
static void
lookup(struct fixture *f, const uint64_t *k)
{
	f->out.n = 0;
	CHECK(f, index_candidates(f->ix, 0, k, &f->out, &f->cause));
}

/* Under the band keys k, document doc alone, under each of them. */
static void
lookup_only(struct fixture *f, const uint64_t *k, uint64_t doc)
{
	lookup(f, k);
	assert_int_equal(f->out.n, B);
	assert_int_equal(count(&f->out, doc), B);
}

/* Band key i of chunk c. */
#define CKEY(c, i)	((uint64_t)(c) << (64 - BAND_CHUNK_BITS) | (i))

/*
 * A writer's small batch holds only the entries of its keys, where its
 * commit merges no chunk.  A key no prepare announced (here one looked
 * up) makes the memtable read the whole of l0: the batch's additions in
 * the chunks held by keys, in no l0 record yet, must still be found, and
 * committed; after an abort they are gone.
 */
static void
test_writer_keys(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 kp[B], kd[B];
	uint32_t	 sig[K] = { 0 };
	struct ixdoc	 d;
	unsigned	 x, j;
	char		 v[32];

	fill(f);
	raw_meta(f->path, "sweep", v, sizeof v);
	/* A chunk half a sweep away: no commit here merges it. */
	x = (unsigned)((strtoull(v, NULL, 10) + BAND_CHUNKS / 2) %
	    BAND_CHUNKS);
	for (j = 0; j < B; j++) {
		kp[j] = CKEY(x, 100 + j);
		kd[j] = CKEY(x, 200 + j);
	}
	/* Document 4, P, in chunk x, committed to l0. */
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, kp, sig, "p", 1, "t", 1, 0, 0,
	    &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	/* Document 5, D: announced, inserted; then P's keys looked up. */
	open_ix(f, 0);
	memset(&d, 0, sizeof d);
	d.keys = kd;
	d.pending = 1;
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_prepare(f->ix, &d, 1, &f->cause));
	lookup(f, kd);
	assert_int_equal(f->out.n, 0);
	CHECK(f, index_insert(f->ix, kd, sig, "d", 1, "t", 1, 0, 0,
	    &f->cause));
	lookup_only(f, kp, 4);
	lookup_only(f, kd, 5);
	CHECK(f, index_commit(f->ix, &f->cause));

	/*
	 * Document 6, E, with D's keys, the same way but aborted: read
	 * back after E, D's entries share E's buckets, where a rollback of
	 * the additions would take D's.
	 */
	close_ix(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_prepare(f->ix, &d, 1, &f->cause));
	CHECK(f, index_insert(f->ix, kd, sig, "e", 1, "t", 1, 0, 0,
	    &f->cause));
	lookup(f, kp);
	lookup(f, kd);
	assert_int_equal(f->out.n, 2 * B);
	assert_int_equal(count(&f->out, 6), B);
	index_abort(f->ix);
	CHECK(f, index_begin(f->ix, &f->cause));
	lookup_only(f, kd, 5);
	index_abort(f->ix);
	close_ix(f);

	/* And as committed. */
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	lookup_only(f, kd, 5);
	lookup_only(f, kp, 4);
	index_abort(f->ix);
	close_ix(f);
}

/*
 * An l0 record (index format 6) is flagged and in l0_sort's order for the
 * sweep's chunk when it was written; --check finds two of its entries of
 * different chunks swapped.
 */
static void
test_l0_order(void **state)
{
	struct fixture		*f = *state;
	uint64_t		 keys[B], h;
	uint32_t		 sig[K] = { 0 };
	unsigned char		*rec, t[BENTRY_SIZE];
	size_t			 i, j, n = 50;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < n; i++) {
		for (j = 0; j < K; j++)
			sig[j] = (uint32_t)(i * K + j);
		lsh_keys(sig, B, R, 0, keys);
		CHECK(f, index_insert(f->ix, keys, sig, "d", 1, "t", 1, 0, 0,
		    &f->cause));
	}
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	rec = raw_l0(f->path, L0_PLAIN(n * B), NULL, 0);
	h = get_le64(rec);
	assert_true(h >> 63);				/* L0_SORTED */
	assert_true(l0_in_order(rec + 8, n * B, (h & ~(1ULL << 63)) %
	    BAND_CHUNKS));
	assert_false(l0_in_order(rec + 8, n * B, (h + BAND_CHUNKS / 2) %
	    BAND_CHUNKS));
	memcpy(t, rec + 8, BENTRY_SIZE);
	memcpy(rec + 8, rec + 8 + (n * B - 1) * BENTRY_SIZE, BENTRY_SIZE);
	memcpy(rec + 8 + (n * B - 1) * BENTRY_SIZE, t, BENTRY_SIZE);
	raw_l0(f->path, L0_PLAIN(n * B), rec, RESEAL);
	free(rec);
	check_finds(f, 1, "out of order");
}

/*
 * An l0 record of L0F_MIN entries or more has a filter (index format 8).
 * Damaged, its directory is an error for a batch that reads the record
 * by its filter, and --check finds it, as it finds a filter bit flipped.
 */
static void
test_l0_filter_damage(void **state)
{
	struct fixture		*f = *state;
	struct l0layout		 l;
	struct ixdoc		 d;
	uint64_t		 keys[300][B];
	uint32_t		 sig[K] = { 0 };
	unsigned char		*rec, *bad;
	size_t			 i, j, n = 300;
	int			 rc;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 0; i < n; i++) {
		for (j = 0; j < K; j++)
			sig[j] = (uint32_t)(i * K + j + 7);
		lsh_keys(sig, B, R, 0, keys[i]);
		CHECK(f, index_insert(f->ix, keys[i], sig, "d", 1, "t", 1, 0,
		    0, &f->cause));
	}
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
	l0f_layout(n * B, &l);
	rec = raw_l0(f->path, l.size, NULL, 0);
	assert_true(get_le64(rec) & L0_FILTERED);
	check_finds(f, 0, NULL);

	/* A directory that goes past the record's entries. */
	bad = xmalloc(l.size);
	memcpy(bad, rec, l.size);
	put_le32(bad + l.dir + 4, (uint32_t)(n * B + 1));
	raw_l0(f->path, l.size, bad, RESEAL);
	memset(&d, 0, sizeof d);
	d.keys = keys[5];
	d.pending = 1;
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	rc = index_prepare(f->ix, &d, 1, &f->cause);
	assert_int_equal(rc, INDEX_ERROR);
	check_cause(f, "l0 record 1 is corrupt");
	index_abort(f->ix);
	close_ix(f);
	check_finds(f, 1, "its directory or filter does not match");

	/* A bit of the filter flipped. */
	memcpy(bad, rec, l.size);
	bad[l.filter + 40] ^= 0x10;
	raw_l0(f->path, l.size, bad, RESEAL);
	check_finds(f, 1, "its directory or filter does not match");

	/* Sound again: the lookup finds document 6 under each key. */
	raw_l0(f->path, l.size, rec, RESEAL);
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_prepare(f->ix, &d, 1, &f->cause));
	lookup_only(f, keys[5], 6);
	index_abort(f->ix);
	close_ix(f);
	free(bad);
	free(rec);
}

/*
 * Seals (index format 9): a bit flipped in a stored document record, and
 * separately in a stored text, under their old seals, is "damaged" with
 * the document's number where the record or text is read, not a wrong
 * answer, and --check finds it; the other documents still read.
 */
static void
test_seal_damage(void **state)
{
	struct fixture	*f = *state;
	struct docinfo	 d;
	struct buf	 good = { 0 }, bad = { 0 };
	size_t		 len;

	fill_lsh(f, 5);
	check_finds(f, 0, NULL);

	/* Document 2's record. */
	raw_value(f->path, "docs", 2, &good, NULL);
	assert_int_equal(seal_open(good.data, good.len, SEAL_DOCS, 2, &len),
	    0);
	buf_append(&bad, good.data, good.len);
	bad.data[len / 2] ^= 0x20;
	raw_value(f->path, "docs", 2, NULL, &bad);
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	assert_int_equal(index_doc(f->ix, 2, &d, &f->cause), INDEX_ERROR);
	check_cause(f, "document 2 fails its checksum");
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	CHECK(f, index_doc(f->ix, 3, &d, &f->cause));
	assert_int_equal(d.docid, 3);
	index_abort(f->ix);
	close_ix(f);
	check_finds(f, 1, "document 2: record fails its checksum");
	raw_value(f->path, "docs", 2, NULL, &good);
	check_finds(f, 0, NULL);

	/* Document 3's text. */
	raw_value(f->path, "texts", 3, &good, NULL);
	assert_int_equal(seal_open(good.data, good.len, SEAL_TEXTS, 3, &len),
	    0);
	bad.len = 0;
	buf_append(&bad, good.data, good.len);
	bad.data[len - 1] ^= 0x01;
	raw_value(f->path, "texts", 3, NULL, &bad);
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	assert_int_equal(index_text(f->ix, 3, &f->text, &f->cause),
	    INDEX_ERROR);
	check_cause(f, "text of document 3 fails its checksum");
	CHECK(f, index_doc(f->ix, 3, &d, &f->cause));	/* its record */
	assert_int_equal(index_text(f->ix, 2, &f->text, &f->cause), 0);
	assert_int_equal(f->text.len, strlen("text of document 1"));
	assert_memory_equal(f->text.data, "text of document 1", f->text.len);
	index_abort(f->ix);
	close_ix(f);
	check_finds(f, 1, "text of document 3 fails its checksum");
	raw_value(f->path, "texts", 3, NULL, &good);
	check_finds(f, 0, NULL);
	buf_free(&good);
	buf_free(&bad);
}

/*
 * Sealing interrupted (the "sealing" record, lmdb.c "Seals"): documents 1
 * and 2's records sealed, the rest of the values not.  A read-only open
 * reads both kinds and --check finds nothing; the next writable open
 * seals the rest and deletes the record.
 */
static void
test_seal_resume(void **state)
{
	struct fixture	*f = *state;
	struct docinfo	 d;
	struct buf	 v = { 0 };
	char		 text[64];
	uint64_t	 i;

	fill_lsh(f, 5);
	raw_seals(f->path, 1);
	for (i = 1; i <= 2; i++) {
		raw_value(f->path, "docs", i, &v, NULL);
		buf_reserve(&v, v.len + SEAL_SIZE);
		seal_put((unsigned char *)v.data, v.len, SEAL_DOCS, i);
		v.len += SEAL_SIZE;
		raw_value(f->path, "docs", i, NULL, &v);
	}
	raw_meta_put(f->path, "sealing", "1 3");

	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_begin(f->ix, &f->cause));
	for (i = 1; i <= 5; i++) {
		CHECK(f, index_doc(f->ix, i, &d, &f->cause));
		assert_int_equal(d.docid, i);
		assert_int_equal(index_text(f->ix, i, &f->text, &f->cause), 0);
		snprintf(text, sizeof text, "text of document %" PRIu64,
		    i - 1);
		assert_int_equal(f->text.len, strlen(text));
		assert_memory_equal(f->text.data, text, f->text.len);
	}
	index_abort(f->ix);
	close_ix(f);
	check_finds(f, 0, NULL);
	assert_true(raw_has_meta(f->path, "sealing"));

	empty_commit(f);
	assert_false(raw_has_meta(f->path, "sealing"));
	assert_true(raw_seals(f->path, 0) >= 2 * 5);
	check_finds(f, 0, NULL);
	buf_free(&v);
}

/* Insert docs[i] in a transaction of its own, through ix. */
static void
insert_one(struct fixture *f, struct index *ix, size_t i)
{
	CHECK(f, index_begin(ix, &f->cause));
	CHECK(f, insert_docs(ix, i, 1, &f->cause));
	CHECK(f, index_commit(ix, &f->cause));
}

/* index_undelivered of docid, as ix sees it in a transaction. */
static int
undelivered(struct fixture *f, struct index *ix, uint64_t docid)
{
	int	 rc;

	CHECK(f, index_begin(ix, &f->cause));
	rc = index_undelivered(ix, docid, &f->cause);
	index_abort(ix);
	if (rc < 0)
		fail_msg("index_undelivered(%" PRIu64 "): %s", docid,
		    f->cause ? f->cause : "no cause");
	return (rc);
}

/* Commit the delivery marks given to ix, in a transaction of their own. */
static void
mark(struct fixture *f, struct index *ix, const uint64_t *ranges,
    size_t nranges, const uint64_t *replays, size_t nreplays)
{
	index_delivered(ix, ranges, nranges, replays, nreplays);
	CHECK(f, index_begin(ix, &f->cause));
	CHECK(f, index_commit(ix, &f->cause));
}

/*
 * Two writers at once (lmdb.c, "Several writers"): this process and a
 * child, which inserts document 2 between this one's 1 and 3 and then
 * waits.  This process's own documents are 1 and 3, not 2, whatever the
 * numbers; the child's undelivered 2 is not a replay while the child runs
 * (it writes it itself), and is once the child has died without marking
 * it.  Marked, the ranges are gone, and --check passes throughout.
 */
static void
test_owners(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct index		*other;
	const uint64_t		 mine[4] = { 1, 2, 3, 4 }, replay = 2;
	int			 go[2], ready[2], st;
	char			 c, *cause = NULL;
	pid_t			 pid;

	open_ix(f, INDEX_TRACK);
	insert_one(f, f->ix, 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	if ((pid = fork()) == 0) {
		/* Ends (read fails) when this process does, whatever failed. */
		close(go[1]);
		close(ready[0]);
		params(&p);
		if (index_open(&other, f->path, INDEX_TRACK, &p, 0,
		    &cause) != 0 || index_begin(other, &cause) != 0 ||
		    insert_docs(other, 1, 1, &cause) != 0 ||
		    index_commit(other, &cause) != 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		(void)read(go[0], &c, 1);
		_exit(0);		/* dies: delivers nothing */
	}
	assert_true(pid > 0);
	close(ready[1]);
	close(go[0]);
	if (read(ready[0], &c, 1) != 1)
		fail_msg("the other writer failed");
	insert_one(f, f->ix, 2);
	assert_true(index_own(f->ix, 1));
	assert_false(index_own(f->ix, 2));
	assert_true(index_own(f->ix, 3));
	assert_false(index_own(f->ix, 4));
	assert_int_equal(undelivered(f, f->ix, 1), 1);
	assert_int_equal(undelivered(f, f->ix, 2), 0);	/* a running one's */
	assert_int_equal(undelivered(f, f->ix, 3), 1);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(go[1]);
	close(ready[0]);
	assert_int_equal(undelivered(f, f->ix, 2), 1);	/* a dead one's */
	assert_true(index_own(f->ix, 3));
	assert_false(index_own(f->ix, 2));
	/* Its own delivered, and 2 written again as a replay. */
	mark(f, f->ix, mine, 2, &replay, 1);
	assert_int_equal(undelivered(f, f->ix, 1), 0);
	assert_int_equal(undelivered(f, f->ix, 2), 0);
	assert_int_equal(undelivered(f, f->ix, 3), 0);
	close_ix(f);
	check_finds(f, 0, NULL);
}

/*
 * A replay cut out of a range leaves two pieces; the range's delivery
 * forgets both.  A damaged range or owner record is a problem for
 * --check and an error for a lookup, not a crash.
 */
static void
test_undelivered_pieces(void **state)
{
	struct fixture	*f = *state;
	const uint64_t	 range[2] = { 1, 4 }, replay = 2;

	open_ix(f, INDEX_TRACK);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, insert_docs(f->ix, 0, NDOCS, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	mark(f, f->ix, NULL, 0, &replay, 1);
	assert_int_equal(undelivered(f, f->ix, 1), 1);
	assert_int_equal(undelivered(f, f->ix, 2), 0);
	assert_int_equal(undelivered(f, f->ix, 3), 1);
	close_ix(f);
	check_finds(f, 0, NULL);
	open_ix(f, INDEX_TRACK);
	mark(f, f->ix, range, 1, NULL, 0);
	assert_int_equal(undelivered(f, f->ix, 1), 0);
	assert_int_equal(undelivered(f, f->ix, 3), 0);
	close_ix(f);
	check_finds(f, 0, NULL);
	/* The records damaged below are LMDB's; redis.bats damages Redis's. */
	if (f->backend != BE_LMDB)
		return;

	raw_meta_put(f->path, "undelivered:0000000000000003", "1");
	raw_meta_put(f->path, "undelivered-owner:0000000000000003", "x");
	check_finds(f, 1, "meta record \"undelivered-owner:0000000000000003\"");
	open_ix(f, INDEX_TRACK);
	CHECK(f, index_begin(f->ix, &f->cause));
	assert_int_equal(index_undelivered(f->ix, 2, &f->cause), INDEX_ERROR);
	check_cause(f, "is bad");
	index_abort(f->ix);
	close_ix(f);
	raw_meta_put(f->path, "undelivered-owner:0000000000000003", "1");
	raw_meta_put(f->path, "undelivered:0000000000000009", "2");
	check_finds(f, 1, "ends past next_doc");
	raw_meta_put(f->path, "undelivered:0000000000000009", "4");
	raw_meta_put(f->path, "undelivered:00000000000000zz", "1");
	check_finds(f, 2, "is malformed");
}

/*
 * Retention by count: --max-docs keeps the newest documents on every
 * backend; the others are gone, and lookups no longer find them.
 */
static void
test_expire_count(void **state)
{
	const struct retention	 ret = { 0, 2 };
	struct fixture		*f = *state;
	struct docinfo		 d;
	struct index_stats	 st;
	uint64_t		 removed;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_expire(f->ix, &ret, time(NULL), 100, &removed,
	    &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	assert_int_equal(removed, 1);
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_stats(f->ix, &st, &f->cause));
	assert_int_equal(st.docs, NDOCS - 1);
	CHECK(f, index_begin(f->ix, &f->cause));
	doc_missing(f, 1, 1);
	CHECK(f, index_doc(f->ix, 2, &d, &f->cause));
	CHECK(f, index_doc(f->ix, 3, &d, &f->cause));
	/* A lookup may still list it until its entries are dropped. */
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, docs[0].keys, &f->out,
	    &f->cause));
	assert_int_equal(count(&f->out, 2), 1);
	assert_int_equal(count(&f->out, 3), 2);
	/* Nothing more to expire. */
	CHECK(f, index_expire(f->ix, &ret, time(NULL), 100, &removed,
	    &f->cause));
	assert_int_equal(removed, 0);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
}

/*
 * Retention by age, where the backends differ: LMDB removes the documents
 * older than --retain when asked; Redis gives each document an expiry
 * when its batch commits and the server deletes it, so asking removes
 * nothing.
 */
static void
test_expire_age(void **state)
{
	const struct retention	 ret = { 100, 0 };
	struct fixture		*f = *state;
	struct docinfo		 d;
	uint64_t		 removed;
	int64_t			 now = time(NULL);

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[0].keys, docs[0].sig, "old", 3,
	    "t", 1, 0, now - 1000, &f->cause));
	CHECK(f, index_insert(f->ix, docs[1].keys, docs[1].sig, "new", 3,
	    "t", 1, 0, now, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_expire(f->ix, &ret, now, 100, &removed, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	if (f->backend == BE_LMDB) {
		assert_int_equal(removed, 1);
		doc_missing(f, 1, 1);
	} else {
		assert_int_equal(removed, 0);
		CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
		assert_int_equal(d.time, now - 1000);
	}
	CHECK(f, index_doc(f->ix, 2, &d, &f->cause));
	assert_int_equal(d.time, now);
	index_abort(f->ix);
	close_ix(f);
}

/*
 * Inserts on both sides of a removal in one transaction: the removal takes
 * the last document, where the inserts left off (LMDB appends through
 * cursors kept for the transaction, which a removal closes), and the
 * insert after it appends after the removed one.  Every document and text
 * reads back as written.  LMDB only: Redis's removal does not see the
 * documents of the batch it is in.
 */
static void
test_insert_around_remove(void **state)
{
	struct fixture		*f = *state;
	struct docinfo		 d;
	struct buf		 text = { 0 };
	uint64_t		 removed;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[0].keys, docs[0].sig, "p", 1,
	    "text p", 6, 0, 0, &f->cause));
	CHECK(f, index_insert(f->ix, docs[1].keys, docs[1].sig, "q", 1,
	    "text q", 6, 0, 0, &f->cause));
	CHECK(f, index_remove(f->ix, "q", 1, &removed, &f->cause));
	assert_int_equal(removed, 1);
	CHECK(f, index_insert(f->ix, docs[2].keys, docs[2].sig, "r", 1,
	    "text r", 6, 0, 0, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_doc(f->ix, NDOCS + 1, &d, &f->cause));
	assert_memory_equal(d.id, "p", 1);
	doc_missing(f, NDOCS + 2, 1);
	CHECK(f, index_doc(f->ix, NDOCS + 3, &d, &f->cause));
	assert_memory_equal(d.id, "r", 1);
	assert_true(index_text(f->ix, NDOCS + 1, &text, &f->cause) >= 0);
	assert_int_equal(text.len, 6);
	assert_memory_equal(text.data, "text p", 6);
	assert_true(index_text(f->ix, NDOCS + 3, &text, &f->cause) >= 0);
	assert_int_equal(text.len, 6);
	assert_memory_equal(text.data, "text r", 6);
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	assert_memory_equal(d.sig, docs[0].sig, sizeof docs[0].sig);
	index_abort(f->ix);
	close_ix(f);
	buf_free(&text);
}

/* --remove: every document of an id goes, on every backend. */
static void
test_remove(void **state)
{
	struct fixture		*f = *state;
	struct docinfo		 d;
	struct index_stats	 st;
	uint64_t		 removed;

	fill(f);
	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[2].keys, docs[2].sig, "b", 1, "t",
	    1, 0, 0, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_remove(f->ix, "b", 1, &removed, &f->cause));
	assert_int_equal(removed, 2);
	CHECK(f, index_remove(f->ix, "nosuch", 6, &removed, &f->cause));
	assert_int_equal(removed, 0);
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_stats(f->ix, &st, &f->cause));
	assert_int_equal(st.docs, NDOCS - 1);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_doc(f->ix, 1, &d, &f->cause));
	doc_missing(f, 2, 1);
	CHECK(f, index_doc(f->ix, 3, &d, &f->cause));
	doc_missing(f, 4, 1);
	CHECK(f, index_candidates(f->ix, INDEX_NOSLOT, docs[0].keys, &f->out,
	    &f->cause));
	assert_int_equal(count(&f->out, 1), B);
	assert_int_equal(count(&f->out, 3), 2);
	index_abort(f->ix);
	close_ix(f);
}

/*
 * Delivery marks: a tracked batch's documents are this process's and
 * undelivered until its range is marked delivered; once this process has
 * stopped, a range it left undelivered is a stopped writer's (a replay
 * for whoever meets it); without tracking nothing is left undelivered.
 */
static void
test_delivery(void **state)
{
	struct fixture	*f = *state;
	const uint64_t	 first[2] = { 1, 3 }, replay = 3;
	uint64_t	 b, e;
	size_t		 i;

	open_ix(f, INDEX_TRACK);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, insert_docs(f->ix, 0, 2, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	index_batch_range(f->ix, &b, &e);
	assert_int_equal(b, 1);
	assert_int_equal(e, 3);
	insert_one(f, f->ix, 2);
	index_batch_range(f->ix, &b, &e);
	assert_int_equal(b, 3);
	assert_int_equal(e, 4);
	for (i = 1; i <= NDOCS; i++) {
		assert_true(index_own(f->ix, i));
		assert_int_equal(undelivered(f, f->ix, i), 1);
	}
	mark(f, f->ix, first, 1, NULL, 0);
	assert_int_equal(undelivered(f, f->ix, 1), 0);
	assert_int_equal(undelivered(f, f->ix, 2), 0);
	assert_int_equal(undelivered(f, f->ix, 3), 1);
	close_ix(f);
	check_finds(f, 0, NULL);

	open_ix(f, INDEX_TRACK);
	assert_false(index_own(f->ix, 3));
	assert_int_equal(undelivered(f, f->ix, 2), 0);
	assert_int_equal(undelivered(f, f->ix, 3), 1);
	mark(f, f->ix, NULL, 0, &replay, 1);
	assert_int_equal(undelivered(f, f->ix, 3), 0);
	close_ix(f);

	/* Untracked: the number the insert took. */
	open_ix(f, 0);
	insert_one(f, f->ix, 0);
	assert_int_equal(index_last_doc(f->ix), NDOCS + 1);
	assert_int_equal(undelivered(f, f->ix, NDOCS + 1), 0);
	close_ix(f);
}

/*
 * Abandoned ranges: a range this process gives up stops being its own, so
 * that another process, which leaves a running writer's range to it,
 * treats it as a stopped writer's (undelivered) once it is committed.
 * The other process is a child, asked over a pipe.
 */
static void
test_abandoned(void **state)
{
	struct fixture		*f = *state;
	struct index_params	 p;
	struct index		*other;
	const uint64_t		 range[2] = { 1, NDOCS + 1 };
	int			 ask[2], answer[2], rc, st;
	char			 c, *cause = NULL;
	pid_t			 pid;

	open_ix(f, INDEX_TRACK);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, insert_docs(f->ix, 0, NDOCS, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	assert_int_equal(pipe(ask), 0);
	assert_int_equal(pipe(answer), 0);
	if ((pid = fork()) == 0) {
		close(ask[1]);
		close(answer[0]);
		params(&p);
		if (index_open(&other, f->path, INDEX_TRACK, &p, 0,
		    &cause) != 0)
			_exit(1);
		while (read(ask[0], &c, 1) == 1) {
			if (index_begin(other, &cause) != 0)
				_exit(2);
			rc = index_undelivered(other, 2, &cause);
			index_abort(other);
			c = rc < 0 ? 'e' : '0' + rc;
			if (write(answer[1], &c, 1) != 1)
				_exit(3);
		}
		index_close(other);
		_exit(0);
	}
	assert_true(pid > 0);
	close(ask[0]);
	close(answer[1]);

	/* A running writer's range: left to it. */
	assert_int_equal(write(ask[1], "?", 1), 1);
	assert_int_equal(read(answer[0], &c, 1), 1);
	assert_int_equal(c, '0');

	index_abandoned(f->ix, range, 1);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	assert_int_equal(write(ask[1], "?", 1), 1);
	assert_int_equal(read(answer[0], &c, 1), 1);
	assert_int_equal(c, '1');

	close(ask[1]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(answer[0]);
	close_ix(f);
}

/*
 * Groups: each duplicate's group (the first document of its chain) is
 * kept across a reopen; an unprepared insertion (--import) can be put in
 * the group of one inserted earlier, in its transaction or an earlier
 * one, by the number index_last_doc gave (Redis numbers them at commit).
 */
static void
test_groups(void **state)
{
	struct fixture	*f = *state;
	uint64_t	 g, u1;

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, prepare_docs(f->ix, 0, NDOCS, &f->cause));
	CHECK(f, insert_slot(f->ix, 0, 0, &f->cause));
	CHECK(f, insert_slot(f->ix, 1, 1, &f->cause));
	CHECK(f, index_set_group(f->ix, 1, &f->cause));
	CHECK(f, insert_slot(f->ix, 2, 2, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_group(f->ix, 1, &g, &f->cause));
	assert_int_equal(g, 1);
	CHECK(f, index_group(f->ix, 2, &g, &f->cause));
	assert_int_equal(g, 1);
	CHECK(f, index_group(f->ix, 3, &g, &f->cause));
	assert_int_equal(g, 3);
	index_abort(f->ix);

	/* u1 (4); u2 (5) in its group in the same transaction, u3 (6) in
	 * the next. */
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[0].keys, docs[0].sig, "u1", 2,
	    "t", 1, 0, 0, &f->cause));
	u1 = index_last_doc(f->ix);
	assert_true(u1 != 0);
	CHECK(f, index_insert(f->ix, docs[1].keys, docs[1].sig, "u2", 2,
	    "t", 1, 0, 0, &f->cause));
	CHECK(f, index_set_group(f->ix, u1, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_insert(f->ix, docs[2].keys, docs[2].sig, "u3", 2,
	    "t", 1, 0, 0, &f->cause));
	CHECK(f, index_set_group(f->ix, u1, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, index_group(f->ix, 4, &g, &f->cause));
	assert_int_equal(g, 4);
	CHECK(f, index_group(f->ix, 5, &g, &f->cause));
	assert_int_equal(g, 4);
	CHECK(f, index_group(f->ix, 6, &g, &f->cause));
	assert_int_equal(g, 4);
	index_abort(f->ix);
	close_ix(f);
}

/* --info: the same parameters, counts and times on every backend. */
static void
test_info(void **state)
{
	struct fixture		*f = *state;
	struct index_info	 in;
	int64_t			 t0, t1;

	t0 = time(NULL);
	fill(f);
	t1 = time(NULL);
	open_ix(f, INDEX_RDONLY);
	memset(&in, 0, sizeof in);
	CHECK(f, index_info(f->ix, &in, &f->cause));
	close_ix(f);
	assert_int_equal(in.p.perms, K);
	assert_int_equal(in.p.bands, B);
	assert_int_equal(in.p.rows, R);
	assert_int_equal(in.p.shingle, 5);
	assert_int_equal(in.p.texts, 1);
	assert_int_equal(in.format, f->backend == BE_LMDB ? MHF_INDEX_FORMAT :
	    MHF_REDIS_FORMAT);
	assert_int_equal(in.remote, f->backend == BE_REDIS);
	assert_int_equal(in.docs, NDOCS);
	assert_int_equal(in.next_doc, NDOCS + 1);
	assert_int_equal(in.band_entries, NDOCS * B);
	assert_in_range(in.created, t0, t1);
	assert_in_range(in.oldest, t0, t1);
	assert_in_range(in.newest, in.oldest, t1);
	assert_int_equal(in.pending, 0);
	assert_int_equal(in.undelivered, 0);
}

/*
 * --compact, where the backends differ: LMDB writes a compacted copy that
 * opens with the same documents; a Redis index has no copy to make, and
 * says so.
 */
static void
test_compact(void **state)
{
	struct fixture		*f = *state;
	struct index_stats	 st;
	char			 dest[PATH_MAX + 16];

	open_ix(f, 0);
	CHECK(f, index_begin(f->ix, &f->cause));
	CHECK(f, insert_docs(f->ix, 0, NDOCS, &f->cause));
	CHECK(f, index_commit(f->ix, &f->cause));
	close_ix(f);
	open_ix(f, INDEX_RDONLY);
	snprintf(dest, sizeof dest, "%s/copy", f->dir);
	if (f->backend == BE_REDIS) {
		assert_int_equal(index_compact(f->ix, dest, &f->cause),
		    INDEX_ERROR);
		check_cause(f, "does not apply to a Redis index");
		close_ix(f);
		return;
	}
	CHECK(f, index_compact(f->ix, dest, &f->cause));
	close_ix(f);
	memcpy(f->path, dest, sizeof f->path);
	open_ix(f, INDEX_RDONLY);
	CHECK(f, index_stats(f->ix, &st, &f->cause));
	assert_int_equal(st.docs, NDOCS);
	assert_int_equal(st.band_entries, NDOCS * B);
	close_ix(f);
	check_finds(f, 0, NULL);
}

/*
 * A free TCP port of 127.0.0.1 for the suite's Redis.  redis:// URLs name
 * a host and a port, so the server cannot listen on a Unix socket only.
 */
static int
free_port(void)
{
	struct sockaddr_in	 sin;
	socklen_t		 len = sizeof sin;
	int			 s, port = -1;

	if ((s = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&sin, sizeof sin) == 0 &&
	    getsockname(s, (struct sockaddr *)&sin, &len) == 0)
		port = ntohs(sin.sin_port);
	close(s);
	return (port);
}

/* Whether the server on port answers PING. */
static int
redis_answers(int port)
{
	struct sockaddr_in	 sin;
	char			 reply[8];
	ssize_t			 n;
	size_t			 got = 0;
	int			 s, ok = 0;

	if ((s = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&sin, sizeof sin) == 0 &&
	    write(s, "PING\r\n", 6) == 6) {
		while (got < 7 && (n = read(s, reply + got, 7 - got)) > 0)
			got += n;
		ok = got == 7 && memcmp(reply, "+PONG\r\n", 7) == 0;
	}
	close(s);
	return (ok);
}

/*
 * Start the suite's redis-server, in the foreground as a child, with its
 * files in a directory of its own: 0 and redis_port set, 1 when
 * redis-server is not installed, -1 when it does not start (a failure).
 */
static int
redis_start(void)
{
	const char	*tmp;
	char		 port[16], pidfile[PATH_MAX + 16], log[PATH_MAX + 16];
	int		 i, p, fd;

	if (system("command -v redis-server >/dev/null 2>&1") != 0)
		return (1);
	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(redis_dir, sizeof redis_dir, "%s/mhf-test-redis.XXXXXX", tmp);
	if (mkdtemp(redis_dir) == NULL || (p = free_port()) <= 0)
		return (-1);
	snprintf(port, sizeof port, "%d", p);
	snprintf(pidfile, sizeof pidfile, "%s/redis.pid", redis_dir);
	snprintf(log, sizeof log, "%s/redis.log", redis_dir);
	if ((redis_pid = fork()) == -1)
		return (-1);
	if (redis_pid == 0) {
#ifdef __linux__
		/* Gone with the suite, even when the alarm kills it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
		if ((fd = open("/dev/null", O_RDWR)) != -1) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
		}
		execlp("redis-server", "redis-server", "--port", port,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--daemonize", "no", "--dir", redis_dir, "--pidfile",
		    pidfile, "--logfile", log, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 200; i++) {
		if (redis_answers(p)) {
			redis_port = p;
			return (0);
		}
		if (waitpid(redis_pid, NULL, WNOHANG) == redis_pid) {
			redis_pid = 0;
			break;
		}
		usleep(50000);
	}
	fprintf(stderr, "redis-server on port %d did not start; see %s\n", p,
	    log);
	return (-1);
}

/* Stop the suite's redis-server and remove its directory. */
static void
redis_stop(void)
{
	if (redis_pid > 0) {
		kill(redis_pid, SIGKILL);
		waitpid(redis_pid, NULL, 0);
		redis_pid = 0;
	}
	if (redis_dir[0] != '\0')
		nftw(redis_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define T(name)	cmocka_unit_test_setup_teardown(name, setup, teardown)
#define C(name)	{ #name, name }

/* The cases every backend must pass. */
static struct conformance conformance[] = {
	C(test_create),
	C(test_docs),
	C(test_texts),
	C(test_candidates),
	C(test_big_bucket),
	C(test_same_txn),
	C(test_mismatch),
	C(test_stored_params),
	C(test_no_texts),
	C(test_abort),
	C(test_rdonly_missing),
	C(test_rdonly),
	C(test_owners),
	C(test_undelivered_pieces),
	C(test_expire_count),
	C(test_expire_age),
	C(test_remove),
	C(test_delivery),
	C(test_abandoned),
	C(test_groups),
	C(test_info),
	C(test_compact),
};
#define NCONFORMANCE	(sizeof conformance / sizeof conformance[0])

/*
 * Run the tests: the conformance cases on LMDB, LMDB's own, then the
 * conformance cases on Redis, left out (saying so) when redis-server is
 * not installed: cmocka reports a skipped test as "not ok", which the TAP
 * driver counts as a failure.  All bounded by an alarm as in memcached's
 * testapp.
 */
int
main(void)
{
	const struct CMUnitTest lmdb_only[] = {
		T(test_texts_layout),
		T(test_text_decode),
		T(test_map_full),
		T(test_temp),
		T(test_not_lmdb),
		T(test_free_tail),
		T(test_upgrade_format2),
		T(test_upgrade_format3),
		T(test_snapshot),
		T(test_partial),
		T(test_partial_filtered),
		T(test_l1_leaves),
		T(test_l1_repack),
		T(test_young),
		T(test_old_padded),
		T(test_l0_damage),
		T(test_l0_order),
		T(test_l0_filter_damage),
		T(test_l0_seal_check),
		T(test_seal_damage),
		T(test_seal_resume),
		T(test_writer_keys),
		T(test_insert_around_remove),
	};
	struct CMUnitTest	*tests;
	size_t			 i, n = 0;
	char			*name;
	int			 rc, redis;

	alarm(300);
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((redis = redis_start()) == 1)
		printf("# redis-server is not installed: the cases on Redis "
		    "are left out\n");
	else if (redis == -1)
		redis_port = -1;	/* the cases on Redis fail */

	tests = xcalloc(2 * NCONFORMANCE + sizeof lmdb_only /
	    sizeof lmdb_only[0], sizeof *tests);
	for (i = 0; i < NCONFORMANCE; i++) {
		tests[n].name = conformance[i].name;
		tests[n].test_func = conformance[i].fn;
		tests[n].setup_func = setup;
		tests[n++].teardown_func = teardown;
	}
	for (i = 0; i < sizeof lmdb_only / sizeof lmdb_only[0]; i++)
		tests[n++] = lmdb_only[i];
	for (i = 0; redis != 1 && i < NCONFORMANCE; i++) {
		xasprintf(&name, "%s on redis", conformance[i].name);
		tests[n].name = name;
		tests[n].test_func = on_redis;
		tests[n].setup_func = setup_redis;
		tests[n].teardown_func = teardown;
		tests[n++].initial_state = &conformance[i];
	}
	rc = _cmocka_run_group_tests("test_index", tests, n, NULL, NULL);
	redis_stop();
	return (rc);
}
