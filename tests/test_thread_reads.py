"""engine.reads and `Snapshot.reads_thread_cost`: which calls' outcome may depend on what
their thread has spent (a service decides those on the running cost, in its transaction)."""

from __future__ import annotations

from decimal import Decimal

from engine.check import check_sources
from engine.compile import compile_workspace
from engine.decision import Request

SOURCE = """
toolset shop {
  tool refund(order: str, amount: decimal)
  tool note(order: str, text: str)
  tool tag(order: str, label: str = "")
}
toolset mail {
  tool send(to: str)
}
role by-cost {
  allow shop.refund where thread.cost < 1
}
role by-depth {
  allow shop.*, mail.send where thread.depth <= 3 and thread.id != "x"
}
role by-whole-thread {
  allow mail.send where len(thread) > 2
}
role nested {
  allow shop.note where not (args.text in ["a", "b"] or thread.cost >= 5)
}
hook cost-pause on shop.tag where has(thread.cost) {
  pause "asks"
}
hook lower-rewrite on mail.* {
  rewrite args.to = lower(args.to)
}
hook cost-rewrite on shop.refund where context.cost > 1 {
  rewrite args.amount = thread.cost
}
profile refunds {
  roles by-cost
  hooks none
}
profile depth-only {
  roles by-depth
  hooks lower-rewrite
}
profile rewrites {
  roles by-depth
  hooks cost-rewrite
}
profile whole {
  roles by-whole-thread
  hooks none
}
profile nested {
  roles nested, by-depth
  hooks none
}
profile paused {
  roles by-depth
  hooks cost-pause
}
"""


def test_only_conditions_over_the_thread_cost_count() -> None:
    snapshot = compile_workspace(check_sources([("p.charter", SOURCE)]))
    reads = {
        (profile, tool)
        for profile in snapshot.profiles
        for tool in ("shop.refund", "shop.note", "shop.tag", "mail.send", "shop.nope")
        if snapshot.reads_thread_cost(profile, tool)
    }
    assert reads == {
        ("refunds", "shop.refund"),  # `thread.cost`, for the tools its rule names only
        ("whole", "mail.send"),  # the whole `thread` map holds the cost
        ("nested", "shop.note"),  # however deep in the condition
        ("paused", "shop.tag"),  # a hook's condition too
        ("rewrites", "shop.refund"),  # and the value a hook rewrites an argument to
    }  # `thread.depth`, `thread.id`, `context.cost`, other rewrites: no; unknown tools: no
    assert not snapshot.reads_thread_cost("no-such-profile", "shop.refund")


def test_a_condition_over_the_thread_cost_decides_on_the_cost_given() -> None:
    snapshot = compile_workspace(check_sources([("p.charter", SOURCE)]))
    args = {"order": "o", "amount": 1}

    def effect(cost: str) -> str:
        thread = {"id": "t", "cost": Decimal(cost), "depth": 0}
        return snapshot.decide(Request("refunds", "shop.refund", args, None, None, thread)).effect

    assert [effect("0"), effect("0.999999"), effect("1"), effect("1.2")] == [
        "allow", "allow", "deny", "deny",
    ]  # fmt: skip


def test_paths_finds_every_path_a_condition_or_rewrite_reads() -> None:
    """`ast.paths` is the one walk behind what reads `thread.cost` and `agent.*`."""
    from policy import ast

    cost = ast.Path("thread", ("cost",))
    tier = ast.Path("agent", ("metadata", "tier"))
    nested = ast.MapLit((("k", ast.ListLit((ast.Call("len", (tier,)),))),))
    condition = ast.BoolOp("and", ast.Not(ast.Compare("<", cost, ast.Lit("int", 1))), nested)
    found = list(ast.paths(condition))
    assert len(found) == 2 and set(found) == {cost, tier}
    assert list(ast.paths((None, ()))) == []
