"""What a pass of `verify all` found: its one-line summary, its problems and its seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

SHOWN = 20  # problems printed per pass (all are counted)


@dataclass
class PassResult:
    name: str
    summary: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self, shown: int = SHOWN) -> list[str]:
        head = f"{self.name} {'ok' if self.ok else 'FAILED'}: {self.summary}"
        head += f"; {len(self.problems)} problem(s)" if self.problems else ""
        out = [f"{head} [{self.seconds:.1f}s]"] + [f"   {p}" for p in self.problems[:shown]]
        if len(self.problems) > shown:
            out.append(f"   ... {len(self.problems) - shown} more")
        return out
