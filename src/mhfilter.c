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
#include <stddef.h>
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
	int			 modes;		/* output modes given */
	/* Mail (-f mail). */
	int			 mail_single;	/* --single */
	int			 mda;		/* --mda */
	uint64_t		 min_text;	/* --mail-min-text */
	int			 print_verdict;	/* --print-verdict */
	int			 check_config;	/* --check-config */
	int			 threads_given;	/* --threads */
	int			 group;		/* --group */
};

/* getopt's values of the options without a short letter. */
enum {
	OPT_TEXT_FIELD = 256, OPT_ID_FIELD, OPT_MAX_BYTES, OPT_ON_BAD,
	OPT_MAX_FN, OPT_MAX_FP, OPT_NORMALIZE, OPT_SEED, OPT_VERIFY,
	OPT_MAX_CAND, OPT_NO_CHAIN, OPT_BATCH, OPT_STATS, OPT_PROGRESS,
	OPT_NO_PROGRESS, OPT_EXPLAIN, OPT_MAP_SIZE, OPT_THREADS, OPT_MEMTABLE,
	OPT_MEASURE, OPT_LISTEN, OPT_BATCH_DELAY, OPT_MAX_CLIENTS,
	OPT_IDLE_TIMEOUT, OPT_HTTP, OPT_LOG_FILE, OPT_CONFIG, OPT_TLS_CERT,
	OPT_TLS_KEY, OPT_TLS_CLIENT_CA, OPT_TRUSTED_NETWORK,
	OPT_REDIS_PASSWORD_FILE, OPT_CHECK_CONFIG, OPT_RETAIN, OPT_MAX_DOCS,
	OPT_TIME_FIELD, OPT_INFO, OPT_EXPIRE, OPT_REMOVE, OPT_CHECK,
	OPT_COMPACT, OPT_EXPORT, OPT_IMPORT, OPT_SINGLE, OPT_MDA,
	OPT_MAIL_STRIP, OPT_MILTER, OPT_MILTER_ACTION, OPT_MILTER_REPLY,
	OPT_MAX_MESSAGE, OPT_MIN_TEXT, OPT_PRINT_VERDICT, OPT_DUPLICATES_TO,
	OPT_MAIL_ALLOW, OPT_REPLAY, OPT_CLUSTERS, OPT_GROUP, OPT_MILTER_SCOPE,
	OPT_CONNECT, OPT_TLS_CA, OPT_CONNECT_RETRIES, OPT_CONNECT_WINDOW
};

