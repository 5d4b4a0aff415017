"""A revision's row holds what changed since the one before (policy/store/revisions.py),
with a full list at least every `EVERY` revisions: the history grows with the changes, not
with the policy's size times the number of changes, and every revision reads back as it
was given, whatever the changes were and whichever process made them."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.store import revisions, texts
from policy.store.sqlite import SqliteStore
from tests.store.tables import as_an_older_charter_left_it, table_size


def _summary(files: dict[str, str]) -> dict[str, Any]:
    """What a revision declared, as `Service.upload` lists it: sorted names."""
    roles = sorted(path.rsplit("/", 1)[-1].removesuffix(".charter") for path in files)
    return {"toolsets": ["mail"], "roles": roles, "hooks": [], "profiles": ["p"], "tests": 1}


def _body(files: dict[str, str], note: str) -> dict[str, Any]:
    return {"files": [[p, t] for p, t in files.items()], "author": "token:t", "note": note,
            "created_at": 1, "summary": _summary(files)}  # fmt: skip


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _rows(db: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each revision's stored row, decoded, read through a connection of its own."""
    with sqlite3.connect(db) as connection:
        found = connection.execute("SELECT n, body FROM revisions ORDER BY n").fetchall()
    connection.close()
    for n, blob in found:
        yield int(n), cbor2.loads(blob)


def _listed(body: dict[str, Any]) -> dict[str, Any]:
    """What the history lists of a revision: its body, its files' paths alone."""
    return {**body, "files": [path for path, _ in body["files"]]}


def _history(store: SqliteStore, page: int) -> list[tuple[int, dict[str, Any]]]:
    """`list_revisions` a page of `page` at a time, from the start to the end."""
    listed: list[tuple[int, dict[str, Any]]] = []
    while rows := store.list_revisions(listed[-1][0] if listed else 0, page):
        listed += rows
    return listed


def test_a_chain_of_single_file_changes_stores_the_changes(tmp_path: Path) -> None:
    """300 revisions of a 200-file policy, each changing one file (in place, dropped,
    dropped and added back, moved to the end with a new text as a role's update does,
    added): every revision reads back exactly, the history lists each one's paths, and
    the revisions take a few full lists and a small row a change, where a full list
    each took files x revisions x (32 + path) bytes."""
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    pick = random.Random(7)
    files = {f"api/roles/r{i:03d}.charter": f"role r{i:03d} {{\n}}\n" for i in range(200)}
    expected = [_body(files, "upload")]
    assert store.add_revision(expected[0]) == 1
    gone: list[str] = []
    for i in range(300):
        path = pick.choice(sorted(files))
        step = i % 5
        if step == 0:  # a file changed in place
            files[path] = f"{files[path]}# {i}\n"
        elif step == 1:  # a file dropped
            gone.append(path)
            del files[path]
        elif step == 2 and gone:  # a dropped one back, at the end, with its old text or not
            back = gone.pop(pick.randrange(len(gone)))
            files[back] = f"role back {{\n}}\n# {i % 3}\n"
        elif step == 3:  # moved to the end with a new text (`roles.update`)
            text = files.pop(path)
            files[path] = f"{text}# {i}\n"
        else:
            files[f"api/roles/n{i:03d}.charter"] = f"role n{i:03d} {{\n}}\n"
        expected.append(_body(files, f"change {i}"))
        assert store.add_revision(expected[-1]) == i + 2
    for n, body in enumerate(expected, 1):
        assert store.get_revision(n) == body, n
    listed = [(n, _listed(body)) for n, body in enumerate(expected, 1)]
    assert _history(store, 37) == listed
    assert store.list_revisions(150, 3) == listed[150:153]  # (from inside a chain)
    store.close()
    # Each revision reads its chain's full row and the deltas after it: EVERY rows at most.
    rows = dict(_rows(db))
    full = [n for n, row in rows.items() if not revisions.is_delta(row)]
    assert 1 in full and len(full) < 2 * len(rows) / revisions.EVERY + 1
    for n, row in rows.items():
        start = revisions.chain_start(n, row)
        assert n - start < revisions.EVERY and not revisions.is_delta(rows[start])
    count, size = table_size(db, "revisions")
    assert count == 301
    # (a full list's row: 200 to 260 paths and digests, 13 to 16 KB; a delta's ~220 bytes:
    # 136 KB in all, where a full list each took 4 MB)
    assert size < 200 * count * 32 // 10


