"""Where a model comes from, checked without loading it (no torch, no transformers): a local folder
saved with `save_pretrained` (or a `pkg:` path inside an installed package) or a hub id, cached or
reachable. A relaunch decides which run it is from these files alone (`run.plan`).
"""

from __future__ import annotations

import os
import shlex
import socket
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy.architecture import QWEN3_0_6B_BASE

HUB_PROBE_TIMEOUT_S = 3.0


class ModelLoadError(RuntimeError):
    """The configured model cannot be loaded; the message says what to set instead."""


def resolve_model_source(cfg: ModelConfig) -> str:
    """Check, in seconds and without downloading, that the model can be found: the folder (checked to
    hold a config.json) or the hub id (cached, or the hub reachable). Returns what was checked."""
    if cfg.path:
        return str(_model_folder(cfg.path, cfg.hub_id))
    if not cfg.hub_id:
        raise ModelLoadError(f"model {cfg.name!r} sets neither model.path nor model.hub_id")
    if _hub_cached(cfg.hub_id) or _hub_reachable():
        return cfg.hub_id
    raise ModelLoadError(_not_on_this_machine(cfg.hub_id))


def resolve_model_folder(cfg: ModelConfig) -> Path:
    """The folder the model is loaded from, and whose files are the run's model input: `model.path`
    (a `pkg:` path resolved), or, for a hub id, the snapshot of the local Hugging Face cache (fetched
    into the cache first when it is not there and the hub is reachable)."""
    if cfg.path:
        return _model_folder(cfg.path, cfg.hub_id)
    source = resolve_model_source(cfg)
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(source, local_files_only=not _hub_reachable(), ignore_patterns=HUB_IGNORED)
    except Exception as err:  # the cache lacks a file, the download failed, the id is unknown
        raise ModelLoadError(f"cannot fetch {source!r} into the Hugging Face cache ({type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200] if str(err) else 'no detail'}); "
                             f"{_not_on_this_machine(source)}") from None
    return Path(folder)


HUB_IGNORED = ["*.md", "LICENSE*", ".gitattributes", "*.gguf", "*.onnx", "original/*"]  # never loaded


def _model_folder(path: str, hub_id: str | None = None) -> Path:
    folder = _resolve_path(path)
    if not folder.is_dir():
        saved = ("a folder saved with save_pretrained (config.json, weights, tokenizer), e.g. a finished run's "
                 "<run>/model")
        if folder.is_file() or path.startswith("pkg:"):
            what = "is a file, not a folder" if folder.is_file() else "does not exist"
            raise ModelLoadError(f"model.path={path!r}: {folder} {what}. Point model.path at {saved}")
        raise ModelLoadError(f"model.path={path!r}: {folder} does not exist. {_fetch_into(path, hub_id)}, "
                             f"or point model.path at {saved}")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(
            f"model.path={path!r} is not a model folder (no config.json in {folder}). "
            "Point model.path at a folder saved with save_pretrained (config.json, weights, tokenizer)."
        )
    suffixes = {f.suffix for f in folder.iterdir()}
    if ".safetensors" not in suffixes:
        pickled = sorted(suffixes & set(WEIGHT_SUFFIXES))
        raise ModelLoadError(
            f"model.path={path!r} holds no *.safetensors weights in {folder}"
            + (f" (only pickled ones, {', '.join(pickled)}: a pickle checkpoint is never loaded, since a replaced "
               "file could run code; where you trust it, save it again with save_pretrained(..., "
               "safe_serialization=True))" if pickled else ""))
    return folder


def _fetch_into(path: str, hub_id: str | None) -> str:
    """How to put the model where `model.path` points: the config's hub model, else the paper's."""
    option = "" if hub_id in (None, QWEN3_0_6B_BASE.hub_id) else f" --hub-id {shlex.quote(hub_id)}"
    command = f"`python -m rlvr_sweep.policy fetch-model --out {shlex.quote(path)}{option}`"
    what = f"Download {hub_id} into it" if hub_id else "For the paper's model, download it there"
    return f"{what} with {command} (where there is network; then copy the folder here)"


def _not_on_this_machine(hub_id: str) -> str:
    return (f"cannot load {hub_id!r}: it is not in the local Hugging Face cache and the hub "
            f"({_hub_endpoint()}) cannot be reached from this machine. Download it where there is "
            f"network (e.g. `hf download {hub_id} --local-dir /path/to/{hub_id.split('/')[-1]}`), "
            "copy the folder here and rerun with model.path=/path/to/that/folder "
            "(or set HF_HOME to a cache that holds it).")


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _resolve_path(path: str) -> Path:
    if path.startswith("pkg:"):
        package, _, rest = path[len("pkg:"):].partition("/")
        return Path(str(resources.files(package).joinpath(rest)))
    return Path(path).expanduser()


def _hub_cached(hub_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(hub_id, "config.json")
    return isinstance(found, str)


def _hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def _hub_reachable() -> bool:
    """A quick TCP probe, so an offline machine fails in seconds instead of retrying for minutes."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        return False
    url = urlparse(_hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=HUB_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def fetch_model(out, hub_id: str = QWEN3_0_6B_BASE.hub_id) -> Path:
    """Download `hub_id` into the folder `out` (`huggingface_hub.snapshot_download`; the same as
    `hf download <hub_id> --local-dir <out>`), without the files a run never reads."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(hub_id, local_dir=str(out), ignore_patterns=HUB_IGNORED))
