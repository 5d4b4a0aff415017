"""An answer read as its request says (charter.client.ask): the operation's model for a
success, ProblemError for a refusal, Paused for an agent's paused request, NoAnswer for
a body that is not the operation's."""

from __future__ import annotations

import json

import pytest

from api.records import DecisionResponse
from charter.client.ask import Ask, reader
from charter.client.errors import NoAnswer, Paused, ProblemError

DECISION = {
    "id": "d-1", "seq": 7, "effect": "deny", "args": {"amount": 0.1}, "reasons": [],
    "errors": [], "near_misses": [], "revision": 3,
}  # fmt: skip
ASK = Ask("GET", "/v1/x", reader(DecisionResponse))


def test_a_success_is_the_operations_model_with_exact_numbers() -> None:
    found = ASK.answer(200, b'{"id":"d-1","seq":7,"effect":"allow","args":{"n":0.1,"m":0.5},'
                            b'"reasons":[],"errors":[],"near_misses":[],"revision":3}')  # fmt: skip
    assert found.effect == "allow" and found.args is not None
    assert str(found.args["n"]) == "0.1" and found.args["m"] == 0.5


def test_a_refusal_is_its_problem() -> None:
    problem = {"type": "https://charter.dev/problems/agent-not-found", "title": "Not Found",
               "status": 404, "code": "agent-not-found", "detail": "agent `x` not found",
               "help": "create it first"}  # fmt: skip
    with pytest.raises(ProblemError) as refused:
        ASK.answer(404, json.dumps(problem).encode())
    error = refused.value
    assert (error.status, error.code, error.title, error.detail, error.help) == (
        404, "agent-not-found", "Not Found", "agent `x` not found", "create it first"
    )  # fmt: skip
    assert str(error) == "404 agent-not-found: agent `x` not found"


def test_a_denied_by_policy_problem_keeps_its_decision() -> None:
    problem = {"type": "t", "title": "Forbidden", "status": 403, "code": "denied-by-policy",
               "detail": "denied", "decision": DECISION}  # fmt: skip
    with pytest.raises(ProblemError) as refused:
        ASK.answer(403, json.dumps(problem).encode())
    decision = refused.value.problem.decision
    assert decision is not None and (decision.id, decision.effect) == ("d-1", "deny")


@pytest.mark.parametrize(
    ("status", "body", "title"),
    [(502, b"<html>bad gateway</html>", "Bad Gateway"), (404, b"", "Not Found"),
     (400, b'{"status": 401, "code": "x"}', "Bad Request"), (599, b"{}", "Error")],
)  # fmt: skip
def test_an_error_that_is_not_a_problem_is_an_http_error(
    status: int, body: bytes, title: str
) -> None:
    with pytest.raises(ProblemError) as refused:
        ASK.answer(status, body)
    error = refused.value
    assert (error.status, error.code, error.title) == (status, "http-error", title)
    assert error.detail == f"the server answered {status} {title}, not a problem+json"


def test_a_paused_request_is_paused() -> None:
    body = {"status": "pending", "approval_id": "ap-9", "decision": {**DECISION, "effect": "pause"}}
    with pytest.raises(Paused) as paused:
        ASK.answer(202, json.dumps(body).encode())
    assert paused.value.approval_id == "ap-9" and paused.value.pending.decision.effect == "pause"


@pytest.mark.parametrize("body", [b"<html>", b"{}", b'{"id": 1}', b"[]"])
def test_a_success_that_is_not_the_operations_answer_is_no_answer(body: bytes) -> None:
    with pytest.raises(NoAnswer, match="not the API's"):
        ASK.answer(200, body)
    with pytest.raises(NoAnswer):
        ASK.answer(202, body)
