#!/usr/bin/env python3
"""A stand-in for 'mhfilter --listen tls:' whose first batch after one
answered fails to commit (tests/e2e/connect.bats), answering as the daemon
does then, with its TLS records back to back in one read of the client:

  failing-daemon.py CERT KEY PORTFILE LOG

Connection 1 gets "ack", then for its first four records "unique id0",
"duplicate id1 id0" and the failed batch's first "error id2 index" in one
TLS record, "error id3 index" in the next.  Later connections: every
record unique.  The port goes to PORTFILE; each record received, as
"connN ID", and each "#mhfilter taken" line, to LOG.
"""

import socket
import ssl
import sys
import threading

cert, key, portfile, log = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(8)
logf = open(log, "w")
lock = threading.Lock()


def note(s):
    with lock:
        logf.write(s + "\n")
        logf.flush()


def lines(s):
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode()
        try:
            d = s.recv(65536)
        except (ssl.SSLError, OSError):
            return
        if not d:
            return
        buf += d


def serve(s, n):
    it = lines(s)
    if next(it, None) != "#mhfilter ack":
        return
    s.sendall(b"ack\n")
    got = 0
    for line in it:
        if line.startswith("#mhfilter"):
            note("conn%d told: %s" % (n, line))
            continue
        i = line.split("\t")[0]
        note("conn%d %s" % (n, i))
        got += 1
        if n > 1:
            s.sendall(("unique\t%s\n" % i).encode())
        elif got == 4:
            # Two TLS records in one TCP segment (corked): both are there
            # when the client reads.
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            s.sendall(b"unique\tid0\nduplicate\tid1\tid0\t1.0000\n"
                      b"error\tid2\tindex\tcommit: Input/output error\n")
            s.sendall(b"error\tid3\tindex\tcommit: Input/output error\n")
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    try:
        s.close()
    except OSError:
        pass


open(portfile, "w").write(str(ls.getsockname()[1]))
n = 0
while True:
    c, _ = ls.accept()
    n += 1
    try:
        s = ctx.wrap_socket(c, server_side=True)
    except (ssl.SSLError, OSError):
        continue
    threading.Thread(target=serve, args=(s, n), daemon=True).start()
