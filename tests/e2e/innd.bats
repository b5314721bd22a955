#!/usr/bin/env bats
# INN's Python filter, contrib/inn/filter_innd.py, in a real innd (Debian's
# inn2): each test starts an innd of its own, its whole tree (inn.conf
# given by INNCONF, history, active, spool, logs, the filter directory)
# under the test's directory, listening on 127.0.0.1 and a free high port
# only, with the filter installed as its filter_innd.py and pointed at a
# mhfilter daemon (-f mail) the test starts; articles are offered by IHAVE
# (tests/e2e/inn/ihave.py) and innd's answers checked.  Nothing of the
# system's INN (/etc/news, /var/lib/news, port 119) is used.  innd runs as
# news (started as root, it drops to news), and the daemon as nobody, with
# its socket the group news's, as a site would set them up.  Skipped where
# inn2 is not installed or the test is not root.

load helpers
load daemon-helpers

INND=/usr/lib/news/bin/innd
CTLINND=/usr/lib/news/bin/ctlinnd
MAKEDBZ=/usr/lib/news/bin/makedbz
IHAVE="$E2E_DIR/inn/ihave.py"
FILTER="$TESTDIR/../contrib/inn/filter_innd.py"

# What the tests need, checked before each (bats 1.8 cannot skip from
# setup_file).
setup() {
	helpers_setup
	[ -x "$INND" ] && [ -x "$CTLINND" ] && [ -x "$MAKEDBZ" ] ||
	    skip "innd is not installed (optional: Debian package inn2)"
	[ "$(id -u)" -eq 0 ] ||
	    skip "innd must be started as root here (it runs as news)"
	getent passwd news >/dev/null && getent group news >/dev/null &&
	    getent group nogroup >/dev/null ||
	    skip "no news user or group, or no nogroup"
	# The daemon runs as nobody, as it would as a user of its own.
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$MHFILTER" \
	    --version >/dev/null 2>&1 ||
	    skip "nobody cannot run $MHFILTER (in a private directory?)"
	# innd and the daemon run as news and nobody: they must reach $T.
	chmod 755 "$T"
	art a1@News.Example.ORG 'Release notes' "$BODY1" >a1
	art copy1@example.net 'Release notes' "$BODY1" >copy1
	art a2@example.org 'Release notes' "$BODY2" >a2
}

eval "$(declare -f teardown | sed '1s/teardown/helpers_teardown/')"
teardown() {
	innd_stop || true
	helpers_teardown
}

BODY1='The new version fixes the boot problem on machines with two disks
and adds a setting for the network timeout. Please test it before Friday
and report anything odd to the group, with the output of dmesg attached.'
BODY2='Lunch is at noon in the usual place. Bring your own sandwiches; the
kitchen is closed for repairs until the end of the month, sorry.'

# An article on stdout: $1 Message-ID, $2 Subject, $3 body.
art() {
	printf 'Path: peer.example!not-for-mail\nFrom: Alice <alice@example.org>\n'
	printf 'Newsgroups: mhf.test\nSubject: %s\nMessage-ID: <%s>\n' "$2" "$1"
	printf 'Date: Tue, 1 Jul 2025 10:00:00 +0000\n\n%s\n' "$3"
}

