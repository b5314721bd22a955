#!/usr/bin/env bats
# Mail and news (-f mail): mbox, Maildir and single messages in; mbox,
# the X-Mhfilter header, Message-ID pairs and duplicates out; re-sent
# copies found; bad input; the MDA hook, through procmail for real (and
# maildrop and Dovecot's Sieve where they are installed).

load helpers
load daemon-helpers

# A message on stdout: $1 Message-ID, $2 Subject, $3 body, more headers
# from $4 (lines), no From_ line.
msg() {
	printf 'From: Alice <alice@example.org>\nTo: users@lists.example.org\n'
	printf 'Message-ID: <%s>\nDate: Tue, 1 Jul 2025 10:00:00 +0000\n' "$1"
	printf 'Subject: %s\n%s%s\n' "$2" "${4:+$4$'\n'}" ""
	printf '%s\n' "$3"
}

BODY1='The new version fixes the boot problem on machines with two disks
and adds a setting for the network timeout. Please test it before Friday
and report anything odd to the list, with the output of dmesg attached.'
BODY2='Lunch is at noon in the usual place. Bring your own sandwiches; the
kitchen is closed for repairs until the end of the month, sorry.'
BODY3='The disk images of the three test machines are attached, taken this
morning before the upgrade, in case we have to roll back on Thursday.'

# An mbox of three: an original, its copy re-sent base64-encoded with other
# Received/Message-ID/Date headers, and another message.
make_mbox() {
	{
		echo 'From alice@example.org Tue Jul  1 10:00:00 2025'
		msg m1@example.org 'Release notes' "$BODY1"
		echo
		echo 'From bob@example.org Tue Jul  1 11:00:00 2025'
		printf 'Received: from relay.example.net by mx.example.com\n'
		printf 'Message-ID: <other.2@Example.NET>\n'
		printf 'Date: Wed, 2 Jul 2025 09:30:00 +0200\n'
		printf 'Subject: Fwd: Release notes\nMIME-Version: 1.0\n'
		printf 'Content-Type: text/plain; charset=utf-8\n'
		printf 'Content-Transfer-Encoding: base64\n\n'
		printf '%s\n' "$BODY1" | base64
		echo
		echo 'From carol@example.org Tue Jul  1 12:00:00 2025'
		msg m3@example.org 'Lunch' "$BODY2"
	} >in.mbox
}

# The messages every way in is tried with, in cases/, delivered in name
# order: an original; another message with the same Subject; a reply
# quoting the original under its own text; a copy of the original re-sent
# (other Message-ID, Received and Date, base64); a message of about 41 MB
# with an attachment; a body with an unquoted "From " line; a message with
# no header at all; MIME cut short; a wrong charset.  Only the re-sent copy is a duplicate: every other one
# must arrive as it was sent.
make_cases() {
	mkdir cases
	msg c1@example.org 'Weekly status' "$BODY1" >cases/1-original
	msg c2@example.org 'Weekly status' "$BODY2" >cases/2-same-subject
	msg c3@example.org 'Re: Weekly status' 'Agreed: we ship it on Monday
once the last tests have passed on both of the build machines.

On Tue, 1 Jul 2025, Alice wrote:
'"$(printf '%s\n' "$BODY1" | sed 's/^/> /')" \
	    'In-Reply-To: <c1@example.org>' >cases/3-reply
	{
		printf 'Received: from relay.example.net by mx.example.com\n'
		printf 'From: Alice <alice@example.org>\n'
		printf 'Message-ID: <c4.resent@Example.NET>\n'
		printf 'Date: Wed, 2 Jul 2025 09:30:00 +0200\n'
		printf 'Subject: Weekly status\nMIME-Version: 1.0\n'
		printf 'Content-Type: text/plain; charset=utf-8\n'
		printf 'Content-Transfer-Encoding: base64\n\n'
		printf '%s\n' "$BODY1" | base64
	} >cases/4-resent
	{
		msg c5@example.org 'Disk images' "$BODY3" 'MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=zz'
		printf -- '--zz\nContent-Type: text/plain\n\n%s\n' "$BODY3"
		printf -- '--zz\nContent-Type: application/octet-stream\n'
		printf 'Content-Disposition: attachment; filename=disk.img\n'
		printf 'Content-Transfer-Encoding: base64\n\n'
		head -c 30000000 /dev/urandom | base64
		printf -- '--zz--\n'
	} >cases/5-big
	msg c6@example.org 'Plans' "$BODY2

From now on, the kitchen opens at eight.
From the first of the month, it closes at six." >cases/6-from-line
	printf 'Nothing but text: no header at all.\nA second line.\n' \
	    >cases/7-no-header
	# Bad MIME: a multipart cut before its closing boundary; Latin-1
	# bytes labelled UTF-8.
	{
		msg c8@example.org 'Cut short' "$BODY3" 'MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=zz'
		printf -- '--zz\nContent-Type: text/plain\n\n%s\n' "$BODY3"
		printf -- '--zz\nContent-Type: application/pdf\n'
		printf 'Content-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n'
	} >cases/8-truncated-mime
	{
		printf 'From: Dominique <d@example.fr>\nMessage-ID: <c9@example.fr>\n'
		printf 'Subject: Caf\xe9\nContent-Type: text/plain; charset=utf-8\n\n'
		printf 'Le caf\xe9 du deuxi\xe8me \xe9tage ferme \xe0 midi pour '
		printf 'travaux, d\xe9sol\xe9s pour la g\xeane.\n'
	} >cases/9-wrong-charset
	[ "$(stat -c %s cases/5-big)" -gt 40000000 ]
}

# The checksums of the files in the directories $@, a line each, sorted,
# with the X-Mhfilter fields the mark recipes add left out, and blank lines
# at the end (procmail adds one to what a filter returns, as "| cat" shows).
sums() {
	local f

	for f in $(find "$@" -type f | sort); do
		grep -av '^X-Mhfilter: ' "$f" |
		    sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}' | md5sum
	done | sort
}

# Were the cases delivered as sent: the re-sent copy alone into the
# duplicates' directory $2, every other into the inbox $1, byte for byte?
assert_delivered() {
	local in="$1" dup="$2"

	[ "$(sums "$in")" = "$(sums cases ! -name 4-resent)" ] ||
	    fail "inbox $in:" "$(ls -l "$in")" "$(head -c 2000 log 2>/dev/null)"
	[ "$(sums "$dup")" = "$(sums cases -name 4-resent)" ] ||
	    fail "duplicates $dup:" "$(ls -l "$dup")" "$(head -c 2000 log 2>/dev/null)"
}

@test "mbox: the unique messages out byte for byte, the re-sent base64 copy dropped" {
	make_mbox
	mhrun -f mail --stats in.mbox
	assert_status 0
	assert_stat records 3
	assert_stat duplicates 1
	# Messages 1 and 3 as read, each followed by its blank line.
	awk '/^From bob/ { skip = 1 } /^From carol/ { skip = 0 } !skip' \
	    in.mbox >expected
	echo >>expected
	assert_same expected "$T/out"
}

