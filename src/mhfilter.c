/*
 * mhfilter: main, options, and the loop
 *
 *	read a batch of records -> filter_prepare (normalise, sign)
 *	-> filter_decide (look up, verify, insert, commit)
 *	-> write the batch's verdicts
 *
 * so that nothing is written before the index holds it.  The next batch is
 * read and prepared while one is decided.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
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
/*
 * A producer that has written nothing for this long (ms) has paused: the
 * batch closes and is answered.  Less than that is a pipe emptied faster
 * than the producer refills it: closing the batch there made batches of
 * 70 records from "cat file |" (its 64 KB at a time), a commit each, and
 * 30,000 records/s where a file given as an argument went at 80,000.
 */
#define INPUT_GRACE	2

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
	int			 fields;	/* --text/id-field not default */
	int			 verbose;
	const char		*output;	/* --output */
	const char		*config;	/* --config */
	/* Daemon mode. */
	char			**listen;
	size_t			 nlisten;
	int			 listen_src;	/* 1 config, 2 command line */
	const char		*http;
	const char		*log_file;
	double			 batch_delay;
	double			 idle_timeout;
	uint64_t		 max_clients;
	/* Retention and maintenance. */
	const char		*time_field;	/* --time-field */
	int			 maint;		/* MAINT_* */
	const char		*maint_arg;	/* its FILE or DIR */
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
	uint64_t	 batches;	/* committed */
};

/* A batch read, with its verdicts and what phase 1 made of it. */
struct inflight {
	struct record	*recs;
	struct verdict	*vs;
	size_t		 n;
	struct fbatch	*fb;
};

/*
 * The batch read ahead, for fill_batch.  When every input is a regular
 * file it is read in phase 1's thread, from a copy of the counts that the
 * main loop takes back once the batch is ready; otherwise the main loop
 * has read it already (done), since reading a pipe may wait for the
 * producer, where only the main thread can be interrupted by a signal.
 */
struct readahead {
	struct options	*o;
	struct input	*in;
	struct inflight	*b;
	struct counts	 ct;
	int		 eof;
	int		 status;
	int		 done;
};

enum {
	OPT_TEXT_FIELD = 256, OPT_ID_FIELD, OPT_MAX_BYTES, OPT_ON_BAD,
	OPT_MAX_FN, OPT_MAX_FP, OPT_NORMALIZE, OPT_SEED, OPT_VERIFY,
	OPT_MAX_CAND, OPT_NO_CHAIN, OPT_BATCH, OPT_STATS, OPT_PROGRESS,
	OPT_NO_PROGRESS, OPT_EXPLAIN, OPT_MAP_SIZE, OPT_THREADS, OPT_MEMTABLE
};

/* Daemon mode's options, and --config (a range of their own). */
enum {
	OPT_LISTEN = 512, OPT_BATCH_DELAY, OPT_MAX_CLIENTS, OPT_IDLE_TIMEOUT,
	OPT_HTTP, OPT_LOG_FILE, OPT_CONFIG
};

/* Retention and the maintenance modes (a range of their own). */
enum {
	OPT_RETAIN = 768, OPT_MAX_DOCS, OPT_TIME_FIELD, OPT_INFO, OPT_EXPIRE,
	OPT_REMOVE, OPT_CHECK, OPT_COMPACT, OPT_EXPORT, OPT_IMPORT
};

/* The maintenance modes' options, by MAINT_*, for messages. */
static const char *const maint_opts[] = {
	NULL, "--info", "--expire", "--remove", "--check", "--compact",
	"--export", "--import"
};

