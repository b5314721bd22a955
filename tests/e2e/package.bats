#!/usr/bin/env bats
# The Debian package: built with dpkg-buildpackage from a clean copy of the
# sources, then its contents, conffile and maintainer scripts checked, and
# lintian run on it when installed.  Skipped, saying why, without dpkg-dev,
# debhelper or the build dependencies.

load helpers

# A clean copy of the sources in $T/src: the files git tracks, or the whole
# tree of a release tarball built out of tree (make distcheck).
clean_sources() {
	local src="$TESTDIR/.."

	mkdir "$T/src"
	# (A release tarball unpacked inside a checkout, as by make distcheck,
	# is not that checkout.)
	if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = \
	    "$(cd "$src" && pwd -P)" ]; then
		(cd "$src" && git ls-files -z | tar --null -T - -cf -) |
		    tar -xf - -C "$T/src"
	elif [ -e "$src/config.status" ]; then
		skip "a release tarball built in its own directory: no clean sources to copy"
	else
		cp -a "$src/." "$T/src"
		chmod -R u+w "$T/src"
	fi
}

@test "dpkg-buildpackage builds mhfilter_*.deb: units, man pages, conffile, purge" {
	command -v dpkg-buildpackage >/dev/null ||
	    skip "dpkg-buildpackage is not installed (Debian package dpkg-dev)"
	command -v dh >/dev/null ||
	    skip "debhelper is not installed (Debian packages debhelper, dh-autoreconf)"
	clean_sources
	cd "$T/src"
	dpkg-checkbuilddeps >"$T/deps" 2>&1 ||
	    skip "build dependencies missing: $(cat "$T/deps")"
	# Not under the make check that runs us: its MAKEFLAGS would carry
	# TEST_LOGS (every test, this one too) into the package's make check.
	timeout 1200 env -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES -u MAKELEVEL \
	    -u DEB_BUILD_OPTIONS -u DEB_BUILD_PROFILES \
	    dpkg-buildpackage -us -uc -b >"$T/build.log" 2>&1 ||
	    fail "dpkg-buildpackage failed:" "$(tail -n 60 "$T/build.log")"
	cd "$T"
	deb="$(ls mhfilter_*_*.deb)"
	[ -f "$deb" ] || fail "no package: $(ls)"

	dpkg-deb -c "$deb" | awk '{ print $6 }' >files
	for f in ./usr/bin/mhfilter ./usr/share/man/man1/mhfilter.1.gz \
	    ./usr/share/man/man5/mhfilter.conf.5.gz \
	    ./lib/systemd/system/mhfilter.service \
	    ./lib/systemd/system/mhfilter.socket \
	    ./lib/systemd/system/mhfilter-expire.service \
	    ./lib/systemd/system/mhfilter-expire.timer \
	    ./lib/systemd/system/mhfilter-milter.service \
	    ./usr/lib/sysusers.d/mhfilter.conf ./etc/mhfilter.conf \
	    ./etc/logrotate.d/mhfilter \
	    ./usr/share/bash-completion/completions/mhfilter \
	    ./usr/share/doc/mhfilter/copyright; do
		grep -qx -- "$f" files || fail "$f not in the package:" "$(cat files)"
	done
	dpkg-deb -x "$deb" root
	grep -qx 'ExecStart=/usr/bin/mhfilter --config /etc/mhfilter.conf' \
	    root/lib/systemd/system/mhfilter.service
	grep -q '^ExecStart=/usr/bin/mhfilter --milter unix:/var/spool/postfix/mhfilter/milter ' \
	    root/lib/systemd/system/mhfilter-milter.service
	# The modules, where the program looks for them.
	moddir="/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/mhfilter"
	for mod in "$moddir/mhfilter-mail.so" "$moddir/mhfilter-tls.so"; do
		grep -qx -- ".$mod" files ||
		    fail "$mod not in the package:" "$(cat files)"
	done
	grep -qaF -- "$moddir" root/usr/bin/mhfilter ||
	    fail "the program does not look in $moddir"
	# The package's make check ran the unit tests, and only them.
	grep -q '^PASS: tests/unit/test_input ' "$T/build.log" ||
	    fail "no unit tests in the build"
	! grep -q '^[A-Z]*: tests/e2e/' "$T/build.log" ||
	    fail "end-to-end tests in the build"

	dpkg-deb -e "$deb" ctl
	grep -qx /etc/mhfilter.conf ctl/conffiles || fail "conffiles: $(cat ctl/conffiles)"
	# The verdict log rotated, the daemon told to reopen it (SIGHUP
	# through the unit's ExecReload), as the log directory's owner.
	grep -qx /etc/logrotate.d/mhfilter ctl/conffiles
	grep -q '^/var/log/mhfilter/\*\.tsv ' root/etc/logrotate.d/mhfilter
	grep -q 'systemctl reload mhfilter.service' root/etc/logrotate.d/mhfilter
	grep -q '^	su mhfilter mhfilter$' root/etc/logrotate.d/mhfilter
	grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' root/lib/systemd/system/mhfilter.service
	# The system user first, then the socket enabled; nothing started.
	grep -q '^ *systemd-sysusers .*mhfilter.conf' ctl/postinst
	# (dh_installsystemd enables a unit on a new installation in a block
	# that says "was-enabled defaults to true": the socket's only.)
	[ "$(grep -c 'was-enabled defaults to true' ctl/postinst)" -eq 1 ] ||
	    fail "more than the socket enabled:" "$(cat ctl/postinst)"
	grep -A 4 'was-enabled defaults to true' ctl/postinst |
	    grep -q "deb-systemd-helper enable 'mhfilter.socket'"
	! grep -q 'deb-systemd-invoke \(start\|restart\)' ctl/postinst ||
	    fail "started on installation:" "$(cat ctl/postinst)"
	# The state directory goes on purge, and only then.
	sh -n ctl/postrm
	awk '/^if \[ "\$1" = purge \]; then$/ { p = 1 } p && /rm -rf \/var\/lib\/mhfilter/ { ok = 1 }
	    /^fi$/ { p = 0 } END { exit !ok }' ctl/postrm ||
	    fail "no purge-only removal:" "$(cat ctl/postrm)"
	[ "$(grep -c 'rm -rf /var/lib/mhfilter' ctl/postrm)" -eq 1 ]

	if command -v lintian >/dev/null; then
		lintian "$deb" >lint 2>&1 || true
		! grep -q '^[EW]: ' lint || fail "lintian:" "$(cat lint)"
	else
		echo "# lintian is not installed: not run" >&3
	fi
}
