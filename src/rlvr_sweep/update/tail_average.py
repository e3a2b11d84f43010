"""FP32 Polyak tail averaging of the weights (Table 3 `ra_mst_tail50`: steps 26..50).

After each update at a step inside [first, last] (1-based), the running mean of the parameters is
updated in float32; at the end of training the mean replaces the last weights (cast back to the
model's dtype), so the trained read-out evaluates the averaged policy.
"""

from __future__ import annotations

import torch


class TailAverage:
    def __init__(self, params: list[torch.nn.Parameter], first: int, last: int):
        if not 1 <= first <= last:
            raise ValueError(f"train.tail_average needs 1 <= first <= last, got [{first}, {last}]")
        self.params, self.first, self.last = params, first, last
        self.mean = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.count = 0

    def observe(self, step: int) -> None:
        """Fold in the weights after `step` (1-based) when it lies in the window."""
        if not self.first <= step <= self.last:
            return
        self.count += 1
        with torch.no_grad():
            for m, p in zip(self.mean, self.params):
                m.add_(p.detach().float() - m, alpha=1.0 / self.count)

    def load_into(self, params: list[torch.nn.Parameter]) -> None:
        """Replace the weights by the window's mean (no-op if no step fell in the window)."""
        if self.count == 0:
            return
        with torch.no_grad():
            for m, p in zip(self.mean, params):
                p.copy_(m.to(p.dtype))

    def state(self) -> dict:
        return {"mean": self.mean, "count": self.count}

    def load_state(self, state: dict) -> None:
        self.mean, self.count = state["mean"], state["count"]
