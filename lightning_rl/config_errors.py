"""Config errors in a few lines: jsonargparse's nested messages turned into what a person acts on.

jsonargparse reports a bad key or value inside a class given by ``class_path`` as a tree (the union
of types tried, every subtype's error, the whole value given); LightningCLI prints it after a
usage dump of some 50 lines. :func:`explain` keeps the line that matters and says it with the key
in the short form (``model.sampler.env_id``), the value, what is accepted and, for an unknown key,
the closest valid keys ("did you mean ...", :mod:`difflib`). The command's ``--verbose`` prints
jsonargparse's own message instead.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Explained", "close_matches", "explain", "init_parameters", "short_type"]

#: Lines of jsonargparse's union messages that say nothing about the problem.
_NOISE = (
    "Does not validate against any of the Union subtypes", "Subtypes:", "Errors:", "Given value type:",
    "Given value:", "Expected a <class 'NoneType'>", "Not a valid subclass of", "Subclass types expect one of",
)


@dataclass
class Explained:
    """A config error, short.

    Attributes:
        message: One line: the key, what is wrong, and the fix where one is known.
        hint: A second line (where the accepted keys are listed), or empty.
        key: The dotted key in the short form (no ``init_args``/``class_path``), or empty.
    """

    message: str
    hint: str = ""
    key: str = ""

    def lines(self) -> list[str]:
        return [self.message, *([self.hint] if self.hint else [])]


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` close to ``word`` (difflib's ratio of at least 0.6), best first,
    and only those nearly as close as the best (a typo has one answer: ``max_epochs``, not also
    ``min_epochs``)."""
    pool = sorted(set(candidates))
    scored = sorted(((difflib.SequenceMatcher(None, word, c).ratio(), c) for c in pool), reverse=True)
    scored = [(score, c) for score, c in scored if score >= 0.6]
    if not scored:
        return []
    best = scored[0][0]
    return [c for score, c in scored if score >= best - 0.05][:n]


def _did_you_mean(found: Sequence[str]) -> str:
    if not found:
        return ""
    names = [f"{f}" for f in found]
    text = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return f"; did you mean {text}?"


