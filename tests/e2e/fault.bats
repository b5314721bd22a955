#!/usr/bin/env bats
# Write and sync failures, injected by tests/fault/faultinject.so (an
# LD_PRELOAD shim: the Nth write, pwrite, writev, fsync, fdatasync or
# msync on a file fails with EIO or ENOSPC, or writes short), on the index
# and on the output.  Whatever fails, the run ends with status 0 or 1 and
# says why; nothing it wrote out as unique is lost (a rerun finds every
# such record a duplicate); and the index still passes --check.

load helpers

# Run mhfilter with the fault of the FAULT_* variables set by the caller;
# status in $status, stdout in $T/out, stderr in $T/err.
faulty() {
	status=0
	LD_PRELOAD="$(fault_preload)" FAULT_LOG="$T/faults" timeout 60 \
	    "$MHFILTER" "$@" >"$T/out" 2>"$T/err" || status=$?
}

# After a faulty run that wrote its unique records to file $1 (index db):
# db passes --check, and each of those records, under a new id, is a
# duplicate.  Problems are appended to $T/bad, prefixed with $2.
judge_index() {
	local n

	mhrun -d db --check
	if ! status_is 0 && [ ! -s "$1" ] &&
	    grep -qE "no index at|not an mhfilter index" "$T/err"; then
		# The run creating the index failed before its first commit:
		# nothing acknowledged, and the next run starts afresh.
		mhrun -f tsv -d db -o /dev/null in
		status_is 0 || echo "$2: the run after: $(cat "$T/err")" >>"$T/bad"
		mhrun -d db --check
	fi
	status_is 0 || echo "$2: --check: $(cat "$T/err")" >>"$T/bad"
	[ -s "$1" ] || return 0
	awk -F'\t' '{ print "again" NR "\t" $2 }' "$1" >again
	mhrun -f tsv -d db -Q -a again
	status_is 0 || echo "$2: --query-only: $(cat "$T/err")" >>"$T/bad"
	n="$(cut -f1 "$T/out" | grep -cv '^duplicate$' || true)"
	[ "$n" -eq 0 ] || echo "$2: $n record(s) written out as unique" \
	    "are not in the index" >>"$T/bad"
}

# The message of a failed run must name the error injected ($1).
judge_message() {
	case "$1" in
	ENOSPC|short) grep -q "No space left on device" "$T/err" ;;
	EIO) grep -q "Input/output error" "$T/err" ;;
	esac || echo "$2: status 1 without the error: $(cat "$T/err")" >>"$T/bad"
}

@test "the shim is built and injects: the first write to the output fails with ENOSPC" {
	[ -f "$FAULTINJECT" ] || fail "no $FAULTINJECT (make check builds it)"
	gen_tsv 20 >in
	FAULT_PATH=verdicts FAULT_AT=1 FAULT_ERRNO=ENOSPC \
	    faulty -f tsv -o verdicts in
	assert_status 1
	assert_err_has "write error: No space left on device"
	grep -q "^write fd" "$T/faults" || fail "nothing injected"
}

@test "a failing write or sync on the index: status 1 with its error, nothing acknowledged lost, --check passes" {
	local n mode failed=0 bad

	gen_tsv 300 >in
	: >"$T/bad"
	for mode in EIO ENOSPC short; do
		for ((n = 1; n <= 40; n++)); do
			rm -rf db verdicts "$T/faults"
			if [ "$mode" = short ]; then
				FAULT_PATH=data.mdb FAULT_AT=$n FAULT_SHORT=1 \
				    FAULT_FREE=0 faulty -f tsv -d db --batch 50 \
				    -o verdicts in
			else
				FAULT_PATH=data.mdb FAULT_AT=$n \
				    FAULT_ERRNO=$mode faulty -f tsv -d db \
				    --batch 50 -o verdicts in
			fi
			bad="$mode at call $n"
			case "$status" in
			0) ;;
			1) failed=$((failed + 1)); judge_message "$mode" "$bad" ;;
			*) echo "$bad: status $status: $(cat "$T/err")" >>"$T/bad"
			   continue ;;
			esac
			[ -d db ] || continue	# failed creating it
			judge_index verdicts "$bad"
		done
	done
	[ "$failed" -ge 30 ] || echo "only $failed runs failed" >>"$T/bad"
	[ ! -s "$T/bad" ] || fail "$(cat "$T/bad")"
}

@test "a failing or short write on the output (-o): status 1 with its error, nothing acknowledged lost, --check passes" {
	local n mode failed=0 bad

	gen_tsv 8000 >in	# written in 4 writes of up to 256 KB
	: >"$T/bad"
	for mode in EIO ENOSPC short; do
		for ((n = 1; n <= 4; n++)); do
			rm -rf db verdicts "$T/faults"
			if [ "$mode" = short ]; then
				# Writes only: a sync cannot be short.
				FAULT_PATH=verdicts FAULT_AT=$n FAULT_SHORT=1 \
				    FAULT_CALLS=write,pwrite,writev,pwritev \
				    faulty -f tsv -d db -o verdicts in
			else
				FAULT_PATH=verdicts FAULT_AT=$n \
				    FAULT_ERRNO=$mode faulty -f tsv -d db \
				    -o verdicts in
			fi
			bad="$mode at output write $n"
			case "$mode:$status" in
			short:0) [ "$(wc -l <verdicts)" -eq 8000 ] ||
			    echo "$bad: $(wc -l <verdicts) lines" >>"$T/bad" ;;
			short:*) echo "$bad: status $status" >>"$T/bad" ;;
			*:1) failed=$((failed + 1)); judge_message "$mode" "$bad" ;;
			*:0) ;;
			*) echo "$bad: status $status: $(cat "$T/err")" >>"$T/bad"
			   continue ;;
			esac
			judge_index verdicts "$bad"
		done
	done
	[ "$failed" -ge 6 ] || echo "only $failed runs failed" >>"$T/bad"
	[ ! -s "$T/bad" ] || fail "$(cat "$T/bad")"
}
