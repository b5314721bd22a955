#!/usr/bin/env bats
# --milter behind a real Postfix: each test starts mhfilter and a Postfix of
# its own, with main.cf, master.cf, queue, data directory, log and Maildir
# under the test's directory, smtpd on 127.0.0.1 and a free high port, and
# sends messages with Python's smtplib.  The system's main.cf and master.cf
# are not used (postfix -c), nothing in /etc/postfix is written, port 25 is
# not used, and both servers are stopped by the test.  Skipped where Postfix is not installed or cannot start (its master
# must be started as root).

load helpers
load daemon-helpers

# postfix(1) is in /usr/sbin, which a user's PATH may lack.
PATH="$PATH:/usr/sbin"

# What the tests need, checked before each (bats 1.8 cannot skip from
# setup_file).
setup() {
	helpers_setup
	command -v postfix >/dev/null ||
	    skip "Postfix is not installed (optional: Debian package postfix)"
	[ "$(id -u)" -eq 0 ] ||
	    skip "Postfix's master must be started as root"
	getent group nogroup >/dev/null && getent passwd postfix >/dev/null ||
	    skip "no postfix user (an incomplete Postfix installation) or no nogroup"
	# mhfilter runs as nobody, as it would as a user of its own.
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$MHFILTER" \
	    --version >/dev/null 2>&1 ||
	    skip "nobody cannot run $MHFILTER (in a private directory?)"
}

eval "$(declare -f teardown | sed '1s/teardown/helpers_teardown/')"
teardown() {
	pf_stop
	helpers_teardown
}

# The body all the copies share, and one that differs.
BODY='The committee approved the budget for the coming year after a long
debate in the town hall. The vote was seven to two, and the plan takes
effect in January, with the new library and the repairs to the bridge
paid for first.'
OTHER='Flood warnings were issued for three rivers in the north after a week
of heavy rain, and the ferry to the islands will not run until Friday.'