static const char short_opts[] = "0ab:d:Df:hk:n:o:pqQr:t:u:vVz";
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
	{ "memtable", required_argument, NULL, OPT_MEMTABLE },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "duplicates", no_argument, NULL, 'D' },
	{ "annotate", no_argument, NULL, 'a' },
	{ "pairs", no_argument, NULL, 'p' },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "quiet", no_argument, NULL, 'q' },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "output", required_argument, NULL, 'o' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "batch-delay", required_argument, NULL, OPT_BATCH_DELAY },
	{ "max-clients", required_argument, NULL, OPT_MAX_CLIENTS },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "log-file", required_argument, NULL, OPT_LOG_FILE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "retain", required_argument, NULL, OPT_RETAIN },
	{ "max-docs", required_argument, NULL, OPT_MAX_DOCS },
	{ "time-field", required_argument, NULL, OPT_TIME_FIELD },
	{ "info", no_argument, NULL, OPT_INFO },
	{ "expire", no_argument, NULL, OPT_EXPIRE },
	{ "remove", required_argument, NULL, OPT_REMOVE },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "compact", required_argument, NULL, OPT_COMPACT },
	{ "export", required_argument, NULL, OPT_EXPORT },
	{ "import", required_argument, NULL, OPT_IMPORT },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 }
};

/* Keys a configuration file may not set. */
static const char *const conf_forbidden[] = {
	"config", "help", "version", "explain", "info", "expire", "remove",
	"check", "compact", "export", "import", NULL
};

static volatile sig_atomic_t	 stop_signal;
static struct index		*the_index;
static const char		*conf_file;	/* being applied, for errors */
static const unsigned		*conf_lines;
static char			**conf_argv;	/* its settings, as options */

