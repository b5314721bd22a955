/*
 * Known-answer tests for what the index stores and exchanges (codec.c,
 * export.c): the document record, texts, time keys, the parameter records
 * (LMDB's and Redis's meta string), Redis keys and values, and the export
 * format.  The vectors were written down once from the code of index
 * format 4 and Redis format 3 (the Redis ones as a Redis server held them,
 * the time key as LMDB did); a change of stored bytes fails here loudly.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mhfilter.h"

/* The signature of the known document "doc-1" (K = 8). */
static const uint32_t sig8[8] = { 1, 2, 0x1234, 0xfffe, 0, 65535, 256, 7 };

/* docrec_encode(sig8, "doc-1", DOC_UNIQUE | DOC_BYTES, 1700000000). */
static const unsigned char docrec1[] = {
	0x02, 0x03, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x65, 0x53, 0xf1, 0x00, 0x01, 0x00, 0x02, 0x00, 0x34, 0x12, 0xfe, 0xff,
	0x00, 0x00, 0xff, 0xff, 0x00, 0x01, 0x07, 0x00, 0x64, 0x6f, 0x63, 0x2d,
	0x31
};

/* The same with DOC_UNIQUE only and time -5. */
static const unsigned char docrec2[] = {
	0x02, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xfb, 0x01, 0x00, 0x02, 0x00, 0x34, 0x12, 0xfe, 0xff,
	0x00, 0x00, 0xff, 0xff, 0x00, 0x01, 0x07, 0x00, 0x64, 0x6f, 0x63, 0x2d,
	0x31
};

/* A text too short to compress: raw. */
static const unsigned char text_raw[] = {
	0x00, 0x00, 0x73, 0x68, 0x6f, 0x72, 0x74, 0x20, 0x74, 0x65, 0x78, 0x74
};

/* LONG_TEXT as format 4 stores it with DOC_BYTES: LZ4. */
#define LONG_TEXT	"the quick brown fox jumps over the lazy dog; the " \
			"quick brown fox jumps over the lazy dog; the quick " \
			"brown fox."
static const unsigned char text_lz4[] = {
	0x02, 0x02, 0x6e, 0x00, 0x00, 0x00, 0xf0, 0x10, 0x74, 0x68, 0x65, 0x20,
	0x71, 0x75, 0x69, 0x63, 0x6b, 0x20, 0x62, 0x72, 0x6f, 0x77, 0x6e, 0x20,
	0x66, 0x6f, 0x78, 0x20, 0x6a, 0x75, 0x6d, 0x70, 0x73, 0x20, 0x6f, 0x76,
	0x65, 0x72, 0x20, 0x1f, 0x00, 0x91, 0x6c, 0x61, 0x7a, 0x79, 0x20, 0x64,
	0x6f, 0x67, 0x3b, 0x0e, 0x00, 0x0f, 0x2d, 0x00, 0x25, 0x50, 0x20, 0x66,
	0x6f, 0x78, 0x2e
};

/*
 * The signature's 16-bit values, both ways, eight at a time where the CPU
 * does that and one at a time for the rest: the same bytes as a byte
 * loop, for every length around the blocks of eight and values with any
 * top bits (only the low 16 are stored), and back.
 */
static void
test_sig16(void **state)
{
	static const unsigned	 lens[] = { 1, 2, 7, 8, 9, 15, 16, 17, 31, 64,
	    127, 128, 129, 256 };
	uint32_t	 sig[256], back[256];
	unsigned char	 got[2 * 256 + 1], want[2 * 256];
	uint64_t	 x = 88172645463325252ULL;
	unsigned	 i, k, K;

	(void)state;
	for (k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		K = lens[k];
		for (i = 0; i < K; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Every third one past 16 bits; 0x7fff-0x8000 too. */
			sig[i] = i % 3 == 0 ? (uint32_t)x : i % 5 == 1 ?
			    0x7fff + (i & 1) : (uint32_t)x & 0xffff;
			want[2 * i] = sig[i] & 0xff;
			want[2 * i + 1] = (sig[i] >> 8) & 0xff;
		}
		memset(got, 0xaa, sizeof got);
		sig_encode16(sig, K, got);
		assert_memory_equal(got, want, 2 * K);
		assert_int_equal(got[2 * K], 0xaa);
		sig_decode16(got, K, back);
		for (i = 0; i < K; i++)
			assert_int_equal(back[i], sig[i] & 0xffff);
	}
}

