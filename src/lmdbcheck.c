/*
 * The LMDB backend's --check, --info and --compact, and the walk of every
 * page that a maintenance mode makes before it writes (INDEX_WALK:
 * lm_walk, lm_pages).  Reading only, in a transaction of its own.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "mhfilter.h"
#include "lmdbint.h"

struct checking;

static void	check_undelivered(struct lmdb *, struct checking *);


/*
 * Is value v in an overflow page of the map (1), not on its leaf page or a
 * dirty page (0)?  A big value starts right after the 16-byte header of
 * its first page, where no value on a leaf page can (see lm_ovf_ok).
 */
int
lm_overflow(struct lmstore *db, const MDB_val *v)
{
	const unsigned char	*p = v->mv_data;
	size_t			 off;

	lm_findmap(db, p);
	if (db->map == NULL || db->map == MAP_NONE || db->psize == 0 ||
	    p < db->map)
		return (0);
	off = (size_t)(p - (const unsigned char *)db->map);
	return (off < db->mapsize && off % db->psize == 16);
}

/*
 * Is the overflow page header of value v sound (1), or is v on its leaf
 * page (1 too)?  Freeing a value's overflow pages (a deletion, a rewrite)
 * trusts the page count in that header: a damaged one corrupts LMDB's free
 * list and its heap.  LMDB 0.9's page layout (MDB_DATA_VERSION 1): a
 * 16-byte header, the page number, then the flags (P_OVERFLOW 0x04) and
 * the number of pages at bytes 10 and 12; a big value starts right after
 * it, where no value on a leaf page can.  Values of this transaction's
 * dirty pages are outside the map, and not checked.
 */
int
lm_ovf_ok(struct lmstore *db, const MDB_val *v)
{
	const unsigned char	*p = v->mv_data;
	uint64_t		 pgno;
	uint32_t		 pages;
	uint16_t		 flags;
	size_t			 off;

	/* (A dirty page may lie past the map, at any offset.) */
	if (!lm_overflow(db, v))
		return (1);
	off = (size_t)(p - (const unsigned char *)db->map);
	p -= 16;
	memcpy(&pgno, p, sizeof pgno);
	memcpy(&flags, p + 10, sizeof flags);
	memcpy(&pages, p + 12, sizeof pages);
	return (pgno == off / db->psize && (flags & 0x04) &&
	    pages == (16 + v->mv_size + db->psize - 1) / db->psize);
}

/*
 * The B-tree structure under the cursor walk (lm_walk, --check): LMDB
 * trusts what a page says of itself, and a deletion's rebalancing copies
 * nodes by the sizes it finds there, so a flipped bit in a node size or a
 * page's bounds, which a cursor reads past unharmed, corrupts LMDB's heap
 * in the write that follows (of 150 copies of a 20,000-document index with
 * 8 flipped bits, --expire aborted on 3).  So every page reachable from the
 * snapshot's roots is read with pread (no fault to catch) and checked
 * against LMDB 0.9's layout (MDB_DATA_VERSION 1, as lm_ovf_ok): its own
 * number, its kind, its bounds, each node inside it, each child and
 * overflow run inside the file and reached once, and the free list's page
 * numbers likewise.  A swapped or duplicated page fails its own number.
 */
#define PG_HDR		16	/* page header: number, pad, flags, bounds */
#define PG_BRANCH	0x01
#define PG_LEAF		0x02
#define PG_OVERFLOW	0x04
#define ND_HDR		8	/* node header: size, flags, key size */
#define ND_BIGDATA	0x01
#define ND_SUBDATA	0x02
#define DB_SIZE		48	/* MDB_db: md_depth at 6, md_root at 40 */
#define META_DBS	40	/* MDB_meta's mm_dbs in its page */
#define META_LAST	136	/* mm_last_pg */
#define META_TXNID	144	/* mm_txnid */
#define PG_INVALID	UINT64_MAX
#define PG_DEPTH_MAX	32

/* What lm_pages walks with, and where it found a problem. */
struct pagewalk {
	int		 fd;
	size_t		 psize;
	uint64_t	 last;		/* the snapshot's last page */
	unsigned char	*seen;		/* pages reached, a bit each */
	unsigned char	*page[PG_DEPTH_MAX];	/* one buffer per level */
	char		 why[128];
};

/* Read 16-bit and 64-bit little-endian numbers of a page. */
static uint16_t
pw_u16(const unsigned char *p)
{
	return ((uint16_t)(p[0] | p[1] << 8));
}

static uint64_t
pw_u64(const unsigned char *p)
{
	uint64_t	 v = 0;
	int		 i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return (v);
}

/* Mark pages [pgno, pgno + n) reached; -1 if one is past last or was. */
static int
pw_mark(struct pagewalk *pw, uint64_t pgno, uint64_t n, const char *what)
{
	uint64_t	 i;

	if (pgno < 2 || n == 0 || pgno > pw->last || n > pw->last - pgno + 1) {
		snprintf(pw->why, sizeof pw->why, "%s page %" PRIu64 " (%"
		    PRIu64 " pages) is outside the file's %" PRIu64, what,
		    pgno, n, pw->last + 1);
		return (-1);
	}
	for (i = pgno; i < pgno + n; i++) {
		if (pw->seen[i / 8] & (1U << (i % 8))) {
			snprintf(pw->why, sizeof pw->why, "page %" PRIu64
			    " is reached twice", i);
			return (-1);
		}
		pw->seen[i / 8] |= 1U << (i % 8);
	}
	return (0);
}

