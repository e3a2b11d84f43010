#!/usr/bin/env bash
# The paper path in one script: upstream data -> data files and splits, checked -> weights, checked ->
# the training grids on SLURM -> the test-time read-outs and the probe the later tables need ->
# collect -> tables and figures -> verify all. docs/paper-path.md explains each step, its cost and
# what can be deleted afterwards. Every step is idempotent: rerun the script after a failure and
# finished work is skipped (finished runs, identical data files), unfinished runs resume.
#
#   launchers/paper_path.sh                    # the paper: profile=paper, Qwen3-0.6B-Base, SLURM
#   PROFILE=smoke launchers/paper_path.sh      # the same sequence on the smoke profile (tiny model)
#
# Settings (environment variables):
#   PROFILE  paper | smoke (default paper)
#   ROOT     outputs folder (default outputs): runs in ROOT/runs, tables and figures in ROOT/analysis
#   RAW      upstream files (default raw; missing ones are downloaded)   DATA  data root (default data)
#   MODEL    the weights folder (default models/Qwen3-0.6B-Base; fetched when it fails check-model)
#   LAUNCH   launcher overrides (default hydra/launcher=submitit_slurm; add partition, account, ...)
#   SWEEPS   the training sweeps, separated by ';' (default: the profile's grid, ablations, cf grid)
#   EXTRA    overrides added to every run (e.g. train.steps=4 eval.limit=16 for a trial)
#   PROBE    a prefix for the probe command (e.g. "srun --gres=gpu:1 --time=60"; default: run here)
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-paper}
ROOT=${ROOT:-outputs}
RAW=${RAW:-raw}
DATA=${DATA:-data}
MODEL=${MODEL:-models/Qwen3-0.6B-Base}
LAUNCH=${LAUNCH:-hydra/launcher=submitit_slurm}
EXTRA=${EXTRA:-}
PROBE=${PROBE:-}
PY=${PYTHON:-python}
if [[ $PROFILE == paper ]]; then
    SWEEPS=${SWEEPS:-"+sweep=paper_grid;+sweep=paper_ablations;+sweep=cf_grid"}
    COMMON="data.root=$DATA model.path=$MODEL"
elif [[ $PROFILE == smoke ]]; then
    SWEEPS=${SWEEPS:-"+sweep=smoke_grid;+sweep=smoke_ablations;+sweep=smoke_cf_grid"}
    COMMON="data.root=$DATA profile=smoke"
else
    echo "paper_path: PROFILE must be paper or smoke, not '$PROFILE'" >&2
    exit 2
fi
RUNS=$ROOT/runs
step() { echo "== [$(date +%H:%M:%S), ${SECONDS}s] $*"; }

step "1/8 data: the four files from their upstream sources, the splits, the check"
$PY -m rlvr_sweep.data prepare --raw "$RAW" --data-root "$DATA" --download
$PY -m rlvr_sweep.data build-splits --out "$DATA/splits" --seed 0 --data-root "$DATA"
$PY -m rlvr_sweep.data check --data-root "$DATA"

if [[ $PROFILE == paper ]]; then
    step "2/8 weights: Qwen3-0.6B-Base in $MODEL"
    $PY -m rlvr_sweep.policy check-model "$MODEL" || $PY -m rlvr_sweep.policy fetch-model --out "$MODEL"
else
    step "2/8 weights: the smoke profile trains the tiny model shipped in the package"
fi

step "3/8 training: $SWEEPS"
IFS=';' read -ra sweeps <<< "$SWEEPS"
for sweep in "${sweeps[@]}"; do
    # shellcheck disable=SC2086  # each sweep, COMMON, EXTRA and LAUNCH are lists of overrides
    $PY -m rlvr_sweep $sweep $COMMON run.out_root="$RUNS" $EXTRA -m $LAUNCH
done

one_run() {  # the one finished run folder of an arm at a horizon and seed
    local found
    found=$(ls -d "$RUNS/$PROFILE/$1"/h"$2"_s"$3"_*/ 2>/dev/null || true)
    if [[ $(wc -w <<< "$found") != 1 ]]; then
        echo "paper_path: expected one run of $1 at h$2 seed $3 under $RUNS/$PROFILE, found: ${found:-none}" >&2
        exit 1
    fi
    echo "${found%/}"
}

step "4/8 Table 4: k = 3 sampled read-outs of Arm 11 seeds 42 and 7"
for seed in 42 7; do
    # shellcheck disable=SC2086
    $PY -m rlvr_sweep task=evaluate model.path="$(one_run stopped_tree_accum 512 $seed)/model" eval=sampled_k3 \
        seed=$seed $COMMON run.out_root="$RUNS" $EXTRA -m $LAUNCH
done

step "5/8 Table 5B: fork read-out and batch-64 audit of Arm 12 seed 7"
S7=$(one_run stopped_tree 1024 7)
# shellcheck disable=SC2086
$PY -m rlvr_sweep task=evaluate model.path="$S7/model" eval=fork3 seed=7 $COMMON run.out_root="$RUNS" $EXTRA -m $LAUNCH
# shellcheck disable=SC2086
$PY -m rlvr_sweep task=evaluate model.path="$S7/model" eval.batch_size=64 seed=7 $COMMON run.out_root="$RUNS" $EXTRA \
    -m $LAUNCH

step "6/8 Table 5A: prefix-splice probe, Arm 12 seed 42 into seed 7"
PROBE_DIR="$RUNS/$PROFILE/probes/arm12_s42_to_s7"
if [[ -f $PROBE_DIR/DONE ]]; then
    echo "probe finished before: $PROBE_DIR"
else
    # shellcheck disable=SC2086
    $PROBE $PY -m rlvr_sweep.evaluation probe "$(one_run stopped_tree 1024 42)" "$S7" --out "$PROBE_DIR"
fi

step "7/8 collect, tables, figures"
$PY -m rlvr_sweep.store collect "$RUNS" --out "$ROOT/collected/sweep"
$PY -m rlvr_sweep.analysis tables "$RUNS" --out "$ROOT/analysis"
$PY -m rlvr_sweep.analysis figures "$RUNS" --out "$ROOT/analysis"

step "8/8 verify all"
$PY -m rlvr_sweep.verify all "$RUNS" --tables "$ROOT/analysis"
step "done: tables in $ROOT/analysis/tables.md, figures beside them"
