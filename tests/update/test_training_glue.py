"""The glue between the math and training, pinned with hand values and loop oracles: the loss's sign
and value, the per-token wiring of a question's backward (any micro-batch), 4-question accumulation
with unit-norm question gradients, and the tail average."""

from __future__ import annotations

import copy

import pytest
import torch

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.credit import Credit, TreeCredit, tree_mean_credit, zero_cont_token_mass
from rlvr_sweep.policy import load_policy
from rlvr_sweep.rollout import Leaf, Pair, RolloutGroup
from rlvr_sweep.run import checkpoint
from rlvr_sweep.update import ScoredGroup, TailAverage, UpdateSettings, backward, make_adamw, policy_loss, update_step
from tests.conftest import make_random_qwen3
from tests.helpers import compose_cfg

PAD = 63
PROMPT = [3, 4, 5]


def sequence_logprob(model, prompt, completion) -> torch.Tensor:
    """sum_j log p(completion_j | prompt, completion_<j), one unpadded sequence (the oracle's view)."""
    ids = torch.tensor([prompt + completion])
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    return logp[len(prompt) - 1 :].gather(-1, torch.tensor(completion)[:, None]).sum()


def token_logprob_list(model, prompt, completion) -> torch.Tensor:
    ids = torch.tensor([prompt + completion])
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    return logp[len(prompt) - 1 :].gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)  # (L,)


def scored(pairs: list[Pair], rewards, credit: TreeCredit, active: bool = True) -> ScoredGroup:
    group = RolloutGroup(pairs, 0, 0, 0, 0)
    r = torch.tensor(rewards, dtype=torch.float32)
    return ScoredGroup(group, ["" for _ in group.leaves()], r, r.clone(), Credit(credit.prefix, credit.cont, active))


def grads_of(model) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


# ------------------------------------------------------------------ 1. sign and value of the loss
def test_a_step_raises_the_rewarded_completion_and_lowers_the_other():
    """On the shipped tiny model: advantages (+1, -1) through the trainer's backward, one SGD step."""
    policy = load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                     dtype="float32"))
    model, tok = policy.model, policy.tokenizer
    prompt = tok("Compute 2 + 3.", add_special_tokens=False)["input_ids"]
    good = tok(" 2 + 3 = 5\n\\boxed{5}", add_special_tokens=False)["input_ids"]
    bad = tok(" \\boxed{6}", add_special_tokens=False)["input_ids"]
    pair = Pair(0, "flat", [Leaf(good, 0, True), Leaf(bad, 0, True)], 0, len(good) + len(bad), 0)
    adv = torch.tensor([[1.0, -1.0]])
    group = scored([pair], [[1.0, 0.0]], TreeCredit(adv.clone(), adv.clone()))
    with torch.no_grad():
        before = [sequence_logprob(model, prompt, c).item() for c in (good, bad)]
    model.zero_grad()
    backward(model, prompt, group, pad_id=policy.pad_id, recipe="scale_then_sum", micro_batch=None, device="cpu")
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # a small step: first order holds
    torch.optim.SGD(model.parameters(), lr=1e-2).step()
    with torch.no_grad():
        after = [sequence_logprob(model, prompt, c).item() for c in (good, bad)]
    assert after[0] > before[0] and after[1] < before[1], (before, after)


@pytest.mark.parametrize("recipe", ["scale_then_sum", "sum_then_scale"])
def test_loss_value_of_a_hand_made_case(recipe):
    """Two sequences of 2 tokens, G = 2. Token probabilities (1/2, 1/4) and (1/8, 1/8) give summed
    log-probs S_1 = -3 ln 2 and S_2 = -6 ln 2; with advantages (+2, -2),
    L = -(1/2) (2 S_1 - 2 S_2) = -(1/2) (-6 ln 2 + 12 ln 2) = -3 ln 2 = -2.0794."""
    logps = torch.log(torch.tensor([[0.5, 0.25], [0.125, 0.125]]))
    mask = torch.ones(2, 2, dtype=torch.bool)
    adv = torch.tensor([2.0, -2.0])
    loss = policy_loss(logps, mask, adv if recipe == "sum_then_scale" else adv[:, None].expand(2, 2), recipe, 2)
    assert loss.item() == pytest.approx(-2.0794415, abs=1e-6)  # -3 ln 2


