/*
 * mhfilter: main and its options.
 *
 * The options (command line, and --config's file before it) become the
 * settings of the parts: the filter (filter.c), the pipeline (pipeline.c),
 * and the source that feeds it, the file stream (stream.c) or the daemon's
 * clients (daemon.c); or of one maintenance mode (maint.c).
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
#include <sys/stat.h>
#include <unistd.h>

#include "mhfilter.h"

struct options {
	struct filter_opts	 f;
	struct pipeline_opts	 pl;
	struct stream_opts	 s;
	struct daemon_opts	 d;
	struct milter_opts	 m;
	struct client_opts	 c;		/* --connect */
	int			 given;		/* IP_* */
	const char		*db;
	const char		*redis_pwfile;	/* --redis-password-file */
	double			 max_fn;
	double			 max_fp;
	int			 explain;
	int			 fields;	/* --text/id-field not default */
	int			 verbose;
	const char		*config;	/* --config */
	int			 listen_src;	/* 1 config, 2 command line */
	int			 maint;		/* MAINT_* */
	const char		*maint_arg;	/* its FILE or DIR */
	/* Mail (-f mail). */
	int			 mail_single;	/* --single */
	int			 mda;		/* --mda */
	uint64_t		 min_text;	/* --mail-min-text */
	int			 print_verdict;	/* --print-verdict */
	int			 check_config;	/* --check-config */
	int			 replay_given;	/* --replay */
	int			 threads_given;	/* --threads */
	int			 group;		/* --group */
};

enum {
	OPT_TEXT_FIELD = 256, OPT_ID_FIELD, OPT_MAX_BYTES, OPT_ON_BAD,
	OPT_MAX_FN, OPT_MAX_FP, OPT_NORMALIZE, OPT_SEED, OPT_VERIFY,
	OPT_MAX_CAND, OPT_NO_CHAIN, OPT_BATCH, OPT_STATS, OPT_PROGRESS,
	OPT_NO_PROGRESS, OPT_EXPLAIN, OPT_MAP_SIZE, OPT_THREADS, OPT_MEMTABLE,
	OPT_MEASURE
};

/* Daemon mode's options, and --config (a range of their own). */
enum {
	OPT_LISTEN = 512, OPT_BATCH_DELAY, OPT_MAX_CLIENTS, OPT_IDLE_TIMEOUT,
	OPT_HTTP, OPT_LOG_FILE, OPT_CONFIG, OPT_TLS_CERT, OPT_TLS_KEY,
	OPT_TLS_CLIENT_CA, OPT_TRUSTED_NETWORK, OPT_REDIS_PASSWORD_FILE,
	OPT_CHECK_CONFIG
};

/* Retention and the maintenance modes (a range of their own). */
enum {
	OPT_RETAIN = 768, OPT_MAX_DOCS, OPT_TIME_FIELD, OPT_INFO, OPT_EXPIRE,
	OPT_REMOVE, OPT_CHECK, OPT_COMPACT, OPT_EXPORT, OPT_IMPORT
};

/* Mail's options (a range of their own). */
enum {
	OPT_SINGLE = 1024, OPT_MDA, OPT_MAIL_STRIP, OPT_MILTER,
	OPT_MILTER_ACTION, OPT_MILTER_REPLY, OPT_MAX_MESSAGE, OPT_MIN_TEXT,
	OPT_PRINT_VERDICT, OPT_DUPLICATES_TO, OPT_MAIL_ALLOW
};

/* Feed semantics (a range of their own). */
enum {
	OPT_REPLAY = 1536, OPT_CLUSTERS, OPT_GROUP
};

/* The milter's, beyond the mail range's (a range of their own). */
enum {
	OPT_MILTER_SCOPE = 1792
};

/* The client's, --connect (a range of their own). */
enum {
	OPT_CONNECT = 2048, OPT_TLS_CA, OPT_CONNECT_RETRIES, OPT_CONNECT_WINDOW
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
	{ "measure", required_argument, NULL, OPT_MEASURE },
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
	{ "replay", required_argument, NULL, OPT_REPLAY },
	{ "db", required_argument, NULL, 'd' },
	{ "query-only", no_argument, NULL, 'Q' },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "map-size", required_argument, NULL, OPT_MAP_SIZE },
	{ "memtable", required_argument, NULL, OPT_MEMTABLE },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "duplicates", no_argument, NULL, 'D' },
	{ "annotate", no_argument, NULL, 'a' },
	{ "pairs", no_argument, NULL, 'p' },
	{ "clusters", no_argument, NULL, OPT_CLUSTERS },
	{ "group", no_argument, NULL, OPT_GROUP },
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
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "tls-client-ca", required_argument, NULL, OPT_TLS_CLIENT_CA },
	{ "trusted-network", no_argument, NULL, OPT_TRUSTED_NETWORK },
	{ "redis-password-file", required_argument, NULL,
	    OPT_REDIS_PASSWORD_FILE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "check-config", no_argument, NULL, OPT_CHECK_CONFIG },
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
	{ "single", no_argument, NULL, OPT_SINGLE },
	{ "mda", no_argument, NULL, OPT_MDA },
	{ "max-message", required_argument, NULL, OPT_MAX_MESSAGE },
	{ "print-verdict", no_argument, NULL, OPT_PRINT_VERDICT },
	{ "duplicates-to", required_argument, NULL, OPT_DUPLICATES_TO },
	{ "mail-allow", required_argument, NULL, OPT_MAIL_ALLOW },
	{ "mail-min-text", required_argument, NULL, OPT_MIN_TEXT },
	{ "mail-strip", required_argument, NULL, OPT_MAIL_STRIP },
	{ "milter", required_argument, NULL, OPT_MILTER },
	{ "milter-action", required_argument, NULL, OPT_MILTER_ACTION },
	{ "milter-reply", required_argument, NULL, OPT_MILTER_REPLY },
	{ "milter-scope", required_argument, NULL, OPT_MILTER_SCOPE },
	{ "connect", required_argument, NULL, OPT_CONNECT },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "connect-retries", required_argument, NULL, OPT_CONNECT_RETRIES },
	{ "connect-window", required_argument, NULL, OPT_CONNECT_WINDOW },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 }
};

