#!/usr/bin/env python3
"""Test clients for mhfilter's daemon mode (tests/e2e/daemon*.bats).

An address is unix:PATH, tcp:HOST:PORT or tls:HOST:PORT, as for --listen.
Every command is bounded in time; none assumes anything about speed.
TLS connections trust $CLIENT_CA (the server must be "localhost" or
127.0.0.1) and present $CLIENT_CERT with $CLIENT_KEY, if set; a TLS error
(a refused handshake) is printed as "client: tls: ..." and exits 3.

  client.py send ADDR [IN [OUT]]   send IN (default stdin) while reading the
                                   replies into OUT (default stdout), one
                                   write and flush per line; half-close after
                                   the input, read until the server closes;
                                   $CLIENT_CHUNK_LINES lines at a time with
                                   $CLIENT_CHUNK_PAUSE s between, if set;
                                   over TLS, which has no half-close, read
                                   until every line has its reply instead,
                                   or with $CLIENT_TLS_FIN set, end with a
                                   TCP half-close (no close_notify) and
                                   read until the server closes
  client.py tlsend ADDR IN OUT     TLS: send IN but the second half of
                                   its last line, read the replies of the
                                   other lines, then send that half and a
                                   close_notify in one write, and read the
                                   last reply into OUT until the server
                                   closes
  client.py wait ADDR              wait until ADDR accepts connections
  client.py stuck ADDR OUT         send short records and never read: write
                                   "blocked BYTES" to OUT once the server
                                   stops reading for 3 s (or "unblocked" after
                                   16 MiB, "closed" if the server closes),
                                   then stay connected until killed
  client.py steps ADDR OUT STEP... one connection, its replies into OUT;
                                   each STEP is a file, sent in one write
                                   followed by a pause of
                                   $CLIENT_CHUNK_PAUSE s; +N, wait until N
                                   reply lines in all have come; open, read
                                   for 0.5 s and the server must not close;
                                   or close, half-close and read until the
                                   server closes.  Exits 2 if the server closes
                                   (or resets, or times out) before the steps are done
  client.py raw ADDR DATA-FILE OUT send the bytes, read replies until the
                                   server closes; no half-close
  client.py burst ADDR N           N raw clients at once; print each distinct
                                   outcome (bytes read, errors) and its count
  client.py notify SOCKET OUT      receive sd_notify datagrams on SOCKET (a
                                   path, or @name for the abstract namespace)
                                   and append each, then a line "--", to OUT
  client.py http HOST:PORT PATH    GET PATH; print the status, then the body
                                   (or unix:SOCKET instead of HOST:PORT)
"""

import os
import select
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

TIMEOUT = float(os.environ.get("CLIENT_TIMEOUT", "60"))
# send: if set, send this many lines at a time with a pause between.
CHUNK_LINES = int(os.environ.get("CLIENT_CHUNK_LINES", "0"))
CHUNK_PAUSE = float(os.environ.get("CLIENT_CHUNK_PAUSE", "0.02"))