/* Read page pgno into buf: -1 if it cannot be or is not its own. */
static int
pw_read(struct pagewalk *pw, uint64_t pgno, unsigned char *buf)
{
	if (pread(pw->fd, buf, pw->psize, (off_t)(pgno * pw->psize)) !=
	    (ssize_t)pw->psize) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " cannot "
		    "be read", pgno);
		return (-1);
	}
	if (pw_u64(buf) != pgno) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " says it "
		    "is page %" PRIu64, pgno, pw_u64(buf));
		return (-1);
	}
	return (0);
}

/* The overflow run of pgno for a value of size bytes. */
static int
pw_overflow(struct pagewalk *pw, uint64_t pgno, uint64_t size,
    unsigned char *buf)
{
	uint64_t	 n = (PG_HDR + size + pw->psize - 1) / pw->psize;

	if (pw_mark(pw, pgno, n, "overflow") != 0 || pw_read(pw, pgno,
	    buf) != 0)
		return (-1);
	if ((pw_u16(buf + 10) & PG_OVERFLOW) == 0 ||
	    (pw_u16(buf + 12) | (uint64_t)pw_u16(buf + 14) << 16) != n) {
		snprintf(pw->why, sizeof pw->why, "overflow page %" PRIu64
		    " has a bad header", pgno);
		return (-1);
	}
	return (0);
}

static int	pw_tree(struct pagewalk *, uint64_t, unsigned, unsigned,
		    int);

/* Check the free list's value v: a count, then that many page numbers. */
static int
pw_freelist(struct pagewalk *pw, const unsigned char *v, uint64_t size,
    uint64_t pgno)
{
	uint64_t	 n, i, *ids;
	int		 rc = 0;

	if (size < 8 || size % 8 != 0) {
		snprintf(pw->why, sizeof pw->why, "the free list's page %"
		    PRIu64 " has a value of %" PRIu64 " bytes", pgno, size);
		return (-1);
	}
	if (v == NULL) {	/* in an overflow run after pgno's header */
		ids = xmalloc(size);
		if (pread(pw->fd, ids, size, (off_t)(pgno * pw->psize +
		    PG_HDR)) != (ssize_t)size) {
			free(ids);
			snprintf(pw->why, sizeof pw->why, "overflow page %"
			    PRIu64 " cannot be read", pgno);
			return (-1);
		}
		v = (const unsigned char *)ids;
	} else
		ids = NULL;
	n = pw_u64(v);
	if (n != size / 8 - 1) {
		snprintf(pw->why, sizeof pw->why, "the free list's page %"
		    PRIu64 " counts %" PRIu64 " pages in %" PRIu64 " bytes",
		    pgno, n, size);
		rc = -1;
	}
	for (i = 1; rc == 0 && i <= n; i++)
		rc = pw_mark(pw, pw_u64(v + 8 * i), 1, "a free");
	free(ids);
	return (rc);
}

/*
 * Check the tree of page pgno, depth levels deep (a leaf is 1); level
 * picks the buffer.  kind: 0 a database's, 1 the main database's (its
 * leaves hold the others), 2 the free list's (its values are page lists).
 */
static int
pw_tree(struct pagewalk *pw, uint64_t pgno, unsigned depth, unsigned level,
    int kind)
{
	unsigned char	*p, *node;
	uint64_t	 size, child, root, used = 0;
	unsigned	 lower, upper, nkeys, i, off, ksize, flags, cdepth;
	int		 leaf;

	lm_beat();
	if (level >= PG_DEPTH_MAX || depth == 0) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " is too "
		    "deep", pgno);
		return (-1);
	}
	if (pw->page[level] == NULL)
		pw->page[level] = xmalloc(pw->psize);
	p = pw->page[level];
	if (pw_mark(pw, pgno, 1, "a tree") != 0 || pw_read(pw, pgno, p) != 0)
		return (-1);
	flags = pw_u16(p + 10);
	lower = pw_u16(p + 12);
	upper = pw_u16(p + 14);
	leaf = (depth == 1);
	if ((flags & (PG_BRANCH | PG_LEAF | PG_OVERFLOW)) !=
	    (leaf ? PG_LEAF : PG_BRANCH) || lower < PG_HDR || lower % 2 != 0 ||
	    upper < lower || upper > pw->psize || (!leaf && lower == PG_HDR)) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " has a bad "
		    "header", pgno);
		return (-1);
	}
	nkeys = (lower - PG_HDR) / 2;
	for (i = 0; i < nkeys; i++) {
		off = pw_u16(p + PG_HDR + 2 * i);
		if (off < upper || off > pw->psize - ND_HDR)
			goto bad;
		node = p + off;
		ksize = pw_u16(node + 6);
		size = pw_u16(node) | (uint64_t)pw_u16(node + 2) << 16;
		if (off + ND_HDR + ksize > pw->psize)
			goto bad;
		flags = pw_u16(node + 4);
		used += (ND_HDR + ksize + (!leaf ? 0 : (flags & ND_BIGDATA) ?
		    8 : size) + 1) & ~(uint64_t)1;
		if (!leaf) {
			child = size | (uint64_t)pw_u16(node + 4) << 32;
			if (pw_tree(pw, child, depth - 1, level + 1, kind) != 0)
				return (-1);
			continue;
		}
		/* (No database of ours has duplicates: no other flag.) */
		if ((flags & ~(ND_BIGDATA | (kind == 1 ? ND_SUBDATA : 0))) != 0)
			goto bad;
		if (flags & ND_BIGDATA) {
			if (off + ND_HDR + ksize + 8 > pw->psize ||
			    (flags & ND_SUBDATA))
				goto bad;
			child = pw_u64(node + ND_HDR + ksize);
			if (pw_overflow(pw, child, size, pw->page[0]) != 0 ||
			    (kind == 2 && pw_freelist(pw, NULL, size,
			    child) != 0))
				return (-1);
			continue;
		}
		if (off + ND_HDR + ksize + size > pw->psize)
			goto bad;
		if (kind == 2 && pw_freelist(pw, node + ND_HDR + ksize, size,
		    pgno) != 0)
			return (-1);
		if (kind == 1 && (flags & ND_SUBDATA)) {
			if (size != DB_SIZE)
				goto bad;
			cdepth = pw_u16(node + ND_HDR + ksize + 6);
			root = pw_u64(node + ND_HDR + ksize + 40);
			if (root != PG_INVALID && pw_tree(pw, root, cdepth,
			    level + 1, 0) != 0)
				return (-1);
		}
	}
	/* LMDB keeps a page's nodes packed from upper to its end. */
	if (used != pw->psize - upper) {
		snprintf(pw->why, sizeof pw->why, "page %" PRIu64 "'s nodes "
		    "fill %" PRIu64 " bytes of %u", pgno, used,
		    (unsigned)pw->psize - upper);
		return (-1);
	}
	return (0);
