#!/bin/sh
# Study v3's judging runs in PROTOCOL-v3.md §8's order (the selection,
# `-study -v3 -lr-select`, runs first and its values are recorded in
# studyv3.go). Usage: run-v3.sh OUTDIR [FIRST_STEP]
# Each step writes OUTDIR/<step>/runs.csv row by row as simulations end;
# a step is skipped when its study.md exists (finished), so the script
# resumes. No step starts at or after 02:30 UTC (PROTOCOL-v3.md §8;
# 03:15 by amendment 3).
set -eu
out=${1:?usage: run-v3.sh OUTDIR}
bin=${FALCON_STUDY:-falcon-study}
j=${JOBS:-2}
scenarios="straggler several-stragglers mixed spare-cores slow-link"
all=$(echo $scenarios | tr ' ' ',')

# The deadline (HHMM UTC): 0230 by §8, 0315 by amendment 3 (give
# V3_DEADLINE=0315).
late() {
	now=$(date -u +%H%M)
	[ "$now" -ge "${V3_DEADLINE:-0230}" ] && [ "$now" -lt 1200 ]
}

step() { # name, then the study's flags
	name=$1
	shift
	if [ -f "$out/$name/study.md" ]; then
		return 0
	fi
	if late; then
		echo "run-v3: $(date -u +%H:%M) UTC: past ${V3_DEADLINE:-0230}, $name not run" >&2
		exit 0
	fi
	echo "run-v3: $(date -u +%H:%M:%S) UTC: $name: $*" >&2
	nice -n 10 "$bin" -study -v3 -j "$j" -q -out "$out/$name" "$@" >/dev/null
}

# §5: EPSP's scheme per scenario, on the selection seed.
step choose-epsp -seeds 0-0 -scenario "$all" -policies epsp-v2,epsp-v2-slack-ungated

# Tier 1: both EPSP schemes and DynSGD.
for sc in $scenarios; do
	step "t1-$sc" -seeds 1-5 -scenario "$sc" -policies epsp-v2,epsp-v2-slack-ungated,dynsgd
done
# Tier 2: ConSGD.
for sc in $scenarios; do
	step "t2-$sc" -seeds 1-5 -scenario "$sc" -policies consgd
done
# Tier 3: Sync-opt, b chosen per scenario on the selection seed (§5):
# the smallest time to the high target, ties by the steep one, then the
# smaller b.
step choose-syncopt -seeds 0-0 -scenario "$all" -policies sync-opt-b1,sync-opt-b2,sync-opt-b3
b=$(awk -F, 'NR > 1 && $3 ~ /^sync-opt-b/ {
	b = substr($3, 11) + 0; th = ($10 == "inf") ? 1e9 : $10 + 0; ts = ($9 == "inf") ? 1e9 : $9 + 0
	if (!($2 in best) || th < h[$2] || (th == h[$2] && (ts < s[$2] || (ts == s[$2] && b < best[$2])))) { best[$2] = b; h[$2] = th; s[$2] = ts }
} END { sep = ""; for (k in best) { printf "%s%s=%d", sep, k, best[k]; sep = "," } }' "$out/choose-syncopt/runs.csv")
echo "run-v3: Sync-opt's b per scenario: $b" >&2
for sc in $scenarios; do
	step "t3-$sc" -seeds 1-5 -scenario "$sc" -policies sync-opt -syncopt-b "$b"
done
# Tiers 4-6: LB-BSP, FlexRR, BSP. FlexRR has no rate of the grid that
# trains (PROTOCOL-v3.md amendment 1): its tier is not run here;
# run-a4.sh (amendment 4) extends its grid and runs it.
for sc in $scenarios; do
	step "t4-$sc" -seeds 1-5 -scenario "$sc" -policies lb-bsp
done
echo "run-v3: tier 5 (FlexRR) not run: no selected rate trains it (amendment 1)" >&2
for sc in $scenarios; do
	step "t6-$sc" -seeds 1-5 -scenario "$sc" -policies bsp
done
echo "run-v3: $(date -u +%H:%M:%S) UTC: every step done" >&2
