"""A faster `__init__` for frozen, slotted dataclasses built in bulk (AST nodes, requests)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

_UNSET = object()  # the generated signature's default for a field with a default_factory


def quick_init(cls: C) -> C:
    """Give a frozen, slotted dataclass a faster `__init__` with the same signature.

    The generated one stores each field with `object.__setattr__(self, name, value)`
    (frozenness forbids plain assignment), which looks the attribute up by name every
    time; this one calls each slot's own descriptor, about half the cost per field. The
    class stays frozen: assignment still raises, and equality, hashing, `replace()` are
    untouched. A field with a `default_factory` gets a fresh default per call, as before."""
    namespace: dict[str, Any] = {"_UNSET": _UNSET}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields(cls):
        if not f.init:  # pragma: no cover - none here
            raise TypeError(f"{cls.__name__}.{f.name}: only init fields are supported")
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        param = f.name
        if f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            param += "=_UNSET"
            body.append(f"    if {f.name} is _UNSET:")
            body.append(f"        {f.name} = _factory_{f.name}()")
        elif f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            param += f"=_default_{f.name}"
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _set_{f.name}(self, {f.name})")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}) -> None:\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<{cls.__name__}.__init__>", "exec"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cls.__init__.__annotations__)  # type: ignore[misc]
    cls.__init__ = init  # type: ignore[misc]
    return cls