bad:
	snprintf(pw->why, sizeof pw->why, "page %" PRIu64 " has a bad node "
	    "%u", pgno, i);
	return (-1);
}

/*
 * Start a walk of the snapshot of transaction txnid (0: the newest) of
 * ix's data file, read with pread: its meta page into meta (returned, or
 * NULL with why said in pw->why), pw set up for pw_tree.  Past the file's
 * end there may be free pages (lm_size_check): a page of a tree there
 * cannot be read (pw_read).  pw_close frees it, whatever this returned.
 */
static unsigned char *
pw_open(struct lmdb *ix, uint64_t txnid, struct pagewalk *pw,
    unsigned char meta[2][256])
{
	MDB_envinfo	 info;
	MDB_stat	 ms;
	unsigned char	*m;
	unsigned	 i;

	memset(pw, 0, sizeof *pw);
	if (mdb_env_stat(ix->db.env, &ms) != 0 ||
	    mdb_env_info(ix->db.env, &info) != 0 ||
	    mdb_env_get_fd(ix->db.env, &pw->fd) != 0) {
		snprintf(pw->why, sizeof pw->why, "its data file cannot be "
		    "read");
		return (NULL);
	}
	pw->psize = ms.ms_psize;
	for (i = 0; i < 2; i++) {
		if (pread(pw->fd, meta[i], 256, (off_t)(i * pw->psize)) !=
		    256) {
			snprintf(pw->why, sizeof pw->why, "meta page %u cannot "
			    "be read", i);
			return (NULL);
		}
	}
	/* The snapshot's meta page: its transaction's, else the newer. */
	if (txnid != 0 && pw_u64(meta[0] + META_TXNID) == txnid)
		m = meta[0];
	else if (txnid != 0 && pw_u64(meta[1] + META_TXNID) == txnid)
		m = meta[1];
	else
		m = meta[pw_u64(meta[1] + META_TXNID) >
		    pw_u64(meta[0] + META_TXNID)];
	pw->last = pw_u64(m + META_LAST);
	if (pw->last < 1 || pw->last >= info.me_mapsize / pw->psize) {
		snprintf(pw->why, sizeof pw->why, "meta page %d says its last "
		    "page is %" PRIu64 ", of a map of %" PRIu64 " pages",
		    m != meta[0], pw->last,
		    (uint64_t)info.me_mapsize / pw->psize);
		return (NULL);
	}
	pw->seen = xcalloc(pw->last / 8 + 1, 1);
	pw->page[0] = xmalloc(pw->psize);
	return (m);
}

/* Walk database i (0 the free list, 1 the main one) of meta page m. */
static int
pw_db(struct pagewalk *pw, const unsigned char *m, unsigned i)
{
	uint64_t	 root = pw_u64(m + META_DBS + i * DB_SIZE + 40);

	if (root == PG_INVALID)
		return (0);
	return (pw_tree(pw, root, pw_u16(m + META_DBS + i * DB_SIZE + 6), 1,
	    i == 0 ? 2 : 1));
}

/* Free what pw_open made. */
static void
pw_close(struct pagewalk *pw)
{
	unsigned	 i;

	for (i = 0; i < PG_DEPTH_MAX; i++)
		free(pw->page[i]);
	free(pw->seen);
}

/*
 * Check the structure of every page of txn's snapshot (above).  0, or -1
 * with where in why (of whysize bytes).
 */
static int
lm_pages(struct lmdb *ix, MDB_txn *txn, char *why, size_t whysize)
{
	struct pagewalk	 pw;
	unsigned char	 meta[2][256], *m;
	int		 rc = -1;

	/* The free list's tree, then the main one's, with the others. */
	if ((m = pw_open(ix, mdb_txn_id(txn), &pw, meta)) != NULL &&
	    pw_db(&pw, m, 0) == 0 && pw_db(&pw, m, 1) == 0)
		rc = 0;
	else
		snprintf(why, whysize, "%s", pw.why);
	pw_close(&pw);
	return (rc);
}

