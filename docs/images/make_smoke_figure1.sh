#!/usr/bin/env bash
# The README's results picture, docs/images/smoke_figure1.png: Figure 1 of a smoke sweep of four paper
# arms (1 baseline, 4 ra_flat, 5 stopped_tree, 7 root_restart; seeds 42, 101, 7: 12 runs of the README's
# quick start, about 1 minute each on 2 CPU cores), trained in a scratch folder, drawn by `analysis
# figures` and copied here. Run from anywhere, in the project's environment:
#   bash docs/images/make_smoke_figure1.sh [SCRATCH_DIR]      # default: a new mktemp -d folder
# A second run with the same SCRATCH_DIR skips the finished runs and only redraws.
set -euo pipefail
images="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scratch="${1:-$(mktemp -d)}"
mkdir -p "$scratch" && cd "$scratch"
python -m rlvr_sweep "+arm=baseline,ra_flat,stopped_tree,root_restart" profile=smoke -m seed=42,101,7
python -m rlvr_sweep.analysis figures outputs/runs --out outputs/figures
cp outputs/figures/figure1.png "$images/smoke_figure1.png"
size=$(stat -c %s "$images/smoke_figure1.png")
echo "wrote $images/smoke_figure1.png ($((size / 1024)) KB; sweep in $scratch)"
[ "$size" -le 153600 ] || { echo "larger than 150 KB: too heavy for the README" >&2; exit 1; }
