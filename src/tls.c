/*
 * TLS for the daemon's tls: listeners, built as the module mhfilter-tls.so,
 * whose one symbol is the table tlsmod (tls_module in module.c opens it):
 * the server context (certificate, key, TLS 1.2 or later, and client
 * certificates with --tls-client-ca), the OpenSSL bufferevent of an
 * accepted connection, and the messages of OpenSSL's error queue; and
 * the client's side for --connect tls: (client.c), a context verifying
 * the server and a session driven by client.c's poll loop.
 *
 * OpenSSL and libevent_openssl are this file's alone.  Linked into the
 * program, libssl and libcrypto would cost every run about 0.8 ms of its
 * start and 1.2 MB of its RSS, whether it serves TLS or not: an empty
 * program linked against mhfilter's other libraries starts in 1.3 ms, in
 * 2.1 ms with these.  So the daemon opens the module when it first makes a
 * context (tls_module), and calls the rest only for a connection accepted
 * with one.
 *
 * daemon.c makes a context at start and again on SIGHUP; a connection
 * holds a reference to the context it was accepted with, so the old one
 * is freed once its last connection is.  A bad certificate or key at
 * start stops the daemon; on SIGHUP it is logged and the old context
 * stays.  The line protocol inside TLS is the plaintext one: the daemon
 * reads and writes its clients through bufferevents, and a TLS client's
 * is an OpenSSL bufferevent (bufferevent_openssl_socket_new).
 */

#include "config.h"

#include <arpa/inet.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "mhfilter.h"

/* Sessions resumed only by the contexts of this program. */
#define TLS_SESSION_ID	"mhfilter"

static int	tls_fail(const char *, const char *, char **);
static void	tls_error(char *, size_t);
static void	tls_reason(unsigned long, char *, size_t);
static SSL_CTX	*tls_context(const struct tls_opts *, char **);
static void	tls_context_free(SSL_CTX *);
static struct bufferevent *tls_accept(SSL_CTX *, struct event_base *, int);
static void	tls_close_notify(struct bufferevent *);
static void	tls_failure(struct bufferevent *, const char *, char *,
		    size_t);
static void	tls_describe(struct bufferevent *, char *, size_t);
static size_t	tls_read_pending(struct bufferevent *, size_t);
static SSL_CTX	*tls_client_context(const struct tls_client_opts *, char **);
static SSL	*tls_client_new(SSL_CTX *, int, const char *, char **);
static int	 tls_client_io(SSL *, int, void *, size_t, char **);
static void	 tls_client_free(SSL *);

/* What the program finds in the module (mhfilter.h). */
const struct tlsmod tlsmod = {
	tls_context,
	tls_context_free,
	tls_accept,
	tls_close_notify,
	tls_failure,
	tls_describe,
	tls_read_pending,
	tls_client_context,
	tls_context_free,
	tls_client_new,
	tls_client_io,
	tls_client_free,
};

/*
 * Set *cause to "OPTION FILE: " and OpenSSL's reason (the oldest error in
 * its queue, which names the first thing that went wrong), and empty the
 * queue.  Returns -1.
 */
static int
tls_fail(const char *opt, const char *file, char **cause)
{
	char		 msg[256];
	unsigned long	 e;

	if ((e = ERR_get_error()) == 0)
		snprintf(msg, sizeof msg, "unknown error");
	else
		tls_reason(e, msg, sizeof msg);
	ERR_clear_error();
	if (file != NULL)
		xasprintf(cause, "%s %s: %s", opt, file, msg);
	else
		xasprintf(cause, "%s: %s", opt, msg);
	return (-1);
}

/*
 * The reason of the last TLS failure, for a log line (OpenSSL's error
 * queue, then empty); "" if OpenSSL gave none.  len 0: only empty it.
 */
static void
tls_error(char *out, size_t len)
{
	unsigned long	 e, last = 0;

	while ((e = ERR_get_error()) != 0)
		last = e;
	if (len == 0)
		return;
	if (last == 0)
		snprintf(out, len, "%s", "");
	else
		tls_reason(last, out, len);
}

/* OpenSSL's reason for error e ("wrong version number"), or its code. */
static void
tls_reason(unsigned long e, char *out, size_t len)
{
	const char	*r;

	if ((r = ERR_reason_error_string(e)) != NULL)
		snprintf(out, len, "%s", r);
	else
		ERR_error_string_n(e, out, len);
}

/*
 * A context of method, for a server or a client: TLS 1.2 or later, no
 * renegotiation or compression, a peer's TCP FIN without close_notify an
 * end of input rather than an error, and the options opts.  NULL with a
 * cause.
 */
static SSL_CTX *
tls_context_new(const SSL_METHOD *method, uint64_t opts, char **cause)
{
	SSL_CTX	*ctx;

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(method)) == NULL) {
		tls_fail("TLS", NULL, cause);
		return (NULL);
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_fail("TLS", NULL, cause);
		SSL_CTX_free(ctx);
		return (NULL);
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_NO_COMPRESSION | opts);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	return (ctx);
}