# ------------------------------------------------------------------ 2. loop oracle for a question's backward
@pytest.fixture
def tree_group():
    """K = 3 pairs of a tree with one of each kind the samplers make: a causal pair sharing a 2-token
    prefix, a terminal duplicate (prefix = the whole leaf) and a tau-zero pair (no prefix)."""
    causal = Pair(0, "causal_non_eos", [Leaf([7, 8, 9, 63], 2, True), Leaf([7, 8, 10], 2, False)], 2, 2, 5)
    dup = Pair(1, "terminal_dup", [Leaf([11, 63], 2, True), Leaf([11, 63], 2, True)], 2, 4, 0)
    tau0 = Pair(2, "tau_zero", [Leaf([12, 13, 63], 0, True), Leaf([14, 15, 16, 17], 0, False)], 0, 3, 4)
    rewards = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    shared = torch.tensor([True, True, False])
    return [causal, dup, tau0], rewards, shared


def oracle_grads(model, prompt, leaves, prefix_adv, cont_adv, group_size):
    """(1/G) sum_i sum_j A_ij (-log p_ij) with one forward per leaf: A = prefix advantage on the first
    prefix_len tokens, continuation advantage after."""
    model.zero_grad()
    total = 0.0
    for leaf, a_pre, a_cont in zip(leaves, prefix_adv, cont_adv):
        lp = token_logprob_list(model, prompt, leaf.tokens)
        weights = torch.tensor([a_pre if j < leaf.prefix_len else a_cont for j in range(len(leaf.tokens))])
        total = total + (weights * -lp).sum()
    (total / group_size).backward()
    return grads_of(model)