/*
 * Are pages [first, last] all free in the newest snapshot, last its last
 * page?  Its free list's tree is read as lm_pages reads it, with pread,
 * not through the map: the file may end before those pages
 * (lm_size_check), and a page of the list past its end, which would raise
 * SIGBUS through the map, is a read that fails.  1, or 0.
 */
int
lm_tail_free(struct lmdb *ix, uint64_t first, uint64_t last)
{
	struct pagewalk	 pw;
	unsigned char	 meta[2][256], *m;
	uint64_t	 i = first;

	if ((m = pw_open(ix, 0, &pw, meta)) != NULL && pw.last == last &&
	    first <= last && pw_db(&pw, m, 0) == 0) {
		while (i <= last && (pw.seen[i / 8] & (1U << (i % 8))))
			i++;
	}
	pw_close(&pw);
	return (m != NULL && first <= last && i > last);
}

/*
 * Read every page of the index once (INDEX_WALK, before a maintenance mode
 * writes): each database to its end, its keys in order, and the first and
 * last byte and the overflow page header (lm_ovf_ok) of each value.  LMDB
 * reads a damaged page through the fault guard, but rewriting one (a
 * deletion's rebalancing) can corrupt its heap, which aborts the process:
 * of 120 damaged copies, --expire aborted on 36 without this walk.  0, or
 * INDEX_ERROR saying damaged.
 */
int
lm_walk(struct lmdb *ix, char **cause)
{
	MDB_dbi		 dbis[] = { 0, ix->meta, ix->docs, ix->texts, ix->times,
			    ix->db.l0, ix->db.l1, ix->db.l1y };
	MDB_txn		*txn;
	MDB_cursor	*cur;
	MDB_val		 k, v, prev;
	volatile unsigned char sink = 0;
	char		 why[128];
	size_t		 i;
	int		 rc;

	/* (A read transaction: LMDB walks its free list in no other.) */
	if ((rc = mdb_txn_begin(ix->db.env, NULL, MDB_RDONLY, &txn)) != 0)
		return (lm_fail(&ix->db, rc, "walking the index", cause));
	if (lm_pages(ix, txn, why, sizeof why) != 0) {
		mdb_txn_abort(txn);
		xasprintf(cause, "index %s is damaged: %s (run --check; see "
		    "mhfilter(1), Damaged indexes)", ix->base.path, why);
		return (INDEX_ERROR);
	}
	for (i = 0; i < sizeof dbis / sizeof dbis[0] - !ix->db.have_l1y; i++) {
		if ((rc = mdb_cursor_open(txn, dbis[i], &cur)) != 0)
			break;
		prev.mv_data = NULL;
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			lm_beat();
			/* (A leaf of random bytes: its keys are in no order.) */
			if (!lm_ovf_ok(&ix->db, &v) || (prev.mv_data != NULL &&
			    mdb_cmp(txn, dbis[i], &prev, &k) >= 0)) {
				rc = MDB_CORRUPTED;
				break;
			}
			prev = k;
			if (v.mv_size > 0)
				sink ^= ((unsigned char *)v.mv_data)[0] ^
				    ((unsigned char *)v.mv_data)[v.mv_size - 1];
		}
		mdb_cursor_close(cur);
		if (rc != MDB_NOTFOUND)
			break;
		rc = 0;
	}
	mdb_txn_abort(txn);
	(void)sink;
	if (rc != 0) {
		xasprintf(cause, "index %s is damaged: %s (run --check; see "
		    "mhfilter(1), Damaged indexes)", ix->base.path,
		    mdb_strerror(rc));
		return (INDEX_ERROR);
	}
	ix->walked = 1;
	return (0);
}

/* Bytes of the pages a database uses. */
static uint64_t
dbi_bytes(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat	 st;

	if (mdb_stat(txn, dbi, &st) != 0)
		return (0);
	return ((st.ms_branch_pages + st.ms_leaf_pages +
	    st.ms_overflow_pages) * (uint64_t)st.ms_psize);
}

/* The first or last document time, or 0. */
static int64_t
edge_time(MDB_txn *txn, MDB_dbi dbi, MDB_cursor_op op)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int64_t		 t = 0;

	if (mdb_cursor_open(txn, dbi, &cur) != 0)
		return (0);
	if (mdb_cursor_get(cur, &k, &v, op) == 0 && k.mv_size == TIMEKEY_SIZE)
		t = timekey_time(k.mv_data);
	mdb_cursor_close(cur);
	return (t);
}

