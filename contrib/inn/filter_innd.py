# INN Python filter (filter_innd.py): reject near-duplicate articles with
# the mhfilter daemon.  Start the daemon for news, for example:
#
#	mhfilter -f mail --db /var/lib/news/mhfilter --retain 30d \
#	    --listen unix:/run/mhfilter/news.sock
#
# and install this file as filter_innd.py in INN's filter directory
# (pathfilter), then "ctlinnd reload filter.python x".  Each article goes to
# the daemon followed by a NUL (-f mail reads NUL-terminated messages on
# its sockets); the daemon answers one line, "unique<TAB>id" or
# "duplicate<TAB>id<TAB>match<TAB>similarity" (mhfilter(1), PROTOCOL).
# When the daemon cannot be reached the article is accepted: the filter
# never stops the feed.

import socket

from INN import set_filter_hook, syslog

SOCKET = "/run/mhfilter/news.sock"
TIMEOUT = 5.0		# seconds for one answer

# The header fields that give the daemon the article's id, time, Subject
# and MIME structure; the others never enter the compared text.
HEADERS = ("Message-ID", "Date", "Injection-Date", "NNTP-Posting-Date",
           "Subject", "MIME-Version", "Content-Type",
           "Content-Transfer-Encoding")


class MhfilterFilter:
    """INN's filter hook, asking mhfilter's daemon about each article."""

    def __init__(self):
        self.sock = None
        self.rfile = None

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(SOCKET)
        self.rfile = self.sock.makefile("rb")

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = self.rfile = None

    def ask(self, article):
        if self.sock is None:
            self.connect()
        self.sock.sendall(article + b"\0")
        line = self.rfile.readline()
        if not line:
            raise OSError("mhfilter closed the connection")
        return line.decode("utf-8", "replace").rstrip("\n").split("\t")

    def filter_art(self, art):
        msg = b""
        for name in HEADERS:
            value = art.get(name)
            if value is not None:
                msg += name.encode() + b": " + bytes(value) + b"\r\n"
        msg += b"\r\n" + bytes(art["__BODY__"] or b"")
        try:
            reply = self.ask(msg)
        except OSError as e:
            self.close()
            syslog("notice", "mhfilter: %s; article accepted" % e)
            return ""
        if reply[0] == "duplicate" and len(reply) >= 4:
            return "near-duplicate of <%s> (%s)" % (reply[2], reply[3])
        return ""

    def filter_messageid(self, msgid):
        return ""

    def filter_mode(self, oldmode, newmode, reason):
        pass

    def filter_before_reload(self):
        self.close()

    def filter_close(self):
        self.close()


set_filter_hook(MhfilterFilter())
