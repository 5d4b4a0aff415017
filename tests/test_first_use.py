"""Plans built on the first call of a (profile, tool) pair (engine.compile): from the
profile's one shape for the tools that only `*` reaches, or the constant plan every
profile that reaches a tool by nothing shares. Each decides as the plan built at compile
from every rule and hook that reaches the tool (`every_plan`) does."""

from __future__ import annotations

from typing import Any

from engine.check import check_sources
from engine.compile import Snapshot, compile_workspace
from engine.decision import Request

SOURCE = """
toolset shop {
  tool refund(order: str, amount: decimal)
  tool note(order: str, text: str = "")
}
toolset scripts {
  runs code
  tool run(source: str)
}
role everything {
  allow *
}
role small {
  allow * where context.tier == "gold"
  deny memory.* where context.tier == "lead"
}
role coder {
  allow execute
}
hook asks on * where context.tier == "silver" {
  pause "asks"
}
hook notes on shop.note {
  rewrite args.text = "n"
}
profile admin {
  roles everything
  hooks asks
}
profile clerk {
  roles small
}
profile builder {
  roles everything, coder
}
profile nobody {
  hooks none
}
profile bystander {
  roles coder
  hooks none
}
"""

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("shop.refund", {"order": "o", "amount": 5}),
    ("memory.read", {"path": "/x"}),
    ("shop.refund", {"order": "o"}),
    ("shop.note", {"order": "o"}),
    ("shop.note", {"order": "o", "text": "t"}),
    ("scripts.run", {"source": "1"}),
    ("scripts.run", {"source": "1", "amount": 1}),
    ("search", {"query": "q"}),
    ("execute", {"code": "1"}),
    ("nope.nothing", {}),
]


def test_first_calls_decide_as_plans_built_from_every_rule() -> None:
    workspace = check_sources([("p.charter", SOURCE)])
    for profile in ("admin", "clerk", "builder", "nobody", "bystander", "ghost"):
        cold = compile_workspace(workspace)
        built = Snapshot(workspace, every_plan=True)
        for tool, args in CALLS:
            for tier in ("gold", "silver", "lead"):
                request = Request(profile, tool, args, {"tier": tier}, {}, None)
                first = cold.decide(request)
                assert first == cold.decide(request) == built.decide(request), (request, first)


def test_profiles_no_rule_reaches_share_each_tools_constant_plan() -> None:
    snapshot = compile_workspace(check_sources([("p.charter", SOURCE)]))
    for profile in ("nobody", "bystander"):
        snapshot.decide(Request(profile, "shop.refund", {"order": "o", "amount": 1}))
    nobody, bystander = snapshot.profiles["nobody"], snapshot.profiles["bystander"]
    assert nobody.plans["shop.refund"] is bystander.plans["shop.refund"]
