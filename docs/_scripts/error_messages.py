"""Every error message lightning_rl can raise, read from the source (``raise X("...")``).

The troubleshooting guide explains the errors a user meets most; the generated page
``guides/error-messages.md`` lists every message, so a new ``raise`` is on the site at the next
build. f-string fields are shown as ``{expression}``.
"""

from __future__ import annotations

import ast
import html
from collections.abc import Iterator
from pathlib import Path


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left, right = _template(node.left), _template(node.right)
        if left is not None and isinstance(node.op, ast.Add):
            return left + (right if right is not None else "{...}")
        return left
    return None


def messages(root: Path) -> Iterator[tuple[str, str, str]]:
    """(module, exception, message template) for every ``raise`` with a literal message."""
    package = Path(root) / "lightning_rl"
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call) or not node.exc.args:
                continue
            name = ast.unparse(node.exc.func)
            if name in ("NotImplementedError", "SystemExit"):
                continue
            text = _template(node.exc.args[0])
            if text:
                yield module, name, " ".join(text.split())


def page(root: Path) -> str:
    lines = [
        "# Every error message",
        "",
        "Each message lightning_rl raises, by module, generated from the source at each build",
        "(`{...}` stands for a value filled in at run time). [Troubleshooting](troubleshooting.md)",
        "says what to do about the common ones; most of the rest name the argument and the value",
        "that were refused, and the fix is to change that value.",
        "",
    ]
    current = None
    for module, error, text in messages(root):
        if module != current:
            lines += ["", f"## `{module}`", "", "| error | message |", "|---|---|"]
            current = module
        lines.append(f"| `{error}` | <code>{html.escape(text).replace('|', '&#124;')}</code> |")
    return "\n".join(lines) + "\n"
