/*
 * mhfilter: main, options, and the loop
 *
 *	read a batch of records -> filter_batch (decide, insert, commit)
 *	-> write the batch's verdicts
 *
 * so that nothing is written before the index holds it.
 */

#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mhfilter.h"

#define BATCH_BYTES	(64U << 20)	/* a batch also closes at this size */
#define POLICY_SKIP	0
#define POLICY_PASS	1
#define POLICY_FAIL	2

struct options {
	struct filter_opts	 f;
	int			 given;		/* IP_* */
	int			 format;
	int			 delim;
	const char		*text_field;
	const char		*id_field;
	uint64_t		 max_bytes;
	int			 policy;
	int			 mode;		/* OUT_* */
	const char		*db;
	uint64_t		 batch;
	double			 max_fn;
	double			 max_fp;
	int			 stats;
	int			 progress;
	int			 quiet;
	int			 explain;
};

struct counts {
	uint64_t	 records;
	uint64_t	 unique;
	uint64_t	 replayed;
	uint64_t	 duplicates;
	uint64_t	 empty;
	uint64_t	 invalid;
	uint64_t	 too_long;
	uint64_t	 bytes;
};

enum {
	OPT_TEXT_FIELD = 256, OPT_ID_FIELD, OPT_MAX_BYTES, OPT_ON_BAD,
	OPT_MAX_FN, OPT_MAX_FP, OPT_NORMALIZE, OPT_SEED, OPT_VERIFY,
	OPT_MAX_CAND, OPT_NO_CHAIN, OPT_BATCH, OPT_STATS, OPT_PROGRESS,
	OPT_NO_PROGRESS, OPT_EXPLAIN, OPT_MAP_SIZE
};

static const char short_opts[] = "0ab:d:Df:hk:n:pqQr:t:u:Vz";
static const struct option long_opts[] = {
	{ "null", no_argument, NULL, 'z' },
	{ "format", required_argument, NULL, 'f' },
	{ "text-field", required_argument, NULL, OPT_TEXT_FIELD },
	{ "id-field", required_argument, NULL, OPT_ID_FIELD },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "on-bad-input", required_argument, NULL, OPT_ON_BAD },
	{ "threshold", required_argument, NULL, 't' },
	{ "perms", required_argument, NULL, 'k' },
	{ "bands", required_argument, NULL, 'b' },
	{ "rows", required_argument, NULL, 'r' },
	{ "max-fn", required_argument, NULL, OPT_MAX_FN },
	{ "max-fp", required_argument, NULL, OPT_MAX_FP },
	{ "shingle", required_argument, NULL, 'n' },
	{ "unit", required_argument, NULL, 'u' },
	{ "normalize", required_argument, NULL, OPT_NORMALIZE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "verify", required_argument, NULL, OPT_VERIFY },
	{ "max-candidates", required_argument, NULL, OPT_MAX_CAND },
	{ "no-chain", no_argument, NULL, OPT_NO_CHAIN },
	{ "db", required_argument, NULL, 'd' },
	{ "query-only", no_argument, NULL, 'Q' },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "map-size", required_argument, NULL, OPT_MAP_SIZE },
	{ "duplicates", no_argument, NULL, 'D' },
	{ "annotate", no_argument, NULL, 'a' },
	{ "pairs", no_argument, NULL, 'p' },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "quiet", no_argument, NULL, 'q' },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 }
};

static volatile sig_atomic_t	 stop_signal;
static struct index		*the_index;

