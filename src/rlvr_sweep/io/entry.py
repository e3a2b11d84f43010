"""How every command of the package ends: its exit code, a bug told apart from a user's mistake.

Each command's `main` turns the mistakes a user can make (a path that does not exist, a bad option, a
malformed row) into one line naming them and exit 2 itself. Anything else that escapes it is a bug of
this package: `run_command` prints the traceback and then one line saying so (exit 1); Ctrl-C ends
with one line and exit 130; a closed pipe (`... | head`) ends quietly.
"""

from __future__ import annotations

import os
import sys
import traceback

EXIT_BUG, EXIT_INTERRUPTED = 1, 130


def run_command(prog: str, main) -> None:
    """`sys.exit(main())`, with the endings above."""
    try:
        code = main()
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr, flush=True)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except Exception:  # noqa: BLE001  (past every check: a bug, reported as one)
        traceback.print_exc()
        print(f"{prog}: this is a bug in rlvr_sweep, not a mistake in the command (the traceback above says "
              "where); please report it with the command line", file=sys.stderr, flush=True)
        code = EXIT_BUG
    sys.exit(code)
