"""Group commit: concurrent decision requests share one transaction, and nothing else."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from api import commands as c
from api.http.app import create_app
from api.service.calls import Call
from api.service.core import Service
from api.service.errors import ServiceError
from api.service.groupcommit import GroupCommit
from api.service.logrows import expand
from tests.api.conftest import (
    Harness,
    counting_transactions,
    depth_spy,
    seen_elsewhere,
    slow_compiles,
)
from tests.store.tables import sound

MAIL = {"to": "bob@example.com", "subject": "hi", "body": "hello"}


def _run(loop: str, main: Any) -> Any:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(main)
    return asyncio.run(main)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_concurrent_requests_share_one_transaction(harness: Harness, loop: str) -> None:
    commit = GroupCommit(harness.service)
    good = [Call("a1", "mail.send", MAIL)]
    bad_agent = [Call("nobody", "mail.send", MAIL)]
    batch_with_bad_turn = [Call("a1", "mail.send", MAIL), Call("a1", "mail.send", MAIL, turn="t")]

    async def run() -> list[Any]:
        requests = [good, bad_agent, good, batch_with_bad_turn, good * 3]
        return await asyncio.gather(*(commit.decide(c) for c in requests), return_exceptions=True)

    with counting_transactions(harness) as transactions:
        results = _run(loop, run())
    assert transactions[0] == 1
    assert [r["seq"] for r in results[0]] == [1]
    assert isinstance(results[1], ServiceError) and results[1].code == "agent-not-found"
    assert [r["seq"] for r in results[2]] == [2]
    assert isinstance(results[3], ServiceError) and results[3].code == "turn-not-found"
    assert [r["seq"] for r in results[4]] == [3, 4, 5]
    log = sound(harness.service.store.read_decisions(0, 100))
    assert [seq for seq, _ in log] == [1, 2, 3, 4, 5]  # the refused requests wrote nothing


def test_a_lone_leader_under_uvloop_stops_waiting(harness: Harness) -> None:
    uvloop = pytest.importorskip("uvloop")
    commit = GroupCommit(harness.service)

    async def one_by_one() -> list[int]:
        return [(await commit.decide([Call("a1", "mail.send", MAIL)]))[0]["seq"] for _ in range(40)]

    assert uvloop.run(one_by_one()) == list(range(1, 41))
    # eight lone turns, then probes 16 and 32 requests apart: one probe in 40 requests
    assert commit._alone == 9 and commit._gap == 32


def test_probes_space_out_while_alone_and_reset_when_joined(harness: Harness) -> None:
    uvloop = pytest.importorskip("uvloop")
    commit = GroupCommit(harness.service)
    call = [Call("a1", "mail.send", MAIL)]

    async def one_by_one(n: int) -> None:
        for _ in range(n):
            await commit.decide(call)

    uvloop.run(one_by_one(8 + 16 + 32 + 64 + 128 + 256 * 3))
    assert commit._gap == 256  # doubled up to the cap, and no further

    async def together() -> None:
        await asyncio.gather(*(commit.decide(call) for _ in range(8)))

    uvloop.run(together())  # no probe due: each of the 8 commits alone, nobody waits
    assert commit._gap == 256 and commit._skipped >= 8
    commit._skipped = commit._gap - 1  # the next request probes: the other 7 join it
    uvloop.run(together())
    assert commit._gap == 16
    assert commit._alone == 0


def test_budget_holds_across_a_group(harness: Harness) -> None:
    """Ten concurrent 3 USD refunds against a 10 USD cap: exactly three are allowed."""
    commit = GroupCommit(harness.service)
    refund = [Call("a1", "billing.refund", {"amount": 5}, expected_cost=Decimal(3))]

    async def run() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(*(commit.decide(refund) for _ in range(10)))

    effects = [r[0]["effect"] for r in asyncio.run(run())]
    assert effects.count("allow") == 3 and effects.count("deny") == 7
    assert harness.service.store.spent("agent:a1", 0) == 9_000_000


def test_http_requests_in_one_loop(harness: Harness) -> None:
    """Many requests in flight on one event loop: each answered with its own decision,
    every one logged once, the sequence gap-free, errors only for the bad ones."""
    app = create_app(harness.service)

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            calls = []
            for i in range(40):
                agent = "nobody" if i % 10 == 3 else "a1"
                to = "eve@evil.net" if i % 7 == 0 else "bob@example.com"
                body = {"agent": agent, "tool": "mail.send", "args": {**MAIL, "to": to}}
                calls.append(client.post("/v1/decisions", json=body, headers=harness.auth()))
            return await asyncio.gather(*calls)

    responses = asyncio.run(run())
    statuses = [r.status_code for r in responses]
    assert statuses.count(404) == 4 and statuses.count(200) == 36
    bodies = [r.json() for r in responses if r.status_code == 200]
    assert sorted(b["seq"] for b in bodies) == list(range(1, 37))
    log = {
        expand(e)["id"]: (seq, expand(e))
        for seq, e in sound(harness.service.store.read_decisions(0, 100))
    }
    assert len(log) == 36
    for body in bodies:
        seq, entry = log[body["id"]]
        assert seq == body["seq"] and entry["effect"] == body["effect"]
        assert entry["args"]["to"] == ("eve@evil.net" if body["effect"] == "deny" else MAIL["to"])


def test_another_process_sees_agent_changes_but_keeps_caches_over_decisions(
    harness: Harness, other: Service
) -> None:
    """Two services on one file, as two `--workers`: the other's decisions leave this
    one's caches alone; the other's agent change reaches this one at its next sync."""
    from api.service.decide import decide_calls
    from api.service.resources import agents_update
    from api.service.tokens import Principal

    mine = harness.service
    decide_calls(mine, [Call("a1", "mail.send", MAIL)])
    cached = mine.agent("a1")
    decide_calls(other, [Call("a1", "mail.send", MAIL)] * 3)
    mine.sync()
    assert mine.agent("a1") is cached  # decisions elsewhere: nothing dropped
    agents_update(other, Principal("t", "admin"), c.UpdateAgent(id="a1", profile="narrow"))
    seen_elsewhere(mine).sync()
    assert mine.agent("a1").profile == "narrow"
    seqs = [r["seq"] for r in decide_calls(mine, [Call("a1", "mail.send", MAIL)])]
    assert seqs == [5]  # gap-free across both


def test_log_rows_name_their_reasons_and_the_log_shows_them(client: Any, harness: Harness) -> None:
    calls = [{"agent": "a1", "tool": "mail.send", "args": MAIL},
             {"agent": "a1", "tool": "mail.send", "args": {**MAIL, "to": "e@evil.net"}}]  # fmt: skip
    auth = harness.auth()
    answered = client.post("/v1/decisions/batch", json={"calls": calls * 3}, headers=auth)
    answered = answered.json()["decisions"]
    single = client.post("/v1/decisions", json=calls[0], headers=auth).json()
    log = client.get("/v1/decisions?after_seq=0", headers=auth).json()["decisions"]
    assert [d["reasons"] for d in log] == [d["reasons"] for d in [*answered, single]]
    assert all(d["reasons"] for d in log)
    rows = [e for _, e in sound(harness.service.store.read_decisions(0, 100))]
    assert all("reasons_ref" in json.loads(r) for r in rows)
    refs = {row.id for row in harness.service.store.scan("reasons")}
    assert len(refs) == 2  # one document per distinct list of reasons


def test_calls_are_drafted_before_the_transaction_unless_a_budget_is_read(
    harness: Harness,
) -> None:
    """The group commit builds rows and responses before BEGIN (with several workers the
    write lock is held for the INSERTs and the COMMIT alone), except for a call whose
    step 6 reads the budget sums, which only a transaction may read."""
    from api.service.decide import prepare
    from api.service.decisionlog import draft

    service = harness.service
    budgeted = prepare(service, [Call("a1", "mail.send", MAIL)], {})  # support: 10 usd/24h
    assert draft(service, budgeted) is None
    harness.add_agent("plain", "wide")  # no budget anywhere in its chain
    calls = [Call("plain", "mail.send", MAIL), Call("plain", "mail.send", {**MAIL, "to": "x"})]
    drafted = draft(service, prepare(service, calls, {}))
    assert drafted is not None
    assert [b["effect"] for b in drafted.bodies] == ["allow", "deny"]
    assert (
        sound(service.store.read_decisions(0, 10)) == [] and not service.reason_refs
    )  # nothing yet
    with service.store.atomic():
        bodies, _ = drafted.log(service)
    logged = sound(service.store.read_decisions(0, 10))
    assert [b["seq"] for b in bodies] == [seq for seq, _ in logged] == [1, 2]
    assert [expand(row)["id"] for _, row in logged] == [b["id"] for b in bodies]
    assert service.reason_refs == {row.id for row in service.store.scan("reasons")}


def test_rows_of_older_databases_still_read() -> None:
    """Before rows were JSON they were CBOR maps of the same fields; both expand alike."""
    import cbor2

    from api.service.logrows import decode_row

    fields = {"id": "d1", "at": 1, "agent": "a1", "profile": "support", "tool": "mail.send",
              "args": {"to": "x"}, "effect": "allow", "reasons_ref": "r", "revision": 1}  # fmt: skip
    as_json, as_cbor = json.dumps(fields).encode(), cbor2.dumps(fields)
    assert decode_row(as_json) == decode_row(as_cbor) == fields
    assert expand(as_cbor, lambda ref: [ref]) == expand(as_json, lambda ref: [ref])
    assert expand(as_cbor)["final_args"] == {"to": "x"}


def test_a_rolled_back_reasons_document_is_written_again(harness: Harness) -> None:
    from api.service.decide import decide_calls, prepare
    from api.service.decisionlog import write

    service = harness.service
    try:
        with service.store.atomic():
            write(service, prepare(service, [Call("a1", "mail.send", MAIL)], {}))
            assert not service.reason_refs  # not before the commit
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert not service.reason_refs  # only a committed transaction marks them known
    assert not list(service.store.scan("reasons"))
    decide_calls(service, [Call("a1", "mail.send", MAIL)])  # not the group commit's path
    refs = {row.id for row in service.store.scan("reasons")}
    assert refs and service.reason_refs == refs  # written, and known once committed


def test_log_rows_keep_only_the_defaults_a_call_gained(client: Any, harness: Harness) -> None:
    auth = harness.auth()
    refund = {"agent": "a1", "tool": "billing.refund", "args": {"amount": 5}}
    answered = client.post("/v1/decisions", json=refund, headers=auth).json()
    assert answered["args"] == {"amount": 5, "reason": ""}
    denied = client.post("/v1/decisions", json={**refund, "args": {"amount": "x"}}, headers=auth)
    (_, row), (_, row2) = sound(harness.service.store.read_decisions(0, 10))
    assert json.loads(row)["final_added"] == {"reason": ""}
    log = client.get("/v1/decisions?after_seq=0", headers=auth).json()["decisions"]
    assert log[0]["final_args"] == answered["args"] and log[0]["args"] == {"amount": 5}
    assert log[1]["final_args"] == denied.json()["args"]
    assert log[1]["effect"] == "deny" and "final_added" not in log[1]
    assert "final_added" not in json.loads(row2) or log[1]["final_args"] is not None


def test_big_integers_are_answered_and_logged_exactly(client: Any, harness: Harness) -> None:
    """orjson refuses integers beyond 64 bits; the standard library writes them, so such an
    argument is no 500, and the log keeps the exact value."""
    auth = harness.auth()
    big = 2**70
    body = {"agent": "a1", "tool": "billing.refund", "args": {"amount": big, "note": big}}
    answered = client.post("/v1/decisions", json=body, headers=auth)
    assert answered.status_code == 200
    log = client.get("/v1/decisions?after_seq=0", headers=auth).json()["decisions"]
    assert log[0]["args"] == {"amount": big, "note": big}
    assert log[0]["id"] == answered.json()["id"]


def test_a_group_closes_at_its_size_limit(harness: Harness) -> None:
    commit = GroupCommit(harness.service)
    size = commit.max_calls // 3 - 1
    batch = [Call("a1", "mail.send", MAIL)] * size
    count = 12

    async def run() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(*(commit.decide(batch) for _ in range(count)))

    with counting_transactions(harness) as transactions:
        answers = asyncio.run(run())
    assert transactions[0] == count // 3  # three to a group
    seqs = sorted(d["seq"] for answer in answers for d in answer)
    assert seqs == list(range(1, size * count + 1))


def test_a_full_size_request_does_not_wait_for_company(harness: Harness) -> None:
    commit = GroupCommit(harness.service)
    big = [Call("a1", "mail.send", MAIL)] * commit.max_calls

    async def run() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(*(commit.decide(big) for _ in range(3)))

    with counting_transactions(harness) as transactions:
        asyncio.run(run())
    assert transactions[0] == 3


def test_a_group_sees_what_another_process_committed_just_before(
    harness: Harness, other: Service
) -> None:
    """The group's look at other processes' commits is inside its write transaction: an
    upload and an agent change made elsewhere since the last request are decided on,
    and the sequence stays gap-free across both processes' single-row inserts."""
    from api.service.decide import decide_calls
    from api.service.resources import agents_update
    from api.service.tokens import Principal
    from tests.api.conftest import POLICY

    commit = GroupCommit(harness.service)
    first = asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))[0]
    with other.store.atomic():
        other.upload([("policy.charter", POLICY + "\nrole extra {\n  allow mail.send\n}\n")], "t")
    agents_update(other, Principal("t", "admin"), c.UpdateAgent(id="a1", profile="narrow"))
    assert decide_calls(other, [Call("a1", "mail.send", MAIL)])[0]["seq"] == 2
    second = asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))[0]
    assert second["revision"] == first["revision"] + 1
    assert second["seq"] == 3
    (_, row), *_ = sound(harness.service.store.read_decisions(2, 1))
    assert expand(row)["profile"] == "narrow"