@test "GMime and libxml2 are loaded for mail only, from the mail module" {
	make_mbox
	LD_DEBUG=files mhrun -f line --stats "$DATA/sample-news.txt"
	assert_status 0
	if loaded | grep -E 'gmime|xml2|mhfilter-mail'; then
		fail "loaded for line records:" "$(loaded)"
	fi
	LD_DEBUG=files mhrun -f mail --stats in.mbox
	assert_status 0
	loaded | grep -q '/mhfilter-mail\.so$' || fail "no module:" "$(loaded)"
	loaded | grep -q 'libgmime-3\.0' || fail "no GMime:" "$(loaded)"
	loaded | grep -q 'libxml2' || fail "no libxml2:" "$(loaded)"
}

@test "without its mail module, the program says so for mail (exit 1) and reads the rest" {
	[ ! -e "$MAIL_MODULE_INSTALLED" ] ||
	    skip "a mail module is installed in $MAIL_MODULE_INSTALLED"
	make_mbox
	cp "$MHFILTER" alone
	status=0
	./alone -f mail in.mbox >"$T/out" 2>"$T/err" || status=$?
	assert_status 1
	assert_err_has 'cannot load mail support: '
	assert_err_has 'mhfilter-mail.so'
	[ ! -s "$T/out" ] || fail "output: $(cat "$T/out")"
	status=0
	./alone -f line "$DATA/sample-news.txt" >"$T/out" 2>"$T/err" ||
	    status=$?
	assert_status 0
	[ -s "$T/out" ] || fail "no output for line records"
}

# A message with Message-ID <$1>, the text $BODY1 and $BODY3 (an attachment
# line weighs little beside it) and, with $2, a PDF attachment whose content
# is $2 (base64).
invoice() {
	printf 'From: Accounts <acc@example.org>\nTo: alice@example.org\n'
	printf 'Message-ID: <%s>\nSubject: Your invoice\n' "$1"
	printf 'MIME-Version: 1.0\n'
	if [ -z "${2:-}" ]; then
		printf 'Content-Type: text/plain\n\n%s\n%s\n' "$BODY1" "$BODY3"
		return
	fi
	printf 'Content-Type: multipart/mixed; boundary="b1"\n\n--b1\n'
	printf 'Content-Type: text/plain\n\n%s\n%s\n--b1\n' "$BODY1" \
	    "$BODY3"
	printf 'Content-Type: application/pdf; name="invoice.pdf"\n'
	printf 'Content-Disposition: attachment; filename="invoice.pdf"\n'
	printf 'Content-Transfer-Encoding: base64\n\n'
	printf '%%PDF-1.4 %s' "$2" | base64
	printf '%s\n' '--b1--'
}

@test "one text with other attachments: other messages, kept, as one that brings a file; one with fewer, or the same again, a copy, in the run and in a later one" {
	local m

	for m in june:'June: 120.00' july:'July: 180.00' none: \
	    june2:'June: 120.00'; do
		echo 'From acc@example.org Tue Jul  1 10:00:00 2025'
		invoice "${m%%:*}@example.org" "${m#*:}"
		echo
	done >in.mbox
	mhrun -f mail --stats -d db -p in.mbox
	assert_status 0
	assert_stat records 4
	assert_stat duplicates 2
	# The text without a file brings nothing new: a copy (of the first).
	printf '%s\t%s\t%s\n' july@example.org none@example.org 0.8877 \
	    june@example.org none@example.org 0.8877 \
	    june@example.org june2@example.org 1.0000 | assert_out
	# A later run: August's invoice is new, June's again a copy.
	{
		echo 'From acc@example.org Tue Jul  1 10:00:00 2025'
		invoice aug@example.org 'August: 90.00'
		echo
		echo 'From acc@example.org Tue Jul  1 10:00:00 2025'
		invoice june3@example.org 'June: 120.00'
	} >more.mbox
	mhrun -f mail --stats -d db -a more.mbox
	assert_status 0
	assert_stat duplicates 1
	[ "$(grep -c '^X-Mhfilter: unique$' "$T/out")" -eq 1 ]
	grep -qx 'X-Mhfilter: duplicate; of=<june@example.org>; similarity=1.00' \
	    "$T/out"
	# The text first, then with a file: the file is new.
	for m in none: june:'June: 120.00'; do
		echo 'From acc@example.org Tue Jul  1 10:00:00 2025'
		invoice "${m%%:*}@example.org" "${m#*:}"
		echo
	done >first.mbox
	mhrun -f mail --stats -a first.mbox
	assert_status 0
	assert_stat duplicates 0
	[ "$(grep -c '^X-Mhfilter: unique$' "$T/out")" -eq 2 ]
}

@test "mbox: --duplicates writes the copy, --pairs the Message-IDs" {
	make_mbox
	mhrun -f mail -D in.mbox
	assert_status 0
	grep -q '^From bob@example.org' "$T/out"
	[ "$(grep -c '^From ' "$T/out")" -eq 1 ]
	mhrun -f mail -p in.mbox
	assert_status 0
	printf 'm1@example.org\tother.2@example.net\t1.0000\n' | assert_out
}

@test "--annotate adds an X-Mhfilter header field after the From_ line" {
	make_mbox
	mhrun -f mail -a in.mbox
	assert_status 0
	[ "$(grep -c '^X-Mhfilter: unique$' "$T/out")" -eq 2 ]
	grep -q '^X-Mhfilter: duplicate; of=<m1@example.org>; similarity=1.00$' \
	    "$T/out"
	# The header field comes right after the From_ line.
	[ "$(grep -A1 '^From bob' "$T/out" | tail -1 | cut -c1-23)" = \
	    'X-Mhfilter: duplicate; ' ]
	# Removing the header fields gives the input back (plus the final
	# blank line of an mbox).
	grep -v '^X-Mhfilter: ' "$T/out" >got
	{ cat in.mbox; echo; } >expected
	assert_same expected got
}

@test "mbox with CRLF line ends (from Windows): framed, compared and written as read" {
	make_mbox
	sed 's/$/\r/' in.mbox >crlf.mbox
	mhrun -f mail --stats crlf.mbox
	assert_status 0
	assert_stat records 3
	assert_stat duplicates 1
	# Messages 1 and 3 byte for byte, each with its CRLF blank line.
	awk '/^From bob/ { skip = 1 } /^From carol/ { skip = 0 } !skip' \
	    crlf.mbox >expected
	printf '\r\n' >>expected
	assert_same expected "$T/out"
	mhrun -f mail -p crlf.mbox
	printf 'm1@example.org\tother.2@example.net\t1.0000\n' | assert_out
	# The header field ends as the message's lines do.
	mhrun -f mail -a crlf.mbox
	grep -v '^X-Mhfilter: ' "$T/out" >got
	{ cat crlf.mbox; printf '\r\n'; } >expected
	assert_same expected got
	[ "$(grep -c $'^X-Mhfilter: .*\r$' "$T/out")" -eq 3 ] ||
	    fail "$(grep '^X-Mhfilter' "$T/out" | cat -A)"
	# The text has no CR: a CRLF copy of an LF message is identical.
	{ sed -n '/^From carol/,$p' in.mbox; echo
	  sed -n '/^From carol/,$p' crlf.mbox | sed 's/m3@/m4@/'; } >mixed.mbox
	mhrun -f mail -p mixed.mbox
	printf 'm3@example.org\tm4@example.org\t1.0000\n' | assert_out
	# A CRLF message from a Maildir: the From_ line and the blank line
	# that mhfilter adds end in CRLF too.
	mkdir -p md/new
	sed -n '/^From carol/,$p' crlf.mbox | tail -n +2 >md/new/1.host
	mhrun -f mail md
	assert_status 0
	[ "$(grep -c '^From MAILER-DAEMON ' "$T/out")" -eq 1 ] &&
	    [ "$(grep -vc $'\r$' "$T/out")" -eq 0 ] ||
	    fail "$(cat -A "$T/out")"
}

