/*
 * The Redis backend's open and close: the URL, the password file, the
 * connections, and the parameter records ({NS}:meta), created by the first
 * writer or checked, and a layout 2, 3 or 4 upgraded by a writable open.
 */

#include "config.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "mhfilter.h"
#include "redisint.h"

#define NS_DEFAULT	"mhf"
#define NS_MAX		64
#define EXEC_TIMEOUT	30.0	/* seconds of retries (?timeout=) */
#define REPLICA_WAIT_MS	2000	/* WAIT for one replica, when there is one */

/* Parse redis://host:port[,host:port...][/ns][?timeout=SECONDS]. */
static int
parse_url(const char *url, char **hosts, char **ns, double *timeout,
    char **cause)
{
	const char	*h = url + strlen("redis://"), *slash, *q;
	char		*c;
	size_t		 i;

	*timeout = EXEC_TIMEOUT;
	if ((q = strchr(h, '?')) == NULL)
		q = h + strlen(h);
	else if (strncmp(q, "?timeout=", 9) != 0 ||
	    parse_double(q + 9, 0.1, 86400, timeout, &c) != 0) {
		if (strncmp(q, "?timeout=", 9) == 0)
			free(c);
		xasprintf(cause, "%s: the only option is ?timeout=SECONDS "
		    "(0.1 to 86400)", url);
		return (INDEX_ERROR);
	}
	if ((slash = memchr(h, '/', q - h)) == NULL) {
		*hosts = xstrndup(h, q - h);
		*ns = xstrdup(NS_DEFAULT);
	} else {
		*hosts = xstrndup(h, slash - h);
		*ns = slash + 1 < q ? xstrndup(slash + 1, q - slash - 1) :
		    xstrdup(NS_DEFAULT);
	}
	if (**hosts == '\0') {
		xasprintf(cause, "%s: no host (redis://HOST:PORT[/NS])", url);
		goto fail;
	}
	for (i = 0; (*ns)[i] != '\0'; i++) {
		if (!isalnum((unsigned char)(*ns)[i]) && (*ns)[i] != '_' &&
		    (*ns)[i] != '-' && (*ns)[i] != '.')
			break;
	}
	if ((*ns)[i] != '\0' || i > NS_MAX) {
		xasprintf(cause, "%s: the namespace may have up to %d letters, "
		    "digits, '_', '-' and '.'", url, NS_MAX);
		goto fail;
	}
	return (0);
fail:
	free(*hosts);
	free(*ns);
	*hosts = *ns = NULL;
	return (INDEX_ERROR);
}

/*
 * --redis-password-file: read the credentials every Redis connection
 * authenticates with (cluster_auth), one line: "password" (the default
 * user's, requirepass) or "user password" (an ACL user).  Returns 0, or
 * -1 with a cause that never holds the password.
 */
int
redis_password_file(const char *path, char **cause)
{
	FILE		*f;
	struct stat	 st;
	char		 line[1024], *sp;
	size_t		 len;
	int		 rv = -1;

	if ((f = fopen(path, "re")) == NULL) {
		xasprintf(cause, "%s: %s", path, strerror(errno));
		return (-1);
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & S_IROTH))
		log_warnx("--redis-password-file %s is readable by every user",
		    path);
	if (fgets(line, sizeof line, f) == NULL) {
		xasprintf(cause, "%s: %s", path, ferror(f) ? strerror(errno) :
		    "empty (one line: password, or user password)");
		goto out;
	}
	len = strcspn(line, "\r\n");
	if (line[len] == '\0' && len == sizeof line - 1) {
		xasprintf(cause, "%s: the line is over %zu bytes", path,
		    sizeof line - 2);
		goto out;
	}
	line[len] = '\0';
	sp = strchr(line, ' ');
	if (len == 0 || line[0] == ' ' || (sp != NULL &&
	    (sp[1] == '\0' || strchr(sp + 1, ' ') != NULL))) {
		xasprintf(cause, "%s: expected one line: password, or user "
		    "and password separated by one space", path);
		goto out;
	}
	if (sp != NULL) {
		*sp = '\0';
		cluster_auth(line, sp + 1);
	} else
		cluster_auth(NULL, line);
	rv = 0;
out:
	explicit_bzero(line, sizeof line);
	fclose(f);
	return (rv);
}

/* A Redis index may exist wherever the URL points: only opening tells. */
int
redis_exists(const char *path, uint64_t *size)
{
	(void)path;
	*size = 0;
	return (1);
}

/*
 * Connect, and create or check the parameter records.  The arguments are
 * index_open's.
 */
int
redis_open(struct index **ixp, const char *path, int flags,
    struct index_params *p, int given, char **cause)
{
	struct redis		*r;
	const redisReply	*rp;
	struct metatext		 m;
	struct buf		 text = { 0 };
	uint64_t		 seq;
	double			 timeout;
	char			 stored[16];
	int			 rc, old, rv = INDEX_ERROR;

