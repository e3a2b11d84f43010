"""What only a GPU can show (skipped on a machine without CUDA; `bench/gpu_check.py` runs them there):
the static engine's CUDA-graph decode against the reference engine, in float32 and bfloat16, the
candidate-set nucleus filter on CUDA tensors, and `model.engine=auto` choosing the reference on a GPU."""

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
    ref, fast = _both(model, max_new_tokens=24, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    same = sum(a == b for a, b in zip(ref.sequences, fast.sequences))
    print(f"gpu greedy {dtype}: {same}/{len(ref.sequences)} rows token-identical")
    if dtype == torch.float32:
        assert same == len(ref.sequences)  # what would let model.engine=auto use static on a GPU in float32
    static_engine.release(model)


def test_the_candidate_filter_on_cuda_tensors_matches_the_full_sort():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 151_936, generator=g)
    logits[:, :40] += torch.linspace(12, 4, 40)
    probs = torch.softmax(logits.to("cuda", torch.bfloat16) / 0.6, dim=-1)
    rows = [_top_p_candidates(row, 0.9) for row in probs]
    full = top_p_sorted(probs, 0.9)
    decided = [(r, f) for r, f in zip(rows, full) if r is not None]
    print(f"candidate top-p on CUDA: {len(decided)}/8 rows decided on candidates "
          f"(CANDIDATE_DEVICES: {nucleus.CANDIDATE_DEVICES})")
    assert decided and all(torch.equal(r / r.sum(), f) for r, f in decided)  # what would let CUDA join them


def test_auto_decodes_with_the_reference_on_a_gpu(monkeypatch):
    called = []
    monkeypatch.setattr(engines.engine, "generate", lambda *a, **k: called.append("reference"))
    engines.auto_generate(torch.nn.Linear(2, 2).cuda(), [[1]])
    assert called == ["reference"]