@test "mbox: From_ quoting is undone for the text and kept in the output" {
	{
		echo 'From a@example.org Tue Jul  1 10:00:00 2025'
		msg q1@example.org 'Quoting' "$BODY2"$'\n>From the kitchen staff.'
		echo
		echo 'From b@example.org Tue Jul  1 10:00:00 2025'
		msg q2@example.org 'Quoting' "$BODY2"$'\nFrom the kitchen staff.' \
		    'Content-Type: text/plain'
	} >in.mbox
	mhrun -f mail --mail-strip none -p in.mbox
	assert_status 0
	printf 'q1@example.org\tq2@example.org\t1.0000\n' | assert_out
	mhrun -f mail --mail-strip none -D in.mbox
	grep -q '^From the kitchen' "$T/out"
	! grep -q '^>From' "$T/out" || fail "wrong quoting"
}

@test "an mbox that starts with blank lines: its first message judged and written as without them" {
	local lead

	make_mbox
	mhrun -f mail -a in.mbox
	assert_status 0
	cp "$T/out" want
	for lead in '\n' '\r\n' '\n\r\n\n'; do
		{ printf "$lead"; cat in.mbox; } >lead.mbox
		mhrun -f mail -a --stats lead.mbox
		assert_status 0
		assert_stat records 3
		assert_stat unchecked 0
		assert_stat duplicates 1
		assert_same want "$T/out"
	done
}

@test "Maildir: cur/ and new/ in file-name order, written as mbox with quoting" {
	mkdir -p md/cur md/new md/tmp
	msg d1@example.org 'Release notes' "$BODY1"$'\nFrom me.' \
	    >md/cur/1751364000.M1P1.host:2,S
	msg d2@example.org 'Re: Release notes' "$BODY1"$'\nFrom me.' \
	    >md/new/1751364100.M2P1.host
	msg d3@example.org 'Lunch' "$BODY2" >md/cur/1751364200.M3P1.host:2,
	mhrun -f mail -a --stats md
	assert_status 0
	assert_stat records 3
	assert_stat duplicates 1
	[ "$(grep -c '^From MAILER-DAEMON ' "$T/out")" -eq 3 ]
	grep -q '^X-Mhfilter: duplicate; of=<d1@example.org>' "$T/out"
	# The body's From line is quoted for mbox.
	[ "$(grep -c '^>From me\.$' "$T/out")" -eq 2 ]
	# The Date became the From_ line's date.
	grep -q '^From MAILER-DAEMON Tue Jul  1 10:00:00 2025$' "$T/out"
	# In order: d1, d2, d3.
	grep -o 'Message-ID: <d[0-9]' "$T/out" | tr -d '\n' |
	    grep -q '^Message-ID: <d1Message-ID: <d2Message-ID: <d3$'
	# A directory that is not a Maildir is an error.
	mkdir plain
	touch plain/notes.txt
	mhrun -f mail plain
	assert_status 1
	assert_err_has "not a Maildir"
}