/*
 * The document record, both ways: the known bytes, their decoding, a
 * record followed by more bytes, and damaged ones refused.
 */
static void
test_docrec(void **state)
{
	struct buf	 b = { 0 };
	struct docinfo	 d;
	uint32_t	 sig[8];
	unsigned char	 bad[sizeof docrec1];

	(void)state;
	docrec_encode(&b, 8, sig8, "doc-1", 5, DOC_UNIQUE | DOC_BYTES,
	    1700000000);
	assert_int_equal(b.len, sizeof docrec1);
	assert_memory_equal(b.data, docrec1, sizeof docrec1);
	docrec_encode(&b, 8, sig8, "doc-1", 5, DOC_UNIQUE, -5);
	assert_int_equal(b.len, sizeof docrec2);
	assert_memory_equal(b.data, docrec2, sizeof docrec2);

	assert_int_equal(docrec_decode(docrec1, sizeof docrec1, 8, sig, &d),
	    sizeof docrec1);
	assert_memory_equal(sig, sig8, sizeof sig);
	assert_ptr_equal(d.sig, sig);
	assert_int_equal(d.flags, DOC_UNIQUE | DOC_BYTES);
	assert_true(d.time == 1700000000);
	assert_int_equal(d.idlen, 5);
	assert_memory_equal(d.id, "doc-1", 5);
	assert_int_equal(docrec_decode(docrec2, sizeof docrec2, 8, NULL, &d),
	    sizeof docrec2);
	assert_null(d.sig);
	assert_true(d.time == -5);

	/* What follows the record is the caller's. */
	b.len = 0;
	buf_append(&b, docrec1, sizeof docrec1);
	buf_append(&b, "tail", 4);
	assert_int_equal(docrec_decode((unsigned char *)b.data, b.len, 8, sig,
	    &d), sizeof docrec1);

	/* Short, another version, an id longer than the record, another K. */
	assert_int_equal(docrec_decode(docrec1, DOC_HEADER + 15, 8, sig, &d),
	    0);
	assert_int_equal(docrec_decode(docrec1, sizeof docrec1 - 1, 8, sig,
	    &d), 0);
	memcpy(bad, docrec1, sizeof bad);
	bad[0] = 1;
	assert_int_equal(docrec_decode(bad, sizeof bad, 8, sig, &d), 0);
	memcpy(bad, docrec1, sizeof bad);
	bad[7] = 0x80;
	assert_int_equal(docrec_decode(bad, sizeof bad, 8, sig, &d), 0);
	assert_int_equal(docrec_decode(docrec1, sizeof docrec1, 16, sig, &d),
	    0);

	/* The flags of an encoded record. */
	memcpy(bad, docrec1, sizeof bad);
	docrec_set_flags(bad, DOC_UNIQUE);
	assert_int_equal(docrec_decode(bad, sizeof bad, 8, sig, &d),
	    sizeof bad);
	assert_int_equal(d.flags, DOC_UNIQUE);
	buf_free(&b);
}

/*
 * Texts: a short one raw, exactly; a long one LZ4 with its header (the
 * compressed bytes are liblz4's, so they are decoded, not compared); the
 * known LZ4 bytes decode.
 */
static void
test_text(void **state)
{
	struct textenc	*te = textenc_create();
	struct buf	 b = { 0 }, out = { 0 };

	(void)state;
	textenc_encode(te, "short text", 10, 0, &b);
	assert_int_equal(b.len, sizeof text_raw);
	assert_memory_equal(b.data, text_raw, sizeof text_raw);
	assert_int_equal(text_decode((unsigned char *)b.data, b.len, &out), 0);
	assert_int_equal(out.len, 10);
	assert_memory_equal(out.data, "short text", 10);

	textenc_encode(te, LONG_TEXT, strlen(LONG_TEXT), DOC_BYTES, &b);
	assert_int_equal((unsigned char)b.data[0], 2);
	assert_int_equal((unsigned char)b.data[1], DOC_BYTES);
	assert_int_equal(get_le32((unsigned char *)b.data + 2),
	    strlen(LONG_TEXT));
	assert_int_equal(text_decode((unsigned char *)b.data, b.len, &out),
	    DOC_BYTES);
	assert_int_equal(out.len, strlen(LONG_TEXT));
	assert_memory_equal(out.data, LONG_TEXT, out.len);

	assert_int_equal(text_decode(text_lz4, sizeof text_lz4, &out),
	    DOC_BYTES);
	assert_int_equal(out.len, strlen(LONG_TEXT));
	assert_memory_equal(out.data, LONG_TEXT, out.len);
	textenc_free(te);
	buf_free(&b);
	buf_free(&out);
}

