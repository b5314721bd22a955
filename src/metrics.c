/*
 * The statistics of a source, for the log line of a serving one (the
 * daemon, the milter: SIGUSR1, --stats), the daemon's STATS command, GET
 * /metrics and the stream's --stats lines (pipeline_print_stats), and the
 * HTTP server of /metrics and /healthz.
 *
 * A source fills a struct mstats when asked (its stats callback): its own
 * counters, and mstats_pipeline's, which every source shares: one list,
 * each entry saying where it is shown.  /metrics
 * has the verdicts as one labelled family, each record once, batch times
 * as a histogram (metrics_batch), the build and the process.  The server
 * runs on the source's event base: the daemon's loop, or a thread of the
 * milter's; it calls the source only through the callbacks it was given.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/util.h>

#include "mhfilter.h"

/* The upper bounds (s) of mhfilter_batch_duration_seconds's buckets. */
static const double batch_buckets[] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
};
#define NBUCKETS	(sizeof batch_buckets / sizeof batch_buckets[0])

struct metrics {
	struct metrics_src	 src;
	struct evhttp		*http;
	pthread_mutex_t		 lock;		/* the histogram */
	uint64_t		 hist[NBUCKETS + 1];	/* +Inf last */
	uint64_t		 count;
	double			 sum;
};

static void	metrics_serve(struct evhttp_request *, void *);
static void	metrics_process(struct evbuffer *);
static void	metrics_healthz(struct evhttp_request *, void *);
static void	metrics_notfound(struct evhttp_request *, void *);

/* Add one statistic; help is a constant. */
void
mstats_add(struct mstats *st, const char *name, const char *label,
    int counter, int where, double value, const char *help)
{
	struct mstat	*s;

	if (st->n == MSTATS_MAX)
		fatalx("mstats_add: more than MSTATS_MAX");
	s = &st->v[st->n++];
	s->name = name;
	s->label = label;
	s->counter = counter;
	s->where = where;
	s->prec = 0;
	s->value = value;
	s->help = help;
}

/*
 * The statistics every source has, from the pipeline's counters (the
 * caller holds what guards them) and the index's, after the source's
 * "records" and before its own; secs is how long the source has run.
 * The stream's --stats lines (MS_STREAM) are among them, in their order.
 */
void
mstats_pipeline(struct mstats *st, struct pipeline *p, double secs)
{
	const struct pl_counts	*ct = pipeline_counts(p);
	struct index_stats	 is;
	struct filter_stats	 fs;
	struct rusage		 ru;
	int			 have_is;

#define S(nm, cnt, val, hlp)	mstats_add(st, nm, NULL, cnt,		\
	MS_BOTH|MS_STREAM, (double)(val), hlp)
#define SL(nm, cnt, val, hlp)	mstats_add(st, nm, NULL, cnt,		\
	MS_LINE|MS_STREAM, (double)(val), hlp)
#define LO(nm, cnt, val, hlp)	mstats_add(st, nm, NULL, cnt, MS_LINE,	\
	(double)(val), hlp)
