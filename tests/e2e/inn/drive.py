#!/usr/bin/env python3
"""Run INN's Python filter as innd would, for tests/e2e/inn.bats.

  drive.py FILTER_DIR STEPS

imports filter_innd from FILTER_DIR with the stand-in INN module of this
directory (see INN.py) and follows STEPS, one a line:

  set NAME VALUE   set the filter module's NAME (a number if VALUE is one)
  art FILE         give the article in FILE (a header, a blank line, the
                   body) to filter_art as innd does: a dict of memoryviews,
                   the body in wire format (CRLF); print "FILE accept" or
                   "FILE reject REASON", and the seconds it took, on stdout
  sleep SECONDS
  pause NAME       create NAME.reached, then wait (at most 60 s) for the
                   file NAME.go, so that the test can act meanwhile
  close            call filter_close, as innd at shutdown
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, sys.argv[1])

import INN  # noqa: E402  (the stand-in)
import filter_innd  # noqa: E402

# The header names innd fills in (a few of them): absent ones are None.
NAMES = ("Path", "From", "Newsgroups", "Subject", "Message-ID", "Date",
         "Injection-Date", "NNTP-Posting-Date", "MIME-Version",
         "Content-Type", "Content-Transfer-Encoding", "References")


def article(path):
    with open(path, "rb") as f:
        data = f.read()
    head, _, body = data.partition(b"\n\n")
    art = {name: None for name in NAMES}
    name = None
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t") and name is not None:
            art[name] = memoryview(bytes(art[name]) + b"\r\n" + line)
            continue
        key, _, value = line.partition(b":")
        name = key.decode()
        art[name] = memoryview(value.strip())
    body = body.replace(b"\n", b"\r\n")
    art["__BODY__"] = memoryview(body) if body else None
    art["__LINES__"] = body.count(b"\n")
    return art


def main():
    hook = INN.HOOK
    if hook is None:
        sys.exit("drive.py: the filter set no hook")
    with open(sys.argv[2]) as f:
        steps = [line.rstrip("\n").split(None, 2) for line in f
                 if line.strip()]
    for step in steps:
        if step[0] == "set":
            try:
                value = float(step[2])
            except ValueError:
                value = step[2]
            setattr(filter_innd, step[1], value)
        elif step[0] == "art":
            art = article(step[1])
            start = time.monotonic()
            rc = hook.filter_art(art)
            took = time.monotonic() - start
            if rc is not None and not isinstance(rc, str):
                sys.exit("drive.py: filter_art returned %r" % (rc,))
            verdict = "reject " + rc if rc else "accept"
            print("%s %s %.3f" % (step[1], verdict, took), flush=True)
        elif step[0] == "sleep":
            time.sleep(float(step[1]))
        elif step[0] == "pause":
            open(step[1] + ".reached", "w").close()
            limit = time.monotonic() + 60
            while not os.path.exists(step[1] + ".go"):
                if time.monotonic() > limit:
                    sys.exit("drive.py: nobody ended pause " + step[1])
                time.sleep(0.02)
        elif step[0] == "close":
            hook.filter_close()
        else:
            sys.exit("drive.py: unknown step " + step[0])


main()
