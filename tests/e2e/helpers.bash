# Shared set-up for the end-to-end tests of mhfilter(1); each .bats file
# does "load helpers".
#
# The harness (make check) sets MHFILTER to the binary under test and
# TESTDIR to the tests/ directory of the source tree.  Run by hand, as in
# "bats tests/e2e/basic.bats", both default to this checkout.

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${MHFILTER:=$E2E_DIR/../../mhfilter}"
: "${TESTDIR:=$E2E_DIR/..}"
DATA="$TESTDIR/data"
export MHFILTER TESTDIR DATA

# Every test gets its own directory, which is also TMPDIR so that the
# temporary index of a run without --db is created (and must be removed)
# there.
helpers_setup() {
	T="$(mktemp -d "${BATS_TMPDIR:-/tmp}/mhfilter-e2e.XXXXXX")"
	export TMPDIR="$T"
	BG_PIDS=()
	MHRUN_UNNAMED=
	MHRUN_SHELL="$BASH_SUBSHELL"
	cd "$T"
}

# A test file's own setup calls helpers_setup first.
setup() {
	helpers_setup
}

# Stop whatever a test left running in the background, then remove its
# directory.  The test fails if its last mhrun ended with a status other
# than 0 that it did not name.
teardown() {
	local pid rc=0

	mhrun_named || rc=1
	for pid in "${BG_PIDS[@]}"; do
		kill -9 "$pid" 2>/dev/null || true
	done
	cd /
	rm -rf "$T"
	return "$rc"
}

# Run mhfilter, bounded in time, with stdout in $T/out and stderr in $T/err;
# the exit status is left in $status.  Standard input is the caller's.
#
# A status other than 0 must be named by the test (assert_status or
# status_is) before the next mhrun or the end of the test, which fail
# otherwise: a run that failed unnoticed cannot pass by accident.  For the
# same reason mhrun refuses to run in a pipeline or a subshell, where the
# status it sets would be lost.
mhrun() {
	if [ -n "${MHRUN_SHELL:-}" ] && [ "$BASH_SUBSHELL" -ne "$MHRUN_SHELL" ]
	then
		fail "mhrun $*: in a pipeline or subshell its status is lost;" \
		    "redirect its input from a file instead"
		return 1
	fi
	mhrun_named || return 1
	status=0
	timeout 60 "$MHFILTER" "$@" >"$T/out" 2>"$T/err" || status=$?
	MHRUN_STATUS="$status"
	MHRUN_UNNAMED="mhfilter $*"
}

# Fail if the last mhrun ended with a status other than 0 that the test
# did not name; either way the next check starts afresh.
mhrun_named() {
	local run="$MHRUN_UNNAMED"

	MHRUN_UNNAMED=
	[ -z "$run" ] || [ "$MHRUN_STATUS" -eq 0 ] ||
	    fail "'$run' exited $MHRUN_STATUS, a status the test did not" \
	    "name (assert_status or status_is); stderr:" \
	    "$(cat "$T/err" 2>/dev/null)"
}

# The shared objects the dynamic loader opened in an LD_DEBUG=files run
# whose stderr is in $1 (default $T/err).
loaded() {
	sed -n 's/.*file=\([^ ]*\) .*generating link map.*/\1/p' \
	    "${1:-$T/err}" | sort -u
}

# Run mhfilter, bounded in time, as a plain command (for pipes and
# redirections chosen by the test).  A test that pipes it into another
# command sets -o pipefail first (a function: local -; set -o pipefail),
# so that its status is not lost.
mhf() {
	timeout 60 "$MHFILTER" "$@"
}

# Fail, showing why.
fail() {
	printf '%s\n' "$@" >&2
	return 1
}

# Whether the exit status of the last mhrun (or bats run) is one of $@;
# for a test that accepts several, or records rather than fails.  Either
# way the status of the last mhrun counts as named.
status_is() {
	local s

	MHRUN_UNNAMED=
	for s; do
		[ "$status" -eq "$s" ] && return 0
	done
	return 1
}

