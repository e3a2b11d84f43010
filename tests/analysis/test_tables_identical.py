"""Every table is the same, to the byte, as the builders before their per-group slicing was rewritten
(issue 34, item 5: group once, cut the narrow columns a builder reads, no copy of a whole frame per arm).

Fixed sweeps: the hand-made one (`handmade`), the same with every frame's rows shuffled (so each run's
rows are scattered, as no ledger read file by file leaves them: the grouping must not lean on runs being
contiguous), the same with its grades' flags as 0/1 integers (the builders' general paths, beside the
fast ones for stored booleans), none of its runs chosen, the one with test-time read-outs and a probe
(`testtime_handmade`) and the counterfactual arms of `test_table5c`. For each
table, `digest` hashes its numbers (every column's name, dtype and the repr of every value, in order:
what `<name>.parquet` stores) and its markdown (what `tables.md` and `analysis tables` print).

How EXPECTED was obtained: this file's `digests()` run with the code of commit 627ddb0 (before the
rewrite), from a `git worktree` of that commit, on pandas 3.1.1 / numpy 2.4.6:

    git worktree add /tmp/oldmain 627ddb0
    cd /tmp/oldmain && PYTHONPATH=src:. python /path/to/tests/analysis/test_tables_identical.py

which prints the dict below. A pandas or numpy that formats a dtype or a value otherwise changes every
digest at once; rerun that command on the old commit with the new libraries to tell such a change from
one of the builders.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from rlvr_sweep.analysis import Sweep, build_tables, parse_contrasts
from rlvr_sweep.analysis.report import parquet_safe
from tests.analysis import handmade, test_table5c, testtime_handmade

N_RESAMPLES, SEED = 400, 3
CONTRASTS = parse_contrasts([  # Table 2B's rows of every kind (`test_tables.CONTRASTS`)
    {"row": 1, "title": "tree vs flat", "a": "5", "b": "1", "benchmark": "toy_heldout", "metric": "correct"},
    {"row": 2, "title": "cap hits", "a": "stopped_tree", "b": "baseline", "benchmark": "toy_heldout",
     "metric": "capped"},
    {"row": 3, "title": "null interaction", "a": "5", "b": "1", "c": "5", "d": "1", "benchmark": "toy_heldout"},
    {"row": 4, "title": "single seed", "a": "ablate_skip", "b": "1", "benchmark": "toy_heldout", "seeds": [101]},
    {"row": 5, "title": "absent arm", "a": "13", "b": "12", "benchmark": "toy_heldout"},
])


def _shuffled() -> Sweep:
    """The hand-made sweep with each frame's rows in a fixed random order."""
    rng = np.random.default_rng(0)
    tables = {name: (frame if name == "runs" else frame.iloc[rng.permutation(len(frame))].reset_index(drop=True))
              for name, frame in handmade.tables().items()}
    return Sweep.from_tables(tables)


def _integers() -> Sweep:
    """The hand-made sweep with its grades' flags as 0/1 integers, not the booleans a run stores."""
    tables = handmade.tables()
    flags = [c for c in tables["grades"].columns if tables["grades"][c].dtype == bool]
    tables["grades"] = tables["grades"].astype({c: "int64" for c in flags})
    return Sweep.from_tables(tables)


def _empty() -> Sweep:
    """No run chosen: every table says why it was not built."""
    return Sweep.from_tables(handmade.tables(), profile="no such profile")


ALL = None  # every table `build_tables` makes
SWEEPS = {"handmade": (handmade.sweep, ALL), "shuffled": (_shuffled, ALL), "integers": (_integers, ALL),
          "empty": (_empty, ALL), "testtime": (testtime_handmade.sweep, ALL),
          "counterfactual": (test_table5c.sweep, ("table5c",))}  # its frames hold what Table 5C reads


HOLM_COLUMNS = ("p_two_level", "holm_family", "holm_excludes_0")  # added to Table 2B since (issue 48 item 3)
VERDICT_COLUMNS = ("var_seed", "var_item", "var_interaction", "verdict", "verdict_seeds", "delta_pp",
                   "power_target")  # and these (item 4)


def without_holm(table):
    """Table 2B as it was before its Holm and verdict columns and notes were added beside its rows (the paper's rows
    and numbers stay byte-identical: what this file pins); any other table as it is."""
    import dataclasses

    if table.name != "table2b" or table.why:
        return table
    added = [*HOLM_COLUMNS, *VERDICT_COLUMNS]
    assert set(added) <= set(table.frame.columns) and {"Holm 5% (family)", "Verdict"} <= set(table.display.columns)
    return dataclasses.replace(table, frame=table.frame.drop(columns=added),
                               display=table.display.drop(columns=["Holm 5% (family)", "Verdict"]),
                               notes=[n for n in table.notes if not n.startswith(("Holm 5%: ", "Verdict: "))])