/* Keys a configuration file may not set. */
static const char *const conf_forbidden[] = {
	"config", "help", "version", "explain", "info", "expire", "remove",
	"check", "compact", "export", "import", NULL
};

static struct index		*the_index;
static const char		*conf_file;	/* being applied, for errors */
static const unsigned		*conf_lines;
static char			**conf_argv;	/* its settings, as options */

static void	usage(FILE *);
static void	usage_error(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	parse_options(int, char **, struct options *);
static void	apply_options(int, char **, struct options *);
static void	check_options(struct options *, int, int);
static void	load_config(struct options *, const char *);
static void	choose_bands(struct options *);
static int	run_explain(struct options *);
static int	run_filter(struct options *, const struct index_params *, int,
		    char **, int);
static void	set_maint(struct options *, int, const char *);
static void	check_maint(struct options *, int);
static int	run_maint(struct options *);
static void	check_service(const struct options *);
static void	check_connect(struct options *, int);
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
"  -f, --format FMT         line (default), tsv (id TAB text), jsonl or mail\n"
"                           (mbox files, Maildir directories, news articles)\n"
"      --text-field NAME    jsonl: field with the text (default text)\n"
"      --id-field NAME      jsonl: field with the id (default id)\n"
"      --time-field NAME    jsonl: field with the document time (RFC 3339\n"
"                           or epoch seconds; default: insertion time)\n"
"      --max-bytes SIZE     longest record (default 8M)\n"
"      --on-bad-input P     skip (default), pass or fail\n"
"Mail (-f mail):\n"
"      --single             the input is one message (written as read)\n"
"      --mda                one message on stdin, nothing written; exit 0 if\n"
"                           a duplicate, 1 if not (needs --db)\n"
"      --print-verdict      --mda: print duplicate, unique or unchecked and\n"
"                           exit 0 (for Sieve's execute :output)\n"
"      --mail-strip LIST    cut quotes,signature,footer (default) or none\n"
"      --max-message SIZE   longest message judged (default 256M); a longer\n"
"                           one, or one whose text is over --max-bytes, is\n"
"                           passed through unchecked\n"
"      --mail-min-text N    pass a body text shorter than N bytes through\n"
"                           unchecked (default 40; 0: judge all)\n"
"      --mail-allow RULE    never judge mail with list-id:ID, from:ADDRESS\n"
"                           or to:ADDRESS (@domain too; repeatable)\n"
"Algorithm:\n"
"  -t, --threshold T        similarity of a duplicate (default 0.8)\n"
"      --measure M          jaccard (default), or containment: the share of\n"
"                           the record found in one earlier document\n"
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
"      --replay WHICH       rewrite an earlier run's records only if they\n"
"                           were not delivered: undelivered (default), or\n"
"                           all of them\n"
"      --map-size SIZE      initial index map size (default 1G)\n"
"      --redis-password-file FILE\n"
"                           Redis AUTH: a line 'password' or 'user password'\n"
"      --memtable SIZE      memory for band entries not yet merged\n"
"                           (default 64M)\n"
"      --threads N          threads that normalise and sign (default:\n"
"                           one per CPU)\n"
"      --retain DURATION    expire documents older than this (30d, 12h, 2w)\n"
"      --max-docs N         expire the oldest documents beyond N\n"
"Output:\n"
"  -D, --duplicates         write the duplicates, not the unique records\n"
"      --duplicates-to PATH append the duplicates to PATH as well (mail:\n"
"                           an mbox, or a Maildir if PATH is a directory)\n"
"  -a, --annotate           write every record with its verdict\n"
"  -p, --pairs              write every verified pair\n"
"      --clusters           write each record's id and its group's\n"
"      --group              -a, -p: add the group (its first document)\n"
"      --stats              print a summary on stderr at the end\n"
"      --[no-]progress      progress on stderr (default: if a terminal)\n"
"  -q, --quiet              no warnings about bad records\n"
"      --explain            print the band choice and S-curve, then exit\n"
"  -o, --output FILE        write to FILE (appended in daemon mode)\n"
"  -v, --verbose            more messages (daemon: each connection)\n"
"Daemon:\n"
"      --listen ADDR        serve unix:PATH, tls:HOST:PORT or tcp:HOST:PORT\n"
"                           (repeatable; tcp: on loopback only unless\n"
"                           --trusted-network)\n"
"      --tls-cert FILE      tls: the server's certificate chain (PEM)\n"
"      --tls-key FILE       tls: its private key (PEM); both re-read on SIGHUP\n"
"      --tls-client-ca FILE tls: require client certificates signed by it\n"
"      --trusted-network    allow plaintext tcp: beyond loopback\n"
"      --batch-delay TIME   longest wait before a batch commits (default 5ms)\n"
"      --max-clients N      clients at once (default 256)\n"
"      --idle-timeout TIME  close silent clients (default 10m, 0: never)\n"
"      --http HOST:PORT     serve /metrics and /healthz (no HOST: loopback;\n"
"                           daemon or milter)\n"
"      --log-file FILE      log there, not to stderr (reopened on SIGHUP)\n"
"      --config FILE        read long options from FILE, key = value\n"
"      --check-config       check the options as a start would, then exit\n"
"                           (0, or 2 saying what is wrong)\n"
"Milter (a mail filter for Postfix and Sendmail):\n"
"      --milter SOCKET      serve unix:PATH or inet:PORT@HOST\n"
"      --milter-action A    what a duplicate gets: header (default),\n"
"                           quarantine, reject or discard\n"
"      --milter-reply TEXT  the reply to a rejected duplicate (default\n"
"                           '550 5.7.1 Duplicate message')\n"
"      --milter-scope S     who had it: recipient (default: each one's\n"
"                           copies) or message (anyone's: list servers)\n"
"Client (send the records to a daemon, write what it answers):\n"
"      --connect ADDR       unix:PATH, tcp:HOST:PORT or tls:HOST:PORT\n"
"      --tls-ca FILE        tls: the CA of the daemon's certificate (default:\n"
"                           the system's); --tls-cert, --tls-key: the\n"
"                           client's own\n"
"      --connect-retries N  failed attempts in a row before exit 1 (default 10)\n"
"      --connect-window N   records sent ahead of their replies (default 10000)\n"
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
	char	 raw[512];

	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	/* An error that ends the program: priority err in the journal. */
	if (conf_file != NULL && optind >= 2)	/* one entry per argument */
		log_errx("%s:%u: %s", conf_file, conf_lines[optind - 2], raw);
	else
		log_errx("%s", raw);
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
	o->pl.delim = '\n';
	o->pl.text_field = "text";
	o->pl.id_field = "id";
	o->pl.max_bytes = 8U << 20;
	o->pl.max_message = 256U << 20;
	o->min_text = 40;
	o->pl.batch = 4000;
	o->max_fn = 0.01;
	o->max_fp = 0.05;
	o->s.progress = isatty(STDERR_FILENO);
	o->d.batch_delay = 0.005;
	snprintf(o->m.reply_code, sizeof o->m.reply_code, "550");
	snprintf(o->m.reply_xcode, sizeof o->m.reply_xcode, "5.7.1");
	snprintf(o->m.reply_text, sizeof o->m.reply_text,
	    "Duplicate message");
	o->d.idle_timeout = 600;
	o->d.max_clients = 256;
	o->c.retries = 10;
	o->c.window = 10000;

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
	if (o->pl.format != FORMAT_JSONL && o->fields)
		usage_error("--text-field and --id-field go with --format "
		    "jsonl");
	if (o->d.http != NULL && o->d.nlisten == 0 && o->m.socket == NULL &&
	    notify_listen_count() == 0)
		usage_error("--http needs --listen or --milter (or sockets from "
		    "systemd)");
	check_maint(o, argc - optind);
	choose_bands(o);
}

