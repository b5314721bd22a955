# INN Python filter (filter_innd.py): reject near-duplicate articles with
# the mhfilter daemon.  Start the daemon for news, for example:
#
#	mhfilter -f mail --db /var/lib/news/mhfilter --retain 30d \
#	    --listen unix:/run/mhfilter/news.sock
#
# innd runs the filter as the user news, which must be able to connect to
# the socket: run the daemon as news, or as a user of its own with a umask
# of 007 and the socket's directory set-group-ID news (install -d -o USER
# -g news -m 2750 /run/mhfilter), so that the socket is the group news's.
# Install this file as filter_innd.py in INN's filter directory
# (pathfilter), then "ctlinnd reload filter.python x".  Each article goes to
# the daemon followed by a NUL (-f mail reads NUL-terminated messages on
# its sockets); the daemon answers one line, "unique<TAB>id" or
# "duplicate<TAB>id<TAB>match<TAB>similarity" (mhfilter(1), PROTOCOL).
#
# The connection is kept open between articles.  The daemon closes it after
# --idle-timeout (default 10m) with a last line "error<TAB>-<TAB>idle", and
# may close it on a restart ("shutdown") or refuse it when full ("busy").
# Such a line has the id "-" and is never taken as an article's answer:
# before each article whatever the daemon sent meanwhile is read and
# dropped, and a connection so closed is opened again; then the article is
# the only record waiting on the connection, and the next line with a
# record's id is its answer.  If the connection ends while an article waits
# for its answer, the article is sent again on a new one.  An article sent
# again that the daemon had already indexed comes back as a duplicate of
# itself (the match is its own id): that is this article, accepted.
#
# An article the daemon could not judge, because it cannot be reached or
# answered nothing in time (TRIES tries within DEADLINE seconds), is
# handled as UNJUDGED says, and logged at level err with its Message-ID.
# INN's Python hook cannot defer an article: any string filter_art returns
# rejects it for good (437 to IHAVE, 439 to TAKETHIS), and with
# remembertrash (INN's default) its Message-ID goes to the history, so no
# peer offers it again.  So the default accepts the article unchecked
# (it is then not indexed either, and a later copy of it is not found);
# "reject" drops it instead, for a site that would rather lose articles
# than let an unchecked one through.  While the daemon stays unreachable,
# an article makes one try at most every RECHECK seconds (the others are
# handled at once), so that the feed does not stall; one line says when it
# is reachable again and how many articles went unjudged.
#
# An article the daemon answered but cannot judge (malformed, longer than
# its --max-bytes) is accepted and logged at level notice: it would fare no
# better later.

import select
import socket
import time

from INN import set_filter_hook, syslog

SOCKET = "/run/mhfilter/news.sock"

# What to do with an article the daemon could not judge: "accept" (the
# default: the feed goes on, unchecked) or "reject" (INN rejects it for
# good; see above).
UNJUDGED = "accept"
REJECT_REASON = "near-duplicate filter unavailable"

TRIES = 3		# connections tried per article
DEADLINE = 2.0		# seconds per article, all tries included
BACKOFF = (0.25, 0.75)	# seconds before the second and third tries
RECHECK = 5.0		# seconds between tries while unreachable

# No SIGPIPE for innd when the daemon has gone: the write fails instead.
NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)

# The header fields that give the daemon the article's id, time, Subject
# and MIME structure; the others never enter the compared text.
HEADERS = ("Message-ID", "Date", "Injection-Date", "NNTP-Posting-Date",
           "Subject", "MIME-Version", "Content-Type",
           "Content-Transfer-Encoding")


class Retry(Exception):
    """The daemon did not judge the article; another connection may."""


class Unjudgeable(Exception):
    """The daemon answered that it cannot judge this article."""


def reply_id(msgid):
    """The id the daemon gives an article (mhfilter(1), Mail and news):
    its Message-ID without angle brackets, the domain in lower case, as
    escaped in replies; None when it has none the daemon would use."""
    v = msgid.strip().lstrip("<").split(">")[0].rstrip()
    if not v or any(c.isspace() for c in v):
        return None
    at = v.rfind("@")
    if at >= 0:
        v = v[:at] + v[at:].lower()
    return (v.replace("\\", "\\\\").replace("\t", "\\t")
            .replace("\n", "\\n").replace("\r", "\\r"))