	r = xcalloc(1, sizeof *r);
	r->base.flags = flags;
	r->base.p = *p;
	r->base.path = xstrdup(path);
	if (parse_url(path, &r->hosts, &r->ns, &timeout, cause) != 0)
		goto fail;
	if ((r->c = cluster_connect(r->hosts, timeout, cause)) == NULL)
		goto fail;
	cluster_wait(r->c, 1, REPLICA_WAIT_MS);

	/* The parameters: create them if there are none (SET NX). */
	ns_key(r, "meta", &r->key);
	if (!(flags & INDEX_RDONLY)) {
		const char	*argv[4];
		size_t		 len[4];

		m.out = &text;
		meta_write(p, MHF_REDIS_FORMAT, time(NULL), metatext_put, &m);
		argv[0] = "SET";
		len[0] = 3;
		argv[1] = r->key.data;
		len[1] = r->key.len;
		argv[2] = text.data;
		len[2] = text.len;
		argv[3] = "NX";
		len[3] = 2;
		cluster_queue(r->c, r->key.data, r->key.len, 4, argv, len);
	}
	q1(r, &r->key, "GET");
	if (cluster_exec(r->c, cause) != 0) {
		redis_fail(r, cause);
		goto fail;
	}
	if (!(flags & INDEX_RDONLY) &&
	    replies_ok(r, 0, 1, "writing the parameters", cause) != 0)
		goto fail;
	rp = cluster_reply(r->c, (flags & INDEX_RDONLY) ? 0 : 1);
	if (rp->type == REDIS_REPLY_NIL) {
		xasprintf(cause, "%s is an empty index", path);
		goto fail;
	}
	if (rp->type != REDIS_REPLY_STRING) {
		reply_error(r, rp, "reading the parameters", cause);
		goto fail;
	}
	m.s = rp->str;
	m.len = rp->len;
	/*
	 * Layouts 2 to 4 are read as they are (2 has no LZ4 texts, 2 and 3
	 * have no delivery marks, which means everything was delivered, none
	 * has a document in another's group), and upgraded by a writable
	 * open, which rewrites the "format" line alone, so that an older
	 * mhfilter refuses the index instead of finding texts or values it
	 * cannot decode, or writing without marks.
	 */
	old = 0;
	if (metatext_get(&m, "format", stored, sizeof stored) == 0 &&
	    (strcmp(stored, "2") == 0 || strcmp(stored, "3") == 0 ||
	    strcmp(stored, "4") == 0))
		old = stored[0] - '0';
	r->format = old && (flags & INDEX_RDONLY) ? old : MHF_REDIS_FORMAT;
	if ((rc = meta_read(&r->base.p, old ? old : MHF_REDIS_FORMAT, given,
	    path, metatext_get, &m, cause)) != 0) {
		rv = rc;
		goto fail;
	}
	if (old && !(flags & INDEX_RDONLY)) {
		text.len = 0;
		metatext_set_format(&m, MHF_REDIS_FORMAT, &text);
		cluster_reset(r->c);
		q2(r, &r->key, "SET", text.data, text.len);
		if (cluster_exec(r->c, cause) != 0) {
			redis_fail(r, cause);
			goto fail;
		}
		if (replies_ok(r, 0, 1, "upgrading the parameters",
		    cause) != 0)
			goto fail;
		log_info("%s: upgraded from Redis index format %d to %d", path,
		    old, MHF_REDIS_FORMAT);
	}
	cluster_reset(r->c);
	if (get_counter(r, "seq", &seq, cause) != 0)
		goto fail;
	r->base.run_doc = seq + 1;
	r->seq_seen = seq;
	r->sig = xcalloc(r->base.p.perms, sizeof *r->sig);
	buf_free(&text);
	*p = r->base.p;
	*ixp = &r->base;
	return (0);
fail:
	buf_free(&text);
	redis_close(&r->base);
	return (rv);
}

void
redis_close(struct index *base)
{
	struct redis	*r = (struct redis *)base;
	size_t		 i;
	char		*cause;

	if (r == NULL)
		return;
	if (r->c != NULL && r->tprev != 0) {
		/* Our last ticket, which nobody needs now (best effort). */
		cluster_reset(r->c);
		queue_zrem(r, "tickets", r->tprev, r->tprev);
		if (cluster_exec(r->c, &cause) != 0)
			free(cause);
	}
	if (r->c != NULL)
		cluster_close(r->c);
	for (i = 0; i < r->nlater; i++)
		free(r->later[i]);
	free(r->later);
	buf_free(&r->lbuf);
	free(r->slots);
	free(r->own);
	u64vec_free(&r->found);
	free(r->docs);
	free(r->ht);
	buf_free(&r->cache);
	free(r->stale);
	free(r->sig);
	u64vec_free(&r->mine);
	u64vec_free(&r->pend);
	u64vec_free(&r->dranges);
	u64vec_free(&r->dreplays);
	u64vec_free(&r->aranges);
	u64vec_free(&r->uranges);
	u64vec_free(&r->writers);
	u64vec_free(&r->stopped);
	u64vec_free(&r->tokdoc);
	textenc_free(r->te);
	buf_free(&r->key);
	buf_free(&r->val);
	free(r->ns);
	free(r->hosts);
	free(r->base.path);
	free(r);
}
