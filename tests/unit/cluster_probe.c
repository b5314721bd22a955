/*
 * cluster_probe: drive cluster.c against a real Redis or Redis Cluster,
 * for tests/e2e/redis-cluster.bats and by hand.
 *
 *	cluster_probe [-v] [-t timeout] [-w replicas] HOSTS step ...
 *
 * Steps run in order; any failure prints why and exits 1:
 *	set:N:P		SET P:i to "v:P:i" for i < N, in one batch
 *	get:N:P		GET them back and compare
 *	allslots:P	SET and GET one key in every one of the 16384 slots
 *	wrongtype:K	SET K, then LPUSH K must be a final WRONGTYPE reply
 *	loop:S:N:P	for S seconds: SET N keys (values carry the round),
 *			then GET them; a short WAIT makes the round retry
 *	flush		FLUSHALL on every master (cluster_queue_node)
 *	dbsize		print the sum of DBSIZE over the masters
 *	slot:K		print key_slot(K)
 *	touch:F		create file F (tells a test a point was reached)
 *	waitfile:F	wait (60 s) until file F exists
 *	info		print cluster=, masters= and roundtrips=
 *
 * Keys are "P:i" so that a hash tag in P ("{t}") puts them all in one
 * slot.  -v logs MOVED and ASK (log_debug).
 */

#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "mhfilter.h"

static struct cluster	*cl;