@pytest.mark.parametrize("micro_batch", [None, 1, 3])
@pytest.mark.parametrize("zero_mass", [False, True])
def test_question_backward_matches_the_per_token_oracle(tree_group, micro_batch, zero_mass):
    pairs, rewards, shared = tree_group
    model = make_random_qwen3(seed=3)
    credit = tree_mean_credit(torch.tensor(rewards), shared, beta=0.25, alpha=0.5)
    leaves = [leaf for p in pairs for leaf in p.leaves]
    if zero_mass:
        pl = torch.tensor([leaf.prefix_len for leaf in leaves]).view(3, 2)
        lengths = torch.tensor([len(leaf.tokens) for leaf in leaves]).view(3, 2)
        credit = zero_cont_token_mass(credit, pl, lengths)
    group = scored(pairs, rewards, credit)
    expected = oracle_grads(model, PROMPT, leaves, credit.prefix.flatten().tolist(), credit.cont.flatten().tolist(), 6)
    model.zero_grad()
    backward(model, PROMPT, group, pad_id=PAD, recipe="scale_then_sum", micro_batch=micro_batch, device="cpu")
    for got, want in zip(grads_of(model), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    assert max(g.abs().max() for g in expected) > 1e-4  # the oracle's gradient is not trivially zero


@pytest.mark.parametrize("micro_batch", [None, 1, 3])
def test_sum_then_scale_on_a_flat_group_matches_its_oracle(micro_batch):
    """Arm 1's recipe: -(1/G) sum_i A_i (sum_j log p_ij), G = 4, chunks of any size."""
    model = make_random_qwen3(seed=4)
    completions = [[7, 8, 63], [9], [10, 11, 12, 13], [14, 63]]
    pairs = [Pair(k, "flat", [Leaf(completions[2 * k], 0, True), Leaf(completions[2 * k + 1], 0, False)], 0, 0, 0)
             for k in range(2)]
    adv = torch.tensor([[1.5, -0.5], [-0.5, -0.5]])
    group = scored(pairs, [[1.0, 0.0], [0.0, 0.0]], TreeCredit(adv.clone(), adv.clone()))
    model.zero_grad()
    total = sum(-a * sequence_logprob(model, PROMPT, c) for a, c in zip(adv.flatten().tolist(), completions))
    (total / 4).backward()
    expected = grads_of(model)
    model.zero_grad()
    backward(model, PROMPT, group, pad_id=PAD, recipe="sum_then_scale", micro_batch=micro_batch, device="cpu")
    for got, want in zip(grads_of(model), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ 3. accumulation and averaging
class Recorder:
    """Wraps an optimizer: records every step and the gradient it saw."""

    def __init__(self, optimizer, params):
        self.optimizer, self.params, self.seen = optimizer, params, []
        self.param_groups = optimizer.param_groups

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self):
        self.seen.append([p.grad.detach().clone() for p in self.params])
        self.optimizer.step()


def test_four_question_update_sums_unit_norm_question_gradients(tree_group):
    """Arm 11: one step for 4 questions; its gradient is sum_q g_q / ||g_q|| over the active questions,
    a homogeneous question adds nothing (grad_clip set out of the way to see the raw sum)."""
    cfg = compose_cfg(["+arm=stopped_tree_accum", "profile=smoke", "train.grad_clip=1e9"])
    assert cfg.train.accumulate_questions == 4 and cfg.train.unit_question_grad
    pairs, _, shared = tree_group
    model = make_random_qwen3(seed=5)
    params = [p for p in model.parameters() if p.requires_grad]
    reward_sets = [[[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]],  # 2nd: homogeneous
                   [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]]
    pending = []
    for rewards in reward_sets:
        credit = tree_mean_credit(torch.tensor(rewards), shared, beta=0.0, alpha=0.5)
        pending.append((PROMPT, scored(pairs, rewards, credit, active=len({r for row in rewards for r in row}) > 1)))
    expected = [torch.zeros_like(p) for p in params]
    for prompt, group in pending:
        if not group.active:
            continue
        model.zero_grad()
        backward(model, prompt, group, pad_id=PAD, recipe="scale_then_sum", micro_batch=None, device="cpu")
        g = grads_of(model)
        norm = torch.sqrt(sum((x.double() ** 2).sum() for x in g))
        for e, x in zip(expected, g):
            e.add_(x / norm)
    recorder = Recorder(make_adamw(params, 1e-5, (0.9, 0.999), 1e-8, 0.01), params)

    t = cfg.train
    settings = UpdateSettings(cfg.optimizer_step.name, t.loss_recipe, t.backward_micro_batch, t.unit_question_grad,
                              t.grad_clip, cfg.sampler.fork_threshold, PAD, "cpu")
    update = update_step(model, params, recorder, pending, settings)
    outcome, bwd_out = update.outcome, update.bwd_out
    assert outcome.action == "backward_step" and len(recorder.seen) == 1
    leaf_tokens = sum(len(leaf.tokens) for p in pairs for leaf in p.leaves)
    assert bwd_out == 3 * leaf_tokens  # the homogeneous question paid for no backward
    for got, want in zip(recorder.seen[0], expected):
        torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-6)


def test_one_optimizer_update_per_four_questions_in_a_real_run(tmp_path):
    from rlvr_sweep import store
    from rlvr_sweep.run import run

    info = run(compose_cfg(["+arm=stopped_tree_accum", "profile=smoke", "train.steps=8", "eval=none",
                            f"run.out_root={tmp_path}"]))
    steps = store.read_table(info["run_dir"], "steps")
    assert steps["update"].tolist() == [False, False, False, True] * 2
    assert steps["action"].tolist()[:3] == ["accumulated"] * 3