# A free TCP port on 127.0.0.1 (the system's choice, released at once).
free_port() {
	python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Start mhfilter --milter with the given options on a socket in Postfix's
# queue directory (where a chrooted smtpd finds it too, by the relative
# name in main.cf), then Postfix: smtpd on 127.0.0.1:$PF_PORT, delivery by
# virtual(8) to the Maildir $T/mail/box/ as nobody.
pf_start() {
	local q="$T/pf/queue" nobody

	PF="$T/pf/etc"
	PF_PORT="$(free_port)"
	nobody="$(id -u nobody)"
	# Postfix's daemons run as the postfix user: they must reach $T.
	chmod 755 "$T"
	mkdir -p "$PF" "$q/mhfilter" "$T/pf/data" "$T/mail"
	chown postfix "$T/pf/data"
	chown nobody "$T/mail"
	# A Maildir for each address.
	for u in box alice bob carol; do
		printf '%s@test.example %s/\n' "$u" "$u"
	done >"$PF/mailboxes"
	cat >"$PF/main.cf" <<-EOF
	compatibility_level = 3.6
	queue_directory = $q
	data_directory = $T/pf/data
	maillog_file = $T/pf/log
	maillog_file_prefixes = $T/pf
	inet_interfaces = 127.0.0.1
	inet_protocols = ipv4
	myhostname = mx.test.example
	mydestination =
	mynetworks = 127.0.0.0/8
	relay_domains =
	alias_maps =
	alias_database =
	smtputf8_enable = no
	virtual_mailbox_domains = test.example
	virtual_mailbox_base = $T/mail
	virtual_mailbox_maps = texthash:$PF/mailboxes
	virtual_uid_maps = static:$nobody
	virtual_gid_maps = static:$(id -g nobody)
	smtpd_milters = unix:mhfilter/milter
	non_smtpd_milters = \$smtpd_milters
	milter_default_action = tempfail
	EOF
	# tempfail above: a milter that does not answer must fail the test,
	# not let the message through undecided.
	cat >"$PF/master.cf" <<-EOF
	127.0.0.1:$PF_PORT inet n - n - - smtpd
	cleanup unix n - n - 0 cleanup
	qmgr unix n - n 300 1 qmgr
	rewrite unix - - n - - trivial-rewrite
	bounce unix - - n - 0 bounce
	defer unix - - n - 0 bounce
	trace unix - - n - 0 bounce
	verify unix - - n - 1 verify
	proxymap unix - - n - - proxymap
	error unix - - n - - error
	retry unix - - n - - error
	discard unix - - n - - discard
	virtual unix - n n - - virtual
	anvil unix - - n - 1 anvil
	scache unix - - n - 1 scache
	postlog unix-dgram n - n - 1 postlogd
	EOF
	# mhfilter as README, mhfilter(1) and contrib/mhfilter-milter.service
	# set it up: an unprivileged user (nobody here) with a group of its
	# own, not postfix's (nogroup here), umask 007, and the socket's
	# directory set-group-ID postfix (install -d -o mhfilter -g postfix -m
	# 2750), so that the socket is the group postfix's and only Postfix
	# may use it.
	install -d -o nobody -g postfix -m 2750 "$q/mhfilter"
	mkdir db
	chown nobody db
	cat >"$T/mhfilter-postfix" <<-EOF
	#!/bin/sh
	umask 007
	exec setpriv --reuid=nobody --regid=nogroup --clear-groups \\
	    "$MHFILTER" "\$@"
	EOF
	chmod 755 "$T/mhfilter-postfix"
	MHFILTER="$T/mhfilter-postfix" start_daemon \
	    --milter "unix:$q/mhfilter/milter" -d db "$@"
	# The socket is the group postfix's by its directory, and 0770.
	[ "$(stat -c '%U %G %a' "$q/mhfilter/milter")" = 'nobody postfix 770' ] ||
	    fail "the socket: $(stat -c '%U %G %a' "$q/mhfilter/milter")"
	# A configuration Postfix rejects is this test's fault: fail.  One
	# it accepts but cannot run here (a container) is skipped.
	timeout 60 postfix -c "$PF" check >"$T/pf/start" 2>&1 ||
	    fail "postfix check failed:" "$(cat "$T/pf/start" "$T/pf/log" \
	    2>/dev/null | tail -n 5)"
	if ! timeout 60 postfix -c "$PF" start >"$T/pf/start" 2>&1; then
		PF_FAILED=1
		skip "Postfix cannot start here: $(cat "$T/pf/start" \
		    "$T/pf/log" 2>/dev/null | tail -n 3)"
	fi
	PF_STARTED=1
	wait_pf_log 'daemon started'
}

# Stop Postfix (if this test started it) and wait up to 10 s for its
# master to end; the helpers' teardown then stops mhfilter, if still
# running, and removes the test's directory.
pf_stop() {
	local pid i=0

	[ -n "${PF_STARTED:-}" ] || [ -n "${PF_FAILED:-}" ] || return 0
	pid="$(cat "$T/pf/queue/pid/master.pid" 2>/dev/null | tr -d ' ')"
	timeout 60 postfix -c "$PF" stop >/dev/null 2>&1 || true
	while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
	PF_STARTED=
	PF_FAILED=
}

# Wait up to 30 s for Postfix's log to hold the fixed string $1 $2 times
# (default 1).
wait_pf_log() {
	local i=0

	while [ "$(grep -cF -- "$1" "$T/pf/log" 2>/dev/null || true)" \
	    -lt "${2:-1}" ]; do
		i=$((i + 1))
		[ "$i" -lt 600 ] || {
			fail "timed out waiting for '$1' in Postfix's log:" \
			    "$(tail -n 20 "$T/pf/log" 2>/dev/null)"
			return 1
		}
		sleep 0.05
	done
}

# A message with Message-ID <$1@test.example> and body $2; with $3, the
# body base64-encoded; with $4, a re-sent copy (a Received field, a later
# Date).
message() {
	local hour=10

	if [ -n "${4:-}" ]; then
		hour=11
		printf 'Received: from relay.test.example by mx.test.example;\n'
		printf '\tTue, 3 Mar 2026 11:00:00 +0000\n'
	fi
	printf 'From: Alice <alice@test.example>\nTo: box@test.example\n'
	printf 'Subject: Budget\nMessage-ID: <%s@test.example>\n' "$1"
	printf 'Date: Tue, 3 Mar 2026 %d:00:00 +0000\nMIME-Version: 1.0\n' \
	    "$hour"
	printf 'Content-Type: text/plain; charset=us-ascii\n'
	if [ -n "${3:-}" ]; then
		printf 'Content-Transfer-Encoding: base64\n\n'
		printf '%s\n' "$2" | base64
	else
		printf 'Content-Transfer-Encoding: 7bit\n\n%s\n' "$2"
	fi
}

# Send stdin over SMTP to 127.0.0.1:$PF_PORT, in one transaction for the
# local parts $RCPTS at test.example (default box); print the reply to its
# end of data ("250 ..." or the error) and exit 0 either way (1 if the
# session itself failed).
smtp_send() {
	timeout 60 python3 -c '
import smtplib, sys
msg = sys.stdin.buffer.read()
rcpts = [r + "@test.example" for r in sys.argv[2].split()]
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=30) as s:
    try:
        s.sendmail("alice@test.example", rcpts, msg)
        print("250")
    except smtplib.SMTPResponseException as e:
        print(e.smtp_code, e.smtp_error.decode())
' "$PF_PORT" "${RCPTS:-box}"
}

