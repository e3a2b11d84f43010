"""What only a GPU can show (skipped on a machine without CUDA; `bench/gpu_check.py` runs them there):
the static engine's CUDA-graph decode against the reference engine, in float32 and bfloat16, the
candidate-set nucleus filter kept off CUDA tensors (where it is not the full sort bit for bit), and
`model.engine=auto` choosing static for float32 and the reference for bf16 on a GPU (`engines.PROVEN_IDENTICAL`), and
`model.memory_share` capping this process's allocator."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.rollout import engine, engines, nucleus, static_engine
from rlvr_sweep.rollout.nucleus import _top_p_candidates, top_p_sorted
from tests.conftest import make_random_qwen3
from tests.rollout.test_static_engine import PAD, RAGGED

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _both(model, **kw):
    ref = engine.generate(model, RAGGED, generator=torch.Generator("cuda").manual_seed(0), **kw)
    fast = static_engine.generate(model, RAGGED, generator=torch.Generator("cuda").manual_seed(0), **kw)
    return ref, fast


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_graph_decode_agrees_with_the_reference(dtype):
    model = make_random_qwen3(seed=3).to("cuda", dtype).eval()
    ref, fast = _both(model, max_new_tokens=24, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0,
                      record_margins=True)
    same = sum(a == b for a, b in zip(ref.tokens, fast.tokens))
    first = [next((t for t, (a, b) in enumerate(zip(r, f)) if a != b), None) for r, f in zip(ref.tokens, fast.tokens)]
    gaps = [ref.margins[i][t] for i, t in enumerate(first) if t is not None]  # the reference's top-1 minus top-2
    print(f"gpu greedy {dtype}: {same}/{len(ref.tokens)} rows token-identical; reference logit margins where a "
          f"row first differs: {gaps}")
    static_engine.release(model)
    if dtype == torch.float32:
        assert same == len(ref.tokens)  # what lets model.engine=auto use static on a GPU in float32
    else:  # bf16 logits tie or nearly tie often on a random model: a row may part only at such a step
        assert all(g <= 0.125 for g in gaps), gaps


def test_the_candidate_filter_stays_off_cuda_where_it_is_not_the_full_sort():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 151_936, generator=g)
    logits[:, :40] += torch.linspace(12, 4, 40)
    probs = torch.softmax(logits.to("cuda", torch.bfloat16) / 0.6, dim=-1)
    rows = [_top_p_candidates(row, 0.9) for row in probs]
    full = top_p_sorted(probs, 0.9)
    decided = [(r, f) for r, f in zip(rows, full) if r is not None]
    equal = sum(torch.equal(r / r.sum(), f) for r, f in decided)
    print(f"candidate top-p on CUDA: {len(decided)}/8 rows decided on candidates, {equal} equal to the full sort "
          f"(CANDIDATE_DEVICES: {nucleus.CANDIDATE_DEVICES})")
    if equal < len(decided) or not decided:  # not bit-exact on CUDA: the filter must take the full sort there
        assert "cuda" not in nucleus.CANDIDATE_DEVICES
    assert torch.equal(nucleus.top_p_filter(probs, 0.9), full)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_draw_inside_the_graph_is_the_eager_draw(dtype, monkeypatch):
    """Sampling inside the captured step (`static_engine.in_graph_sampling`) against the same loop sampling eagerly,
    graphs both: the same tokens and generator state, in both dtypes, with 4 candidates (many rows to the sort) and
    the default; and the candidate draw against the sort's at Qwen3's vocabulary. What puts CUDA in
    `IN_GRAPH_SAMPLING_DEVICES`."""
    from rlvr_sweep.rollout import graph_sampler, step_graphs

    monkeypatch.setattr(static_engine, "IN_GRAPH_SAMPLING_DEVICES", ("cpu", "cuda"))
    model = make_random_qwen3(seed=3).to("cuda", dtype).eval()
    kw = dict(max_new_tokens=24, eos_id=None, pad_id=PAD, temperature=0.8, top_p=0.9)
    for candidates in (4, step_graphs.IN_GRAPH_CANDIDATES):
        monkeypatch.setattr(step_graphs, "IN_GRAPH_CANDIDATES", candidates)
        runs = []
        for in_graph in (True, False):
            monkeypatch.setattr(static_engine, "IN_GRAPH_SAMPLING", in_graph)
            static_engine.release(model)
            gen = torch.Generator("cuda").manual_seed(4)
            runs.append((static_engine.generate(model, RAGGED, generator=gen, **kw), gen.get_state()))
        assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1]), candidates
    static_engine.release(model)
    logits = torch.randn(8, 151_936, generator=torch.Generator().manual_seed(0))
    logits[:, :40] += torch.linspace(12, 4, 40)
    probs = graph_sampler.probabilities(logits.to("cuda", dtype), 0.6)
    q = graph_sampler.noise(probs, torch.Generator("cuda").manual_seed(1))
    tokens, decided = graph_sampler.candidate_tokens(probs, 0.9, q, 1024)
    print(f"in-graph draw on CUDA {dtype}: {int(decided.sum())}/8 rows decided on 1,024 candidates")
    assert torch.equal(tokens[decided], graph_sampler.sorted_tokens(probs, 0.9, q)[decided])


def test_auto_decodes_float32_with_static_and_bf16_with_the_reference_on_a_gpu(monkeypatch):
    called = []
    monkeypatch.setattr(engines.static_engine, "generate", lambda *a, **k: called.append("static"))
    monkeypatch.setattr(engines.engine, "generate", lambda *a, **k: called.append("reference"))
    model = make_random_qwen3(seed=3).to("cuda", torch.float32)
    engines.auto_generate(model, [[1]])
    engines.auto_generate(model.to(torch.bfloat16), [[1]])
    assert called == ["static", "reference"]
    assert engines.auto_choice(model)[0] == "reference"


def test_a_memory_share_caps_the_allocator_of_this_process():
    """`model.memory_share` (k runs on one GPU): past the share, an allocation fails here instead of taking the memory
    of the runs beside it; what is under it allocates as before."""
    from rlvr_sweep.policy.loading import cap_memory

    device = torch.device("cuda")
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.empty_cache()
    share = torch.cuda.memory_reserved(device) / total + 0.05  # what earlier tests still hold, and 5 % more
    try:
        assert cap_memory(device, share) is True
        assert torch.cuda.get_per_process_memory_fraction(device) == pytest.approx(share)
        small = torch.empty(int(0.02 * total), dtype=torch.uint8, device=device)
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(int(0.06 * total), dtype=torch.uint8, device=device)
        del small
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        torch.cuda.empty_cache()