/* Time keys: LMDB's bytes for document 2 at 1700000001; time order. */
static void
test_timekey(void **state)
{
	static const unsigned char want[TIMEKEY_SIZE] = {
		0x80, 0x00, 0x00, 0x00, 0x65, 0x53, 0xf1, 0x01,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02
	};
	static const unsigned char neg[TIMEKEY_SIZE] = {
		0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09
	};
	unsigned char	 kb[TIMEKEY_SIZE], kc[TIMEKEY_SIZE];

	(void)state;
	timekey_put(kb, 1700000001, 2);
	assert_memory_equal(kb, want, sizeof want);
	assert_true(timekey_time(kb) == 1700000001);
	assert_true(timekey_doc(kb) == 2);
	timekey_put(kc, -1, 9);
	assert_memory_equal(kc, neg, sizeof neg);
	assert_true(timekey_time(kc) == -1);
	assert_true(memcmp(kc, kb, sizeof kb) < 0);	/* earlier first */
	timekey_put(kc, 0, 1);
	assert_true(memcmp(kc, kb, sizeof kb) < 0 && memcmp(neg, kc,
	    sizeof kc) < 0);
}

/*
 * Seals (index format 9): XXH3-64 of the value seeded with the database's
 * tag in the top byte and the key below, after the value, little-endian.
 * The first vector is the text of document 1 of tests/e2e/stored.bats.
 */
static void
test_seal(void **state)
{
	static const unsigned char text_seal[SEAL_SIZE] = {
		0xa8, 0x26, 0x3f, 0x6b, 0x0d, 0x29, 0xc2, 0x11
	};
	unsigned char	 v[32], run[20];
	size_t		 len, i;

	(void)state;
	memcpy(v, "\0\0short text", 12);
	seal_put(v, 12, SEAL_TEXTS, 1);
	assert_memory_equal(v + 12, text_seal, sizeof text_seal);
	assert_true(seal_of(v, 12, SEAL_TEXTS, 1) == 0x11c2290d6b3f26a8ULL);
	assert_true(seal_of("", 0, SEAL_L1, 0x2a) == 0xf2c4884ec336564eULL);
	for (i = 0; i < sizeof run; i++)
		run[i] = (unsigned char)(i * 7);
	assert_true(seal_of(run, sizeof run, SEAL_L1Y, 16383) ==
	    0x8e621a0b32108e58ULL);
	assert_true(seal_of(run, sizeof run, SEAL_L0, 123456789) ==
	    0x77586c310846cb34ULL);

	assert_int_equal(seal_open(v, 12 + SEAL_SIZE, SEAL_TEXTS, 1, &len), 0);
	assert_int_equal(len, 12);
	/* Under another key, in another database: no match. */
	assert_int_equal(seal_open(v, 12 + SEAL_SIZE, SEAL_TEXTS, 2, &len), -1);
	assert_int_equal(seal_open(v, 12 + SEAL_SIZE, SEAL_DOCS, 1, &len), -1);
	/* Any one bit flipped, in the value or the seal: no match. */
	for (i = 0; i < 8 * (12 + SEAL_SIZE); i++) {
		v[i / 8] ^= 1U << (i % 8);
		assert_int_equal(seal_open(v, 12 + SEAL_SIZE, SEAL_TEXTS, 1,
		    &len), -1);
		v[i / 8] ^= 1U << (i % 8);
	}
	/* Too short to have a seal; one byte cut off. */
	assert_int_equal(seal_open(v, SEAL_SIZE - 1, SEAL_TEXTS, 1, &len), -1);
	assert_int_equal(seal_open(v, 12 + SEAL_SIZE - 1, SEAL_TEXTS, 1, &len),
	    -1);
}

