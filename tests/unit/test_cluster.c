/*
 * Unit tests for cluster.c: key_slot against known answers (CRC16-XMODEM
 * of "123456789" is 0x31C3; the other slots are what CLUSTER KEYSLOT of a
 * Redis 7.0 cluster node answered), the CRC table against a bitwise CRC,
 * and the parsing of redirections and host lists, from tables.
 *
 * With redis-server in PATH, a live test also runs the client against a
 * single Redis (and a replica) it starts on free loopback ports: replies,
 * keyless commands, a restart during cluster_exec, a hung server, giving
 * up, and WAIT.  Without redis-server that test is skipped.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <netinet/in.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "mhfilter.h"

/* Keys and the slot CLUSTER KEYSLOT gives for them (redis-server 7.0). */
static const struct {
	const char	*key;
	size_t		 len;
	unsigned	 slot;
} slots[] = {
#define K(s)	s, sizeof s - 1
	{ K("123456789"), 12739 },		/* 0x31c3 */
	{ K("foo"), 12182 },
	{ K("bar"), 5061 },
	{ K(""), 0 },
	{ K("{user1000}.following"), 3443 },
	{ K("{user1000}.followers"), 3443 },	/* same tag, same slot */
	{ K("foo{}{bar}"), 8363 },		/* empty tag: whole key */
	{ K("foo{{bar}}zap"), 4015 },		/* hashes "{bar" */
	{ K("{bar"), 4015 },
	{ K("foo{bar}{zap}"), 5061 },		/* the first tag: "bar" */
	{ K("{}"), 15257 },
	{ K("a{b}c"), 3300 },
	{ K("}{x}"), 16287 },
	{ K("x{}y{z}"), 15453 },
	{ K("x{y"), 2740 },
	{ K("{"), 4092 },
	{ K("}"), 12090 },
	{ K("hello world"), 15332 },
	{ K("mhf:b:0123456789abcdef"), 6816 },
	{ K("key\0with\xffnul"), 5816 },	/* binary-safe */
#undef K
};

/* key_slot's known answers. */
static void
test_key_slot(void **state)
{
	size_t	 i;

	for (i = 0; i < sizeof slots / sizeof slots[0]; i++) {
		if (key_slot(slots[i].key, slots[i].len) != slots[i].slot)
			fail_msg("key_slot(\"%s\") = %u, want %u", slots[i].key,
			    key_slot(slots[i].key, slots[i].len),
			    slots[i].slot);
	}
}