def test_tail_average_is_the_loop_mean_of_the_window_also_across_a_resume(tmp_path):
    """Window [2, 4] over 5 steps: the average is (w_2 + w_3 + w_4) / 3, and it is the same when the
    average's state goes through a checkpoint file in the middle of the window."""
    model = make_random_qwen3(seed=6)
    params = [p for p in model.parameters()]
    weights = {}

    def set_step(step):  # the weights "after step s"
        torch.manual_seed(100 + step)
        with torch.no_grad():
            for p in params:
                p.copy_(torch.randn_like(p))
        weights[step] = [p.detach().clone() for p in params]

    whole = TailAverage(params, 2, 4)
    for step in range(1, 6):
        set_step(step)
        whole.observe(step)
    expected = [(weights[2][i] + weights[3][i] + weights[4][i]) / 3 for i in range(len(params))]
    for got, want in zip(whole.mean, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    assert whole.count == 3

    resumed = TailAverage(params, 2, 4)
    for step in range(1, 4):
        set_step(step)
        resumed.observe(step)
    opt = make_adamw(params, 1e-5, (0.9, 0.999), 1e-8, 0.01)
    generator = torch.Generator().manual_seed(0)
    progress = {"run_hash": "h", "step": 3}
    checkpoint.save(tmp_path, model=model, optimizer=opt, generator=generator, tail=resumed, progress=progress)
    again = TailAverage(params, 2, 4)
    again.load_state(checkpoint.load(tmp_path, "h")["tail"])
    for step in range(4, 6):
        set_step(step)
        again.observe(step)
    for got, want in zip(again.mean, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    again.load_into(params)
    for p, want in zip(params, expected):
        torch.testing.assert_close(p.detach(), want, rtol=1e-6, atol=1e-7)
    assert copy.deepcopy(again.count) == 3


# ------------------------------------------------------------------ 4. a fork group's backward, hinge included
def fork_group():
    """K = 2 fork pairs sharing root[:tau]: pair 0 diverges (the alternative wins), pair 1 is a (1, 0)
    pair that rescue-only credit duplicates."""
    from rlvr_sweep.rollout import ForkGroup, ForkPair

    p0 = ForkPair(0, "cf_first_gap", [Leaf([7, 8, 9, 10, 63], 2, True), Leaf([7, 8, 11, 12, 13, 14], 2, False)],
                  2, 0, 0, 9, 11, 9, 11, 0.3, 0.3)
    p1 = ForkPair(1, "cf_first_gap", [Leaf([7, 20, 21, 63], 1, True), Leaf([7, 22, 23], 1, False)],
                  1, 0, 0, 20, 22, 20, 22, 0.4, 0.4)
    return ForkGroup([p0, p1], 0, 0, 0, 0)


@pytest.mark.parametrize("micro_batch", [None, 2])
def test_fork_group_backward_matches_its_oracle_with_the_hinge(micro_batch):
    """Per-token credit from `loss_credit` plus (lambda / G) max(0, delta - [log p(v_w) - log p(v_l)]) at the
    fork token of each divergent pair, one forward per leaf; G = 4 leaves, lambda 0.5, delta 0.5."""
    from rlvr_sweep.credit import cf_credit, loss_credit

    group = fork_group()
    rewards = [[0.0, 1.0], [1.0, 0.0]]
    cf = cf_credit(rewards, [2, 1], [[5, 6], [4, 3]], variant="cf_rg", hinge_weight=0.5)
    assert cf.metrics["active"] and cf.dup.tolist() == [False, True] and [h.k for h in cf.hinge] == [0]
    credit = loss_credit(cf)
    r = torch.tensor(rewards)
    scored_group = ScoredGroup(group, ["", "", "", ""], r, r.clone(), Credit(credit.prefix, credit.cont, True, cf))
    model = make_random_qwen3(seed=8)
    leaves = group.leaves()
    model.zero_grad()
    total = 0.0
    for leaf, a_pre, a_cont in zip(leaves, credit.prefix.flatten().tolist(), credit.cont.flatten().tolist()):
        lp = token_logprob_list(model, PROMPT, leaf.tokens)
        weights = torch.tensor([a_pre if j < leaf.prefix_len else a_cont for j in range(len(leaf.tokens))])
        total = total + (weights * -lp).sum()
    win = token_logprob_list(model, PROMPT, leaves[1].tokens)[2]  # pair 0: the alternative (b=1) won, tau 2
    lose = token_logprob_list(model, PROMPT, leaves[0].tokens)[2]
    total = total / 4 + 0.5 * torch.clamp(0.5 - (win - lose), min=0) / 4
    total.backward()
    expected = grads_of(model)
    assert float(torch.clamp(0.5 - (win - lose), min=0)) > 0  # the hinge is live on this random model
    model.zero_grad()
    backward(model, PROMPT, scored_group, pad_id=PAD, recipe="scale_then_sum", micro_batch=micro_batch,
             device="cpu", hinge_margin=0.5)
    for got, want in zip(grads_of(model), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
