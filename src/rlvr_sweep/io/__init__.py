"""IO stage, the bottom of the stack: the one copy of each low-level file mechanism (CONVENTIONS #18).

`atomic_write` puts a file in place whole or not at all (written beside it under a temporary name,
flushed to disk, renamed over it), so a reader never sees half a table, checkpoint or split file, and
a killed writer leaves only a `.<name>.tmp-<pid>` file that `store.remove_temp_files` clears.
`file_sha256` is a file's digest, memoised by its inode, size, mtime and ctime; `rows_digest` data rows'. `entry.run_command` is
how every command ends (a user's mistake is one line and exit 2, a bug a traceback and a line saying so).
"""

from rlvr_sweep.io.atomic import atomic_write, atomic_write_bytes, atomic_write_json, temp_name
from rlvr_sweep.io.digest import file_sha256, rows_digest

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "file_sha256", "rows_digest", "temp_name"]