def test_another_process_s_revision_is_the_base(tmp_path: Path) -> None:
    """The revision a new one is stored against is read in its own write transaction:
    one another process added after this one last wrote is the base, not this one's."""
    db = tmp_path / "s.db"
    one, other = SqliteStore(db), SqliteStore(db)
    files = {"a.charter": "a", "b.charter": "b"}
    one.add_revision(_body(files, "1"))
    files["b.charter"] = "b2"
    other.add_revision(_body(files, "2"))
    files["c.charter"] = "c"
    one.add_revision(_body(files, "3"))
    for store in (one, other):
        assert store.get_revision(3) == _body(files, "3")
    one.close()
    other.close()
    rows = dict(_rows(db))
    assert revisions.is_delta(rows[3]) and rows[3]["add"] == [["c.charter", _digest("c")]]


def _write_the_old_way(db: Path, bodies: list[dict[str, Any]]) -> None:
    """Rows as the charter before this one wrote them: each a full list of `[path,
    digest]` pairs, its texts in `texts` (policy/store/sqlite.py's `add_revision`)."""
    SqliteStore(db).close()  # (its tables)
    with sqlite3.connect(db) as made:
        for n, body in enumerate(bodies, 1):
            refs, new = texts.split(body["files"])
            made.executemany("INSERT OR IGNORE INTO texts (digest, body) VALUES (?, ?)",
                             new.items())  # fmt: skip
            made.execute("INSERT INTO revisions (n, body) VALUES (?, ?)",
                         (n, cbor2.dumps({**body, "files": refs})))  # fmt: skip
    made.close()
    as_an_older_charter_left_it(db)


@pytest.mark.parametrize("form", ["digests", "texts"])
def test_old_full_rows_read_as_they_did(tmp_path: Path, form: str) -> None:
    """Full-list rows written before (`[path, digest]` pairs, or the older `[path, text]`
    ones) read as they always did, and the revisions added after them are stored as
    changes against them."""
    db = tmp_path / "s.db"
    files = {f"r{i}.charter": f"role r{i} {{\n}}\n" for i in range(5)}
    bodies = []
    for i in range(3):
        files[f"r{i}.charter"] += "#\n"
        bodies.append(_body(files, f"old {i}"))
    if form == "digests":
        _write_the_old_way(db, bodies)
    else:
        SqliteStore(db).close()
        with sqlite3.connect(db) as made:
            made.executemany("INSERT INTO revisions (n, body) VALUES (?, ?)",
                             [(n, cbor2.dumps(b)) for n, b in enumerate(bodies, 1)])  # fmt: skip
        made.close()
        as_an_older_charter_left_it(db)
    store = SqliteStore(db)
    for n, body in enumerate(bodies, 1):
        assert store.get_revision(n) == body
    files["r4.charter"] = "role r4 {\n}\n# new\n"
    bodies.append(_body(files, "new 4"))
    del files["r0.charter"]
    bodies.append(_body(files, "new 5"))
    assert [store.add_revision(body) for body in bodies[3:]] == [4, 5]
    for n, body in enumerate(bodies, 1):
        assert store.get_revision(n) == body
    assert _history(store, 2) == [(n, _listed(body)) for n, body in enumerate(bodies, 1)]
    store.close()
    rows = dict(_rows(db))
    assert not any(revisions.is_delta(rows[n]) for n in (1, 2, 3))
    assert revisions.is_delta(rows[4]) and rows[4]["base"] == 3
    if form == "digests":
        assert rows[4]["set"] == [["r4.charter", _digest(files["r4.charter"])]]
        assert revisions.is_delta(rows[5]) and rows[5]["drop"] == ["r0.charter"]
    else:  # (every path's text became a digest: as many changes as files, then a full row)
        assert rows[3] == bodies[2]  # (nothing rewritten)
        assert [path for path, _ in rows[4]["set"]] == [path for path, _ in bodies[3]["files"]]
        assert not revisions.is_delta(rows[5])


