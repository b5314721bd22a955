/*
 * TLS for the daemon's tls: listeners: the server context (certificate,
 * key, TLS 1.2 or later, and client certificates with --tls-client-ca),
 * and the messages of OpenSSL's error queue.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "mhfilter.h"

/* Sessions resumed only by the contexts of this program. */
#define TLS_SESSION_ID	"mhfilter"

static int	tls_fail(const char *, const char *, char **);

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
void
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
void
tls_reason(unsigned long e, char *out, size_t len)
{
	const char	*r;

	if ((r = ERR_reason_error_string(e)) != NULL)
		snprintf(out, len, "%s", r);
	else
		ERR_error_string_n(e, out, len);
}

/*
 * Make a server context from the options: the certificate chain and key
 * (PEM), TLS 1.2 or later, and with a client CA, client certificates
 * required and verified against it.  Returns NULL with a cause naming the
 * option and file at fault.
 */
SSL_CTX *
tls_context(const struct tls_opts *o, char **cause)
{
	SSL_CTX			*ctx;
	STACK_OF(X509_NAME)	*names;

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		tls_fail("TLS", NULL, cause);
		return (NULL);
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_fail("TLS", NULL, cause);
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	/*
	 * A client's TCP FIN without close_notify ends its input, as on the
	 * other listeners (OpenSSL 3 would make it an error, and its last
	 * replies would be lost).
	 */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
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
void
tls_context_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

/* The subject of a connection's peer certificate, or "-" if none. */
void
tls_peer(SSL *ssl, char *out, size_t len)
{
	X509	*x;

	if ((x = SSL_get_peer_certificate(ssl)) == NULL) {
		snprintf(out, len, "-");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(x), out, (int)len);
	X509_free(x);
}

/*
 * Why a connection's peer certificate was refused ("certificate has
 * expired"), appended to out as " (...)"; nothing if it was not.
 */
void
tls_verify_error(SSL *ssl, char *out, size_t len)
{
	long	 v = SSL_get_verify_result(ssl);
	size_t	 used = strlen(out);

	if (v == X509_V_OK || used >= len)
		return;
	snprintf(out + used, len - used, " (%s)",
	    X509_verify_cert_error_string(v));
}