/* The values of an option that takes a word (keyword); hidden: not listed. */
struct keyword {
	const char	*word;
	int		 value;
	int		 hidden;
};

static const struct keyword formats[] = {
	{ "line", FORMAT_LINE, 0 }, { "tsv", FORMAT_TSV, 0 },
	{ "jsonl", FORMAT_JSONL, 0 }, { "json", FORMAT_JSONL, 1 },
	{ "mail", FORMAT_MAIL, 0 }, { "news", FORMAT_MAIL, 1 }, { NULL, 0, 0 }
};
static const struct keyword policies[] = {
	{ "skip", POLICY_SKIP, 0 }, { "pass", POLICY_PASS, 0 },
	{ "fail", POLICY_FAIL, 0 }, { NULL, 0, 0 }
};
static const struct keyword units[] = {
	{ "char", UNIT_CHAR, 0 }, { "word", UNIT_WORD, 0 }, { NULL, 0, 0 }
};
static const struct keyword verifies[] = {
	{ "exact", VERIFY_EXACT, 0 }, { "signature", VERIFY_SIGNATURE, 0 },
	{ "none", VERIFY_NONE, 0 }, { NULL, 0, 0 }
};
static const struct keyword measures[] = {
	{ "jaccard", MEASURE_JACCARD, 0 },
	{ "containment", MEASURE_CONTAINMENT, 0 }, { NULL, 0, 0 }
};
static const struct keyword replays[] = {
	{ "undelivered", REPLAY_UNDELIVERED, 0 }, { "all", REPLAY_ALL, 0 },
	{ NULL, 0, 0 }
};
static const struct keyword milter_scopes[] = {
	{ "recipient", MILTER_SCOPE_RECIPIENT, 0 },
	{ "message", MILTER_SCOPE_MESSAGE, 0 }, { NULL, 0, 0 }
};