# The exit status of the last mhrun (or bats run) must be $1 (or one of
# $@).
assert_status() {
	status_is "$@" ||
	    fail "exit status $status, expected $*" "stderr:" \
	    "$(cat "$T/err" 2>/dev/null)"
}

# Two files must be byte for byte equal: expected $1, actual $2.
assert_same() {
	cmp -s "$1" "$2" || {
		diff -u "$1" "$2" | cat -A | cut -c1-300 | head -40 >&2
		fail "$2 differs from $1"
	}
}

# The output of the last mhrun must be exactly the bytes of stdin.
assert_out() {
	cat >"$T/expected"
	assert_same "$T/expected" "$T/out"
}

# The stderr of the last mhrun must contain the fixed string $1.
assert_err_has() {
	grep -qF -- "$1" "$T/err" ||
	    fail "stderr lacks '$1'; it was:" "$(cat "$T/err")"
}

# The stderr of the last mhrun must not contain the fixed string $1.
assert_err_lacks() {
	! grep -qF -- "$1" "$T/err" ||
	    fail "stderr has '$1'; it was:" "$(cat "$T/err")"
}

# The value of a --stats key in $T/err (or in file $2).
stat_of() {
	sed -n "s/^mhfilter: $1: //p" "${2:-$T/err}"
}

# A --stats value must be $2.
assert_stat() {
	local v

	v="$(stat_of "$1" "${3:-$T/err}")"
	[ "$v" = "$2" ] || fail "stat $1 is '$v', expected '$2'" \
	    "$(cat "${3:-$T/err}")"
}

# Jaccard similarity, to four decimals, of the character (or word, $4 =
# word) n-shingle sets of two texts after ASCII case folding and collapsing
# white space: what the default normalisation does to ASCII.  An oracle
# independent of the C code.
jaccard() {
	python3 - "$1" "$2" "${3:-5}" "${4:-char}" <<'EOF'
import re, sys
a, b, n, unit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def shingles(s):
    s = re.sub(r'\s+', ' ', s.lower()).strip()
    u = s.split(' ') if unit == 'word' else list(s)
    j = ' ' if unit == 'word' else ''
    if len(u) <= n:
        return {j.join(u)}
    return {j.join(u[i:i + n]) for i in range(len(u) - n + 1)}
A, B = shingles(a), shingles(b)
print('%.4f' % (len(A & B) / len(A | B)))
EOF
}

# N distinct tab-separated records "idI<TAB>twelve random words", from a
# fixed seed; pairwise far below any sensible threshold.
gen_tsv() {
	python3 - "$1" "${2:-1}" <<'EOF'
import random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
abc = 'abcdefghijklmnopqrstuvwxyz'
words = [''.join(rng.choice(abc) for _ in range(rng.randint(3, 9)))
         for _ in range(5000)]
out = sys.stdout
for i in range(n):
    out.write('id%d\t%s\n' % (i, ' '.join(rng.choice(words)
                                          for _ in range(12))))
EOF
}

# The complete lines of $1 (a record cut short by a kill is not one).
complete_lines() {
	if [ -s "$1" ] && [ "$(tail -c 1 "$1" | od -An -tx1 | tr -d ' ')" != 0a ]; then
		sed '$d' "$1"
	else
		cat "$1"
	fi
}

# The chunk.* files on standard output, one every $1 seconds (a slow
# producer); quietly ends when the reader has gone.
feed_chunks() {
	local c

	for c in chunk.*; do
		cat "$c" || return 0
		sleep "$1"
	done
}

