"""The built-in tool catalogue and the six default approval hooks.

Both are written in the Charter DSL itself, as data; `engine.builtins` parses them once
(policy sits below grammar in the layering), so the built-in schemas obey exactly the
same typing rules as a toolset an author writes. Every API
resource is also a tool namespace (docs/design.md section 1); the Seed callables `search`,
`web_search`, `navigate`, `execute` and the pseudo-tool `publish` have no namespace.

A tool that an HTTP endpoint runs takes exactly the arguments that endpoint passes (its
body model's fields, its query and path parameters), required and defaulted alike, so an
agent's request the models accept is decided on its merits, never denied for its shape
(tests/api/test_tool_arguments.py keeps them in step).

The catalogue's arguments marked `secret` (`identities.import`'s `seed`, a connection's
`credential`) are the built-in part of a workspace's secret arguments; a toolset marks
its own the same way. The decision log and every answer redact them by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policy import ast

BUILTIN_NAMESPACES: tuple[str, ...] = (
    "agents", "roles", "profiles", "toolsets", "hooks", "connections", "identities",
    "threads", "feeds", "schedules", "approvals", "memory",
)  # fmt: skip

CALLABLES: tuple[str, ...] = ("search", "web_search", "navigate", "execute")
PUBLISH = "publish"

CATALOGUE_SOURCE = """
toolset agents {
  tool list(cursor?: str, limit: int = 50)
  tool get(id: str)
  tool create(name: str, profile: str, identity?: str, budget?: map, metadata: map = {})
  tool update(id: str, name?: str, profile?: str, budget?: map, metadata?: map, status?: str)
  tool delete(id: str)
  tool define(id: str, definition: map, profile?: str)
  tool get_definition(id: str)
  tool spending(id: str)
}
toolset roles {
  tool list(cursor?: str, limit: int = 50)
  tool get(name: str)
  tool create(name: str, source: str)
  tool update(name: str, source: str)
  tool delete(name: str)
}
toolset profiles {
  tool list(cursor?: str, limit: int = 50)
  tool get(name: str)
  tool create(name: str, roles: list[str] = [], hooks: list[str] = ["default"], budget?: map, rate?: map)
  tool update(name: str, roles?: list[str], hooks?: list[str], budget?: map, rate?: map)
  tool delete(name: str)
}
toolset toolsets {
  tool list(cursor?: str, limit: int = 50)
  tool get(name: str)
  tool create(name: str, source: str, url?: str)
  tool update(name: str, source?: str, url?: str)
  tool delete(name: str)
}
toolset hooks {
  tool list(cursor?: str, limit: int = 50)
  tool get(name: str)
  tool create(name: str, source: str)
  tool update(name: str, source: str)
  tool delete(name: str)
}
toolset connections {
  tool list(cursor?: str, limit: int = 50)
  tool get(id: str)
  tool create(name: str, toolset: str, credential: secret str, owner?: str)
  tool update(id: str, name?: str, credential?: secret str)
  tool delete(id: str)
}
toolset identities {
  tool list(cursor?: str, limit: int = 50)
  tool get(id: str)
  tool create(label?: str, request_id?: str)
  tool import(seed: secret str, label?: str)
  tool update(id: str, label?: str, name?: str, metadata?: map)
  tool delete(id: str)
}
toolset threads {
  tool list(cursor?: str, limit: int = 50, agent?: str)
  tool get(id: str)
  tool create(prompt: str = "", agent?: str, max_cost?: decimal)
  tool wait(id: str, timeout: int = 60)
  tool events(id: str, cursor?: str, limit: int = 50)
  tool update(id: str, status?: str)
  tool delete(id: str)
  tool spending(id: str)
}
toolset feeds {
  tool list(cursor?: str, limit: int = 50)
  tool get(id: str)
  tool create(name: str)
  tool publish(feed: str, message: str)
  tool messages(feed: str, after_seq?: int, limit: int = 50)
  tool update(id: str, name?: str)
  tool delete(id: str)
}
toolset schedules {
  tool list(cursor?: str, limit: int = 50, agent?: str)
  tool get(id: str)
  tool create(name: str, cron: str, prompt: str, agent?: str)
  tool update(id: str, cron?: str, prompt?: str)
  tool delete(id: str)
  tool run(id: str)
}
toolset approvals {
  tool list(cursor?: str, limit: int = 50, status?: str)
  tool get(id: str)
  tool approve(id: str)
  tool reject(id: str, reason?: str)
}
toolset memory {
  tool list(path?: str, cursor?: str, limit: int = 50, agent?: str)
  tool read(path: str, agent?: str)
  tool write(path: str, content: str, agent?: str)
  tool delete(path: str, agent?: str)
}
toolset callables {
  tool search(query: str, limit: int = 10)
  tool web_search(query: str, limit: int = 10)
  tool navigate(url: str)
  tool execute(source: str, language: str = "python")
  tool publish(url: str, content?: str)
}
"""

DEFAULT_HOOKS_SOURCE = """
hook approve-agent-delete on agents.delete {
  pause "a human approves deleting an agent"
}
hook approve-role-create on roles.create {
  pause "a human approves creating a role"
}
hook approve-mail-send on gmail.send {
  pause "a human approves sending mail"
}
hook approve-calendar-write on calendar.create, calendar.update, calendar.delete {
  pause "a human approves writing a calendar"
}
hook approve-drive-write on drive.write, drive.create, drive.update, drive.delete {
  pause "a human approves writing a drive"
}
hook approve-toolset-url on toolsets.create, toolsets.update where has(args.url) {
  pause "a human approves pointing a toolset at a URL"
}
"""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One callable tool: its full name, typed parameters and where it comes from."""

    name: str
    params: tuple[ast.Param, ...]
    toolset: str | None = None  # None for built-in tools
    runs_code: bool = False
    connection_required: bool = False
    sensitive: frozenset[str] = frozenset()
    span: ast.Span = field(default=ast.NO_SPAN, compare=False)

    @staticmethod
    def secrets_of(params: tuple[ast.Param, ...]) -> frozenset[str]:
        """The names of the parameters marked `secret` (`credential: secret str`): a
        tool's `sensitive`, which the decision log and every answer redact."""
        return frozenset(p.name for p in params if p.secret)

    @property
    def builtin(self) -> bool:
        return self.toolset is None

    @property
    def namespace(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else ""

    def param(self, name: str) -> ast.Param | None:
        for param in self.params:
            if param.name == name:
                return param
        return None
