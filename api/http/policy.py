"""The policy: upload (a new revision, or 422 with the checker's diagnostics, or 409 when it
removes what is still in use), read, history."""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.http import answers as a
from api.http import models as m
from api.http.auth import require_admin
from api.http.body import parse, read_body, single_header
from api.http.pagination import int_query, query
from api.http.parts import service_of
from api.http.preconditions import if_match
from api.http.routing import Spec, Table, json_response
from api.service import inuse, pages, views
from api.service.core import Service
from api.service.errors import ServiceError
from engine.compile import Snapshot
from grammar import paths
from grammar.source import NotUtf8, decode
from policy import bundles
from policy.diagnostics import CharterError, error_count

SINGLE_FILE = "policy.charter"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _shown(path: str) -> str:
    """A path for a message: its control characters as escapes, not as themselves."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", path)


def path_problem(path: str) -> str | None:
    """Why `path` cannot name a policy file, or None. A file's path is what `charter
    serve --workspace DIR` names one (relative, parts between `/`, `.charter`), so that a
    revision's files (`GET /v1/policy`) can be written into a directory and read back
    as the same policy: `../x` and `/etc/passwd` would lead a client writing them out of
    that directory, `a/../p.charter` and `./p.charter` would be two files that are one
    there, `x.txt` one that `charter check` skips, and `<default hooks>` would take the
    name that reasons give the default approval hooks' location. Nor may it name what a Windows
    directory cannot hold (`grammar.paths`): `con.charter` is a device there."""
    control = _CONTROL.search(path)
    if control:
        return f"holds the control character `U+{ord(control.group()):04X}`"
    if "\\" in path:
        return "holds a backslash: its parts are separated by `/`"
    if path.startswith("/"):
        return "is absolute: a path is relative to the policy's directory"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "has an empty, `.` or `..` part"
    if not path.endswith(".charter") or path.rsplit("/", 1)[-1] == ".charter":
        return "does not end in `<name>.charter`"
    return paths.part_problem(path)  # (`aux.charter`: no Windows checkout holds it)


async def put_policy(request: Request) -> Response:
    """JSON `{files: [{path, text}]}`, or the DSL text itself (any non-JSON content type)."""
    actor = require_admin(request)
    # A server that takes only signed bundles refuses a plain upload before its body.
    service_of(request).require_signed()
    remove = remove_in_use(request)
    # Once (else 400 `repeated-header`): it says whether the body is JSON or DSL text, and
    # a proxy reading the other of two would see another upload than the one stored.
    kind = single_header(request.scope, b"content-type") or ""
    raw = await read_body(request)
    media, *params = kind.lower().split(";")
    if media.strip() == "application/json":  # (UTF-8, whatever a charset says: RFC 8259)
        upload = parse(m.PolicyUpload, raw)
        files = [(f.path, f.text) for f in upload.files]
        note = upload.note
    else:
        _utf8_text(params)
        try:  # decoded as the CLI decodes a file (grammar.source): same bytes, same text
            files = [(SINGLE_FILE, decode(raw, SINGLE_FILE))]
        except NotUtf8 as bad:
            raise ServiceError(
                "not-utf8", "the policy text is not UTF-8",
                diagnostics=[bad.diagnostic.to_json()],
            ) from None  # fmt: skip
        note = ""
        if not files[0][1].strip():
            # An upload replaces every file: a bare `curl -X PUT` (no body, no type) must
            # not empty the policy of every declaration.
            raise ServiceError(
                "empty-policy", "the policy text is empty",
                help="send the policy's DSL text; to empty the policy on purpose, send a "
                "text holding only a comment",
            )  # fmt: skip
    check_paths(files)
    return await _store(request, actor.token_id, remove, files, note)


async def put_bundle(request: Request) -> Response:
    """A bundle file: its files, their manifest and its signatures (api/cli_bundle.py).
    With `--trusted-keys` it is verified against them (policy/bundles.py), else its files
    are checked against its manifest alone; either before anything is compiled."""
    actor = require_admin(request)
    remove = remove_in_use(request)
    upload = parse(m.PolicyBundle, await read_body(request))
    files = [(f.path, f.text) for f in upload.files]
    check_paths(files)
    service = service_of(request)
    try:
        document = bundles.read_document(upload.model_dump(include={"manifest", "signatures"}))
        if service.trusted is None:
            signed = bundles.check_unsigned(files, document)
        else:
            signed = bundles.verify(files, document, service.trusted)
    except bundles.BundleError as exc:
        raise ServiceError(exc.code, exc.message, help=exc.help) from None
    return await _store(request, actor.token_id, remove, files, signed.note(), signed)


def check_paths(files: list[tuple[str, str]]) -> None:
    """400 `bad-path` or `duplicate-path` for files that no directory holds as named."""
    for path, _ in files:
        problem = path_problem(path)
        if problem is not None:
            raise ServiceError(
                "bad-path", f"file path `{_shown(path)}` {problem}",
                help=paths.PART_HELP if problem == paths.part_problem(path) else
                "name each file as a path below the policy's directory, such as "
                "`policy.charter` or `teams/support.charter`",
            )  # fmt: skip
    if len({path for path, _ in files}) != len(files):
        raise ServiceError("duplicate-path", "two files have the same path")
    clashes = paths.clashes([path for path, _ in files])
    if clashes:  # (Service.check refuses them too, E0119, for the other ways a policy comes)
        raise ServiceError("bad-path", clashes[0].message, help=clashes[0].help)


async def _store(
    request: Request, token_id: str, remove: bool, files: list[tuple[str, str]], note: str,
    signed: bundles.Verified | None = None,
) -> Response:  # fmt: skip
    """The upload of `files`, checked: a new revision (201), or why not."""
    based_on = _if_match(request)
    service = service_of(request)
    service.require_signed(files, signed)  # (and again as the revision is added)
    if based_on is not None:
        # A stale one at once, not after compiling the policy (seconds for a large one),
        # nor as the 422 of a policy that does not check; again inside the transaction.
        _still_latest(service.store.latest_revision(), based_on)
    try:
        # Checked and compiled first, in a thread and outside the write transaction:
        # seconds for a large policy, while the event loop serves on and other
        # writers and workers are not held off. The upload then takes what it made.
        prepared = await run_in_threadpool(_compile, service, files)
        with service.store.atomic():
            if based_on is not None:
                _still_latest(service.store.latest_revision(), based_on)
            # (in this transaction: an agent made meanwhile, by any process, is seen)
            removed = inuse.require_unused(service, prepared.workspace, remove, OVERRIDE)
            snapshot = service.upload(files, f"token:{token_id}", note, prepared, signed)
    except CharterError as exc:
        raise ServiceError(
            "policy-invalid", f"the policy has {error_count(exc.diagnostics)} error(s)",
            diagnostics=[d.to_json() for d in exc.diagnostics],
        ) from None  # fmt: skip
    warnings = [d.to_json() for d in snapshot.workspace.warnings]
    return json_response(
        {"revision": snapshot.revision, "warnings": warnings,
         "removed_in_use": inuse.listing(removed)},
        201,
    )  # fmt: skip


def _compile(service: Service, files: list[tuple[str, str]]) -> Snapshot:
    """`files` compiled, and the latest revision too if this process has not yet (another
    worker uploaded it): what is in use is read against it inside the transaction, where
    a compile would hold off every other writer."""
    inuse.latest_workspace(service)
    return service.compile(files)


REMOVE_IN_USE = "remove_in_use"
OVERRIDE = f"upload it again with `?{REMOVE_IN_USE}=true`"


def remove_in_use(request: Request) -> bool:
    """`?remove_in_use=true`: the upload removes what is still in use, and says what
    (`removed_in_use`); `false` or none: 409 `policy-in-use` if it would. Anything else is
    400 `bad-remove-in-use`: a misspelt `True` or `1` taken for `false` refuses an upload
    meant to go through, taken for `true` removes what was meant to be kept."""
    value = query(request, REMOVE_IN_USE)
    if value is None or value == "" or value == "false":
        return False
    if value == "true":
        return True
    raise ServiceError(
        "bad-remove-in-use", f"`{REMOVE_IN_USE}` must be `true` or `false`",
        help=f"send `?{REMOVE_IN_USE}=true` to remove what is in use, or leave it out",
    )  # fmt: skip


# A text body is read as UTF-8, so it may say so (or ASCII, a part of UTF-8), or nothing.
_UTF8 = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


def _utf8_text(params: list[str]) -> None:
    """The 415 for a DSL-text body whose Content-Type names another charset: read as
    UTF-8, a `charset=iso-8859-1` text whose bytes happen to be UTF-8 (`Ã©`) would be
    stored as other text (`é`) than the client showed."""
    for param in params:
        name, _, value = param.partition("=")
        charset = value.strip().strip('"')
        if name.strip() == "charset" and charset not in _UTF8:
            raise ServiceError(
                "unsupported-charset",
                f"the policy text is read as UTF-8, not as `{charset[:40]}`",
                help="send the text as UTF-8 (`Content-Type: text/plain; charset=utf-8`)",
            )  # fmt: skip


_REVISION_TAG = re.compile(r'"(0|[1-9][0-9]{0,17})"')


def _if_match(request: Request) -> int | str | None:
    """`If-Match` of a policy upload: the revision it was made from (`"7"`, the ETag of
    `GET /v1/policy`), `*` (any revision), or None when not sent; 400 `bad-if-match`
    for anything else. An upload replaces every file, so one made from an older revision
    would drop what came since (a role an agent created meanwhile) without a word."""
    value = if_match(
        request, _REVISION_TAG, "a revision's entity tag, such as `\"7\"`",
        "`GET /v1/policy` for the revision you edited",
    )  # fmt: skip
    if value is None or value == "*":
        return value
    return int(value[1:-1])