def digest(table) -> str:
    """sha256 (16 hex digits) of a table's numbers and markdown; "unbuilt ..." of a table not built."""
    table = without_holm(table)
    frame = parquet_safe(table.frame)
    numbers = [[str(c), str(frame[c].dtype), [repr(v) for v in frame[c].tolist()]] for c in frame.columns]
    text = json.dumps(numbers) + "\n" + table.markdown()
    return ("unbuilt " if table.why else "") + hashlib.sha256(text.encode()).hexdigest()[:16]


def digests(names=tuple(SWEEPS)) -> dict:
    """{sweep: {table: digest}} of every table `build_tables` makes of the named sweeps."""
    out = {}
    for name in names:
        make, only = SWEEPS[name]
        tables = build_tables(make(), CONTRASTS, N_RESAMPLES, SEED, **({} if only is ALL else {"only": only}))
        out[name] = {t: digest(table) for t, table in tables.items()}
    return out


EXPECTED = {  # printed by this file on commit 627ddb0 (module docstring)
    "handmade": {
        "runs": "446f1d4cdce27802", "table1": "24465bbc2dee95d0", "table2a": "61f74f309350d8cf",
        "table2b": "44813bf2aa5ba7dd", "table3": "61fd14f77e6babc9", "table4": "98fe52493e303e72",
        "table5c": "unbuilt dc26c4ea5bd959d1", "audit": "1dc0585b0013f839", "baseline_readouts": "6d7e23c071b400ec",
        "baseline_runs": "4f7b87a4a6242567", "strata": "79f18b9b952146a5", "table5a_tf": "unbuilt 8546acc7d4e66054",
        "table5a": "unbuilt 8402b8c47e428b73", "table5b": "unbuilt c77636ad651d787f",
    },
    "shuffled": {
        "runs": "446f1d4cdce27802", "table1": "24465bbc2dee95d0", "table2a": "61f74f309350d8cf",
        "table2b": "44813bf2aa5ba7dd", "table3": "61fd14f77e6babc9", "table4": "98fe52493e303e72",
        "table5c": "unbuilt dc26c4ea5bd959d1", "audit": "1dc0585b0013f839", "baseline_readouts": "6d7e23c071b400ec",
        "baseline_runs": "4f7b87a4a6242567", "strata": "79f18b9b952146a5", "table5a_tf": "unbuilt 8546acc7d4e66054",
        "table5a": "unbuilt 8402b8c47e428b73", "table5b": "unbuilt c77636ad651d787f",
    },
    "integers": {
        "runs": "446f1d4cdce27802", "table1": "24465bbc2dee95d0", "table2a": "61f74f309350d8cf",
        "table2b": "44813bf2aa5ba7dd", "table3": "61fd14f77e6babc9", "table4": "98fe52493e303e72",
        "table5c": "unbuilt dc26c4ea5bd959d1", "audit": "1dc0585b0013f839", "baseline_readouts": "6d7e23c071b400ec",
        "baseline_runs": "4f7b87a4a6242567", "strata": "79f18b9b952146a5", "table5a_tf": "unbuilt 8546acc7d4e66054",
        "table5a": "unbuilt 8402b8c47e428b73", "table5b": "unbuilt c77636ad651d787f",
    },
    "empty": {
        "runs": "191928a2b27991a3", "table1": "unbuilt 356787ac4298161f", "table2a": "unbuilt 3c8d5292cdc6d6f3",
        "table2b": "unbuilt b77d17d050f44406", "table3": "unbuilt 52f8fd5c5ce6b499",
        "table4": "unbuilt eaa4fad92ba305d7", "table5c": "unbuilt dc26c4ea5bd959d1",
        "audit": "unbuilt 5b29204529c0e756", "baseline_readouts": "unbuilt 585069fc1b755c22",
        "baseline_runs": "unbuilt 31c97c81b75a3388", "strata": "unbuilt 77c77cabc9354ff0",
        "table5a_tf": "unbuilt 8546acc7d4e66054", "table5a": "unbuilt 8402b8c47e428b73",
        "table5b": "unbuilt c77636ad651d787f",
    },
    "testtime": {
        "runs": "f045216db13ee7c4", "table1": "24465bbc2dee95d0", "table2a": "61f74f309350d8cf",
        "table2b": "44813bf2aa5ba7dd", "table3": "61fd14f77e6babc9", "table4": "8dd05df17ecd9469",
        "table5c": "unbuilt dc26c4ea5bd959d1", "audit": "1dc0585b0013f839", "baseline_readouts": "6d7e23c071b400ec",
        "baseline_runs": "908bd5b0bc82208d", "strata": "79f18b9b952146a5", "table5a_tf": "063960886e5f713e",
        "table5a": "6baea2668ac8b43d", "table5b": "308388b8e1195d1d",
    },
    "counterfactual": {
        "table5c": "e29b98876f0b7787",
    },
}


@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_every_table_is_byte_identical_to_before(sweep):
    assert digests([sweep])[sweep] == EXPECTED[sweep]


if __name__ == "__main__":
    print(json.dumps(digests(), indent=4))