/* The parameters of the meta vectors. */
static void
meta_params(struct index_params *p)
{
	memset(p, 0, sizeof *p);
	p->perms = 128;
	p->bands = 16;
	p->rows = 8;
	p->shingle = 5;
	p->unit = UNIT_CHAR;
	p->norm = NORM_DEFAULT;
	p->seed = 42;
	p->texts = 1;
	p->verify = VERIFY_EXACT;
	p->threshold = 0.8;
}

/* The meta string of meta_params, format 3, as Redis holds it. */
static const char metatext1[] =
    "format=3\n"
    "scheme=2 xxh3-oph16-dens-v2\n"
    "perms=128\n"
    "bands=16\n"
    "rows=8\n"
    "shingle=5\n"
    "unit=char\n"
    "normalize=casefold,nfkc,space\n"
    "seed=42\n"
    "texts=1\n"
    "verify=0\n"
    "threshold=0.80000000000000004\n"
    "created=1795574717\n";

/*
 * The parameter records: meta_write's, in order (Redis's string), with
 * the extremes of the other values; read back by meta_read.
 */
static void
test_meta_write(void **state)
{
	struct index_params	 p, q;
	struct buf		 text = { 0 };
	struct metatext		 m = { NULL, 0, &text };
	char			*cause = NULL;

	(void)state;
	meta_params(&p);
	assert_int_equal(meta_write(&p, 3, 1795574717, metatext_put, &m), 0);
	assert_int_equal(text.len, strlen(metatext1));
	assert_memory_equal(text.data, metatext1, text.len);

	p.unit = UNIT_WORD;
	p.norm = NORM_ALL;
	p.seed = UINT64_MAX;
	p.texts = 0;
	p.verify = VERIFY_SIGNATURE;
	p.threshold = 0.55;
	text.len = 0;
	assert_int_equal(meta_write(&p, 4, 0, metatext_put, &m), 0);
	buf_append(&text, "", 1);
	assert_string_equal(text.data,
	    "format=4\n"
	    "scheme=2 xxh3-oph16-dens-v2\n"
	    "perms=128\n"
	    "bands=16\n"
	    "rows=8\n"
	    "shingle=5\n"
	    "unit=word\n"
	    "normalize=casefold,nfkc,space,punct\n"
	    "seed=18446744073709551615\n"
	    "texts=0\n"
	    "verify=1\n"
	    "threshold=0.55000000000000004\n"
	    "created=0\n");

	/* Read back: every stored parameter taken. */
	m.s = text.data;
	m.len = text.len - 1;
	memset(&q, 0, sizeof q);
	q.verify = VERIFY_NONE;
	assert_int_equal(meta_read(&q, 4, 0, "ix", metatext_get, &m, &cause),
	    0);
	assert_int_equal(q.perms, 128);
	assert_int_equal(q.bands, 16);
	assert_int_equal(q.rows, 8);
	assert_int_equal(q.shingle, 5);
	assert_int_equal(q.unit, UNIT_WORD);
	assert_int_equal(q.norm, NORM_ALL);
	assert_true(q.seed == UINT64_MAX);
	assert_int_equal(q.texts, 0);
	assert_int_equal(q.verify, VERIFY_SIGNATURE);
	assert_true(q.threshold == 0.55);
	buf_free(&text);
}

/* A meta string: metatext1 with the record key's value replaced. */
static void
meta_with(struct buf *out, const char *key, const char *value)
{
	const char	*p = metatext1, *nl;
	size_t		 kl = strlen(key);

	out->len = 0;
	for (; *p != '\0'; p = nl + 1) {
		nl = strchr(p, '\n');
		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			if (value == NULL)
				continue;	/* left out */
			buf_append(out, key, kl);
			buf_append(out, "=", 1);
			buf_append(out, value, strlen(value));
			buf_append(out, "\n", 1);
		} else
			buf_append(out, p, nl + 1 - p);
	}
}

/*
 * meta_read refuses, with INDEX_MISMATCH and a cause, stored values that
 * the checked parsers do not take, and a given parameter that differs.
 */