def init_parameters(class_path: str) -> list[str]:
    """The ``__init__`` parameter names of the class at ``class_path`` (its bases' too where it
    passes ``**kwargs`` on); empty if it cannot be imported."""
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError):
        return []
    names: list[str] = []
    for klass in getattr(cls, "__mro__", (cls,)):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            break
        names += [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return list(dict.fromkeys(names))


def short_type(text: str) -> str:
    """jsonargparse's type text in words: ``<class 'int'>`` -> ``an int``, a ``Literal`` -> ``one of a, b``."""
    literal = re.fullmatch(r"(?:typing\.)?Literal\[(.*)\]", text.strip())
    if literal:
        return "one of " + ", ".join(part.strip().strip("'\"") for part in literal.group(1).split(","))
    names = re.findall(r"<class '([\w.]+)'>", text)
    words = {"int": "an int", "float": "a number", "bool": "true or false", "str": "a string",
             "tuple": "a list, e.g. [64, 64]", "list": "a list, e.g. [64, 64]", "dict": "a mapping"}
    if names:
        kinds = [words.get(n.rsplit(".", 1)[-1], n.rsplit(".", 1)[-1]) for n in names if n != "NoneType"]
        return " or ".join(dict.fromkeys(kinds)) or "null"
    return text.strip()


def _short_key(parts: Sequence[str]) -> str:
    return ".".join(p for p in ".".join(parts).split(".") if p not in ("init_args", "class_path", "dict_kwargs"))


#: The lines of jsonargparse's nested message that name where the error is: a key, or a class passed on the way.
_WHERE = (
    ("path", re.compile(r'Parser key "([^"]+)":\s*(.*)$')),
    ("owners", re.compile(r"Problem with given class_path '([^']+)':?\s*(.*)$")),
)


def _leaves(message: str) -> tuple[list[str], list[str], list[str]]:
    """The key path (``Parser key`` lines), the class paths passed on the way and the other lines."""
    found: dict[str, list[str]] = {"path": [], "owners": [], "rest": []}
    for raw in message.splitlines():
        line = raw.strip()
        while line.startswith("- "):
            line = line[2:].strip()
        if not line or line.startswith(_NOISE):
            continue
        for kind, pattern in _WHERE:
            match = pattern.match(line)
            if match:
                found[kind].append(match.group(1))
                line = match.group(2)  # what follows on the same line, if anything
                break
        if line:
            found["rest"].append(line)
    return found["path"], found["owners"], found["rest"]


def explain(
    message: str,
    command: str,
    parser_keys: Iterable[str] = (),
    argv: Sequence[str] = (),
    config_files: Sequence[str] = (),
    class_names: Iterable[str] = (),
    parameters_of: Callable[[str], list[str]] | None = None,
) -> Explained:
    """A short form of jsonargparse's ``message``.

    Args:
        message: jsonargparse's error message (the text after ``error:``).
        command: ``lightning-rl <command>``, for the hint lines.
        parser_keys: The parser's dotted keys (``trainer.max_epochs``, ``seed_everything``, ...), the
            candidates for an unknown top-level key.
        argv: The command line, to tell a key typed there from one in a config file.
        config_files: The ``--config`` files given, named when the key is not on the command line.
        class_names: Class names the value of a class-typed key may take (``PPO``, ``DQN``, ...).
        parameters_of: A class path's parameter names, the candidates for an unknown key of that
            class (default :func:`init_parameters`, which imports the class).
    """
    parameters_of = parameters_of or init_parameters
    path, owners, rest = _leaves(message)
    # A union's errors name each subtype without the value, which follows on a line of its own: the
    # innermost union is the last "Subtypes:" before the first "Expected a", its value the next "Given value:".
    first_expected = message.find("Expected a <class")
    subtypes = given = None
    if first_expected >= 0:
        subtypes = ([None, *re.finditer(r"Subtypes: \[(.*)\]$", message[:first_expected], flags=re.MULTILINE)])[-1]
        given = re.compile(r"Given value: (.*)$", flags=re.MULTILINE).search(message, first_expected)
    verbose = "--verbose shows the parser's full message"
    typed = " ".join(a for a in argv if "\n" not in a)  # not a config given as text (--params)
    files = [f for f in config_files if "\n" not in f]

    def on_command_line(key: str) -> bool:
        last = key.rsplit(".", 1)[-1]
        return bool(last) and last in typed

    def shown(key: str, typed_here: bool) -> str:
        """A key as the user wrote it: ``--key`` on the command line, ``key (in FILE)`` in a config."""
        if typed_here:
            return f"--{key}"
        return f"{key} (in {files[-1]})" if files else key

    def suggest(found: Sequence[str], typed_here: bool) -> str:
        return _did_you_mean([f"--{c}" if typed_here else c for c in found])

    for line in rest:
        unknown = re.match(r"Option '([^']+)' is not accepted", line) or re.match(
            r"Key '([^']+)' is not expected", line)
        if unknown:
            name = unknown.group(1)
            key = _short_key([*path, name])
            here = on_command_line(key)
            owner = owners[-1] if owners else ""
            prefix = _short_key(path)
            parameters = parameters_of(owner) if owner else []
            found = [f"{prefix}.{c}" if prefix else c for c in close_matches(name, parameters)]
            cls = owner.rsplit(".", 1)[-1]
            hint = f"{cls}'s parameters: lightning-rl {command} --{prefix}.help {cls}; {verbose}" if cls else verbose
            return Explained(f"unknown key {shown(key, here)}{suggest(found, here)}", hint, key)
        subcommand = re.match(r"Subcommand '[^']+' does not accept option '([^']+)'", line) or re.match(
            r"[Uu]nrecognized arguments: (\S+)", line)
        if subcommand:
            name = subcommand.group(1).lstrip("-").split("=", 1)[0]
            key = _short_key([name])
            here = on_command_line(key)
            return Explained(f"unknown key {shown(key, here)}{suggest(close_matches(name, parser_keys), here)}",
                             f"the common options: lightning-rl {command} --help; every one: --help all", key)
        expected = re.match(r"Expected a (.+?)\. Got value: (.*)$", line)
        if expected:
            key = _short_key(path)
            return Explained(f"{shown(key, on_command_line(key))}: expected {short_type(expected.group(1))}, "
                             f"got {expected.group(2)!r}", verbose, key)
        union = re.fullmatch(r"Expected a (<class '[\w.]+'>)", line)
        if union and given is not None:  # a union's first subtype, the value given on its own line
            key = _short_key(path)
            kinds = short_type(subtypes.group(1) if subtypes else union.group(1))
            return Explained(f"{shown(key, on_command_line(key))}: expected {kinds}, got {given.group(1)!r}", verbose,
                             key)
        if line.startswith("Expected a dot import path string:") or "either not accessible or invalid" in line:
            value = line.rsplit(":", 1)[-1].strip() if ":" in line else line.split(" but ", 1)[-1].split(" ")[0]
            key = _short_key(path)
            found = close_matches(value, class_names)
            return Explained(f"{shown(key, on_command_line(key))}: {value!r} is not a class or config file"
                             f"{_did_you_mean(found)}", f"the classes: lightning-rl {command} --help all; {verbose}",
                             key)
        missing = re.match(r"File does not exist: '([^']+)'", line)
        if missing:
            return Explained(f"--{_short_key(path) or 'config'} {missing.group(1)}: no such file", "", _short_key(path))
        if line.startswith("Problems parsing config"):
            return Explained(_yaml_problem(message, config_files), verbose)
    text = " ".join(rest[:2]) if rest else message.strip().splitlines()[0]
    key = _short_key(path)
    return Explained(f"{key}: {text}" if key else text, verbose, key)


def _yaml_problem(message: str, config_files: Sequence[str]) -> str:
    """``config FILE: YAML syntax error at line L, column C: <problem>``."""
    files = [f for f in config_files if "\n" not in f]
    name = files[-1] if files else "the config"
    position = re.search(r"line (\d+), column (\d+)", message)
    problems = [line.strip() for line in message.splitlines()[1:]
                if line.strip() and not line.strip().startswith("in ")]
    problem = problems[-1] if problems else message.strip().splitlines()[0]
    at = f" at line {position.group(1)}, column {position.group(2)}" if position else ""
    return f"config {name}: YAML syntax error{at}: {problem}"


def parser_keys(parser: Any) -> list[str]:
    """The dotted keys of a jsonargparse parser's arguments (``trainer.max_epochs``, ``seed_everything``)."""
    keys = []
    for action in getattr(parser, "_actions", []):
        dest = getattr(action, "dest", "")
        if dest and dest not in ("help", "config", "print_config") and not dest.endswith(".help"):
            keys.append(dest)
    return keys


def class_names_of(base: type) -> list[str]:
    """The names of ``base``'s imported subclasses (the values ``--model NAME`` accepts)."""
    seen: list[str] = []
    stack: list[type] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if not cls.__name__.startswith("_"):
            seen.append(cls.__name__)
        stack.extend(cls.__subclasses__())
    return sorted(set(seen))
