"""`python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR`: prefix-splice probes (Table 5A).

DONOR and RECIPIENT are each a finished run folder (its saved `model/` is read, and its config.yaml
gives the defaults below), a `<run>/model` folder, or any `save_pretrained` folder (also `pkg:` paths,
e.g. the shipped tiny model). Defaults come from the recipient's run config when there is one (else the
donor's, else the paper's): benchmarks and limit (`eval.benchmarks`, `eval.limit`), the data files
(`data.*`), the profile's `length_scale`, the read-out cap and batch size, the model dtype, device and
engine, and the CPU threads (`train.num_threads`: the smoke profile's 1). Flags override them.

DIR receives `probe.json` (both checkpoints, their weight digests, the settings in this profile's
tokens, counts), `probe_greedy.parquet` (both greedy read-outs), `probe_items.parquet` (one row per
discordant item) and `probe_rows.parquet` (one row per item and condition), sealed by a manifest and
a `DONE` marker. Put DIR under the sweep root (e.g. `outputs/runs/smoke/probes/<name>`): `analysis
tables` and `verify all` find probe folders there. A finished DIR is not rewritten (exit 0, says so),
and one process writes it: a probe started while another writes DIR exits 3 and writes nothing.
Exit 0 on success, 2 on bad input, 3 when DIR is busy.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
from pathlib import Path

import yaml

from rlvr_sweep import store
from rlvr_sweep.config import DataConfig, ModelConfig
from rlvr_sweep.data import DataError
from rlvr_sweep.policy import ModelLoadError, resolve_model_folder
from rlvr_sweep.store.identity import model_digest
from rlvr_sweep.store.walk import PROBE_JSON  # the marker of a probe folder

# torch, transformers and pandas are imported in `_probe_locked`, once the folder is known to need a probe:
# a finished or busy folder is answered in about a second, not after 5-9 s of imports

FILES = {"greedy": "probe_greedy.parquet", "items": "probe_items.parquet", "rows": "probe_rows.parquet"}
EXIT_OK, EXIT_BAD_INPUT, EXIT_BUSY = 0, 2, 3
log = logging.getLogger("rlvr_sweep.evaluation.cli")


def checkpoint_of(arg: str) -> dict:
    """{model: folder to load, run_dir: its run folder or None, config: the run's config or {}, label}."""
    if arg.startswith("pkg:"):
        return {"model": arg, "run_dir": None, "config": {}, "label": arg.rsplit("/", 1)[-1]}
    path = Path(arg)
    if (path / "model" / "config.json").is_file():
        run_dir, model = path, path / "model"
    elif (path / "config.json").is_file():
        model = path
        run_dir = path.parent if (path.parent / "config.yaml").is_file() else None
    else:
        raise FileNotFoundError(f"{arg}: neither a run folder with a saved model/ nor a save_pretrained folder")
    config = yaml.safe_load((run_dir / "config.yaml").read_text()) if run_dir else {}
    label = model.name
    if run_dir is not None:
        info = json.loads((run_dir / store.RUN_JSON).read_text()) if (run_dir / store.RUN_JSON).is_file() else {}
        label = f"{info.get('arm', run_dir.name)} h{info.get('horizon', '?')} seed {info.get('seed', '?')}"
    return {"model": str(model.resolve()), "run_dir": str(run_dir.resolve()) if run_dir else None,
            "config": config or {}, "label": label}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe", help="donor-prefix splicing and self-fork probes (Table 5A)")
    p.add_argument("donor", help="run folder, <run>/model or save_pretrained folder of A (right on the items)")
    p.add_argument("recipient", help="the same for B (wrong on the items): the checkpoint that is probed")
    p.add_argument("--out", required=True, help="probe folder to write")
    p.add_argument("--benchmarks", default=None, help="comma-separated (default: the run's eval.benchmarks)")
    p.add_argument("--limit", type=int, default=None, help="first N items of each benchmark")
    p.add_argument("--data-root", default=None, help="folder of the benchmark files (default: the run's data.root)")
    p.add_argument("--length-scale", type=float, default=None, help="profile.length_scale (smoke: 0.125)")
    p.add_argument("--cap", type=int, default=None, help="read-out cap in paper tokens (default 2048)")
    p.add_argument("--batch-size", type=int, default=None, help="greedy read-out batch (default 32)")
    p.add_argument("--dtype", default=None, help="model dtype (default: the run's model.dtype, else bfloat16)")
    p.add_argument("--device", default=None, help="auto, cpu, cuda, ... (default: the run's model.device)")
    p.add_argument("--engine", default=None, help="decoding engine (default: the run's model.engine)")
    p.add_argument("--num-threads", type=int, default=None,
                   help="torch CPU threads (default: the run's train.num_threads; unset: torch's own choice)")
    return parser


def _pick(args, config: dict, group: str, key: str, flag, default):
    if flag is not None:
        return flag
    value = (config.get(group) or {}).get(key)
    return default if value is None else value


def _probe(args) -> int:
    """One probe folder, written by one process: the probe holds a lock on `--out` (beside it, as a run
    holds its folder's) for its whole life; a second probe into the same folder writes nothing."""
    out = Path(args.out)
    if (out / store.DONE_MARKER).is_file():
        print(f"{out} already holds a finished probe; nothing to do")
        return EXIT_OK
    donor, recipient = checkpoint_of(args.donor), checkpoint_of(args.recipient)  # a wrong path: before anything is written
    with store.run_lock(out):
        if (out / store.DONE_MARKER).is_file():  # finished while this process waited to start
            print(f"{out} already holds a finished probe; nothing to do")
            return EXIT_OK
        return _probe_locked(args, out, donor, recipient)


def _probe_locked(args, out: Path, donor: dict, recipient: dict) -> int:
    import pandas as pd
    import torch
    from transformers.utils import logging as hf_logging

    from rlvr_sweep.data import benchmark_rows
    from rlvr_sweep.evaluation.probe import ProbeSettings, run_probe
    from rlvr_sweep.policy import load_policy
    from rlvr_sweep.reward import get_grader, grading

    hf_logging.disable_progress_bar()  # the probe reports its own progress
    cfg = recipient["config"] or donor["config"]
    data = DataConfig(**{k: v for k, v in (cfg.get("data") or {}).items() if k in DataConfig.__dataclass_fields__})
    if args.data_root:
        data = DataConfig(**{**data.__dict__, "root": args.data_root})
    names = args.benchmarks.split(",") if args.benchmarks else _pick(args, cfg, "eval", "benchmarks", None,
                                                                      ["math500", "math_val210", "ext240"])
    limit = _pick(args, cfg, "eval", "limit", args.limit, None)
    scale = float(_pick(args, cfg, "profile", "length_scale", args.length_scale, 1.0))
    cap_paper = int(_pick(args, cfg, "eval", "max_new_tokens", args.cap, 2048))
    settings = ProbeSettings.scaled(scale, {"cap": cap_paper},
                                    batch_size=int(_pick(args, cfg, "eval", "batch_size", args.batch_size, 32)),
                                    schedule=(cfg.get("eval") or {}).get("schedule", "fixed"),
                                    engine=_pick(args, cfg, "model", "engine", args.engine, "reference"))
    benchmarks = {name: benchmark_rows(name, data, limit) for name in names}
    model_kw = dict(dtype=_pick(args, cfg, "model", "dtype", args.dtype, "bfloat16"),
                    device=_pick(args, cfg, "model", "device", args.device, "auto"),
                    untie_embeddings=bool((cfg.get("model") or {}).get("untie_embeddings", True)))
    threads = _pick(args, cfg, "train", "num_threads", args.num_threads, None)
    if threads is not None:
        if int(threads) < 1:
            raise ValueError(f"--num-threads must be at least 1, got {threads}")
        torch.set_num_threads(int(threads))  # as the run did: a tiny model on many threads mostly waits
    started = time.time()
    log.info("probe: loading the donor %s and the recipient %s", donor["label"], recipient["label"])
    policies = {role: load_policy(ModelConfig(name=role, hub_id=None, path=c["model"], **model_kw))
                for role, c in (("donor", donor), ("recipient", recipient))}
    grader = (cfg.get("grader") or {}).get("name", "baseline")
    grading.warm_up()
    result = run_probe(policies["donor"], policies["recipient"], benchmarks, settings, grade=get_grader(grader))
    out.mkdir(parents=True, exist_ok=True)
    for key, rows in (("greedy", result.greedy), ("items", result.items), ("rows", result.rows)):
        buf = io.BytesIO()
        pd.DataFrame(rows).to_parquet(buf, index=False)
        store.atomic_write_bytes(out / FILES[key], buf.getvalue())
    discordant = {n: sum(1 for i in result.items if i["benchmark"] == n) for n in names}
    info = {
        "kind": "prefix_splice_probe", "files": FILES, "settings": settings.as_dict(), "grader": grader,
        "benchmarks": names, "limit": limit, "items": {n: len(r) for n, r in benchmarks.items()},
        "discordant": discordant, "model_dtype": model_kw["dtype"], "num_threads": threads,
        "started_at": started, "finished_at": time.time(),
        "code": store.code_version(),
        **{role: {k: c[k] for k in ("model", "run_dir", "label")} | {"model_digest": _digest(policies[role])}
           for role, c in (("donor", donor), ("recipient", recipient))},
    }
    store.atomic_write_json(out / PROBE_JSON, info)
    store.finish(out)
    print(f"probe {donor['label']} -> {recipient['label']}: {sum(discordant.values())} discordant items "
          f"({', '.join(f'{n} {k}' for n, k in discordant.items())}), {len(result.rows)} continuations; wrote {out}")
    return EXIT_OK


def _digest(policy) -> str:
    """The digest of the model folder a policy was loaded from (`store.identity.model_digest`): what
    attributes a probe's checkpoint to the training run that saved the same weights."""
    return model_digest(resolve_model_folder(ModelConfig(name="probe", hub_id=None, path=policy.source)))["sha256"]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    try:
        return _probe(args)
    except (FileNotFoundError, ValueError, DataError, ModelLoadError) as err:
        print(f"evaluation: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except store.RunBusyError as err:  # another probe writes this folder now
        print(f"evaluation: {err}", file=sys.stderr)
        return EXIT_BUSY


if __name__ == "__main__":
    sys.exit(main())
