#!/usr/bin/env python3
"""Offer articles to innd by IHAVE, for tests/e2e/innd.bats.

  ihave.py PORT [FILE...]

connects to innd on 127.0.0.1:PORT and offers each FILE (an article with
LF line ends: a header, a blank line, the body) by IHAVE under the
Message-ID of its header, in wire format (CRLF, dot-stuffed, ended by a
line "."), and prints one line per FILE: "FILE CODE TEXT", innd's final
answer to it (235 taken, 435 not wanted, 437 rejected...).  With no FILE
it only checks that innd greets (200).  Exits 1 if innd does not greet,
closes the connection or answers out of protocol.
"""

import socket
import sys


def main():
    port = int(sys.argv[1])
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
    except OSError as e:
        sys.exit("ihave.py: cannot connect to 127.0.0.1:%d: %s" % (port, e))
    f = s.makefile("rb")

    def answer():
        line = f.readline()
        if not line.endswith(b"\r\n"):
            sys.exit("ihave.py: innd closed the connection")
        return line[:-2].decode("utf-8", "replace")

    greeting = answer()
    if not greeting.startswith("200 "):
        sys.exit("ihave.py: innd greets with " + greeting)
    for path in sys.argv[2:]:
        with open(path, "rb") as a:
            text = a.read()
        head = text.split(b"\n\n", 1)[0]
        mid = [line.split(b":", 1)[1].strip() for line in head.split(b"\n")
               if line.lower().startswith(b"message-id:")][0]
        s.sendall(b"IHAVE " + mid + b"\r\n")
        reply = answer()
        if reply.startswith("335 "):
            lines = text.split(b"\n")
            if lines[-1] == b"":
                lines.pop()
            s.sendall(b"".join((b"." if line.startswith(b".") else b"") +
                               line + b"\r\n" for line in lines) + b".\r\n")
            reply = answer()
            if not reply[:4] in ("235 ", "436 ", "437 "):
                sys.exit("ihave.py: %s: after the article: %s" %
                         (path, reply))
        elif not reply[:4] in ("435 ", "436 ", "437 "):
            sys.exit("ihave.py: %s: IHAVE answered %s" % (path, reply))
        print(path, reply, flush=True)
    s.sendall(b"QUIT\r\n")
    answer()


main()
