"""PASS 2: analytic checks that need no sweep (paper §4.2, §4.3, §3.2, §7).

- Sampler laws by exact enumeration on a finite scripted policy that ends at once (EOS) with p = 1/2
  and otherwise writes 48 fillers, a newline at t = 49, one of three answers and EOS: every stage-1
  root and every continuation is enumerated with its probability through `rlvr_sweep.rollout.plan_pair`
  (the samplers' own rule), giving P(Y_1 = EOS), P(Y_2 = EOS) = (0.50, 0.50) for the stopped tree
  (whose every leaf has exactly the policy's marginal) and (0.50, 0.25) = (p, p^2) for root restart;
  the executed samplers then give prefix lengths [1,1,1,1,49,49,49,49] and [0,0,0,0,49,49,49,49] on a
  group with two early-EOS roots.
- Proposition 2: with S = {1} sharing (0, 0) and three restarted (1, 1) pairs, the beta = 0 prefix
  numerator on S is 2 (0 - 0.75) = -1.5, not 0; the beta bonus increment is >= 0 on every subset S.
- Zero-gradient AdamW steps are bitwise equal (max |diff| = 0.0, parameters and both moments) to
  zero-weighted backward passes on a fixed trajectory, and skipping the step is not. The steps go
  through `update.apply_update` (training's own code) with `PlainAdamW`: torch's AdamW kernel for CPU
  tensors (`torch.optim.adam._single_tensor_adam`, decoupled weight decay, the state AdamW keeps),
  bitwise what `torch.optim.AdamW` (`update.make_adamw`) computes on them, without the optimizer class,
  whose constructor and step import `torch._dynamo` (seconds of this process's imports; a torch whose
  kernel takes other arguments gets `make_adamw`).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections import defaultdict

import torch

from rlvr_sweep.credit import per_leaf_prefix, tree_mean_advantages
from rlvr_sweep.rollout import SAMPLERS, ScriptedPolicy, plan_pair
from rlvr_sweep.update import apply_update, make_adamw

EOS, FILL, NL = 0, 1, 2
P_EOS = 0.5
PAPER_TREE = dict(horizon=64, K=4, B=2, t_min=40, t_max=60)  # T_min < 49 (the newline) < T_max
MODES = {"stopped_tree": "terminal_dup", "root_restart": "root_resample"}
EXPECTED_EOS = {"stopped_tree": (0.50, 0.50), "root_restart": (0.50, 0.25)}
EXPECTED_PREFIXES = {"stopped_tree": [1, 1, 1, 1, 49, 49, 49, 49], "root_restart": [0, 0, 0, 0, 49, 49, 49, 49]}


def four_outcome(prefix: tuple[int, ...]) -> dict[int, float]:
    """[EOS] with p = 1/2, else FILL x48, NL at position 49, one of {3, 4, 5}, EOS: four outcomes."""
    n = len(prefix)
    if n == 0:
        return {EOS: P_EOS, FILL: 1 - P_EOS}
    if n < 48:
        return {FILL: 1.0}
    if n == 48:
        return {NL: 1.0}
    if n == 49:
        return {3: 1 / 3, 4: 1 / 3, 5: 1 / 3}
    return {EOS: 1.0}


def complete_draws(policy: ScriptedPolicy, head: tuple[int, ...], cap: int):
    """Every complete continuation of `head` (ending in EOS or `cap` tokens long) with its probability."""
    def walk(cont: tuple[int, ...], prob: float):
        if len(cont) == cap or (cont and cont[-1] == policy.eos_id):
            yield cont, prob
            return
        for token, p in policy.dist_fn(head + cont).items():
            if p > 0:
                yield from walk(cont + (token,), prob * p)
    yield from walk((), 1.0)


def exact_marginals(policy: ScriptedPolicy, mode: str, *, horizon: int, B: int, t_min: int, t_max: int,
                    midpoint_min_len: int = 32, long_eos_len: int = 104, **_) -> list[dict]:
    """P(Y_b = y) for each branch b: the sum over stage-1 roots of P(root) x P(continuation | head)."""
    marg = [defaultdict(float) for _ in range(B)]
    for root, p_root in complete_draws(policy, (), min(t_max, horizon)):
        plan = plan_pair(mode, root, policy.has_newline, policy.eos_id, B=B, t_min=t_min, t_max=t_max,
                         midpoint_min_len=midpoint_min_len, long_eos_len=long_eos_len)
        for b, br in enumerate(plan.branches):
            if br.grow and len(br.head) < horizon:
                for cont, p in complete_draws(policy, br.head, horizon - len(br.head)):
                    marg[b][br.head + cont] += p_root * p
            else:
                marg[b][br.head] += p_root
    return marg


def sampler_laws(groups_tried: int = 200) -> dict:
    """{sampler: {"eos": (P(Y1=EOS), P(Y2=EOS)), "max_dev": max |P(Y_b=y) - pi(y)|, "prefix_lens": [...]}}."""
    out = {}
    for name, mode in MODES.items():
        policy = ScriptedPolicy(four_outcome, EOS, [NL], seed=42)
        marg = exact_marginals(policy, mode, **PAPER_TREE)
        target = dict(complete_draws(policy, (), PAPER_TREE["horizon"]))
        dev = max(abs(m.get(y, 0.0) - p) for m in marg for y, p in target.items())
        lens = None
        for _ in range(groups_tried):  # a seeded draw: the first group with two early-EOS roots
            group = SAMPLERS[name].fn(policy, [7], **PAPER_TREE)  # the tree arguments, as the paper sets them
            if sum(pair.category != "causal_non_eos" for pair in group.pairs) == 2:
                lens = sorted(group.prefix_lens())
                break
        out[name] = {"eos": tuple(m[(EOS,)] for m in marg), "max_dev": dev, "prefix_lens": lens}
    return out


def proposition2() -> dict:
    """The paper's -1.5, and the smallest beta-bonus increment over every subset S of two reward tables."""
    eps = 1e-4
    r = torch.tensor([[0.0, 0], [1, 1], [1, 1], [1, 1]])
    shared = torch.tensor([True, False, False, False])
    a_pre, _ = tree_mean_advantages(r, shared, beta=0.0, eps=eps)
    d = float(r.flatten().std()) + eps
    numerator = float(per_leaf_prefix(a_pre, 2)[shared].sum()) * d
    worst = math.inf
    for table in (r, torch.tensor([[1.0, 0], [0, 0], [1, 1], [0, 1]])):
        for bits in itertools.product([False, True], repeat=4):
            s = torch.tensor(bits)
            base, _ = tree_mean_advantages(table, s, beta=0.0, eps=eps)
            bonus, _ = tree_mean_advantages(table, s, beta=0.25, eps=eps)
            worst = min(worst, float((per_leaf_prefix(bonus, 2) - per_leaf_prefix(base, 2))[s].sum()))
    return {"numerator": numerator, "min_bonus_increment": worst}