class MhfilterFilter:
    """INN's filter hook, asking mhfilter's daemon about each article."""

    def __init__(self):
        self.sock = None
        self.buf = b""
        self.down = False	# the last article went unjudged
        self.failed = 0.0	# when the last try failed
        self.unjudged = 0	# articles unjudged since it went down

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buf = b""

    def connect(self, deadline):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            self.sock.connect(SOCKET)
        except OSError:
            self.close()
            raise

    def drain(self):
        """Read what the daemon sent since the last answer: nothing on a
        connection still open.  Anything else ("error - idle", "error -
        shutdown", or the end of the connection) means it is closed."""
        stale, ended = self.buf, False
        while select.select([self.sock], [], [], 0)[0]:
            try:
                data = self.sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                ended = True
                break
            stale += data
        if not stale and not ended:
            return
        line = stale.split(b"\n")[0]
        syslog("info", "mhfilter: connection closed by the daemon%s" %
               (": " + line.decode("utf-8", "replace") if line else ""))
        self.close()

    def readline(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Retry("no answer within %g s" % DEADLINE)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise Retry("no answer within %g s" % DEADLINE)
            if not data:
                raise Retry("the daemon closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace").split("\t")

    def ask(self, msg, rid, deadline):
        """One try: the daemon's reply fields for msg, or Retry."""
        if self.sock is not None:
            self.drain()
        try:
            if self.sock is None:
                self.connect(deadline)
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            self.sock.sendall(msg + b"\0", NOSIGNAL)
            f = self.readline(deadline)
            if len(f) < 3 and (f[0] == "error" or len(f) < 2):
                raise Retry("daemon: unknown reply " + " ".join(f))
            if f[0] == "error":
                if f[1] == "-" or f[2] in ("index", "shutdown"):
                    # The connection is over (busy, idle, shutdown), or
                    # the batch failed: another try may do.
                    raise Retry("daemon: " + " ".join(f[2:]))
                # invalid, too-long (whose id is the daemon's own: the text
                # was not read): sending it again would not help.
                raise Unjudgeable(" ".join(f[2:]))
            # The only record on this connection without an answer is this
            # one (what came before was drained), and the daemon answers
            # in order: the line is its answer even when the daemon made
            # the id otherwise (GMime drops a Message-ID's trailing dot).
            if rid is not None and f[1] != rid:
                syslog("debug", "mhfilter: %s answered with the id %s" %
                       (rid, f[1]))
            return f
        except (Retry, OSError):
            self.close()
            raise

    def judge(self, msg, rid):
        """The reply fields for msg; Retry when the daemon cannot be
        reached or answer in time (Unjudgeable when it cannot judge)."""
        now = time.monotonic()
        if self.down and now < self.failed + RECHECK:
            raise Retry("unreachable, next try in %.1f s" %
                        (self.failed + RECHECK - now))
        deadline = now + DEADLINE
        why = "no try"
        for n in range(1 if self.down else int(TRIES)):
            if n > 0:
                pause = min(BACKOFF[min(n, len(BACKOFF)) - 1],
                            deadline - time.monotonic())
                if pause > 0:
                    time.sleep(pause)
            if time.monotonic() >= deadline:
                break
            try:
                reply = self.ask(msg, rid, deadline)
            except socket.timeout:
                why = "no answer within %g s" % DEADLINE
            except (Retry, OSError) as e:
                why = str(e)
            except Unjudgeable:
                self.answered()
                raise
            else:
                self.answered()
                return reply
        if not self.down:
            syslog("err", "mhfilter: cannot reach the daemon at %s (%s); "
                   "articles are %s unjudged until it answers" %
                   (SOCKET, why, self.unjudged_verb()))
        self.down = True
        self.failed = time.monotonic()
        raise Retry(why)

    def answered(self):
        if self.down:
            syslog("notice", "mhfilter: the daemon answers again; "
                   "%d article(s) were %s unjudged" %
                   (self.unjudged, self.unjudged_verb()))
        self.down = False
        self.unjudged = 0

    def unjudged_verb(self):
        return "rejected" if UNJUDGED == "reject" else "accepted"

    def filter_art(self, art):
        # innd takes an exception for "accept", silently: none gets out.
        try:
            return self.check(art)
        except Exception as e:
            syslog("err", "mhfilter: filter error %r; article %s unjudged" %
                   (e, self.unjudged_verb()))
            return REJECT_REASON if UNJUDGED == "reject" else ""

    def check(self, art):
        msg = b""
        for name in HEADERS:
            value = art.get(name)
            if value is not None:
                msg += name.encode() + b": " + bytes(value) + b"\r\n"
        # innd gives the body as NNTP carried it: a line that begins with a
        # dot has it doubled, and the "." line that ends the article is
        # there but for its LF.  The daemon must see the text as posted.
        body = bytes(art.get("__BODY__") or b"")
        if body == b".\r" or body.endswith(b"\r\n.\r"):
            body = body[:-2].replace(b"\r\n..", b"\r\n.")
            if body.startswith(b".."):
                body = body[1:]
        # A NUL would end the record early: the daemon would answer twice.
        msg += b"\r\n" + body.replace(b"\0", b"")
        msgid = bytes(art.get("Message-ID") or b"").decode("utf-8", "replace")
        rid = reply_id(msgid)
        try:
            reply = self.judge(msg, rid)
        except Unjudgeable as e:
            syslog("notice", "mhfilter: %s not judged (%s); accepted" %
                   (msgid, e))
            return ""
        except Retry as e:
            self.unjudged += 1
            syslog("err", "mhfilter: %s not judged (%s); %s" %
                   (msgid, e, self.unjudged_verb()))
            return REJECT_REASON if UNJUDGED == "reject" else ""
        if reply[0] == "duplicate" and len(reply) >= 4 and \
                reply[2] != reply[1]:
            return "near-duplicate of <%s> (%s)" % (reply[2], reply[3])
        # unique, empty, or this very article sent again (its own match).
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