/*
 * The value of word arg of option name in kw, or a usage error naming
 * what (format, policy...) and the words to use.
 */
static int
keyword(const char *name, const char *arg, const struct keyword *kw,
    const char *what)
{
	struct buf	 use = { 0 };
	const char	*last = NULL;
	size_t		 i;

	for (i = 0; kw[i].word != NULL; i++)
		if (strcmp(arg, kw[i].word) == 0)
			return (kw[i].value);
	for (i = 0; kw[i].word != NULL; i++) {
		if (kw[i].hidden)
			continue;
		if (last != NULL) {
			if (use.len > 0)
				buf_append(&use, ", ", 2);
			buf_append(&use, last, strlen(last));
		}
		last = kw[i].word;
	}
	buf_append(&use, "", 1);
	usage_error("%s: unknown %s '%s' (use %s or %s)", name, what, arg,
	    use.data, last);
	/* NOTREACHED */
	return (-1);
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
	int		 mf;

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
			o->pl.delim = '\0';
			break;
		case 'f':
			o->pl.format = keyword(name, optarg, formats, "format");
			break;
		case OPT_TEXT_FIELD:
			o->pl.text_field = optarg;
			o->fields |= strcmp(optarg, "text") != 0;
			break;
		case OPT_ID_FIELD:
			o->pl.id_field = optarg;
			o->fields |= strcmp(optarg, "id") != 0;
			break;
		case OPT_MAX_BYTES:
			NUMBER(parse_size, 1, 1ULL << 30, &o->pl.max_bytes);
			break;
		case OPT_ON_BAD:
			o->pl.policy = keyword(name, optarg, policies, "policy");
			break;
		case 't':
			NUMBER(parse_double, 0.01, 1.0, &o->f.p.threshold);
			o->given |= IP_THRESHOLD;
			break;
		case OPT_MEASURE:
			o->f.p.measure = keyword(name, optarg, measures,
			    "measure");
			o->given |= IP_MEASURE;
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
			o->f.p.unit = keyword(name, optarg, units, "unit");
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
			o->f.verify = keyword(name, optarg, verifies, "mode");
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
		case OPT_REPLAY:
			o->f.replay = keyword(name, optarg, replays, "mode");
			o->replay_given = 1;
			break;
		case OPT_BATCH:
			NUMBER(parse_uint, 1, 1000000, &u);
			o->pl.batch = u;
			break;
		case OPT_MAP_SIZE:
			NUMBER(parse_size, 1 << 20, 1ULL << 44,
			    &o->f.p.mapsize);
			break;
		case OPT_MEMTABLE:
			NUMBER(parse_size, 1 << 16, 1ULL << 40,
			    &o->f.p.memtable);
			break;
		case OPT_THREADS:
			NUMBER(parse_uint, 1, 64, &u);
			o->f.threads = u;
			o->threads_given = 1;
			break;
		case 'D':
			o->pl.mode = OUT_DUPLICATES;
			modes++;
			break;
		case 'a':
			o->pl.mode = OUT_ANNOTATE;
			modes++;
			break;
		case 'p':
			o->pl.mode = OUT_PAIRS;
			o->f.want_pairs = 1;
			modes++;
			break;
		case OPT_CLUSTERS:
			o->pl.mode = OUT_CLUSTERS;
			modes++;
			break;
		case OPT_GROUP:
			o->group = 1;
			break;
		case OPT_STATS:
			o->s.stats = o->d.stats = 1;
			break;
		case OPT_PROGRESS:
			o->s.progress = 1;
			break;
		case OPT_NO_PROGRESS:
			o->s.progress = 0;
			break;
		case 'q':
			o->pl.quiet = 1;
			break;
		case OPT_EXPLAIN:
			o->explain = 1;
			break;
		case 'o':
			o->s.output = o->d.output = optarg;
			break;
		case 'v':
			o->verbose++;
			break;
		case OPT_LISTEN:
			if (o->listen_src != src) {
				/* The command line's replace the file's. */
				o->d.nlisten = 0;
				o->listen_src = src;
			}
			o->d.listen = xreallocarray(o->d.listen, o->d.nlisten + 1,
			    sizeof *o->d.listen);
			o->d.listen[o->d.nlisten++] = optarg;
			break;
		case OPT_BATCH_DELAY:
			NUMBER(daemon_parse_time, 0, 60, &o->d.batch_delay);
			break;
		case OPT_IDLE_TIMEOUT:
			NUMBER(daemon_parse_time, 0, 86400 * 365,
			    &o->d.idle_timeout);
			break;
		case OPT_MAX_CLIENTS:
			NUMBER(parse_uint, 1, 100000, &o->d.max_clients);
			break;
		case OPT_HTTP:
			o->d.http = optarg;
			break;
		case OPT_LOG_FILE:
			o->d.log_file = optarg;
			break;
		case OPT_TLS_CERT:
			o->d.tls.cert = optarg;
			break;
		case OPT_TLS_KEY:
			o->d.tls.key = optarg;
			break;
		case OPT_TLS_CLIENT_CA:
			o->d.tls.client_ca = optarg;
			break;
		case OPT_TRUSTED_NETWORK:
			o->d.trusted_network = 1;
			break;
		case OPT_REDIS_PASSWORD_FILE:
			o->redis_pwfile = optarg;	/* read by main */
			break;
		case OPT_CHECK_CONFIG:
			o->check_config = 1;
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
			o->pl.time_field = optarg;
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
		case OPT_SINGLE:
			o->mail_single = 1;
			break;
		case OPT_MDA:
			o->mda = o->mail_single = 1;
			o->pl.format = FORMAT_MAIL;
			break;
		case OPT_PRINT_VERDICT:
			o->print_verdict = 1;
			break;
		case OPT_DUPLICATES_TO:
			o->s.duplicates_to = optarg;
			break;
		case OPT_MAIL_ALLOW:
			if (mail_allow_add(optarg, &cause) != 0)
				usage_error("%s: %s", name, cause);
			break;
		case OPT_MAX_MESSAGE:
			NUMBER(parse_size, 1, 1ULL << 32, &o->pl.max_message);
			break;
		case OPT_MIN_TEXT:
			NUMBER(parse_size, 0, 1ULL << 30, &o->min_text);
			break;
		case OPT_MILTER:
			o->m.socket = optarg;
			o->pl.format = FORMAT_MAIL;
			break;
		case OPT_MILTER_ACTION:
			if (milter_parse_action(optarg, &o->m.action) != 0)
				usage_error("%s: unknown action '%s' (use header, "
				    "quarantine, reject or discard)", name,
				    optarg);
			break;
		case OPT_MILTER_SCOPE:
			o->m.scope = keyword(name, optarg, milter_scopes,
			    "scope");
			break;
		case OPT_MILTER_REPLY:
			if (milter_parse_reply(optarg, o->m.reply_code,
			    o->m.reply_xcode, o->m.reply_text,
			    sizeof o->m.reply_text, &cause) != 0)
				usage_error("%s: %s", name, cause);
			break;
		case OPT_CONNECT:
			if (client_check_addr(optarg, &cause) != 0)
				usage_error("%s", cause);
			o->c.addr = optarg;
			break;
		case OPT_TLS_CA:
			o->c.tls.ca = optarg;
			break;
		case OPT_CONNECT_RETRIES:
			NUMBER(parse_uint, 0, 1000, &o->c.retries);
			break;
		case OPT_CONNECT_WINDOW:
			NUMBER(parse_uint, 1, 1000000, &o->c.window);
			break;
		case OPT_MAIL_STRIP:
			mf = mail_flags();
			if (mail_strip_parse(optarg, &mf, &cause) != 0)
				usage_error("%s: %s", name, cause);
			mail_set_flags(mf);
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
	check_options(o, modes, src);
}

