"""`analysis diff A B`: settings, identity inputs and headline metrics of two runs, arms or configs.

Arms are composed from the shipped `conf/arm/*.yaml`; runs are hand-made folders (config.yaml as a run
writes it, a run.json with the keys a run records) whose differences are written in the tests.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from omegaconf import OmegaConf

from rlvr_sweep.analysis import diff
from rlvr_sweep.analysis.diff import ABSENT, config_difference, diff_lines, is_bookkeeping, resolve_side
from tests.helpers import compose_cfg

SMOKE = ["profile=smoke"]
# What ra_flat.yaml changes against baseline.yaml (DESIGN "Paper arm -> configuration", Arms 1 and 4):
# the optimizer step on homogeneous groups, the derivation gate, the loss recipe; and the arm's name.
BASELINE_TO_RA_FLAT = [
    ("arm", "baseline", "ra_flat"),
    ("optimizer_step.name", "full_backward", "zero_grad"),
    ("reward.gate_chars", None, 30),
    ("reward.name", "ungated", "gated"),
    ("train.loss_recipe", "sum_then_scale", "scale_then_sum"),
]


def run_diff(capsys, *argv) -> tuple[int, list[str], str]:
    code = diff.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def settings_rows(a, b):
    return [row for row in config_difference(a.config, b.config) if not is_bookkeeping(row[0])]


# ------------------------------------------------------------------------------------------------
# arms and config files


def test_baseline_vs_ra_flat_lists_exactly_what_the_arm_files_change(capsys):
    a, b = resolve_side("baseline"), resolve_side("ra_flat")
    assert a.kind == b.kind == "arm"
    assert settings_rows(a, b) == BASELINE_TO_RA_FLAT
    assert [r for r in config_difference(a.config, b.config) if is_bookkeeping(r[0])] == [("paper_arms.512", "1", "4")]

    code, lines, err = run_diff(capsys, "baseline", "ra_flat")
    assert code == 0 and err == ""
    n = len([k for k in a.config if not is_bookkeeping(k)])
    assert lines == [
        "A: arm baseline",
        "B: arm ra_flat",
        "",
        f"settings that differ (5 of {n}):",
        "  key                  A               B",
        "  arm                  baseline        ra_flat",
        "  optimizer_step.name  full_backward   zero_grad",
        "  reward.gate_chars    null            30",
        "  reward.name          ungated         gated",
        "  train.loss_recipe    sum_then_scale  scale_then_sum",
        "",
        "labels and bookkeeping that differ (identity=False: not what a run computes):",
        "  key             A    B",
        "  paper_arms.512  '1'  '4'",
    ]  # two arms record no inputs and no metrics: those sections are absent


def test_the_same_arm_twice_says_nothing_differs(capsys):
    code, lines, _ = run_diff(capsys, "ra_flat", "ra_flat", "--override", "profile=smoke")
    assert code == 0
    assert lines[:2] == ["A: arm ra_flat profile=smoke", "B: arm ra_flat profile=smoke"]
    assert lines[3].startswith("settings that differ: none (all ") and lines[3].endswith(" are equal)")
    assert lines[4] == "labels and bookkeeping that differ (identity=False: not what a run computes): none"


def test_overrides_reach_their_own_side_and_seed_is_never_hidden(capsys):
    code, lines, _ = run_diff(capsys, "ra_flat", "ra_flat", "--override", "profile=smoke", "--b-override", "seed=101",
                              "--b-override", "train.lr=1e-5")
    assert code == 0
    assert lines[:2] == ["A: arm ra_flat profile=smoke", "B: arm ra_flat profile=smoke seed=101 train.lr=1e-5"]
    assert lines[3].startswith("settings that differ (2 of ")
    assert lines[4:7] == ["  key       A      B", "  seed      42     101", "  train.lr  5e-05  1e-05"]


def test_a_saved_config_equals_the_arm_it_was_composed_from(tmp_path):
    cfg = compose_cfg(["+arm=stopped_tree", "horizon='1024'", *SMOKE])
    saved = tmp_path / "config.yaml"
    saved.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))  # as store.prepare_run_dir writes it
    as_json = tmp_path / "config.json"
    as_json.write_text(json.dumps(OmegaConf.to_container(OmegaConf.structured(cfg))))
    arm = resolve_side("stopped_tree", overrides=["horizon='1024'", *SMOKE])
    for path in (saved, as_json):
        side = resolve_side(str(path))
        assert side.kind == "config" and config_difference(side.config, arm.config) == []
    assert resolve_side("stopped_tree").config["horizon.tokens"] == 512  # the override did reach the arm


def test_config_difference_marks_absent_keys_and_keeps_types():
    a = {"train": {"lr": 1e-5, "betas": [0.9, 0.999]}, "seed": 42, "flag": True, "only_a": 1}
    b = {"train.lr": 1e-5, "train.betas": [0.9, 0.99], "seed": 42.0, "flag": 1, "only_b": None}
    assert config_difference(a, b) == [
        ("flag", True, 1), ("only_a", 1, ABSENT), ("only_b", ABSENT, None), ("train.betas", [0.9, 0.999], [0.9, 0.99]),
    ]
    assert str(ABSENT) == "<absent>"


# ------------------------------------------------------------------------------------------------
# hand-made runs


@pytest.fixture(scope="module")
def smoke_cfg():
    return compose_cfg(["+arm=ra_flat", *SMOKE])


def make_run(root, cfg, *, seed, train_sha, trained, wall, group="g" * 12, done=True):
    """A run folder as a run leaves it, reduced to what diff reads; paths differ from run to run."""
    cfg = dataclasses.replace(cfg, seed=seed)
    folder = root / f"h512_s{seed}_{seed:08x}"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    model = {"sha256": "9" * 64, "files": {"config.json": "c" * 64}, "source": "pkg:tiny", "folder": str(folder / "m")}
    info = {
        "run_hash": f"{seed:08x}", "group_hash": group, "settings_hash": f"s{seed:011d}", "base_hash": "b" * 12,
        "inputs": {"train": {"sha256": train_sha, "rows": 2000, "data": "toy_arith", "canonical": {},
                             "files": [str(folder / "train.jsonl")]},
                   "benchmark/toy_heldout": {"sha256": "e" * 64, "rows": 200, "canonical": {}, "files": []},
                   "model": model},
        "model_digest": "9" * 64, "data_canonical": None, "code": {"commit": "c0ffee" * 6 + "abcd", "dirty": False},
        "accuracy": {"base": {"toy_heldout": 0.25}, "trained": {"toy_heldout": trained}},
        "totals": {"steps": 100, "gen_tokens": 1000 + seed}, "wall_seconds": wall,
        "run_dir": str(folder), "started_at": 1000.0 + seed, "finished_at": 2000.0 + seed, "status": "finished",
        "seed": seed, "arm": cfg.arm,
    }
    (folder / "run.json").write_text(json.dumps(info))
    if done:
        (folder / "DONE").write_text("")
    return folder


def test_two_runs_show_their_seed_their_data_digest_and_metrics_side_by_side(tmp_path, smoke_cfg, capsys):
    a = make_run(tmp_path / "x", smoke_cfg, seed=42, train_sha="a" * 64, trained=0.40, wall=100.0, group="1" * 12)
    b = make_run(tmp_path / "y", smoke_cfg, seed=101, train_sha="b" * 64, trained=0.55, wall=112.5, group="2" * 12)
    code, lines, err = run_diff(capsys, str(a), str(b))
    assert code == 0 and err == ""
    assert lines[:2] == [f"A: run {a}  (run 0000002a, group 111111111111)",
                         f"B: run {b}  (run 00000065, group 222222222222)"]
    assert lines[2] == ""  # other inputs: not called seeds of one arm row
    at = lines.index
    start = next(i for i, line in enumerate(lines) if line.startswith("settings that differ (1 of "))
    assert lines[start + 1:start + 3] == ["  key   A   B", "  seed  42  101"]
    assert "labels and bookkeeping that differ (identity=False: not what a run computes): none" in lines
    # the data file's digest is the one input that differs; paths, times and run.json copies are not shown
    start = at("identity inputs that differ (code: recorded, not part of the identity):")
    assert lines[start + 1:start + 4] == ["  input  A             B", "  train  aaaaaaaaaaaa  bbbbbbbbbbbb", ""]
    start = at("headline metrics:")
    assert lines[start + 1:] == [
        "  metric                            A      B        B-A",
        "  accuracy base toy_heldout     25.0%  25.0%   +0.0 pts",
        "  accuracy trained toy_heldout  40.0%  55.0%  +15.0 pts",
        "  wall_seconds                  100.0  112.5      +12.5",
        "  totals.steps                    100    100         +0",
        "  totals.gen_tokens             1,042  1,101        +59",
    ]
    assert not any(str(tmp_path) in line for line in lines[2:])


def test_two_seeds_of_one_arm_row_are_named_so_and_agree_on_every_input(tmp_path, smoke_cfg, capsys):
    a = make_run(tmp_path, smoke_cfg, seed=42, train_sha="a" * 64, trained=0.40, wall=1.0)
    b = make_run(tmp_path, smoke_cfg, seed=7, train_sha="a" * 64, trained=0.40, wall=1.0, done=False)
    side = resolve_side(str(b / "run.json"))  # a run.json stands for its folder
    assert side.is_run and side.path == b and side.notes == ("unfinished (no DONE marker; status finished)",)
    code, lines, _ = run_diff(capsys, "0000002a", "00000007", "--root", str(tmp_path))  # run hashes under a root
    assert code == 0
    assert lines[0] == f"A: run {a}  (run 0000002a, group gggggggggggg)"
    assert lines[2] == "   note: unfinished (no DONE marker; status finished)"
    assert lines[3] == "A and B are seeds of one arm row: same group gggggggggggg (settings and inputs but the seed)"
    assert ("identity inputs that differ (code: recorded, not part of the identity): none "
            "(the same benchmark/toy_heldout, model, train, code)") in lines
    assert ["accuracy", "trained", "toy_heldout", "40.0%", "40.0%", "+0.0", "pts"] in [line.split() for line in lines]


def test_a_run_against_an_arm_lists_the_runs_inputs_against_no_run(tmp_path, smoke_cfg, capsys):
    run = make_run(tmp_path, smoke_cfg, seed=42, train_sha="a" * 64, trained=0.4, wall=1.0)
    code, lines, _ = run_diff(capsys, str(run), "ra_flat", "--override", "profile=smoke")
    assert code == 0
    assert lines[1] == "B: arm ra_flat profile=smoke"
    assert lines[3].startswith("settings that differ: none (all ")
    assert "  train                       aaaaaaaaaaaa  <not a run>" in lines
    assert not any(line.startswith("headline metrics") for line in lines)  # metrics: for two runs only


def test_an_arm_is_composed_under_the_profile_of_the_run_it_is_compared_with(tmp_path, smoke_cfg, capsys):
    run = make_run(tmp_path, smoke_cfg, seed=42, train_sha="a" * 64, trained=0.4, wall=1.0)
    code, lines, _ = run_diff(capsys, str(run), "ra_flat")  # no --override: the run's profile, said so
    assert code == 0
    assert lines[0] == "(the arm side is composed with profile=smoke, the profile of the run it is compared with)"
    assert lines[2] == "B: arm ra_flat profile=smoke" and lines[4].startswith("settings that differ: none (all ")


def test_an_arm_that_does_not_compose_under_the_paper_profile_is_diffed_under_the_smoke_one(capsys, monkeypatch):
    """The shipped `reinforce_pp` (examples/clip_lenpen) updates every 4 questions, which the paper profile's 50
    steps cannot hold: without an override both arms are composed with profile=smoke, and the first line says
    why; a profile named with --override is kept (and the error stands)."""
    from rlvr_sweep.plugins import ENV
    from tests.conftest import REPO

    monkeypatch.setenv(ENV, str(REPO / "examples" / "clip_lenpen"))
    code, lines, err = run_diff(capsys, "baseline", "reinforce_pp")
    assert code == 0, err
    assert lines[0].startswith("(arm sides composed with profile=smoke: under the default profile B: arm "
                               "reinforce_pp: invalid config: train.steps=50 is not a multiple of "
                               "train.accumulate_questions=4")
    assert lines[1:3] == ["A: arm baseline profile=smoke", "B: arm reinforce_pp profile=smoke"]
    assert any(line.split()[:3] == ["estimator.name", "grpo", "reinforce_pp_baseline"] for line in lines)
    code, _, err = run_diff(capsys, "baseline", "reinforce_pp", "--override", "profile=paper")
    assert code == 2 and "train.steps=50 is not a multiple of train.accumulate_questions=4" in err


# ------------------------------------------------------------------------------------------------
# bad input: exit 2, one line on stderr, nothing on stdout


def write_bad_files(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"files": {}}))
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "broken.yaml").write_text("train: [1, 2\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "not_a_run").mkdir()


BAD_SIDES = {  # what A is (paths under the test's tmp folder), and what the one line says
    "a path that does not exist": (["{tmp}/nowhere/run"], "does not exist"),
    "an arm that does not exist": (["no_such_arm"], "no run folder, config file or arm named 'no_such_arm' (arms: "),
    "a JSON file that is not a config": (["{tmp}/manifest.json"], "is not a config: its top-level keys ['files']"),
    "a YAML list": (["{tmp}/list.yaml"], "is not a config: it holds a list"),
    "a YAML syntax error": (["{tmp}/broken.yaml"], "is not a config: it cannot be read as YAML or JSON"),
    "an empty file": (["{tmp}/empty.yaml"], "is not a config: it holds no settings"),
    "an arm preset given as a file": (["{repo}/conf/arm/ra_flat.yaml"], "name the arm instead (e.g. ra_flat)"),
    "a folder that is not a run": (["{tmp}/not_a_run"], "is a folder but not a run folder"),
    "an override of a config file": (["{tmp}/manifest.json", "--a-override", "seed=1"], "apply only to an arm"),
    "an override Hydra cannot apply": (["ra_flat", "--a-override", "train.stpes=3"], "Could not override 'train.stp"),
    "a setting out of range": (["ra_flat", "--a-override", "train.grad_clip=-1"], "train.grad_clip=-1.0: must be > 0"),
    "a bare numbered option": (["ra_flat", "--a-override", "horizon=1024"], "e.g. horizon='1024'"),
}


@pytest.mark.parametrize("case", list(BAD_SIDES))
def test_a_bad_side_exits_2_with_one_line(tmp_path, capsys, case):
    from tests.conftest import REPO

    write_bad_files(tmp_path)
    args, says = BAD_SIDES[case]
    spec, *options = [a.format(tmp=tmp_path, repo=REPO) for a in args]
    code, lines, err = run_diff(capsys, spec, "baseline", *options)
    assert code == 2 and lines == []
    assert err.count("\n") == 1 and err.startswith("analysis diff: error: A: "), err
    assert says in err, err


@pytest.mark.parametrize("argv, says", [
    (["ra_flat"], "the following arguments are required: B"),
    (["ra_flat", "baseline", "--bogus"], "unrecognized arguments: --bogus"),
    (["ra_flat", "baseline", "--root", "/no/such/root"], "--root /no/such/root is not a folder"),
    (["0000dead", "baseline", "--root", "."], "run hash 0000dead: no run folder under . carries it"),
])
def test_bad_options_exit_2_with_one_line(capsys, argv, says):
    code, lines, err = run_diff(capsys, *argv)
    assert code == 2 and lines == [] and err.count("\n") == 1
    assert err.startswith("analysis diff: error: ") and says in err, err


def test_a_shared_override_needs_an_arm_side(tmp_path, smoke_cfg, capsys):
    run = make_run(tmp_path, smoke_cfg, seed=42, train_sha="a" * 64, trained=0.4, wall=1.0)
    code, _, err = run_diff(capsys, str(run), str(run / "config.yaml"), "--override", "seed=3")
    assert code == 2
    assert err == "analysis diff: error: --override applies to an arm side, and neither A nor B is an arm\n"


def test_diff_lines_is_the_printed_report(capsys):
    a, b = resolve_side("baseline"), resolve_side("ra_flat")
    diff.main(["baseline", "ra_flat"])
    assert capsys.readouterr().out.splitlines() == diff_lines(a, b)