/* The stream's alone, with prec decimals. */
#define T(nm, val, pr)	do {						\
	mstats_add(st, nm, NULL, 0, MS_STREAM, (double)(val), "");	\
	st->v[st->n - 1].prec = (pr);					\
} while (0)
/* Each record once, by its answer (/metrics). */
#define SV(verdict, val)	mstats_add(st, "records", "verdict=\""	\
	verdict "\"", 1, MS_METRIC, (double)(val), "Records answered, by " \
	"verdict: unique (replays not included), duplicate, empty, "	\
	"invalid, too_long, unchecked, replayed, failed.")
	if (secs <= 0)
		secs = 1e-9;
	have_is = pipeline_stats(p, &fs, &is);
	SL("unique", 1, ct->unique, "Records answered unique, replays "
	    "included.");
	SL("replayed", 1, ct->replayed, "Unique records that were replays.");
	SL("duplicates", 1, ct->duplicates, "Records answered duplicate.");
	T("seen", ct->seen, 0);
	SL("empty", 1, ct->empty, "Records with no text to compare.");
	SL("invalid", 1, ct->invalid, "Malformed records.");
	SL("too_long", 1, ct->too_long, "Records over --max-bytes.");
	SL("unchecked", 1, ct->unchecked, "Mail passed without a verdict "
	    "(too large, not a message).");
	T("blank", ct->blank, 0);
	LO("failed", 1, ct->failed, "Records answered with an index error.");
	LO("errors", 1, ct->invalid + ct->too_long + ct->failed,
	    "Records answered with an error.");
	SV("unique", ct->unique - ct->replayed);
	SV("duplicate", ct->duplicates);
	SV("empty", ct->empty);
	SV("invalid", ct->invalid);
	SV("too_long", ct->too_long);
	SV("unchecked", ct->unchecked);
	SV("replayed", ct->replayed);
	SV("failed", ct->failed);
	T("invalid_utf8", fs.invalid_utf8, 0);
	S("candidates", 1, fs.candidates, "Candidates examined.");
	T("verified", fs.verified, 0);
	T("verified_same", fs.verified_same, 0);
	T("looked_ahead", fs.ahead, 0);
	T("looked_again", fs.ahead_again, 0);
	T("verified_ahead", fs.verified_ahead, 0);
	S("expired", 1, fs.expired, "Documents expired (--retain, "
	    "--max-docs).");
	SL("batches", 1, ct->batches, "Batches committed or failed.");
	LO("batch_seconds", 1, ct->batch_seconds,
	    "Time spent deciding and committing batches.");
	LO("batch_seconds_last", 0, ct->batch_last,
	    "Time the last batch took.");
	LO("batch_seconds_max", 0, ct->batch_max,
	    "Time the slowest batch took.");
	T("bytes", ct->bytes, 0);
	T("seconds", secs, 3);
	T("records_per_second", ct->records / secs, 0);
	T("mb_per_second", ct->bytes / secs / 1e6, 2);
	if (have_is) {
		S("index_documents", 0, is.docs, "Documents in the index.");
		T("index_band_entries", is.band_entries, 0);
		S("index_bytes", 0, is.size,
		    "Used size of the index's data file.");
		if (is.roundtrips != 0) {
			T("index_roundtrips", is.roundtrips, 0);
			T("roundtrips_per_record", (double)is.roundtrips /
			    (ct->records ? ct->records : 1), 4);
			T("index_rereads", is.rereads, 0);
			T("index_reread_buckets", is.reread, 0);
			T("index_waits", is.waits, 0);
		}
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		T("max_rss_kb", ru.ru_maxrss, 0);
#undef SV
#undef T
#undef LO
#undef SL
#undef S
}

/* "stats" and the line's key=value pairs separated by sep, and a newline. */
void
mstats_line(const struct mstats *st, struct buf *b, int sep)
{
	size_t	 i;
	char	 v[96];
	char	 c = sep;

	buf_append(b, "stats", 5);
	for (i = 0; i < st->n; i++) {
		if (!(st->v[i].where & MS_LINE))
			continue;
		if (st->v[i].value == floor(st->v[i].value) &&
		    st->v[i].value < 1e15)
			snprintf(v, sizeof v, "%s=%.0f", st->v[i].name,
			    st->v[i].value);
		else
			snprintf(v, sizeof v, "%s=%.6f", st->v[i].name,
			    st->v[i].value);
		buf_append(b, &c, 1);
		buf_append(b, v, strlen(v));
	}
	buf_append(b, "\n", 1);
}

/* Log a source's statistics as one line (SIGUSR1, --stats at exit). */
void
mstats_log(void (*fill)(void *, struct mstats *), void *arg)
{
	struct mstats	 st;
	struct buf	 b = { 0 };

	st.n = 0;
	fill(arg, &st);
	mstats_line(&st, &b, ' ');
	b.data[b.len - 1] = '\0';
	log_info("%s", b.data);
	buf_free(&b);
}

/* An HTTP server of /metrics and /healthz on base, for src. */
struct metrics *
metrics_new(struct event_base *base, const struct metrics_src *src,
    char **cause)
{
	struct metrics	*m;

	m = xcalloc(1, sizeof *m);
	m->src = *src;
	if (pthread_mutex_init(&m->lock, NULL) != 0)
		fatalx("cannot make a mutex");
	if ((m->http = evhttp_new(base)) == NULL) {
		xasprintf(cause, "cannot make the HTTP server");
		pthread_mutex_destroy(&m->lock);
		free(m);
		return (NULL);
	}
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET|EVHTTP_REQ_HEAD);
	evhttp_set_timeout(m->http, 30);
	evhttp_set_max_headers_size(m->http, 16384);
	evhttp_set_max_body_size(m->http, 16384);
	evhttp_set_cb(m->http, "/metrics", metrics_serve, m);
	evhttp_set_cb(m->http, "/healthz", metrics_healthz, m);
	evhttp_set_gencb(m->http, metrics_notfound, m);
	return (m);
}

/* Stop serving and free the server (NULL: nothing). */
void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	evhttp_free(m->http);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/*
 * Parse --http HOST:PORT ([v6 address]:PORT; an empty HOST is loopback):
 * *host (to free) and *port, or -1 and a cause.
 */
