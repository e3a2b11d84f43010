"""Per-rollout seeding (`rollout.seeding`): a row's draws come from its own key, so its tokens do not depend on the
rows decoded beside it, and two ranks (here two threads sharing the tiny model, exchanging through a barrier) each
decoding half of a stopped-tree group get the one process's group."""

from __future__ import annotations

import threading
from contextlib import nullcontext

import pytest
import torch

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import load_policy
from rlvr_sweep.rollout import ModelPolicy, stopped_tree
from rlvr_sweep.rollout.engine import Generation
from rlvr_sweep.rollout.seeding import PerRolloutPolicy, RowGenerators, joined, rollout_seed, share

TINY = dict(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3", dtype="float32", device="cpu")


@pytest.fixture(scope="module")
def tiny():
    return load_policy(ModelConfig(**TINY))


def test_the_key_of_a_row_is_a_63_bit_hash_of_seed_step_call_and_row():
    assert rollout_seed(42, 0, 0, 0) == 4945949205331585457
    keys = {rollout_seed(42, s, c, r) for s in range(3) for c in range(3) for r in range(8)}
    assert len(keys) == 72 and all(0 <= k < 2**63 for k in keys)


@pytest.mark.parametrize("n, size, multiple, blocks", [
    (8, 2, 1, [range(0, 4), range(4, 8)]),
    (3, 2, 1, [range(0, 2), range(2, 3)]),
    (2, 4, 1, [range(0, 1), range(1, 2), range(2, 2), range(2, 2)]),
    (6, 4, 2, [range(0, 2), range(2, 4), range(4, 6), range(6, 6)]),  # pairs kept whole
    (8, 3, 2, [range(0, 4), range(4, 8), range(8, 8)]),
])
def test_each_rank_takes_a_contiguous_block(n, size, multiple, blocks):
    assert [share(n, r, size, multiple) for r in range(size)] == blocks


def test_each_row_draws_from_its_own_generator():
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
    seeds = [3, 1, 4]
    rows = RowGenerators(seeds, "cpu")
    drawn = torch.stack([rows.sample(probs) for _ in range(20)])  # (20, 3)
    for i, seed in enumerate(seeds):
        alone = torch.Generator().manual_seed(seed)
        assert drawn[:, i].tolist() == [torch.multinomial(probs[i : i + 1], 1, generator=alone).item()
                                        for _ in range(20)]
    with pytest.raises(ValueError, match="2 rows to sample but 3 row generators"):
        rows.sample(probs[:2])


def test_a_rows_tokens_do_not_depend_on_the_rows_beside_it(tiny):
    """The same key gives the same tokens in a batch of four, of two, or alone, padded or not (float32)."""
    sampling = ModelPolicy(tiny, temperature=0.8, top_p=0.9)
    short, long = [5, 17, 42], [5, 17, 42, 9, 3, 88, 21]
    keys = [11, 12, 13, 14]
    four = sampling.generate([long] * 4, 24, generator=RowGenerators(keys, "cpu"))
    two = sampling.generate([long] * 2, 24, generator=RowGenerators(keys[2:], "cpu"))
    assert two.tokens == four.tokens[2:]
    assert len({tuple(t) for t in four.tokens}) > 1  # the keys differ, so do the rows
    mixed = sampling.generate([short, long], 24, generator=RowGenerators([7, 8], "cpu"))  # left-padded
    assert sampling.generate([long], 24, generator=RowGenerators([8], "cpu")).tokens == mixed.tokens[1:]
    assert sampling.generate([short], 24, generator=RowGenerators([7], "cpu")).tokens == mixed.tokens[:1]


def test_shares_join_in_rank_order_with_their_counts_summed():
    a = Generation([[1, 2]], [2], [True], None, 3, 3, 2, 2, logprobs=[[-0.5, -1.0]])
    b = Generation([[4], [5, 6, 7]], [1, 3], [False, True], None, 6, 8, 4, 6, logprobs=[[-2.0], [-0.1, -0.2, -0.3]])
    assert joined([a, b]) == Generation([[1, 2], [4], [5, 6, 7]], [2, 1, 3], [True, False, True], None, 9, 11, 6, 8,
                                        None, None, [[-0.5, -1.0], [-2.0], [-0.1, -0.2, -0.3]])


class ThreadPeers:
    """Two ranks as two threads: `exchange` meets at a barrier, as the ranks' all-gather does."""

    def __init__(self, rank: int, size: int, board: list, barrier: threading.Barrier) -> None:
        self.rank, self.size, self.board, self.barrier = rank, size, board, barrier

    def exchange(self, value) -> list:
        self.board[self.rank] = value
        self.barrier.wait()
        every = list(self.board)
        self.barrier.wait()  # everyone has read before the next exchange writes
        return every

    def decoding(self, model):
        return nullcontext()


class Counting(ModelPolicy):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.batches: list[int] = []

    def generate(self, prompts, max_new_tokens, record_margins=False, generator=None):
        self.batches.append(len(prompts))
        return super().generate(prompts, max_new_tokens, record_margins, generator=generator)


def test_two_ranks_each_decoding_half_draw_the_one_process_tree(tiny):
    prompt = [5, 17, 42, 9, 3, 88, 21]
    tree = dict(horizon=40, K=4, B=2, t_min=4, t_max=12)

    def draw(peers=None):
        inner = Counting(tiny, temperature=0.8, top_p=0.9, record_logprobs=True)
        policy = PerRolloutPolicy(inner, seed=42, peers=peers)
        policy.at_step(3)
        return stopped_tree(policy, prompt, **tree), inner.batches

    whole, batches = draw()
    board, barrier, out = [None, None], threading.Barrier(2), [None, None]

    def rank(r):
        out[r] = draw(ThreadPeers(r, 2, board, barrier))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert batches == [4, 8]  # the roots, then two branches of each root
    for group, halves in out:
        assert halves == [2, 4]  # each rank decoded half of each call
        assert [leaf.tokens for leaf in group.leaves()] == [leaf.tokens for leaf in whole.leaves()]
        assert [leaf.prefix_len for leaf in group.leaves()] == [leaf.prefix_len for leaf in whole.leaves()]
        assert [leaf.logprobs for leaf in group.leaves()] == pytest.approx([leaf.logprobs for leaf in whole.leaves()])
    other = PerRolloutPolicy(ModelPolicy(tiny, temperature=0.8, top_p=0.9), seed=42)
    other.at_step(4)  # another step: other keys
    assert [leaf.tokens for leaf in stopped_tree(other, prompt, **tree).leaves()] != \
        [leaf.tokens for leaf in whole.leaves()]
