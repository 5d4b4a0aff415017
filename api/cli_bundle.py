"""`charter bundle keygen|build|sign|verify`: signed policy bundles from the command line,
and the reading of a bundle (a directory or a bundle file) that `charter serve
--trusted-keys` shares (policy/bundles.py has the format; docs/operations.md, "Signed
policy bundles", the commands).

A bundle is either a workspace directory, its `*.charter` files with the signatures
document `.charter-bundle.json` beside them, or a bundle file (`build -o FILE`): one JSON
document `{manifest, signatures, files: [{path, text}]}`, the body `PUT
/v1/policy/bundle` takes.

Exit codes: 0 done (verified); 1 the bundle is refused (`charter: error[<code>]: why`,
and a `help:` line) or its files cannot be read; 2 the command line cannot be done: a
key file or trusted-keys file missing or malformed, a path that is not a bundle, a key
file already there. A refusal writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from api.cli_args import not_utf8
from api.cli_serve_checks import os_reason, refuse
from api.service.core import Service
from engine.check import read_sources
from policy import bundles
from policy.bundles import BundleError, Document, KeyFileError, SigningKey, TrustedKey
from policy.diagnostics import CharterError, render_all

TRUSTED_FLAG = "--trusted-keys"
BUNDLE_MEDIA = "application/json"


def workspace_files(workspace: str | Path) -> list[tuple[str, str]]:
    """The directory's `*.charter` files, named relative to it (`mail.charter:7:3` in a
    reason, as an upload names them): where the server keeps its files is nobody's
    business, and shorter locations make smaller responses and log rows. A file is
    itself, by its name. Raises CharterError for a file that cannot be read."""
    root = Path(workspace)
    if not root.is_dir():
        return [(Path(name).name, text) for name, text in read_sources([workspace])]
    return [(Path(name).relative_to(root).as_posix(), text) for name, text in read_sources([root])]


class BundleUnreadable(Exception):
    """A path that holds no bundle to read (exit 2): not there, not JSON, no manifest."""


def _read_json(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BundleUnreadable(f"cannot read `{path}`: {os_reason(exc)}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BundleUnreadable(f"`{path}` is not a JSON document") from None


def read_bundle(path: str | Path) -> tuple[list[tuple[str, str]], Document | None]:
    """The files and signatures document of the bundle at `path`: a directory (None when
    it holds no `.charter-bundle.json`: an unsigned workspace) or a bundle file. Raises
    BundleError (`bundle-malformed`), BundleUnreadable, or CharterError (a policy file
    that cannot be read)."""
    where = Path(path)
    if where.is_dir():
        files = workspace_files(where)
        signatures = where / bundles.SIGNATURES_FILE
        if not signatures.exists():
            return files, None
        return files, bundles.read_document(_read_json(signatures))
    value = _read_json(where)
    return files_of(value), bundles.read_document(value)


def files_of(value: Any) -> list[tuple[str, str]]:
    """A bundle file's `files` ([{path, text}]), strictly (`bundle-malformed`)."""
    raw = value.get("files") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        raise bundles.BundleError(
            "bundle-malformed", "the bundle file has no `files` list",
            "make it with `charter bundle build DIR -o FILE`",
        )  # fmt: skip
    files = []
    for entry in raw:
        if (not isinstance(entry, dict) or set(entry) != {"path", "text"}
                or not isinstance(entry["path"], str) or not isinstance(entry["text"], str)):  # fmt: skip
            raise bundles.BundleError(
                "bundle-malformed", "the bundle file has a file that is not `{path, text}`",
                "make it with `charter bundle build DIR -o FILE`",
            )  # fmt: skip
        files.append((entry["path"], entry["text"]))
    return files


