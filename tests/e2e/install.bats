#!/usr/bin/env bats
# make install: everything a service needs, with this configuration's
# paths in the units, which systemd-analyze verifies; make uninstall
# removes it all.  The build directory is that of $MHFILTER.

load helpers

# A make in the build directory, outside the make check that runs us.
bmake() {
	env -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES -u MAKELEVEL \
	    make -s -C "$BUILDDIR" "$@"
}

# The value of a variable of the build's Makefile, such as bindir.
mkvar() {
	bmake --eval 'print-var: ; @echo $('"$1"')' print-var
}

# Install once, into a DESTDIR of this file's.
setup_file() {
	BUILDDIR="$(cd "$(dirname "$MHFILTER")" && pwd)"
	INST="$BATS_FILE_TMPDIR/inst"
	export BUILDDIR INST
	bmake install DESTDIR="$INST" >"$BATS_FILE_TMPDIR/install.log" 2>&1 ||
	    fail "make install failed:" "$(cat "$BATS_FILE_TMPDIR/install.log")"
}

# Where make install put things, as variables named as in the Makefile.
dirs() {
	bindir="$(mkvar bindir)"
	sysconfdir="$(mkvar sysconfdir)"
	mandir="$(mkvar mandir)"
	unitdir="$(mkvar systemdsystemunitdir)"
	sysusersdir="$(mkvar sysusersdir)"
	compdir="$(mkvar bashcompletiondir)"
	pkglibdir="$(mkvar pkglibdir)"
}

@test "make install: binary, modules (mail, TLS), man pages, units, timer, user, configuration, completion" {
	dirs
	for f in "$bindir/mhfilter" "$pkglibdir/mhfilter-mail.so" \
	    "$pkglibdir/mhfilter-tls.so" \
	    "$mandir/man1/mhfilter.1" \
	    "$mandir/man5/mhfilter.conf.5" "$unitdir/mhfilter.service" \
	    "$unitdir/mhfilter.socket" "$unitdir/mhfilter-expire.service" \
	    "$unitdir/mhfilter-expire.timer" "$sysusersdir/mhfilter.conf" \
	    "$unitdir/mhfilter-milter.service" \
	    "$sysconfdir/mhfilter.conf" "$compdir/mhfilter"; do
		[ -f "$INST$f" ] || fail "$f not installed:" "$(find "$INST" -type f)"
	done
	[ -x "$INST$bindir/mhfilter" ]
	# Paths substituted, none left over.
	grep -qx "ExecStart=$bindir/mhfilter --config $sysconfdir/mhfilter.conf" \
	    "$INST$unitdir/mhfilter.service" || fail "ExecStart of mhfilter.service"
	grep -q "^ExecStart=$bindir/mhfilter --config $sysconfdir/mhfilter.conf --expire" \
	    "$INST$unitdir/mhfilter-expire.service" || fail "ExecStart of the expiry"
	grep -q "^ExecStart=$bindir/mhfilter --milter " \
	    "$INST$unitdir/mhfilter-milter.service" || fail "ExecStart of the milter"
	if grep -n '@[a-z_]*@' "$INST$unitdir"/mhfilter* \
	    "$INST$sysconfdir/mhfilter.conf"; then
		fail "unsubstituted paths"
	fi
	grep -q '^u mhfilter ' "$INST$sysusersdir/mhfilter.conf"
}

