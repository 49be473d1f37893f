"""Griffe extension: Sphinx cross-reference roles in docstrings become links on the API pages.

The docstrings name other objects Sphinx's way (``:class:`~lightning_rl.samplers.BaseSampler```,
``:meth:`initialize```), which ``pydoc`` and LightningCLI's ``--help`` show as they are. On the
site each role becomes the object's name in code font, linked to its API entry where the name
resolves (in the scope of the docstring's object, as Sphinx would) to an object with an entry;
other names (``torch.nn.Module``) stay plain code.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|attr|mod|data|obj|exc|const):`(?P<target>[^`]+)`")
CALLABLE_ROLES = {"func", "meth"}


def _resolve(obj: griffe.Object, target: str) -> str | None:
    if target.startswith("lightning_rl."):
        return target
    head, _, rest = target.partition(".")
    scope: Any = obj
    while scope is not None:
        try:
            resolved = scope.resolve(head)
        except Exception:  # noqa: BLE001 - griffe raises several kinds for an unknown name
            resolved = None
        if resolved:
            return f"{resolved}.{rest}" if rest else resolved
        scope = scope.parent
    return None


def _replace_roles(obj: griffe.Object, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        if "<" in target and target.endswith(">"):  # :class:`title <target>`
            title, target = target[:-1].split("<", 1)
            title = title.strip()
        else:
            short = target.startswith("~")
            target = target.lstrip("~.")
            title = target.rsplit(".", 1)[-1] if short else target
            if match["role"] in CALLABLE_ROLES and not title.endswith(")"):
                title += "()"
        code = f"<code>{html.escape(title)}</code>"
        identifier = _resolve(obj, target.lstrip("~."))
        if identifier is None or not identifier.startswith("lightning_rl"):
            return code
        return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring of the loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = _replace_roles(obj, obj.docstring.value)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