/* What --info prints. */
int
lmdb_info(struct index *base, struct index_info *in, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	MDB_envinfo	 info;
	MDB_stat	 st;
	char		 v[32];
	uint64_t	 u;
	int		 rc;

	memset(in, 0, sizeof *in);
	in->p = ix->base.p;
	in->format = ix->db.format;
	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->db.txn)) != 0) {
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "info", cause));
	}
	if (mdb_stat(ix->db.txn, ix->docs, &st) == 0)
		in->docs = st.ms_entries;
	if (lm_meta_u64(ix, "next_doc", &in->next_doc, cause) != 0 ||
	    lm_meta_u64(ix, "l1_entries", &u, cause) != 0 ||
	    lsm_entries(&ix->lsm, ix->db.txn, &in->band_entries, cause) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (INDEX_ERROR);
	}
	in->band_entries += u;
	if (lm_meta_get(ix, "created", v, sizeof v) == 0 &&
	    meta_number(v, INT64_MAX, &u) == 0)
		in->created = (int64_t)u;
	in->oldest = edge_time(ix->db.txn, ix->times, MDB_FIRST);
	in->newest = edge_time(ix->db.txn, ix->times, MDB_LAST);
	in->bands_bytes = dbi_bytes(ix->db.txn, ix->db.l1) +
	    dbi_bytes(ix->db.txn, ix->db.l0) +
	    (ix->db.have_l1y ? dbi_bytes(ix->db.txn, ix->db.l1y) : 0);
	in->docs_bytes = dbi_bytes(ix->db.txn, ix->docs) +
	    dbi_bytes(ix->db.txn, ix->times);
	in->texts_bytes = dbi_bytes(ix->db.txn, ix->texts);
	if ((rc = mdb_env_stat(ix->db.env, &st)) == 0 &&
	    (rc = mdb_env_info(ix->db.env, &info)) == 0)
		in->size = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
	mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	if (rc != 0)
		return (lm_fail(&ix->db, rc, "info", cause));
	lmdb_exists(ix->base.path, &in->file_size);
	return (0);
}

/* Report a problem found by index_check (the first 100 in full). */
static void
problem(FILE *f, uint64_t *problems, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
problem(FILE *f, uint64_t *problems, const char *fmt, ...)
{
	va_list	 ap;

	if (++*problems > 100)
		return;
	fputs("problem: ", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* What lmdb_check counts and reports to. */
struct checking {
	FILE		*f;
	uint64_t	*problems;
	uint64_t	 docs;
	uint64_t	 l1;		/* entries in l1 runs */
	uint64_t	*keys;		/* scratch: a document's band keys */
	struct u64vec	 found;		/* scratch: a bucket */
	struct buf	 text;		/* scratch */
	int		 nobands;	/* l0 unread: bands not checked */
	struct u64vec	 hashes;	/* scratch: the text's shingles */
	struct u64vec	 table;		/* scratch: shingle_distinct's */
};

/*
 * Document docid's shingle count, as its record keeps it (code), against
 * its text in ck->text (bytes: not UTF-8): a count out of the code's
 * range would let containment's bounds pass over a match.
 */
static void
check_shingles(struct lmdb *ix, struct checking *ck, uint64_t docid,
    int bytes, unsigned code)
{
	struct shingler	 sh;
	uint64_t	 lo, hi, n;

	sh.unit = ix->base.p.unit;
	sh.n = ix->base.p.shingle;
	sh.seed = ix->base.p.seed;
	shingle_hash(&sh, ck->text.data, ck->text.len, bytes, &ck->hashes);
	n = shingle_distinct(ck->hashes.v, ck->hashes.n, &ck->table);
	shcount_range(code, &lo, &hi);
	if (n < lo || n > hi)
		problem(ck->f, ck->problems, "document %" PRIu64 ": its "
		    "record counts %" PRIu64 " to %" PRIu64 " distinct "
		    "shingles, its text %" PRIu64, docid, lo, hi, n);
}

/*
 * One document of lmdb_check: its record parses, it has its time and (when
 * texts are kept) its text, whose distinct shingles are as many as the
 * record says (when it says: containment's), and it is under each of its
 * band keys, recomputed from its stored signature.
 */
static void
check_doc(struct lmdb *ix, struct checking *ck, const MDB_val *k,
    const MDB_val *v)
{
	MDB_val		 k2, v2;
	struct docinfo	 d;
	unsigned char	 tk[TIMEKEY_SIZE];
	uint64_t	 docid;
	char		*cause = NULL;
	size_t		 i;
	unsigned	 b, j;
	int		 ok, rc;

	ck->docs++;
	if (k->mv_size != 8) {
		problem(ck->f, ck->problems, "a docs key is %zu bytes",
		    k->mv_size);
		return;
	}
	docid = get_be64(k->mv_data);
	if (docid == 0 || docid >= ix->next_doc)
		problem(ck->f, ck->problems, "document %" PRIu64 " is not "
		    "below next_doc %" PRIu64, docid, ix->next_doc);
	if ((rc = lm_docrec(ix, docid, v, ix->sig, &d)) != 0) {
		problem(ck->f, ck->problems, "document %" PRIu64 ": record "
		    "%s", docid, rc == -2 ? "fails its checksum" :
		    "is corrupt");
		return;
	}
	timekey_put(tk, d.time, docid);
	k2.mv_data = tk;
	k2.mv_size = sizeof tk;
	if ((rc = mdb_get(ix->db.txn, ix->times, &k2, &v2)) == MDB_NOTFOUND)
		problem(ck->f, ck->problems, "document %" PRIu64 " has no "
		    "times entry", docid);
	else if (rc != 0)
		problem(ck->f, ck->problems, "document %" PRIu64 ": reading "
		    "its times entry: %s", docid, mdb_strerror(rc));
	if (ix->base.p.texts && (rc = lmdb_text(&ix->base, docid, &ck->text,
	    &cause)) < 0) {
		problem(ck->f, ck->problems, "document %" PRIu64 ": %s",
		    docid, cause);
		free(cause);
	} else if (ix->base.p.texts && d.shingles != 0)
		check_shingles(ix, ck, docid, rc, d.shingles);
	/*
	 * The bands of the stored signature; under containment, the parts'
	 * bands, made from the text, are not checked.
	 */
	if (ck->nobands)
		return;
	b = ix->base.p.bands / lsh_parts(ix->base.p.measure);
	lsh_keys(ix->sig, b, ix->base.p.rows, ix->base.p.seed, ck->keys);
	for (j = 0; j < b; j++) {
		ck->found.n = 0;
		if ((rc = lsm_bucket(&ix->lsm, ck->keys[j], &ck->found,
		    SIZE_MAX)) != 0) {
			problem(ck->f, ck->problems, "document %" PRIu64 ": "
			    "band %u: %s", docid, j, mdb_strerror(rc));
			break;
		}
		for (i = 0, ok = 0; i < ck->found.n && !ok; i++)
			ok = ck->found.v[i] == docid;
		if (!ok)
			problem(ck->f, ck->problems, "document %" PRIu64 " is "
			    "missing from band %u", docid, j);
	}
}

/*
 * After a walk of a database (what) that ended with rc: a problem unless
 * it went to the end.  LMDB says MDB_CORRUPTED or MDB_PAGE_NOTFOUND of
 * some damaged pages.
 */
static void
check_walked(struct checking *ck, const char *what, int rc)
{
	if (rc != MDB_NOTFOUND)
		problem(ck->f, ck->problems, "reading %s: %s", what,
		    mdb_strerror(rc));
}

/*
 * The entries of a database keyed by document (texts: 8-byte keys) or
 * by time key (times) whose document is not there.
 */
static void
check_orphans(struct lmdb *ix, struct checking *ck, MDB_dbi dbi,
    size_t keysize, const char *what)
{
	MDB_cursor	*cur;
	MDB_val		 k, v, v2;
	uint64_t	 docid = 0;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, dbi, &cur)) != 0) {
		check_walked(ck, what, rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size == keysize)
			docid = keysize == 8 ? get_be64(k.mv_data) :
			    timekey_doc(k.mv_data);
		if (k.mv_size != keysize || lm_get(ix, ix->docs, docid,
		    &v2) != 0)
			problem(ck->f, ck->problems, "%s has no document",
			    what);
	}
	mdb_cursor_close(cur);
	check_walked(ck, what, rc);
}

