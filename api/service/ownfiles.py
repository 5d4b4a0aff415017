"""The `ETag` of a role, profile, hook or toolset made through the API: a digest of its
own file (`api/<kind>/<name>.charter`: api.service.rolefiles), not the revision's number.
A change of another declaration makes a new revision but leaves this one as it was, and a
client holding its tag need not read it again (docs/http.md, "Lost updates"). One declared
in an uploaded file has none: no write through the API takes it; the policy's upload,
which changes it, takes the revision's."""

from __future__ import annotations

from collections.abc import Iterable

from api.service.etags import etag
from api.service.rolefiles import own_path
from engine.compile import Snapshot
from policy.store import Doc


def doc(kind: str, name: str, text: str) -> Doc:
    """What the `ETag` of `name`, of `kind`, digests: its path and its file's text."""
    return {"path": own_path(kind, name), "text": text}


def own_etag(kind: str, name: str, text: str) -> str:
    """The `ETag` of `name` (of `kind`) made through the API, `text` its own file."""
    return etag(doc(kind, name, text))


def own_file(files: Iterable[tuple[str, str]], kind: str, name: str) -> str | None:
    """The text of `name`'s own file among `files` (path, text); None without one."""
    path = own_path(kind, name)
    return next((text for p, text in files if p == path), None)


def snapshot_etag(snapshot: Snapshot, kind: str, name: str) -> str | None:
    """`name`'s `ETag` in `snapshot`, when it has its own file; None for one declared in an
    uploaded file."""
    text = own_file(((f.path, f.text) for f in snapshot.served.files), kind, name)
    return None if text is None else own_etag(kind, name, text)
