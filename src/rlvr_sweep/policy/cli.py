"""`python -m rlvr_sweep.policy fetch-model --out DIR | check-model DIR`: the paper's weights in a local
folder, and whether a folder holds them (`policy.architecture`).

    fetch-model --out DIR [--model qwen3_0_6b_base]         download (huggingface_hub) the model's hub id, then check
    fetch-model --out DIR --hub-id ORG/NAME                 any hub id (checked when it is a known model's)
    check-model DIR [--model qwen3_0_6b_base]               architecture, parameter count, vocabulary, EOS

Known models (`model=<name>`): qwen3_0_6b_base (the paper's), qwen3_1_7b_base, qwen3_4b_base, qwen3_8b_base.

Then train on it with `model.path=DIR`. Exit 0 when the folder holds the model, 1 when it differs
(each difference printed), 2 when the folder or the download cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlvr_sweep.policy.architecture import EXPECTED, check_architecture
from rlvr_sweep.policy.source import fetch_model


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlvr_sweep.policy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch-model", help="download the paper's model into a folder and check it")
    f.add_argument("--out", required=True, help="the folder to download into")
    f.add_argument("--model", default="qwen3_0_6b_base", choices=sorted(EXPECTED),
                   help="the model whose hub id to download (default qwen3_0_6b_base, the paper's)")
    f.add_argument("--hub-id", default=None, help="another hub id (default: the --model's)")
    c = sub.add_parser("check-model", help="check that a folder holds the expected model")
    c.add_argument("folder")
    c.add_argument("--model", default="qwen3_0_6b_base", choices=sorted(EXPECTED), help="the expected model")
    return p


def check(folder: Path, name: str) -> int:
    if not folder.is_dir():
        print(f"check-model: error: {folder} is not a folder", file=sys.stderr)
        return 2
    expected = EXPECTED[name]
    problems = check_architecture(folder, expected)
    for problem in problems:
        print(f"  differs: {problem}")
    if problems:
        print(f"{folder} does not hold {expected.hub_id} ({len(problems)} difference(s))")
        return 1
    print(f"{folder} holds {expected.hub_id}: {expected.architecture}, vocabulary {expected.vocab_size:,}, "
          f"{expected.params_tied:,} parameters tied / {expected.params_untied:,} untied, EOS {expected.eos_id}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "check-model":
        return check(Path(args.folder), args.model)
    hub_id = args.hub_id or EXPECTED[args.model].hub_id
    try:
        folder = fetch_model(args.out, hub_id)
    except Exception as err:  # noqa: BLE001 (no network, an unknown id, a full disk: one line)
        print(f"fetch-model: error: cannot download {hub_id} into {args.out}: {type(err).__name__}: "
              f"{(str(err).splitlines() or [''])[0][:200]}", file=sys.stderr)
        return 2
    print(f"downloaded {hub_id} into {folder}")
    known = next((name for name, e in EXPECTED.items() if e.hub_id == hub_id), None)
    return check(folder, known) if known else 0