static void	check_runs(struct lmdb *, struct checking *, MDB_dbi,
		    const char *);

/*
 * The l1 runs, old and young: in their chunks, sorted, of documents below
 * next_doc, as many entries as meta says.
 */
static void
check_l1(struct lmdb *ix, struct checking *ck)
{
	struct lsmstate	 at, tx;

	check_runs(ix, ck, ix->db.l1, "l1");
	if (ix->db.have_l1y)
		check_runs(ix, ck, ix->db.l1y, "l1y");
	lsm_position(&ix->lsm, &at, &tx);
	if (ck->l1 != at.l1_entries)
		problem(ck->f, ck->problems, "l1 holds %" PRIu64 " entries; "
		    "meta says %" PRIu64, ck->l1, at.l1_entries);
}

/* check_l1 of one database, l1 or l1y (what). */
static void
check_runs(struct lmdb *ix, struct checking *ck, MDB_dbi dbi,
    const char *what)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	const unsigned char	*p, *pad;
	struct bentry		 e, prev;
	size_t			 i, n;
	unsigned		 c;
	int			 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, dbi, &cur)) != 0) {
		check_walked(ck, what, rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		p = k.mv_data;
		if (k.mv_size != 4) {
			problem(ck->f, ck->problems, "an %s key is malformed",
			    what);
			continue;
		}
		c = (unsigned)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
		if (c >= BAND_CHUNKS) {
			problem(ck->f, ck->problems, "%s holds chunk %u", what,
			    c);
			continue;
		}
		if (!lm_ovf_ok(&ix->db, &v)) {
			problem(ck->f, ck->problems, "%s chunk %u: its "
			    "overflow page header is damaged", what, c);
			continue;
		}
		if (lm_unseal(&ix->db, dbi == ix->db.l1 ? SEAL_L1 : SEAL_L1Y,
		    c, &v, 1) != 0) {
			problem(ck->f, ck->problems, "%s chunk %u fails its "
			    "checksum", what, c);
			continue;
		}
		if (lm_run_count(&ix->db, dbi, v.mv_size, &n) != 0) {
			problem(ck->f, ck->problems, "%s chunk %u is "
			    "malformed", what, c);
			continue;
		}
		ck->l1 += n;
		for (pad = (const unsigned char *)v.mv_data + n * L1E_SIZE;
		    pad < (const unsigned char *)v.mv_data + v.mv_size; pad++)
			if (*pad != 0) {
				problem(ck->f, ck->problems, "%s chunk %u: "
				    "its padding is not zeros", what, c);
				break;
			}
		for (i = 0; i < n; i++) {
			l1_get(v.mv_data, i, c, &e);
			if (i > 0 && bentry_cmp(&prev, &e) >= 0)
				problem(ck->f, ck->problems, "%s chunk %u is "
				    "not sorted at entry %zu", what, c, i);
			if (e.docid == 0 || e.docid >= ix->next_doc)
				problem(ck->f, ck->problems, "%s chunk %u: "
				    "document %" PRIu64 " is not below "
				    "next_doc", what, c, e.docid);
			prev = e;
		}
	}
	mdb_cursor_close(cur);
	check_walked(ck, what, rc);
}

/*
 * Do the directory and filter of the filtered l0 record rec of layout l,
 * written at the sweep position written and in order, say what its
 * entries do (1)?  They are written again from its entries (l0f_write)
 * and compared.
 */
