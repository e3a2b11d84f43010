"""Greedy read-out of a policy on benchmark items (seed paper §5; baseline spec §8).

Items are decoded greedily in left-padded batches with the training prompt template; the response
(EOS not included) is extracted with the default fallback (`number_then_full`) and graded against
the gold answer. One row per item goes to `grades.parquet`.
"""

from __future__ import annotations

import logging
import time

from rlvr_sweep.data import encode_prompts
from rlvr_sweep.reward import grading
from rlvr_sweep.rollout import generate

log = logging.getLogger(__name__)


def evaluate_greedy(policy, rows: list[dict], *, benchmark: str, phase: str, max_new_tokens: int, batch_size: int,
                    grade=grading.grade) -> list[dict]:
    """Grade greedy responses to `rows`; returns one dict per item.

    `capped`: stopped at max_new_tokens without EOS; the paper's AllCap2048 counts these "test cap
    hits" (at 2048 tokens). `inc_trunc`: capped and graded incorrect (IncTrunc, so never above
    AllCap). `capped_unboxed`: capped with no braced box, a finer count kept for analysis."""
    graded: list[dict] = []
    correct = 0
    start = time.perf_counter()
    for lo in range(0, len(rows), batch_size):
        batch = rows[lo : lo + batch_size]
        prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in batch])
        gen = generate(
            policy.model, prompts, max_new_tokens=max_new_tokens, eos_id=policy.eos_id,
            pad_id=policy.pad_id, temperature=0.0, top_p=1.0,
        )
        for row, tokens, length, finished in zip(batch, gen.tokens, gen.lengths, gen.finished):
            text = policy.tokenizer.decode(tokens[:-1] if finished else tokens, skip_special_tokens=False)
            extracted = grading.extract_answer(text)
            ok = bool(grade(extracted, row["answer"]))
            has_box = grading.extract_answer(text, fallback=None) != ""
            correct += ok
            graded.append({
                "phase": phase, "benchmark": benchmark, "source": row.get("source", benchmark), "item_id": row["id"],
                "index": len(graded), "length": length - int(finished),  # generated tokens, EOS not counted
                "finished": finished, "capped": not finished, "has_box": has_box,
                "capped_unboxed": not finished and not has_box, "inc_trunc": not finished and not ok,
                "extracted": extracted, "gold": row["answer"], "correct": ok, "response": text,
            })
        elapsed = time.perf_counter() - start
        log.info("eval %s %s %d/%d acc %.3f (%.1fs)", phase, benchmark, len(graded), len(rows), correct / len(graded), elapsed)
    return graded
