"""The public names of lightning_rl, read from the source without importing it.

Each package's public names are its ``__all__`` (``__all__ = [...]`` and ``__all__ += [...]``
statements); a top-level module with an ``__all__`` (``returns.py``) gets a page too. The API pages
(``gen_pages.py``) and the test that every public name has an entry (``tests/docs``) both read
this list.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

# Top-level modules documented as API pages beside the packages.
MODULES = ("returns",)


@dataclass
class ApiEntry:
    """One API page: a package (or module) and its public names in ``__all__`` order."""

    module: str
    page: str
    source: str
    summary: str
    names: list[str]
    kinds: dict[str, str] = field(default_factory=dict)
    summary_table: bool = True


def read_all(tree: ast.Module) -> list[str] | None:
    """The names of ``__all__`` in a parsed module, or None where it has none."""
    names: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "__all__":
            names = (names or []) + list(ast.literal_eval(node.value))
    return names


def _module_file(root: Path, module: str) -> Path:
    path = root / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _kind(root: Path, module: str, name: str, depth: int = 0) -> str:
    """class, function or constant: where ``name`` is defined, following ``from x import name``."""
    tree = ast.parse(_module_file(root, module).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return "class"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return "function"
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == name for t in targets):
                value = node.value
                factory = getattr(value.func, "id", "") if isinstance(value, ast.Call) else ""
                if factory.startswith(("namedarraytuple", "namedtuple")):
                    return "class"
                return "constant"
        if isinstance(node, ast.ImportFrom) and node.module and depth < 5:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _kind(root, node.module, alias.name, depth + 1)
    return "name"


def api_entries(root: Path) -> list[ApiEntry]:
    """One entry per package of ``lightning_rl`` with an ``__all__``, then the modules of MODULES."""
    root = Path(root)
    package_root = root / "lightning_rl"
    modules = [f"lightning_rl.{p.name}" for p in sorted(package_root.iterdir()) if (p / "__init__.py").is_file()]
    modules += [f"lightning_rl.{m}" for m in MODULES]
    entries = []
    for module in modules:
        path = _module_file(root, module)
        tree = ast.parse(path.read_text())
        names = read_all(tree)
        if names is None:
            continue
        doc = (ast.get_docstring(tree) or "").strip()
        summary = " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
        entry = ApiEntry(
            module=module,
            page=module.split(".", 1)[1],
            source=str(path.relative_to(root)),
            summary=summary,
            names=names,
        )
        entry.kinds = {name: _kind(root, module, name) for name in names}
        entries.append(entry)
    return entries