/* Fail with a message. */
static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	fprintf(stderr, "cluster_probe: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/*
 * Run the queued batch; a short WAIT is retried as a caller would (the
 * unconfirmed commands are pending again), up to 20 times.
 */
static void
run(void)
{
	char	*cause = NULL;
	int	 tries;

	for (tries = 0; cluster_exec(cl, &cause) != 0; tries++) {
		if (strstr(cause, "replicas") == NULL || tries == 20)
			die("cluster_exec: %s", cause);
		fprintf(stderr, "cluster_probe: %s; again\n", cause);
		free(cause);
		cause = NULL;
		usleep(100000);
	}
}

/* Queue a command of C strings routed by key. */
static size_t
queue(const char *key, int argc, const char **argv)
{
	return (cluster_queue(cl, key, strlen(key), argc, argv, NULL));
}

/* Check that reply i is the string want (or OK when want is NULL). */
static void
expect(size_t i, const char *what, const char *want)
{
	const redisReply	*r = cluster_reply(cl, i);

	if (r == NULL)
		die("%s: no reply", what);
	if (want == NULL) {
		if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
			die("%s: reply type %d \"%s\", want OK", what, r->type,
			    r->str != NULL ? r->str : "");
		return;
	}
	if (r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0)
		die("%s: reply type %d \"%s\", want \"%s\"", what, r->type,
		    r->str != NULL ? r->str : "", want);
}

/* SET (set = 1) or GET (0) keys P:i, i < n, values tagged with round. */
static void
setget(int set, unsigned long n, const char *p, long round)
{
	char		**keys, **vals;
	const char	*argv[3];
	unsigned long	 i;

	keys = xcalloc(n, sizeof *keys);
	vals = xcalloc(n, sizeof *vals);
	for (i = 0; i < n; i++) {
		xasprintf(&keys[i], "%s:%lu", p, i);
		if (round >= 0)
			xasprintf(&vals[i], "v:%s:%lu:%ld", p, i, round);
		else
			xasprintf(&vals[i], "v:%s:%lu", p, i);
		argv[0] = set ? "SET" : "GET";
		argv[1] = keys[i];
		argv[2] = vals[i];
		if (queue(keys[i], set ? 3 : 2, argv) != i)
			die("queue: wrong index");
	}
	run();
	for (i = 0; i < n; i++) {
		expect(i, keys[i], set ? NULL : vals[i]);
		free(keys[i]);
		free(vals[i]);
	}
	free(keys);
	free(vals);
	cluster_reset(cl);
}

/* A key for every slot: the first P:j that hashes there. */
static void
allslots(const char *p)
{
	char		*keys[16384], key[128], val[160];
	const char	*argv[3];
	unsigned	 found = 0, s, i;
	unsigned long	 j;

	memset(keys, 0, sizeof keys);
	for (j = 0; found < 16384; j++) {
		snprintf(key, sizeof key, "%s:%lu", p, j);
		s = key_slot(key, strlen(key));
		if (keys[s] == NULL) {
			keys[s] = xstrdup(key);
			found++;
		}
	}
	for (i = 0; i < 2; i++) {
		for (s = 0; s < 16384; s++) {
			snprintf(val, sizeof val, "v:%s", keys[s]);
			argv[0] = i == 0 ? "SET" : "GET";
			argv[1] = keys[s];
			argv[2] = val;
			queue(keys[s], i == 0 ? 3 : 2, argv);
		}
		run();
		for (s = 0; s < 16384; s++) {
			snprintf(val, sizeof val, "v:%s", keys[s]);
			expect(s, keys[s], i == 0 ? NULL : val);
		}
		cluster_reset(cl);
	}
	for (s = 0; s < 16384; s++)
		free(keys[s]);
	printf("slots=16384\n");
}

/* Sum a keyless integer command over the masters, or check OK replies. */
static long long
each_master(const char *cmd)
{
	const redisReply	*r;
	const char		*argv[1] = { cmd };
	long long		 sum = 0;
	unsigned		 m, n = cluster_masters(cl);

	for (m = 0; m < n; m++)
		if (cluster_queue_node(cl, m, 1, argv, NULL) != m)
			die("queue_node: wrong index");
	run();
	for (m = 0; m < n; m++) {
		r = cluster_reply(cl, m);
		if (r->type == REDIS_REPLY_INTEGER)
			sum += r->integer;
		else if (r->type != REDIS_REPLY_STATUS)
			die("%s on master %u: reply type %d", cmd, m, r->type);
	}
	cluster_reset(cl);
	return (sum);
}

/* Run one step. */
static void
step(const char *s)
{
	const redisReply	*r;
	const char		*argv[3];
	char			 p[256];
	unsigned long		 n, secs;
	double			 end;
	long			 round;
	struct stat		 st;
	int			 i;

	if (sscanf(s, "set:%lu:%255s", &n, p) == 2)
		setget(1, n, p, -1);
	else if (sscanf(s, "get:%lu:%255s", &n, p) == 2)
		setget(0, n, p, -1);
	else if (strncmp(s, "allslots:", 9) == 0)
		allslots(s + 9);
	else if (strncmp(s, "wrongtype:", 10) == 0) {
		argv[0] = "SET";
		argv[1] = s + 10;
		argv[2] = "x";
		queue(argv[1], 3, argv);
		argv[0] = "LPUSH";
		queue(argv[1], 3, argv);
		run();
		expect(0, argv[1], NULL);
		r = cluster_reply(cl, 1);
		if (r->type != REDIS_REPLY_ERROR ||
		    strncmp(r->str, "WRONGTYPE", 9) != 0)
			die("LPUSH on a string: type %d", r->type);
		printf("wrongtype=ok\n");
		cluster_reset(cl);
	} else if (sscanf(s, "loop:%lu:%lu:%255s", &secs, &n, p) == 3) {
		end = now_seconds() + secs;
		for (round = 0; now_seconds() < end; round++) {
			setget(1, n, p, round);
			setget(0, n, p, round);
		}
		printf("rounds=%ld\n", round);
	} else if (strcmp(s, "flush") == 0)
		each_master("FLUSHALL");
	else if (strcmp(s, "dbsize") == 0)
		printf("dbsize=%lld\n", each_master("DBSIZE"));
	else if (strncmp(s, "slot:", 5) == 0)
		printf("%u\n", key_slot(s + 5, strlen(s + 5)));
	else if (strncmp(s, "touch:", 6) == 0) {
		FILE	*f = fopen(s + 6, "w");

		if (f == NULL || fclose(f) != 0)
			die("%s: cannot create", s + 6);
	} else if (strncmp(s, "waitfile:", 9) == 0) {
		for (i = 0; stat(s + 9, &st) != 0; i++) {
			if (i == 600)
				die("%s: not there after 60 s", s + 9);
			usleep(100000);
		}
	} else if (strcmp(s, "info") == 0)
		printf("cluster=%d masters=%u roundtrips=%llu\n",
		    cluster_is_cluster(cl), cluster_masters(cl),
		    (unsigned long long)cluster_roundtrips(cl));
	else
		die("unknown step \"%s\"", s);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	char	*cause = NULL;
	double	 timeout = 10;
	int	 ch, replicas = 0;

	signal(SIGPIPE, SIG_IGN);	/* as mhfilter does */
	log_init("cluster_probe");
	while ((ch = getopt(argc, argv, "t:vw:")) != -1) {
		switch (ch) {
		case 't':
			timeout = atof(optarg);
			break;
		case 'v':
			log_verbose(1);
			break;
		case 'w':
			replicas = atoi(optarg);
			break;
		default:
			die("usage: cluster_probe [-v] [-t timeout] "
			    "[-w replicas] hosts step ...");
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		die("no hosts");
	if ((cl = cluster_connect(argv[0], timeout, &cause)) == NULL)
		die("%s", cause);
	cluster_wait(cl, replicas, 1000);
	while (--argc > 0)
		step(*++argv);
	cluster_close(cl);
	return (0);
}