@test "Maildir: a file's own From lines, a From_ line or not, never cut or merge a message in an mbox, and are kept in a Maildir" {
	mkdir -p md/cur md/new md/tmp
	# A file of its own has no >From quoting: its text is as it reads.
	{
		echo 'From jane@example.org'
		msg f1@example.org 'Release notes' "$BODY1"$'\nFrom now on, Mondays.'
	} >md/cur/1751364000.M1P1.host:2,S
	{
		echo 'From 5d2b80fb Mon Sep 17 00:00:00 2001'
		msg f2@example.org 'Lunch' "$BODY2"$'\nFrom the desk of Bob\n>From a reply'
	} >md/cur/1751364100.M2P1.host:2,S
	msg f3@example.org 'Disks' "$BODY3" >md/cur/1751364200.M3P1.host:2,S
	{
		echo 'From 5d2b80fb Mon Sep 17 00:00:00 2001'
		msg f4@example.org 'Re: Lunch' "$BODY2"$'\nFrom the desk of Bob\n>From a reply'
	} >md/cur/1751364300.M4P1.host:2,S
	mhrun -f mail --stats --duplicates-to q/ md
	assert_status 0
	assert_stat records 4
	assert_stat duplicates 1
	# In the mbox: a From_ line that is not one is the message's, quoted
	# as its other From lines; one that is stays; every line that starts
	# with "From " (what the simplest mbox reader cuts at) starts one of
	# the three.
	[ "$(grep -c '^From ' "$T/out")" -eq 3 ] || fail "$(grep '^From ' "$T/out")"
	grep -qx '>From jane@example.org' "$T/out"
	grep -qx '>From now on, Mondays.' "$T/out"
	grep -qx 'From 5d2b80fb Mon Sep 17 00:00:00 2001' "$T/out"
	grep -qx '>From the desk of Bob' "$T/out"
	grep -qx '>>From a reply' "$T/out"
	# Read again: the same three messages, in order, the same text.
	cp "$T/out" out.mbox
	mhrun -f mail --stats -a out.mbox
	assert_status 0
	assert_stat records 3
	grep -o 'Message-ID: <f[0-9]' "$T/out" | tr -d '\n' |
	    grep -qx 'Message-ID: <f1Message-ID: <f2Message-ID: <f3'
	# The copy in the quarantine Maildir: the file less its From_ line,
	# with the field; its ">From" line is text, kept as it was.
	[ "$(ls q/new | wc -l)" -eq 1 ]
	grep -v '^X-Mhfilter: ' q/new/* >got
	tail -n +2 md/cur/1751364300.M4P1.host:2,S >want
	assert_same want got
}

# The line numbers in $1 of the X-Mhfilter field and of the From: field,
# and of the lines that start with ">From " or "From " before the From:
# field, each after its name.
field_lines() {
	awk '/^X-Mhfilter: /{ printf "x%d ", NR } /^From: /{ printf "f%d\n", NR; exit }
	    /^>*From /{ printf "e%d ", NR }' "$1"
}

@test "--annotate: the X-Mhfilter field goes after the envelope lines (a From_ line quoted by an earlier delivery), among the header fields, in an mbox, with --single and in a Maildir" {
	# A delivery agent that met a From_ line quotes it as ">From ".
	{
		echo 'From alice@example.org Tue Jul  1 10:00:00 2025'
		echo '>From bob@example.org Tue Jul  1 09:00:00 2025'
		msg e1@example.org 'Release notes' "$BODY1"
		echo
		echo 'From alice@example.org Tue Jul  1 10:05:00 2025'
		echo '>From bob@example.org Tue Jul  1 09:05:00 2025'
		echo '>>From carol@example.org Tue Jul  1 09:04:00 2025'
		msg e2@example.org 'Release notes' "$BODY1"
	} >in.mbox
	mhrun -f mail --annotate --stats in.mbox
	assert_status 0
	assert_stat duplicates 1
	[ "$(field_lines "$T/out" | head -1)" = "e1 e2 x3 f4" ] ||
	    fail "first: $(field_lines "$T/out")"
	sed -n '/^From alice@example.org Tue Jul  1 10:05/,$p' "$T/out" >second
	[ "$(field_lines second)" = "e1 e2 e3 x4 f5" ] ||
	    fail "second: $(field_lines second)"
	grep -qx 'X-Mhfilter: duplicate; of=<e1@example.org>; similarity=1.00' second ||
	    fail "$(grep '^X-Mhfilter' second)"
	# Read again, the header is whole: the same verdicts, by Message-ID.
	cp "$T/out" again.mbox
	mhrun -f mail --stats -p again.mbox
	assert_status 0
	assert_stat duplicates 1
	grep -q '^e1@example.org.e2@example.org' "$T/out" || fail "$(cat "$T/out")"
	# One message, as procmail hands it over.
	sed -n '1,/^$/p;/^$/q' in.mbox >one.eml
	printf '%s\n' "$BODY1" >>one.eml
	mhrun -f mail --single --annotate one.eml
	assert_status 0
	[ "$(field_lines "$T/out")" = "e1 e2 x3 f4" ] || fail "$(field_lines "$T/out")"
	# In a Maildir the From_ line is left out, the others unquoted.
	mhrun -f mail --duplicates-to q/ in.mbox
	assert_status 0
	[ "$(ls q/new | wc -l)" -eq 1 ]
	f=$(echo q/new/*)
	[ "$(field_lines "$f")" = "e1 e2 x3 f4" ] || fail "$(field_lines "$f")"
	head -2 "$f" | tr '\n' '|' |
	    grep -qx 'From bob@example.org Tue Jul  1 09:05:00 2025|>From carol@example.org Tue Jul  1 09:04:00 2025|' ||
	    fail "$(head -3 "$f")"
}

@test "a message of blank lines alone is passed through as read, never lost: --single (a procmail filter's), with -a, and in a Maildir" {
	local m

	for m in $'\n\n' $' \n' $'\r\n' $'\n'; do
		printf '%s' "$m" >blank
		mhrun -f mail --single -a --stats blank
		assert_status 0
		assert_same blank "$T/out"
		assert_stat records 1
		assert_stat unchecked 1
		assert_err_has "passed through unchecked"
	done
	# In a Maildir: a message like any other, kept in the mbox written.
	mkdir -p md/cur md/new md/tmp
	msg b1@example.org 'Release notes' "$BODY1" >md/cur/1751364000.M1P1.host:2,S
	printf '\n\n' >md/cur/1751364100.M2P1.host:2,S
	msg b3@example.org 'Lunch' "$BODY2" >md/cur/1751364200.M3P1.host:2,S
	mhrun -f mail --stats md
	assert_status 0
	assert_stat records 3
	assert_stat unchecked 1
	[ "$(grep -c '^From ' "$T/out")" -eq 3 ] || fail "$(cat "$T/out")"
}

@test "a message file read as an mbox of one, starting with a From line that is no From_ line: read back, still its own message" {
	msg y1@example.org 'First' "$BODY1" >y.eml
	{
		echo 'From jane@example.org'
		msg y2@example.org 'Second' "$BODY2"
	} >x.eml
	mhrun -f mail --stats y.eml x.eml
	assert_status 0
	assert_stat records 2
	[ "$(grep -c '^From ' "$T/out")" -eq 2 ] || fail "$(grep '^From ' "$T/out")"
	grep -qx '>From jane@example.org' "$T/out"
	cp "$T/out" out.mbox
	mhrun -f mail --stats out.mbox
	assert_status 0
	assert_stat records 2
}

@test "a Maildir message over --max-message, in pieces: cut at line ends, each line quoted once, read back whole" {
	mkdir -p md/cur md/new md/tmp
	# "From " lines at and around the 256 KB reads, where a piece may end.
	python3 - <<'P'
line = "x" * 70 + "\n"
body = "From: a@example.org\nSubject: big\nMessage-ID: <big@example.org>\n\n"
for k in range(1, 4):
    while len(body) + len(line) < k * 262144 - 40:
        body += line
    body += "y" * (k * 262144 - len(body) - 18) + "middle of a line: "
    body += "From here on, part %d\n\n" % k
    body += "From someone@example.org Mon Jan  1 00:00:00 2024\n"
open("md/new/1.host", "w").write(body + "the end\n")
P
	mhrun -f mail --max-message 1K md
	assert_status 0
	! grep -q '>From here on' "$T/out" || fail "a '>' inside a line"
	[ "$(grep -c '^>From someone@example.org' "$T/out")" -eq 3 ] ||
	    fail "$(grep -n 'From someone' "$T/out")"
	cp "$T/out" out.mbox
	mhrun -f mail --stats --max-message 1G out.mbox
	assert_status 0
	assert_stat records 1
}

@test "Maildir: a message moved from new/ to cur/ while the run reads is read where it went; one deleted meanwhile is passed over, the rest read" {
	mkdir -p md/cur md/new md/tmp
	# cur/ sorts first: its FIFO holds the run until the folder changed.
	mkfifo md/cur/1751364000.M1P1.host:2,S
	msg d2@example.org 'Lunch' "$BODY2" >md/cur/1751364100.M2P1.host:2,S
	msg d3@example.org 'Images' "$BODY3" >md/cur/1751364200.M3P1.host:2,
	msg d4@example.org 'Release notes' "$BODY1" >md/new/1751364300.M4P1.host
	ln -s nowhere md/cur/1751364150.M5P1.host:2,
	"$MHFILTER" -f mail -a --stats md >"$T/out" 2>"$T/err" &
	local pid=$! i
	# Listed, and waiting in the FIFO's open for a writer.
	for i in $(seq 100); do
		[ "$(cat /proc/$pid/wchan 2>/dev/null)" = wait_for_partner ] &&
		    break
		sleep 0.1
	done
	# (Where wchan says nothing, 10 s is long enough to have listed.)
	rm md/cur/1751364100.M2P1.host:2,S
	mv md/new/1751364300.M4P1.host md/cur/1751364300.M4P1.host:2,S
	msg d1@example.org 'Notes' "$BODY1" >md/cur/1751364000.M1P1.host:2,S
	wait $pid || fail "status $?" "$(cat "$T/err")"
	grep -q 'records: 3$' "$T/err" || fail "not 3 records" "$(cat "$T/err")"
	grep -o 'Message-ID: <d[0-9]' "$T/out" | tr -d '\n' |
	    grep -q '^Message-ID: <d1Message-ID: <d3Message-ID: <d4$' ||
	    fail "not d1, d3, d4" "$(grep Message-ID "$T/out")"
	grep -q 'M2P1.host:2,S: gone since its folder was listed' "$T/err" ||
	    fail "the deleted message not said" "$(cat "$T/err")"
	grep -q 'M5P1.host:2,: gone since its folder was listed' "$T/err" ||
	    fail "the dangling link not said" "$(cat "$T/err")"
}

@test "an MH folder or a news spool: numbered files in numeric order" {
	mkdir spool
	msg n1@example.org 'Release notes' "$BODY1" >spool/9
	msg n2@example.org 'Re: Release notes' "$BODY1" >spool/10
	msg n3@example.org 'Lunch' "$BODY2" >spool/100
	echo 'not an article' >spool/.overview
	mhrun -f mail -p spool
	assert_status 0
	printf 'n1@example.org\tn2@example.org\t1.0000\n' | assert_out
}

@test "a single message on stdin: written as read, with the header" {
	msg s1@example.org 'Release notes' "$BODY1" >one
	mhrun -f mail --single -a <one
	assert_status 0
	{ echo 'X-Mhfilter: unique'; cat one; } | assert_out
	# A forged X-Mhfilter field (folded too) is replaced by the verdict;
	# one in the body stays.
	{ printf 'X-Mhfilter: duplicate;\n of=<forged@example.org>\n'; cat one;
	    echo 'X-Mhfilter: in the body'; } >forged
	mhrun -f mail --single -a <forged
	assert_status 0
	{ echo 'X-Mhfilter: unique'; cat one; echo 'X-Mhfilter: in the body'; } |
	    assert_out
	# Without --annotate the message is written as read.
	mhrun -f mail --single <forged
	assert_same forged "$T/out"
	mhrun -f mail --single nothing-here
	assert_status 1
}

@test "re-sent as an HTML alternative, or HTML only, with list tags and a footer" {
	{
		echo 'From a@example.org Tue Jul  1 10:00:00 2025'
		msg h1@example.org 'Release notes' "$BODY1"
		echo
		echo 'From list@example.org Tue Jul  1 10:05:00 2025'
		printf 'Message-ID: <h2@example.org>\nList-Id: <users.lists.example.org>\n'
		printf 'Subject: [users] Re: Release notes\nMIME-Version: 1.0\n'
		printf 'Content-Type: multipart/alternative; boundary="b1"\n\n'
		printf -- '--b1\nContent-Type: text/html; charset=utf-8\n\n'
		printf '<html><body><p>%s</p></body></html>\n' "$BODY1"
		printf -- '--b1\nContent-Type: text/plain; charset=iso-8859-1\n'
		printf 'Content-Transfer-Encoding: quoted-printable\n\n'
		printf '%s\n' "$BODY1" | sed 's/=/=3D/g'
		printf '\n_______________________________________________\n'
		printf 'users mailing list\nhttps://lists.example.org/listinfo/users\n'
		printf -- '--b1--\n'
		echo
		echo 'From c@example.org Tue Jul  1 10:10:00 2025'
		printf 'Message-ID: <h3@example.org>\nSubject: Release notes\n'
		printf 'MIME-Version: 1.0\nContent-Type: text/html\n\n'
		printf '<div>%s</div><style>p { color: red }</style>\n' "$BODY1"
	} >in.mbox
	mhrun -f mail -p in.mbox
	assert_status 0
	grep -q "^h1@example.org	h2@example.org	1.0000$" "$T/out"
	grep -q "	h3@example.org	" "$T/out"
}

@test "bad input: not a message, truncated MIME, NUL bytes" {
	{
		echo 'From a@example.org Tue Jul  1 10:00:00 2025'
		msg b1@example.org 'Release notes' "$BODY1"
		echo
		echo 'From junk Tue Jul  1 10:00:00 2025'
		printf '\0\0\0\0\n'
		echo
		echo 'From b@example.org Tue Jul  1 10:00:00 2025'
		printf 'Message-ID: <b3@example.org>\nSubject: Cut\n'
		printf 'MIME-Version: 1.0\nContent-Type: multipart/mixed; '
		printf 'boundary=zz\n\n--zz\nContent-Type: text/plain\n\n%s\n' \
		    "$BODY2"
		printf -- '--zz\nContent-Type: application/pdf\n'
		printf 'Content-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n'
		echo
		echo 'From c@example.org Tue Jul  1 10:00:00 2025'
		printf 'Message-ID: <b4@example.org>\nSubject: Nul\n\nA\0B\0 %s\n' \
		    "$BODY2"
		echo
		# Latin-1 bytes labelled UTF-8, then a multipart without its
		# boundary parameter: both read.
		echo 'From d@example.org Tue Jul  1 10:00:00 2025'
		printf 'Message-ID: <b5@example.org>\nSubject: Caf\xe9\n'
		printf 'Content-Type: text/plain; charset=utf-8\n\n'
		printf 'Le caf\xe9 ferme \xe0 midi pour travaux, d\xe9sol\xe9s.\n'
		echo
		echo 'From e@example.org Tue Jul  1 10:00:00 2025'
		printf 'Message-ID: <b6@example.org>\nSubject: Café\n'
		printf 'MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n'
		printf 'Le café ferme à midi pour travaux, désolés.\n'
	} >in.mbox
	mhrun -f mail --stats -p in.mbox
	assert_status 0
	assert_stat records 6
	assert_stat unchecked 1
	assert_stat invalid 0
	# The Latin-1 text became UTF-8: the same as the other.
	grep -q "^b5@example.org	b6@example.org	" "$T/out" || fail "$(cat "$T/out")"
	# The position is the line of the message's From_ line.
	assert_err_has "in.mbox:12: not a mail message"
	assert_err_has "passed through unchecked"
	[ "$(sed -n 12p in.mbox)" = 'From junk Tue Jul  1 10:00:00 2025' ]
	# The truncated one was read: its text is the NUL one's, nearly (its
	# truncated attachment's digest aside).
	mhrun -f mail -t 0.6 -p in.mbox
	grep -q "^b3@example.org	b4@example.org	" "$T/out" || fail "$(cat "$T/out")"
	# Nothing is lost: every message is written, the junk one as read,
	# under --on-bad-input fail too (mail that cannot be judged is not bad
	# input: it is delivered).
	# --annotate says why in a header field, where there is a header to
	# add one to; the junk has none, and is written unchanged.
	{ cat in.mbox; echo; } >expected
	for policy in skip fail; do
		mhrun -f mail --on-bad-input "$policy" -a in.mbox
		assert_status 0
		grep -av '^X-Mhfilter: ' "$T/out" >got
		assert_same expected got
		[ "$(grep -c '^X-Mhfilter: ' "$T/out")" -eq 5 ]
	done
	# Without it, the unique ones: all but b6, b5's copy, each with its
	# blank line.
	mhrun -f mail in.mbox
	assert_status 0
	awk '/^From / { n++ } n != 6' in.mbox >expected
	assert_same expected "$T/out"
}

@test "a message over a --max-message smaller than a separator, from a pipe in pieces" {
	# Fewer bytes read than a separator's start: the message still comes
	# out whole, unjudged.
	(printf 'From '; msg tiny@example.org 'Tiny' x) >sent
	{ printf '>'; cat sent; echo; } >expected
	for max in 1 3 6; do
		mhrun -f mail --max-message "$max" --stats < <(printf 'From '
		    sleep 0.2; msg tiny@example.org 'Tiny' x)
		assert_status 0
		assert_stat records 1
		assert_stat unchecked 1
		assert_err_has "stdin:1: over --max-message: passed through"
		# As read, and an mbox's blank line after it; its first line
		# is no From_ line: the message's, quoted, under one of ours.
		head -n 1 "$T/out" | grep -q '^From MAILER-DAEMON ' ||
		    fail "$(head -n 2 "$T/out")"
		tail -n +2 "$T/out" >body
		assert_same expected body
	done
}

# A message of about 51 MB, a 38 MB attachment, then a small one whose text
# is the big one's; into in.mbox.
make_big_mbox() {
	{
		echo 'From a@example.org Tue Jul  1 10:00:00 2025'
		msg big@example.org 'Big' "$BODY1" 'MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=zz'
		printf -- '--zz\nContent-Type: text/plain\n\n%s\n' "$BODY1"
		printf -- '--zz\nContent-Type: application/octet-stream\n'
		printf 'Content-Disposition: attachment; filename=x.bin\n'
		printf 'Content-Transfer-Encoding: base64\n\n'
		head -c 38000000 /dev/zero | base64
		printf -- '--zz--\n\n'
		echo 'From b@example.org Tue Jul  1 10:00:00 2025'
		msg small@example.org 'Release notes' "$BODY1"
	} >in.mbox
	[ "$(stat -c %s in.mbox)" -gt 50000000 ]
}

@test "a message over --max-message is passed through whole, in order, unjudged; a 50 MB attachment is judged on its text" {
	make_big_mbox
	mhrun -f mail --max-message 1M --stats in.mbox
	assert_status 0
	assert_stat records 2
	assert_stat unchecked 1
	assert_err_has "in.mbox:1: over --max-message: passed through unchecked"
	# Both out, byte for byte, with the final blank line of an mbox.
	{ cat in.mbox; echo; } >expected
	assert_same expected "$T/out"
	# It costs the limit, not the message (three times that with ASan's
	# redzones and quarantine).
	limit=40000
	if ldd "$MHFILTER" 2>/dev/null | grep -q libasan; then
		limit=120000
	fi
	[ "$(stat_of max_rss_kb)" -lt "$limit" ] ||
	    fail "max_rss_kb $(stat_of max_rss_kb) for --max-message 1M"
	# Under --annotate, the reason in its header field, the rest as read.
	mhrun -f mail --max-message 1M -a in.mbox
	assert_status 0
	[ "$(sed -n 2p "$T/out")" = 'X-Mhfilter: unchecked; reason=too-large' ]
	grep -v '^X-Mhfilter: ' "$T/out" >got
	assert_same expected got
	# One message on stdin (--single, the mark filter) and -z: the same.
	sed -n '2,/^--zz--$/p' in.mbox >one
	mhrun -f mail --single -a --max-message 1M <one
	assert_status 0
	{ echo 'X-Mhfilter: unchecked; reason=too-large'; cat one; } >expected1
	assert_same expected1 "$T/out"
	{ cat one; printf '\0'; } >one.z
	mhrun -f mail -z --max-message 1M --stats one.z
	assert_status 0
	assert_stat unchecked 1
	assert_same one.z "$T/out"
	# --duplicates writes the duplicates only: not it.
	mhrun -f mail --max-message 1M -D in.mbox
	assert_status 0
	[ ! -s "$T/out" ]
	# The default limit (256M): the text is the plain part and the
	# attachment's digest, and the small one, the plain part alone, its
	# near-duplicate.
	mhrun -f mail --stats -t 0.6 -p in.mbox
	assert_status 0
	assert_stat unchecked 0
	grep -q "^big@example.org	small@example.org	" "$T/out"
	# Memory: the message, the reader's buffer and the batch's copy, not
	# the decoded attachment on top (under 4 times the message; 8 with
	# ASan's redzones and quarantine).
	limit=200000
	if ldd "$MHFILTER" 2>/dev/null | grep -q libasan; then
		limit=400000
	fi
	[ "$(stat_of max_rss_kb)" -lt "$limit" ] ||
	    fail "max_rss_kb $(stat_of max_rss_kb), limit $limit"
	# A text over --max-bytes is not judged either, and is written.
	mhrun -f mail --max-bytes 100 --stats in.mbox
	assert_status 0
	assert_stat unchecked 2
	assert_err_has "in.mbox:1: its text is over --max-bytes"
	assert_same expected "$T/out"
}

@test "--mda: exit 1 for a new message, 0 for a duplicate; usage errors" {
	msg a1@example.org 'Release notes' "$BODY1" >a
	msg a2@example.org 'Re: Release notes' "$BODY1" \
	    'Received: from elsewhere' >b
	msg a3@example.org 'Lunch' "$BODY2" >c
	mhrun -f mail --mda --db db <a
	assert_status 1
	[ ! -s "$T/out" ]
	mhrun -f mail --mda --db db <b
	assert_status 0
	mhrun -f mail --mda --db db <c
	assert_status 1
	# The very same message delivered again is a duplicate too.
	mhrun -f mail --mda --db db <a
	assert_status 0
	mhrun -f mail --mda <a
	assert_status 2
	assert_err_has "--mda needs --db"
	mhrun -f mail --mda -a --db db <a
	assert_status 2
	mhrun --single <a
	assert_status 2
}

@test "--retain goes by the Date of a message; one without a Date is as old as its reading" {
	msg old@example.org 'Old' "$BODY1" | sed 's/^Date: .*/Date: Mon, 1 Jan 2001 10:00:00 +0000/' >old
	msg new@example.org 'New' "$BODY2" | sed '/^Date: /d' >new
	mhrun -f mail --db db old new
	assert_status 0
	mhrun --db db --info
	grep -q '^documents: 2$' "$T/out" || fail "$(cat "$T/out")"
	grep -q '^oldest: 2001-01-01T10:00:00Z$' "$T/out" || fail "$(cat "$T/out")"
	mhrun --db db --expire --retain 30d
	assert_status 0
	mhrun --db db --info
	grep -q '^documents: 1$' "$T/out" || fail "$(cat "$T/out")"
}

