"""The fast engine (`static_engine.generate`) against the reference engine, on CPU in float32.

The static engine prefills exactly as the reference does and then runs `qwen3_step.decode_step`, which
mirrors the model's kernels over exactly the reference's cache length, so logits are bitwise equal:
greedy and sampled tokens, margins, top-2 ids, finished flags, accounting and the generator's state
afterwards must all be identical (not merely close).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

from rlvr_sweep.rollout import ENGINES, engine, graph_sampler, static_engine, step_graphs
from rlvr_sweep.rollout.qwen3_step import Qwen3StepWeights, UnsupportedModel, decode_step
from rlvr_sweep.rollout.step_graphs import row_bucket, window_bucket
from tests.conftest import REPO, make_random_qwen3

TINY = REPO / "src" / "rlvr_sweep" / "policy" / "assets" / "tiny_qwen3"
PAD = 0
RAGGED = [[5, 9, 13], [7, 21, 3, 44, 2, 8, 30], [17, 60, 33, 1, 12], [40, 41, 42, 43, 44, 45, 46, 47, 48, 49],
          [11], [30, 31]]


@pytest.fixture(scope="module")
def tiny():
    return AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def random_model():
    return make_random_qwen3(seed=3, vocab=64)


def both(model, prompts, **kw):
    """(reference, static) generations of the same call; generators seeded alike, states compared."""
    seed = kw.pop("seed", None)
    outs, states = [], []
    for fn in (engine.generate, static_engine.generate):
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        outs.append(fn(model, prompts, generator=gen, **kw))
        states.append(None if gen is None else gen.get_state())
    if seed is not None:
        assert torch.equal(states[0], states[1]), "the generator advanced differently"
    return outs


def assert_same(ref, fast):
    assert fast == ref  # every field of the dataclass: tokens, lengths, finished, margins, top-2, accounting


def mixed_stop_eos(model, prompts, max_new) -> int:
    """A token some rows emit greedily before the cap and other rows never emit (early EOS for some)."""
    free = engine.generate(model, prompts, max_new_tokens=max_new, eos_id=None, pad_id=PAD, temperature=0,
                           top_p=1.0).tokens
    for row in free:
        for tok in row[: max_new - 1]:
            if tok != PAD and any(tok not in other for other in free):
                return tok
    pytest.fail("no token splits the rows into early-stop and capped")


@pytest.mark.parametrize("which", ["tiny", "random_model"])
def test_greedy_identical_with_early_eos_and_margins(which, request):
    model = request.getfixturevalue(which)
    eos = mixed_stop_eos(model, RAGGED, 24)
    ref, fast = both(model, RAGGED, max_new_tokens=24, eos_id=eos, pad_id=PAD, temperature=0, top_p=1.0,
                     record_margins=True)
    assert any(ref.finished) and not all(ref.finished)
    assert_same(ref, fast)


@pytest.mark.parametrize("which", ["tiny", "random_model"])
@pytest.mark.parametrize("temperature,top_p", [(0.8, 0.9), (1.0, 1.0), (0.6, 0.5)])
def test_sampled_identical_under_the_same_generator(which, temperature, top_p, request):
    model = request.getfixturevalue(which)
    eos = mixed_stop_eos(model, RAGGED, 24)
    ref, fast = both(model, RAGGED, max_new_tokens=24, eos_id=eos, pad_id=PAD, temperature=temperature,
                     top_p=top_p, record_margins=True, seed=11)
    assert_same(ref, fast)


def test_unpadded_group_and_single_row(tiny):
    group = [[3, 14, 15, 92, 65]] * 8  # a GRPO group: G copies of one prompt, no padding, no mask
    ref, fast = both(tiny, group, max_new_tokens=20, eos_id=-1, pad_id=PAD, temperature=0.8, top_p=0.9, seed=5)
    assert_same(ref, fast)
    ref, fast = both(tiny, [[7, 8, 9]], max_new_tokens=20, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    assert_same(ref, fast)


def test_token_accounting_equal(tiny):
    eos = mixed_stop_eos(tiny, RAGGED, 16)
    ref, fast = both(tiny, RAGGED, max_new_tokens=16, eos_id=eos, pad_id=PAD, temperature=0, top_p=1.0)
    for field in ("prefill_tokens", "padded_prefill_tokens", "generated_tokens", "untrimmed_steps"):
        assert getattr(fast, field) == getattr(ref, field), field
    assert fast.prefill_tokens == sum(map(len, RAGGED))
    assert fast.padded_prefill_tokens == len(RAGGED) * 10
    assert fast.untrimmed_steps == len(RAGGED) * max(fast.lengths)
    assert fast.generated_tokens == sum(fast.lengths) == sum(map(len, fast.tokens))


def test_weights_changed_between_calls_are_used(random_model):
    """Training updates parameters in place (and may reallocate them): the next call must see both."""
    model = make_random_qwen3(seed=4, vocab=64)
    kw = dict(max_new_tokens=12, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    static_engine.generate(model, RAGGED, **kw)  # builds the session and its concatenated weights
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    model.train()
    model(input_ids=torch.tensor([RAGGED[1]]), labels=torch.tensor([RAGGED[1]])).loss.backward()
    opt.step()  # in place
    assert static_engine.generate(model, RAGGED, **kw) == engine.generate(model, RAGGED, **kw)
    assert model.training  # the caller's mode is restored
    with torch.no_grad():
        layer = model.model.layers[0].self_attn
        layer.k_proj.weight = torch.nn.Parameter(layer.k_proj.weight * 1.5)  # reallocated
    assert static_engine.generate(model, RAGGED, **kw) == engine.generate(model, RAGGED, **kw)


def test_decode_step_logits_bitwise_equal_to_the_model(tiny):
    """One step on a cache filled by the model's own prefill equals the model's forward on that cache."""
    session = static_engine.session_for(tiny)
    session.refresh()
    runner = session.runner(2, 16)
    prompts = [[1, 2, 3, 4], [5, 6, 7, 8]]
    ids = torch.tensor(prompts)
    with torch.no_grad():
        out = tiny(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        runner.cache.load_prefill([(lay.keys, lay.values) for lay in cache.layers], None, torch.ones(2, 4, dtype=bool))
        nxt = torch.tensor([9, 10])
        pos = torch.tensor([4, 4])
        ours = decode_step(session.weights, runner.cache, runner.cos, runner.sin, nxt, pos, pos, 5, use_mask=False)
        theirs = tiny(input_ids=nxt[:, None], position_ids=pos[:, None], use_cache=True,
                      **{engine._cache_kwarg(tiny): cache}).logits
    assert torch.equal(ours, theirs[:, -1])


def test_edge_cases(tiny):
    kw = dict(eos_id=0, pad_id=PAD, temperature=0, top_p=1.0)
    for record in (False, True):
        assert static_engine.generate(tiny, [], max_new_tokens=5, record_margins=record, **kw) == engine.generate(
            tiny, [], max_new_tokens=5, record_margins=record, **kw)
        assert static_engine.generate(tiny, RAGGED, max_new_tokens=0, record_margins=record, **kw) == \
            engine.generate(tiny, RAGGED, max_new_tokens=0, record_margins=record, **kw)
    with pytest.raises(ValueError, match="at least one token"):
        static_engine.generate(tiny, [[1], []], max_new_tokens=3, **kw)
    with pytest.raises(ValueError, match="temperature"):
        static_engine.generate(tiny, [[1]], max_new_tokens=3, eos_id=0, pad_id=0, temperature=-1, top_p=1.0)


def test_unsupported_models_are_refused_by_name():
    cfg = Qwen3Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, attention_bias=True)
    with pytest.raises(UnsupportedModel, match="attention bias"):
        Qwen3StepWeights(Qwen3ForCausalLM(cfg))
    dynamic = Qwen3Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                          rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
    with pytest.raises(UnsupportedModel, match="dynamic"):
        Qwen3StepWeights(Qwen3ForCausalLM(dynamic))
    with pytest.raises(UnsupportedModel, match="Qwen3ForCausalLM"):
        static_engine.generate(torch.nn.Linear(2, 2), [[1]], max_new_tokens=2, eos_id=0, pad_id=0,
                               temperature=0, top_p=1.0)


def test_bf16_runs_and_restores_mode():
    model = make_random_qwen3(seed=5).to(torch.bfloat16).train()
    out = static_engine.generate(model, RAGGED, max_new_tokens=6, eos_id=None, pad_id=PAD, temperature=0.8,
                                 top_p=0.9, generator=torch.Generator().manual_seed(0), record_margins=True)
    assert out.lengths == [6] * len(RAGGED) and len(out.margins[0]) == 6
    assert model.training


def test_engine_registry():
    assert ENGINES["reference"].fn is engine.generate
    assert ENGINES["static"].fn is static_engine.generate
    assert set(ENGINES) == {"reference", "static", "vllm", "auto"}
    with pytest.raises(ValueError, match=r"unknown rollout engine 'fast'; valid: \['auto', 'reference', 'static', 'vllm'\]"):
        ENGINES["fast"]


def test_buckets():
    assert [row_bucket(n) for n in (1, 3, 8, 9, 33, 600)] == [1, 4, 8, 16, 48, 600]
    assert window_bucket(1, 2304) == 256 and window_bucket(256, 2304) == 256 and window_bucket(257, 2304) == 512
    assert window_bucket(2300, 2304) == 2304  # never past the cache


def test_gpu_shapes_on_cpu_give_the_same_tokens(tiny):
    """The GPU loop's shapes without a GPU: batch padded to a row bucket (inert rows), attention over a
    bucketed window (masked tail), the finished flag read every 16 steps (overrun trimmed)."""
    model = AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.float32).eval()
    session = static_engine.session_for(model, gpu_like=True)
    assert session.rows_for(len(RAGGED)) == 8 and session.check_every == static_engine.CHECK_EVERY
    eos = mixed_stop_eos(model, RAGGED, 40)
    kw = dict(max_new_tokens=40, eos_id=eos, pad_id=PAD, temperature=0, top_p=1.0, record_margins=True)
    ref = engine.generate(model, RAGGED, **kw)
    fast = static_engine.generate(model, RAGGED, **kw)
    assert fast.tokens == ref.tokens and fast.finished == ref.finished and fast.top1 == ref.top1
    assert fast.untrimmed_steps == ref.untrimmed_steps
    for a, b in zip(fast.margins, ref.margins):
        assert a == pytest.approx(b, abs=1e-4)
    runner = session.slots[8][1]
    assert runner.cache.capacity % 256 == 0 and runner.window_for(11) == 256

    # Every row stops early: the loop overruns the last EOS by up to 15 steps; output and accounting
    # are still the reference's (which stops at once).
    free = engine.generate(model, RAGGED, max_new_tokens=20, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    eos = max({t for row in free.tokens for t in row}, key=lambda tok: sum(tok in row for row in free.tokens))
    batch = [p for p, row in zip(RAGGED, free.tokens) if eos in row]  # the rows that emit it within 20 steps
    assert len(batch) >= 2
    kw["eos_id"] = eos
    ref = engine.generate(model, batch, **kw)
    fast = static_engine.generate(model, batch, **kw)
    assert all(ref.finished) and max(ref.lengths) <= 20
    assert fast.tokens == ref.tokens and fast.untrimmed_steps == ref.untrimmed_steps


@pytest.mark.parametrize("candidates", [4, step_graphs.IN_GRAPH_CANDIDATES])
def test_gpu_shapes_draw_inside_the_step_as_the_eager_sampler_does(tiny, candidates, monkeypatch):
    """The GPU loop's draw inside its step (`graph_sampler` on each row's likeliest tokens, the sort for the rows
    they leave undecided) against the same loop sampling eagerly: the same tokens, the generator in the same
    state; and the reference engine's tokens. 4 candidates leave many rows to the sort, the default few."""
    monkeypatch.setattr(step_graphs, "IN_GRAPH_CANDIDATES", candidates)
    undecided = []
    sort = graph_sampler.sorted_tokens
    monkeypatch.setattr(graph_sampler, "sorted_tokens", lambda *a: undecided.append(1) or sort(*a))
    model = AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.float32).eval()
    static_engine.session_for(model, gpu_like=True)
    kw = dict(max_new_tokens=30, eos_id=None, pad_id=PAD, temperature=0.8, top_p=0.9)
    runs = {}
    for in_graph in (True, False):
        monkeypatch.setattr(static_engine, "IN_GRAPH_SAMPLING", in_graph)
        gen = torch.Generator().manual_seed(11)
        runs[in_graph] = static_engine.generate(model, RAGGED, generator=gen, **kw), gen.get_state()
    assert runs[True][0] == runs[False][0] and torch.equal(runs[True][1], runs[False][1])
    assert (len(undecided) > 0) == (candidates == 4)
    ref = engine.generate(model, RAGGED, generator=torch.Generator().manual_seed(11), **kw)
    assert runs[True][0].tokens == ref.tokens


def test_sessions_do_not_keep_models_alive():
    import gc
    import weakref

    model = make_random_qwen3(seed=6)
    static_engine.generate(model, RAGGED, max_new_tokens=3, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    alive = weakref.ref(model)
    assert model in static_engine._SESSIONS
    del model
    gc.collect()
    assert alive() is None  # the session (caches, weight copies) went with it
