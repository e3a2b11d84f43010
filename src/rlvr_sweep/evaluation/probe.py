"""Prefix-splice probes between two checkpoints (seed paper §5.6 items 1-2, Table 5A).

`run_probe(donor, recipient, benchmarks, settings)`:
1. both checkpoints read every item out greedily, as the greedy read-out does (`schedule`, batches of
   `batch_size`, the read-out cap); these responses are the probe's record of A (donor) and B
   (recipient), and the items where A is right and B is wrong are the *discordant* items;
2. per discordant item, B is teacher-forced (one unpadded pass, `teacher_forcing`) along A's first
   ``span = min(160, |y_A|)`` tokens (agreement, B's margins, top-1 / top-2, log-probability of A's
   token), and along its own first 72 tokens (the margin pass of its self forks);
3. every condition of `probe_rules.CONDITIONS` gives B a prefix (`probe_rules.plan_cuts`), continued
   greedily in length-sorted batches (`continuation`, one set of batches per condition over all
   discordant items, each row recording ``eff_cap = cap - max_j K_j + K_i``), then graded.

Returns plain rows: ``greedy`` (one per item and role), ``items`` (one per discordant item: the
teacher-forced arrays, mismatch and newline positions, self forks) and ``rows`` (one per item and
condition: ``condition``, ``prefix_len``, ``eff_cap``, ``cont_batch``, fork tokens, and the grade
columns). `cli` writes them into a probe folder that `analysis` (Table 5A) and `verify` (PASS 4) read.
All lengths are in the profile's tokens (`ProbeSettings.scaled`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass

from rlvr_sweep.config import scaled_length
from rlvr_sweep.data import encode_prompts
from rlvr_sweep.evaluation.continuation import continue_prefixes
from rlvr_sweep.evaluation.fork_rules import min_margin_positions
from rlvr_sweep.evaluation.greedy import grade_row
from rlvr_sweep.evaluation.probe_rules import CONDITIONS, mismatch_positions, newline_positions, plan_cuts
from rlvr_sweep.evaluation.schedule import decode_readout
from rlvr_sweep.evaluation.teacher_forcing import teacher_forced
from rlvr_sweep.reward import grading
from rlvr_sweep.rollout import newline_ids

__all__ = ["ProbeResult", "ProbeSettings", "item_cuts", "run_probe"]
log = logging.getLogger(__name__)
PAPER = {"cap": 2048, "tf_tokens": 160, "self_cuts": (96, 160), "donor_cuts": (96, 160), "newline_min_pos": 5,
         "margin_tokens": 72, "fork_start": 4, "fork_end": 64, "min_continuation": 64}


@dataclass(frozen=True)
class ProbeSettings:
    """Every probe constant in this profile's tokens; `scaled` builds them from the paper's."""
    cap: int = 2048  # the read-out cap
    batch_size: int = 32  # greedy read-outs of both checkpoints
    schedule: str = "fixed"
    engine: str = "reference"
    tf_tokens: int = 160  # B teacher-forced along A's first tf_tokens
    self_cuts: tuple[int, int] = (96, 160)
    donor_cuts: tuple[int, int] = (96, 160)
    newline_min_pos: int = 5
    margin_tokens: int = 72  # B's own margin pass (self forks)
    fork_start: int = 4
    fork_end: int = 64
    fork_separation: int = 2  # adjacency, not a length
    continuation_batch_size: int = 64
    min_continuation: int = 64
    length_scale: float = 1.0

    @classmethod
    def scaled(cls, length_scale: float, paper: dict | None = None, **plain) -> "ProbeSettings":
        """The paper's lengths (`PAPER`, updated by `paper`) times `length_scale`, as every paper length
        budget, plus `plain` values (batch sizes, schedule, engine)."""
        s = lambda v: scaled_length(v, length_scale)  # noqa: E731
        merged = {**PAPER, **(paper or {})}
        lengths = {k: tuple(s(x) for x in v) if isinstance(v, tuple) else s(v) for k, v in merged.items()}
        return cls(**{**lengths, "length_scale": length_scale, **plain})

    def as_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass
class ProbeResult:
    greedy: list[dict]
    items: list[dict]
    rows: list[dict]


def run_probe(donor, recipient, benchmarks: dict[str, list[dict]], settings: ProbeSettings,
              grade=grading.grade) -> ProbeResult:
    """Probe `recipient` (B) with `donor`'s (A) prefixes on every discordant item of `benchmarks`."""
    s = settings
    if donor.tokenizer.get_vocab() != recipient.tokenizer.get_vocab():
        raise ValueError("donor and recipient use different tokenizers: their token prefixes cannot be spliced")
    newline = newline_ids(recipient.tokenizer)
    greedy, items, work = [], [], []  # work: (row, prompt, donor tokens, recipient tokens, item record)
    for name, rows in benchmarks.items():
        prompts = encode_prompts(recipient.tokenizer, [r["problem"] for r in rows])
        decoded = {}
        for role, policy in (("donor", donor), ("recipient", recipient)):
            log.info("probe: %s's greedy read-out of %s (%d items) ...", role, name, len(rows))
            gen = decode_readout(policy.model, prompts, schedule=s.schedule, engine=s.engine, batch_size=s.batch_size,
                                 max_new_tokens=s.cap, eos_id=policy.eos_id, pad_id=policy.pad_id, temperature=0.0,
                                 top_p=1.0)
            graded = [grade_row(policy, row, toks, n, fin, benchmark=name, phase="probe", index=i, grade=grade)
                      for i, (row, toks, n, fin) in enumerate(zip(rows, gen.tokens, gen.lengths, gen.finished))]
            greedy += [{**g, "role": role} for g in graded]
            decoded[role] = (gen.tokens, graded)
        (a_tokens, a_graded), (b_tokens, b_graded) = decoded["donor"], decoded["recipient"]
        for i, row in enumerate(rows):
            if not (a_graded[i]["correct"] and not b_graded[i]["correct"]):
                continue
            record = _item_record(recipient, prompts[i], list(a_tokens[i]), list(b_tokens[i]), newline, s)
            items.append({"benchmark": name, "source": row.get("source", name), "item_id": row["id"], "index": i,
                          **record})
            work.append((row, prompts[i], list(a_tokens[i]), list(b_tokens[i]), items[-1]))
        log.info("probe %s: %d items, %d discordant (donor right, recipient wrong)", name, len(rows),
                 sum(1 for item in items if item["benchmark"] == name))
    out = []
    for condition in CONDITIONS:
        specs = []  # (row, item, prompt, prefix, details)
        for row, prompt, y_a, y_b, item in work:
            cuts = item_cuts(item, y_a, y_b, s)
            if condition in cuts:
                specs.append((row, item, prompt, *cuts[condition]))
        if not specs:
            continue
        log.info("probe: condition %s, %d continuations ...", condition, len(specs))
        cont = continue_prefixes(recipient.model, [sp[2] for sp in specs], [sp[3] for sp in specs], cap=s.cap,
                                 batch_size=s.continuation_batch_size, min_new=s.min_continuation, engine=s.engine,
                                 eos_id=recipient.eos_id, pad_id=recipient.pad_id)
        for j, (row, item, _, prefix, detail) in enumerate(specs):
            graded = grade_row(recipient, row, cont.tokens[j], len(cont.tokens[j]), cont.finished[j],
                               benchmark=item["benchmark"], phase="probe", index=item["index"], grade=grade)
            out.append({**graded, "condition": condition, "prefix_len": len(prefix), "eff_cap": cont.eff_cap[j],
                        "cont_batch": cont.batch[j], "fork_pos": detail.get("fork_pos", -1),
                        "orig_token": detail.get("orig_token", -1), "inserted_token": detail.get("inserted_token", -1),
                        "top1_token": detail.get("top1_token", -1)})
    return ProbeResult(greedy, items, out)