# Start mhfilter, its pid in $MPID, on index $DB (default db) with the
# options after $1, on a slow stream of the chunk.* files (feed_chunks),
# with its output through a fifo to a reader, cat, whose copy is got.$1;
# the reader's pid goes to $RPID.
start_read() {
	local i="$1"

	shift
	mkfifo "in.$i" "out.$i"
	"$MHFILTER" -f "${FORMAT:-tsv}" -d "${DB:-db}" "$@" <"in.$i" >"out.$i" \
	    2>"err.$i" &
	MPID=$!
	BG_PIDS+=("$MPID")
	cat "out.$i" >"got.$i" &
	RPID=$!
	BG_PIDS+=("$RPID")
	feed_chunks 0.02 >"in.$i" 2>/dev/null 3>&- &
	BG_PIDS+=($!)
}

# Wait up to $2 seconds (default 20) for file $1 to hold at least $3 lines
# (default 1).
wait_lines() {
	local i=0 limit=$((${2:-20} * 20))

	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "${3:-1}" ]; do
		i=$((i + 1))
		if [ "$i" -ge "$limit" ]; then
			fail "timed out waiting for $1"
			return 1
		fi
		sleep 0.05
	done
}

# Wait up to $2 seconds for process $1 to end; its status goes to $status.
# Fails if it is still running.
wait_exit() {
	local i=0 limit=$((${2:-10} * 20))

	while kill -0 "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ "$i" -ge "$limit" ]; then
			fail "process $1 still running after ${2:-10}s"
			return 1
		fi
		# A zombie counts as ended; wait reaps it below.
		if [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ]; then
			break
		fi
		sleep 0.05
	done
	status=0
	wait "$1" || status=$?
}

# The fault injection shim (tests/fault/faultinject.c, built by make
# check), and LD_PRELOAD for it: a sanitizer's runtime must come first.
: "${FAULTINJECT:=$E2E_DIR/../fault/faultinject.so}"
fault_preload() {
	local asan

	asan="$(ldd "$MHFILTER" 2>/dev/null | awk '/lib(a|ub)san/ { print $3 }' |
	    paste -sd: -)"
	printf '%s\n' "${asan:+$asan:}$FAULTINJECT"
}

# The values of database $2 of index $1 as mdb_dump writes them (hex, a
# line each), in key order.
dump_values() {
	mdb_dump -s "$2" "$1" |
	    awk '/^HEADER=END/ { b = 1; n = 0; next } /^DATA=END/ { b = 0 }
		b { if (++n % 2 == 0) print }'
}

# Index $1 made format 8 again in directory $2: the seals taken off every
# value (the last 8 bytes, 16 hex digits of mdb_dump's), format "8".
unseal() {
	local d

	mkdir "$2"
	for d in docs texts l0 l1 l1y times groups meta; do
		mdb_dump -s "$d" "$1" | awk -v d="$d" '
		    /^HEADER=END/ { print; b = 1; n = 0; next }
		    /^DATA=END/ { print; b = 0; next }
		    !b || ++n % 2 == 1 { if (b) key = $0; print; next }
		    d ~ /^(docs|texts|l0|l1|l1y)$/ {
			print substr($0, 1, length($0) - 16); next }
		    d == "meta" && key == " 666f726d6174" { print " 38"; next }
		    { print }' |
		    mdb_load -s "$d" "$2" 2>/dev/null ||
		    fail "mdb_load $d failed"
	done
}

# Flip one bit in the middle of the value of database $2 under document
# $3 in copy $1's data.mdb, the value found by its bytes (mdb_dump's).
flip_value() {
	mdb_dump -s "$2" "$1" >"$1.$2.dump" || fail "mdb_dump $2"
	python3 - "$1/data.mdb" "$1.$2.dump" "$3" <<'PY'
import sys
path, dump, docid = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(dump).read().split("HEADER=END\n")[1].split("\nDATA=END")[0]
lines = [l.strip() for l in lines.splitlines()]
vals = dict(zip(lines[0::2], lines[1::2]))
value = bytes.fromhex(vals["%016x" % docid])
data = bytearray(open(path, "rb").read())
at = data.find(value)
assert at >= 0 and data.find(value, at + 1) < 0, "value not found once"
data[at + (len(value) - 8) // 2] ^= 0x10    # inside the value, not its seal
open(path, "wb").write(data)
PY
}