static void	usage(FILE *);
static void	usage_error(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	parse_options(int, char **, struct options *);
static void	choose_bands(struct options *);
static int	read_batch(struct options *, struct input *, struct record *,
		    struct verdict *, size_t *, struct counts *, int *);
static void	print_stats(struct counts *, struct filter *, double);
static void	progress(struct counts *, double, int);
static void	on_signal(int);
static void	cleanup(void);

/* Print the usage summary. */
static void
usage(FILE *f)
{
	fprintf(f,
"usage: mhfilter [options] [file ...]\n"
"Pass the first document of every near-duplicate group; drop the rest.\n"
"\n"
"Input:\n"
"  -z, --null               records end with NUL, not newline\n"
"  -f, --format FMT         line (default), tsv (id TAB text) or jsonl\n"
"      --text-field NAME    jsonl: field with the text (default text)\n"
"      --id-field NAME      jsonl: field with the id (default id)\n"
"      --max-bytes SIZE     longest record (default 8M)\n"
"      --on-bad-input P     skip (default), pass or fail\n"
"Algorithm:\n"
"  -t, --threshold T        Jaccard similarity of a duplicate (default 0.8)\n"
"  -k, --perms K            signature length (default 128)\n"
"  -b, --bands B            bands (default: chosen from T)\n"
"  -r, --rows R             rows per band; B*R = K\n"
"      --max-fn P           bound on P(miss | s = T) (default 0.01)\n"
"      --max-fp P           bound on P(candidate | s = T-0.25) (default 0.05)\n"
"  -n, --shingle N          units per shingle (default 5)\n"
"  -u, --unit UNIT          char (default) or word\n"
"      --normalize LIST     casefold,nfkc,space,punct or none\n"
"                           (default casefold,nfkc,space)\n"
"      --seed N             hash seed (default 0)\n"
"      --verify MODE        exact (default), signature or none\n"
"      --max-candidates N   candidates examined per record (default 100)\n"
"      --no-chain           do not index duplicates\n"
"Index:\n"
"  -d, --db DIR             persistent index (default: a temporary one)\n"
"  -Q, --query-only         compare with the index, insert nothing\n"
"      --batch N            records per transaction (default 1000)\n"
"      --map-size SIZE      initial index map size (default 1G)\n"
"Output:\n"
"  -D, --duplicates         write the duplicates, not the unique records\n"
"  -a, --annotate           write every record with its verdict\n"
"  -p, --pairs              write every verified pair\n"
"      --stats              print a summary on stderr at the end\n"
"      --[no-]progress      progress on stderr (default: if a terminal)\n"
"  -q, --quiet              no warnings about bad records\n"
"      --explain            print the band choice and S-curve, then exit\n"
"  -h, --help               this help\n"
"  -V, --version            program, index format and scheme versions\n"
"See mhfilter(1).\n");
}

/* Report a usage error and exit 2. */
static void
usage_error(const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "mhfilter: %s\n", msg);
	fprintf(stderr, "Try 'mhfilter --help' for more information.\n");
	exit(EXIT_USAGE);
}

/* Parse an option's number or exit 2 naming the option. */
#define NUMBER(fn, lo, hi, out) do {					\
	char	*cause_;						\
	if (fn(optarg, lo, hi, out, &cause_) != 0)			\
		usage_error("%s: %s", name, cause_);			\
} while (0)

