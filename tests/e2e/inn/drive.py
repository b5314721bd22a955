#!/usr/bin/env python3
"""Run INN's Python filter as innd would, for tests/e2e/inn.bats.

  drive.py FILTER_DIR STEPS

imports filter_innd from FILTER_DIR with the stand-in INN module of this
directory (see INN.py) and follows STEPS, one a line:

  set NAME VALUE   set the filter module's NAME (a number if VALUE is one)
  art FILE         give the article in FILE (a header, a blank line, the
                   body; LF line ends) to filter_art as innd 2.7 does (see
                   article below); print "FILE accept" or "FILE reject
                   REASON" (REASON cut to innd's 200 bytes), and the
                   seconds it took, on stdout
  sleep SECONDS
  pause NAME       create NAME.reached, then wait (at most 60 s) for the
                   file NAME.go, so that the test can act meanwhile
  close            call filter_close, as innd at shutdown

A filter_art that raises fails the run: innd would accept the article
without a word, and leave the exception set, so that every later call of
the filter fails too (every article accepted) until the filter is
reloaded.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, sys.argv[1])

import INN  # noqa: E402  (the stand-in)
import filter_innd  # noqa: E402

# The header fields innd 2.7 gives filter_art (innd/art.c), under these
# names whatever the article's spelling; those absent from the article are
# None, and no other field is given.
NAMES = (
    "Also-Control", "Approved", "Archive", "Archived-At", "Bytes",
    "Cancel-Key", "Cancel-Lock", "Comments", "Content-Base",
    "Content-Disposition", "Content-Transfer-Encoding", "Content-Type",
    "Control", "Date", "Date-Received", "Distribution", "Expires", "Face",
    "Followup-To", "From", "In-Reply-To", "Injection-Date",
    "Injection-Info", "Jabber-ID", "Keywords", "Lines", "List-ID",
    "Message-ID", "MIME-Version", "Newsgroups", "NNTP-Posting-Date",
    "NNTP-Posting-Host", "NNTP-Posting-Path", "Organization",
    "Original-Sender", "Originator", "Path", "Posted", "Posting-Version",
    "Received", "References", "Relay-Version", "Reply-To", "Sender",
    "Subject", "Summary", "Supersedes", "User-Agent", "X-Auth",
    "X-Auth-Sender", "X-Canceled-By", "X-Cancelled-By", "X-Complaints-To",
    "X-Face", "X-HTTP-UserAgent", "X-HTTP-Via", "X-Mailer", "X-Modbot",
    "X-Modtrace", "X-Newsposter", "X-Newsreader", "X-No-Archive",
    "X-Original-Message-ID", "X-Original-NNTP-Posting-Host",
    "X-Original-Trace", "X-Originating-IP", "X-PGP-Key", "X-PGP-Sig",
    "X-Poster-Trace", "X-Postfilter", "X-Proxy-User", "X-Submissions-To",
    "X-Trace", "X-Usenet-Provider", "X-User-ID", "Xref")
CANONICAL = {name.lower(): name for name in NAMES}


def article(path):
    """The dict innd 2.7 gives filter_art for the article in path: each
    value a (writable) memoryview on innd's buffer, holding the field's
    body after the one space that follows the colon, trailing white space
    kept, folded lines joined by CRLF (Message-ID and Supersedes trimmed
    both sides), the first of repeated fields; __BODY__ the body as NNTP
    carried it, in wire format: CRLF line ends, a line that begins with a
    dot with the dot doubled, and the "." line that ends the article but
    for its LF; __LINES__ the body's line count."""
    with open(path, "rb") as f:
        data = f.read()
    head, _, body = data.partition(b"\n\n")
    art = {name: None for name in NAMES}
    fields = []
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1][1] += b"\r\n" + line
        else:
            key, colon, value = line.partition(b":")
            if not colon or value[:1] not in (b" ", b"\t"):
                # innd rejects the article ("No colon-space").
                sys.exit("drive.py: %s: no colon-space in %r" % (path, line))
            fields.append([key.decode(), value[1:]])
    for key, value in fields:
        name = CANONICAL.get(key.lower())
        if name is None or art[name] is not None:
            continue
        if name in ("Message-ID", "Supersedes"):
            value = value.strip()
        art[name] = memoryview(bytearray(value))
    lines = body.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    wire = b"".join((b"." if line.startswith(b".") else b"") + line +
                    b"\r\n" for line in lines) + b".\r"
    art["__BODY__"] = memoryview(bytearray(wire))
    art["__LINES__"] = len(lines)
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
            # innd answers with the first 200 bytes of the reason.
            reason = rc.encode()[:200].decode("utf-8", "replace")
            verdict = "reject " + reason if rc else "accept"
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
