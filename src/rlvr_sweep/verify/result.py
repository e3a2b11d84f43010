"""What a pass of `verify all` found: its one-line summary, its problems, what it could not check and its seconds.

A pass with problems FAILED; one without problems that left something unchecked (a plugin's rewards or
grades, re-derived only with `--plugins`) is INCOMPLETE, not ok: `verify` exits with its own code for it."""

from __future__ import annotations

from dataclasses import dataclass, field

SHOWN = 20  # problems printed per pass (all are counted)


@dataclass
class PassResult:
    name: str
    summary: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    unchecked: list[str] = field(default_factory=list)  # what it could not check, and why

    @property
    def ok(self) -> bool:
        """No problem found (see `complete` for whether everything was checked)."""
        return not self.problems

    @property
    def complete(self) -> bool:
        return not self.unchecked

    @property
    def verdict(self) -> str:
        return "FAILED" if self.problems else "INCOMPLETE" if self.unchecked else "ok"

    def lines(self, shown: int = SHOWN) -> list[str]:
        head = f"{self.name} {self.verdict}: {self.summary}"
        head += f"; {len(self.problems)} problem(s)" if self.problems else ""
        head += f"; {len(self.unchecked)} part(s) not re-derived" if self.unchecked else ""
        out = [f"{head} [{self.seconds:.1f}s]"] + [f"   {p}" for p in self.problems[:shown]]
        if len(self.problems) > shown:
            out.append(f"   ... {len(self.problems) - shown} more")
        out += [f"   not re-derived: {u}" for u in self.unchecked[:shown]]
        if len(self.unchecked) > shown:
            out.append(f"   ... {len(self.unchecked) - shown} more not re-derived")
        return out