static void
test_meta_read(void **state)
{
	static const struct {
		const char	*key;
		const char	*value;
		int		 given;
	} bad[] = {
		{ "format", "4", 0 },		/* another format */
		{ "format", "3x", 0 },
		{ "format", NULL, 0 },
		{ "scheme", "1 xxh3-old", 0 },
		{ "scheme", "two", 0 },
		{ "scheme", "2", 0 },
		{ "perms", "1025", 0 },
		{ "perms", "12x", 0 },
		{ "perms", "-1", 0 },
		{ "perms", "", 0 },
		{ "perms", "128 x", 0 },
		{ "perms", " 128", 0 },
		{ "perms", NULL, 0 },
		{ "bands", "99999999999999999999", 0 },
		{ "rows", "0", 0 },		/* params_ok */
		{ "seed", "0x2a", 0 },
		{ "seed", "18446744073709551616", 0 },
		{ "normalize", "nonsense", 0 },
		{ "texts", "2", 0 },
		{ "texts", "yes", 0 },
		{ "texts", NULL, 0 },
		{ "verify", "3", 0 },
		{ "verify", "x", 0 },
		{ "threshold", "0.001", 0 },
		{ "threshold", "nan", 0 },
		{ "threshold", "0.8 ", 0 },
		{ "shingle", "5", IP_SHINGLE },	/* given 4, below */
	};
	struct index_params	 p;
	struct buf		 text = { 0 };
	struct metatext		 m = { NULL, 0, NULL };
	char			*cause = NULL;
	size_t			 i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		meta_with(&text, bad[i].key, bad[i].value);
		m.s = text.data;
		m.len = text.len;
		meta_params(&p);
		p.shingle = 4;
		if (meta_read(&p, 3, bad[i].given, "ix", metatext_get, &m,
		    &cause) != INDEX_MISMATCH)
			fail_msg("%s=%s was taken", bad[i].key,
			    bad[i].value != NULL ? bad[i].value : "(none)");
		assert_non_null(cause);
		free(cause);
		cause = NULL;
	}
	/* The unchanged string reads. */
	meta_with(&text, "format", "3");
	m.s = text.data;
	m.len = text.len;
	meta_params(&p);
	assert_int_equal(meta_read(&p, 3, IP_PERMS, "ix", metatext_get, &m,
	    &cause), 0);
	assert_int_equal(metatext_get(&m, "nothing", NULL, 0), INDEX_NOTFOUND);
	buf_free(&text);
}

/*
 * Redis keys and values: the bytes a Redis server held for the known
 * document "doc-1" (K 8, text "short text", namespace "kat").
 */
