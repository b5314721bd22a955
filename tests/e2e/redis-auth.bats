#!/usr/bin/env bats
# Redis authentication (--redis-password-file): a single Redis with
# requirepass and with an ACL user, and a Redis Cluster with requirepass
# whose every node, the new master after a failover included, is
# authenticated.  A wrong or missing password fails at once, naming the
# server and never the password, and writes nothing.

load helpers
load redis-helpers

PASS=open-sesame-4711

setup_file() {
	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	RDIR="$BATS_FILE_TMPDIR/redis"
	export RDIR
	# redis-cli (the helpers' too) authenticates with this.
	REDISCLI_AUTH="$PASS"
	export REDISCLI_AUTH
	redis_single_start "$RDIR" --requirepass "$PASS"
	redis_cluster_start "$RDIR" 3 1 --requirepass "$PASS" \
	    --masterauth "$PASS"
	# 300 unrelated records.
	awk 'BEGIN { srand(11); for (i = 1; i <= 300; i++) {
		printf "d%d\t", i
		for (j = 0; j < 30; j++)
			printf "w%d ", int(rand() * 5000)
		print ""
	} }' >"$BATS_FILE_TMPDIR/stream"
}

teardown_file() {
	redis_stop_all "$RDIR"
}

# Run redis-cli on the single Redis.
rcli() {
	timeout 10 redis-cli -p "${REDIS_SINGLE#*:}" "$@"
}

# The keys of namespace $1 on the single Redis, one a line.
keys_of() {
	rcli --scan --pattern "$1:*"
	rcli --scan --pattern "{$1}:*"
}

# The last mhrun failed at once (status 1, within 10 s) with "redis
# ADDR: authentication failed", never printing the password $2.
assert_auth_failed() {
	assert_status 1
	assert_err_has "redis $1: authentication failed"
	[ "$SECONDS" -lt 10 ] || fail "it took $SECONDS s to fail"
	if [ -n "$2" ] && grep -qF -- "$2" "$T/err"; then
		fail "the password is in the message:" "$(cat "$T/err")"
	fi
}

# A run on namespace $1 of the single Redis with password file $2 (none if
# empty) fails at once naming the server, not showing secret $3, saying
# $4; and writes nothing.
refused() {
	SECONDS=0
	mhrun -f tsv -d "redis://$REDIS_SINGLE/$1?timeout=20" \
	    ${2:+--redis-password-file "$2"} <"$BATS_FILE_TMPDIR/stream"
	assert_auth_failed "$REDIS_SINGLE" "$3"
	assert_err_has "$4"
	[ ! -s "$T/out" ] || fail "records written: $(head -3 "$T/out")"
	[ -z "$(keys_of "$1")" ] || fail "keys written:" "$(keys_of "$1")"
}

@test "requirepass: the right password works; a wrong or missing one fails at once, nothing written" {
	S="$BATS_FILE_TMPDIR/stream"
	printf '%s\n' "$PASS" >pw
	printf 'not-the-password-0815\n' >bad
	chmod 600 pw bad
	mhrun -f tsv -d "redis://$REDIS_SINGLE/ok" --redis-password-file pw <"$S"
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 300 ] || fail "$(wc -l <"$T/out") records"
	[ -n "$(keys_of ok)" ] || fail "nothing written with the right password"

	refused wrong bad not-the-password-0815 WRONGPASS
	refused none "" "" "a password is needed: --redis-password-file"

	# The daemon does not start on a Redis it cannot authenticate to.
	SECONDS=0
	mhrun -d "redis://$REDIS_SINGLE/daemon?timeout=20" \
	    --redis-password-file bad --listen "unix:$T/sock" </dev/null
	assert_auth_failed "$REDIS_SINGLE" not-the-password-0815
	[ -z "$(keys_of daemon)" ] || fail "keys written:" "$(keys_of daemon)"
}

# The commands of Redis layout 3 (for an ACL user), and those layout 4
# added.
L3_CMDS=(+get +getrange +strlen +exists +ttl +set +append +incrby +del
    +eval +scan +dbsize +info +ping +role +wait +asking '+cluster|slots')
L4_CMDS=("${L3_CMDS[@]}" +zadd +zrange +zrem +zremrangebyscore
    '+client|setname' '+client|list')

# ACL user $1 (password $1-pw, keys of namespace $1) with the commands
# "${@:2}" runs the stream: its first batch fails (exit 1), nothing is
# written and no document or bucket is left.  Its stderr is in $T/err.
refused_layout() {
	local u="$1"

	shift
	[ "$(rcli acl setuser "$u" on ">$u-pw" "~$u:*" "~{$u}:*" "$@")" = OK ]
	printf '%s %s-pw\n' "$u" "$u" >"$u"
	chmod 600 "$u"
	mhrun -f tsv -d "redis://$REDIS_SINGLE/$u?timeout=20" \
	    --redis-password-file "$u" <"$S"
	assert_status 1
	[ ! -s "$T/out" ] || fail "records written: $(head -3 "$T/out")"
	[ -z "$(rcli --scan --pattern "$u:*")" ] ||
	    fail "keys left:" "$(rcli --scan --pattern "$u:*" | head)"
}