/*
 * What apply_options found, taken together: the options that exclude or
 * need each other (modes output modes given, src 2 for the command line,
 * whose options are complete), and what mail input makes of the rest.
 */
static void
check_options(struct options *o, int modes, int src)
{
	char	*cause;

	if (modes > 1)
		usage_error("--duplicates, --annotate, --pairs and --clusters "
		    "are exclusive");
	if (o->group && o->pl.mode != OUT_ANNOTATE && o->pl.mode != OUT_PAIRS)
		usage_error("--group goes with --annotate or --pairs");

	/* The milter reads mail, whatever a shared configuration's -f. */
	if (o->m.socket != NULL)
		o->pl.format = FORMAT_MAIL;
	/*
	 * Mail: the delimiter becomes input.c's framing (mbox and Maildir,
	 * or one message an input) unless -z asks for NUL-terminated
	 * messages; --mda writes nothing and leaves ids out (mail.c).
	 */
	if (o->pl.format == FORMAT_MAIL) {
		if (o->pl.delim != '\0')
			o->pl.delim = o->mail_single ? INPUT_SINGLE : INPUT_MBOX;
		if (o->mda) {
			if (modes > 0 || (o->pl.mode != OUT_UNIQUE &&
			    o->pl.mode != OUT_NONE))
				usage_error("--mda writes nothing: no "
				    "--duplicates, --annotate or --pairs");
			o->pl.mode = OUT_NONE;
		}

		mail_set_limits(o->pl.max_bytes, o->min_text);
		/* (GMime and libxml2 come with the mail module: see mailload.c.) */
		if (mail_init(&cause) != 0) {
			log_errx("%s", cause);
			exit(EXIT_ERROR);
		}
	} else if (src == 2 && (o->mail_single || o->mda))
		usage_error("--single and --mda go with --format mail");
	if (src == 2 && o->s.duplicates_to != NULL && (modes > 0 ||
	    o->mda || o->d.nlisten > 0 || o->m.socket != NULL))
		usage_error("--duplicates-to goes with the stream filter's "
		    "default output, the unique records");
	if (src == 2 && o->print_verdict && !o->mda)
		usage_error("--print-verdict goes with --mda");
	if (src == 2 && o->mda && o->db == NULL)
		usage_error("--mda needs --db (a temporary index remembers "
		    "nothing)");
	if (src == 2 && o->mda && o->d.nlisten > 0)
		usage_error("--mda and --listen are exclusive");
	if (o->group)
		o->pl.mode |= OUT_GROUP;
	if (src == 2 && o->m.socket != NULL && (o->d.nlisten > 0 || o->mda))
		usage_error("--milter and --%s are exclusive", o->mda ? "mda" :
		    "listen");
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

/*
 * Settle K, b and r from the options and the threshold.  Under
 * containment b is a part's (lsh.c: parts), and the index's bands are
 * every part's.
 */
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
		lsh_choose(p->perms, lsh_bound(p->measure, p->threshold),
		    o->max_fn, o->max_fp, &c);
		p->bands = c.b;
		p->rows = c.r;
	}
	p->bands *= lsh_parts(p->measure);
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

	if (o->pl.time_field != NULL && o->pl.format != FORMAT_JSONL)
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
	if (o->d.nlisten > 0 && o->listen_src == 2)
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
	mo.batch = o->pl.batch;
	mo.quiet = o->pl.quiet;
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
 * --explain: the band choice and its S-curve; with an existing index, of
 * the parameters it holds.
 */
