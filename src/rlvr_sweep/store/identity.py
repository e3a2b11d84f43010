"""A run's identity: everything it computed from (DESIGN "Results", CONVENTIONS #16).

Three things define a run, and its identity digests all three:

- its **settings**: every setting that defines the experiment (`config.identity_dict`: not where
  files go or how often they are written, nor the `paper_arms` label);
- the **data** it reads: the rows of the training file it uses (after `data.limit`) and of each
  benchmark it reads out (after `eval.limit`), as canonical JSON (`rows_digest`), so a changed gold
  answer or problem is a changed input, while a row the run never reads is not;
- the **code of its plugins**: the source of every module its `plugins` loaded from outside the package
  (`plugins.code_record`), by module name and sha256, so an edited plugin is a new run (absent,
  and so no part of the digest, for a run without plugins); the `plugins` setting enters as the modules
  its entries are, not the paths they were named by (a moved plugin folder is the same run);
- the **model** it starts from: every file of the model folder that loading can read (weights,
  config, generation config, tokenizer files: all regular files at the folder's top level except
  hidden files, `*.md`, `LICENSE*` and `NOTICE*`), each by its sha256 (`model_digest`); for a hub id,
  the snapshot folder of the Hugging Face cache that is loaded.

`identify(cfg, inputs)` gives the `Identity`: `run` (8 hex digits: the run folder's name and the
`run_hash` column of every table), `group` (the same digest without the seed: the runs of one arm
row, which differ only in their seed), `base` (what a training run's base read-out computed from: the
starting model, the read-out settings and benchmark rows) and `settings` (settings only: two runs with
equal settings and different inputs are the same command on other data or weights). The digests of a
model folder are memoised per file by its inode, size, mtime and ctime, so a relaunch that
skips many finished runs hashes the weights once.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlvr_sweep.config import identity_dict
from rlvr_sweep.io import file_sha256
from rlvr_sweep.io.digest import rows_digest  # noqa: F401  (re-exported: a run's data inputs)

if TYPE_CHECKING:
    from rlvr_sweep.config import Config

RUN_HASH_CHARS, GROUP_HASH_CHARS = 8, 12
NOT_MODEL_FILES = ("LICENSE", "NOTICE")  # name prefixes of files no loader reads (with hidden and *.md files)
# the settings of a read-out of a fixed model: what the base read-out of a training run depends on
BASE_READOUT_SETTINGS = ("model", "eval", "grader", "profile")


@dataclass(frozen=True)
class Identity:
    run: str
    group: str
    base: str
    settings: str
    inputs: dict  # {input name: {"sha256": ..., and what it was: file, rows, folder, source}}

    def record(self) -> dict:
        """The identity as run.json stores it."""
        return {"run_hash": self.run, "group_hash": self.group, "base_hash": self.base,
                "settings_hash": self.settings, "inputs": self.inputs}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def identify(cfg: Config, inputs: dict) -> Identity:
    """The identity of `cfg` run on `inputs` ({name: {"sha256": ...}}: "train", "benchmark/<name>", "model",
    "plugins"; a plugin that takes part in the read-outs, `readouts`, is part of the base read-out's too)."""
    settings = identity_dict(cfg)
    if "plugins" in inputs and inputs["plugins"].get("modules"):  # what was imported, not where from: a label
        settings["plugins"] = list(inputs["plugins"]["modules"])
    content = {name: part["sha256"] for name, part in sorted(inputs.items())}
    unseeded = {k: v for k, v in settings.items() if k != "seed"}
    base_settings = {k: copy.deepcopy(settings[k]) for k in BASE_READOUT_SETTINGS}
    for bookkeeping in ("name", "hub_id", "path"):  # where the model came from; its digest is what it is
        base_settings["model"].pop(bookkeeping, None)
    base_settings["num_threads"] = settings["train"]["num_threads"]  # changes float reductions
    base_inputs = {k: v for k, v in content.items() if k == "model" or k.startswith("benchmark/")
                   or (k == "plugins" and inputs[k].get("readouts"))}
    return Identity(
        run=_digest({"settings": settings, "inputs": content})[:RUN_HASH_CHARS],
        group=_digest({"settings": unseeded, "inputs": content})[:GROUP_HASH_CHARS],
        base=_digest({"settings": base_settings, "inputs": base_inputs})[:GROUP_HASH_CHARS],
        settings=_digest(settings)[:GROUP_HASH_CHARS],
        inputs=inputs,
    )


def is_model_file(name: str) -> bool:
    return not (name.startswith(".") or name.endswith(".md") or name.startswith(NOT_MODEL_FILES))


def combine_file_digests(files: dict[str, str]) -> str:
    """One digest for a model folder from its files' sha256 ({name: sha256}); a manifest's entries for
    a saved `model/` give the same value as hashing the folder."""
    return hashlib.sha256("".join(f"{name}\0{sha}\n" for name, sha in sorted(files.items())).encode()).hexdigest()


def model_digest(folder: Path) -> dict:
    """{"sha256": the folder's digest, "files": {name: sha256}} over its model files (see the module)."""
    folder = Path(folder)
    files = {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if is_model_file(p.name) and p.is_file()}
    return {"sha256": combine_file_digests(files), "files": files}


def saved_model_digest(manifest_files: dict, prefix: str = "model/") -> str | None:
    """The digest of a run's saved model from its manifest entries ({relative path: {"sha256": ...}}),
    or None when the manifest lists no saved model."""
    files = {name[len(prefix):]: entry["sha256"] for name, entry in manifest_files.items()
             if name.startswith(prefix) and "/" not in name[len(prefix):] and is_model_file(name[len(prefix):])}
    return combine_file_digests(files) if files else None


def changed_inputs(old: dict, new: dict) -> list[str]:
    """Names of the inputs whose content differs between two `inputs` records (or that only one has)."""
    names = sorted(set(old) | set(new))
    return [n for n in names if (old.get(n) or {}).get("sha256") != (new.get(n) or {}).get("sha256")]
