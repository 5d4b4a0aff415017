"""A revision's row as the changes from the revision before, with a whole list now and then.

A revision is the policy's every file, and most revisions change one (a `roles.create`
adds `api/roles/<name>.charter`): a row that listed each file's path and digest made the
history grow with the number of changes times the size of the policy (10,000 role
creates on a 10,000-file policy: 10^8 pairs, GBs). So most rows hold what changed:

- a *full* row is the body as given, `files` its `[path, ref]` pairs in order (a ref is
  the digest of the text, policy/store/texts.py; in rows stored before that, the text
  itself). Every row an older charter wrote is a full row, read as it always was.
- a *delta* row has no `files` key: `{"base": m, "drop": [path], "set": [[path, digest]],
  "add": [[path, digest]], "names": {key: [removed, added]}, "body": {...}}` (the empty
  ones left out). Its files are the revision before's, the paths in `drop` taken out,
  those in `set` given a new digest where they are, and `add` appended in order (a path
  both dropped and added moved to the end: what a role's update does to its file). `m` is
  the full row its chain starts from; the rows `m` to it are all that reading it takes.
  `body` is the rest of the body, in its order, `files` a placeholder for where it was;
  a `summary` (what the revision declared: sorted lists of role, profile ... names, that
  grow with the policy too) has a placeholder for each list kept as `names`' names removed
  and added.

A full row is written at least every `EVERY` revisions, and whenever the changes since
the last one would hold more entries than a full list; also whenever the files cannot be
told apart by their paths alone (a path twice: the service refuses that, the store
need not) or their order is more than "changes in place, the rest appended" against
the revision before: that covers a role's create, update and delete, an upload of the
same files with some changed, `charter serve --workspace` with a file changed in place.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from operator import lt
from typing import Any, TypeGuard

# The most rows a revision's read takes: its chain's full row and the deltas after it.
EVERY = 64
_SUMMARY = "summary"


def is_delta(row: Mapping[str, Any]) -> bool:
    return "files" not in row


def chain_start(number: int, row: Mapping[str, Any]) -> int:
    """The full row that the revision `number` (its stored row `row`) is read from."""
    return int(row["base"]) if is_delta(row) else number


def _strings(values: list[Any]) -> bool:
    return set(map(type, values)) <= {str}  # (in C: a summary lists 10,000s of names)


def _sorted_names(value: Any) -> TypeGuard[list[str]]:
    """A list of strings in strictly increasing order (what a summary lists)."""
    return isinstance(value, list) and _strings(value) and all(map(lt, value, value[1:]))


class Replay:
    """The files and summary of a revision, read row after row from its chain's full row.

    The files are kept as the full row's list of `[path, ref]` pairs, which the deltas
    after it change in place: appended to, a pair replaced, a dropped one left a None
    (found by an index of the paths, built once a delta drops or replaces one: a chain of
    role creates only appends). The summary's lists a delta changes are copied first
    when they are a row's own."""

    def __init__(self) -> None:
        self.number = 0
        self.full = 0  # the chain's full row
        self.changes = 0  # entries of the deltas since it (paths dropped, set, added)
        self._pairs: list[Any] = []
        self._index: dict[Any, int] | None = None
        self._holes = 0  # the Nones in `_pairs`
        self._body: dict[str, Any] = {}
        self._summary: Any = None
        self._owned: set[str] = set()  # the summary's lists that are this replay's own

    def apply(self, number: int, row: dict[str, Any]) -> None:
        self.number = number
        if not is_delta(row):
            self.full, self.changes = number, 0
            self._pairs, self._index, self._holes = row["files"], None, 0
            self._body = row
            self._summary, self._owned = row.get(_SUMMARY), set()
            return
        pairs = self._pairs
        drop, set_, add = row.get("drop", ()), row.get("set", ()), row.get("add", ())
        if drop or set_:
            if self._index is None:
                self._index = {pair[0]: i for i, pair in enumerate(pairs)}
            for path in drop:
                pairs[self._index.pop(path)] = None
            for path, ref in set_:
                pairs[self._index[path]] = [path, ref]
            self._holes += len(drop)
        for pair in add:
            if self._index is not None:
                self._index[pair[0]] = len(pairs)
            pairs.append(pair)
        self.changes += len(drop) + len(set_) + len(add)
        self._body = row["body"]
        names: dict[str, Any] = row.get("names", {})
        if names:
            self._apply_names(self._body[_SUMMARY], names)
        else:
            self._summary, self._owned = self._body.get(_SUMMARY), set()

    def _apply_names(self, summary: dict[str, Any], names: dict[str, Any]) -> None:
        before: dict[str, Any] = self._summary
        after: dict[str, Any] = {}
        for key, value in summary.items():
            if key not in names:
                after[key] = value
                self._owned.discard(key)
                continue
            kept, (removed, added) = before[key], names[key]
            if len(removed) + len(added) > 32:  # (many: one sort rather than many moves)
                kept = sorted(set(kept).difference(removed).union(added))
            else:
                if key not in self._owned:
                    kept = list(kept)
                for name in removed:
                    del kept[bisect_left(kept, name)]
                for name in added:
                    insort(kept, name)
            self._owned.add(key)
            after[key] = kept
        self._summary = after

    def pairs(self) -> list[Any]:
        """The revision's `[path, ref]` pairs, in order."""
        if self._holes:
            return [pair for pair in self._pairs if pair is not None]
        return self._pairs

    def paths(self) -> list[Any]:
        return [pair[0] for pair in self._pairs if pair is not None]

    def files_by_path(self) -> dict[Any, Any]:
        """The files as a mapping of path to ref, in order."""
        return {pair[0]: pair[1] for pair in self.pairs()}

    def summary(self) -> Any:
        return self._summary

    def body(self, files: list[Any], shared: bool = False) -> dict[str, Any]:
        """The body as it was added, with `files` for its files. `shared`: the replay goes
        on, so a list of the summary it changes from here on is copied first."""
        body = dict(self._body)
        body["files"] = files
        if _SUMMARY in body:
            body[_SUMMARY] = self._summary
        if shared:
            self._owned = set()
        return body

    def deltas_may_follow(self) -> bool:
        """Whether a delta may be taken against it: each path a string, none twice (a
        delta's are: it was taken against such a revision)."""
        if self.number != self.full:
            return True
        paths = [pair[0] for pair in self._pairs]
        return _strings(paths) and len(set(paths)) == len(paths)