# The Maildir file holding Message-ID <$1@test.example>.
delivered() {
	grep -lF "Message-ID: <$1@test.example>" "$T"/mail/box/new/* \
	    2>/dev/null | head -n 1
}

# Send the message "message $@" makes; the reply to its end of data must
# be $EXPECT (default 250).
send_expect() {
	local out

	out="$(message "$@" | smtp_send)" &&
	    [ "$out" = "${EXPECT:-250}" ] ||
	    fail "<$1@test.example>: reply '$out', expected '${EXPECT:-250}'" \
	    "$(tail -n 20 "$T/pf/log")"
}

# The delivered message <$1@test.example> must hold the X-Mhfilter field
# $2 (a prefix of its value) and no other X-Mhfilter field.
assert_field() {
	local f v

	f="$(delivered "$1")"
	[ -n "$f" ] || fail "<$1@test.example> was not delivered" \
	    "$(tail -n 20 "$T/pf/log")"
	v="$(sed -n '/^$/q; s/^X-Mhfilter: //p' "$f")"
	case "$v" in
	"$2"*) ;;
	*) fail "<$1@test.example>: X-Mhfilter '$v', expected '$2...'" ;;
	esac
	[ "$(grep -c '^X-Mhfilter:' "$f")" -eq 1 ] ||
	    fail "<$1@test.example>: more than one X-Mhfilter field" "$(cat "$f")"
}

@test "Postfix with the milter: a re-sent and a base64 copy are marked duplicate, the first and another text unique" {
	pf_start
	send_expect one "$BODY"
	send_expect two "$BODY" '' resent
	send_expect three "$BODY" b64 resent
	send_expect four "$OTHER"
	wait_pf_log 'status=sent (delivered to maildir)' 4
	[ "$(ls "$T/mail/box/new" | wc -l)" -eq 4 ] ||
	    fail "$(ls -l "$T/mail/box/new")"
	assert_field one 'unique'
	# The match is named by its Message-ID.
	assert_field two 'duplicate; of=<one@test.example>; similarity=1.00'
	assert_field three 'duplicate; of=<one@test.example>; similarity=1.00'
	assert_field four 'unique'
	# The base64 copy arrived base64-encoded: the milter only adds a field.
	grep -q '^Content-Transfer-Encoding: base64' "$(delivered three)"
	stop_daemon
	grep -q 'milter stopped after 4 messages' "$T/derr" ||
	    fail "$(cat "$T/derr")"
}

# A message with Message-ID <$1@test.example>, the text $BODY and, with $2,
# a PDF attachment whose content is $2 (an invoice of a month).
invoice() {
	printf 'From: Accounts <alice@test.example>\nTo: box@test.example\n'
	printf 'Subject: Your invoice\nMessage-ID: <%s@test.example>\n' "$1"
	printf 'Date: Tue, 3 Mar 2026 10:00:00 +0000\nMIME-Version: 1.0\n'
	if [ -z "${2:-}" ]; then
		printf 'Content-Type: text/plain\n\n%s\n' "$BODY"
		return
	fi
	printf 'Content-Type: multipart/mixed; boundary="b1"\n\n--b1\n'
	printf 'Content-Type: text/plain\n\n%s\n--b1\n' "$BODY"
	printf 'Content-Type: application/pdf; name="invoice.pdf"\n'
	printf 'Content-Disposition: attachment; filename="invoice.pdf"\n'
	printf 'Content-Transfer-Encoding: base64\n\n'
	printf '%%PDF-1.4 %s' "$2" | base64
	printf '%s\n' '--b1--'
}

@test "Postfix with the milter, discard: invoices of one text with other PDFs, and one that brings a file, all delivered; a re-sent one discarded" {
	local out

	pf_start --milter-action discard
	for m in none: june:'June: 120.00' july:'July: 180.00' \
	    june2:'June: 120.00'; do
		out="$(invoice "${m%%:*}" "${m#*:}" | smtp_send)" &&
		    [ "$out" = 250 ] || fail "${m%%:*}: $out"
	done
	wait_pf_log 'status=sent (delivered to maildir)' 3
	# June's invoice brings a file the text alone did not; July's another.
	assert_field june 'unique'
	assert_field july 'unique'
	assert_field none 'unique'
	[ -z "$(delivered june2)" ] || fail "the re-sent copy was delivered"
	stop_daemon
	grep -q 'milter stopped after 4 messages' "$T/derr" ||
	    fail "$(cat "$T/derr")"
	grep -q 'message-id=<june2@test.example>: duplicate of <june@test.example>' \
	    "$T/derr" || fail "$(cat "$T/derr")"
}

@test "Postfix with --milter-action reject: the SMTP client gets the 5xx reply, the copies are not delivered" {
	pf_start --milter-action reject
	send_expect one "$BODY"
	EXPECT='550 5.7.1 Duplicate message' send_expect two "$BODY" '' resent
	EXPECT='550 5.7.1 Duplicate message' send_expect three "$BODY" b64 \
	    resent
	wait_pf_log 'status=sent (delivered to maildir)'
	wait_pf_log 'milter-reject: END-OF-MESSAGE' 2
	# Nothing else was queued: only the first message is in the Maildir.
	[ -z "$(find "$T/pf/queue/incoming" "$T/pf/queue/active" \
	    "$T/pf/queue/deferred" -type f)" ] || fail "messages left queued"
	[ "$(ls "$T/mail/box/new" | wc -l)" -eq 1 ] ||
	    fail "$(ls -l "$T/mail/box/new")"
	assert_field one 'unique'
	stop_daemon
}

# The files of Maildir $1 (a local part), one a line.
mailbox() {
	ls "$T/mail/$1/new" 2>/dev/null
}

# What a delivered file holds after its header: the body as sent.
body_of() {
	sed '1,/^$/d' "$1"
}

@test "Postfix, per recipient, discard: a message to alice and bob, then again to bob and carol: each mailbox gets it once" {
	pf_start --milter-action discard
	RCPTS='alice bob' send_expect one "$BODY"
	wait_pf_log 'status=sent (delivered to maildir)' 2
	RCPTS='bob carol' send_expect one "$BODY" '' resent
	wait_pf_log 'status=sent (delivered to maildir)' 3
	# Another text with the same Subject reaches bob.
	RCPTS='bob' send_expect two "$OTHER"
	wait_pf_log 'status=sent (delivered to maildir)' 4
	[ -z "$(find "$T/pf/queue/incoming" "$T/pf/queue/active" \
	    "$T/pf/queue/deferred" -type f)" ] || fail "messages left queued"
	[ "$(mailbox alice | wc -l)" -eq 1 ] || fail "alice: $(mailbox alice)"
	[ "$(mailbox bob | wc -l)" -eq 2 ] || fail "bob: $(mailbox bob)"
	[ "$(mailbox carol | wc -l)" -eq 1 ] || fail "carol: $(mailbox carol)"
	# Byte for byte, each got the same body, the one sent (with the line
	# ends and final newline of Postfix's delivery), bob the first copy.
	body_of "$T/mail/alice/new/$(mailbox alice)" >sent
	[ "$(sed '/^$/d' sent)" = "$BODY" ] || fail "alice's body" "$(cat sent)"
	for u in alice carol; do
		body_of "$T/mail/$u/new/$(mailbox $u)" >got
		cmp sent got || fail "$u's body differs" "$(cat got)"
		grep -q '^X-Mhfilter: unique$' "$T/mail/$u/new/$(mailbox $u)" ||
		    fail "$u: no unique field"
	done
	f="$(grep -lF 'Message-ID: <one@test.example>' "$T"/mail/bob/new/*)"
	[ "$(printf '%s\n' "$f" | wc -l)" -eq 1 ] || fail "bob: $f"
	body_of "$f" >got
	cmp sent got || fail "bob's body differs"
	# bob's first copy, not the re-sent one (that has a Received field
	# from relay.test.example).
	run ! grep -q 'relay.test.example' "$f"
	grep -q 'milter: .*message-id=<one@test.example>: seen .*for 1 of 2 recipients: removed <bob@test.example>' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	stop_daemon
}