def item_cuts(item: dict, y_a: list[int], y_b: list[int], s: ProbeSettings) -> dict:
    """{condition: (prefix, details)} of one stored item record (verify recomputes the cuts with it)."""
    forks = tuple(None if t < 0 else t for t in (item["self_t_min1"], item["self_t_min2"]))
    return plan_cuts(donor=y_a, recipient=y_b, mismatches=list(item["mismatches"]), newlines=list(item["newlines"]),
                     span=item["span"], self_forks=forks, self_top1=list(item["self_tf_top1"]),
                     self_top2=list(item["self_tf_top2"]), self_cuts=s.self_cuts, donor_cuts=s.donor_cuts)


def _item_record(recipient, prompt: list[int], y_a: list[int], y_b: list[int], newline: frozenset,
                 s: ProbeSettings) -> dict:
    """Teacher-forced agreement of B along A's first span tokens, and B's own margin pass."""
    span = min(s.tf_tokens, len(y_a))
    tf = teacher_forced(recipient.model, prompt, y_a[:span])
    own = teacher_forced(recipient.model, prompt, y_b[: s.margin_tokens])
    t1, t2 = min_margin_positions(own.margins, s.fork_start, s.fork_end, s.fork_separation)
    return {
        "prompt_tokens": prompt, "donor_tokens": y_a, "recipient_tokens": y_b, "span": span,
        "tf_top1": tf.top1, "tf_top2": tf.top2, "tf_margins": tf.margins, "tf_logprob": tf.logprob,
        "mismatches": mismatch_positions(tf.top1, y_a[:span]),
        "newlines": newline_positions(y_a, lambda t: t in newline, s.newline_min_pos),
        "self_tf_margins": own.margins, "self_tf_top1": own.top1, "self_tf_top2": own.top2,
        "self_t_min1": -1 if t1 is None else t1, "self_t_min2": -1 if t2 is None else t2,  # -1: no position
        # geometric-mean probability B gives A's tokens over the span (paper: 89.07%)
        "tf_geo_prob": math.exp(sum(tf.logprob) / span) if span else math.nan,
    }