def row(
    body: Mapping[str, Any], refs: Sequence[list[Any]], tip: Replay | None, number: int
) -> dict[str, Any]:
    """The stored row of revision `number`: `body` with `refs` (its files' `[path,
    digest]` pairs) for its files, as a delta of `tip` (the revision before, read in the
    same transaction) where one may be, else full."""
    full = {**body, "files": refs}
    if tip is None or not tip.deltas_may_follow() or number - tip.full >= EVERY:
        return full
    changes = _changes(tip.files_by_path(), refs)
    if changes is None:
        return full
    drop, set_, add = changes
    if tip.changes + len(drop) + len(set_) + len(add) > len(refs):
        return full
    rest = {**body, "files": None}
    delta: dict[str, Any] = {"base": tip.full}
    for key, value in (("drop", drop), ("set", set_), ("add", add)):
        if value:
            delta[key] = value
    names = _names(tip.summary(), body.get(_SUMMARY))
    if names:
        delta["names"] = names
        rest[_SUMMARY] = {k: None if k in names else v for k, v in body[_SUMMARY].items()}
    delta["body"] = rest
    return delta


def _changes(
    before: Mapping[Any, Any], refs: Sequence[list[Any]]
) -> tuple[list[Any], list[list[Any]], list[list[Any]]] | None:
    """`refs` as paths dropped from `before`, paths given a new digest where they are, and
    paths appended (a path that moved: dropped, then appended); None when paths repeat
    or are not strings. The longest start of `refs` whose paths keep their order in
    `before` stays in place."""
    paths = [path for path, _ in refs]
    if not _strings(paths) or len(set(paths)) != len(paths):
        return None
    kept = list(before)
    if paths[: len(kept)] == kept:  # (in C: every path kept in place, some appended)
        stay = len(kept)
    else:
        at = {path: i for i, path in enumerate(kept)}
        stay, last = 0, -1
        for path in paths:
            i = at.get(path)
            if i is None or i < last:
                break
            stay, last = stay + 1, i
    staying = set(paths[:stay])
    drop = [path for path in before if path not in staying]
    set_ = [[path, ref] for path, ref in refs[:stay] if before[path] != ref]
    add = [[path, ref] for path, ref in refs[stay:]]
    return drop, set_, add


def _names(before: Any, after: Any) -> dict[str, list[list[str]]]:
    """The summary's lists of names that are kept as names removed and added (fewer than
    the list holds) against the revision before's."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {}
    names: dict[str, list[list[str]]] = {}
    for key, value in after.items():
        old = before.get(key)
        if not isinstance(key, str) or not _sorted_names(value) or not _sorted_names(old):
            continue
        removed = sorted(set(old).difference(value))
        added = sorted(set(value).difference(old))
        if len(removed) + len(added) < len(value):
            names[key] = [removed, added]
    return names