/* Parse the command line into o; exits on errors. */
static void
parse_options(int argc, char **argv, struct options *o)
{
	char		 name[32], *cause;
	uint64_t	 u;
	int		 ch, idx, modes = 0, fields = 0;

	memset(o, 0, sizeof *o);
	o->f.p.perms = 128;
	o->f.p.shingle = 5;
	o->f.p.unit = UNIT_CHAR;
	o->f.p.norm = NORM_DEFAULT;
	o->f.p.threshold = 0.8;
	o->f.verify = VERIFY_EXACT;
	o->f.chain = 1;
	o->f.max_candidates = 100;
	o->delim = '\n';
	o->text_field = "text";
	o->id_field = "id";
	o->max_bytes = 8U << 20;
	o->batch = 1000;
	o->max_fn = 0.01;
	o->max_fp = 0.05;
	o->progress = isatty(STDERR_FILENO);

	for (;;) {
		idx = -1;	/* getopt_long sets it for long options only */
		ch = getopt_long(argc, argv, short_opts, long_opts, &idx);
		if (ch == -1)
			break;
		if (idx != -1)
			snprintf(name, sizeof name, "--%s",
			    long_opts[idx].name);
		else
			snprintf(name, sizeof name, "-%c", ch);
		switch (ch) {
		case '0':
		case 'z':
			o->delim = '\0';
			break;
		case 'f':
			if (strcmp(optarg, "line") == 0)
				o->format = FORMAT_LINE;
			else if (strcmp(optarg, "tsv") == 0)
				o->format = FORMAT_TSV;
			else if (strcmp(optarg, "jsonl") == 0 ||
			    strcmp(optarg, "json") == 0)
				o->format = FORMAT_JSONL;
			else
				usage_error("%s: unknown format '%s' (use line, "
				    "tsv or jsonl)", name, optarg);
			break;
		case OPT_TEXT_FIELD:
			o->text_field = optarg;
			fields |= strcmp(optarg, "text") != 0;
			break;
		case OPT_ID_FIELD:
			o->id_field = optarg;
			fields |= strcmp(optarg, "id") != 0;
			break;
		case OPT_MAX_BYTES:
			NUMBER(parse_size, 1, 1ULL << 30, &o->max_bytes);
			break;
		case OPT_ON_BAD:
			if (strcmp(optarg, "skip") == 0)
				o->policy = POLICY_SKIP;
			else if (strcmp(optarg, "pass") == 0)
				o->policy = POLICY_PASS;
			else if (strcmp(optarg, "fail") == 0)
				o->policy = POLICY_FAIL;
			else
				usage_error("%s: unknown policy '%s' (use skip, "
				    "pass or fail)", name, optarg);
			break;
		case 't':
			NUMBER(parse_double, 0.01, 1.0, &o->f.p.threshold);
			o->given |= IP_THRESHOLD;
			break;
		case 'k':
			NUMBER(parse_uint, 1, MHF_MAX_PERMS, &u);
			o->f.p.perms = u;
			o->given |= IP_PERMS;
			break;
		case 'b':
			NUMBER(parse_uint, 1, MHF_MAX_PERMS, &u);
			o->f.p.bands = u;
			o->given |= IP_BANDS;
			break;
		case 'r':
			NUMBER(parse_uint, 1, MHF_MAX_PERMS, &u);
			o->f.p.rows = u;
			o->given |= IP_ROWS;
			break;
		case OPT_MAX_FN:
			NUMBER(parse_double, 0.0, 1.0, &o->max_fn);
			break;
		case OPT_MAX_FP:
			NUMBER(parse_double, 0.0, 1.0, &o->max_fp);
			break;
		case 'n':
			NUMBER(parse_uint, 1, MHF_MAX_SHINGLE, &u);
			o->f.p.shingle = u;
			o->given |= IP_SHINGLE;
			break;
		case 'u':
			if (strcmp(optarg, "char") == 0)
				o->f.p.unit = UNIT_CHAR;
			else if (strcmp(optarg, "word") == 0)
				o->f.p.unit = UNIT_WORD;
			else
				usage_error("%s: unknown unit '%s' (use char or "
				    "word)", name, optarg);
			o->given |= IP_UNIT;
			break;
		case OPT_NORMALIZE:
			if (normalize_parse(optarg, &o->f.p.norm, &cause) != 0)
				usage_error("%s: %s", name, cause);
			o->given |= IP_NORM;
			break;
		case OPT_SEED:
			NUMBER(parse_uint, 0, UINT64_MAX, &o->f.p.seed);
			o->given |= IP_SEED;
			break;
		case OPT_VERIFY:
			if (strcmp(optarg, "exact") == 0)
				o->f.verify = VERIFY_EXACT;
			else if (strcmp(optarg, "signature") == 0)
				o->f.verify = VERIFY_SIGNATURE;
			else if (strcmp(optarg, "none") == 0)
				o->f.verify = VERIFY_NONE;
			else
				usage_error("%s: unknown mode '%s' (use exact, "
				    "signature or none)", name, optarg);
			o->given |= IP_VERIFY;
			break;
		case OPT_MAX_CAND:
			NUMBER(parse_uint, 1, 1000000, &u);
			o->f.max_candidates = u;
			break;
		case OPT_NO_CHAIN:
			o->f.chain = 0;
			break;
		case 'd':
			o->db = optarg;
			break;
		case 'Q':
			o->f.query_only = 1;
			break;
		case OPT_BATCH:
			NUMBER(parse_uint, 1, 1000000, &o->batch);
			break;
		case OPT_MAP_SIZE:
			NUMBER(parse_size, 1 << 20, UINT64_MAX >> 1,
			    &o->f.p.mapsize);
			break;
		case 'D':
			o->mode = OUT_DUPLICATES;
			modes++;
			break;
		case 'a':
			o->mode = OUT_ANNOTATE;
			modes++;
			break;
		case 'p':
			o->mode = OUT_PAIRS;
			o->f.want_pairs = 1;
			modes++;
			break;
		case OPT_STATS:
			o->stats = 1;
			break;
		case OPT_PROGRESS:
			o->progress = 1;
			break;
		case OPT_NO_PROGRESS:
			o->progress = 0;
			break;
		case 'q':
			o->quiet = 1;
			break;
		case OPT_EXPLAIN:
			o->explain = 1;
			break;
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		case 'V':
			printf("mhfilter %s (index format %d, signature scheme "
			    "%d %s)\n", PACKAGE_VERSION, MHF_INDEX_FORMAT,
			    MHF_SCHEME, MHF_SCHEME_NAME);
			exit(EXIT_OK);
		default:
			fprintf(stderr, "Try 'mhfilter --help' for more "
			    "information.\n");
			exit(EXIT_USAGE);
		}
	}
	if (modes > 1)
		usage_error("--duplicates, --annotate and --pairs are "
		    "exclusive");
	if (o->f.query_only && o->db == NULL)
		usage_error("--query-only needs --db (a temporary index is "
		    "empty)");
	if (o->format != FORMAT_JSONL && fields)
		usage_error("--text-field and --id-field go with --format "
		    "jsonl");
	choose_bands(o);
}

