"""Signed checkpoints of the decision log, and the log's verification against them.

The log is one hash chain (policy/store/rowsum.py): each run's digest covers its rows and
the digest of the run before. The chain alone shows a row edited, removed, moved or put
in without its digests made again; but it has no key, so whoever can write the database
can rewrite a row and make every digest after it again, and the chain is whole. A
checkpoint closes that: the log's head (its last seq and the chain's digest there),
signed with the server's key (policy/serverkeys.py), whose seed is sealed under the key
file outside the database. A rewritten log does not give the digest a checkpoint
signed, and no one without the key file can sign another.

A checkpoint is a COSE_Sign1 (policy/cose.py) whose payload is the CBOR map
`{"log": "charter-decisions", "seq": N, "digest": h'<16 bytes>', "at": <ms>}`, kept as
the document `log-checkpoints/<seq, 20 digits>`. A serving process writes one every
`INTERVAL` seconds when the log grew, and one as it shuts down (`Checkpointer`); before
it signs, it walks the log from the newest checkpoint any of the database's processes
signed to the head, and signs nothing over a chain that does not verify (a damaged log
is not vouched for).

`verify` walks the whole log and every checkpoint: each run's checksum and link, each
checkpoint's signature (by a key of the ring, within its validity), and that the chain
gives each checkpoint's digest at its seq. It names every stretch that is wrong, the
first one first. What it cannot show: rows after the last checkpoint are protected by
the chain alone (someone with the database can rewrite them and their digests), and a
checkpoint deleted from the database takes its protection with it; a copy of a recent
checkpoint kept elsewhere (`GET /v1/log/verify` answers the last one) is what shows that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import cbor2

from policy.cose import CoseError, sign1, verify1
from policy.serverkeys import PublicKey, ServerKeys
from policy.store import Damaged, Store, StoreDamaged, StoreUnavailable

KIND = "log-checkpoints"
LOG = "charter-decisions"
INTERVAL = 60.0  # seconds between a serving process's checkpoints
_PAGE = 1000  # rows a walk reads at once (as a page of `GET /v1/decisions`)
_PAGE_BYTES = 4 << 20
MOST_FINDINGS = 100  # what a report lists at most (it counts them all)

_logger = logging.getLogger("charter.log")


def checkpoint_id(seq: int) -> str:
    return f"{seq:020d}"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint whose signature verified: the chain's `digest` through `seq`."""

    seq: int
    digest: bytes
    at: int
    kid: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "digest": self.digest.hex(), "at": self.at, "kid": self.kid}


@dataclass(frozen=True, slots=True)
class Finding:
    """Decisions `seq` to `last_seq` are not as logged; `why` is a stable word:
    `checksum-mismatch`, `chain-broken`, `missing`, `undecodable` (the chain's,
    policy/store/logcheck.py), `checkpoint-mismatch` (the chain does not give the digest
    a checkpoint signed: rewritten and chained again), `checkpoint-forged` (a checkpoint
    whose signature does not verify: `seq` is the seq it claims)."""

    seq: int
    last_seq: int
    why: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "last_seq": self.last_seq, "why": self.why, "detail": self.detail}


@dataclass(slots=True)
class Report:
    """What `verify` found: `head`, the last seq logged; `covered_through`, the last seq a
    verified checkpoint vouches for (0: none); the findings in seq order."""

    head: int = 0
    covered_through: int = 0
    checkpoints: int = 0
    last_checkpoint: Checkpoint | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        first = self.findings[0].to_json() if self.findings else None
        return {
            "sound": self.sound, "head": self.head, "covered_through": self.covered_through,
            "checkpoints": self.checkpoints,
            "last_checkpoint": None if self.last_checkpoint is None
            else self.last_checkpoint.to_json(),
            "first_bad": first, "found": len(self.findings),
            "findings": [f.to_json() for f in self.findings[:MOST_FINDINGS]],
        }  # fmt: skip


def sign_head(keys: ServerKeys, seq: int, digest: bytes, at: int) -> tuple[str, bytes]:
    """The head signed with the server's signing key: (its id, the COSE_Sign1)."""
    kid, key = keys.signing()
    payload = cbor2.dumps({"log": LOG, "seq": seq, "digest": digest, "at": at}, canonical=True)
    return kid, sign1(key, kid, payload)


def _opened(body: Any, trusted: Mapping[str, PublicKey]) -> Checkpoint | str:
    """The checkpoint a stored document holds, or why it does not verify."""
    cose = body.get("cose") if isinstance(body, dict) else None
    if not isinstance(cose, bytes):
        return "it holds no signed checkpoint"
    try:
        kid, payload = verify1(cose, {k: key.verify_key for k, key in trusted.items()})
    except CoseError as exc:
        return exc.message
    if not isinstance(payload, dict) or payload.get("log") != LOG:
        return "its payload is not a checkpoint of the decision log"
    seq, digest, at = payload.get("seq"), payload.get("digest"), payload.get("at")
    if type(seq) is not int or not isinstance(digest, bytes) or type(at) is not int:
        return "its payload is not a checkpoint of the decision log"
    if seq != body.get("seq"):
        return f"it is stored as the checkpoint at {body.get('seq')} and signs seq {seq}"
    if not trusted[kid].valid_at(at):
        return f"key `{kid}` was not valid at its time ({at})"
    return Checkpoint(seq, digest, at, kid)


