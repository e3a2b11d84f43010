"""Greedy read-out of a policy on benchmark items (seed paper §5; baseline spec §8).

Items are decoded greedily with the training prompt template, in left-padded batches of 32 in
dataset order by default (`settings.schedule`; the paper shows batch composition flips 4.7% of
bf16 grades, so any other schedule is part of the run's identity); the response (EOS not included)
is extracted with the default fallback (`number_then_full`) and graded against the gold answer.
One row per item goes to `grades.parquet`.
"""

from __future__ import annotations

from rlvr_sweep.data import encode_prompts
from rlvr_sweep.evaluation.readout import ReadoutSettings
from rlvr_sweep.evaluation.schedule import decode_readout
from rlvr_sweep.reward import grading


def grade_row(policy, row: dict, tokens: list[int], length: int, finished: bool, *, benchmark: str, phase: str,
              index: int, grade, settings: ReadoutSettings | None = None) -> dict:
    """One `grades` row for a decoded response (`tokens` may end with EOS when `finished`).

    `capped`: stopped at the cap without EOS; the paper's AllCap2048 counts these "test cap hits".
    `inc_trunc`: capped and graded incorrect (IncTrunc, so never above AllCap). `capped_unboxed`:
    capped with no braced box, a finer count kept for analysis. A task of one's own reads its answers with
    its own extraction (`settings.extract`; `has_box`: its strict one found an answer)."""
    text = policy.tokenizer.decode(tokens[:-1] if finished else tokens, skip_special_tokens=False)
    extract = (settings.extract if settings else None) or grading.extract_answer
    strict = (settings.extract_strict if settings else None) or (lambda t: grading.extract_answer(t, fallback=None))
    extracted = extract(text)
    ok = bool(grade(extracted, row["answer"]))
    has_box = strict(text) != ""
    return {
        "phase": phase, "benchmark": benchmark, "source": row.get("source", benchmark), "item_id": row["id"],
        "index": index, "length": length - int(finished),  # generated tokens, EOS not counted
        "finished": finished, "capped": not finished, "has_box": has_box,
        "capped_unboxed": not finished and not has_box, "inc_trunc": not finished and not ok,
        "extracted": extracted, "gold": row["answer"], "correct": ok, "response": text,
    }


def evaluate_greedy(policy, rows: list[dict], *, benchmark: str, phase: str, settings: ReadoutSettings,
                    grade=grading.grade, on_batch=None) -> list[dict]:
    """Grade greedy responses to `rows`; one dict per item, in item order."""
    prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in rows], settings.prompt)
    gen = decode_readout(policy.model, prompts, schedule=settings.schedule, engine=settings.engine,
                         batch_size=settings.batch_size, max_new_tokens=settings.max_new_tokens,
                         eos_id=policy.eos_id, pad_id=policy.pad_id, temperature=0.0, top_p=1.0,
                         slots=settings.slots, on_batch=on_batch)
    return [grade_row(policy, row, tokens, length, finished, benchmark=benchmark, phase=phase, index=i, grade=grade,
                      settings=settings)
            for i, (row, tokens, length, finished) in enumerate(zip(rows, gen.tokens, gen.lengths, gen.finished))]