def test_a_group_sees_a_thread_another_process_deleted(harness: Harness, other: Service) -> None:
    """A thread read for an earlier group and deleted elsewhere since: the next group's
    call in it is `thread-not-found` (the deletion is in the change feed its write
    transaction reads), and the log gets nothing for it."""
    from api.service.errors import ServiceError
    from api.service.threads import threads_create, threads_delete
    from api.service.tokens import Principal

    admin = Principal("t", "admin")
    thread = threads_create(harness.service, admin, c.CreateThread(agent="a1")).body.id
    commit = GroupCommit(harness.service)
    call = Call("a1", "mail.send", MAIL, thread=thread)
    assert asyncio.run(commit.decide([call]))[0]["effect"] == "allow"
    threads_delete(other, admin, c.DeleteThread(id=thread))
    last = harness.service.store.last_seq()
    with pytest.raises(ServiceError) as refused:
        asyncio.run(commit.decide([call]))
    assert refused.value.code == "thread-not-found"
    assert harness.service.store.last_seq() == last


def test_a_new_revision_from_another_process_compiles_outside_the_write_lock(
    harness: Harness, other: Service
) -> None:
    """The transaction that finds another process's upload ends empty; the group is
    prepared again (the new revision compiled) with no write lock held, then logged."""
    from tests.api.conftest import POLICY

    service = harness.service
    commit = GroupCommit(service)
    asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))
    with other.store.atomic():
        other.upload([("policy.charter", POLICY + "\nrole extra {\n  allow mail.send\n}\n")], "t")
    depths: list[tuple[int, int]] = []  # (revision, the store's transaction depth) a get
    get = depth_spy(service.store, service.snapshots.get, depths, key=lambda revision, *_: revision)
    service.snapshots.get = get  # type: ignore[method-assign]
    with counting_transactions(harness) as transactions:
        answer = asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))[0]
    assert answer["seq"] == 2 and answer["revision"] == other.snapshots.latest
    assert (answer["revision"], 0) in depths
    assert all(depth == 0 for revision, depth in depths if revision == answer["revision"])
    assert transactions[0] == 2  # the one that found the upload wrote nothing
    assert [seq for seq, _ in sound(service.store.read_decisions(0, 10))] == [1, 2]


