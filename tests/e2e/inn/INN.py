"""A stand-in for innd's built-in INN module, for tests/e2e/inn.bats.

innd gives its Python filter a module INN; this one records each call the
filter makes, one line per call with tab-separated fields, in the file
$INN_LOG, and keeps the hook that set_filter_hook was given in HOOK.
"""

import os

HOOK = None


def _record(*fields):
    with open(os.environ["INN_LOG"], "a") as f:
        f.write("\t".join(str(x) for x in fields) + "\n")


def set_filter_hook(instance):
    global HOOK
    HOOK = instance
    _record("set_filter_hook", type(instance).__name__)


def _text(x):
    """innd takes its functions' strings as str or bytes ("s#"), a str
    encoded in UTF-8: another type, or a str that cannot be, raises."""
    if isinstance(x, str):
        x.encode("utf-8")
    elif not isinstance(x, bytes):
        raise TypeError("a str or bytes is required, not %s" %
                        type(x).__name__)
    return x


def syslog(level, message):
    _record("syslog", _text(level), _text(message))


# innd's other functions: recorded, with the answers of an empty server.
def addhist(msgid):
    _record("addhist", msgid)
    return 0


def havehist(msgid):
    _record("havehist", msgid)
    return 0


def cancel(msgid):
    _record("cancel", msgid)
    return 0


def article(msgid):
    _record("article", msgid)
    return b""


def head(msgid):
    _record("head", msgid)
    return b""


def newsgroup(name):
    _record("newsgroup", name)
    return b""


def hashstring(s):
    _record("hashstring", s)
    return b""