@test "daemon: -f mail reads NUL-terminated messages, answers by Message-ID, writes mbox" {
	msg k1@example.org 'Release notes' "$BODY1" >a
	msg k2@example.org 'Re: Release notes' "$BODY1" 'Received: from x' >b
	{ cat a; printf '\0'; cat b; printf '\0'; } >in
	start_daemon -f mail --listen "unix:$T/sock" -o out.mbox
	dsend "unix:$T/sock" in >replies
	printf 'unique\tk1@example.org\nduplicate\tk2@example.org\tk1@example.org\t1.0000\n' \
	    >expected
	assert_same expected replies
	stop_daemon
	[ "$(grep -c '^From MAILER-DAEMON ' out.mbox)" -eq 1 ]
	grep -q '^Message-ID: <k1@example.org>' out.mbox
}

@test "every case through the mbox pipe: the re-sent copy in --duplicates' output, every other message in order as read" {
	make_cases
	for f in cases/*; do
		echo 'From sender@example.org Tue Jul  1 10:00:00 2025'
		cat "$f"
		echo
	done >in.mbox
	mhrun -f mail --db db --stats in.mbox
	assert_status 0
	assert_stat records 9
	assert_stat duplicates 1
	assert_stat unchecked 1
	# All but the fourth, each with its From_ line and blank line.
	awk '/^From sender/ { n++ } n != 4' in.mbox >expected
	assert_same expected "$T/out"
	mhrun -f mail --db db2 -D in.mbox
	assert_status 0
	{ echo 'From sender@example.org Tue Jul  1 10:00:00 2025'
	  cat cases/4-resent; echo; } >expected
	assert_same expected "$T/out"
}

@test "--duplicates-to: the re-sent copy quarantined in an mbox or a Maildir in the same pass, with its field; every other message out" {
	make_cases
	for f in cases/*; do
		echo 'From sender@example.org Tue Jul  1 10:00:00 2025'
		cat "$f"
		echo
	done >in.mbox
	awk '/^From sender/ { n++ } n != 4' in.mbox >expected
	mhrun -f mail --db db --duplicates-to q.mbox in.mbox
	assert_status 0
	assert_same expected "$T/out"
	[ "$(grep -c '^From sender' q.mbox)" -eq 1 ]
	grep -q '^X-Mhfilter: duplicate; of=<c1@example.org>; similarity=1.00' q.mbox
	grep -v '^X-Mhfilter: ' q.mbox >got
	{ echo 'From sender@example.org Tue Jul  1 10:00:00 2025'
	  cat cases/4-resent; echo; } >want
	assert_same want got
	# Appended: a second run adds to it.
	mhrun -f mail --db db2 --duplicates-to q.mbox in.mbox
	assert_status 0
	[ "$(grep -c '^From sender' q.mbox)" -eq 2 ]
	# A Maildir (made if missing): the message as sent, a file of its
	# own in new/, without the From_ line.
	mhrun -f mail --db db3 --duplicates-to quarantine/ in.mbox
	assert_status 0
	assert_same expected "$T/out"
	[ "$(ls quarantine/new | wc -l)" -eq 1 ]
	[ -d quarantine/cur ] && [ -d quarantine/tmp ]
	[ "$(ls quarantine/tmp | wc -l)" -eq 0 ]
	grep -av '^X-Mhfilter: ' quarantine/new/* >got
	assert_same cases/4-resent got
	# mboxrd quoting of the input undone in the Maildir.
	{ echo 'From a@example.org Tue Jul  1 10:00:00 2025'
	  msg q1@example.org 'Quoted' "$BODY2"$'\n\n>From the kitchen.'
	  echo
	  echo 'From b@example.org Tue Jul  1 10:00:00 2025'
	  msg q2@example.org 'Quoted' "$BODY2"$'\n\n>From the kitchen.'
	} >quoted.mbox
	mhrun -f mail --duplicates-to qq/ quoted.mbox
	assert_status 0
	grep -q '^From the kitchen\.$' qq/new/* || fail "$(cat qq/new/*)"
	# Not with another output mode; a path that cannot be made.
	mhrun -f mail -a --duplicates-to q.mbox in.mbox
	assert_status 2
	assert_err_has "--duplicates-to goes with"
	mhrun -f mail --duplicates-to /nonexistent/dir/ in.mbox
	assert_status 1
	assert_err_has "--duplicates-to /nonexistent/dir"
	[ ! -s "$T/out" ]
}

@test "--mail-allow and --mail-min-text: such mail is never judged, and passes" {
	msg a1@example.org 'Weekly status' "$BODY1" >a
	msg a2@example.org 'Weekly status' "$BODY1" \
	    'List-Id: Announcements <announce.example.org>' >b
	msg a3@example.org 'Weekly status' "$BODY1" >c
	# b and c are copies of a, but b is from an allowed list, and c...
	sed -i 's/^From: .*/From: Bob <bob@Trusted.example.com>/' c
	mhrun -f mail --stats -a --mail-allow list-id:announce.example.org \
	    --mail-allow from:@trusted.example.com a b c
	assert_status 0
	assert_stat duplicates 0
	assert_stat unchecked 2
	[ "$(grep -c '^X-Mhfilter: unchecked; reason=allowed$' "$T/out")" -eq 2 ]
	# Without the rules, both are duplicates.
	mhrun -f mail --stats a b c
	assert_stat duplicates 2
	# To: and Delivered-To: are the recipient's.
	mhrun -f mail --stats --mail-allow to:users@lists.example.org a b
	assert_stat unchecked 2
	# Short replies in one thread are not copies of each other ...
	msg t1@example.org 'Re: Weekly status' 'Thanks!' >t1
	msg t2@example.org 'Re: Weekly status' 'Thanks!' \
	    'From: Carol <carol@example.org>' >t2
	mhrun -f mail --stats -a t1 t2
	assert_status 0
	assert_stat duplicates 0
	assert_stat unchecked 2
	[ "$(grep -c '^X-Mhfilter: unchecked; reason=too-short$' "$T/out")" -eq 2 ]
	# ... unless asked; the limit itself is judged.
	mhrun -f mail --stats --mail-min-text 0 t1 t2
	assert_stat duplicates 1
	mhrun -f mail --stats --mail-min-text 8 t1 t2
	assert_stat duplicates 1
	mhrun -f mail --stats --mail-min-text 9 t1 t2
	assert_stat duplicates 0
	# A rule that is not one.
	for bad in list:x from: 'to:a b' nothing; do
		mhrun -f mail --mail-allow "$bad" a
		assert_status 2
		assert_err_has "use list-id:ID, from:ADDRESS or to:ADDRESS"
	done
}

