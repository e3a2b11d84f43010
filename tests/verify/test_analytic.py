"""PASS 2: the analytic checks give the paper's numbers, and would notice if a law broke."""

import pytest

from rlvr_sweep.rollout import ScriptedPolicy
from rlvr_sweep.verify import analytic


def test_sampler_laws_by_exact_enumeration():
    laws = analytic.sampler_laws()
    assert laws["stopped_tree"]["eos"] == (0.5, 0.5)  # exact: every leaf keeps the policy's marginal
    assert laws["root_restart"]["eos"] == (0.5, 0.25)  # exact: P(Y2 = EOS) = p^2
    assert laws["stopped_tree"]["max_dev"] == 0.0
    assert laws["root_restart"]["max_dev"] == pytest.approx(0.25)  # branch 2's EOS mass moved to long leaves
    assert laws["stopped_tree"]["prefix_lens"] == [1, 1, 1, 1, 49, 49, 49, 49]
    assert laws["root_restart"]["prefix_lens"] == [0, 0, 0, 0, 49, 49, 49, 49]


def test_enumeration_sees_p_not_just_one_half():
    p = 0.3
    dist = lambda pre: {0: p, 1: 1 - p} if not pre else analytic.four_outcome(pre)  # noqa: E731
    policy = ScriptedPolicy(dist, analytic.EOS, [analytic.NL], seed=0)
    marg = analytic.exact_marginals(policy, "root_resample", **analytic.PAPER_TREE)
    assert marg[0][(0,)] == pytest.approx(p) and marg[1][(0,)] == pytest.approx(p * p)
    marg = analytic.exact_marginals(policy, "terminal_dup", **analytic.PAPER_TREE)
    assert marg[1][(0,)] == pytest.approx(p)


def test_proposition2_and_the_bonus():
    prop = analytic.proposition2()
    assert prop["numerator"] == pytest.approx(-1.5, abs=1e-6)
    assert prop["min_bonus_increment"] == 0.0  # >= 0 on every subset; 0 where no shared pair diverges


def test_zero_grad_adamw_is_bitwise_and_skip_is_not():
    adam = analytic.adamw_zero_grad()
    assert adam["max_abs_diff"] == 0.0 and adam["skip_diff"] > 0.0


def test_pass2_reports_a_broken_law(monkeypatch):
    counts, problems = analytic.run_pass2()
    assert problems == [] and counts["checks"] == 3
    monkeypatch.setitem(analytic.EXPECTED_EOS, "root_restart", (0.5, 0.5))  # as if root restart were unbiased
    _, problems = analytic.run_pass2()
    assert len(problems) == 1 and "root_restart" in problems[0] and "(0.5, 0.25)" in problems[0]


@pytest.mark.parametrize("homogeneous_step", ["full_backward", "zero_grad", "skip"])
def test_plain_adamw_is_bitwise_torch_adamw(homogeneous_step):
    """PASS 2's optimizer (no `torch._dynamo` import) leaves every parameter and both moments bitwise where
    `torch.optim.AdamW` (training's `make_adamw`) leaves them, under each optimizer_step."""
    from rlvr_sweep.update import make_adamw

    assert analytic.PlainAdamW.available()  # this torch has the kernel: PASS 2 uses it
    plain = analytic._adamw_run(homogeneous_step, analytic.PlainAdamW)
    torch_adamw = analytic._adamw_run(homogeneous_step, make_adamw)
    assert [t.numpy().tobytes() for t in plain] == [t.numpy().tobytes() for t in torch_adamw]