/*
 * Make a server context from the options: the certificate chain and key
 * (PEM), TLS 1.2 or later, and with a client CA, client certificates
 * required and verified against it.  Returns NULL with a cause naming the
 * option and file at fault.
 */
static SSL_CTX *
tls_context(const struct tls_opts *o, char **cause)
{
	SSL_CTX			*ctx;
	STACK_OF(X509_NAME)	*names;

	/*
	 * A client's TCP FIN without close_notify ends its input, as on the
	 * other listeners (OpenSSL 3 would make it an error, and its last
	 * replies would be lost).
	 */
	if ((ctx = tls_context_new(TLS_server_method(),
	    SSL_OP_CIPHER_SERVER_PREFERENCE, cause)) == NULL)
		return (NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
		tls_fail("--tls-cert", o->cert, cause);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) != 1) {
		tls_fail("--tls-key", o->key, cause);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		tls_fail("--tls-key", o->key, cause);
		goto fail;
	}
	SSL_CTX_set_session_id_context(ctx,
	    (const unsigned char *)TLS_SESSION_ID, strlen(TLS_SESSION_ID));
	if (o->client_ca != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, o->client_ca,
		    NULL) != 1 ||
		    (names = SSL_load_client_CA_file(o->client_ca)) == NULL) {
			tls_fail("--tls-client-ca", o->client_ca, cause);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return (ctx);

fail:
	SSL_CTX_free(ctx);
	return (NULL);
}

/* Drop a context (its connections keep it until they end). */
static void
tls_context_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

/*
 * The bufferevent of a connection accepted on a tls: listener, with
 * context ctx; it closes fd and frees its TLS state when it is freed.
 * NULL if it cannot be made.
 */
static struct bufferevent *
tls_accept(SSL_CTX *ctx, struct event_base *base, int fd)
{
	struct bufferevent	*bev;
	SSL			*ssl;

	if ((ssl = SSL_new(ctx)) == NULL)
		return (NULL);
	/*
	 * Deferred callbacks: libevent reports the end of a TLS stream from
	 * the read that also took the stream's last bytes, before they are
	 * in the input buffer; deferred, the read callback runs first and
	 * the last records count.
	 */
	bev = bufferevent_openssl_socket_new(base, fd, ssl,
	    BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return (NULL);
	}
	/* A client may end with a TCP FIN, without close_notify. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return (bev);
}

/*
 * Move up to max of the bytes OpenSSL holds decrypted, the rest of a TLS
 * record it has read, to the connection's input; returns how many.
 * libevent 2.1 stops reading at the input's high-water mark with part of a
 * record left in OpenSSL, and when reading resumes waits for the socket to
 * be readable: if the client has sent everything, that part would never
 * be read.  No I/O: SSL_read returns what is pending.
 */
static size_t
tls_read_pending(struct bufferevent *bev, size_t max)
{
	SSL			*ssl = bufferevent_openssl_get_ssl(bev);
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_iovec	 v;
	int			 n, r;

	if ((n = SSL_pending(ssl)) <= 0 || max == 0)
		return (0);
	if ((size_t)n > max)
		n = (int)max;
	if (evbuffer_reserve_space(in, n, &v, 1) < 1)
		return (0);
	if ((r = SSL_read(ssl, v.iov_base, n)) <= 0) {
		tls_error(NULL, 0);	/* empty OpenSSL's error queue */
		return (0);
	}
	v.iov_len = (size_t)r;
	evbuffer_commit_space(in, &v, 1);
	return ((size_t)r);
}

/* Send close_notify on a connection whose handshake is done. */
static void
tls_close_notify(struct bufferevent *bev)
{
	if (SSL_shutdown(bufferevent_openssl_get_ssl(bev)) < 0)
		tls_error(NULL, 0);	/* empty OpenSSL's error queue */
}

/*
 * Why a TLS connection failed, into why: OpenSSL's reason, else fallback
 * (the socket's error), then why its peer certificate was refused
 * ("certificate has expired") as " (...)", if it was.
 */
static void
tls_failure(struct bufferevent *bev, const char *fallback, char *why,
    size_t len)
{
	SSL		*ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long	 e, last = 0;
	long		 v;
	size_t		 used;

	/* Latest first; SSL_get_error's code (no library) comes last. */
	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		if (last == 0 && ERR_GET_LIB(e) != 0)
			last = e;
	}
	if (last != 0)
		tls_reason(last, why, len);
	else
		tls_error(why, len);
	if (why[0] == '\0')
		snprintf(why, len, "%s", fallback);
	v = SSL_get_verify_result(ssl);
	used = strlen(why);
	if (v != X509_V_OK && used < len)
		snprintf(why + used, len - used, " (%s)",
		    X509_verify_cert_error_string(v));
}

/*
 * What a connection whose handshake is done uses, for a log line: its
 * protocol and the subject of its peer certificate ("TLSv1.3, client
 * certificate /CN=feeder", or "-" for none).
 */