static void
test_redis(void **state)
{
	static const char want[] =
	    "K\x02\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00" "eS\xf1\x00"
	    "\xbe\n\xbe\n\xbe\n\x92\x1b\xde\x8c\x92\x1b\x92\x1b\xbe\n"
	    "doc-1\x00\x00short text";
	static const uint32_t sig[8] = { 0x0abe, 0x0abe, 0x0abe, 0x1b92,
	    0x8cde, 0x1b92, 0x1b92, 0x0abe };
	struct textenc	*te = textenc_create();
	struct buf	 k = { 0 }, v = { 0 }, enc = { 0 }, kept = { 0 };
	struct docinfo	 d;
	uint64_t	 group;
	uint32_t	 got[8];
	int		 st;

	(void)state;
	rkey_ns(&k, "kat", "meta");
	assert_int_equal(k.len, 10);
	assert_memory_equal(k.data, "{kat}:meta", 10);
	rkey_doc(&k, "kat", 1);
	assert_int_equal(k.len, 7);
	assert_memory_equal(k.data, "kat:d:1", 7);
	rkey_band(&k, "kat", 0x1af6ce156e3835d9ULL);
	assert_int_equal(k.len, 22);
	assert_memory_equal(k.data, "kat:b:1af6ce156e3835d9", 22);
	rkey_band(&k, "kat", 0x2a);
	assert_memory_equal(k.data, "kat:b:000000000000002a", 22);
	assert_true(rkey_docid("kat:d:18446744073709551615", 26, "kat") ==
	    UINT64_MAX);
	assert_true(rkey_docid("kat:d:12", 8, "kat") == 12);
	assert_true(rkey_docid("kat:d:12x", 9, "kat") == 0);
	assert_true(rkey_docid("kat:b:12", 8, "kat") == 0);
	assert_true(rkey_docid("kit:d:12", 8, "kat") == 0);
	assert_true(rkey_docid("kat:d:", 6, "kat") == 0);

	/* Written pending, then kept with its flags. */
	textenc_encode(te, "short text", 10, 0, &enc);
	rval_encode(&v, RVAL_PENDING, 8, sig, "doc-1", 5, 0, 1700000000,
	    enc.data, enc.len);
	assert_int_equal(v.len, sizeof want - 1);
	assert_int_equal(v.data[0], 'P');
	kept.len = 0;
	rval_keep(&kept, v.data, v.len, DOC_UNIQUE, 0);
	assert_int_equal(kept.len, sizeof want - 1);
	assert_memory_equal(kept.data, want, sizeof want - 1);
	assert_int_equal(rval_decode(want, sizeof want - 1, 8, got, &d, &st,
	    &group), 1 + DOC_HEADER + 16 + 5);
	assert_int_equal(st, RVAL_KEPT);
	assert_true(group == 0);
	assert_memory_equal(got, sig, sizeof sig);
	assert_int_equal(d.flags, DOC_UNIQUE);
	assert_int_equal(rval_decode("X", 1, 8, got, &d, &st, NULL), 0);
	assert_int_equal(rval_decode(want, 20, 8, got, &d, &st, NULL), 0);

	/*
	 * Kept in the group of document 0x0102030405060708 (layout 5):
	 * 'G', the number, then the record and text as before; flags -1
	 * leave the record's as they are.
	 */
	kept.len = 0;
	rval_keep(&kept, want, sizeof want - 1, -1, 0x0102030405060708ULL);
	assert_int_equal(kept.len, sizeof want - 1 + 8);
	assert_memory_equal(kept.data, "G\x01\x02\x03\x04\x05\x06\x07\x08", 9);
	assert_memory_equal(kept.data + 9, want + 1, sizeof want - 2);
	assert_int_equal(rval_decode(kept.data, kept.len, 8, got, &d, &st,
	    &group), 9 + DOC_HEADER + 16 + 5);
	assert_int_equal(st, RVAL_KEPT);
	assert_true(group == 0x0102030405060708ULL);
	assert_int_equal(d.flags, DOC_UNIQUE);
	assert_int_equal(d.idlen, 5);
	/* Cut inside the number, and a group 0: corrupt. */
	assert_int_equal(rval_decode(kept.data, 8, 8, got, &d, &st, NULL), 0);
	memset(kept.data + 1, 0, 8);
	assert_int_equal(rval_decode(kept.data, kept.len, 8, got, &d, &st,
	    NULL), 0);

	/* Without a text (--verify signature): the record alone. */
	v.len = 0;
	rval_encode(&v, RVAL_KEPT, 8, sig, "doc-1", 5, DOC_UNIQUE, 1700000000,
	    NULL, 0);
	assert_int_equal(v.len, 1 + DOC_HEADER + 16 + 5);
	assert_memory_equal(v.data, want, v.len);
	textenc_free(te);
	buf_free(&k);
	buf_free(&v);
	buf_free(&kept);
	buf_free(&enc);
}

/*
 * Undelivered ranges' members (layout 4): "FIRST:END:OWNER", and what is
 * not one.
 */
static void
test_rud(void **state)
{
	static const struct {
		const char	*m;
		int		 ok;
		uint64_t	 first, end, owner;
	} t[] = {
		{ "1:3:1", 1, 1, 3, 1 },
		{ "101:201:0", 1, 101, 201, 0 },
		{ "18446744073709551614:18446744073709551615:7", 1,
		    UINT64_MAX - 1, UINT64_MAX, 7 },
		{ "18446744073709551616:18446744073709551617:7", 0, 0, 0, 0 },
		{ "0:3:1", 0, 0, 0, 0 },	/* no document 0 */
		{ "3:3:1", 0, 0, 0, 0 },	/* empty */
		{ "4:3:1", 0, 0, 0, 0 },
		{ "1:3", 0, 0, 0, 0 },
		{ "1:3:", 0, 0, 0, 0 },
		{ "1:3:1:", 0, 0, 0, 0 },
		{ ":3:1", 0, 0, 0, 0 },
		{ "1:3:1x", 0, 0, 0, 0 },
		{ "1 :3:1", 0, 0, 0, 0 },
		{ "", 0, 0, 0, 0 },
	};
	struct buf	 b = { 0 };
	uint64_t	 first, end, owner;
	size_t		 i;

	(void)state;
	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		assert_int_equal(rud_decode(t[i].m, strlen(t[i].m), &first,
		    &end, &owner), t[i].ok ? 0 : -1);
		if (!t[i].ok)
			continue;
		assert_true(first == t[i].first && end == t[i].end &&
		    owner == t[i].owner);
		rud_encode(&b, first, end, owner);
		assert_int_equal(b.len, strlen(t[i].m));
		assert_memory_equal(b.data, t[i].m, b.len);
	}
	buf_free(&b);
}