@test "the installed units pass systemd-analyze verify" {
	command -v systemd-analyze >/dev/null ||
	    skip "systemd-analyze is not installed (Debian package systemd)"
	dirs
	# Verified in a copy of the installation with the system's targets
	# and slices, so that ExecStart is looked for where it was installed;
	# the units in its /etc/systemd/system, where systemd looks whatever
	# the unit directory (make distcheck's is under its prefix).
	cp -a "$INST" root
	units=root/etc/systemd/system
	mkdir -p "$units" root/lib/systemd/system root/bin
	cp /lib/systemd/system/*.target /lib/systemd/system/*.slice \
	    root/lib/systemd/system/
	cp "$INST$unitdir"/mhfilter* "$units"/
	cp /bin/kill root/bin/kill
	for u in mhfilter.service mhfilter.socket mhfilter-expire.service \
	    mhfilter-expire.timer mhfilter-milter.service; do
		systemd-analyze verify --man=no --root="$T/root" \
		    "$units/$u" >out 2>&1 || fail "$u:" "$(cat out)"
		[ ! -s out ] || fail "$u:" "$(cat out)"
	done
	# The expiry's drop-in for a Redis password, as its comment gives it.
	mkdir "$units/mhfilter-expire.service.d"
	sed -n 's/^#   //p' "$units/mhfilter-expire.service" \
	    >"$units/mhfilter-expire.service.d/redis.conf"
	grep -q '^ExecStart=.* --expire --redis-password-file %d/redis-password$' \
	    "$units/mhfilter-expire.service.d/redis.conf" ||
	    fail "$(cat "$units/mhfilter-expire.service.d/redis.conf")"
	systemd-analyze verify --man=no --root="$T/root" \
	    "$units/mhfilter-expire.service" >out 2>&1 || fail "drop-in:" "$(cat out)"
	[ ! -s out ] || fail "drop-in:" "$(cat out)"
	# A Redis index ("db = redis://...") is reached over IP, local or
	# not: the expiry, like the daemon, must not be cut off from it.
	for u in mhfilter.service mhfilter-expire.service; do
		grep -qx 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' \
		    "$units/$u" || fail "$u: no IP sockets"
		if grep -Eq '^(PrivateNetwork=yes|IPAddressDeny=)' "$units/$u"; then
			fail "$u: no network"
		fi
	done
	# And it can fail: a unit whose binary is elsewhere does not pass.
	sed -i "s|^ExecStart=$bindir/|ExecStart=/nonexistent/|" \
	    "$units/mhfilter.service"
	if systemd-analyze verify --man=no --root="$T/root" \
	    "$units/mhfilter.service" >out 2>&1; then
		fail "verify passed"
	fi
	grep -q 'not executable' out
}

@test "hardening: systemd-analyze security exposure at most 1.2 (1.8 before packaging)" {
	command -v systemd-analyze >/dev/null ||
	    skip "systemd-analyze is not installed (Debian package systemd)"
	dirs
	for u in mhfilter.service mhfilter-expire.service \
	    mhfilter-milter.service; do
		systemd-analyze security --offline=yes "$INST$unitdir/$u" >out 2>&1 ||
		    fail "$u:" "$(cat out)"
		level="$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' out)"
		[ -n "$level" ] || fail "no level:" "$(cat out)"
		awk -v l="$level" 'BEGIN { exit !(l <= 1.2) }' ||
		    fail "$u: exposure $level"
	done
}

@test "one socket path, not world-writable: /run/mhfilter/sock, 0660, group mhfilter" {
	dirs
	s="$INST$unitdir/mhfilter.socket"
	grep -qx 'ListenStream=/run/mhfilter/sock' "$s"
	grep -qx 'SocketMode=0660' "$s"
	grep -qx 'SocketGroup=mhfilter' "$s"
	# No TCP port by default: any local user could reach it.
	! grep -q '^ListenStream=.*:' "$s" || fail "a TCP listener by default"
	grep -qx 'User=mhfilter' "$INST$unitdir/mhfilter.service"
	grep -qx 'RuntimeDirectoryPreserve=yes' "$INST$unitdir/mhfilter.service"
	# The documentation says the same path, and no other.
	src="$TESTDIR/.."
	if grep -rn 'mhfilter\.sock\b' "$src/README.md" "$src/man" \
	    "$src/contrib" "$INST$sysconfdir/mhfilter.conf"; then
		fail "another socket path"
	fi
	grep -q '/run/mhfilter/sock' "$src/man/mhfilter.conf.5"
	grep -q '/run/mhfilter/sock' "$INST$sysconfdir/mhfilter.conf"
}

@test "the milter's unit: the socket in Postfix's queue directory, writable there alone, reachable by the group postfix only" {
	dirs
	u="$INST$unitdir/mhfilter-milter.service"
	grep -q '^ExecStart=.* --milter unix:/var/spool/postfix/mhfilter/milter ' "$u"
	grep -q '^ExecStart=.* --db /var/lib/mhfilter-milter/index' "$u"
	grep -qx 'StateDirectory=mhfilter-milter' "$u"
	grep -qx 'ProtectSystem=strict' "$u"
	grep -qx 'ReadWritePaths=-/var/spool/postfix/mhfilter' "$u"
	grep -qx 'UMask=0007' "$u"
	grep -qx 'User=mhfilter' "$u"
	grep -qx 'Type=notify' "$u"
	# Its comment, mhfilter(1) and the README make the directory the same
	# way: set-group-ID postfix, so that the socket is the group's.
	src="$TESTDIR/.."
	for f in "$u" "$src/man/mhfilter.1" "$src/README.md"; do
		grep -q 'install -d -o mhfilter -g postfix -m 2750 /var/spool/postfix/mhfilter' \
		    "$f" || fail "$f: no directory made"
	done
}

@test "the example configuration is accepted, with every commented key set too" {
	dirs
	conf="$INST$sysconfdir/mhfilter.conf"
	mhf --config "$conf" --explain >out 2>err || fail "$(cat err)"
	grep -q '^perms 128' out
	# Every "#key = value" line uncommented (jsonl, for the field keys),
	# with paths here.
	sed -e 's/^#\([a-z-]* = \)/\1/' -e 's/^format = line$/format = jsonl/' \
	    -e "s|/var/lib/mhfilter|$T|; s|/var/log/mhfilter|$T|; s|/run/mhfilter|$T|" \
	    "$conf" >all.conf
	[ "$(grep -c '^[a-z-]* = ' all.conf)" -ge 30 ] || fail "$(cat all.conf)"
	mhf --config all.conf --explain >out 2>err || fail "$(cat err)"
	grep -q '^perms 128' out
}

@test "bash completion: every long option of --help, and the words of -f" {
	set -o pipefail
	dirs
	comp="$INST$compdir/mhfilter"
	mhf --help | grep -o -- '--\(\[no-\]\)\?[a-z][a-z-]*' | sed 's/\[no-\]//' |
	    sort -u >help
	[ "$(wc -l <help)" -ge 50 ] || fail "$(cat help)"
	run bash -c '. "$1"; COMP_WORDS=(mhfilter --); COMP_CWORD=1; _mhfilter
	    printf "%s\n" "${COMPREPLY[@]}"' sh "$comp"
	assert_status 0
	printf '%s\n' "$output" | sort -u >offered
	missing="$(comm -23 help offered)"
	[ -z "$missing" ] || fail "not completed:" "$missing"
	run bash -c '. "$1"; COMP_WORDS=(mhfilter -f ""); COMP_CWORD=2; _mhfilter
	    echo "${COMPREPLY[*]}"' sh "$comp"
	[ "$output" = "line tsv jsonl mail" ] || fail "$output"
}

@test "make uninstall removes it all, and keeps a configuration that was changed" {
	bmake install DESTDIR="$T/i" >log 2>&1 || fail "$(cat log)"
	bmake uninstall DESTDIR="$T/i" >log 2>&1 || fail "$(cat log)"
	left="$(find "$T/i" -type f)"
	[ -z "$left" ] || fail "left:" "$left"
	# A changed configuration is neither replaced nor removed.
	dirs
	bmake install DESTDIR="$T/i" >log 2>&1 || fail "$(cat log)"
	echo 'threshold = 0.9' >>"$T/i$sysconfdir/mhfilter.conf"
	cp "$T/i$sysconfdir/mhfilter.conf" changed
	bmake install DESTDIR="$T/i" >log 2>&1 || fail "$(cat log)"
	grep -q 'exists: kept' log
	cmp changed "$T/i$sysconfdir/mhfilter.conf"
	bmake uninstall DESTDIR="$T/i" >log 2>&1 || fail "$(cat log)"
	[ "$(find "$T/i" -type f)" = "$T/i$sysconfdir/mhfilter.conf" ] ||
	    fail "left:" "$(find "$T/i" -type f)"
}

@test "the expiry unit's command expires with the service's configuration: its index and limits, one place" {
	dirs
	u="$INST$unitdir/mhfilter-expire.service"
	grep -qx 'Type=oneshot' "$u"
	grep -qx 'OnCalendar=daily' "$INST$unitdir/mhfilter-expire.timer"
	printf '{"id":"old","text":"a document from long ago, to expire","time":"2001-01-01T00:00:00Z"}\n{"id":"new","text":"a document of today that stays in the index"}\n' |
	    mhf -f jsonl --time-field time -d db >/dev/null
	cmd="$(sed -n 's/^ExecStart=//p' "$u")"
	read -r -a argv <<<"$cmd"
	[ "${argv[0]}" = "$bindir/mhfilter" ]
	argv[0]="$MHFILTER"
	# The installed configuration as an admin sets it up for the
	# service: its index, a retention, and the daemon's own keys.
	conf="$INST$sysconfdir/mhfilter.conf"
	[ "${argv[2]}" = "$sysconfdir/mhfilter.conf" ]
	{ sed -e "s|^db = .*|db = $T/db|" "$conf"
	  printf 'format = jsonl\nlisten = unix:%s/sock\nhttp = 127.0.0.1:7799\n' "$T"
	  printf 'retain = 30d\n'; } >conf
	argv[2]="$T/conf"
	timeout 60 "${argv[@]}" >out 2>err || fail "${argv[*]}:" "$(cat err)"
	grep -qx 'expired: 1' out || fail "$(cat out)"
	[ ! -e "$T/sock" ]
	# Without a limit there, it says what to set.
	sed '/^retain = /d' conf >conf2
	argv[2]="$T/conf2"
	status=0
	timeout 60 "${argv[@]}" >out 2>err || status=$?
	[ "$status" -eq 2 ] || fail "status $status" "$(cat err)"
	grep -q 'retain' err || fail "$(cat err)"
}