# A free TCP port on 127.0.0.1 (the system's choice, released at once).
free_port() {
	python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Start the mhfilter daemon as nobody, umask 007, on the socket
# $T/mhf/sock in a directory set-group-ID news: the socket is the group
# news's and mode 0770, so that innd (news) may use it, and no one else.
mhf_start() {
	install -d -o nobody -g news -m 2750 "$T/mhf"
	install -d -o nobody -g nogroup -m 700 "$T/mhf-db"
	cat >"$T/mhfilter-news" <<-EOF
	#!/bin/sh
	umask 007
	exec setpriv --reuid=nobody --regid=nogroup --clear-groups \\
	    "$MHFILTER" "\$@"
	EOF
	chmod 755 "$T/mhfilter-news"
	MHFILTER="$T/mhfilter-news" start_daemon -f mail --db "$T/mhf-db/db" \
	    --listen "unix:$T/mhf/sock" "$@"
	[ "$(stat -c '%U %G %a' "$T/mhf/sock")" = 'nobody news 770' ] ||
	    fail "the socket: $(stat -c '%U %G %a' "$T/mhf/sock")"
}

# Make innd's tree under $T/news and start innd on 127.0.0.1:$PORT, the
# filter installed with SOCKET set to the daemon's; wait (at most 30 s)
# until it greets.  Its pid goes to $INND_PID.
innd_start() {
	local n="$T/news" d i

	PORT="$(free_port)"
	for d in etc db run log tmp filter http spool spool/articles \
	    spool/overview spool/incoming spool/outgoing spool/archive; do
		mkdir -p "$n/$d"
	done
	cat >"$n/etc/inn.conf" <<-EOF
	domain:         test.example
	pathhost:       news.test.example
	organization:   "mhfilter test"
	mta:            "/bin/false %s"
	mailcmd:        /bin/false
	pathnews:       $n
	pathbin:        /usr/lib/news/bin
	pathcontrol:    /usr/lib/news/bin/control
	pathetc:        $n/etc
	pathdb:         $n/db
	pathrun:        $n/run
	pathlog:        $n/log
	pathtmp:        $n/tmp
	pathfilter:     $n/filter
	pathhttp:       $n/http
	pathspool:      $n/spool
	patharticles:   $n/spool/articles
	pathoverview:   $n/spool/overview
	pathincoming:   $n/spool/incoming
	pathoutgoing:   $n/spool/outgoing
	patharchive:    $n/spool/archive
	port:           $PORT
	bindaddress:    127.0.0.1
	hismethod:      hisv6
	enableoverview: false
	artcutoff:      0
	maxartsize:     4000000
	pgpverify:      false
	remembertrash:  true
	status:         0
	timer:          0
	EOF
	# No feeds; 127.0.0.1 a peer, which may offer articles (IHAVE).
	printf 'ME:*::\n' >"$n/etc/newsfeeds"
	printf 'peer test {\n  hostname: "127.0.0.1"\n}\n' >"$n/etc/incoming.conf"
	printf 'method timehash {\n  newsgroups: *\n  class: 0\n}\n' \
	    >"$n/etc/storage.conf"
	printf '%s 0000000000 0000000001 %s\n' control n control.cancel n \
	    junk n mhf.test y >"$n/db/active"
	: >"$n/db/active.times"
	: >"$n/db/newsgroups"
	: >"$n/db/history"
	# The filter as a site installs it, SOCKET set to the daemon's.
	sed "s|^SOCKET = .*|SOCKET = \"$T/mhf/sock\"|" "$FILTER" \
	    >"$n/filter/filter_innd.py"
	grep -qxF "SOCKET = \"$T/mhf/sock\"" "$n/filter/filter_innd.py" ||
	    fail "SOCKET not set in the installed filter"
	# innd's INN.syslog writes to syslog(3) only, which a test cannot
	# read: this module (innd's Python imports it at its start, from
	# pathfilter) copies each of the filter's log lines, and its hook,
	# to log/filter.log, and calls innd's own functions all the same.
	cat >"$n/filter/sitecustomize.py" <<-'EOF'
	import os
	import INN
	_LOG = os.path.join(os.path.dirname(__file__), "..", "log", "filter.log")
	_syslog, _set_filter_hook = INN.syslog, INN.set_filter_hook
	def _record(*fields):
	    with open(_LOG, "a") as f:
	        f.write("\t".join(str(x) for x in fields) + "\n")
	def syslog(level, message):
	    _record("syslog", level, message)
	    return _syslog(level, message)
	def set_filter_hook(instance):
	    _record("set_filter_hook", type(instance).__name__)
	    return _set_filter_hook(instance)
	INN.syslog, INN.set_filter_hook = syslog, set_filter_hook
	EOF
	: >"$n/log/filter.log"
	chown -R news:news "$n"
	# (makedbz, started as root, runs as news.)
	(cd "$n/db" && INNCONF="$n/etc/inn.conf" "$MAKEDBZ" -i -o) ||
	    fail "makedbz failed"
	env -u INND_BIND_ADDRESS -u INND_BIND_ADDRESS6 INNCONF="$n/etc/inn.conf" \
	    "$INND" -f >"$T/innd.out" 2>&1 &
	INND_PID=$!
	BG_PIDS+=("$INND_PID")
	i=0
	until timeout 10 python3 "$IHAVE" "$PORT" >/dev/null 2>&1; do
		kill -0 "$INND_PID" 2>/dev/null ||
		    { fail "innd ended:" "$(innd_logs)"; return 1; }
		i=$((i + 1))
		[ "$i" -lt 300 ] ||
		    { fail "innd does not greet on port $PORT" "$(innd_logs)"; return 1; }
		sleep 0.1
	done
	# innd imported the filter, which hooked itself in.
	grep -qx 'set_filter_hook	MhfilterFilter' "$n/log/filter.log" ||
	    fail "the filter did not hook itself in (or innd's Python did" \
	    "not import sitecustomize):" "$(innd_logs)"
}

# innd's logs and the filter's, for a failure's message.
innd_logs() {
	local f

	for f in "$T/innd.out" "$T"/news/log/*; do
		if [ -s "$f" ]; then
			printf '%s:\n%s\n' "${f#"$T"/}" "$(tail -n 20 "$f")"
		fi
	done
	if [ -s "$T/derr" ]; then
		printf 'daemon:\n%s\n' "$(tail -n 20 "$T/derr")"
	fi
}

# Stop innd, if running, by ctlinnd shutdown; it must exit 0 within 20 s
# (else it is killed, and this fails).
innd_stop() {
	[ -n "${INND_PID:-}" ] || return 0
	INNCONF="$T/news/etc/inn.conf" timeout 30 "$CTLINND" shutdown 'test over' \
	    >"$T/ctlinnd.out" 2>&1 ||
	    fail "ctlinnd shutdown failed: $(cat "$T/ctlinnd.out")"
	wait_exit "$INND_PID" 20 || {
		kill -9 "$INND_PID" 2>/dev/null || true
		INND_PID=
		return 1
	}
	INND_PID=
	[ "$status" -eq 0 ] || fail "innd exit status $status" "$(innd_logs)"
}

# Offer the articles in the files $@; innd's answers go to res.
offer() {
	timeout 120 python3 "$IHAVE" "$PORT" "$@" >res 2>ihave.err ||
	    fail "ihave.py failed: $(cat ihave.err)" "$(innd_logs)"
}

# innd's answer to article $1 must be $2.
assert_answer() {
	local a

	a="$(sed -n "s/^$1 //p" res)"
	[ "$a" = "$2" ] || fail "article $1: '$a', expected '$2'" \
	    "answers:" "$(cat res)" "$(innd_logs)"
}

# The filter's log must (or, with $2 = no, must not) hold a line matching
# the extended regular expression $1.
assert_log() {
	if [ "${2:-yes}" = no ]; then
		run grep -E -- "$1" "$T/news/log/filter.log"
		[ "$status" -eq 1 ] ||
		    fail "the filter's log has '$1':" "$(innd_logs)"
	else
		grep -qE -- "$1" "$T/news/log/filter.log" ||
		    fail "the filter's log lacks '$1':" "$(innd_logs)"
	fi
}

# The number of documents in the daemon's index (the daemon stopped).
documents() {
	mhf --db "$T/mhf-db/db" --info >"$T/info" &&
	    sed -n 's/^documents: //p' "$T/info"
}

@test "innd: an article accepted, a copy under another Message-ID rejected with the filter's reason, the same Subject over another body accepted, a large article judged" {
	# About 1.5 MB of text, its lines all different.
	gen_tsv 20000 7 >lines
	{ printf 'Path: peer.example!not-for-mail\nFrom: Bob <bob@example.org>\n'
	  printf 'Newsgroups: mhf.test\nSubject: The logs\n'
	  printf 'Message-ID: <big@example.org>\nDate: Tue, 1 Jul 2025 11:00:00 +0000\n\n'
	  tr '\t' ' ' <lines; } >big
	sed 's/^Message-ID: <big@/Message-ID: <bigcopy@/' big >bigcopy
	[ "$(wc -c <big)" -gt 1000000 ] || fail "big is $(wc -c <big) bytes"
	mhf_start
	innd_start
	cp copy1 again
	offer a1 copy1 a2 big bigcopy again
	assert_answer a1 '235 Article transferred OK'
	assert_answer copy1 '437 near-duplicate of <a1@news.example.org> (1.0000)'
	assert_answer a2 '235 Article transferred OK'
	assert_answer big '235 Article transferred OK'
	assert_answer bigcopy '437 near-duplicate of <big@example.org> (1.0000)'
	# Rejected for good: with remembertrash innd refuses it when offered
	# again, without asking the filter.
	assert_answer again '435 Duplicate'
	# Every article judged, none accepted unjudged or by an error.
	assert_log 'not judged' no
	assert_log '^syslog	e' no
	innd_stop
	# innd logged the rejection as the filter's (its news log, buffered
	# until it stops).
	grep -qF '<copy1@example.net> 437 near-duplicate of <a1@news.example.org> (1.0000)' \
	    "$T/news/log/news" || fail "innd's news log:" "$(innd_logs)"
	stop_daemon
	# a1, a2 and big indexed; the copies not.
	[ "$(documents)" = 3 ] || fail "documents: $(documents)"
}

@test "innd: the daemon judges an article's text as posted, not its NNTP wire form (dot-stuffed, the end's dot)" {
	local body

	# Lines that begin with a dot are sent doubled by NNTP, and innd gives
	# the filter the body as it came, with the "." that ends it.
	body='.profile and .bashrc are read at login; see the notes below.
..and the end.
.'
	art dots@example.org 'Dot files' "$body" >dots
	art short@example.org 'Short' 'See you at noon at the station, by the clock.' >short
	art dots.mail@example.net 'Dot files' "$body" >dots.mail
	art short.mail@example.net 'Short' 'See you at noon at the station, by the clock.' >short.mail
	mhf_start
	innd_start
	offer dots short
	assert_answer dots '235 Article transferred OK'
	assert_answer short '235 Article transferred OK'
	assert_log 'not judged' no
	# The same articles as mail (-f mail) from a mailbox or spool would
	# read them: the text indexed from innd is theirs.
	{ cat dots.mail; printf '\0'; cat short.mail; printf '\0'; } >direct
	dsend "unix:$T/mhf/sock" direct >replies
	printf 'duplicate\t%s.mail@example.net\t%s@example.org\t1.0000\n' \
	    dots dots short short >expected
	assert_same expected replies
	innd_stop
	stop_daemon
}