/* What f (an open_memstream) holds, compared with want. */
static void
assert_stream(FILE *f, char **data, size_t *len, const char *want)
{
	assert_int_equal(fflush(f), 0);
	assert_int_equal(*len, strlen(want));
	assert_memory_equal(*data, want, *len);
}

/* The export format: the header and document lines, exactly. */
static void
test_export(void **state)
{
	struct index_params	 p;
	struct docinfo		 d;
	struct buf		 b = { 0 }, t = { 0 };
	uint32_t		 sig[8];
	FILE			*f;
	char			*data = NULL;
	size_t			 len = 0;

	(void)state;
	meta_params(&p);
	p.perms = 8;
	p.bands = 4;
	p.rows = 2;
	assert_non_null(f = open_memstream(&data, &len));
	assert_int_equal(export_header(f, &p), 0);
	assert_stream(f, &data, &len, "{\"mhfilter_export\":1,\"scheme\":"
	    "\"xxh3-oph16-dens-v2\",\"perms\":8,\"bands\":4,\"rows\":2,"
	    "\"shingle\":5,\"unit\":\"char\",\"normalize\":"
	    "\"casefold,nfkc,space\",\"texts\":true,\"verify\":0,"
	    "\"threshold\":0.80000000000000004,\"seed\":\"42\"}\n");
	fclose(f);
	free(data);

	docrec_encode(&b, 8, sig8, "doc-1", 5, DOC_UNIQUE, 1700000000);
	assert_true(docrec_decode((unsigned char *)b.data, b.len, 8, sig, &d) ==
	    b.len);
	buf_append(&t, "short text", 10);
	data = NULL;
	assert_non_null(f = open_memstream(&data, &len));
	assert_int_equal(export_doc(f, &d, 8, &t, 0), 0);
	assert_stream(f, &data, &len, "{\"id\":\"doc-1\",\"time\":1700000000,"
	    "\"flags\":1,\"sig\":\"010002003412feff0000ffff00010700\","
	    "\"text\":\"short text\"}\n");
	fclose(f);
	free(data);

	/* Not UTF-8: hex; no text when texts are not kept. */
	docrec_encode(&b, 8, sig8, "\xff\x01", 2, DOC_BYTES, 1700000000);
	assert_true(docrec_decode((unsigned char *)b.data, b.len, 8, sig, &d) ==
	    b.len);
	t.len = 0;
	buf_append(&t, "\xfe\xfftext", 6);
	data = NULL;
	assert_non_null(f = open_memstream(&data, &len));
	assert_int_equal(export_doc(f, &d, 8, &t, 0), 0);
	assert_int_equal(export_doc(f, &d, 8, NULL, 0), 0);
	/* A duplicate kept in the index: its group's position last. */
	assert_int_equal(export_doc(f, &d, 8, NULL, 3), 0);
	assert_stream(f, &data, &len, "{\"id_hex\":\"ff01\","
	    "\"time\":1700000000,\"flags\":2,\"sig\":"
	    "\"010002003412feff0000ffff00010700\","
	    "\"text_hex\":\"feff74657874\"}\n"
	    "{\"id_hex\":\"ff01\",\"time\":1700000000,\"flags\":2,\"sig\":"
	    "\"010002003412feff0000ffff00010700\"}\n"
	    "{\"id_hex\":\"ff01\",\"time\":1700000000,\"flags\":2,\"sig\":"
	    "\"010002003412feff0000ffff00010700\",\"group\":3}\n");
	fclose(f);
	free(data);
	buf_free(&b);
	buf_free(&t);
}