/* The CRC16-XMODEM of p, bit by bit: an oracle for the table. */
static unsigned
crc16_bitwise(const unsigned char *p, size_t len)
{
	unsigned	 crc = 0;
	size_t		 i;
	int		 b;

	for (i = 0; i < len; i++) {
		crc ^= (unsigned)p[i] << 8;
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return (crc);
}

/* Random keys without braces: the table agrees with the bitwise CRC. */
static void
test_crc_table(void **state)
{
	unsigned char	 key[64];
	uint64_t	 x = 0x9e3779b97f4a7c15ULL;
	size_t		 len, j;
	int		 i;

	for (i = 0; i < 100000; i++) {
		len = i % sizeof key;
		for (j = 0; j < len; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			key[j] = x;
			if (key[j] == '{')
				key[j] = 'x';
		}
		assert_int_equal(key_slot((char *)key, len),
		    crc16_bitwise(key, len) & 16383);
	}
}

/* Redirections: what comes in and what must come out (0: not one). */
static void
test_redirect(void **state)
{
	static const struct {
		const char	*msg;
		int		 kind;
		unsigned	 slot;
		const char	*host;
		int		 port;
	} cases[] = {
		{ "MOVED 3999 127.0.0.1:6381", CLUSTER_MOVED, 3999,
		    "127.0.0.1", 6381 },
		{ "ASK 3999 127.0.0.1:6381", CLUSTER_ASK, 3999, "127.0.0.1",
		    6381 },
		{ "MOVED 0 redis-1.example:7000", CLUSTER_MOVED, 0,
		    "redis-1.example", 7000 },
		{ "MOVED 16383 10.0.0.1:65535", CLUSTER_MOVED, 16383,
		    "10.0.0.1", 65535 },
		{ "MOVED 12 :6380", CLUSTER_MOVED, 12, "", 6380 },
		{ "ASK 12 ::1:6380", CLUSTER_ASK, 12, "::1", 6380 },
		{ "MOVED 12 ?:6380", CLUSTER_MOVED, 12, "?", 6380 },

		{ "MOVED 16384 127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "MOVED -1 127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1:", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1:0", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1:65536", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1:63x", 0, 0, NULL, 0 },
		{ "MOVED 3999  127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "MOVED 3999 127.0.0.1:6381 x", 0, 0, NULL, 0 },
		{ "MOVED  3999 127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "MOVED 000003999 127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "MOVED", 0, 0, NULL, 0 },
		{ "MOVED ", 0, 0, NULL, 0 },
		{ "moved 3999 127.0.0.1:6381", 0, 0, NULL, 0 },
		{ "ASKING", 0, 0, NULL, 0 },
		{ "ERR unknown command", 0, 0, NULL, 0 },
		{ "WRONGTYPE Operation against a key", 0, 0, NULL, 0 },
		{ "", 0, 0, NULL, 0 },
	};
	unsigned	 slot;
	char		*host;
	size_t		 i;
	int		 kind, port;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		slot = 99999;
		host = NULL;
		port = -1;
		kind = cluster_parse_redirect(cases[i].msg,
		    strlen(cases[i].msg), &slot, &host, &port);
		if (kind != cases[i].kind)
			fail_msg("\"%s\": %d, want %d", cases[i].msg, kind,
			    cases[i].kind);
		if (kind == 0) {
			assert_null(host);
			continue;
		}
		assert_int_equal(slot, cases[i].slot);
		assert_string_equal(host, cases[i].host);
		assert_int_equal(port, cases[i].port);
		free(host);
	}
}

/* Host lists: the addresses, or a substring of the cause. */
static void
test_hosts(void **state)
{
	static const struct {
		const char	*in;
		size_t		 n;
		const char	*hosts[3];
		int		 ports[3];
		const char	*cause;
	} cases[] = {
		{ "127.0.0.1:6379", 1, { "127.0.0.1" }, { 6379 }, NULL },
		{ "a:1,b.example:2,c-d_e:65535", 3,
		    { "a", "b.example", "c-d_e" }, { 1, 2, 65535 }, NULL },
		{ "[::1]:7000,localhost:7001", 2, { "::1", "localhost" },
		    { 7000, 7001 }, NULL },

		{ "", 0, { NULL }, { 0 }, "no Redis address" },
		{ "localhost", 0, { NULL }, { 0 }, "no :port" },
		{ "127.0.0.1:6379,", 0, { NULL }, { 0 }, "\"\" in" },
		{ ",127.0.0.1:6379", 0, { NULL }, { 0 }, "empty" },
		{ "a:1,,b:2", 0, { NULL }, { 0 }, "empty" },
		{ ":6379", 0, { NULL }, { 0 }, "no host" },
		{ "a:0", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:65536", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:123456", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:-1", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:+1", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a:6379x", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a :6379", 0, { NULL }, { 0 }, "bad character" },
		{ "a:6379 ", 0, { NULL }, { 0 }, "1 to 65535" },
		{ "a/b:6379", 0, { NULL }, { 0 }, "bad character" },
		{ "::1:6379", 0, { NULL }, { 0 }, "needs []" },
		{ "[::1]", 0, { NULL }, { 0 }, "no :port" },
		{ "[]:6379", 0, { NULL }, { 0 }, "[IPv6 address]" },
		{ "[::1:6379", 0, { NULL }, { 0 }, "[IPv6 address]" },
		{ "[::g]:6379", 0, { NULL }, { 0 }, "bad character" },
		{ "redis://a:6379", 0, { NULL }, { 0 }, "more than one" },
	};
	struct cluster_addr	*a;
	size_t			 i, j, n;
	char			*cause;
	int			 rv;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cause = NULL;
		rv = cluster_parse_hosts(cases[i].in, &a, &n, &cause);
		if (cases[i].cause == NULL) {
			if (rv != 0)
				fail_msg("\"%s\": %s", cases[i].in, cause);
			assert_int_equal(n, cases[i].n);
			for (j = 0; j < n; j++) {
				assert_string_equal(a[j].host,
				    cases[i].hosts[j]);
				assert_int_equal(a[j].port, cases[i].ports[j]);
			}
			cluster_free_hosts(a, n);
			continue;
		}
		if (rv != -1 || cause == NULL ||
		    strstr(cause, cases[i].cause) == NULL)
			fail_msg("\"%s\": rv %d, cause \"%s\" lacks \"%s\"",
			    cases[i].in, rv, cause ? cause : "",
			    cases[i].cause);
		assert_null(a);
		assert_int_equal(n, 0);
		free(cause);
	}
}