static int
check_l0_filter(const unsigned char *rec, const struct l0layout *l,
    uint64_t written)
{
	struct bentry	*e;
	unsigned char	*again;
	size_t		*count, i;
	int		 same;

	count = xcalloc(BAND_CHUNKS + 1, sizeof *count);
	e = xreallocarray(NULL, l->n, sizeof *e);
	for (i = 0; i < l->n; i++)
		run_get(rec + l->entries, i, &e[i]);
	again = xmalloc(l->size);
	l0f_write(e, written, count, l, again);
	same = memcmp(again, rec, l->entries) == 0;
	free(count);
	free(again);
	free(e);
	return (same);
}

/* The memtable's log: well formed, below l0_next and the sweep. */
static void
check_l0(struct lmdb *ix, struct checking *ck, uint64_t sweep,
    uint64_t l0_next)
{
	MDB_cursor		*cur;
	MDB_val			 k, v;
	const unsigned char	*e;
	struct l0layout		 l;
	uint64_t		 bad = 0, h;
	int			 rc, sorted;

	if ((rc = mdb_cursor_open(ix->db.txn, ix->db.l0, &cur)) != 0) {
		check_walked(ck, "l0", rc);
		return;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		if (!lm_ovf_ok(&ix->db, &v))
			continue;	/* (check_walked) */
		if (k.mv_size == 8 && lm_unseal(&ix->db, SEAL_L0,
		    get_be64(k.mv_data), &v, 1) != 0) {
			problem(ck->f, ck->problems, "l0 record %" PRIu64
			    " fails its checksum", get_be64(k.mv_data));
			continue;
		}
		if (k.mv_size != 8 || get_be64(k.mv_data) >= l0_next ||
		    l0_record(&ix->lsm, v.mv_data, v.mv_size, &l, &h,
		    &sorted) != 0 || h > sweep) {
			problem(ck->f, ck->problems, "an l0 record is "
			    "malformed");
			continue;
		}
		e = (const unsigned char *)v.mv_data + l.entries;
		bad += l0_bad_entries(e, l.n, ix->next_doc);
		if (sorted && !l0_in_order(e, l.n, (unsigned)(h % BAND_CHUNKS)))
			problem(ck->f, ck->problems, "l0 record %" PRIu64 " is "
			    "out of order", get_be64(k.mv_data));
		else if (l.nb > 0 && !check_l0_filter(v.mv_data, &l, h))
			problem(ck->f, ck->problems, "l0 record %" PRIu64 ": "
			    "its directory or filter does not match its "
			    "entries", get_be64(k.mv_data));
	}
	mdb_cursor_close(cur);
	check_walked(ck, "l0", rc);
	if (bad > 0)
		problem(ck->f, ck->problems, "l0 holds %" PRIu64 " entries "
		    "not of a document below next_doc", bad);
}

/* LMDB's free list (database 0): it can be read to its end. */
static void
check_free(struct lmdb *ix, struct checking *ck)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, 0, &cur)) == 0) {
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			lm_beat();
		mdb_cursor_close(cur);
	}
	check_walked(ck, "the free list", rc);
}

/*
 * Check the index's internal consistency, in one read transaction: every
 * document (check_doc); every time and text belongs to a document; the
 * band runs are sorted, in their chunks, and their count matches; the l0
 * log is well formed; LMDB's free list reads to its end.  Writes
 * "problem: ..." lines and a summary to f.
 */
int
lmdb_check(struct index *base, FILE *f, uint64_t *problems, char **cause)
{
	struct lmdb		*ix = (struct lmdb *)base;
	struct checking		 ck;
	MDB_cursor		*cur;
	MDB_val			 k, v;
	uint64_t		 sweep, l0_next;
	char			 why[128], *held = NULL;
	int			 rc;

	*problems = 0;
	memset(&ck, 0, sizeof ck);
	ck.f = f;
	ck.problems = problems;
	if ((rc = lm_txn(ix, MDB_RDONLY, &ix->db.txn)) != 0) {
		ix->db.txn = NULL;
		return (lm_fail(&ix->db, rc, "check", cause));
	}
	lsm_unload(&ix->lsm);	/* the memtable: from this snapshot */
	if (lm_meta_u64(ix, "next_doc", &ix->next_doc, cause) != 0 ||
	    lm_seal_load(ix, cause) != 0 || lm_lsm_load(ix, cause) != 0 ||
	    lm_meta_u64(ix, "sweep", &sweep, cause) != 0 ||
	    lm_meta_u64(ix, "l0_next", &l0_next, cause) != 0) {
		mdb_txn_abort(ix->db.txn);
		ix->db.txn = NULL;
		return (INDEX_ERROR);
	}
	ck.keys = xcalloc(ix->base.p.bands, sizeof *ck.keys);
	/*
	 * The log first: what is wrong with it stops its reading back into
	 * the memtable, which the documents' bands are checked against.
	 */
	check_l0(ix, &ck, sweep, l0_next);
	if (lsm_hold(&ix->lsm, 0, 1, &held) != 0) {
		problem(f, problems, "the band entries of l0 cannot be read "
		    "back (%s): the documents' bands are not checked", held);
		free(held);
		ck.nobands = 1;
	}

	if ((rc = mdb_cursor_open(ix->db.txn, ix->docs, &cur)) == 0) {
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
		    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			lm_beat();
			check_doc(ix, &ck, &k, &v);
		}
		mdb_cursor_close(cur);
	}
	check_walked(&ck, "docs", rc);
	check_orphans(ix, &ck, ix->times, TIMEKEY_SIZE, "a times entry");
	check_orphans(ix, &ck, ix->texts, 8, "a text");
	check_l1(ix, &ck);
	check_undelivered(ix, &ck);
	check_free(ix, &ck);
	if (lm_pages(ix, ix->db.txn, why, sizeof why) != 0)
		problem(f, problems, "LMDB's pages: %s", why);

	mdb_txn_abort(ix->db.txn);
	ix->db.txn = NULL;
	lsm_unload(&ix->lsm);
	free(ck.keys);
	u64vec_free(&ck.found);
	buf_free(&ck.text);
	u64vec_free(&ck.hashes);
	u64vec_free(&ck.table);
	if (*problems > 100)
		fprintf(f, "problems not shown: %" PRIu64 "\n",
		    *problems - 100);
	fprintf(f, "documents: %" PRIu64 "\n", ck.docs);
	fprintf(f, "band_entries: %" PRIu64 "\n",
	    ck.l1 + lsm_held_entries(&ix->lsm));
	fprintf(f, "problems: %" PRIu64 "\n", *problems);
	return (0);
}