static int
run_explain(struct options *o)
{
	struct lsh_choice	 c;
	char			*cause;
	int			 rc;

	if (o->db != NULL && index_exists(o->db, NULL)) {
		rc = index_open(&the_index, o->db, INDEX_RDONLY, &o->f.p,
		    o->given, &cause);
		if (rc != 0) {
			log_errx("%s", cause);
			free(cause);
			return (index_exit_status(rc));
		}
		index_close(the_index);
		the_index = NULL;
	}
	lsh_rate(lsh_bound(o->f.p.measure, o->f.p.threshold), o->f.p.bands /
	    lsh_parts(o->f.p.measure), o->f.p.rows, &c);
	if (o->f.p.measure == MEASURE_CONTAINMENT)
		printf("containment %.2f: the bands are chosen for Jaccard "
		    "similarity %.3f,\nthat of a record and an earlier "
		    "document of its size holding %.2f of it,\nfor each of "
		    "%u parts: the whole text, its first half and first "
		    "quarter.\n\n", o->f.p.threshold,
		    lsh_bound(MEASURE_CONTAINMENT, o->f.p.threshold),
		    o->f.p.threshold, LSH_PARTS);
	lsh_explain(stdout, o->f.p.perms, lsh_bound(o->f.p.measure,
	    o->f.p.threshold), &c);
	/* The bounds asked for, when no bands and rows meet them. */
	if (c.fn > o->max_fn || c.fp > o->max_fp)
		putchar('\n');
	if (c.fn > o->max_fn)
		printf("--max-fn %g is not met: fn is %.6f (more --perms "
		    "would help)\n", o->max_fn, c.fn);
	if (c.fp > o->max_fp)
		printf("--max-fp %g is not met: fp is %.6f (more --perms, or "
		    "a larger --max-fn, would help)\n", o->max_fp, c.fp);
	return (EXIT_OK);
}

/*
 * Filter: open the index, then run the source (the file stream, the
 * daemon or the milter) through one pipeline.  Returns the exit status.
 */