/* index_exit_status: the one mapping of index codes to exit statuses. */
static void
test_exit_status(void **state)
{
	(void)state;
	assert_int_equal(index_exit_status(0), EXIT_OK);
	assert_int_equal(index_exit_status(DOC_BYTES), EXIT_OK);
	assert_int_equal(index_exit_status(INDEX_ERROR), EXIT_ERROR);
	assert_int_equal(index_exit_status(INDEX_AGAIN), EXIT_ERROR);
	assert_int_equal(index_exit_status(INDEX_GONE), EXIT_ERROR);
	assert_int_equal(index_exit_status(INDEX_MISMATCH), EXIT_MISMATCH);
}

/*
 * The shingle count's 16-bit code: exact below 2048, then a range at most
 * 1/2048 of the count wide that holds it, 0 for not known; known answers,
 * every code's range against its neighbours', and the document record's
 * bytes 2-3.
 */
static void
test_shcount(void **state)
{
	static const struct {
		uint64_t	 n;
		unsigned	 code;
	} kat[] = {
		{ 0, 0 }, { 1, 1 }, { 2047, 2047 }, { 2048, 0x0800 },
		{ 2049, 0x0801 }, { 4095, 0x0fff }, { 4096, 0x1000 },
		{ 4097, 0x1000 }, { 4098, 0x1001 }, { 1000000, 0x4f42 },
		{ (uint64_t)1 << 41, 0xffff }, { UINT64_MAX, 0xffff },
	};
	struct buf	 b = { 0 };
	struct docinfo	 d;
	uint64_t	 lo, hi, prev_hi = 0, n;
	unsigned	 c, i;

	(void)state;
	for (i = 0; i < sizeof kat / sizeof kat[0]; i++) {
		assert_int_equal(shcount_encode(kat[i].n), kat[i].code);
		shcount_range(kat[i].code, &lo, &hi);
		if (kat[i].n != 0)
			assert_true(lo <= kat[i].n && kat[i].n <= hi);
	}
	shcount_range(0, &lo, &hi);
	assert_true(lo == 0 && hi == UINT64_MAX);
	/*
	 * The codes' ranges tile the counts, in order, each one narrow;
	 * 0xf800 to 0xfffe are never written.
	 */
	for (c = 1; c < 0xf800; c++) {
		shcount_range(c, &lo, &hi);
		assert_true(lo == prev_hi + 1);
		assert_true(hi >= lo && (hi - lo) * 2048 <= lo);
		assert_int_equal(shcount_encode(lo), c);
		assert_int_equal(shcount_encode(hi), c);
		prev_hi = hi;
	}
	shcount_range(0xffff, &lo, &hi);
	assert_true(lo == prev_hi + 1 && hi == UINT64_MAX);
	for (n = 1; n < 100000000; n = n * 3 + 1) {
		shcount_range(shcount_encode(n), &lo, &hi);
		assert_true(lo <= n && n <= hi);
	}

	/* In the record: bytes 2-3, little-endian; the flags apart. */
	docrec_encode(&b, 8, sig8, "doc-1", 5, DOC_UNIQUE |
	    DOC_SHINGLES(0x5e84), 1700000000);
	assert_int_equal(b.len, sizeof docrec1);
	assert_int_equal((unsigned char)b.data[1], DOC_UNIQUE);
	assert_int_equal((unsigned char)b.data[2], 0x84);
	assert_int_equal((unsigned char)b.data[3], 0x5e);
	assert_int_equal(docrec_decode((unsigned char *)b.data, b.len, 8,
	    NULL, &d), sizeof docrec1);
	assert_int_equal(d.flags, DOC_UNIQUE);
	assert_int_equal(d.shingles, 0x5e84);
	/* A record of before: not known. */
	assert_int_equal(docrec_decode(docrec1, sizeof docrec1, 8, NULL, &d),
	    sizeof docrec1);
	assert_int_equal(d.shingles, 0);
	free(b.data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_docrec),
		cmocka_unit_test(test_sig16),
		cmocka_unit_test(test_shcount),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_timekey),
		cmocka_unit_test(test_seal),
		cmocka_unit_test(test_meta_write),
		cmocka_unit_test(test_meta_read),
		cmocka_unit_test(test_redis),
		cmocka_unit_test(test_rud),
		cmocka_unit_test(test_export),
		cmocka_unit_test(test_exit_status),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