/* The live test: servers it started, killed by its teardown. */
static pid_t	 live_pids[2] = { -1, -1 };
static char	 live_dir[64];

/* Whether a program is in PATH. */
static int
in_path(const char *prog)
{
	const char	*path = getenv("PATH"), *p, *colon;
	char		 file[4096];

	for (p = path; p != NULL && *p != '\0'; p = colon + 1) {
		colon = strchr(p, ':');
		snprintf(file, sizeof file, "%.*s/%s",
		    (int)(colon != NULL ? colon - p : (ptrdiff_t)strlen(p)),
		    p, prog);
		if (access(file, X_OK) == 0)
			return (1);
		if (colon == NULL)
			break;
	}
	return (0);
}

/* A free loopback TCP port (the system picks it). */
static int
free_port(void)
{
	struct sockaddr_in	 sin;
	socklen_t		 len = sizeof sin;
	int			 s;

	assert_true((s = socket(AF_INET, SOCK_STREAM, 0)) != -1);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sin, &len), 0);
	close(s);
	return (ntohs(sin.sin_port));
}

/*
 * Start redis-server on port, data in live_dir/port, as a replica of
 * master (a port) if it is not 0, after delay seconds.  Returns its pid.
 */
static pid_t
start_server(int port, int master, double delay)
{
	char		 portstr[16], mstr[16], dir[128];
	struct timespec	 ts;
	pid_t		 pid;
	int		 fd;

	snprintf(portstr, sizeof portstr, "%d", port);
	snprintf(mstr, sizeof mstr, "%d", master);
	snprintf(dir, sizeof dir, "%s/%d", live_dir, port);
	mkdir(dir, 0700);
	if ((pid = fork()) == -1)
		fail_msg("fork: %s", strerror(errno));
	if (pid != 0)
		return (pid);
#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);	/* even if the alarm fires */
#endif
	if (delay > 0) {
		ts.tv_sec = (time_t)delay;
		ts.tv_nsec = (long)((delay - ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	if (master != 0)
		execlp("redis-server", "redis-server", "--port", portstr,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--daemonize", "no", "--dir", dir, "--replicaof",
		    "127.0.0.1", mstr, (char *)NULL);
	else
		execlp("redis-server", "redis-server", "--port", portstr,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--daemonize", "no", "--dir", dir,
		    "--repl-diskless-sync-delay", "0", (char *)NULL);
	_exit(127);
}

/* Kill a server and reap it. */
static void
stop_server(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGCONT);
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

/* Kill the servers and remove their directory. */
static int
live_teardown(void **state)
{
	char	 cmd[128];

	stop_server(&live_pids[0]);
	stop_server(&live_pids[1]);
	if (live_dir[0] != '\0') {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", live_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", live_dir);
		live_dir[0] = '\0';
	}
	return (0);
}

/* Queue a command of C strings for key. */
static size_t
q(struct cluster *c, const char *key, int argc, const char **argv)
{
	return (cluster_queue(c, key, strlen(key), argc, argv, NULL));
}

/* The number in "cmdstat_wait:calls=N" of INFO commandstats, or 0. */
static long
wait_calls(struct cluster *c)
{
	const char		*argv[] = { "INFO", "commandstats" };
	const redisReply	*r;
	const char		*p;
	char			*cause = NULL;
	long			 n = 0;

	cluster_queue_node(c, 0, 2, argv, NULL);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("INFO: %s", cause);
	r = cluster_reply(c, 0);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	if ((p = strstr(r->str, "cmdstat_wait:calls=")) != NULL)
		n = strtol(p + 19, NULL, 10);
	cluster_reset(c);
	return (n);
}

/* Wait (10 s) until the master has a replica in sync. */
static void
wait_replica(struct cluster *c)
{
	const char		*argv[] = { "INFO", "replication" };
	const redisReply	*r;
	char			*cause = NULL;
	int			 i, ok = 0;

	for (i = 0; i < 200 && !ok; i++) {
		cluster_queue_node(c, 0, 2, argv, NULL);
		if (cluster_exec(c, &cause) != 0)
			fail_msg("INFO: %s", cause);
		r = cluster_reply(c, 0);
		ok = strstr(r->str, "connected_slaves:1") != NULL &&
		    strstr(r->str, "state=online") != NULL;
		cluster_reset(c);
		usleep(50000);
	}
	assert_true(ok);
}

/* A single Redis: replies, restarts, a hang, giving up and WAIT. */
static void
test_live(void **state)
{
	struct cluster		*c, *quick;
	const redisReply	*r;
	const char		*argv[4];
	size_t			 argvlen[4];
	char			 addr[64], key[64], val[64], *cause = NULL;
	const char		 bin[] = "a\0b\r\n\xff";
	double			 t0;
	int			 port, rport, i, n = 1000;

	if (!in_path("redis-server")) {
		skip();
		return;
	}
	snprintf(live_dir, sizeof live_dir, "%s/test_cluster.XXXXXX",
	    getenv("TMPDIR") != NULL && *getenv("TMPDIR") != '\0' ?
	    getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(live_dir));
	port = free_port();
	live_pids[0] = start_server(port, 0, 0);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);

	/* cluster_connect waits for the server to come up. */
	if ((c = cluster_connect(addr, 10, &cause)) == NULL)
		fail_msg("connect: %s", cause);
	assert_int_equal(cluster_is_cluster(c), 0);
	assert_int_equal(cluster_masters(c), 1);
	assert_int_equal(cluster_nodes(c), 1);

	/* SET, APPEND and GET on many keys: one round trip. */
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof key, "k%d", i);
		snprintf(val, sizeof val, "v%d", i);
		argv[0] = "SET"; argv[1] = key; argv[2] = val;
		assert_int_equal(q(c, key, 3, argv), 3 * i);
		argv[0] = "APPEND"; argv[2] = "+";
		assert_int_equal(q(c, key, 3, argv), 3 * i + 1);
		argv[0] = "GET";
		assert_int_equal(q(c, key, 2, argv), 3 * i + 2);
	}
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec: %s", cause);
	assert_int_equal(cluster_roundtrips(c), 1);
	for (i = 0; i < n; i++) {
		snprintf(val, sizeof val, "v%d+", i);
		r = cluster_reply(c, 3 * i);
		assert_int_equal(r->type, REDIS_REPLY_STATUS);
		assert_string_equal(r->str, "OK");
		r = cluster_reply(c, 3 * i + 1);
		assert_int_equal(r->type, REDIS_REPLY_INTEGER);
		assert_int_equal(r->integer, strlen(val));
		r = cluster_reply(c, 3 * i + 2);
		assert_int_equal(r->type, REDIS_REPLY_STRING);
		assert_string_equal(r->str, val);
	}
	/* Nothing pending: no round trip. */
	assert_int_equal(cluster_exec(c, &cause), 0);
	assert_int_equal(cluster_roundtrips(c), 1);
	cluster_reset(c);

	/* Binary-safe arguments; WRONGTYPE is a final reply; DBSIZE. */
	argv[0] = "SET"; argv[1] = "bin"; argv[2] = bin;
	argvlen[0] = 3; argvlen[1] = 3; argvlen[2] = sizeof bin - 1;
	cluster_queue(c, "bin", 3, 3, argv, argvlen);
	argv[0] = "GET";
	cluster_queue(c, "bin", 3, 2, argv, argvlen);
	argv[0] = "LPUSH"; argv[2] = "x";
	q(c, "bin", 3, argv);
	argv[0] = "DBSIZE";
	cluster_queue_node(c, 0, 1, argv, NULL);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec: %s", cause);
	r = cluster_reply(c, 1);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_int_equal(r->len, sizeof bin - 1);
	assert_memory_equal(r->str, bin, sizeof bin - 1);
	r = cluster_reply(c, 2);
	assert_int_equal(r->type, REDIS_REPLY_ERROR);
	assert_true(strncmp(r->str, "WRONGTYPE", 9) == 0);
	r = cluster_reply(c, 3);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	assert_int_equal(r->integer, n + 1);
	assert_int_equal(cluster_roundtrips(c), 2);
	cluster_reset(c);

	/* Killed, then restarted while cluster_exec retries. */
	if ((quick = cluster_connect(addr, 0.3, &cause)) == NULL)
		fail_msg("connect: %s", cause);
	stop_server(&live_pids[0]);
	live_pids[0] = start_server(port, 0, 0.3);
	argv[0] = "SET"; argv[1] = "after"; argv[2] = "restart";
	q(c, "after", 3, argv);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec after a restart: %s", cause);
	r = cluster_reply(c, 0);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	assert_true(cluster_roundtrips(c) >= 3);
	cluster_reset(c);

	/* Hung: the socket timeout makes it a connection error. */
	kill(live_pids[0], SIGSTOP);
	argv[0] = "GET";
	q(quick, "after", 2, argv);
	t0 = now_seconds();
	assert_int_equal(cluster_exec(quick, &cause), -1);
	if (strstr(cause, "timed out (gave up after 0.3 s)") == NULL)
		fail_msg("cause: %s", cause);
	assert_true(now_seconds() - t0 < 2);
	free(cause);
	cause = NULL;
	kill(live_pids[0], SIGCONT);
	/* The command is still pending: the next exec answers it. */
	if (cluster_exec(quick, &cause) != 0)
		fail_msg("exec after SIGCONT: %s", cause);
	r = cluster_reply(quick, 0);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "restart");
	cluster_reset(quick);

	/* Gone: give up at the deadline, naming the cause. */
	stop_server(&live_pids[0]);
	q(quick, "after", 2, argv);
	t0 = now_seconds();
	assert_int_equal(cluster_exec(quick, &cause), -1);
	snprintf(val, sizeof val, "redis 127.0.0.1:%d: ", port);
	if (strstr(cause, val) == NULL || strstr(cause,
	    "Connection refused (gave up after 0.3 s)") == NULL)
		fail_msg("cause: %s", cause);
	assert_true(now_seconds() - t0 >= 0.25);
	assert_true(now_seconds() - t0 < 2);
	free(cause);
	cause = NULL;
	cluster_close(quick);

	/* No replica (ROLE says so): cluster_wait adds no WAIT. */
	live_pids[0] = start_server(port, 0, 0);
	cluster_wait(c, 2, 200);
	assert_int_equal(wait_calls(c), 0);	/* retried until it is up */
	assert_int_equal(wait_calls(c), 0);
	cluster_close(c);

	/*
	 * A replica: a new client (ROLE is read at connect time and after
	 * errors) ends each pipeline with WAIT min(2, 1).
	 */
	rport = free_port();
	live_pids[1] = start_server(rport, port, 0);
	if ((c = cluster_connect(addr, 10, &cause)) == NULL)
		fail_msg("connect: %s", cause);
	wait_replica(c);
	cluster_close(c);
	if ((c = cluster_connect(addr, 10, &cause)) == NULL)
		fail_msg("connect: %s", cause);
	cluster_wait(c, 2, 2000);	/* at most the replicas there are */
	argv[0] = "SET"; argv[1] = "w"; argv[2] = "1";
	q(c, "w", 3, argv);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec with WAIT: %s", cause);
	cluster_reset(c);
	i = wait_calls(c);
	assert_int_equal(i, 1);
	q(c, "w", 3, argv);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec with WAIT: %s", cause);
	cluster_reset(c);
	/* Two writes, two WAITs: the reads (INFO) had none. */
	assert_int_equal(wait_calls(c), 2);

	/* A stopped replica: WAIT falls short and the command is pending. */
	kill(live_pids[1], SIGSTOP);
	cluster_wait(c, 2, 200);
	argv[2] = "2";
	q(c, "w", 3, argv);
	assert_int_equal(cluster_exec(c, &cause), -1);
	if (strstr(cause, "write reached 0 of 1 replicas") == NULL)
		fail_msg("cause: %s", cause);
	free(cause);
	cause = NULL;
	assert_null(cluster_reply(c, 0));
	cluster_reset(c);
	/* Reads alone wait for no replica: they go on meanwhile. */
	argv[0] = "GET";
	q(c, "w", 2, argv);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("a read with the replica stopped: %s", cause);
	assert_int_equal(cluster_reply(c, 0)->type, REDIS_REPLY_STRING);
	cluster_reset(c);
	argv[0] = "SET";
	q(c, "w", 3, argv);
	kill(live_pids[1], SIGCONT);
	if (cluster_exec(c, &cause) != 0)
		fail_msg("exec after SIGCONT: %s", cause);
	assert_int_equal(cluster_reply(c, 0)->type, REDIS_REPLY_STATUS);
	cluster_reset(c);

	cluster_close(c);
}

/* Run the tests, each bounded by an alarm as in memcached's testapp. */
int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_slot),
		cmocka_unit_test(test_crc_table),
		cmocka_unit_test(test_redirect),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test_teardown(test_live, live_teardown),
	};

	alarm(60);
	signal(SIGPIPE, SIG_IGN);	/* as mhfilter does */
	/* Keep stdout (TAP) and stderr (cmocka's messages) in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