# ---- any sequence of changes reads back -----------------------------------------------------

START = [[f"{name}.charter", f"role {name} {{\n}}\n"] for name in "abcdefgh"]
PATHS = st.sampled_from([path for path, _ in START] + ["i/j.charter", "k.charter"])
TEXTS = st.sampled_from(["", "x", "role a {\n}\n", "é\n", "y"])
SUMMARIES = st.sampled_from(["declared"] * 5 + ["none", "empty", "unsorted"])

# (kind, path, text): a file changed in place, moved to the end with a new text, dropped,
# added; the same files again; an upload of drawn files (a path twice too: the store does
# not refuse it), or of the same ones in another order
ONE_FILE = st.tuples(st.sampled_from(["drop", "change", "move", "add", "same"]), PATHS, TEXTS)
OTHERS = (
    st.tuples(st.just("upload"), st.lists(st.tuples(PATHS, TEXTS), max_size=10)),
    st.tuples(st.just("shuffle"), st.randoms(use_true_random=False)),
)
OPERATIONS = st.integers(min_value=0, max_value=9).flatmap(  # (mostly a role's change)
    lambda k: OTHERS[k - 8] if k >= 8 else ONE_FILE
)


def _apply(files: list[list[str]], op: tuple[Any, ...]) -> list[list[str]]:
    kind = op[0]
    if kind == "upload":
        return [[p, t] for p, t in op[1]]
    if kind == "shuffle":
        return op[1].sample(files, len(files))  # type: ignore[no-any-return]
    path, text = op[1], op[2]
    has = any(p == path for p, _ in files)
    if kind == "change" and has:
        return [[p, text if p == path else t] for p, t in files]
    if kind == "move" or (kind == "add" and not has):
        return [*([p, t] for p, t in files if p != path), [path, text]]
    if kind == "drop":
        return [[p, t] for p, t in files if p != path]
    return [list(pair) for pair in files]


def _declared(files: list[list[str]], how: str) -> dict[str, Any]:
    body: dict[str, Any] = {"files": files, "note": how}
    if how == "declared":
        body["summary"] = _summary(dict(files))
    elif how == "empty":
        body["summary"] = {}
    elif how == "unsorted":  # (a list that is not sorted names is kept as it is)
        body["summary"] = {"roles": [p for p, _ in reversed(files)], "tests": len(files)}
    return body


@settings(deadline=None)
@given(
    steps=st.lists(st.tuples(OPERATIONS, SUMMARIES, st.booleans()), min_size=3, max_size=40),
    every=st.sampled_from([64, 3, 2, 1]),
    after=st.integers(min_value=0, max_value=31),
    limit=st.integers(min_value=1, max_value=8),
)
def test_any_sequence_of_changes_reads_back(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[tuple[Any, ...], str, bool]],
    every: int,
    after: int,
    limit: int,
) -> None:
    """Whatever the uploads, changes, drops and adds, whichever of two processes wrote
    each, and however often a full list is written: every revision reads back as given
    from either, and any page of the history lists it."""
    db = tmp_path_factory.mktemp("deltas") / "s.db"
    stores = SqliteStore(db), SqliteStore(db)
    was, revisions.EVERY = revisions.EVERY, every
    try:
        files, expected = START, [_declared(START, "declared")]
        stores[0].add_revision(expected[0])
        for op, how, second in steps:
            files = _apply(files, op)
            expected.append(_declared(files, how))
            assert stores[second].add_revision(expected[-1]) == len(expected)
    finally:
        revisions.EVERY = was
    for store in stores:
        for n, body in enumerate(expected, 1):
            assert store.get_revision(n) == body
        listed = [(n, _listed(body)) for n, body in enumerate(expected, 1)]
        assert store.list_revisions(after, limit) == listed[after : after + limit]
        assert store.get_revision(len(expected) + 1) is None
        store.close()
    for n, row in _rows(db):
        assert n - revisions.chain_start(n, row) < every
