#!/bin/sh
# Study v3 amendment 4's runs (PROTOCOL-v3.md amendment 4), in its order:
# FlexRR's rate on the extended grid (homogeneous, seed 0), tier 5
# (FlexRR, 5 scenarios x seeds 1-5) at that rate, tier 6 (BSP where it
# lacks). Usage: run-a4.sh OUTDIR
# Each step writes OUTDIR/<step>/runs.csv row by row as simulations end;
# a step is skipped when its study.md exists (finished), so the script
# resumes. No step starts at or after the deadline (A4_DEADLINE, HHMM
# UTC, 0525 by the amendment) and a running step is stopped there.
set -eu
out=${1:?usage: run-a4.sh OUTDIR}
bin=${FALCON_STUDY:-falcon-study}
j=${JOBS:-2}
deadline=${A4_DEADLINE:-0525}
grid="0.003 0.01 0.03"
mkdir -p "$out"

late() {
	now=$(date -u +%H%M)
	[ "$now" -ge "$deadline" ] && [ "$now" -lt 1200 ]
}

# left prints the seconds until the deadline.
left() {
	echo $(($(date -u -d "${deadline%??}:${deadline#??}" +%s) - $(date -u +%s)))
}

# rates NAME LR SCENARIOS... writes an lrtune.csv giving FlexRR rate LR
# in the scenarios (the input of -lr-from).
rates() {
	f=$out/$1
	lr=$2
	shift 2
	echo "workload,scenario,policy,family,lr" >"$f"
	for sc in "$@"; do
		echo "cnn,$sc,flexrr,undamped-asynchronous,$lr" >>"$f"
	done
}

step() { # name, then the study's flags
	name=$1
	shift
	if [ -f "$out/$name/study.md" ]; then
		return 0
	fi
	if late; then
		echo "run-a4: $(date -u +%H:%M) UTC: past $deadline, $name not run" >&2
		exit 0
	fi
	echo "run-a4: $(date -u +%H:%M:%S) UTC: $name: $*" >&2
	rc=0
	timeout "$(left)" nice -n 10 "$bin" -study -v3 -q -out "$out/$name" "$@" >/dev/null || rc=$?
	if [ "$rc" -eq 124 ]; then
		echo "run-a4: $(date -u +%H:%M:%S) UTC: $name stopped at the deadline $deadline" >&2
		exit 0
	fi
	return "$rc"
}

# 1. FlexRR's rate: one step per rate (-lr-from takes one rate per
# scenario), two at a time.
for lr in $grid; do
	rates "lr-select-$lr.csv" "$lr" homogeneous
done
# At most $j at once: when $j run, wait for the oldest to end.
pids=""
for lr in $grid; do
	step "select-$lr" -j 1 -seeds 0-0 -scenario homogeneous -policies flexrr -lr-from "$out/lr-select-$lr.csv" &
	pids="$pids $!"
	set -- $pids
	if [ "$#" -ge "$j" ]; then
		wait "$1" || true
		shift
		pids="$*"
	fi
done
wait
for lr in $grid; do
	if ! grep -q ',flexrr,' "$out/select-$lr/runs.csv" 2>/dev/null; then
		echo "run-a4: the selection run at $lr did not finish: stopping" >&2
		exit 1
	fi
done
# §3's rule over the union with the old grid (no old rate reached a
# target): the smallest time to the high target, ties by the steep one,
# then the smaller rate; a time over §3's D = 3 s counts as inf.
sel=$(for lr in $grid; do tail -n +2 "$out/select-$lr/runs.csv"; done | awk -F, '
	function t(x) { return (x == "inf" || x + 0 > 3) ? 1e9 : x + 0 }
	$3 == "flexrr" {
		lr = $6 + 0; th = t($10); ts = t($9)
		if (ts < 1e9 && (best == "" || th < h || (th == h && (ts < s || (ts == s && lr < best))))) { best = lr; h = th; s = ts }
	} END { print best }')
if [ -z "$sel" ]; then
	echo "run-a4: FlexRR reaches no target at any rate of $grid: tier 5 not run" >&2
else
	echo "run-a4: FlexRR's rate: $sel" >&2
	echo "$sel" >"$out/flexrr-rate"
	# 2. Tier 5: FlexRR at that rate.
	rates lr-flexrr.csv "$sel" straggler several-stragglers mixed spare-cores slow-link
	step t5 -j "$j" -seeds 1-5 -scenario straggler,several-stragglers,mixed,spare-cores,slow-link -policies flexrr -lr-from "$out/lr-flexrr.csv"
fi
# 3. Tier 6: BSP where amendment 3 did not run it.
step t6 -j "$j" -seeds 1-5 -scenario several-stragglers,mixed,spare-cores,slow-link -policies bsp
echo "run-a4: $(date -u +%H:%M:%S) UTC: every step done" >&2