def _upload_elsewhere(other: Service) -> int:
    from tests.api.conftest import POLICY

    policy = POLICY + "\nrole extra {\n  allow mail.send\n}\n"
    return other.upload([("policy.charter", policy)], "t").revision


def test_another_process_upload_compiles_off_the_event_loop(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revision another process uploaded is compiled on a worker thread, once, while
    the event loop goes on serving; requests that come meanwhile wait for that compile
    and every one is decided on the new revision, logged once."""
    commit = GroupCommit(harness.service)
    asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))
    revision = _upload_elsewhere(other)

    async def run() -> tuple[list[Any], int]:
        ticks = 0
        first = asyncio.ensure_future(commit.decide([Call("a1", "mail.send", MAIL)]))
        later = None
        while not first.done():
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks == 5:  # comes while the first one's compile runs
                later = asyncio.ensure_future(commit.decide([Call("a1", "mail.send", MAIL)]))
        assert later is not None, f"the loop turned {ticks} times while the first was decided"
        return [await first, await later], ticks

    on_a_loop = slow_compiles(monkeypatch, 0.3)
    (first, later), ticks = asyncio.run(run())
    assert on_a_loop == [False]  # compiled once, on a worker thread
    assert ticks >= 15  # the loop kept turning meanwhile
    assert [first[0]["revision"], later[0]["revision"]] == [revision, revision]
    assert sorted([first[0]["seq"], later[0]["seq"]]) == [2, 3]
    assert [seq for seq, _ in sound(harness.service.store.read_decisions(0, 10))] == [1, 2, 3]


def test_a_leader_cancelled_while_its_revision_compiles_leaves_its_group_answered(
    harness: Harness, other: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's client goes away while the new revision compiles: nothing of its
    request is logged, and the request that joined its group is still decided."""
    commit = GroupCommit(harness.service)
    asyncio.run(commit.decide([Call("a1", "mail.send", MAIL)]))
    revision = _upload_elsewhere(other)

    async def run() -> Any:
        leader = asyncio.ensure_future(commit.decide([Call("a1", "mail.send", MAIL)]))
        joiner = asyncio.ensure_future(commit.decide([Call("a1", "mail.send", MAIL)] * 2))
        await asyncio.sleep(0.1)  # (both in the group, its compile under way)
        leader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leader
        return await joiner

    slow_compiles(monkeypatch, 0.3)
    answers = asyncio.run(run())
    assert [(a["seq"], a["revision"]) for a in answers] == [(2, revision), (3, revision)]
    assert [seq for seq, _ in sound(harness.service.store.read_decisions(0, 10))] == [1, 2, 3]