static int
run_filter(struct options *o, const struct index_params *asked, int serve,
    char **files, int nfiles)
{
	struct pipeline		*p;
	struct lsh_choice	 c;
	char			*cause;
	int			 rc, status;

	/*
	 * A record is written (or accepted, or answered) again only if the
	 * copy indexed before may never have reached its reader (see
	 * filter.c): the stream, the milter and the daemon mark what they
	 * delivered in a persistent index, the daemon once a client's socket
	 * has taken the replies, so that a record of this run too is
	 * answered unique again when its client went away first.
	 * --replay all answers every earlier copy again.
	 */
	if (serve && o->m.socket == NULL && o->db != NULL)
		o->f.run_unsure = 1;
	o->pl.track = o->db != NULL && !o->f.query_only &&
	    o->f.replay == REPLAY_UNDELIVERED;
	rc = index_open(&the_index, o->db, (o->f.query_only ? INDEX_RDONLY :
	    0) | (o->pl.track ? INDEX_TRACK : 0), &o->f.p, o->given, &cause);
	if (rc != 0) {
		log_errx("%s", cause);
		free(cause);
		return (index_exit_status(rc));
	}
	atexit(cleanup);
	o->f.verify = o->f.p.verify;
	if (o->f.p.measure == MEASURE_CONTAINMENT &&
	    o->f.verify != VERIFY_EXACT) {
		log_errx("--measure containment needs --verify exact: the "
		    "share of a record found in a document is counted on "
		    "their texts");
		return (EXIT_USAGE);
	}
	if (o->f.p.measure == MEASURE_CONTAINMENT && o->m.socket != NULL) {
		/* (An import could not make its recipients' parts again.) */
		log_errx("--milter judges by Jaccard similarity: give it an "
		    "index made without --measure containment");
		return (EXIT_USAGE);
	}
	lsh_rate(lsh_bound(o->f.p.measure, o->f.p.threshold), o->f.p.bands /
	    lsh_parts(o->f.p.measure), o->f.p.rows, &c);
	if ((o->given & IP_THRESHOLD) && o->f.p.bands != asked->bands &&
	    c.fn > o->max_fn)
		log_warnx("the index's bands (%u x %u rows) miss %.1f%% of the "
		    "pairs at similarity %.2f; an index made with -t %.2f "
		    "would not", c.b, c.r, 100 * c.fn, o->f.p.threshold,
		    o->f.p.threshold);

	o->pl.stop_on_error = !serve;
	p = pipeline_create(&o->pl, &o->f, the_index);
	if (o->m.socket != NULL) {
		o->m.batch_delay = o->d.batch_delay;
		o->m.stats = o->d.stats;
		o->m.http = o->d.http;
		o->m.log_file = o->d.log_file;
		status = milter_run(&o->m, p);
	} else if (serve)
		status = daemon_run(&o->d, p);
	else
		status = stream_run(&o->s, p, files, nfiles);
	/*
	 * Mail: --mda's exit status says duplicate or not, or (with
	 * --print-verdict) its output does (mailload.c).
	 */
	if (o->mda)
		status = mail_mda_status(pipeline_counts(p), status,
		    o->print_verdict);
	pipeline_exit(p);	/* main exits with the status */
	cleanup();
	return (status);
}

/* Can a file be made or appended to at path (its directory exists)? */
static int
check_writable(const char *what, const char *path)
{
	char	*dir, *slash;
	int	 ok;

	if (path == NULL || strcmp(path, "-") == 0)
		return (0);
	if (access(path, F_OK) == 0) {
		if (access(path, W_OK) == 0)
			return (0);
		log_warn("%s %s", what, path);
		return (-1);
	}
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (!(ok = access(dir, W_OK|X_OK) == 0))
		log_warn("%s %s: its directory %s", what, path, dir);
	free(dir);
	return (ok ? 0 : -1);
}

/*
 * --check-config: what a start would refuse, found without starting, so
 * that a unit's ExecStartPre (or an admin after an edit) learns it before a
 * restart does: the listeners and --http, the TLS certificate and key (read
 * and matched), the files written, the index's place.  Nothing is opened
 * for good, no socket bound.  EXIT_OK, or EXIT_USAGE with messages.
 */
static int
run_check_config(struct options *o, int serve)
{
	const struct tlsmod	*tm;
	struct ssl_ctx_st	*ctx;
	struct stat		 st;
	char			*cause;
	int			 bad = 0;

	if (serve && o->m.socket == NULL &&
	    daemon_check_listen(&o->d, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		bad = 1;
	}
	if (o->m.socket != NULL &&
	    daemon_check_http(o->d.http, o->d.trusted_network, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		bad = 1;
	}
	if (o->d.tls.cert != NULL) {
		if ((tm = tls_module(&cause)) == NULL ||
		    (ctx = tm->context(&o->d.tls, &cause)) == NULL) {
			log_warnx("%s", cause);
			free(cause);
			bad = 1;
		} else
			tm->context_free(ctx);
	}
	if (check_writable("--log-file", o->d.log_file) != 0)
		bad = 1;
	if (check_writable("--output", serve ? o->d.output : o->s.output) != 0)
		bad = 1;
	if (o->db != NULL && !index_is_remote(o->db) &&
	    stat(o->db, &st) == 0 && !S_ISDIR(st.st_mode)) {
		log_warnx("--db %s: not a directory", o->db);
		bad = 1;
	} else if (o->db != NULL && !index_is_remote(o->db) &&
	    stat(o->db, &st) != 0 && check_writable("--db", o->db) != 0)
		bad = 1;
	if (bad)
		return (EXIT_USAGE);
	printf("mhfilter: configuration OK%s%s\n", o->config != NULL ?
	    ": " : "", o->config != NULL ? o->config : "");
	return (EXIT_OK);
}

/*
 * A configuration file without listen makes a filter of standard input.
 * Started by systemd (a service's environment) with no socket either, and
 * with nothing to read (not a pipe, file or terminal: /dev/null), that is
 * a daemon whose configuration lacks its address: refuse, saying so,
 * rather than filter nothing and exit 0 for the unit to be restarted.
 */
static void
check_service(const struct options *o)
{
	static const char *const vars[] = {
		"NOTIFY_SOCKET", "LISTEN_FDS", "INVOCATION_ID"
	};
	struct stat	 st;
	size_t		 i;

	if (o->config == NULL || isatty(STDIN_FILENO) ||
	    (fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) ||
	    S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode))))
		return;
	for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		if (getenv(vars[i]) != NULL)
			usage_error("started by systemd (%s is set) with no "
			    "socket: %s has no listen key and systemd passed "
			    "no sockets (add \"listen = ADDRESS\" there, or "
			    "a .socket unit)", vars[i], o->config);
	}
}

