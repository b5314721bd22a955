#!/usr/bin/env python3
"""Write a WARC file of the pages in tests/data/warc, for warc.bats.

mkwarc.py DATADIR OUT [--gz] [--version 1.0|1.1]

OUT gets every record (plain, or with --gz each its own gzip member, as
crawlers write a .warc.gz), and OUT.NN each record's own bytes as they are
in OUT, so that a test can make the expected output by concatenating the
records it expects kept.  The records, in order (their number, NN):

 01 warcinfo
 02 request        for page a
 03 response       page a (Simple-Example.html)
 04 metadata       about page a
 05 response       page b (Memory-Usage.html)
 06 response       page a again at another URI, with other navigation
                   and markup: a near duplicate
 07 response       page c (Thread-Safety.html), chunked and gzip-encoded,
                   charset in a meta tag only
 08 response       a stylesheet (text/css): not a document
 09 response       a 404 page in HTML: not a document
 10 response       page b again at another URI, byte for byte: a duplicate
 11 revisit        of page b
 12 response       page d (Closure-Example.html) with a paragraph in
                   Russian, in KOI8-R (said by HTTP, not by its meta tag)
 13 response       page d again at another URI, in UTF-8: a duplicate
 14 response       page c again at another URI, not encoded: a duplicate
"""

import gzip
import os
import sys
import uuid

DATE = "2024-05-01T12:00:%02dZ"


def http(status, ctype, body, extra=b""):
    head = (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype +
            b"\r\n" + extra)
    if b"Transfer-Encoding" not in extra:
        head += b"Content-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def record(version, n, wtype, uri, block, ctype):
    rid = uuid.UUID(int=n)
    head = "WARC/%s\r\nWARC-Type: %s\r\n" % (version, wtype)
    if uri is not None:
        head += "WARC-Target-URI: %s\r\n" % uri
    head += ("WARC-Date: %s\r\nWARC-Record-ID: <urn:uuid:%s>\r\n"
             "Content-Type: %s\r\nContent-Length: %d\r\n\r\n" %
             (DATE % n, rid, ctype, len(block)))
    return head.encode() + block + b"\r\n\r\n"


def chunked(data, size=700):
    out = b""
    for i in range(0, len(data), size):
        part = data[i:i + size]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def renav(html):
    """The same article with other navigation and markup."""
    start = html.index(b'<div class="header">')
    end = html.index(b"</div>", start) + 6
    nav = (b'<nav class="site"><ul><li><a href="/">Home</a></li>'
           b'<li><a href="/manuals/">Manuals</a></li></ul></nav>\n'
           b'<div class="crumbs"><p>Manual &gt; Using libffi</p></div>')
    html = html[:start] + nav + html[end:]
    return html.replace(b"<p>", b'<p class="para">')


def main():
    data, out = sys.argv[1], sys.argv[2]
    gz = "--gz" in sys.argv
    version = "1.0"
    if "--version" in sys.argv:
        version = sys.argv[sys.argv.index("--version") + 1]

    def page(name):
        with open(os.path.join(data, name), "rb") as f:
            return f.read()

    a, b = page("Simple-Example.html"), page("Memory-Usage.html")
    c, d = page("Thread-Safety.html"), page("Closure-Example.html")
    html = b"text/html; charset=utf-8"
    site = "https://docs.example.org/libffi/"
    resp = "application/http; msgtype=response"
    d = d.replace(b'<body lang="en">', '<body lang="en">\n<p>Пример '
                  'замыкания: функция вызывается через замыкание libffi.'
                  '</p>'.encode(), 1)
    d_koi8 = d.decode("utf-8").encode("koi8-r")
    recs = [
        ("warcinfo", None, b"software: mkwarc.py\r\nformat: WARC File "
         b"Format 1.0\r\n", "application/warc-fields"),
        ("request", site + "Simple-Example.html",
         b"GET /libffi/Simple-Example.html HTTP/1.1\r\nHost: "
         b"docs.example.org\r\n\r\n", "application/http; msgtype=request"),
        ("response", site + "Simple-Example.html", http(b"200 OK", html, a),
         resp),
        ("metadata", site + "Simple-Example.html",
         b"fetchTimeMs: 42\r\n", "application/warc-fields"),
        ("response", site + "Memory-Usage.html", http(b"200 OK", html, b),
         resp),
        ("response", "https://mirror.example.net/ffi/simple.html",
         http(b"200 OK", html, renav(a)), resp),
        ("response", site + "Thread-Safety.html",
         http(b"200 OK", b"text/html",
              chunked(gzip.compress(c, mtime=0)),
              b"Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n"),
         resp),
        ("response", site + "style.css",
         http(b"200 OK", b"text/css", b"body { margin: 0 }\n" * 40), resp),
        ("response", site + "missing.html",
         http(b"404 Not Found", html, b"<html><body><p>" +
              b"Not found. " * 40 + b"</p></body></html>"), resp),
        ("response", "https://mirror.example.net/ffi/memory.html",
         http(b"200 OK", html, b), resp),
        ("revisit", site + "Memory-Usage.html", b"HTTP/1.1 200 OK\r\n\r\n",
         "application/http; msgtype=response"),
        ("response", site + "Closure-Example.html",
         http(b"200 OK", b"text/html; charset=KOI8-R", d_koi8), resp),
        ("response", "https://mirror.example.net/ffi/closure.html",
         http(b"200 OK", html, d), resp),
        ("response", "https://mirror.example.net/ffi/threads.html",
         http(b"200 OK", html, c), resp),
    ]
    with open(out, "wb") as f:
        for n, (wtype, uri, block, ctype) in enumerate(recs, 1):
            r = record(version, n, wtype, uri, block, ctype)
            if gz:
                r = gzip.compress(r, mtime=0)
            f.write(r)
            with open("%s.%02d" % (out, n), "wb") as g:
                g.write(r)


if __name__ == "__main__":
    main()
