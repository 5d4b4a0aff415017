"""Document ids (`api.service.core.new_id`): version 7 UUIDs (RFC 9562) in their
canonical text, the ms they were made and random bits drawn from the process's pool of
system entropy (api.service.entropy), which a forked worker never shares with its parent."""

from __future__ import annotations

import multiprocessing
import time
import uuid

from api.service.core import new_id


def test_ids_are_canonical_version_7_uuids_and_distinct() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(20_000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert str(parsed) == text
        assert before <= parsed.int >> 80 <= after  # (its first 48 bits: the ms made)
    # every variant digit (8, 9, a, b) and every hex digit of the random part turns up
    assert {text[19] for text in ids} == set("89ab")
    assert {ch for text in ids for ch in text[24:]} == set("0123456789abcdef")


def test_ids_made_later_sort_later() -> None:
    first = new_id()
    time.sleep(0.002)
    assert new_id() > first


def _child_ids(out: multiprocessing.Queue[list[str]]) -> None:
    out.put([new_id() for _ in range(50)])


def test_a_forked_worker_draws_ids_of_its_own() -> None:
    new_id()  # (the parent's pool holds unused entropy when the worker forks)
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[list[str]] = context.Queue()
    child = context.Process(target=_child_ids, args=(out,))
    child.start()
    theirs = out.get(timeout=30)
    child.join(timeout=30)
    ours = [new_id() for _ in range(50)]
    assert not set(theirs) & set(ours)