/*
 * --connect: the client (client.c) reads and writes as the stream, and
 * the daemon decides; what only a local index or a server can do is
 * refused (exit 2).  files is the number of file operands.
 */
static void
check_connect(struct options *o, int files)
{
	if (o->d.nlisten > 0 && o->listen_src == 2)
		usage_error("--connect and --listen are exclusive");
	if (o->m.socket != NULL)
		usage_error("--connect and --milter are exclusive");
	if (o->mda)
		usage_error("--connect and --mda are exclusive");
	if (o->maint != MAINT_NONE)
		usage_error("--connect and %s are exclusive",
		    maint_opts[o->maint]);
	if (o->explain)
		usage_error("--connect and --explain are exclusive");
	if (o->check_config)
		usage_error("--connect and --check-config are exclusive");
	if (o->f.query_only)
		usage_error("--connect and --query-only are exclusive: the "
		    "daemon decides");
	if (o->s.duplicates_to != NULL)
		usage_error("--connect and --duplicates-to are exclusive (use "
		    "-D)");
	if (o->s.stats)
		usage_error("--connect and --stats are exclusive (the "
		    "daemon's statistics: '#mhfilter stats')");
	if (o->mail_single && files > 1)
		usage_error("--single reads one message: give one file, or "
		    "none for standard input");
	o->c.output = o->s.output;
	o->c.tls.cert = o->d.tls.cert;
	o->c.tls.key = o->d.tls.key;
	if ((o->c.tls.cert == NULL) != (o->c.tls.key == NULL))
		usage_error("--tls-cert and --tls-key go together");
}

int
main(int argc, char **argv)
{
	struct options		 o;
	struct index_params	 asked;
	char			*cause;
	int			 status, serve;

	xmalloc_init();
	log_init("mhfilter");
	argv[0] = (char *)"mhfilter";	/* getopt's messages name it so */
	parse_options(argc, argv, &o);
	argc -= optind;
	argv += optind;
	log_verbose(o.verbose);
	if (o.c.addr != NULL) {
		check_connect(&o, argc);
		return (client_run(&o.c, &o.pl, argv, argc));
	}
	serve = o.d.nlisten > 0 || notify_listen_count() > 0 ||
	    o.m.socket != NULL;
	if (serve && argc > 0 && !o.explain)
		usage_error("no files in daemon mode: clients send the records");
	if (o.mail_single && argc > 1)
		usage_error("--%s reads one message: give one file, or none "
		    "for standard input", o.mda ? "mda" : "single");
	/*
	 * A server's event loop is one more busy thread: a worker fewer
	 * keeps the threads to the processors (one client, 200,000 records
	 * of 1 KB on two cores: 2.37-2.39 s with one worker, 2.49-2.71 s
	 * with two).
	 */
	if (serve && !o.threads_given && o.f.threads > 1)
		o.f.threads--;
	if (o.check_config) {
		status = run_check_config(&o, serve);
		free(o.d.listen);
		return (status);
	}
	if (serve && o.m.socket == NULL && !o.explain &&
	    daemon_check_listen(&o.d, &cause) != 0)
		usage_error("%s", cause);
	if (o.m.socket != NULL && !o.explain &&
	    daemon_check_http(o.d.http, o.d.trusted_network, &cause) != 0)
		usage_error("%s", cause);
	/* Read now, not while parsing: --explain opens no Redis. */
	if (o.redis_pwfile != NULL && !o.explain &&
	    index_password_file(o.redis_pwfile, &cause) != 0)
		usage_error("--redis-password-file: %s", cause);
	if (!serve && argc == 0 && o.maint == MAINT_NONE && !o.explain &&
	    !o.mda)
		check_service(&o);

	asked = o.f.p;
	o.f.p.texts = o.f.verify == VERIFY_EXACT;
	o.f.p.verify = o.f.verify;
	if (o.maint != MAINT_NONE)
		status = run_maint(&o);
	else if (o.explain)
		status = run_explain(&o);
	else
		status = run_filter(&o, &asked, serve, argv, argc);
	free(o.d.listen);
	return (status);
}
