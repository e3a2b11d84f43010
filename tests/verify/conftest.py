"""The analysis tests' smoke sweep, shared (built once per session under the same folder)."""

from tests.analysis.conftest import smoke_sweep  # noqa: F401  (the shared smoke-sweep fixture)