def checkpoints(
    store: Store, trusted: Mapping[str, PublicKey]
) -> tuple[list[Checkpoint], list[Finding]]:
    """Every stored checkpoint that verifies, in seq order, and one finding for each that
    does not."""
    good: list[Checkpoint] = []
    bad: list[Finding] = []
    for row in store.scan(KIND):
        found = _opened(row.body, trusted)
        if isinstance(found, Checkpoint):
            good.append(found)
            continue
        seq = row.body.get("seq") if isinstance(row.body, dict) else None
        at = seq if type(seq) is int and seq > 0 else 0
        bad.append(Finding(at, at, "checkpoint-forged", f"the checkpoint at {at}: {found}"))
    good.sort(key=lambda c: c.seq)
    return good, bad


def walk(store: Store, after: int, through: int) -> Iterator[Finding]:
    """The chain's findings for decisions `after + 1` to `through` (each run's checksum
    and link to the run before, seqs missing)."""
    at = after
    while at < through:
        rows = store.read_decisions(at, _PAGE, _PAGE_BYTES)
        if not rows:
            if at < through:
                yield Finding(at + 1, through, "missing", _removed(at + 1, through))
            return
        for seq, row in rows:
            if seq > through:
                return
            if isinstance(row, Damaged):
                last = min(row.last_seq, through)
                yield Finding(row.seq, last, row.why, row.detail)
                at = row.last_seq
            else:
                at = seq


def _removed(first: int, last: int) -> str:
    if first == last:
        return f"decision {first} is not in the log (removed)"
    return f"decisions {first} to {last} are not in the log (removed)"


def verify(store: Store, trusted: Mapping[str, PublicKey]) -> Report:
    """The whole log checked against its chain and every checkpoint (see the module)."""
    head, _ = store.log_head()
    good, findings = checkpoints(store, trusted)
    report = Report(head=head, checkpoints=len(good))
    findings.extend(walk(store, 0, head))
    vouched = 0
    for point in good:
        if point.seq > head:
            findings.append(
                Finding(head + 1, point.seq, "missing",
                        f"{_removed(head + 1, point.seq)}: the checkpoint at {point.seq} "
                        "signed them")
            )  # fmt: skip
            continue
        if store.log_link(point.seq) != point.digest:
            findings.append(
                Finding(vouched + 1, point.seq, "checkpoint-mismatch",
                        f"the log through {point.seq} is not the one the checkpoint at "
                        f"{point.seq} signed: a row from {vouched + 1} on was rewritten "
                        "and the chain made again")
            )  # fmt: skip
            continue
        vouched = point.seq
        report.last_checkpoint = point
    report.covered_through = vouched
    findings.sort(key=lambda f: (f.seq, f.last_seq))
    report.findings = findings
    return report


class Checkpointer:
    """Signs the log's head every `interval` seconds on a thread of its own, once more
    at `stop`, each time the log grew and its chain from the last checkpoint verifies."""

    def __init__(self, store: Store, keys: ServerKeys, interval: float = INTERVAL) -> None:
        self._store = store
        self._keys = keys
        self._interval = interval
        self._last: Checkpoint | None = None
        self._read_to = 0  # the position of the last checkpoint document read
        self._stop = threading.Event()
        self._turn = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name="charter-log-checkpoint"
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and sign the head once more (a shutdown's last checkpoint)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.quietly()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.quietly()

    def quietly(self) -> None:
        try:
            self.checkpoint()
        except (StoreUnavailable, StoreDamaged, OSError) as exc:  # (the next turn tries again)
            _logger.warning("the decision log's checkpoint is not written: %s", exc)
        except Exception:  # a thread of its own: what it raises goes to the log, not up
            _logger.exception("the decision log's checkpoint failed")

    def checkpoint(self) -> Checkpoint | Finding | None:
        """Sign the head when the log grew since the last checkpoint and its chain from
        there verifies: the checkpoint written; else the finding that stopped it, or None
        when there is nothing new to sign."""
        with self._turn:
            self._catch_up()
            head, digest = self._store.log_head()
            last = self._last
            start = 0 if last is None else last.seq
            if head <= start:
                if last is not None and head < last.seq:
                    return self._refused(
                        Finding(head + 1, last.seq, "missing", _removed(head + 1, last.seq))
                    )
                return None
            if last is not None and self._store.log_link(last.seq) != last.digest:
                return self._refused(
                    Finding(1, last.seq, "checkpoint-mismatch",
                            f"the log through {last.seq} is not the one last signed")
                )  # fmt: skip
            for finding in walk(self._store, start, head):
                return self._refused(finding)
            at = int(time.time() * 1000)
            kid, signed = sign_head(self._keys, head, digest, at)
            self._store.insert(KIND, checkpoint_id(head), {"seq": head, "cose": signed})
            self._last = Checkpoint(head, digest, at, kid)
            return self._last

    def _catch_up(self) -> None:
        """The newest checkpoint any process of the database signed since the last look,
        when its signature verifies, becomes the one the next walk starts from: each of
        N processes walks only what came since anyone's last checkpoint, not the same
        stretch N times. Its signer walked the chain to it before it signed; the link
        there is checked again before the walk from it, as for this process's own."""
        trusted = self._keys.trusted()
        while True:
            rows = self._store.page(KIND, self._read_to, _PAGE)
            if not rows:
                return
            self._read_to = rows[-1].pos
            for row in rows:
                found = _opened(row.body, trusted)
                if isinstance(found, Checkpoint) and (
                    self._last is None or found.seq > self._last.seq
                ):
                    self._last = found

    def _refused(self, finding: Finding) -> Finding:
        _logger.error(
            "the decision log is not signed: decisions %d to %d: %s: %s",
            finding.seq, finding.last_seq, finding.why, finding.detail,
        )  # fmt: skip
        return finding