/* Settle K, b and r from the options and the threshold. */
static void
choose_bands(struct options *o)
{
	struct index_params	*p = &o->f.p;
	struct lsh_choice	 c;

	if ((o->given & IP_BANDS) && (o->given & IP_ROWS)) {
		if (!(o->given & IP_PERMS))
			p->perms = p->bands * p->rows;
		if (p->bands * p->rows != p->perms)
			usage_error("--bands %u x --rows %u is not --perms %u",
			    p->bands, p->rows, p->perms);
		if (p->perms > MHF_MAX_PERMS)
			usage_error("--bands x --rows is over %d",
			    MHF_MAX_PERMS);
		o->given |= IP_PERMS;
	} else if (o->given & (IP_BANDS|IP_ROWS)) {
		/*
		 * One of the two: derive the other from K.  Only the one
		 * given is checked against an existing index, whose K may
		 * not be the default.
		 */
		unsigned given = (o->given & IP_BANDS) ? p->bands : p->rows;

		if (p->perms % given != 0)
			usage_error("--%s %u does not divide --perms %u",
			    (o->given & IP_BANDS) ? "bands" : "rows", given,
			    p->perms);
		if (o->given & IP_BANDS)
			p->rows = p->perms / given;
		else
			p->bands = p->perms / given;
	} else {
		lsh_choose(p->perms, p->threshold, o->max_fn, o->max_fp, &c);
		p->bands = c.b;
		p->rows = c.r;
	}
}

/*
 * Remember the first SIGINT/SIGTERM: the loop stops after this batch.  The
 * handler is installed with SA_RESETHAND, so a second one kills at once.
 */
static void
on_signal(int sig)
{
	if (stop_signal == 0)
		stop_signal = sig;
}

/* At exit, close the index (removing a temporary one). */
static void
cleanup(void)
{
	index_close(the_index);
	the_index = NULL;
}

/* Warn about a bad record unless quiet; policy says what happens to it. */
static void
bad_record(struct options *o, int policy, const struct rawrec *rr,
    const char *what)
{
	static const char *done[] = { "skipped", "passed through", "stopping" };

	if (!o->quiet || policy == POLICY_FAIL)
		log_warnx("%s:%" PRIu64 ": %s: %s", rr->file, rr->line, what,
		    done[policy]);
}

/*
 * Read up to a batch of records.  Sets *eof at the end of input; returns
 * 0, or EXIT_DATA when a bad record stops the run (--on-bad-input=fail),
 * or EXIT_ERROR on a read error.  Either way the records before it are in
 * the batch.
 */
static int
read_batch(struct options *o, struct input *in, struct record *recs,
    struct verdict *vs, size_t *np, struct counts *ct, int *eof)
{
	struct rawrec	 rr;
	struct record	*r;
	char		*cause, what[128];
	size_t		 n = 0, bytes = 0;
	int		 rc;