def _still_latest(latest: int, based_on: int | str) -> None:
    """Inside the upload's transaction: the 412 when the policy moved past `based_on`."""
    if (based_on == "*" and latest > 0) or based_on == latest:
        return
    raise ServiceError(
        "revision-moved",
        f"the latest revision is {latest}, not {based_on}: it has changed since",
        help='read it again (GET /v1/policy), make your change there, and upload it with '
        f'`If-Match: "{latest}"`',
        latest=latest,
    )  # fmt: skip


async def get_policy(request: Request) -> Response:
    require_admin(request)
    service = service_of(request)
    # Revisions count from 1: `?revision=0` answered the latest, under its own number.
    wanted = int_query(request, "revision", 0, minimum=1)
    number, files = service.files(wanted or None)
    response = json_response(
        {"revision": number, "files": [{"path": p, "text": t} for p, t in files]}
    )
    response.headers["ETag"] = f'"{number}"'  # (what a later upload names in If-Match)
    return response


async def revisions(request: Request) -> Response:
    require_admin(request)
    cursor = query(request, "cursor")
    limit = int_query(request, "limit", 50, minimum=1, maximum=pages.MAX_LIMIT)
    return json_response(views.revision_history(service_of(request), cursor, limit).body)


ROUTES: Table = [
    (Spec("PUT", "/v1/policy", "Upload the policy: a new revision, or 422 with diagnostics",
          "admin", m.PolicyUpload, a.PolicyUploaded, status=201, text=True, errors=(409, 412, 415),
          query=(REMOVE_IN_USE,), headers=("If-Match",), operation="uploadPolicy",
          tag="policy"),
     put_policy),
    (Spec("PUT", "/v1/policy/bundle", "Upload a signed policy bundle: a new revision",
          "admin", m.PolicyBundle, a.PolicyUploaded, status=201, errors=(409, 412),
          query=(REMOVE_IN_USE,), headers=("If-Match",), operation="uploadBundle",
          tag="policy"),
     put_bundle),
    (Spec("GET", "/v1/policy", "The policy files of a revision (default: the latest)", "admin",
          None, a.Policy, query=("revision",), errors=(404,), etag=True, operation="getPolicy",
          tag="policy"), get_policy),
    (Spec("GET", "/v1/revisions", "Every revision, oldest first", "admin", None, a.RevisionPage,
          query=("cursor", "limit"), operation="listRevisions", tag="policy"), revisions),
]  # fmt: skip