/* The values of an option that takes a word (keyword); hidden: not listed. */
struct keyword {
	const char	*word;
	int		 value;
	int		 hidden;
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

/* What an option's argument is, and so how it is set. */
enum opt_kind {
	OK_CUSTOM,		/* opt_custom's business */
	OK_SET,			/* int: 1 */
	OK_CLEAR,		/* int: 0 */
	OK_STRING,		/* const char *: the argument */
	OK_WORD,		/* int: one of words */
	OK_UINT,		/* unsigned: parse_uint, lo to hi */
	OK_U64,			/* uint64_t: parse_uint */
	OK_SIZET,		/* size_t: parse_uint */
	OK_SIZE,		/* uint64_t: parse_size (8M) */
	OK_REAL,		/* double: parse_double, dlo to dhi */
	OK_TIME,		/* double seconds: parse_seconds (5ms) */
	OK_DURATION,		/* int64_t seconds: parse_duration (30d) */
	OK_MAINT,		/* a maintenance mode: lo is its MAINT_* */
	OK_MODE			/* an output mode: lo is its OUT_* */
};

#define OF_NOCONF	0x1	/* not a key of a configuration file */
#define OF_HIDDEN	0x2	/* not in --help */

/*
 * The options: each is one entry here, from which come getopt's tables,
 * --help, the keys a configuration file may set, the defaults and the
 * limits of every value.  An entry without a name is a heading of --help.
 * A value is set in struct options at off, as its kind says, within lo to
 * hi (dlo to dhi for reals), and adds the index parameters given; the
 * default, def, is set the same way, as if it were an argument.  In help,
 * a newline starts a line of the right-hand column and %D is the default.
 */
struct opt {
	const char		*name;	/* long name, NULL for a heading */
	int			 ch;	/* short letter, or an OPT_* */
	enum opt_kind		 kind;
	size_t			 off;	/* its field in struct options */
	uint64_t		 lo, hi;
	double			 dlo, dhi;
	const struct keyword	*words;	/* OK_WORD: its words */
	const char		*what;	/* OK_WORD: what a word is */
	int			 given;	/* IP_* */
	int			 flags;	/* OF_* */
	const char		*def;	/* default, as an argument */
	const char		*arg;	/* help's name of the argument, or NULL
					   for an option without one */
	const char		*show;	/* help's name of the option, if not
					   its own */
	const char		*help;
};

/*
 * The offset of field f of struct options, which must be of type t: a
 * mismatch between an entry's kind and its field does not compile.
 */
#define FIELD(t, f)							\
	(offsetof(struct options, f) +					\
	 0 * sizeof((t *)NULL - &((struct options *)NULL)->f))

static const struct opt opts[] = {
	{ .help = "Input:" },
	{ "null", 'z', OK_CUSTOM,
	  .help = "records end with NUL, not newline" },
	{ "format", 'f', OK_CUSTOM, .arg = "FMT",
	  .help = "line (default), tsv (id TAB text), jsonl, mail\n"
	  "(mbox files, Maildir directories, news articles)\n"
	  "or warc (web archives, .warc.gz too)" },
	{ "text-field", OPT_TEXT_FIELD, OK_CUSTOM, .def = "text",
	  .arg = "NAME", .help = "jsonl: field with the text (default %D)" },
	{ "id-field", OPT_ID_FIELD, OK_CUSTOM, .def = "id", .arg = "NAME",
	  .help = "jsonl: field with the id (default %D)" },
	{ "time-field", OPT_TIME_FIELD, OK_STRING,
	  FIELD(const char *, pl.time_field), .arg = "NAME",
	  .help = "jsonl: field with the document time (RFC 3339\n"
	  "or epoch seconds; default: insertion time)" },
	{ "max-bytes", OPT_MAX_BYTES, OK_SIZE, FIELD(uint64_t, pl.max_bytes),
	  1, 1ULL << 30, .def = "8M", .arg = "SIZE",
	  .help = "longest record (default %D)" },
	{ "on-bad-input", OPT_ON_BAD, OK_WORD, FIELD(int, pl.policy),
	  .words = policies, .what = "policy", .arg = "P",
	  .help = "skip (default), pass or fail" },

	{ .help = "Mail (-f mail):" },
	{ "single", OPT_SINGLE, OK_SET, FIELD(int, mail_single),
	  .help = "the input is one message (written as read)" },
	{ "mda", OPT_MDA, OK_CUSTOM,
	  .help = "one message on stdin, nothing written; exit 0 if\n"
	  "a duplicate, 1 if not (needs --db)" },
	{ "print-verdict", OPT_PRINT_VERDICT, OK_SET,
	  FIELD(int, print_verdict),
	  .help = "--mda: print duplicate, unique or unchecked and\n"
	  "exit 0 (for Sieve's execute :output)" },
	{ "mail-strip", OPT_MAIL_STRIP, OK_CUSTOM, .arg = "LIST",
	  .help = "cut quotes,signature,footer (default) or none" },
	{ "max-message", OPT_MAX_MESSAGE, OK_SIZE,
	  FIELD(uint64_t, pl.max_message), 1, 1ULL << 32, .def = "256M",
	  .arg = "SIZE",
	  .help = "longest message judged (default %D); a longer\n"
	  "one, or one whose text is over --max-bytes, is\n"
	  "passed through unchecked" },
	{ "mail-min-text", OPT_MIN_TEXT, OK_SIZE, FIELD(uint64_t, min_text),
	  0, 1ULL << 30, .def = "40", .arg = "N",
	  .help = "pass a body text shorter than N bytes through\n"
	  "unchecked (default %D; 0: judge all)" },
	{ "mail-allow", OPT_MAIL_ALLOW, OK_CUSTOM, .arg = "RULE",
	  .help = "never judge mail with list-id:ID, from:ADDRESS\n"
	  "or to:ADDRESS (@domain too; repeatable)" },

	{ .help = "Algorithm:" },
	{ "threshold", 't', OK_REAL, FIELD(double, f.p.threshold),
	  .dlo = 0.01, .dhi = 1.0, .given = IP_THRESHOLD, .def = "0.8",
	  .arg = "T", .help = "similarity of a duplicate (default %D)" },
	{ "measure", OPT_MEASURE, OK_WORD, FIELD(int, f.p.measure),
	  .words = measures, .what = "measure", .given = IP_MEASURE,
	  .arg = "M",
	  .help = "jaccard (default), or containment: the share of\n"
	  "the record found in one earlier document" },
	{ "perms", 'k', OK_UINT, FIELD(unsigned, f.p.perms), 1, MHF_MAX_PERMS,
	  .given = IP_PERMS, .def = "128", .arg = "K",
	  .help = "signature length (default %D)" },
	{ "bands", 'b', OK_UINT, FIELD(unsigned, f.p.bands), 1, MHF_MAX_PERMS,
	  .given = IP_BANDS, .arg = "B",
	  .help = "bands (default: chosen from T)" },
	{ "rows", 'r', OK_UINT, FIELD(unsigned, f.p.rows), 1, MHF_MAX_PERMS,
	  .given = IP_ROWS, .arg = "R", .help = "rows per band; B*R <= K" },
	{ "max-fn", OPT_MAX_FN, OK_REAL, FIELD(double, max_fn),
	  .dlo = 0.0, .dhi = 1.0, .def = "0.01", .arg = "P",
	  .help = "bound on P(miss | s = T) (default %D)" },
	{ "max-fp", OPT_MAX_FP, OK_REAL, FIELD(double, max_fp),
	  .dlo = 0.0, .dhi = 1.0, .def = "0.05", .arg = "P",
	  .help = "bound on P(candidate | s = T-0.25) (default %D)" },
	{ "shingle", 'n', OK_UINT, FIELD(unsigned, f.p.shingle),
	  1, MHF_MAX_SHINGLE, .given = IP_SHINGLE, .def = "5", .arg = "N",
	  .help = "units per shingle (default %D)" },
	{ "unit", 'u', OK_WORD, FIELD(int, f.p.unit), .words = units,
	  .what = "unit", .given = IP_UNIT, .def = "char", .arg = "UNIT",
	  .help = "char (default) or word" },
	{ "normalize", OPT_NORMALIZE, OK_CUSTOM, .given = IP_NORM,
	  .def = "casefold,nfkc,space", .arg = "LIST",
	  .help = "casefold,nfkc,space,punct or none\n(default %D)" },
	{ "seed", OPT_SEED, OK_U64, FIELD(uint64_t, f.p.seed), 0, UINT64_MAX,
	  .given = IP_SEED, .arg = "N", .help = "hash seed (default 0)" },
	{ "verify", OPT_VERIFY, OK_WORD, FIELD(int, f.verify),
	  .words = verifies, .what = "mode", .given = IP_VERIFY,
	  .def = "exact", .arg = "MODE",
	  .help = "exact (default), signature or none" },
	{ "max-candidates", OPT_MAX_CAND, OK_UINT,
	  FIELD(unsigned, f.max_candidates), 1, 1000000, .def = "100",
	  .arg = "N", .help = "candidates examined per record (default %D)" },
	{ "no-chain", OPT_NO_CHAIN, OK_CLEAR, FIELD(int, f.chain),
	  .help = "do not index duplicates" },

	{ .help = "Index:" },
	{ "db", 'd', OK_STRING, FIELD(const char *, db), .arg = "DIR",
	  .help = "persistent index (default: a temporary one)" },
	{ "query-only", 'Q', OK_SET, FIELD(int, f.query_only),
	  .help = "compare with the index, insert nothing" },
	{ "batch", OPT_BATCH, OK_SIZET, FIELD(size_t, pl.batch), 1, 1000000,
	  .def = "4000", .arg = "N",
	  .help = "records per transaction (default %D)" },
	{ "replay", OPT_REPLAY, OK_WORD, FIELD(int, f.replay),
	  .words = replays, .what = "mode", .arg = "WHICH",
	  .help = "rewrite an earlier run's records only if they\n"
	  "were not delivered: undelivered (default), or\nall of them" },
	{ "map-size", OPT_MAP_SIZE, OK_SIZE, FIELD(uint64_t, f.p.mapsize),
	  1 << 20, 1ULL << 44, .arg = "SIZE",
	  .help = "initial index map size (default 1G)" },
	{ "redis-password-file", OPT_REDIS_PASSWORD_FILE, OK_STRING,
	  FIELD(const char *, redis_pwfile), .arg = "FILE",
	  .help = "Redis AUTH: a line 'password' or 'user password'" },
	{ "memtable", OPT_MEMTABLE, OK_SIZE, FIELD(uint64_t, f.p.memtable),
	  1 << 16, 1ULL << 40, .arg = "SIZE",
	  .help = "memory for band entries not yet merged\n(default 64M)" },
	{ "threads", OPT_THREADS, OK_CUSTOM, .lo = 1, .hi = 64, .arg = "N",
	  .help = "threads that normalise and sign (default:\none per CPU)" },
	{ "retain", OPT_RETAIN, OK_DURATION, FIELD(int64_t, f.ret.max_age),
	  1, 36500 * 86400ULL, .arg = "DURATION",
	  .help = "expire documents older than this (30d, 12h, 2w)" },
	{ "max-docs", OPT_MAX_DOCS, OK_U64, FIELD(uint64_t, f.ret.max_docs),
	  1, UINT64_MAX, .arg = "N",
	  .help = "expire the oldest documents beyond N" },

	{ .help = "Output:" },
	{ "duplicates", 'D', OK_MODE, .lo = OUT_DUPLICATES,
	  .help = "write the duplicates, not the unique records" },
	{ "duplicates-to", OPT_DUPLICATES_TO, OK_STRING,
	  FIELD(const char *, s.duplicates_to), .arg = "PATH",
	  .help = "append the duplicates to PATH as well (mail:\n"
	  "an mbox, or a Maildir if PATH is a directory)" },
	{ "annotate", 'a', OK_MODE, .lo = OUT_ANNOTATE,
	  .help = "write every record with its verdict" },
	{ "pairs", 'p', OK_MODE, .lo = OUT_PAIRS, .help = "write every verified pair" },
	{ "clusters", OPT_CLUSTERS, OK_MODE, .lo = OUT_CLUSTERS,
	  .help = "write each record's id and its group's" },
	{ "group", OPT_GROUP, OK_SET, FIELD(int, group),
	  .help = "-a, -p: add the group (its first document)" },
	{ "stats", OPT_STATS, OK_CUSTOM,
	  .help = "print a summary on stderr at the end" },
	{ "progress", OPT_PROGRESS, OK_SET, FIELD(int, s.progress),
	  .show = "[no-]progress",
	  .help = "progress on stderr (default: if it is a\n"
	  "terminal and stdout is not)" },
	{ "no-progress", OPT_NO_PROGRESS, OK_CLEAR, FIELD(int, s.progress),
	  .flags = OF_HIDDEN },
	{ "quiet", 'q', OK_SET, FIELD(int, pl.quiet),
	  .help = "no warnings about bad records" },
	{ "explain", OPT_EXPLAIN, OK_SET, FIELD(int, explain),
	  .flags = OF_NOCONF,
	  .help = "print the band choice and S-curve, then exit" },
	{ "output", 'o', OK_CUSTOM, .arg = "FILE",
	  .help = "write to FILE (appended in daemon mode)" },
	{ "verbose", 'v', OK_CUSTOM,
	  .help = "more messages (daemon: each connection)" },

	{ .help = "Daemon:" },
	{ "listen", OPT_LISTEN, OK_CUSTOM, .arg = "ADDR",
	  .help = "serve unix:PATH, tls:HOST:PORT or tcp:HOST:PORT\n"
	  "(repeatable; tcp: on loopback only unless\n--trusted-network)" },
	{ "tls-cert", OPT_TLS_CERT, OK_STRING, FIELD(const char *, d.tls.cert),
	  .arg = "FILE", .help = "tls: the server's certificate chain (PEM)" },
	{ "tls-key", OPT_TLS_KEY, OK_STRING, FIELD(const char *, d.tls.key),
	  .arg = "FILE",
	  .help = "tls: its private key (PEM); both re-read on SIGHUP" },
	{ "tls-client-ca", OPT_TLS_CLIENT_CA, OK_STRING,
	  FIELD(const char *, d.tls.client_ca), .arg = "FILE",
	  .help = "tls: require client certificates signed by it" },
	{ "trusted-network", OPT_TRUSTED_NETWORK, OK_SET,
	  FIELD(int, d.trusted_network),
	  .help = "allow plaintext tcp: beyond loopback" },
	{ "batch-delay", OPT_BATCH_DELAY, OK_TIME, FIELD(double, d.batch_delay),
	  .dlo = 0, .dhi = 60, .def = "5ms", .arg = "TIME",
	  .help = "longest wait before a batch commits (default %D)" },
	{ "max-clients", OPT_MAX_CLIENTS, OK_U64,
	  FIELD(uint64_t, d.max_clients), 1, 100000, .def = "256", .arg = "N",
	  .help = "clients at once (default %D)" },
	{ "idle-timeout", OPT_IDLE_TIMEOUT, OK_TIME,
	  FIELD(double, d.idle_timeout), .dlo = 0, .dhi = 86400 * 365,
	  .def = "10m", .arg = "TIME",
	  .help = "close silent clients (default %D, 0: never)" },
	{ "http", OPT_HTTP, OK_STRING, FIELD(const char *, d.http),
	  .arg = "HOST:PORT",
	  .help = "serve /metrics and /healthz (no HOST: loopback;\n"
	  "daemon or milter)" },
	{ "log-file", OPT_LOG_FILE, OK_STRING, FIELD(const char *, d.log_file),
	  .arg = "FILE",
	  .help = "log there, not to stderr (reopened on SIGHUP)" },
	{ "config", OPT_CONFIG, OK_CUSTOM, .flags = OF_NOCONF, .arg = "FILE",
	  .help = "read long options from FILE, key = value" },
	{ "check-config", OPT_CHECK_CONFIG, OK_SET, FIELD(int, check_config),
	  .flags = OF_NOCONF, .help = "check the options as a start would, then exit\n"
	  "(0, or 2 saying what is wrong)" },

	{ .help = "Milter (a mail filter for Postfix and Sendmail):" },
	{ "milter", OPT_MILTER, OK_CUSTOM, .arg = "SOCKET",
	  .help = "serve unix:PATH or inet:PORT@HOST" },
	{ "milter-action", OPT_MILTER_ACTION, OK_CUSTOM, .arg = "A",
	  .help = "what a duplicate gets: header (default),\n"
	  "quarantine, reject or discard" },
	{ "milter-reply", OPT_MILTER_REPLY, OK_CUSTOM,
	  .def = "550 5.7.1 Duplicate message", .arg = "TEXT",
	  .help = "the reply to a rejected duplicate (default\n'%D')" },
	{ "milter-scope", OPT_MILTER_SCOPE, OK_WORD, FIELD(int, m.scope),
	  .words = milter_scopes, .what = "scope", .arg = "S",
	  .help = "who had it: recipient (default: each one's\n"
	  "copies) or message (anyone's: list servers)" },

	{ .help = "Client (send the records to a daemon, write what it "
	  "answers):" },
	{ "connect", OPT_CONNECT, OK_CUSTOM, .arg = "ADDR",
	  .help = "unix:PATH, tcp:HOST:PORT or tls:HOST:PORT" },
	{ "tls-ca", OPT_TLS_CA, OK_STRING, FIELD(const char *, c.tls.ca),
	  .arg = "FILE",
	  .help = "tls: the CA of the daemon's certificate (default:\n"
	  "the system's); --tls-cert, --tls-key: the\nclient's own" },
	{ "connect-retries", OPT_CONNECT_RETRIES, OK_U64,
	  FIELD(uint64_t, c.retries), 0, 1000, .def = "10", .arg = "N",
	  .help = "failed attempts in a row before exit 1 (default %D)" },
	{ "connect-window", OPT_CONNECT_WINDOW, OK_U64,
	  FIELD(uint64_t, c.window), 1, 1000000, .def = "10000", .arg = "N",
	  .help = "records sent ahead of their replies (default %D)" },

	{ .help = "Maintenance modes (with --db; one at a time, no files):" },
	{ "info", OPT_INFO, OK_MAINT, .lo = MAINT_INFO, .flags = OF_NOCONF,
	  .help = "parameters, documents, times and sizes" },
	{ "expire", OPT_EXPIRE, OK_MAINT, .lo = MAINT_EXPIRE,
	  .flags = OF_NOCONF, .help = "apply --retain and --max-docs now" },
	{ "remove", OPT_REMOVE, OK_MAINT, .lo = MAINT_REMOVE,
	  .flags = OF_NOCONF, .arg = "FILE",
	  .help = "remove documents by id, one per line (- stdin)" },
	{ "check", OPT_CHECK, OK_MAINT, .lo = MAINT_CHECK, .flags = OF_NOCONF,
	  .help = "check consistency; exit 1 on problems" },
	{ "compact", OPT_COMPACT, OK_MAINT, .lo = MAINT_COMPACT,
	  .flags = OF_NOCONF, .arg = "DIR",
	  .help = "write a compacted copy to DIR" },
	{ "export", OPT_EXPORT, OK_MAINT, .lo = MAINT_EXPORT,
	  .flags = OF_NOCONF, .arg = "FILE",
	  .help = "documents as JSON Lines (- stdout)" },
	{ "import", OPT_IMPORT, OK_MAINT, .lo = MAINT_IMPORT,
	  .flags = OF_NOCONF, .arg = "FILE",
	  .help = "documents from an export (- stdin)" },
	{ "help", 'h', OK_CUSTOM, .flags = OF_NOCONF, .help = "this help" },
	{ "version", 'V', OK_CUSTOM, .flags = OF_NOCONF,
	  .help = "program, index format and scheme versions" }
};
#define NOPTS	(sizeof opts / sizeof opts[0])

/* The maintenance modes' options, by MAINT_*, for messages. */
static const char *const maint_opts[] = {
	NULL, "--info", "--expire", "--remove", "--check", "--compact",
	"--export", "--import"
};

/* getopt's tables, made from opts by opts_tables. */
static char			 short_opts[2 * NOPTS + 2];
static struct option		 long_opts[NOPTS + 1];

static struct index		*the_index;
static const char		*conf_file;	/* being applied, for errors */
static const unsigned		*conf_lines;
static char			**conf_argv;	/* its settings, as options */

static void	usage(FILE *);
static void	usage_error(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	opts_tables(void);
static int	keyword(const char *, const char *, const struct keyword *,
		    const char *);
static const struct opt *opt_find(int);
static void	opt_set(struct options *, const struct opt *, const char *,
		    const char *, int);
static void	opt_custom(struct options *, const struct opt *,
		    const char *, const char *, int);
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

/* Print the usage summary: the options' help, from opts. */
static void
usage(FILE *f)
{
	const struct opt	*op;
	const char		*h;
	int			 n;

	fputs("usage: mhfilter [options] [file ...]\n"
	    "       mhfilter --db DIR [options] MAINTENANCE-MODE\n"
	    "Pass the first document of every near-duplicate group; drop the "
	    "rest.\n\n", f);
	for (op = opts; op < opts + NOPTS; op++) {
		if (op->flags & OF_HIDDEN)
			continue;
		if (op->name == NULL) {
			fprintf(f, "%s\n", op->help);
			continue;
		}
		if (op->ch < 256)
			n = fprintf(f, "  -%c, ", op->ch);
		else
			n = fprintf(f, "      ");
		n += fprintf(f, "--%s", op->show != NULL ? op->show : op->name);
		if (op->arg != NULL)
			n += fprintf(f, " %s", op->arg);
		/* The help is a column of its own, from the 28th. */
		if (n > 26) {
			fputc('\n', f);
			n = 0;
		}
		fprintf(f, "%*s", 27 - n, "");
		for (h = op->help; *h != '\0'; h++) {
			if (h[0] == '%' && h[1] == 'D') {
				fputs(op->def, f);
				h++;
			} else if (*h == '\n')
				fprintf(f, "\n%27s", "");
			else
				fputc(*h, f);
		}
		fputc('\n', f);
	}
	fputs("See mhfilter(1).\n", f);
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

/*
 * Make getopt's tables from opts.  -0 is -z's other name (xargs and find
 * say -0).
 */
static void
opts_tables(void)
{
	const struct opt	*op;
	struct option		*lo = long_opts;
	char			*s = short_opts;

	*s++ = '0';
	for (op = opts; op < opts + NOPTS; op++) {
		if (op->name == NULL)
			continue;
		lo->name = op->name;
		lo->has_arg = op->arg != NULL ? required_argument : no_argument;
		lo->val = op->ch;
		lo++;
		if (op->ch < 256) {
			*s++ = op->ch;
			if (op->arg != NULL)
				*s++ = ':';
		}
	}
}

/* The option getopt gave as ch. */
static const struct opt *
opt_find(int ch)
{
	const struct opt	*op;

	if (ch == '0')
		ch = 'z';
	for (op = opts; op < opts + NOPTS; op++) {
		if (op->name != NULL && op->ch == ch)
			return (op);
	}
	return (NULL);
}

/*
 * Set option op (called name in messages) to arg in o, as its kind says,
 * or exit 2 saying what is wrong.  src is 1 for a configuration file's
 * setting, 2 for the command line's, 0 for the default.
 */
static void
opt_set(struct options *o, const struct opt *op, const char *name,
    const char *arg, int src)
{
	void		*field = (char *)o + op->off;
	char		*cause = NULL;
	uint64_t	 u;
	int		 rc = 0;

	switch (op->kind) {
	case OK_CUSTOM:
		opt_custom(o, op, name, arg, src);
		break;
	case OK_SET:
		*(int *)field = 1;
		break;
	case OK_CLEAR:
		*(int *)field = 0;
		break;
	case OK_STRING:
		*(const char **)field = arg;
		break;
	case OK_WORD:
		*(int *)field = keyword(name, arg, op->words, op->what);
		break;
	case OK_UINT:
		if ((rc = parse_uint(arg, op->lo, op->hi, &u, &cause)) == 0)
			*(unsigned *)field = u;
		break;
	case OK_U64:
		rc = parse_uint(arg, op->lo, op->hi, field, &cause);
		break;
	case OK_SIZET:
		if ((rc = parse_uint(arg, op->lo, op->hi, &u, &cause)) == 0)
			*(size_t *)field = u;
		break;
	case OK_SIZE:
		rc = parse_size(arg, op->lo, op->hi, field, &cause);
		break;
	case OK_REAL:
		rc = parse_double(arg, op->dlo, op->dhi, field, &cause);
		break;
	case OK_TIME:
		rc = parse_seconds(arg, op->dlo, op->dhi, field, &cause);
		break;
	case OK_DURATION:
		rc = parse_duration(arg, op->lo, op->hi, field, &cause);
		break;
	case OK_MAINT:
		set_maint(o, op->lo, arg);
		break;
	case OK_MODE:
		o->pl.mode = op->lo;
		o->f.want_pairs |= op->lo == OUT_PAIRS;
		o->modes++;
		break;
	}
	if (rc != 0)
		usage_error("%s: %s", name, cause);
	if (src != 0)
		o->given |= op->given;
}

/* Set an option whose setting is more than storing its value. */
static void
opt_custom(struct options *o, const struct opt *op, const char *name,
    const char *arg, int src)
{
	char		*cause;
	uint64_t	 u;
	int		 mf;

	switch (op->ch) {
	case 'z':
		o->pl.delim = '\0';
		break;
	case 'f':
		if ((o->pl.format = format_find(arg)) == -1)
			usage_error("%s: unknown format '%s' (use %s)", name,
			    arg, format_list());
		break;
	case OPT_TEXT_FIELD:
		o->pl.text_field = arg;
		o->fields |= strcmp(arg, op->def) != 0;
		break;
	case OPT_ID_FIELD:
		o->pl.id_field = arg;
		o->fields |= strcmp(arg, op->def) != 0;
		break;
	case OPT_NORMALIZE:
		if (normalize_parse(arg, &o->f.p.norm, &cause) != 0)
			usage_error("%s: %s", name, cause);
		break;
	case OPT_THREADS:
		if (parse_uint(arg, op->lo, op->hi, &u, &cause) != 0)
			usage_error("%s: %s", name, cause);
		o->f.threads = u;
		o->threads_given = 1;
		break;
	case OPT_STATS:
		o->s.stats = o->d.stats = 1;
		break;
	case 'o':
		o->s.output = o->d.output = arg;
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
		o->d.listen[o->d.nlisten++] = (char *)arg;
		break;
	case OPT_CONFIG:
		/* Read before the rest by parse_options. */
		if (o->config == NULL || strcmp(o->config, arg) != 0)
			usage_error("--config: give one configuration file, as "
			    "--config FILE");
		break;
	case OPT_MDA:
		o->mda = o->mail_single = 1;
		o->pl.format = FORMAT_MAIL;
		break;
	case OPT_MAIL_ALLOW:
		if (mail_allow_add(arg, &cause) != 0)
			usage_error("%s: %s", name, cause);
		break;
	case OPT_MAIL_STRIP:
		mf = mail_flags();
		if (mail_strip_parse(arg, &mf, &cause) != 0)
			usage_error("%s: %s", name, cause);
		mail_set_flags(mf);
		break;
	case OPT_MILTER:
		o->m.socket = arg;
		o->pl.format = FORMAT_MAIL;
		break;
	case OPT_MILTER_ACTION:
		if (milter_parse_action(arg, &o->m.action) != 0)
			usage_error("%s: unknown action '%s' (use header, "
			    "quarantine, reject or discard)", name, arg);
		break;
	case OPT_MILTER_REPLY:
		if (milter_parse_reply(arg, o->m.reply_code, o->m.reply_xcode,
		    o->m.reply_text, sizeof o->m.reply_text, &cause) != 0)
			usage_error("%s: %s", name, cause);
		break;
	case OPT_CONNECT:
		if (client_check_addr(arg, &cause) != 0)
			usage_error("%s", cause);
		o->c.addr = arg;
		break;
	case 'h':
		usage(stdout);
		exit(EXIT_OK);
	case 'V':
		printf("mhfilter %s (index format %d, signature scheme %d %s)\n",
		    PACKAGE_VERSION, MHF_INDEX_FORMAT, MHF_SCHEME,
		    MHF_SCHEME_NAME);
		exit(EXIT_OK);
	}
}

/*
 * Parse the configuration file named by --config, if any, then the command
 * line, which overrides it, into o; exits on errors.
 */
static void
parse_options(int argc, char **argv, struct options *o)
{
	const struct opt	*op;
	long			 ncpu;
	int			 i;

	opts_tables();
	memset(o, 0, sizeof *o);
	for (op = opts; op < opts + NOPTS; op++) {
		if (op->def != NULL)
			opt_set(o, op, op->name, op->def, 0);
	}
	o->f.chain = 1;
	o->pl.delim = '\n';
	/* Not on the terminal the records are written to. */
	o->s.progress = isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	o->f.threads = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (unsigned)ncpu;

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

	if (o->db != NULL && o->db[0] == '\0')
		usage_error("--db: the path is empty");
	if (o->f.query_only && o->db == NULL)
		usage_error("--query-only needs --db (a temporary index is "
		    "empty)");
	if (!(format_get(o->pl.format)->flags & FMT_FIELDS) && o->fields)
		usage_error("--text-field and --id-field go with --format "
		    "jsonl");
	if (o->d.http != NULL && o->d.nlisten == 0 && o->m.socket == NULL &&
	    notify_listen_count() == 0)
		usage_error("--http needs --listen or --milter (or sockets from "
		    "systemd)");
	check_maint(o, argc - optind);
	choose_bands(o);
}

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
	const struct opt	*op;
	char			 name[32];
	int			 ch, idx, src = conf_file != NULL ? 1 : 2;

	o->modes = 0;		/* the command line's replace the file's */
	for (;;) {
		idx = -1;	/* getopt_long sets it for long options only */
		ch = getopt_long(argc, argv, short_opts, long_opts, &idx);
		if (ch == -1)
			break;
		if ((op = opt_find(ch)) == NULL) {
			fprintf(stderr, "Try 'mhfilter --help' for more "
			    "information.\n");
			exit(EXIT_USAGE);
		}
		if (idx != -1)
			snprintf(name, sizeof name, "--%s", op->name);
		else
			snprintf(name, sizeof name, "-%c", ch);
		opt_set(o, op, name, optarg, src);
	}
	check_options(o, o->modes, src);
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
	 * A format framed otherwise than by lines (mail: mbox and Maildir,
	 * or with --single one message an input) is read in its framing
	 * unless -z asks for NUL-terminated records; on a socket its records
	 * end with NUL.
	 */
	if (src == 2 && (format_get(o->pl.format)->flags & FMT_FILES) &&
	    (o->pl.delim == '\0' || o->d.nlisten > 0 || o->c.addr != NULL ||
	    notify_listen_count() > 0))
		usage_error("--format %s frames its own records, which may hold "
		    "any byte: it is read from files, not with -z, --listen "
		    "or --connect", format_get(o->pl.format)->name);
	o->pl.framing = FRAME_DELIM;
	if (format_get(o->pl.format)->framing != FRAME_DELIM &&
	    o->pl.delim != '\0') {
		o->pl.framing = o->mail_single ? FRAME_SINGLE :
		    format_get(o->pl.format)->framing;
		o->pl.delim = '\0';
	}
	if (format_get(o->pl.format)->init != NULL &&
	    format_get(o->pl.format)->init(&o->pl, &cause) != 0) {
		log_errx("%s", cause);
		exit(EXIT_ERROR);
	}
	/* Mail: --mda writes nothing and leaves ids out (mail.c). */
	if (o->pl.format == FORMAT_MAIL) {
		if (o->mda) {
			if (modes > 0 || (o->pl.mode != OUT_UNIQUE &&
			    o->pl.mode != OUT_NONE))
				usage_error("--mda writes nothing: no "
				    "--duplicates, --annotate or --pairs");
			o->pl.mode = OUT_NONE;
		}

		mail_set_limits(o->pl.max_bytes, o->min_text);
		o->f.within = mail_attach_within;
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
	const struct opt	*op;
	const char		*v;
	char			*cause;
	size_t			 n, i, nargs = 1;

	if (conf_load(path, &e, &n, &cause) != 0) {
		fprintf(stderr, "mhfilter: --config %s\n", cause);
		free(cause);
		exit(EXIT_USAGE);
	}
	conf_argv = xcalloc(n + 2, sizeof *conf_argv);
	lines = xcalloc(n + 1, sizeof *lines);
	conf_argv[0] = xstrdup("mhfilter");
	for (i = 0; i < n; i++) {
		for (op = opts; op < opts + NOPTS; op++) {
			if (op->name != NULL && strcmp(op->name, e[i].key) == 0)
				break;
		}
		if (op == opts + NOPTS || (op->flags & OF_NOCONF)) {
			fprintf(stderr, "mhfilter: %s:%u: unknown key '%s' "
			    "(keys are long option names, such as threshold; "
			    "see mhfilter.conf(5))\n", path, e[i].line,
			    e[i].key);
			exit(EXIT_USAGE);
		}
		v = e[i].value;
		if (op->arg == NULL) {
			if (v == NULL || strcmp(v, "yes") == 0 ||
			    strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
				xasprintf(&conf_argv[nargs], "--%s", op->name);
			else if (strcmp(v, "no") == 0 ||
			    strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
				continue;
			else {
				fprintf(stderr, "mhfilter: %s:%u: %s takes "
				    "yes or no, not '%s'\n", path, e[i].line,
				    op->name, v);
				exit(EXIT_USAGE);
			}
		} else if (v == NULL || *v == '\0') {
			fprintf(stderr, "mhfilter: %s:%u: %s needs a value\n",
			    path, e[i].line, op->name);
			exit(EXIT_USAGE);
		} else
			xasprintf(&conf_argv[nargs], "--%s=%s", op->name, v);
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

	if (o->pl.time_field != NULL &&
	    !(format_get(o->pl.format)->flags & FMT_FIELDS))
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
	/* A daemon's ids (RUN:CONN:RECNO) are its own, whoever else runs. */
	if (serve && o->m.socket == NULL &&
	    (rc = index_reserve_run(the_index, &cause)) != 0) {
		log_errx("%s", cause);
		free(cause);
		return (index_exit_status(rc));
	}
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
	o->f.want_held = serve || o->mda ||
	    (o->pl.mode & OUT_MODE) == OUT_ANNOTATE ||
	    (o->pl.mode & OUT_MODE) == OUT_PAIRS;
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
	size_t			 i;
	int			 bad = 0;

	if (serve && o->m.socket == NULL &&
	    daemon_check_listen(&o->d, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		bad = 1;
	}
	/* A unix socket's directory must be there for it to be made. */
	for (i = 0; serve && o->m.socket == NULL && i < o->d.nlisten; i++) {
		if (strncmp(o->d.listen[i], "unix:", 5) == 0 &&
		    o->d.listen[i][5] != '\0' &&
		    check_writable("--listen", o->d.listen[i] + 5) != 0)
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

	std_fds_open();
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
	 * keeps the threads to the processors, which measured faster.
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