@test "an ACL user: 'user password' works; a wrong password or a user without the commands fails" {
	S="$BATS_FILE_TMPDIR/stream"
	# The commands and keys of mhfilter(1)'s example, namespace acl.
	[ "$(rcli acl setuser mhf on '>acl-pw-1' '~acl:*' '~{acl}:*' \
	    "${L4_CMDS[@]}" +hset +hget +hdel)" = OK ]
	[ "$(rcli acl setuser weak on '>acl-pw-2' '~*' '+get')" = OK ]
	printf 'mhf acl-pw-1\n' >good
	printf 'mhf acl-pw-9\n' >bad
	printf 'weak acl-pw-2\n' >weak
	chmod 600 good bad weak
	mhrun -f tsv -d "redis://$REDIS_SINGLE/acl" --redis-password-file good \
	    <"$S"
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 300 ] || fail "$(wc -l <"$T/out") records"

	refused aclbad bad acl-pw-9 "authentication failed for user mhf"
	refused aclweak weak acl-pw-2 NOPERM
	# The commands of layout 3 alone (no delivery marks): the first
	# commit fails, naming what is missing.
	refused_layout old "${L3_CMDS[@]}"
	assert_err_has "CLIENT SETNAME: NOPERM"
	# The commands of layout 4 (no ticket filters): the first batch
	# fails when it takes its ticket, naming the script's commands.
	refused_layout l4 "${L4_CMDS[@]}"
	assert_err_has "ticket (a script of INCRBY, ZRANGE, ZREM, ZADD, HSET, HGET and HDEL)"
	assert_err_has "can't run this command"
}

@test "--redis-password-file: unreadable, empty or malformed is a usage error that never shows the file's line" {
	mhrun -d "redis://$REDIS_SINGLE/x" --redis-password-file nonexistent \
	    </dev/null
	assert_status 2
	assert_err_has "--redis-password-file: nonexistent: No such file"
	: >empty
	mhrun -d "redis://$REDIS_SINGLE/x" --redis-password-file empty </dev/null
	assert_status 2
	assert_err_has "empty (one line: password, or user password)"
	printf 'one two three-secret\n' >three
	mhrun -d "redis://$REDIS_SINGLE/x" --redis-password-file three </dev/null
	assert_status 2
	assert_err_has "expected one line: password, or user and password"
	run grep -c three-secret "$T/err"
	[ "$output" = 0 ] || fail "the line is in the message"
	# A configuration file names it like any long option.
	printf '%s\n' "$PASS" >pw
	chmod 600 pw
	printf 'redis-password-file = pw\nformat = tsv\n' >conf
	mhrun --config conf -d "redis://$REDIS_SINGLE/conf" \
	    <"$BATS_FILE_TMPDIR/stream"
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 300 ] || fail "$(wc -l <"$T/out") records"
}

@test "a cluster with requirepass: every master is authenticated, and the new one after a failover" {
	S="$BATS_FILE_TMPDIR/stream"
	printf '%s\n' "$PASS" >pw
	chmod 600 pw
	mhrun -f tsv -d "redis://$REDIS_CLUSTER/c1" --redis-password-file pw \
	    <"$S"
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 300 ] || fail "$(wc -l <"$T/out") records"
	# Documents spread over the masters: each of them took our AUTH.
	for a in ${REDIS_CLUSTER//,/ }; do
		n="$(timeout 10 redis-cli -p "${a#*:}" dbsize)"
		[ "$n" -gt 0 ] || fail "master $a holds no key"
	done

	redis_kill_port "$(redis_master_of_slot 0)"
	redis_wait_ok
	# The same texts under new ids: all duplicates, read from every
	# slot's master, the promoted replica included.
	sed 's/^d/q/' "$S" >copies
	mhrun -f tsv -d "redis://$REDIS_CLUSTER/c1" --redis-password-file pw \
	    -Q <copies
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") records not found"

	printf 'wrong\n' >bad
	chmod 600 bad
	SECONDS=0
	mhrun -f tsv -d "redis://$REDIS_CLUSTER/c2?timeout=20" \
	    --redis-password-file bad <"$S"
	assert_status 1
	assert_err_has ": authentication failed: WRONGPASS"
	[ "$SECONDS" -lt 10 ] || fail "it took $SECONDS s to fail"
}