int
metrics_parse(const char *spec, char **host, uint64_t *port, char **cause)
{
	char	*h, *colon, *why;

	h = xstrdup(spec);
	if ((colon = strrchr(h, ':')) == NULL) {
		xasprintf(cause, "--http %s: use HOST:PORT (or :PORT for "
		    "loopback)", spec);
		free(h);
		return (-1);
	}
	if (parse_uint(colon + 1, 0, 65535, port, &why) != 0) {
		xasprintf(cause, "--http %s: port %s", spec, why);
		free(why);
		free(h);
		return (-1);
	}
	*colon = '\0';
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		memmove(h, h + 1, strlen(h));
		h[strlen(h) - 1] = '\0';
	}
	*host = h;
	return (0);
}

/*
 * Serve HTTP on HOST:PORT (no host: 127.0.0.1); the address bound, as
 * HOST:PORT, into name.  0, or -1 and a cause naming --http.
 */
int
metrics_bind(struct metrics *m, const char *spec, char *name, size_t len,
    char **cause)
{
	struct evhttp_bound_socket	*bs;
	struct sockaddr_storage		 ss;
	socklen_t			 sl = sizeof ss;
	char				*host;
	char				 h[NI_MAXHOST], s[NI_MAXSERV];
	uint64_t			 p;

	if (metrics_parse(spec, &host, &p, cause) != 0)
		return (-1);
	/* Metrics are not for everyone: no host is loopback, not any. */
	bs = evhttp_bind_socket_with_handle(m->http,
	    *host == '\0' ? "127.0.0.1" : host, p);
	if (bs == NULL) {
		xasprintf(cause, "--http %s: cannot listen: %s", spec,
		    strerror(errno));
		free(host);
		return (-1);
	}
	free(host);
	memset(&ss, 0, sizeof ss);
	if (getsockname(evhttp_bound_socket_get_fd(bs),
	    (struct sockaddr *)&ss, &sl) == -1 ||
	    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, s, sizeof s,
	    NI_NUMERICHOST|NI_NUMERICSERV) != 0)
		snprintf(name, len, "%s", spec);
	else if (ss.ss_family == AF_INET6)
		snprintf(name, len, "[%s]:%s", h, s);
	else
		snprintf(name, len, "%s:%s", h, s);
	return (0);
}

/* Serve HTTP on a listening socket (systemd's).  0, or -1. */
int
metrics_accept(struct metrics *m, int fd)
{
	evutil_make_socket_nonblocking(fd);
	return (evhttp_accept_socket_with_handle(m->http, fd) != NULL ? 0 :
	    -1);
}

/* A batch took seconds to decide and commit (the histogram). */
void
metrics_batch(struct metrics *m, double seconds)
{
	size_t	 i;

	if (m == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	for (i = 0; i < NBUCKETS && seconds > batch_buckets[i]; i++)
		;
	m->hist[i]++;
	m->count++;
	m->sum += seconds;
	pthread_mutex_unlock(&m->lock);
}

/*
 * The process_* metrics of Prometheus's client libraries, from /proc:
 * start time, CPU time, resident memory, open and allowed descriptors.
 */
static void
metrics_process(struct evbuffer *b)
{
	struct dirent	*de;
	struct rlimit	 rl;
	DIR		*dir;
	FILE		*f;
	char		 line[1024], *p;
	unsigned long long utime, stime, start, btime = 0;
	long		 rss, tck = sysconf(_SC_CLK_TCK);
	int		 fds = 0;

#define PM(nm, type, hlp, fmt, v) evbuffer_add_printf(b, "# HELP " nm	\
	" " hlp "\n# TYPE " nm " " type "\n" nm " " fmt "\n", v)
	if ((f = fopen("/proc/stat", "r")) != NULL) {
		while (fgets(line, sizeof line, f) != NULL &&
		    sscanf(line, "btime %llu", &btime) != 1)
			;
		fclose(f);
	}
	/* Fields 14, 15, 22 and 24 of stat(5), after the command's ')'. */
	if ((f = fopen("/proc/self/stat", "r")) != NULL) {
		if (fgets(line, sizeof line, f) != NULL &&
		    (p = strrchr(line, ')')) != NULL && sscanf(p + 2,
		    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
		    "%*d %*d %*d %*d %*d %*d %llu %*u %ld", &utime, &stime,
		    &start, &rss) == 4 && tck > 0) {
			PM("process_cpu_seconds_total", "counter", "Total user "
			    "and system CPU time spent in seconds.", "%.2f",
			    (double)(utime + stime) / tck);
			if (btime != 0)
				PM("process_start_time_seconds", "gauge",
				    "Start time of the process since unix "
				    "epoch in seconds.", "%.2f", btime +
				    (double)start / tck);
			PM("process_resident_memory_bytes", "gauge",
			    "Resident memory size in bytes.", "%ld",
			    rss * sysconf(_SC_PAGESIZE));
		}
		fclose(f);
	}
	if ((dir = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(dir)) != NULL) {
			if (de->d_name[0] != '.')
				fds++;
		}
		closedir(dir);
		PM("process_open_fds", "gauge", "Number of open file "
		    "descriptors.", "%d", fds - 1);	/* not opendir's */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		PM("process_max_fds", "gauge", "Maximum number of open file "
		    "descriptors.", "%llu", (unsigned long long)rl.rlim_cur);
#undef PM
}