static void	usage(FILE *);
static void	usage_error(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	parse_options(int, char **, struct options *);
static void	apply_options(int, char **, struct options *);
static void	load_config(struct options *, const char *);
static void	choose_bands(struct options *);
static int	parse_record(struct record *, void *, char **);
static int	screen_batch(struct options *, struct inflight *,
		    struct counts *);
static size_t	fill_batch(void *, struct record **, struct verdict **);
static int	read_batch(struct options *, struct input *, struct record *,
		    struct verdict *, size_t *, struct counts *, int *);
static void	print_stats(struct counts *, struct filter *, double);
static void	progress(struct counts *, uint64_t, double, int);
static void	on_signal(int);
static int	run_daemon(struct options *);
static void	set_maint(struct options *, int, const char *);
static void	check_maint(struct options *, int);
static int	run_maint(struct options *);
static void	cleanup(void);

/* Print the usage summary. */
static void
usage(FILE *f)
{
	fprintf(f,
"usage: mhfilter [options] [file ...]\n"
"       mhfilter --db DIR [options] MAINTENANCE-MODE\n"
"Pass the first document of every near-duplicate group; drop the rest.\n"
"\n"
"Input:\n"
"  -z, --null               records end with NUL, not newline\n"
"  -f, --format FMT         line (default), tsv (id TAB text) or jsonl\n"
"      --text-field NAME    jsonl: field with the text (default text)\n"
"      --id-field NAME      jsonl: field with the id (default id)\n"
"      --time-field NAME    jsonl: field with the document time (RFC 3339\n"
"                           or epoch seconds; default: insertion time)\n"
"      --max-bytes SIZE     longest record (default 8M)\n"
"      --on-bad-input P     skip (default), pass or fail\n"
"Algorithm:\n"
"  -t, --threshold T        Jaccard similarity of a duplicate (default 0.8)\n"
"  -k, --perms K            signature length (default 128)\n"
"  -b, --bands B            bands (default: chosen from T)\n"
"  -r, --rows R             rows per band; B*R <= K\n"
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
"      --batch N            records per transaction (default 4000)\n"
"      --map-size SIZE      initial index map size (default 1G)\n"
"      --memtable SIZE      memory for band entries not yet merged\n"
"                           (default 64M)\n"
"      --threads N          threads that normalise and sign (default:\n"
"                           one per CPU)\n"
"      --retain DURATION    expire documents older than this (30d, 12h, 2w)\n"
"      --max-docs N         expire the oldest documents beyond N\n"
"Output:\n"
"  -D, --duplicates         write the duplicates, not the unique records\n"
"  -a, --annotate           write every record with its verdict\n"
"  -p, --pairs              write every verified pair\n"
"      --stats              print a summary on stderr at the end\n"
"      --[no-]progress      progress on stderr (default: if a terminal)\n"
"  -q, --quiet              no warnings about bad records\n"
"      --explain            print the band choice and S-curve, then exit\n"
"  -o, --output FILE        write to FILE (appended in daemon mode)\n"
"  -v, --verbose            more messages (daemon: each connection)\n"
"Daemon:\n"
"      --listen ADDR        serve unix:PATH or tcp:HOST:PORT (repeatable)\n"
"      --batch-delay TIME   longest wait before a batch commits (default 5ms)\n"
"      --max-clients N      clients at once (default 256)\n"
"      --idle-timeout TIME  close silent clients (default 10m, 0: never)\n"
"      --http HOST:PORT     serve /metrics and /healthz\n"
"      --log-file FILE      log there, not to stderr (reopened on SIGHUP)\n"
"      --config FILE        read long options from FILE, key = value\n"
"Maintenance modes (with --db; one at a time, no files):\n"
"      --info               parameters, documents, times and sizes\n"
"      --expire             apply --retain and --max-docs now\n"
"      --remove FILE        remove documents by id, one per line (- stdin)\n"
"      --check              check consistency; exit 1 on problems\n"
"      --compact DIR        write a compacted copy to DIR\n"
"      --export FILE        documents as JSON Lines (- stdout)\n"
"      --import FILE        documents from an export (- stdin)\n"
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
	if (conf_file != NULL && optind >= 2)	/* one entry per argument */
		fprintf(stderr, "mhfilter: %s:%u: %s\n", conf_file,
		    conf_lines[optind - 2], msg);
	else
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

/*
 * Parse the configuration file named by --config, if any, then the command
 * line, which overrides it, into o; exits on errors.
 */
static void
parse_options(int argc, char **argv, struct options *o)
{
	long	 ncpu;
	int	 i;

	memset(o, 0, sizeof *o);
	o->f.p.perms = 128;
	o->f.p.shingle = 5;
	o->f.p.unit = UNIT_CHAR;
	o->f.p.norm = NORM_DEFAULT;
	o->f.p.threshold = 0.8;
	o->f.verify = VERIFY_EXACT;
	o->f.chain = 1;
	o->f.max_candidates = 100;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	o->f.threads = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (unsigned)ncpu;
	o->delim = '\n';
	o->text_field = "text";
	o->id_field = "id";
	o->max_bytes = 8U << 20;
	o->batch = 4000;
	o->max_fn = 0.01;
	o->max_fp = 0.05;
	o->progress = isatty(STDERR_FILENO);
	o->batch_delay = 0.005;
	o->idle_timeout = 600;
	o->max_clients = 256;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			o->config = argv[i + 1];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			o->config = argv[i] + 9;
		else
			continue;
		break;
	}
	if (o->config != NULL)
		load_config(o, o->config);
	optind = 0;		/* start afresh (glibc) */
	apply_options(argc, argv, o);

	if (o->f.query_only && o->db == NULL)
		usage_error("--query-only needs --db (a temporary index is "
		    "empty)");
	if (o->format != FORMAT_JSONL && o->fields)
		usage_error("--text-field and --id-field go with --format "
		    "jsonl");
	if (o->http != NULL && o->nlisten == 0 && notify_listen_count() == 0)
		usage_error("--http needs --listen (or sockets from systemd)");
	check_maint(o, argc - optind);
	choose_bands(o);
}

/*
 * Apply the options in argv to o: the command line, or the settings of a
 * configuration file turned into options by load_config.
 */
static void
apply_options(int argc, char **argv, struct options *o)
{
	char		 name[32], *cause;
	uint64_t	 u;
	int		 ch, idx, modes = 0, src = conf_file != NULL ? 1 : 2;

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
			o->fields |= strcmp(optarg, "text") != 0;
			break;
		case OPT_ID_FIELD:
			o->id_field = optarg;
			o->fields |= strcmp(optarg, "id") != 0;
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
		case OPT_MEMTABLE:
			NUMBER(parse_size, 1 << 16, UINT64_MAX >> 1,
			    &o->f.p.memtable);
			break;
		case OPT_THREADS:
			NUMBER(parse_uint, 1, 64, &u);
			o->f.threads = u;
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
		case 'o':
			o->output = optarg;
			break;
		case 'v':
			o->verbose++;
			break;
		case OPT_LISTEN:
			if (o->listen_src != src) {
				/* The command line's replace the file's. */
				o->nlisten = 0;
				o->listen_src = src;
			}
			o->listen = xreallocarray(o->listen, o->nlisten + 1,
			    sizeof *o->listen);
			o->listen[o->nlisten++] = optarg;
			break;
		case OPT_BATCH_DELAY:
			NUMBER(daemon_parse_time, 0, 60, &o->batch_delay);
			break;
		case OPT_IDLE_TIMEOUT:
			NUMBER(daemon_parse_time, 0, 86400 * 365,
			    &o->idle_timeout);
			break;
		case OPT_MAX_CLIENTS:
			NUMBER(parse_uint, 1, 100000, &o->max_clients);
			break;
		case OPT_HTTP:
			o->http = optarg;
			break;
		case OPT_LOG_FILE:
			o->log_file = optarg;
			break;
		case OPT_CONFIG:
			/* Read before the rest by parse_options. */
			if (o->config == NULL || strcmp(o->config, optarg) != 0)
				usage_error("--config: give one configuration "
				    "file, as --config FILE");
			break;
		case OPT_RETAIN:
			NUMBER(parse_duration, 1, 36500 * 86400LL,
			    &o->f.ret.max_age);
			break;
		case OPT_MAX_DOCS:
			NUMBER(parse_uint, 1, UINT64_MAX, &o->f.ret.max_docs);
			break;
		case OPT_TIME_FIELD:
			o->time_field = optarg;
			break;
		case OPT_INFO:
			set_maint(o, MAINT_INFO, NULL);
			break;
		case OPT_EXPIRE:
			set_maint(o, MAINT_EXPIRE, NULL);
			break;
		case OPT_REMOVE:
			set_maint(o, MAINT_REMOVE, optarg);
			break;
		case OPT_CHECK:
			set_maint(o, MAINT_CHECK, NULL);
			break;
		case OPT_COMPACT:
			set_maint(o, MAINT_COMPACT, optarg);
			break;
		case OPT_EXPORT:
			set_maint(o, MAINT_EXPORT, optarg);
			break;
		case OPT_IMPORT:
			set_maint(o, MAINT_IMPORT, optarg);
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
}

/*
 * Apply a configuration file: each "key = value" becomes the option
 * "--key=value" (a bare key, or "key = yes", "--key" for an option without
 * an argument), checked against the option table, and all of them are
 * applied as one command line before the real one.  Errors name the file
 * and line.
 */
static void
load_config(struct options *o, const char *path)
{
	static unsigned		*lines;
	struct conf_entry	*e;
	const struct option	*lo;
	const char		*v;
	char			*cause;
	size_t			 n, i, nargs = 1;
	int			 k;

	if (conf_load(path, &e, &n, &cause) != 0) {
		fprintf(stderr, "mhfilter: --config %s\n", cause);
		free(cause);
		exit(EXIT_USAGE);
	}
	conf_argv = xcalloc(n + 2, sizeof *conf_argv);
	lines = xcalloc(n + 1, sizeof *lines);
	conf_argv[0] = xstrdup("mhfilter");
	for (i = 0; i < n; i++) {
		for (lo = long_opts; lo->name != NULL; lo++) {
			if (strcmp(lo->name, e[i].key) == 0)
				break;
		}
		for (k = 0; conf_forbidden[k] != NULL; k++) {
			if (lo->name != NULL &&
			    strcmp(conf_forbidden[k], lo->name) == 0)
				lo = NULL;
			if (lo == NULL)
				break;
		}
		if (lo == NULL || lo->name == NULL) {
			fprintf(stderr, "mhfilter: %s:%u: unknown key '%s' "
			    "(keys are long option names, such as threshold; "
			    "see mhfilter.conf(5))\n", path, e[i].line,
			    e[i].key);
			exit(EXIT_USAGE);
		}
		v = e[i].value;
		if (lo->has_arg == no_argument) {
			if (v == NULL || strcmp(v, "yes") == 0 ||
			    strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
				xasprintf(&conf_argv[nargs], "--%s", lo->name);
			else if (strcmp(v, "no") == 0 ||
			    strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
				continue;
			else {
				fprintf(stderr, "mhfilter: %s:%u: %s takes "
				    "yes or no, not '%s'\n", path, e[i].line,
				    lo->name, v);
				exit(EXIT_USAGE);
			}
		} else if (v == NULL || *v == '\0') {
			fprintf(stderr, "mhfilter: %s:%u: %s needs a value\n",
			    path, e[i].line, lo->name);
			exit(EXIT_USAGE);
		} else
			xasprintf(&conf_argv[nargs], "--%s=%s", lo->name, v);
		lines[nargs - 1] = e[i].line;
		nargs++;
	}
	conf_free(e, n);
	conf_file = path;
	conf_lines = lines;
	optind = 0;
	apply_options(nargs, conf_argv, o);
	conf_file = NULL;
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
		if (p->bands * p->rows > p->perms)
			usage_error("--bands %u x --rows %u is more than "
			    "--perms %u", p->bands, p->rows, p->perms);
		if (p->perms > MHF_MAX_PERMS)
			usage_error("--bands x --rows is over %d",
			    MHF_MAX_PERMS);
		o->given |= IP_PERMS;
	} else if (o->given & (IP_BANDS|IP_ROWS)) {
		/*
		 * One of the two: the other is as many as K allows.  Only
		 * the one given is checked against an existing index, whose
		 * K may not be the default.
		 */
		unsigned given = (o->given & IP_BANDS) ? p->bands : p->rows;

		if (given > p->perms)
			usage_error("--%s %u is more than --perms %u",
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

/*
 * Daemon mode: serve the index to socket clients until SIGTERM or SIGINT
 * (daemon.c).  Returns the exit status.
 */
static int
run_daemon(struct options *o)
{
	struct daemon_opts	 d;
	struct filter		*f;
	int			 status;

	memset(&d, 0, sizeof d);
	d.format = o->format;
	d.delim = o->delim;
	d.text_field = o->text_field;
	d.id_field = o->id_field;
	d.time_field = o->time_field;
	d.max_bytes = o->max_bytes;
	d.policy = o->policy;
	d.mode = o->mode;
	d.batch = o->batch;
	d.batch_delay = o->batch_delay;
	d.listen = o->listen;
	d.nlisten = o->nlisten;
	d.http = o->http;
	d.output = o->output;
	d.log_file = o->log_file;
	d.max_clients = o->max_clients;
	d.idle_timeout = o->idle_timeout;
	d.stats = o->stats;
	d.quiet = o->quiet;

	f = filter_create(&o->f);
	status = daemon_run(&d, the_index, f);
	filter_free(f);
	free(o->listen);
	cleanup();
	return (status);
}

/* Select a maintenance mode; only one may be given. */
static void
set_maint(struct options *o, int mode, const char *arg)
{
	if (o->maint != MAINT_NONE && o->maint != mode)
		usage_error("%s and %s are exclusive: one maintenance mode at "
		    "a time", maint_opts[o->maint], maint_opts[mode]);
	o->maint = mode;
	o->maint_arg = arg;
}

/*
 * The rules of retention, --time-field and the maintenance modes, once
 * every option is known; files is the number of file operands.
 */
static void
check_maint(struct options *o, int files)
{
	const char	*m = maint_opts[o->maint];

	if (o->time_field != NULL && o->format != FORMAT_JSONL)
		usage_error("--time-field goes with --format jsonl");
	if (o->maint == MAINT_NONE) {
		if (o->f.query_only &&
		    (o->f.ret.max_age != 0 || o->f.ret.max_docs != 0))
			usage_error("--retain and --max-docs expire documents; "
			    "--query-only writes nothing");
		return;
	}
	if (o->db == NULL)
		usage_error("%s needs --db", m);
	if (files > 0)
		usage_error("%s takes no file operands", m);
	if (o->explain)
		usage_error("%s and --explain are exclusive", m);
	if (o->f.query_only)
		usage_error("%s and --query-only are exclusive", m);
	/* A configuration file shared with the daemon may name listeners. */
	if (o->nlisten > 0 && o->listen_src == 2)
		usage_error("%s and --listen are exclusive", m);
	if (o->maint == MAINT_EXPIRE &&
	    o->f.ret.max_age == 0 && o->f.ret.max_docs == 0)
		usage_error("--expire needs --retain or --max-docs");
}

/* Run the maintenance mode (maint.c); returns the exit status. */
static int
run_maint(struct options *o)
{
	struct maint_opts	 mo;

	memset(&mo, 0, sizeof mo);
	mo.mode = o->maint;
	mo.arg = o->maint_arg;
	mo.db = o->db;
	mo.p = o->f.p;
	mo.given = o->given;
	mo.ret = o->f.ret;
	mo.batch = o->batch;
	mo.quiet = o->quiet;
	free(o->listen);
	return (maint_run(&mo));
}

/* At exit, close the index (removing a temporary one). */
static void
cleanup(void)
{
	index_close(the_index);
	the_index = NULL;
}

/*
 * Read up to a batch of records, unparsed (filter_prepare parses them in
 * the workers; screen_batch then reports the bad ones in order).  A record
 * over --max-bytes takes a place in the batch as V_TOOLONG, without its
 * bytes.  Sets *eof at the end of input; returns 0, or EXIT_ERROR on a
 * read error, with the records before it in the batch.
 */
static int
read_batch(struct options *o, struct input *in, struct record *recs,
    struct verdict *vs, size_t *np, struct counts *ct, int *eof)
{
	struct rawrec	 rr;
	struct record	*r;
	char		*cause;
	size_t		 n = 0, bytes = 0;
	int		 rc;

	while (n < o->batch && bytes < BATCH_BYTES && !stop_signal) {
		if (n > 0 && !input_wait(in, INPUT_GRACE))
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
		r = &recs[n];
		record_reset(r);
		r->recno = ct->records;
		r->line = rr.line;
		r->file = rr.file;
		r->upto = ct->bytes;
		verdict_reset(&vs[n]);
		if (rr.toolong) {
			vs[n].kind = V_TOOLONG;
			xasprintf(&vs[n].error, "record of %zu bytes is over "
			    "--max-bytes %" PRIu64, rr.fulllen, o->max_bytes);
		} else {
			buf_append(&r->raw, rr.data, rr.len);
			vs[n].kind = V_UNPARSED;	/* filter_prepare parses */
			bytes += rr.len;
		}
		n++;
	}
	*np = n;
	return (0);
}

/* Read the batch ahead unless done (fbatch_fill_fn); hand it over. */
static size_t
fill_batch(void *arg, struct record **recs, struct verdict **vs)
{
	struct readahead	*ra = arg;

	if (!ra->done)
		ra->status = read_batch(ra->o, ra->in, ra->b->recs, ra->b->vs,
		    &ra->b->n, &ra->ct, &ra->eof);
	*recs = ra->b->recs;
	*vs = ra->b->vs;
	return (ra->b->n);
}

/* Parse a record for filter_prepare, in a worker thread. */
static int
parse_record(struct record *r, void *arg, char **cause)
{
	struct options	*o = arg;

	return (record_parse_timed(r, o->format, o->text_field, o->id_field,
	    o->time_field, cause));
}

/*
 * After phase 1, in input order: warn about the records that were too long
 * or did not parse, count them, and apply --on-bad-input.  Returns 0, or
 * EXIT_DATA when one stops the run (fail): the batch then ends before it,
 * and the counts forget the records read after it.
 */
static int
screen_batch(struct options *o, struct inflight *b, struct counts *ct)
{
	struct verdict	*v;
	struct record	*r;
	size_t		 i;
	int		 policy;

	for (i = 0; i < b->n; i++) {
		v = &b->vs[i];
		r = &b->recs[i];
		if (v->kind != V_BAD && v->kind != V_TOOLONG)
			continue;
		policy = o->policy;
		if (v->kind == V_TOOLONG) {
			ct->too_long++;
			/* Passing one would need unbounded memory. */
			if (policy == POLICY_PASS)
				policy = POLICY_SKIP;
		} else
			ct->invalid++;
		if (!o->quiet || policy == POLICY_FAIL)
			log_warnx("%s:%" PRIu64 ": %s: %s", r->file, r->line,
			    v->error, policy == POLICY_SKIP ? "skipped" :
			    policy == POLICY_PASS ? "passed through" :
			    "stopping");
		if (policy == POLICY_FAIL) {
			b->n = i;
			ct->records = r->recno;
			ct->bytes = r->upto;
			return (EXIT_DATA);
		}
		if (policy == POLICY_SKIP)
			v->kind = V_SKIP;
	}
	return (0);
}

/*
 * Redraw the progress line on stderr, at most once a second.  The records
 * read ahead and not decided yet are left out.
 */
static void
progress(struct counts *ct, uint64_t ahead, double start, int last)
{
	static double	 shown;
	double		 now = now_seconds();

	if (!last && now - shown < 1.0)
		return;
	shown = now;
	fprintf(stderr, "\rmhfilter: %" PRIu64 " records, %" PRIu64
	    " unique, %" PRIu64 " duplicates, %.0f records/s\033[K",
	    ct->records - ahead, ct->unique, ct->duplicates,
	    (ct->records - ahead) / (now - start > 0 ? now - start : 1));
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
	STAT("expired", "%" PRIu64, fs.expired);
	STAT("batches", "%" PRIu64, ct->batches);
	STAT("bytes", "%" PRIu64, ct->bytes);
	STAT("seconds", "%.3f", secs);
	STAT("records_per_second", "%.0f", ct->records / secs);
	STAT("mb_per_second", "%.2f", ct->bytes / secs / 1e6);
	if (the_index != NULL && index_stats(the_index, &is, &cause) == 0) {
		STAT("index_documents", "%" PRIu64, is.docs);
		STAT("index_band_entries", "%" PRIu64, is.band_entries);
		STAT("index_bytes", "%" PRIu64, is.size);
		if (is.roundtrips != 0) {
			STAT("index_roundtrips", "%" PRIu64, is.roundtrips);
			STAT("roundtrips_per_record", "%.4f",
			    (double)is.roundtrips / (ct->records ?
			    ct->records : 1));
		}
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
	struct inflight		 bufs[2], *cur, *next, *t;
	struct verdict		*v;
	struct counts		 ct;
	struct sigaction	 sa;
	struct lsh_choice	 c;
	char			*cause;
	size_t			 i, j;
	double			 start;
	int			 rc, status = EXIT_OK, eof = 0, outfd, serve;
	int			 ahead;
	struct readahead	 ra;

	log_init("mhfilter");
	parse_options(argc, argv, &o);
	argc -= optind;
	argv += optind;
	log_verbose(o.verbose);
	serve = o.nlisten > 0 || notify_listen_count() > 0;
	if (serve && argc > 0 && !o.explain)
		usage_error("no files in daemon mode: clients send the records");

	asked = o.f.p;
	o.f.p.texts = o.f.verify == VERIFY_EXACT;
	o.f.p.verify = o.f.verify;
	if (o.maint != MAINT_NONE)
		return (run_maint(&o));
	if (o.explain) {
		/* With an existing index, explain the parameters it holds. */
		if (o.db != NULL) {
			if (index_exists(o.db, NULL)) {
				rc = index_open(&the_index, o.db, INDEX_RDONLY,
				    &o.f.p, o.given, &cause);
				if (rc != 0) {
					log_warnx("%s", cause);
					free(cause);
					return (index_exit_status(rc));
				}
				index_close(the_index);
				the_index = NULL;
			}
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
		return (index_exit_status(rc));
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
	if (serve)
		return (run_daemon(&o));

	outfd = STDOUT_FILENO;
	if (o.output != NULL && strcmp(o.output, "-") != 0 &&
	    (outfd = open(o.output, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC,
	    0666)) == -1) {
		log_warn("--output %s", o.output);
		return (EXIT_ERROR);
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);	/* write errors are reported */
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	o.f.parse = parse_record;
	o.f.parse_arg = &o;
	f = filter_create(&o.f);
	in = input_open(argv, argc, o.delim, o.max_bytes);
	out = output_open(outfd, o.mode, o.format, o.delim);
	for (i = 0; i < 2; i++) {
		bufs[i].recs = xcalloc(o.batch, sizeof *bufs[i].recs);
		bufs[i].vs = xcalloc(o.batch, sizeof *bufs[i].vs);
		bufs[i].fb = fbatch_create(f);
	}
	cur = &bufs[0];
	next = &bufs[1];
	memset(&ct, 0, sizeof ct);
	start = now_seconds();

	/*
	 * Two batches in flight: while one is decided, committed and written,
	 * the next, when the input has it at once, is read and hashed in the
	 * background (filter_prepare_start; read there too when the inputs
	 * are regular files, struct readahead).  A paused producer gets its
	 * answers without waiting for more input.
	 */
	memset(&ra, 0, sizeof ra);
	ra.o = &o;
	ra.in = in;
	ra.done = !input_regular(in);
	ahead = 0;
	for (;;) {
		if (!ahead) {
			if (eof || status != EXIT_OK || stop_signal)
				break;
			status = read_batch(&o, in, cur->recs, cur->vs,
			    &cur->n, &ct, &eof);
			if (cur->n == 0)
				continue;
			filter_prepare(cur->fb, cur->recs, cur->vs, cur->n);
		}
		filter_prepare_wait(cur->fb);
		if (ahead && !ra.done) {
			/* Read in the background: take its counts back. */
			ct.records = ra.ct.records;
			ct.bytes = ra.ct.bytes;
			eof = ra.eof;
			if (status == EXIT_OK)
				status = ra.status;
		}
		ahead = 0;
		if (cur->n == 0)
			continue;
		if ((rc = screen_batch(&o, cur, &ct)) != 0) {
			status = rc;
			fbatch_truncate(cur->fb, cur->n);
		}
		if (!eof && status == EXIT_OK && !stop_signal &&
		    input_wait(in, INPUT_GRACE)) {
			ra.b = next;
			if (ra.done)
				status = read_batch(&o, in, next->recs,
				    next->vs, &next->n, &ct, &eof);
			else
				ra.ct = ct;
			if (!ra.done || next->n > 0) {
				filter_prepare_start(next->fb, fill_batch,
				    &ra);
				ahead = 1;
			}
		}
		/* Decide and commit first; only then write. */
		if ((rc = filter_decide(cur->fb, the_index, &cause)) != 0) {
			log_warnx("%s", cause);
			free(cause);
			status = EXIT_ERROR;
			break;
		}
		ct.batches++;
		for (i = 0; i < cur->n; i++) {
			v = &cur->vs[i];
			switch (v->kind) {
			case V_UNIQUE:
				ct.unique++;
				ct.replayed += v->replay;
				break;
			case V_DUPLICATE:
				ct.duplicates++;
				break;
			case V_EMPTY:
				ct.empty++;
				break;
			case V_SKIP:
				continue;
			}
			if (output_record(out, &cur->recs[i], v, &cause) != 0)
				break;
		}
		if (i < cur->n || output_flush(out, &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
			status = EXIT_ERROR;
			break;
		}
		if (o.progress)
			progress(&ct, ahead && ra.done ? next->n : 0, start,
			    0);
		t = cur;
		cur = next;
		next = t;
	}
	/* A batch read ahead of a failure is neither committed nor written. */
	filter_prepare_wait(next->fb);
	if (o.progress)
		progress(&ct, 0, start, 1);
	if (stop_signal && status == EXIT_OK) {
		log_warnx("interrupted by signal %d: every record read so far "
		    "was committed and written", (int)stop_signal);
		status = 128 + stop_signal;
	}
	if (o.stats)
		print_stats(&ct, f, now_seconds() - start);

	for (j = 0; j < 2; j++) {
		fbatch_free(bufs[j].fb);
		for (i = 0; i < o.batch; i++) {
			record_free(&bufs[j].recs[i]);
			verdict_free(&bufs[j].vs[i]);
		}
		free(bufs[j].recs);
		free(bufs[j].vs);
	}
	output_close(out);
	if (outfd != STDOUT_FILENO && close(outfd) == -1 &&
	    status == EXIT_OK) {
		log_warn("--output %s", o.output);
		status = EXIT_ERROR;
	}
	input_close(in);
	filter_free(f);
	free(o.listen);
	cleanup();
	return (status);
}