	while (n < o->batch && bytes < BATCH_BYTES && !stop_signal) {
		if (n > 0 && !input_ready(in))
			break;	/* the producer paused: answer now */
		if ((rc = input_next(in, &rr, &cause)) == 0) {
			*eof = 1;
			break;
		}
		if (rc < 0 && cause == NULL)
			continue;	/* a signal: the loop condition decides */
		if (rc < 0) {
			log_warnx("%s", cause);
			free(cause);
			*np = n;
			return (EXIT_ERROR);
		}
		ct->records++;
		ct->bytes += (rr.toolong ? rr.fulllen : rr.len) + rr.delimited;
		if (rr.toolong) {
			ct->too_long++;
			snprintf(what, sizeof what, "record of %zu bytes is "
			    "over --max-bytes %" PRIu64, rr.fulllen,
			    o->max_bytes);
			/* Passing one would need unbounded memory. */
			bad_record(o, o->policy == POLICY_PASS ? POLICY_SKIP :
			    o->policy, &rr, what);
			if (o->policy == POLICY_FAIL) {
				*np = n;
				return (EXIT_DATA);
			}
			continue;
		}
		r = &recs[n];
		record_reset(r);
		buf_append(&r->raw, rr.data, rr.len);
		r->recno = ct->records;
		r->line = rr.line;
		r->file = rr.file;
		verdict_reset(&vs[n]);
		if (record_parse(r, o->format, o->text_field, o->id_field,
		    &cause) != 0) {
			ct->invalid++;
			bad_record(o, o->policy, &rr, cause);
			free(cause);
			if (o->policy == POLICY_FAIL) {
				*np = n;
				return (EXIT_DATA);
			}
			if (o->policy == POLICY_SKIP)
				continue;
			vs[n].kind = V_BAD;
		}
		bytes += rr.len;
		n++;
	}
	*np = n;
	return (0);
}

/* Redraw the progress line on stderr, at most once a second. */
static void
progress(struct counts *ct, double start, int last)
{
	static double	 shown;
	double		 now = now_seconds();

	if (!last && now - shown < 1.0)
		return;
	shown = now;
	fprintf(stderr, "\rmhfilter: %" PRIu64 " records, %" PRIu64
	    " unique, %" PRIu64 " duplicates, %.0f records/s\033[K",
	    ct->records, ct->unique, ct->duplicates,
	    ct->records / (now - start > 0 ? now - start : 1));
	if (last)
		fputc('\n', stderr);
}

/* The --stats summary: one "mhfilter: key: value" line each. */
static void
print_stats(struct counts *ct, struct filter *f, double secs)
{
	struct filter_stats	 fs;
	struct index_stats	 is;
	struct rusage		 ru;
	char			*cause;

	filter_stats(f, &fs);
	if (secs <= 0)
		secs = 1e-9;
#define STAT(key, fmt, v) fprintf(stderr, "mhfilter: " key ": " fmt "\n", v)
	STAT("records", "%" PRIu64, ct->records);
	STAT("unique", "%" PRIu64, ct->unique);
	STAT("replayed", "%" PRIu64, ct->replayed);
	STAT("duplicates", "%" PRIu64, ct->duplicates);
	STAT("empty", "%" PRIu64, ct->empty);
	STAT("invalid", "%" PRIu64, ct->invalid);
	STAT("too_long", "%" PRIu64, ct->too_long);
	STAT("invalid_utf8", "%" PRIu64, fs.invalid_utf8);
	STAT("candidates", "%" PRIu64, fs.candidates);
	STAT("verified", "%" PRIu64, fs.verified);
	STAT("bytes", "%" PRIu64, ct->bytes);
	STAT("seconds", "%.3f", secs);
	STAT("records_per_second", "%.0f", ct->records / secs);
	STAT("mb_per_second", "%.2f", ct->bytes / secs / 1e6);
	if (the_index != NULL && index_stats(the_index, &is, &cause) == 0) {
		STAT("index_documents", "%" PRIu64, is.docs);
		STAT("index_band_entries", "%" PRIu64, is.band_entries);
		STAT("index_bytes", "%" PRIu64, is.size);
	} else if (the_index != NULL)
		free(cause);
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		STAT("max_rss_kb", "%ld", ru.ru_maxrss);
#undef STAT
}

