"""Progress of long work (training steps, read-out items): a tqdm bar in a terminal, periodic plain
lines elsewhere (SLURM logs, files), both with done / total, rate, tokens/s and ETA.

tqdm rewrites its line with carriage returns, which a log file keeps as one endless line; so when
the stream is not a terminal the same figures (tqdm's own formatting) go to the run's logger every
`every_s` seconds and once at the end. Each update also rewrites the run's progress file when one is
open (`store.beacon`: what `status` shows of a running run).
"""

from __future__ import annotations

import logging
import sys
import time

from tqdm import tqdm

from rlvr_sweep.store import beacon

log = logging.getLogger(__name__)
PLAIN_EVERY_S = 30.0


class Progress:
    def __init__(self, total: int, desc: str, unit: str, *, initial: int = 0, stream=None,
                 every_s: float = PLAIN_EVERY_S):
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, every_s
        self.n, self.initial, self.tokens, self.postfix = initial, initial, 0, ""
        self.started = self.last_line = self.last_update = time.monotonic()
        stream = stream or sys.stderr
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, dynamic_ncols=True,
                        leave=False) if stream.isatty() else None

    def update(self, n: int = 1, tokens: int = 0, **postfix) -> None:
        self.n += n
        self.tokens += tokens
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = f"{self.tokens / elapsed:,.0f} tok/s" if self.tokens else ""
        self.postfix = ", ".join([*(f"{k} {v}" for k, v in postfix.items()), *([rate] if rate else [])])
        if self.bar is not None:
            self.bar.set_postfix_str(self.postfix, refresh=False)
            self.bar.update(n)
        elif time.monotonic() - self.last_line >= self.every_s:
            self._line(elapsed)
        self._beacon(elapsed)

    def _beacon(self, elapsed: float) -> None:
        """The run's progress file: this phase's done / total, rate and ETA (`store.beacon`)."""
        now, signal = time.monotonic(), beacon.current()
        last, self.last_update = now - self.last_update, now
        if signal is None:
            return
        done = self.n - self.initial
        rate = done / elapsed if done else None
        signal.update(phase=self.desc, done=self.n, total=self.total, unit=self.unit, last_seconds=round(last, 3),
                      tokens_per_s=round(self.tokens / elapsed, 1) if self.tokens else None,
                      eta_s=round((self.total - self.n) / rate, 1) if rate else None)

    def _line(self, elapsed: float) -> None:
        self.last_line = time.monotonic()
        meter = tqdm.format_meter(self.n, self.total, elapsed, unit=self.unit, prefix=self.desc, ncols=0,
                                  initial=self.initial)
        log.info("%s%s", meter, f" [{self.postfix}]" if self.postfix else "")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self._line(max(time.monotonic() - self.started, 1e-9))
