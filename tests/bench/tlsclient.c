/*
 * tests/bench/tlsclient: the client of the TLS benchmark (tests/bench/daemon
 * --tls), plaintext or TLS over TCP.
 *
 *   tlsclient tcp:HOST:PORT FILE
 *   tlsclient tls:HOST:PORT CA CERT KEY FILE
 *
 * One connection, one thread (an SSL object is not for two): it sends FILE
 * while reading the replies, non-blocking, then ends its input (a
 * half-close, or over TLS a close_notify, after which the daemon still
 * answers) and counts reply lines until the daemon closes.  Prints the
 * seconds from the connection (after the TLS handshake) to the last reply,
 * then the replies, as tests/bench/dclient does.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define CHUNK	(64 * 1024)

struct conn {
	int		 fd;
	SSL		*ssl;		/* NULL for plaintext */
	const char	*data;		/* the file */
	size_t		 len;
	size_t		 off;		/* sent so far */
	int		 shut;		/* input ended */
	uint64_t	 lines;		/* replies read */
};

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec + ts.tv_nsec / 1e9);
}

/* Exit with OpenSSL's reason. */
static void
ssl_die(const char *what)
{
	char	 msg[256];

	ERR_error_string_n(ERR_get_error(), msg, sizeof msg);
	errx(1, "%s: %s", what, msg);
}

/* Connect to HOST:PORT (retrying while the daemon starts). */
static int
dial(const char *hostport)
{
	struct addrinfo	 hints, *res;
	char		*host, *port;
	int		 fd, rc, tries;

	if ((host = strdup(hostport)) == NULL)
		err(1, "strdup");
	if ((port = strrchr(host, ':')) == NULL)
		errx(1, "%s: not HOST:PORT", hostport);
	*port++ = '\0';
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
		errx(1, "%s: %s", hostport, gai_strerror(rc));
	for (tries = 0;; tries++) {
		if ((fd = socket(res->ai_family, SOCK_STREAM, 0)) == -1)
			err(1, "socket");
		if (connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		close(fd);
		if (tries == 3000)
			err(1, "connect %s", hostport);
		usleep(10000);
	}
	freeaddrinfo(res);
	free(host);
	return (fd);
}

/* The TLS client side: trust ca, present cert and key; handshake. */
static SSL *
handshake(int fd, const char *ca, const char *cert, const char *key)
{
	SSL_CTX	*ctx;
	SSL	*ssl;

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		ssl_die("SSL_CTX_new");
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
		ssl_die(ca);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		ssl_die(cert);
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		ssl_die(key);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if ((ssl = SSL_new(ctx)) == NULL)
		ssl_die("SSL_new");
	SSL_CTX_free(ctx);
	if (SSL_set1_host(ssl, "localhost") != 1 ||
	    SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1)
		ssl_die("TLS handshake");
	return (ssl);
}

/*
 * What an I/O call's result n means: > 0 bytes, 0 would block, -1 the end
 * (EOF, close_notify).  Other errors exit.
 */
static ssize_t
io_result(struct conn *c, ssize_t n, const char *what)
{
	int	 e;

	if (c->ssl == NULL) {
		if (n > 0)
			return (n);
		if (n == 0)
			return (-1);
		if (errno == EAGAIN || errno == EINTR)
			return (0);
		err(1, "%s", what);
	}
	if (n > 0)
		return (n);
	e = SSL_get_error(c->ssl, (int)n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return (0);
	if (e == SSL_ERROR_ZERO_RETURN ||
	    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && n == 0))
		return (-1);
	ssl_die(what);
	return (-1);
}

/* Send what the socket takes; end the input once everything is sent. */
static void
push(struct conn *c)
{
	size_t	 want = c->len - c->off;
	ssize_t	 n;

	if (c->shut)
		return;
	if (want > 0) {
		if (want > CHUNK)
			want = CHUNK;
		if (c->ssl != NULL)
			n = SSL_write(c->ssl, c->data + c->off, (int)want);
		else
			n = write(c->fd, c->data + c->off, want);
		if ((n = io_result(c, n, "write")) > 0)
			c->off += n;
		if (c->off < c->len)
			return;
	}
	if (c->ssl != NULL)
		SSL_shutdown(c->ssl);	/* close_notify; replies still come */
	else
		shutdown(c->fd, SHUT_WR);
	c->shut = 1;
}

/* Count the reply lines that came.  Returns 0, or -1 at the end. */
static int
pull(struct conn *c)
{
	char	 buf[CHUNK];
	ssize_t	 n, i;

	for (;;) {
		if (c->ssl != NULL)
			n = SSL_read(c->ssl, buf, sizeof buf);
		else
			n = read(c->fd, buf, sizeof buf);
		if ((n = io_result(c, n, "read")) <= 0)
			return (n == 0 ? 0 : -1);
		for (i = 0; i < n; i++)
			c->lines += buf[i] == '\n';
	}
}

int
main(int argc, char **argv)
{
	struct conn	 c;
	struct stat	 st;
	struct pollfd	 pfd;
	const char	*file;
	char		*data;
	double		 t0;
	int		 fd;

	memset(&c, 0, sizeof c);
	if (argc == 3 && strncmp(argv[1], "tcp:", 4) == 0)
		file = argv[2];
	else if (argc == 6 && strncmp(argv[1], "tls:", 4) == 0)
		file = argv[5];
	else {
		fprintf(stderr, "usage: tlsclient tcp:HOST:PORT FILE\n"
		    "       tlsclient tls:HOST:PORT CA CERT KEY FILE\n");
		return (2);
	}
	if ((fd = open(file, O_RDONLY)) == -1 || fstat(fd, &st) == -1)
		err(1, "%s", file);
	if ((data = malloc(st.st_size + 1)) == NULL)
		err(1, "malloc");
	if (read(fd, data, st.st_size) != st.st_size)
		err(1, "read %s", file);
	close(fd);
	c.data = data;
	c.len = st.st_size;

	c.fd = dial(argv[1] + 4);
	if (argc == 6)
		c.ssl = handshake(c.fd, argv[2], argv[3], argv[4]);
	t0 = now();
	if (fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK) == -1)
		err(1, "fcntl");
	for (;;) {
		push(&c);
		if (pull(&c) == -1)
			break;
		pfd.fd = c.fd;
		pfd.events = POLLIN | (c.shut ? 0 : POLLOUT);
		if (c.ssl != NULL && SSL_pending(c.ssl) > 0)
			continue;
		if (poll(&pfd, 1, -1) == -1 && errno != EINTR)
			err(1, "poll");
	}
	printf("%.3f %llu\n", now() - t0, (unsigned long long)c.lines);
	SSL_free(c.ssl);
	free(data);
	return (0);
}