int
main(int argc, char **argv)
{
	struct options		 o;
	struct index_params	 asked;
	struct input		*in;
	struct output		*out;
	struct filter		*f;
	struct record		*recs;
	struct verdict		*vs;
	struct counts		 ct;
	struct sigaction	 sa;
	struct lsh_choice	 c;
	struct stat		 st;
	char			*cause, *dbfile;
	size_t			 n, i;
	double			 start;
	int			 rc, status = EXIT_OK, eof = 0;

	log_init("mhfilter");
	parse_options(argc, argv, &o);
	argc -= optind;
	argv += optind;

	asked = o.f.p;
	o.f.p.texts = o.f.verify == VERIFY_EXACT;
	o.f.p.verify = o.f.verify;
	if (o.explain) {
		/* With an existing index, explain the parameters it holds. */
		if (o.db != NULL) {
			xasprintf(&dbfile, "%s/data.mdb", o.db);
			if (stat(dbfile, &st) == 0) {
				rc = index_open(&the_index, o.db, INDEX_RDONLY,
				    &o.f.p, o.given, &cause);
				if (rc != 0) {
					log_warnx("%s", cause);
					free(cause);
					free(dbfile);
					return (rc == INDEX_MISMATCH ?
					    EXIT_MISMATCH : EXIT_ERROR);
				}
				index_close(the_index);
				the_index = NULL;
			}
			free(dbfile);
		}
		lsh_rate(o.f.p.threshold, o.f.p.bands, o.f.p.rows, &c);
		lsh_explain(stdout, o.f.p.perms, o.f.p.threshold, &c);
		return (EXIT_OK);
	}

	rc = index_open(&the_index, o.db, o.f.query_only ? INDEX_RDONLY : 0,
	    &o.f.p, o.given, &cause);
	if (rc != 0) {
		log_warnx("%s", cause);
		free(cause);
		return (rc == INDEX_MISMATCH ? EXIT_MISMATCH : EXIT_ERROR);
	}
	atexit(cleanup);
	o.f.verify = o.f.p.verify;
	lsh_rate(o.f.p.threshold, o.f.p.bands, o.f.p.rows, &c);
	if ((o.given & IP_THRESHOLD) && o.f.p.bands != asked.bands &&
	    c.fn > o.max_fn)
		log_warnx("the index's bands (%u x %u rows) miss %.1f%% of the "
		    "pairs at similarity %.2f; an index made with -t %.2f "
		    "would not", c.b, c.r, 100 * c.fn, o.f.p.threshold,
		    o.f.p.threshold);

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);	/* write errors are reported */
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	f = filter_create(&o.f);
	in = input_open(argv, argc, o.delim, o.max_bytes);
	out = output_open(STDOUT_FILENO, o.mode, o.format, o.delim);
	recs = xcalloc(o.batch, sizeof *recs);
	vs = xcalloc(o.batch, sizeof *vs);
	memset(&ct, 0, sizeof ct);
	start = now_seconds();

	while (!eof && status == EXIT_OK && !stop_signal) {
		status = read_batch(&o, in, recs, vs, &n, &ct, &eof);
		if (n == 0)
			continue;
		/* Decide and commit first; only then write. */
		if ((rc = filter_batch(f, the_index, recs, vs, n, &cause))) {
			log_warnx("%s", cause);
			free(cause);
			status = EXIT_ERROR;
			break;
		}
		for (i = 0; i < n; i++) {
			switch (vs[i].kind) {
			case V_UNIQUE:
				ct.unique++;
				ct.replayed += vs[i].replay;
				break;
			case V_DUPLICATE:
				ct.duplicates++;
				break;
			case V_EMPTY:
				ct.empty++;
				break;
			}
			if (output_record(out, &recs[i], &vs[i], &cause) != 0)
				break;
		}
		if (i < n || output_flush(out, &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
			status = EXIT_ERROR;
			break;
		}
		if (o.progress)
			progress(&ct, start, 0);
	}
	if (o.progress)
		progress(&ct, start, 1);
	if (stop_signal && status == EXIT_OK) {
		log_warnx("interrupted by signal %d: every record read so far "
		    "was committed and written", (int)stop_signal);
		status = 128 + stop_signal;
	}
	if (o.stats)
		print_stats(&ct, f, now_seconds() - start);

	for (i = 0; i < o.batch; i++) {
		record_free(&recs[i]);
		verdict_free(&vs[i]);
	}
	free(recs);
	free(vs);
	output_close(out);
	input_close(in);
	filter_free(f);
	cleanup();
	return (status);
}