TRAJECTORY = (True, False, True, False, False, True, False)  # active / homogeneous steps


class PlainAdamW:
    """`torch.optim.AdamW(params, lr, betas, eps, weight_decay)` on CPU tensors, as `apply_update` uses
    it (`zero_grad`, `step`, `state[p]` with `step`, `exp_avg`, `exp_avg_sq`): the same kernel on the
    same state, so bitwise the same numbers, with no `torch._dynamo` imported (module docstring)."""

    def __init__(self, params, lr: float, betas, eps: float, weight_decay: float):
        self.params, self.state = list(params), {}
        self.settings = dict(lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay)

    @staticmethod
    def available() -> bool:
        """This torch has the kernel with the arguments `step` passes (else `make_adamw` is used)."""
        try:
            from torch.optim.adam import _single_tensor_adam
            from torch.optim.optimizer import _get_scalar_dtype  # noqa: F401
        except ImportError:
            return False
        wanted = {"decoupled_weight_decay", "has_complex", "capturable", "differentiable", "amsgrad", "maximize"}
        return wanted <= set(inspect.signature(_single_tensor_adam).parameters)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        from torch.optim.adam import _single_tensor_adam
        from torch.optim.optimizer import _get_scalar_dtype

        params = [p for p in self.params if p.grad is not None]
        for p in params:  # AdamW's lazy state on a CPU tensor (`Adam._init_group`)
            if p not in self.state:
                self.state[p] = {"step": torch.tensor(0.0, dtype=_get_scalar_dtype()),
                                 "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                 "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        states = [self.state[p] for p in params]
        _single_tensor_adam(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                            [s["exp_avg_sq"] for s in states], [], [s["step"] for s in states], None, None,
                            amsgrad=False, has_complex=False, maximize=False, capturable=False, differentiable=False,
                            decoupled_weight_decay=True, **self.settings)


def _adamw_run(homogeneous_step: str, optimizer=None):
    """The fixed trajectory under one `optimizer_step`; `optimizer`: a factory like `make_adamw`
    (default `PlainAdamW` where this torch has its kernel)."""
    optimizer = optimizer or (PlainAdamW if PlainAdamW.available() else make_adamw)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
    params = list(model.parameters())
    opt = optimizer(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
    active_adv = torch.tensor([1.62, 1.62, -0.54, -0.54, -0.54, -0.54, -0.54, -0.54])
    for active in TRAJECTORY:
        adv = active_adv if active else torch.zeros(8)  # a homogeneous group: every advantage is 0
        apply_update(params, opt, active=active, homogeneous_step=homogeneous_step, grad_clip=1.0,
                     backward=lambda: (adv[:, None] * torch.log_softmax(model(x), -1)).sum().neg().backward())
    state = [t for p in params for t in (p.detach(), opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"])]
    return state


def adamw_zero_grad(optimizer=None) -> dict:
    full, zero, skip = (_adamw_run(k, optimizer) for k in ("full_backward", "zero_grad", "skip"))
    diff = lambda a, b: max(float((x - y).abs().max()) for x, y in zip(a, b))  # noqa: E731
    return {"max_abs_diff": diff(full, zero), "skip_diff": diff(zero, skip)}


def run_pass2() -> tuple[dict, list[str]]:
    """(counts, problems) of PASS 2."""
    problems = []
    laws = sampler_laws()
    for name, got in laws.items():
        if got["eos"] != EXPECTED_EOS[name]:
            problems.append(f"{name}: P(Y1=EOS), P(Y2=EOS) = {got['eos']}, expected {EXPECTED_EOS[name]}")
        if got["prefix_lens"] != EXPECTED_PREFIXES[name]:
            problems.append(f"{name}: prefix lengths {got['prefix_lens']}, expected {EXPECTED_PREFIXES[name]}")
    if laws["stopped_tree"]["max_dev"] > 1e-15:
        problems.append(f"stopped_tree: a leaf marginal is off the policy's by {laws['stopped_tree']['max_dev']:.3g}")
    prop = proposition2()
    if abs(prop["numerator"] + 1.5) > 1e-6:
        problems.append(f"Proposition 2: the beta = 0 prefix numerator on S is {prop['numerator']}, expected -1.5")
    if prop["min_bonus_increment"] < 0:
        problems.append(f"Proposition 2: a beta bonus increment is negative ({prop['min_bonus_increment']})")
    adam = adamw_zero_grad()
    if adam["max_abs_diff"] != 0.0:
        problems.append(f"zero-grad AdamW differs from zero-weighted backward by {adam['max_abs_diff']}")
    if adam["skip_diff"] == 0.0:
        problems.append("skipping homogeneous steps left AdamW unchanged (it must differ)")
    st, rr = laws["stopped_tree"]["eos"], laws["root_restart"]["eos"]
    summary = (f"stopped tree ({st[0]:.2f}, {st[1]:.2f}) vs root restart ({rr[0]:.2f}, {rr[1]:.2f}); "
               f"Proposition 2 {prop['numerator']:+.1f}; zero-grad AdamW max|diff| {adam['max_abs_diff']}")
    return {"checks": 3, "summary": summary, "laws": laws, "proposition2": prop, "adamw": adam}, problems


def main() -> int:
    """`python -m rlvr_sweep.verify.analytic`: PASS 2 alone, its result as one JSON object on stdout
    ({"counts", "problems", "seconds"}); `verify all` runs it so beside PASS 1 (`passes.Pass2Beside`)."""
    import json
    import time

    torch.set_num_threads(1)  # tiny tensors; the other core is PASS 1's
    started = time.perf_counter()
    counts, problems = run_pass2()
    print(json.dumps({"counts": counts, "problems": problems, "seconds": time.perf_counter() - started},
                     default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