static void
tls_describe(struct bufferevent *bev, char *out, size_t len)
{
	SSL	*ssl = bufferevent_openssl_get_ssl(bev);
	X509	*x;
	char	 subject[256];

	if ((x = SSL_get_peer_certificate(ssl)) == NULL)
		snprintf(subject, sizeof subject, "-");
	else {
		X509_NAME_oneline(X509_get_subject_name(x), subject,
		    (int)sizeof subject);
		X509_free(x);
	}
	snprintf(out, len, "%s, client certificate %s", SSL_get_version(ssl),
	    subject);
}

/*
 * The client's context (--connect tls:): TLS 1.2 or later, the server's
 * certificate verified against --tls-ca (else the system's CAs), and the
 * client's own certificate and key if given.  NULL with a cause naming
 * the option and file at fault.
 */
static SSL_CTX *
tls_client_context(const struct tls_client_opts *o, char **cause)
{
	SSL_CTX	*ctx;

	/* A daemon killed mid-stream is a closed connection, retried. */
	if ((ctx = tls_context_new(TLS_client_method(), 0, cause)) == NULL)
		return (NULL);
	/* Partial writes, from a buffer that may move between retries. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (o->ca != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1) {
			tls_fail("--tls-ca", o->ca, cause);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		tls_fail("TLS: the system's CA certificates", NULL, cause);
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (o->cert != NULL &&
	    SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
		tls_fail("--tls-cert", o->cert, cause);
		goto fail;
	}
	if (o->key != NULL) {
		if (SSL_CTX_use_PrivateKey_file(ctx, o->key,
		    SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(ctx) != 1) {
			tls_fail("--tls-key", o->key, cause);
			goto fail;
		}
	}
	return (ctx);

fail:
	SSL_CTX_free(ctx);
	return (NULL);
}

/*
 * A client session on connected socket fd, whose certificate must name
 * host (a DNS name, or an IP address); the socket stays the caller's.
 */
static SSL *
tls_client_new(SSL_CTX *ctx, int fd, const char *host, char **cause)
{
	SSL		*ssl;
	unsigned char	 ip[16];
	int		 isip;

	ERR_clear_error();
	if ((ssl = SSL_new(ctx)) == NULL) {
		tls_fail("TLS", NULL, cause);
		return (NULL);
	}
	isip = inet_pton(AF_INET, host, ip) == 1 ||
	    inet_pton(AF_INET6, host, ip) == 1;
	if (isip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    host) != 1)
			goto fail;
	} else if (SSL_set1_host(ssl, host) != 1 ||
	    SSL_set_tlsext_host_name(ssl, host) != 1)
		goto fail;
	if (SSL_set_fd(ssl, fd) != 1)
		goto fail;
	SSL_set_connect_state(ssl);
	return (ssl);

fail:
	tls_fail("TLS", host, cause);
	SSL_free(ssl);
	return (NULL);
}

/*
 * One step of a client session: TLSC_HANDSHAKE, TLSC_READ or TLSC_WRITE of
 * len bytes at p, TLSC_SHUTDOWN (close_notify, not waiting for the
 * peer's).  Bytes moved (1 for a handshake done), 0 at the end of the
 * stream, TLSC_WANT_READ or TLSC_WANT_WRITE to be called again when the
 * socket is ready, or -1 with a cause (cause NULL: none wanted).
 */
static int
tls_client_io(SSL *ssl, int op, void *p, size_t len, char **cause)
{
	char	 why[256];
	long	 v;
	int	 rc, e;

	ERR_clear_error();
	switch (op) {
	case TLSC_HANDSHAKE:
		rc = SSL_do_handshake(ssl);
		break;
	case TLSC_READ:
		rc = SSL_read(ssl, p, len > INT_MAX ? INT_MAX : (int)len);
		break;
	case TLSC_WRITE:
		rc = SSL_write(ssl, p, len > INT_MAX ? INT_MAX : (int)len);
		break;
	default:
		if (SSL_shutdown(ssl) < 0)
			tls_error(NULL, 0);
		return (0);
	}
	if (rc > 0)
		return (rc);
	switch ((e = SSL_get_error(ssl, rc))) {
	case SSL_ERROR_WANT_READ:
		return (TLSC_WANT_READ);
	case SSL_ERROR_WANT_WRITE:
		return (TLSC_WANT_WRITE);
	case SSL_ERROR_ZERO_RETURN:
		return (0);
	}
	tls_error(why, sizeof why);
	if (why[0] == '\0')
		snprintf(why, sizeof why, "%s", e == SSL_ERROR_SYSCALL ?
		    "connection closed" : "failed");
	if (op == TLSC_HANDSHAKE &&
	    (v = SSL_get_verify_result(ssl)) != X509_V_OK)
		snprintf(why + strlen(why), sizeof why - strlen(why), " (%s)",
		    X509_verify_cert_error_string(v));
	if (cause != NULL)
		xasprintf(cause, "TLS: %s", why);
	return (-1);
}

/* Free a client session (its socket is closed by the caller). */
static void
tls_client_free(SSL *ssl)
{
	SSL_free(ssl);
}
