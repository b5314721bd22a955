/*
 * The Redis backend's own header, shared by its four files only (redis.c,
 * redisopen.c, redismarks.c, rediscan.c) and not by the rest of the
 * program.
 * Why a second header: the backend's handle, struct redis, is one object
 * that its batch path, its delivery marks, its scans and its open and
 * close all read and write (its connections, its namespace, its batch,
 * its marks), and its replies are hiredis's; in mhfilter.h they would be
 * every file's to see, and would need <hiredis.h> in every file.  What is
 * here is that struct, the few names its files share, and the calls
 * between the four files, nothing else.  Include it after <hiredis.h> and
 * mhfilter.h.
 */

#define ST_PENDING	RVAL_PENDING
#define ST_KEPT		RVAL_KEPT
#define UD_KEY		"undelivered"	/* {NS}:undelivered */

struct redis {
	struct index	 base;		/* first: what index.c sees */
	int		 format;	/* as opened (2 read-only, else 3) */
	struct cluster	*c;
	char		*ns;
	char		*hosts;

	struct rslot	*slots;
	size_t		 nslots, slotsize;
	uint64_t	 first_doc;	/* the batch's numbers */
	uint64_t	 seq_seen;	/* the counter's highest value seen */
	size_t		*own;		/* number - first_doc -> its slot */
	size_t		 nown, ownsize;
	struct u64vec	 found;		/* bucket entries, by slot */

	struct rdoc	*docs;		/* read or written this batch */
	size_t		 ndocs, docsize;
	size_t		*ht;		/* docid -> docs index + 1 */
	size_t		 htsize;
	struct buf	 cache;		/* their values */

	struct stale	*stale;
	size_t		 nstale, stalesize;
	struct later	**later;
	size_t		 nlater, latersize;
	struct buf	 lbuf;

	struct textenc	*te;		/* for unprepared insertions */
	struct retention ret;		/* from index_expire, for commit */
	uint64_t	 floor;		/* documents below were expired */
	int64_t		 now;
	uint32_t	*sig;
	struct buf	 key, val;	/* scratch */
	uint64_t	 waits;		/* pending candidates waited for */
	uint64_t	 rereads;	/* batches that read buckets again */
	uint64_t	 reread;	/* ... the buckets they read again */
	uint64_t	 timeouts;	/* ... in vain */
	uint64_t	 ticket;	/* the batch's place in the order of
					   appends, or 0 (top of redis.c) */
	uint64_t	 order0;	/* the last ticket before our appends */
	uint64_t	 tprev;		/* the first document of our last
					   ticket's batch, or 0 */

	/* Groups (redis_group, redis_set_group). */
	struct rslot	*glast;		/* what the last insert added: a */
	struct later	*llast;		/* prepared slot or an unprepared one */
	struct u64vec	 tokdoc;	/* unprepared insertions' numbers */
	uint64_t	 each_doc;	/* the document an export is at */
	uint64_t	 each_group;	/* ... and its group, or 0 */

	/* Delivery marks (see the top of redismarks.c). */
	uint64_t	 owner;		/* our ranges', or 0: none yet */
	struct u64vec	 mine;		/* [first, end) pairs we committed */
	struct u64vec	 pend;		/* those not delivered yet */
	struct u64vec	 dranges;	/* delivered: for the next commit */
	struct u64vec	 dreplays;
	struct u64vec	 aranges;	/* abandoned: first, last pairs */
	int		 uread;		/* uranges read in this batch */
	struct u64vec	 uranges;	/* first, end, owner: every range */
	int		 wread;		/* writers read in this batch */
	struct u64vec	 writers;	/* the owners running, sorted */
	struct u64vec	 stopped;	/* owner, until (ms) pairs: writers
					   seen stopped (find_stopped) */
};

/* redis.c */
void		 ns_key(struct redis *, const char *, struct buf *);
void		 doc_key(struct redis *, uint64_t, struct buf *);
void		 band_key(struct redis *, uint64_t, struct buf *);
size_t		 q1(struct redis *, const struct buf *, const char *);
size_t		 q2(struct redis *, const struct buf *, const char *,
		    const char *, size_t);
int		 redis_fail(struct redis *, char **);
int		 reply_error(struct redis *, const redisReply *, const char *,
		    char **);
int		 replies_ok(struct redis *, size_t, size_t, const char *,
		    char **);
int		 get_counter(struct redis *, const char *, uint64_t *,
		    char **);
struct rslot	*own_slot(struct redis *, uint64_t);
void		 queue_eval(struct redis *, const char *, const struct buf *,
		    const char *, size_t);
void		 queue_unlink(struct redis *, uint64_t, uint64_t);

/* redisopen.c */
int		 redis_password_file(const char *, char **);
int		 redis_exists(const char *, uint64_t *);
int		 redis_open(struct index **, const char *, int,
		    struct index_params *, int, char **);
void		 redis_close(struct index *);

/* redismarks.c */
void		 queue_zrem(struct redis *, const char *, uint64_t, uint64_t);
int		 take_owner(struct redis *, uint64_t, char **);
int		 queue_marks(struct redis *, uint64_t, uint64_t, char **);
int		 redis_own(struct index *, uint64_t);
int		 redis_undelivered(struct index *, uint64_t, char **);
int		 redis_stopped(struct redis *, uint64_t);
int		 find_stopped(struct redis *, const struct u64vec *,
		    struct u64vec *, char **);
void		 redis_delivered(struct index *, const uint64_t *, size_t,
		    const uint64_t *, size_t);
void		 redis_abandoned(struct index *, const uint64_t *, size_t);

/* rediscan.c */
int		 redis_stats(struct index *, struct index_stats *, char **);
int		 redis_expire(struct index *, const struct retention *, int64_t,
		    uint64_t, uint64_t *, char **);
int		 redis_remove(struct index *, const char *, size_t, uint64_t *,
		    char **);
int		 redis_info(struct index *, struct index_info *, char **);
int		 redis_check(struct index *, FILE *, uint64_t *, char **);
int		 redis_each(struct index *, index_each_fn, void *, char **);
int		 redis_adopt(struct index *, const struct index_params *,
		    char **);