/*
 * GET /metrics: the source's statistics in the Prometheus text format,
 * then the batch time histogram, the build and the process.
 */
static void
metrics_serve(struct evhttp_request *req, void *arg)
{
	struct metrics	*m = arg;
	struct mstats	 st;
	struct evbuffer	*b;
	const char	*last = "", *suffix;
	uint64_t	 cum = 0, hist[NBUCKETS + 1], count;
	double		 sum;
	size_t		 i;

	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	st.n = 0;
	m->src.stats(m->src.arg, &st);
	for (i = 0; i < st.n; i++) {
		if (!(st.v[i].where & MS_METRIC))
			continue;
		suffix = st.v[i].counter ? "_total" : "";
		/* A family's HELP and TYPE once, before its samples. */
		if (strcmp(st.v[i].name, last) != 0)
			evbuffer_add_printf(b, "# HELP mhfilter_%s%s %s\n"
			    "# TYPE mhfilter_%s%s %s\n", st.v[i].name, suffix,
			    st.v[i].help, st.v[i].name, suffix,
			    st.v[i].counter ? "counter" : "gauge");
		last = st.v[i].name;
		evbuffer_add_printf(b, "mhfilter_%s%s%s%s%s %.17g\n",
		    st.v[i].name, suffix, st.v[i].label != NULL ? "{" : "",
		    st.v[i].label != NULL ? st.v[i].label : "",
		    st.v[i].label != NULL ? "}" : "", st.v[i].value);
	}
	pthread_mutex_lock(&m->lock);
	memcpy(hist, m->hist, sizeof hist);
	count = m->count;
	sum = m->sum;
	pthread_mutex_unlock(&m->lock);
	evbuffer_add_printf(b, "# HELP mhfilter_batch_duration_seconds Time "
	    "to decide and commit a batch.\n"
	    "# TYPE mhfilter_batch_duration_seconds histogram\n");
	for (i = 0; i <= NBUCKETS; i++) {
		cum += hist[i];
		if (i < NBUCKETS)
			evbuffer_add_printf(b, "mhfilter_batch_duration_seconds"
			    "_bucket{le=\"%g\"} %" PRIu64 "\n",
			    batch_buckets[i], cum);
		else
			evbuffer_add_printf(b, "mhfilter_batch_duration_seconds"
			    "_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
	}
	evbuffer_add_printf(b, "mhfilter_batch_duration_seconds_sum %.17g\n"
	    "mhfilter_batch_duration_seconds_count %" PRIu64 "\n", sum, count);
	evbuffer_add_printf(b, "# HELP mhfilter_build_info The version, the "
	    "index format and the signature scheme; always 1.\n"
	    "# TYPE mhfilter_build_info gauge\n"
	    "mhfilter_build_info{version=\"%s\",index_format=\"%d\","
	    "scheme=\"%d\",scheme_name=\"%s\"} 1\n", PACKAGE_VERSION,
	    MHF_INDEX_FORMAT, MHF_SCHEME, MHF_SCHEME_NAME);
	metrics_process(b);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* GET /healthz: 200 when the source says it is well, 503 otherwise. */
static void
metrics_healthz(struct evhttp_request *req, void *arg)
{
	struct metrics	*m = arg;
	struct evbuffer	*b;
	const char	*why = m->src.health(m->src.arg);
	int		 code = why == NULL ? 200 : 503;

	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (why == NULL)
		evbuffer_add(b, "ok\n", 3);
	else
		evbuffer_add_printf(b, "%s\n", why);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, code == 200 ? "OK" :
	    "Service Unavailable", b);
	evbuffer_free(b);
}

/* Any other path. */
static void
metrics_notfound(struct evhttp_request *req, void *arg)
{
	evhttp_send_error(req, 404, "use /metrics or /healthz");
}