def connect(addr, deadline=None):
    """Connect to addr, retrying until the deadline (the server starts)."""
    deadline = deadline or time.monotonic() + TIMEOUT
    while True:
        try:
            if addr.startswith("unix:"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(addr[5:])
            elif addr.startswith("tcp:") or addr.startswith("tls:"):
                host, port = addr[4:].rsplit(":", 1)
                s = socket.create_connection((host.strip("[]"), int(port)))
                if addr.startswith("tls:"):
                    s = tls_wrap(s)
            else:
                sys.exit("bad address " + addr)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def emit(out, data, last=False):
    """Write the complete lines of data (all of it if last), each flushed;
    return what is left and the number of lines written."""
    n = 0
    while b"\n" in data:
        line, data = data.split(b"\n", 1)
        out.write(line + b"\n")
        out.flush()
        n += 1
    if last and data:
        out.write(data)
        out.flush()
        data = b""
    return data, n


def tls_context():
    """A client context: trust $CLIENT_CA, present $CLIENT_CERT."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.environ["CLIENT_CA"])
    if os.environ.get("CLIENT_CERT"):
        ctx.load_cert_chain(os.environ["CLIENT_CERT"],
                            os.environ["CLIENT_KEY"])
    return ctx


def tls_wrap(s):
    """The client side of a TLS connection (handshake done, or exit 3)."""
    try:
        return tls_context().wrap_socket(s, server_hostname="localhost")
    except (ssl.SSLError, OSError) as e:
        tls_failed(e)


def tlsend(addr, infile, outfile):
    """TLS through memory buffers, so that the end of the last record
    and the close_notify after it leave in one write (and arrive
    together), after the start of that record."""
    data = open(infile, "rb").read()
    cut = len(data) - (len(data) - data.rstrip(b"\n").rfind(b"\n")) // 2
    host, port = addr[4:].rsplit(":", 1)
    raw = socket.create_connection((host.strip("[]"), int(port)))
    raw.settimeout(TIMEOUT)
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = tls_context().wrap_bio(inb, outb, server_hostname="localhost")
    got = []

    def step(op):
        """Run op until it needs no more input; False at the end."""
        while True:
            try:
                return op()
            except ssl.SSLWantReadError:
                raw.sendall(outb.read())
                chunk = raw.recv(65536)
                if not chunk:
                    return False
                inb.write(chunk)
            except ssl.SSLZeroReturnError:
                return False
            except ssl.SSLError as e:
                tls_failed(e)
    step(obj.do_handshake)
    raw.sendall(outb.read())
    obj.write(data[:cut])
    raw.sendall(outb.read())
    want = data[:cut].count(b"\n")
    while b"".join(got).count(b"\n") < want:
        chunk = step(lambda: obj.read(65536))
        if not chunk:
            break
        got.append(chunk)
    obj.write(data[cut:])
    try:
        obj.unwrap()
    except ssl.SSLWantReadError:
        pass
    raw.sendall(outb.read())
    while True:
        chunk = step(lambda: obj.read(65536))
        if not chunk:
            break
        got.append(chunk)
    open(outfile, "wb").write(b"".join(got))


def tls_failed(e):
    print("client: tls: %s" % e, file=sys.stderr)
    sys.exit(3)


def send_tls(s, data, out):
    """send over TLS: one thread (an SSL object is not for two), no
    half-close: done when every line sent has its reply, or at EOF."""
    lines = data.splitlines(keepends=True)
    step = CHUNK_LINES if CHUNK_LINES > 0 else len(lines)
    s.setblocking(False)
    fin = os.environ.get("CLIENT_TLS_FIN")
    sent, got, buf, pending = 0, 0, b"", b""
    deadline = time.monotonic() + TIMEOUT
    next_send = 0.0
    while (fin or got < len(lines)) and time.monotonic() < deadline:
        if not buf and sent < len(lines) and time.monotonic() >= next_send:
            buf = b"".join(lines[sent:sent + step])
            sent += step
            if CHUNK_LINES > 0:
                next_send = time.monotonic() + CHUNK_PAUSE
        if fin == "1" and not buf and sent >= len(lines):
            # The FIN of a duplicate of the descriptor, under TLS.
            socket.socket(fileno=os.dup(s.fileno())).shutdown(
                socket.SHUT_WR)
            fin = "sent"
        try:
            if buf:
                buf = buf[s.send(buf):]
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except ssl.SSLError as e:
            tls_failed(e)
        except OSError:
            pass    # the server may close first (an error)
        try:
            chunk = s.recv(65536)
            if not chunk:
                break
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            select.select([s], [s] if buf else [], [], 0.05)
            continue
        except ssl.SSLError as e:
            tls_failed(e)
        except OSError:
            break
        pending, n = emit(out, pending + chunk)
        got += n
    emit(out, pending, True)
    s.close()


def send(addr, infile, outfile):
    data = open(infile, "rb").read() if infile else sys.stdin.buffer.read()
    out = open(outfile, "wb") if outfile else sys.stdout.buffer
    s = connect(addr)
    if addr.startswith("tls:"):
        send_tls(s, data, out)
        return
    s.settimeout(TIMEOUT)
    err = []

    def writer():
        try:
            if CHUNK_LINES > 0:
                lines = data.splitlines(keepends=True)
                for i in range(0, len(lines), CHUNK_LINES):
                    s.sendall(b"".join(lines[i:i + CHUNK_LINES]))
                    time.sleep(CHUNK_PAUSE)
            else:
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:    # the server may close first (an error)
            err.append(e)

    t = threading.Thread(target=writer)
    t.start()
    pending = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        pending, _ = emit(out, pending + chunk)
    emit(out, pending, True)
    t.join(TIMEOUT)
    s.close()
    if err:
        print("client: send: %s" % err[0], file=sys.stderr)


def exchange(addr, data):
    """Send data without half-closing, read until the server closes;
    return the bytes read and the errors met (send, recv)."""
    s = connect(addr)
    s.settimeout(TIMEOUT)
    errors = []
    try:
        s.sendall(data)
    except OSError as e:
        errors.append("send: %s" % type(e).__name__)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError as e:
        errors.append("recv: %s" % type(e).__name__)
    s.close()
    return got, errors


def raw(addr, datafile, outfile):
    got, errors = exchange(addr, open(datafile, "rb").read())
    for e in errors:
        print("client: %s" % e, file=sys.stderr)
    open(outfile, "wb").write(got)


def steps(addr, outfile, todo):
    s = connect(addr)
    s.settimeout(TIMEOUT)
    got = b""
    try:
        for step in todo:
            if step == "close":
                s.shutdown(socket.SHUT_WR)
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            elif step == "open":
                s.settimeout(0.5)
                try:
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            raise ConnectionError("closed by the server")
                        got += chunk
                except socket.timeout:
                    pass
                s.settimeout(TIMEOUT)
            elif step.startswith("+"):
                while got.count(b"\n") < int(step[1:]):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise ConnectionError("closed by the server")
                    got += chunk
            else:
                s.sendall(open(step, "rb").read())
                time.sleep(CHUNK_PAUSE)
    except OSError as e:
        open(outfile, "wb").write(got)
        print("client: steps: %s: %s" % (step, e), file=sys.stderr)
        sys.exit(2)
    s.close()
    open(outfile, "wb").write(got)


def burst(addr, n):
    """n connections at once, each sending records and reading what comes
    back until the server closes; print each outcome with its count."""
    seen, lock = {}, threading.Lock()

    def one():
        got, errors = exchange(addr, b"a record before any answer\n" * 50)
        k = " ".join([repr(got)] + errors)
        with lock:
            seen[k] = seen.get(k, 0) + 1
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in sorted(seen):
        print(seen[k], k)


def stuck(addr, outfile):
    s = connect(addr)
    s.setblocking(False)
    rec = b"x\n" * 4096
    sent = 0
    last = time.monotonic()
    result = None
    while result is None:
        try:
            sent += s.send(rec)
            last = time.monotonic()
        except (BlockingIOError, ssl.SSLWantWriteError,
                ssl.SSLWantReadError):
            if time.monotonic() - last >= 3:
                result = "blocked %d\n" % sent
            time.sleep(0.01)
        except OSError:
            result = "closed %d\n" % sent
        if sent >= 16 << 20:
            result = "unblocked %d\n" % sent
    with open(outfile, "w") as f:
        f.write(result)
    time.sleep(TIMEOUT)


def notify(path, outfile):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + path[1:] if path.startswith("@") else path)
    s.settimeout(TIMEOUT)
    with open(outfile, "ab") as f:
        f.write(b"listening\n--\n")
        f.flush()
        while True:
            try:
                msg = s.recv(4096)
            except socket.timeout:
                return
            f.write(msg + b"\n--\n")
            f.flush()


def http(hostport, path):
    if hostport.startswith("unix:"):
        s = connect(hostport)
        s.settimeout(TIMEOUT)
        s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" %
                   path).encode())
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        print(head.split(b" ")[1].decode())
        sys.stdout.write(body.decode())
        return
    try:
        r = urllib.request.urlopen("http://%s%s" % (hostport, path),
                                   timeout=TIMEOUT)
        print(r.status)
        sys.stdout.write(r.read().decode())
    except urllib.error.HTTPError as e:
        print(e.code)
        sys.stdout.write(e.read().decode())


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "send":
        send(args[0], args[1] if len(args) > 1 else None,
             args[2] if len(args) > 2 else None)
    elif cmd == "tlsend":
        tlsend(args[0], args[1], args[2])
    elif cmd == "wait":
        connect(args[0]).close()
    elif cmd == "stuck":
        stuck(args[0], args[1])
    elif cmd == "steps":
        steps(args[0], args[1], args[2:])
    elif cmd == "raw":
        raw(args[0], args[1], args[2])
    elif cmd == "burst":
        burst(args[0], int(args[1]))
    elif cmd == "notify":
        notify(args[0], args[1])
    elif cmd == "http":
        http(args[0], args[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