def read_trusted(path: str) -> dict[str, TrustedKey]:
    """A trusted-keys file's keys; KeyFileError (with the path) for one that cannot be
    read or is malformed."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise KeyFileError(
            f"cannot read the trusted-keys file `{path}`: {os_reason(exc)}"
        ) from None
    except UnicodeDecodeError:
        raise KeyFileError(f"the trusted-keys file `{path}` is not UTF-8") from None
    try:
        return bundles.read_trusted_keys(text)
    except KeyFileError as exc:
        raise KeyFileError(f"the trusted-keys file `{path}`: {exc}") from None


def _read_key(path: str) -> SigningKey:
    try:
        data = Path(path).read_bytes()
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise KeyFileError(f"cannot read the key file `{path}`: {os_reason(exc)}") from None
    if mode & 0o077:
        raise KeyFileError(
            f"the key file `{path}` may be read or written by others (mode {mode:04o}): "
            "whoever reads it signs bundles as you; `chmod 600` it"
        )
    try:
        return bundles.read_signing_key(data.decode("ascii"))
    except (UnicodeDecodeError, KeyFileError) as exc:  # (never the key's text)
        why = exc if isinstance(exc, KeyFileError) else "it is not ASCII"
        raise KeyFileError(f"the key file `{path}` is malformed: {why}") from None


def signed_workspace(workspace: str, trusted: dict[str, TrustedKey]) -> bundles.Verified:
    """`charter serve --workspace DIR --trusted-keys FILE`: the directory's files, read
    once and verified (these very texts are loaded). BundleError, or CharterError for a
    file that cannot be read. A single file (not a directory) has no signatures."""
    if Path(workspace).is_dir():
        try:
            files, document = read_bundle(workspace)
        except BundleUnreadable as exc:
            raise bundles.BundleError(
                "bundle-malformed", str(exc), f"{bundles.RESIGN} in the directory"
            ) from None
    else:
        files, document = workspace_files(workspace), None
    return bundles.verify(files, document, trusted)


def unsigned_latest(service: Service, trusted: dict[str, TrustedKey]) -> BundleError | None:
    """Why the latest revision is not a bundle `trusted` verify (its files against the
    signatures it was stored with), or None (it is one, or there is none)."""
    latest = service.store.latest_revision()
    if not latest:
        return None
    body = service.store.get_revision(latest) or {}
    files = [(str(p), str(t)) for p, t in body.get("files", [])]
    try:
        stored = body.get("bundle")
        bundles.verify(files, None if stored is None else bundles.read_document(stored), trusted)
    except BundleError as exc:
        return exc
    return None


def refused(exc: BundleError, what: str = "") -> int:
    """A bundle refused: its code, why and what to do, exit 1."""
    sys.stderr.write(f"charter: error[{exc.code}]: {what}{exc.message}\nhelp: {exc.help}\n")
    return 1


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    """`text` at `path`, whole or not at all: written beside it, then renamed over it."""
    spare = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(spare, mode)  # (whatever the umask)
        os.replace(spare, path)
    finally:
        spare.unlink(missing_ok=True)


def _save(target: Path, document: Document, files: list[tuple[str, str]], beside: bool) -> Path:
    """`document` kept `beside` the files of the workspace directory `target`, or with
    the files in the one bundle file `target`. The path written."""
    if beside:
        target = target / bundles.SIGNATURES_FILE
        _write(target, _dumps(document.to_json()))
    else:
        body = {**document.to_json(), "files": [{"path": p, "text": t} for p, t in files]}
        _write(target, _dumps(body))
    return target


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _unreadable_files(exc: CharterError) -> int:
    sys.stderr.write(render_all(exc.diagnostics, exc.sources) + "\n")
    return 1


# ---- the commands ---------------------------------------------------------------------------
def cmd_keygen(args: argparse.Namespace) -> int:
    try:
        key = bundles.new_key(args.key_id)
    except KeyFileError as exc:
        return refuse(str(exc))
    path = Path(args.key)
    try:  # O_EXCL: a key already there is never replaced
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return refuse(f"`{path}` is already there", "give another path; no key was made")
    except OSError as exc:
        return refuse(f"cannot make the key file `{path}`: {os_reason(exc)}")
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.private_line() + "\n")
    sys.stdout.write(key.public_line() + "\n")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    why = not_utf8(args.revision)
    if why is not None or len(args.revision) > bundles.MAX_LABEL:
        return refuse(f"--revision must be UTF-8 and at most {bundles.MAX_LABEL} characters")
    root = Path(args.dir)
    if not root.is_dir():
        return refuse(f"`{root}` is not a directory", "give the workspace directory")
    try:
        files = workspace_files(root)
    except CharterError as exc:
        return _unreadable_files(exc)
    document = Document(bundles.manifest_of(files, args.revision))
    if args.output is None:
        target = _save(root, document, files, beside=True)
    else:
        target = _save(Path(args.output), document, files, beside=False)
    sys.stdout.write(f"built {target}: {len(files)} file(s), unsigned\n")
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    try:
        key = _read_key(args.key)
    except KeyFileError as exc:
        return refuse(str(exc))
    path = Path(args.bundle)
    try:
        files, document = read_bundle(path)
    except BundleUnreadable as exc:
        return refuse(str(exc), "give a workspace directory or a bundle file")
    except CharterError as exc:
        return _unreadable_files(exc)
    except BundleError as exc:
        return refused(exc)
    if document is None:
        return refuse(
            f"`{path}` has no `{bundles.SIGNATURES_FILE}`",
            f"build its manifest first: `charter bundle build {path}`",
        )
    try:  # a signature says these files: never over a manifest they do not match
        bundles.check_files(files, document.manifest)
    except BundleError as exc:
        return refused(exc, "not signed: ")
    _save(path, bundles.sign(document, key), files, beside=path.is_dir())
    sys.stdout.write(f"signed {path} with key `{key.key_id}`\n")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        trusted = read_trusted(args.trusted_keys)
    except KeyFileError as exc:
        return refuse(str(exc))
    try:
        files, document = read_bundle(args.bundle)
        verified = bundles.verify(files, document, trusted)
    except BundleUnreadable as exc:
        return refuse(str(exc), "give a workspace directory or a bundle file")
    except CharterError as exc:
        return _unreadable_files(exc)
    except BundleError as exc:
        return refused(exc)
    label = verified.document.manifest.revision
    sys.stdout.write(
        f"verified {args.bundle}: {len(files)} file(s), revision `{label}`, signed by "
        f"`{verified.key_id}`\n"
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("bundle", help="build, sign and verify signed policy bundles")
    verbs = p.add_subparsers(dest="bundle_command", required=True)

    q = verbs.add_parser("keygen", help="make an Ed25519 signing key; print its trusted-keys line")
    q.add_argument("--key-id", required=True, help=f"the key's id: {bundles.KEY_ID_RULE}")
    q.add_argument("--key", required=True, metavar="KEYFILE",
                   help="the private key file to make (0600; never replaced)")  # fmt: skip
    q.set_defaults(func=cmd_keygen)

    q = verbs.add_parser("build", help="write the manifest of a workspace's files (unsigned)")
    q.add_argument("dir", metavar="DIR", help="the workspace directory")
    q.add_argument("-o", "--output", default=None, metavar="FILE",
                   help=f"write a bundle file (files and manifest) here, for `PUT "
                   f"/v1/policy/bundle`; default: `DIR/{bundles.SIGNATURES_FILE}`")  # fmt: skip
    q.add_argument("--revision", default="", metavar="LABEL",
                   help="a label the manifest carries (a version, a commit)")  # fmt: skip
    q.set_defaults(func=cmd_build)

    q = verbs.add_parser("sign", help="sign a bundle's manifest (a directory or a bundle file)")
    q.add_argument("bundle", metavar="DIR|FILE")
    q.add_argument("--key", required=True, metavar="KEYFILE",
                   help="a key file `charter bundle keygen` made")  # fmt: skip
    q.set_defaults(func=cmd_sign)

    q = verbs.add_parser("verify", help="verify a bundle against the trusted keys")
    q.add_argument("bundle", metavar="DIR|FILE")
    q.add_argument(TRUSTED_FLAG, required=True, metavar="FILE",
                   help="lines `KEY_ID ed25519 PUBLIC_KEY [expires=DATE]`")  # fmt: skip
    q.set_defaults(func=cmd_verify)
