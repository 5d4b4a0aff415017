"""Policy file paths that not every file system holds (`grammar.paths`): a file's path that
is another's directory, and a part that Windows takes for a device or that ends in a dot
or a space. Each way a policy comes in refuses them and writes nothing: `PUT /v1/policy`
(400 `bad-path`), a role made through the API and `charter serve --workspace` (E0119),
and `charter check` (E0119, exit 1). (The DSL-text form of `PUT /v1/policy` names its one
file `policy.charter`: no path of its own to refuse.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from api.cli import main
from api.cli_serve import prepare
from grammar import paths
from policy.diagnostics import CharterError
from tests.api.conftest import POLICY, Harness, expect

ROLE = "role side {\n  allow mail.send\n}\n"

NESTED = [
    ("roles/a.charter", "roles/a.charter/b.charter", "is also the directory of"),
    ("x.charter/y/z.charter", "x.charter", "is also the directory of"),  # (directory first)
    ("Roles/a.charter", "roles/A.charter/b.charter", "the directory `roles/A.charter` of"),
    ("caf\u00e9.charter/x.charter", "CAFE\u0301.charter", "differ only in case or Unicode"),
]
DEVICES = [
    ("con.charter", "`con.charter`", "`CON`"),
    ("roles/aux/x.charter", "`aux`", "`AUX`"),
    ("COM1.charter", "`COM1.charter`", "`COM1`"),
    ("teams/Lpt9.old.charter", "`Lpt9.old.charter`", "`LPT9`"),
    ("nul .charter", "`nul .charter`", "`NUL`"),
    ("Prn/a.charter", "`Prn`", "`PRN`"),
    ("teams/conin$.charter", "`conin$.charter`", "`CONIN$`"),
    ("CONOUT$/a.charter", "`CONOUT$`", "`CONOUT$`"),
    ("teams./x.charter", "`teams.`", "ends in a dot"),
    ("teams /x.charter", "`teams `", "ends in a space"),
]
# Nested directories, names that only start like a device's, and dots inside a part.
FINE = [
    "main.charter", "roles/a.charter", "roles/a/b.charter", "roles/a/b/c.charter",
    "roles/b.charter", "console.charter", "com10.charter", "com0.charter",
    "auxiliary/x.charter", "teams/con-team/x.charter", "a.b/c.charter", "x.charter.d/y.charter",
]  # fmt: skip


def _put(client: Any, harness: Harness, files: dict[str, str]) -> Any:
    body = {"files": [{"path": path, "text": text} for path, text in files.items()]}
    return client.put("/v1/policy", json=body, headers=harness.auth())


def _refuses_part(client: Any, harness: Harness, path: str, part: str, said: str) -> None:
    """An upload of `path` is 400 `bad-path` naming its `part` and saying `said`."""
    refused = _put(client, harness, {"main.charter": POLICY, path: ROLE})
    expect(refused, 400, "bad-path")
    detail = refused.json()["detail"]
    assert detail.startswith(f"file path `{path}` has the part {part}"), detail
    assert said in detail, detail
    assert refused.json()["help"] == paths.PART_HELP


def test_an_upload_of_a_path_no_directory_holds_is_refused(client: Any, harness: Harness) -> None:
    """A file's path that is another file's directory (also but for case or Unicode form),
    a Windows device name and a part ending in a dot or a space: 400 `bad-path` naming the
    paths, with a `help:`, and nothing written; nested paths of other names are taken."""
    for first, second, said in NESTED:
        refused = _put(client, harness, {"main.charter": POLICY, first: ROLE, second: ""})
        expect(refused, 400, "bad-path")
        detail = refused.json()["detail"]
        assert f"`{first}`" in detail and f"`{second}`" in detail and said in detail, detail
        assert refused.json()["help"] == paths.Clash(first, second, first).help
    for path, part, said in DEVICES:
        _refuses_part(client, harness, path, part, said)
    assert harness.service.store.latest_revision() == 1
    fine = {path: "" for path in FINE} | {"main.charter": POLICY}
    assert _put(client, harness, fine).status_code == 201
    assert harness.service.store.latest_revision() == 2


# One directory spelled two ways, the first path's spelling, then the second's.
SPELLED = [
    ("Roles/c.charter", "roles/a.charter", "Roles", "roles"),
    ("teams/Support/a.charter", "teams/support/b.charter", "teams/Support", "teams/support"),
    ("API/roles/x.charter", "api/roles/y.charter", "API/roles", "api/roles"),
    ("caf\u00e9/a.charter", "CAFE\u0301/b.charter", "caf\u00e9", "CAFE\u0301"),
]


def test_an_upload_that_spells_a_directory_two_ways_is_refused(
    client: Any, harness: Harness
) -> None:
    """On a case-insensitive file system two spellings of a directory are one directory,
    spelled as the first: a checkout read one of the files back under another path (an
    uploaded `API/roles/x.charter` became the API's own role file). 400 `bad-path`
    naming both, nothing written."""
    for first, second, one, other in SPELLED:
        refused = _put(client, harness, {"main.charter": POLICY, first: ROLE, second: ""})
        expect(refused, 400, "bad-path")
        detail = refused.json()["detail"]
        assert detail.startswith(
            f"the directory `{one}` of `{first}` and the directory `{other}` of `{second}`"
        ), detail
        assert refused.json()["help"] == "spell the directory the same way in every path"
    assert harness.service.store.latest_revision() == 1
    assert [c.message for c in paths.clashes(["A/x.charter", "a/x.charter"])] == [
        "file paths `A/x.charter` and `a/x.charter` differ only in case: on a "
        "case-insensitive file system (macOS, Windows) they are one file"
    ]  # (one clash, not also its directory's)


def test_a_role_whose_file_no_directory_holds_is_refused(client: Any, harness: Harness) -> None:
    """A role made through the API is the file `api/roles/<name>.charter`: a role named
    for a Windows device (`aux`, `com1`), or one whose file an uploaded file's directory
    is but for case, is a 422 E0119 that names its file, and nothing is written."""
    auth = harness.auth()
    for name in ("aux", "com1", "lpt9"):
        made = client.post("/v1/roles", json={"name": name, "source": f"role {name} {{\n}}\n"},
                           headers=auth)  # fmt: skip
        expect(made, 422, "policy-invalid")
        (found,) = made.json()["diagnostics"]
        assert (found["code"], found["file"]) == ("E0119", f"api/roles/{name}.charter")
        assert f"which Windows takes for the device `{name.upper()}`" in found["message"]
        assert "name the role otherwise" in found["help"]
    assert harness.service.store.latest_revision() == 1
    upload = {"main.charter": POLICY, "API/Roles/X.charter/y.charter": ROLE}
    assert _put(client, harness, upload).status_code == 201
    made = client.post("/v1/roles", json={"name": "x", "source": "role x {\n}\n"}, headers=auth)
    expect(made, 422, "policy-invalid")
    nested, spelled = made.json()["diagnostics"]
    assert (nested["code"], nested["file"]) == ("E0119", "api/roles/x.charter")
    assert (
        "file path `api/roles/x.charter` and the directory `API/Roles/X.charter` of "
        "`API/Roles/X.charter/y.charter` differ only in case" in nested["message"]
    )
    assert (spelled["code"], spelled["file"]) == ("E0119", "api/roles/x.charter")
    assert spelled["message"].startswith(
        "the directory `API/Roles` of `API/Roles/X.charter/y.charter` and the directory "
        "`api/roles` of `api/roles/x.charter`"
    ), spelled["message"]
    assert harness.service.store.latest_revision() == 2
    for name in ("console", "com10"):  # (`API/Roles` and `api/roles`: one directory)
        made = client.post("/v1/roles", json={"name": name, "source": f"role {name} {{\n}}\n"},
                           headers=auth)  # fmt: skip
        expect(made, 422, "policy-invalid")
    upload = {"main.charter": POLICY, "api.roles/X.charter/y.charter": ROLE}
    assert _put(client, harness, upload).status_code == 201
    for name in ("console", "com10", "y", "x"):  # (names of no directory, nor spelled anew)
        made = client.post("/v1/roles", json={"name": name, "source": f"role {name} {{\n}}\n"},
                           headers=auth)  # fmt: skip
        assert made.status_code == 201, made.text
    assert harness.service.store.latest_revision() == 7


def _refused_by_serve_and_check(
    harness: Harness, capsys: pytest.CaptureFixture[str], root: Path, said: str
) -> None:
    """`charter serve --workspace root` refuses it with one E0119 that says `said`, and
    writes nothing; `charter check root` exits 1 with that same diagnostic, at the file."""
    with pytest.raises(CharterError) as loaded:
        prepare(harness.service, str(harness.db), str(root))
    (found,) = loaded.value.diagnostics
    assert found.code == "E0119" and said in found.message, found.message
    assert harness.service.store.latest_revision() == 1
    assert main(["check", "--format", "json", str(root)]) == 1
    (checked,) = json.loads(capsys.readouterr().out)
    assert (checked["code"], checked["message"]) == ("E0119", found.message)
    assert checked["file"] == str(root / found.span.file), checked
    assert checked["help"] == found.help


def _workspace(root: Path, files: list[str]) -> Path:
    for path in files:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(POLICY if path == "main.charter" else "# a file\n", "utf-8")
    return root


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["main.charter", "Roles.charter", "roles.charter/x.charter"],
         "file path `Roles.charter` and the directory `roles.charter` of "
         "`roles.charter/x.charter` differ only in case"),
        (["main.charter", "aux.charter"], "file path `aux.charter` has the part `aux.charter`"),
        (["main.charter", "teams/Con/x.charter"], "has the part `Con`, which Windows takes"),
        (["main.charter", "teams./x.charter"], "has the part `teams.`, which ends in a dot"),
    ],
)  # fmt: skip
def test_a_workspace_of_paths_no_directory_holds_is_refused(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str], files: list[str],
    message: str,
) -> None:  # fmt: skip
    """A directory of a Linux file system can hold what a Windows or macOS one cannot:
    `charter serve --workspace` refuses it (E0119 at the file, nothing written) and so
    does `charter check` (exit 1), which looks at the paths below the directory it is
    given, not at the directories above it (here under `aux/`)."""
    _refused_by_serve_and_check(harness, capsys, _workspace(tmp_path / "aux" / "ws", files),
                                message)  # fmt: skip


def test_a_workspace_of_nested_paths_is_taken(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nested directories whose names only look like a device's or a file's are fine,
    for `charter check` and `charter serve --workspace` alike, under any directory."""
    files = FINE
    root = _workspace(tmp_path / "aux" / "con.charter", files)
    assert main(["check", str(root)]) == 0, capsys.readouterr().err
    assert main(["check", str(root / "roles" / "a.charter")]) == 0
    prepare(harness.service, str(harness.db), str(root))
    assert harness.service.store.latest_revision() == 2
    assert sorted(p for p, _ in harness.service.files()[1]) == sorted(files)


def test_every_clash_among_many_paths_is_found_once() -> None:
    """10,000 paths, one file in twenty also the directory of another: every clash found,
    each once (how long it takes is for `make bench`, not for a test)."""
    many = [f"{'d/' * (i % 20)}f{i}.charter" for i in range(10_000)]
    nested = [f"f{i}.charter/g.charter" for i in range(0, 10_000, 20)]
    found = paths.clashes([*many, *nested])
    assert len(found) == len(nested)
    assert all(clash.file == clash.first for clash in found)
    assert paths.clashes(many) == [] and paths.problems(many) == []


# Characters no Windows name holds: `a:b.charter` is there the stream `b.charter` of a file
# `a` (NTFS), which no listing shows; a backslash separates parts there.
RESERVED = [
    ("a:b.charter", "`a:b.charter`", "`:`"),
    ("teams/x?.charter", "`x?.charter`", "`?`"),
    ("a|b/x.charter", "`a|b`", "`|`"),
    ('say "hi".charter', '`say "hi".charter`', '`"`'),
    ("<x>.charter", "`<x>.charter`", "`<`"),
    ("x*.charter", "`x*.charter`", "`*`"),
]


def test_an_upload_of_a_character_windows_refuses_is_refused(client: Any, harness: Harness) -> None:
    """`<`, `>`, `:`, `"`, `|`, `?` and `*` are in no Windows file name: 400 `bad-path`
    naming the part and the character, and nothing written."""
    for path, part, said in RESERVED:
        _refuses_part(client, harness, path, part, said)
    assert harness.service.store.latest_revision() == 1


@pytest.mark.parametrize(
    ("name", "said"), [("a:b.charter", "`:`"), ("a\\b.charter", "a backslash"),
                       ("a\nb.charter", "`U+000A`"), ("a\x85b.charter", "`U+0085`")],
)  # fmt: skip
def test_a_workspace_of_a_character_windows_refuses_is_refused(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    """A Linux directory holds such a name (and a backslash or a control character, which
    `PUT /v1/policy` refuses too): `charter serve --workspace` and `charter check` give
    E0119, so a revision that an upload could not make is not made either."""
    _refused_by_serve_and_check(harness, capsys, _workspace(tmp_path / "ws", ["main.charter", name]),
                                said)  # fmt: skip
