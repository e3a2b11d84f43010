"""Analysis stage: a sweep's stored tables become the paper's evidence (seed paper §4.4, §5.1-§5.6).

Seed statistics and two-level bootstrap CIs (`stats`), FLOP proxies (`flops`), k-candidate voting
(`voting`), Tables 1, 2A, 2B, 3, 4 and the prefix audit, Tables 5A / 5B from probe folders and fork
read-outs, §3's baseline diagnostics (`diagnostics`), oracle unions and item strata (`ensembles`), and
figures; it reads parquet only, never a model.
`python -m rlvr_sweep.analysis tables|figures|union SWEEP_ROOT ...` (see `cli`).
"""

from rlvr_sweep.analysis.contrasts import Contrast, build_table2b, load_contrasts, parse_contrasts
from rlvr_sweep.analysis.ensembles import checkpoint_union, correctness_matrix
from rlvr_sweep.analysis.flops import ledger_tokens, proxies
from rlvr_sweep.analysis.report import ALL_TABLES, TABLES, TEST_TIME_TABLES, build_tables, save_tables, table_notes
from rlvr_sweep.analysis.source import Sweep, item_matrix, load_sweep
from rlvr_sweep.analysis.stats import bootstrap_ci, mean_sd
from rlvr_sweep.analysis.voting import Candidate, Vote, vote, vote_detail

__all__ = [
    "ALL_TABLES", "Candidate", "Contrast", "FIGURES", "Sweep", "TABLES", "TEST_TIME_TABLES", "Vote", "bootstrap_ci",
    "build_table2b", "checkpoint_union", "correctness_matrix", "build_tables", "figure1", "figure2", "item_matrix", "ledger_tokens", "load_contrasts",
    "load_sweep", "mean_sd",
    "parse_contrasts", "proxies", "save_tables", "table_notes", "training_curves", "vote", "vote_detail",
]
_FIGURES = ("FIGURES", "figure1", "figure2", "training_curves")  # matplotlib is imported when one is asked for


def __getattr__(name: str):
    if name in _FIGURES:
        from rlvr_sweep.analysis import figures

        return getattr(figures, name)
    raise AttributeError(f"module 'rlvr_sweep.analysis' has no attribute {name!r}")