@test "--pairs: a message delivered again with its Message-ID pairs with itself" {
	msg r1@example.org 'Weekly status' "$BODY1" >a
	mhrun -f mail --db db -p a
	assert_status 0
	[ ! -s "$T/out" ]
	mhrun -f mail --db db -p a
	assert_status 0
	printf 'r1@example.org\tr1@example.org\t1.0000\n' | assert_out
	mhrun --mda --db db <a
	assert_status 0
	mhrun -f mail --db db -a a
	grep -q '^X-Mhfilter: duplicate; seen; of=<r1@example.org>; similarity=1.00$' "$T/out"
	# -v: a line a message, with its Message-ID and verdict (a delivery
	# agent's log); none without.
	mhrun -v --mda --db db <a
	assert_err_has "stdin:1: <r1@example.org>: seen, a duplicate of <r1@example.org>, similarity 1.00"
	msg r2@example.org 'Other' "$BODY2" >b
	mhrun -v --mda --db db <b
	assert_status 1
	assert_err_has "stdin:1: <r2@example.org>: unique"
	mhrun --mda --db db <a
	[ ! -s "$T/err" ]
}

@test "every case through --mda: 0 for the re-sent copy only" {
	make_cases
	for f in cases/*; do
		mhrun --mda --db db <"$f"
		case "$f" in
		*resent) assert_status 0 ;;
		*) assert_status 1 ;;
		esac
	done
	# --print-verdict: the word, and 0 (Sieve's execute :output).
	mhrun --mda --print-verdict --db db <cases/4-resent
	assert_status 0
	[ "$(cat "$T/out")" = duplicate ]
	mhrun --mda --print-verdict --db db <cases/7-no-header
	assert_status 0
	[ "$(cat "$T/out")" = unchecked ]
	msg c8@example.org 'New' 'A message of its own, about nothing that came
before it: the printer on the second floor is fixed.' >new
	mhrun --mda --print-verdict --db db <new
	assert_status 0
	[ "$(cat "$T/out")" = unique ]
	# No text to compare: "empty", as -a's field says; no message at all
	# is not judged.
	printf 'From: a@example.org\nMessage-ID: <e1@example.org>\n\n' >notext
	mhrun --mda --print-verdict --db db <notext
	assert_status 0
	[ "$(cat "$T/out")" = empty ] || fail "$(cat "$T/out")"
	mhrun -f mail --single -a <notext
	assert_status 0
	grep -qx 'X-Mhfilter: empty' "$T/out"
	: >nothing
	mhrun --mda --print-verdict --db db <nothing
	assert_status 0
	[ "$(cat "$T/out")" = unchecked ] || fail "$(cat "$T/out")"
	mhrun --print-verdict -f mail <new
	assert_status 2
	assert_err_has "--print-verdict goes with --mda"
}

# The contrib procmail recipes, with this mhfilter and a Maildir of the
# test's own, into rc; $1 "mark" for the marking filter instead.
procmail_rc() {
	sed -e "s|^MHFILTER=.*|MHFILTER=$MHFILTER|" \
	    -e "s|^MAILDIR=.*|MAILDIR=$T/mail|" \
	    -e "s|^MHFILTER_DB=.*|MHFILTER_DB=$T/db|" \
	    "$TESTDIR/../contrib/procmailrc" >rc
	if [ "${1:-}" = mark ]; then
		# The filing recipe out, the marking one in.
		awk '/^:0 HB$/ { skip = 3 } skip > 0 { skip--; next }
		    /^# :0/ { on = 1 } on && /^#( |$)/ { sub(/^# ?/, "") } 1' \
		    rc >rc.mark && mv rc.mark rc
		grep -q '^| \$MHFILTER -f mail --single --annotate' rc ||
		    fail "no marking recipe:" "$(cat rc)"
	fi
	printf 'LOGFILE=%s/log\n' "$T" >>rc
}

@test "procmail with the contrib recipe: only the re-sent copy filed as a duplicate, every other message delivered as sent" {
	command -v procmail >/dev/null || skip "procmail is not installed (Debian package procmail)"
	make_cases
	mkdir mail
	procmail_rc
	for m in cases/*; do
		timeout 60 procmail -m rc <"$m" || fail "procmail $m: $?" "$(cat log)"
	done
	assert_delivered mail/inbox/new mail/duplicates/new
}

@test "procmail with the contrib marking filter: every message whole, marked; the re-sent copy filed" {
	command -v procmail >/dev/null || skip "procmail is not installed (Debian package procmail)"
	make_cases
	mkdir mail
	procmail_rc mark
	for m in cases/*; do
		timeout 60 procmail -m rc <"$m" || fail "procmail $m: $?" "$(cat log)"
	done
	assert_delivered mail/inbox/new mail/duplicates/new
	grep -l '^X-Mhfilter: unchecked; reason=' mail/inbox/new/* >/dev/null &&
	    fail "the no-header message got a field"
	[ "$(grep -l '^X-Mhfilter: unique$' mail/inbox/new/* | wc -l)" -eq 7 ]
	grep -q '^X-Mhfilter: duplicate; of=<c1@example.org>' mail/duplicates/new/*
}

@test "maildrop with the contrib recipe: only the re-sent copy filed as a duplicate, every other message delivered as sent" {
	command -v maildrop >/dev/null || skip "maildrop is not installed (Debian package maildrop)"
	make_cases
	mkdir -p Maildir/cur Maildir/new Maildir/tmp
	mkdir -p Maildir/.Duplicates/cur Maildir/.Duplicates/new \
	    Maildir/.Duplicates/tmp
	# maildrop takes $HOME from the password file, not the environment.
	{ sed -e "s|^MHFILTER=.*|MHFILTER=\"$MHFILTER\"|" -e "s|\\\$HOME|$T|g" \
	    "$TESTDIR/../contrib/mailfilter"; echo "to \"$T/Maildir/\""; } >mf
	grep -q "MHFILTER_DB=\"$T/.mhfilter\"" mf || fail "$(cat mf)"
	chmod 600 mf
	for m in cases/*; do
		timeout 60 maildrop mf <"$m" >>log 2>&1 ||
		    fail "maildrop $m: $?" "$(cat log)"
	done
	assert_delivered Maildir/new Maildir/.Duplicates/new
}

@test "mbox: a compressed mailbox is read like the plain one" {
	make_mbox
	gzip -c in.mbox >in.mbox.gz
	mhrun -f mail --stats in.mbox
	cp "$T/out" plain.out
	mhrun -f mail --stats in.mbox.gz
	assert_status 0
	assert_stat records 3
	assert_stat duplicates 1
	assert_same plain.out "$T/out"
	xz -c in.mbox | mhf -f mail >xz.out
	assert_same plain.out xz.out
}

@test "Sieve with the contrib script, through Pigeonhole's vnd.dovecot.execute: only the re-sent copy filed, every other message delivered as sent" {
	local s="$TESTDIR/../contrib/mhfilter.sieve" m

	command -v sieve-test >/dev/null ||
	    skip "sieve-test is not installed (optional: Debian package dovecot-sieve)"
	# The wrapper and the settings that the script's comments give, with
	# this mhfilter and a program directory of the test's own; a
	# configuration file of the test's own, not /etc/dovecot's.
	mkdir bin home
	sed -n 's/^#\t//p' "$s" | sed -n '1,2p' |
	    sed "s|^exec mhfilter |exec $MHFILTER |" >bin/mhfilter-mda
	chmod 755 bin/mhfilter-mda
	grep -q "^exec $MHFILTER -f mail --mda" bin/mhfilter-mda ||
	    fail "no wrapper in $s:" "$(cat bin/mhfilter-mda)"
	{
		echo 'plugin {'
		sed -n 's/^#\t\(sieve_[a-z_]* = \)/\1/p' "$s" |
		    sed "s|^\(sieve_execute_bin_dir = \).*|\1$T/bin|"
		echo '}'
		echo "mail_location = maildir:$T/home/Maildir"
	} >dovecot.conf
	[ "$(grep -c '^sieve_' dovecot.conf)" -eq 3 ] ||
	    fail "settings missing in $s:" "$(cat dovecot.conf)"
	cp "$s" home/
	# As root, Dovecot delivers (and runs the program) as another user.
	if [ "$(id -u)" -eq 0 ]; then
		setpriv --reuid=nobody --regid=nogroup --clear-groups \
		    "$MHFILTER" --version >/dev/null 2>&1 ||
		    skip "nobody cannot run $MHFILTER (in a private directory?)"
		printf 'mail_uid = nobody\nmail_gid = %s\n' \
		    "$(id -gn nobody)" >>dovecot.conf
		chmod 755 "$T"
		chown -R nobody home
	fi
	make_cases
	for m in cases/*; do
		HOME="$T/home" timeout 60 sieve-test -c dovecot.conf -e \
		    -l "maildir:$T/home/Maildir" home/mhfilter.sieve "$m" \
		    >>log 2>&1 || fail "sieve-test $m: $?" "$(cat log)"
	done
	# Dovecot stores with the line ends it was given.
	assert_delivered home/Maildir/new home/Maildir/.Duplicates/new
	# No execution was logged as failed (the verdict is the output).
	grep -i 'fail' log && fail "$(cat log)"
	true
}
