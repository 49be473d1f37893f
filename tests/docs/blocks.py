"""The code blocks of the documentation pages, and how the test suite runs each one.

A fenced block is run by the docs tests according to its language and the HTML comments on the
lines just above it (invisible on the site):

- ``python``: run, in page order, in one interpreter per page (later blocks see earlier names).
- ``bash``: each ``lightning-rl ...`` command runs (in that interpreter, through
  ``lightning_rl.cli.main``) only when the block is marked ``<!-- run -->`` or
  ``<!-- run: SUB ARGS; SUB ARGS -->``: ``ARGS`` are appended to the commands of subcommand
  ``SUB`` (a tiny budget instead of a 10-minute run). A marked block holds nothing but
  ``lightning-rl`` commands.
- ``<!-- before: SUB ARGS -->``: a ``lightning-rl`` command the block needs (e.g. a run to read),
  run first; it is not shown on the site.
- ``<!-- not-run: REASON -->``: the block is not run; the reason says why (a cluster, an install,
  a long run). Any bash block holding a command must say ``run`` or ``not-run``.
- ``yaml``: parsed (``yaml.safe_load``); ``text`` and others: output shown to the reader, not run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w-]*)")
DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<kind>run|not-run|before)\s*(?::\s*(?P<arg>.*?))?\s*-->\s*$")
SHELL = {"bash", "sh", "shell", "console"}


@dataclass
class Block:
    """One fenced code block of a page and the directives above it."""

    page: Path
    line: int
    lang: str
    code: str
    run: str | None = None  # None: no run directive; "": run as written; else "SUB ARGS; ..."
    not_run: str | None = None
    before: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def commands(self) -> list[str]:
        """The block's shell commands, continuation lines joined, comments dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.code)
        commands = []
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
        return commands

    def lightning_rl_argvs(self) -> list[list[str]]:
        """Each command as the argv of ``lightning-rl`` with the ``run`` directive's arguments."""
        extra: dict[str, list[str]] = {}
        for part in (self.run or "").split(";"):
            words = shlex.split(part)
            if words:
                extra.setdefault(words[0], []).extend(words[1:])
        argvs = []
        for command in self.commands():
            words = shlex.split(command)
            if words[0] != "lightning-rl":
                raise ValueError(f"{self.where}: a block marked run holds only lightning-rl commands, got {command!r}")
            argv = words[1:]
            argvs.append(argv + extra.get(argv[0], []))
        return argvs


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their directives."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match["indent"], match["fence"], match["lang"]
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        block = Block(page=page, line=start + 1, lang=lang, code="\n".join(body) + "\n")
        j = start - 1
        while j >= 0 and (directive := DIRECTIVE.match(lines[j])):
            kind, arg = directive["kind"], directive["arg"]
            if kind == "run":
                block.run = arg or ""
            elif kind == "not-run":
                if not arg:
                    raise ValueError(f"{block.where}: not-run needs a reason")
                block.not_run = arg
            else:
                block.before.insert(0, arg or "")
            j -= 1
        blocks.append(block)
    return blocks


def check_marked(block: Block) -> None:
    """A shell block with a command must say whether the tests run it."""
    if block.lang in SHELL and block.commands() and block.run is None and block.not_run is None:
        raise ValueError(
            f"{block.where}: mark the block <!-- run -->, <!-- run: SUB ARGS -->, or <!-- not-run: REASON -->"
        )
    if block.run is not None and block.not_run is not None:
        raise ValueError(f"{block.where}: both run and not-run")