/*
 * A compacted copy of the index in a new directory.  Checked first: the
 * copy parses every page, and LMDB's copy of a damaged one can corrupt
 * memory (past what the fault guard catches); a damaged index is rebuilt
 * by export and import instead.
 */
int
lmdb_compact(struct index *base, const char *dest, char **cause)
{
	struct lmdb	*ix = (struct lmdb *)base;
	FILE		*devnull;
	uint64_t	 problems;
	int	 rc;

	if ((devnull = fopen("/dev/null", "w")) == NULL) {
		xasprintf(cause, "/dev/null: %s", strerror(errno));
		return (INDEX_ERROR);
	}
	rc = lmdb_check(base, devnull, &problems, cause);
	fclose(devnull);
	if (rc != 0)
		return (rc);
	if (problems > 0) {
		xasprintf(cause, "index %s is damaged (--check finds %" PRIu64
		    " problem%s): not compacted; rebuild it with --export and "
		    "--import (see mhfilter(1), Damaged indexes)",
		    ix->base.path, problems, problems == 1 ? "" : "s");
		return (INDEX_ERROR);
	}
	if (mkdir(dest, 0777) == -1 && errno != EEXIST) {
		xasprintf(cause, "mkdir %s: %s", dest, strerror(errno));
		return (INDEX_ERROR);
	}
	lm_long(1);
	rc = mdb_env_copy2(ix->db.env, dest, MDB_CP_COMPACT);
	lm_long(0);
	if (rc != 0) {
		xasprintf(cause, "copy %s to %s: %s", ix->base.path, dest,
		    mdb_strerror(rc));
		return (INDEX_ERROR);
	}
	return (0);
}

/* A meta key for a message: at most 40 bytes, unprintable ones as '?'. */
static void
ud_key_show(const MDB_val *k, char *out, size_t size)
{
	const unsigned char	*p = k->mv_data;
	size_t			 i;

	for (i = 0; i < k->mv_size && i < 40 && i + 1 < size; i++)
		out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
	out[i] = '\0';
}

/*
 * The delivery marks of lmdb_check: each undelivered range and owner
 * record well formed, ranges below next_doc and apart, owners document
 * numbers.  An owner record without its range is no problem: an older
 * version of mhfilter deletes the range alone.
 */
static void
check_undelivered(struct lmdb *ix, struct checking *ck)
{
	MDB_cursor	*cur;
	MDB_val		 k, v;
	char		 show[48];
	uint64_t	 end, first, owner, last = 0;
	int		 rc;

	if ((rc = mdb_cursor_open(ix->db.txn, ix->meta, &cur)) != 0) {
		check_walked(ck, "meta", rc);
		return;
	}
	k.mv_data = (void *)"undelivered";
	k.mv_size = strlen("undelivered");
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		lm_beat();
		if (k.mv_size < strlen("undelivered") || memcmp(k.mv_data,
		    "undelivered", strlen("undelivered")) != 0)
			break;
		ud_key_show(&k, show, sizeof show);
		if ((end = ud_key_end(&k, UO_PREFIX, UO_KEYLEN)) != 0) {
			if (ud_value(&v, ix->next_doc, &owner) != 0 ||
			    owner == 0)
				problem(ck->f, ck->problems, "meta record "
				    "\"%s\": not the first document of a "
				    "writer's", show);
			continue;
		}
		if ((end = ud_key_end(&k, UD_PREFIX, UD_KEYLEN)) == 0) {
			problem(ck->f, ck->problems, "meta record \"%s\" is "
			    "malformed", show);
			continue;
		}
		if (ud_value(&v, end, &first) != 0 || first == 0)
			problem(ck->f, ck->problems, "meta record \"%s\": "
			    "not an undelivered range", show);
		else if (end > ix->next_doc)
			problem(ck->f, ck->problems, "undelivered range "
			    "[%" PRIu64 ", %" PRIu64 ") ends past next_doc",
			    first, end);
		else if (first < last)
			problem(ck->f, ck->problems, "undelivered range "
			    "[%" PRIu64 ", %" PRIu64 ") overlaps the one "
			    "before", first, end);
		else
			last = end;
	}
	mdb_cursor_close(cur);
	check_walked(ck, "meta", rc == 0 ? MDB_NOTFOUND : rc);
}
