#!/usr/bin/env bats
# The helpers themselves must be able to fail a test: a suite of small
# tests that use them (tests/e2e/helpers.bash) is run once by bats, and
# which of them pass and fail, and why, is checked here.

load helpers

setup_file() {
	local dir="$BATS_FILE_TMPDIR"

	# (TEST, not the word bats looks for here, is made @test by sed.)
	sed 's/^TEST /@test /' >"$dir/inner.bats" <<'EOF'
load "$HELPERS"

TEST "status 0 need not be named" {
	mhrun --version
}

TEST "a named status passes" {
	mhrun --no-such-option
	assert_status 2
	mhrun --no-such-option
	status_is 0 2
}

TEST "an unnamed status other than 0 fails the test at its end" {
	mhrun --no-such-option
}

TEST "an unnamed status other than 0 fails the next mhrun" {
	mhrun --no-such-option
	mhrun --version
	echo "not reached" >&2
}

TEST "assert_status with another status fails" {
	mhrun --version
	assert_status 2
}

TEST "status_is with another status is false, and names it" {
	mhrun --no-such-option
	if status_is 0 1; then
		fail "status_is 0 1 was true"
	fi
}

TEST "mhrun in a pipeline fails" {
	printf 'x\n' | mhrun -a
}

TEST "a failing mhf early in a pipeline fails under pipefail" {
	set -o pipefail
	mhf --no-such-option 2>/dev/null | cat >/dev/null
}
EOF
	HELPERS="$E2E_DIR/helpers" timeout 300 "${BATS_ROOT:-/usr}/bin/bats" \
	    --tap "$dir/inner.bats" >"$dir/tap" 2>&1 || true
}

# The line of the inner suite's TAP output for test $1 must start with $2
# (ok or not ok).
assert_inner() {
	grep -qx -- "$2 [0-9]* $1" "$BATS_FILE_TMPDIR/tap" ||
	    fail "'$1' is not '$2':" "$(cat "$BATS_FILE_TMPDIR/tap")"
}

# The inner suite's output must hold the fixed string $1.
assert_inner_has() {
	grep -qF -- "$1" "$BATS_FILE_TMPDIR/tap" ||
	    fail "the inner suite does not say '$1':" \
	    "$(cat "$BATS_FILE_TMPDIR/tap")"
}

@test "helpers: the inner suite ran all eight tests" {
	grep -qx '1\.\.8' "$BATS_FILE_TMPDIR/tap" ||
	    fail "$(cat "$BATS_FILE_TMPDIR/tap")"
}

@test "helpers: a status of 0 need not be named, a named status passes" {
	assert_inner "status 0 need not be named" ok
	assert_inner "a named status passes" ok
}

@test "helpers: an unnamed status other than 0 fails the test, at its end or at the next mhrun" {
	assert_inner "an unnamed status other than 0 fails the test at its end" "not ok"
	assert_inner "an unnamed status other than 0 fails the next mhrun" "not ok"
	assert_inner_has "'mhfilter --no-such-option' exited 2, a status the test did not"
	[ "$(grep -c 'not reached' "$BATS_FILE_TMPDIR/tap" || true)" -eq 0 ] ||
	    fail "the test went on after the second mhrun"
}

@test "helpers: assert_status fails on another status, status_is is false and names it" {
	assert_inner "assert_status with another status fails" "not ok"
	assert_inner_has "exit status 0, expected 2"
	assert_inner "status_is with another status is false, and names it" ok
}

@test "helpers: mhrun in a pipeline fails; a failing mhf in a pipeline fails under pipefail" {
	assert_inner "mhrun in a pipeline fails" "not ok"
	assert_inner_has "in a pipeline or subshell its status is lost"
	assert_inner "a failing mhf early in a pipeline fails under pipefail" "not ok"
}
