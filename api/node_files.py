"""What a serving node keeps on its own disk beside the store: the key that seals its
secrets, the first admin token's file, and the workers' counter files.

For an SQLite store they lie beside the database file: `<db>.key`, `<db>.admin-token`,
`<db>.metrics/` (`--key-file PATH` puts the key elsewhere; the others stay beside the
database). A store kept by a server (PostgreSQL) has no file to put them beside, so
`--key-file PATH` is required and the others lie beside it, named after it less a `.key`
ending: `--key-file /etc/charter/prod.key` gives `/etc/charter/prod.admin-token` and
`/etc/charter/prod.metrics/`. Every node serving one database is given the same key (its
secrets are sealed once, in the database); the token file is written by the node whose
start issued it, and each node's counters are its own workers'.

`charter serve` hands the key file to its `--workers N` processes in `CHARTER_KEY_FILE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from policy.secrets import key_path_for
from policy.store.open import StoreUrlError, Target

KEY_FILE_ENV = "CHARTER_KEY_FILE"  # `--key-file`, for `--workers N`' processes
KEY_FILE_NEEDED = "D0203"  # a PostgreSQL `--db` without `--key-file`
KEY_FILE_FLAG = "--key-file"


@dataclass(frozen=True, slots=True)
class NodeFiles:
    """`key`: the key file; `prefix`: what the token's file and the counters' directory
    are named after (`<prefix>.admin-token`, `<prefix>.metrics/`)."""

    key: Path
    prefix: str


def node_files(target: Target, key_file: str | Path | None) -> NodeFiles:
    """Where the files of a node serving `target` lie (see the module's docstring);
    StoreUrlError (D0203) for a server-backed store given no key file."""
    if target.path is not None:
        key = Path(key_file) if key_file is not None else key_path_for(target.path)
        return NodeFiles(key, target.path)
    if key_file is None or str(key_file) == "":
        raise StoreUrlError(
            KEY_FILE_NEEDED,
            f"`{target.shown}` is a PostgreSQL database: it needs `{KEY_FILE_FLAG} PATH`, "
            "the file that holds the key its secrets are sealed with",
            f"give every node serving it the same `{KEY_FILE_FLAG}`; the first start on an "
            "empty database makes the file (mode 0600) when it is missing",
        )
    text = str(key_file)
    return NodeFiles(Path(text), text[: -len(".key")] if text.endswith(".key") else text)
