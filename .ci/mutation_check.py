#!/usr/bin/env python3
"""Curated mutation check: prove that the fast tests guard the maths (returns, GAE, n-step, replay).

Each entry of the list below is one named, single-line mutation of the library (a sign flip, a
dropped ``(1 - done)`` mask, ``discount`` where ``discount * gae_lambda`` belongs, a timeout
treated as a termination, an off-by-one in a window, ...) together with the few fast tests that
must catch it. The script

1. copies ``lightning_rl/``, ``tests/`` and ``pyproject.toml`` into a fresh temporary directory
   (one copy per ``--jobs``; the working tree itself is never modified),
2. checks that every mutant's ``original`` occurs exactly once in its file (so the list stays
   in sync with the code: a stale entry fails loudly, by name),
3. checks, in a pytest run, that the copy's ``lightning_rl`` (and ``tests``) is what gets
   imported, not the editable install, and runs the union of all selected test sets once
   unmutated: they must pass, or the check means nothing,
4. for each mutant rewrites that one file in the copy, runs
   ``python -m pytest -x -q -rfE -p no:cacheprovider -m "not slow" -o addopts="" <tests>`` there
   (``PYTHONPATH`` = the copy), and restores the file. pytest exit status 1 means *killed* (the
   first ``FAILED`` test is reported), 0 means *survived*, anything else (collection or import
   error, usage error, no tests, a timeout of ``--timeout`` seconds) is an *error*: a mutant that
   breaks the import is not caught by a test,
5. prints ``| # | mutation | file | result | killed by |`` and exits 0 only if every mutant
   was killed (1 otherwise; 2 on a stale list, a failing baseline or a wrong import path).

Why a curated list and not mutmut or cosmic-ray: those enumerate thousands of mechanical mutants
over every file and take hours on CI's 2 cores, most of them in code where a mutation says
nothing about the maths. The question here is narrower -- would the tests notice if the loss,
return, target or replay arithmetic were wrong in one of the ways it plausibly goes wrong? --
and the answer should be a table naming the test that catches each such mistake, within CI's
budget (each mutant runs only its own small test set, seconds each, a few minutes in all).

Mutants of the algorithms' losses live in ``.ci/mutants_algos.py`` (``ALGO_MUTANTS``, same
fields as :class:`Mutant`); they are appended to :data:`MUTANTS`.

Usage::

    python .ci/mutation_check.py              # everything, one mutant at a time
    python .ci/mutation_check.py --list       # the mutants (and whether each still applies)
    python .ci/mutation_check.py -k GAE       # only mutants whose name or file contains "gae"
    python .ci/mutation_check.py --jobs 4     # 4 mutants at once, in 4 copies (4+ cores)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import importlib.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
COPIED = ("lightning_rl", "tests", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")
PYTEST_ARGS = ("-x", "-q", "-rfE", "-p", "no:cacheprovider", "-m", "not slow", "-o", "addopts=")
DEFAULT_TIMEOUT_S = 300
PROBE_NAME = "test_mutation_check_probe.py"


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One named mutation: ``original`` (exactly once in ``path``) becomes ``replacement``."""

    name: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> Mutant:
        missing = {"name", "path", "original", "replacement", "tests"} - set(entry)
        if missing:
            raise SystemExit(f"mutation_check: mutant entry {entry!r} lacks {sorted(missing)}")
        tests = entry["tests"]
        return cls(
            entry["name"], entry["path"], entry["original"], entry["replacement"],
            (tests,) if isinstance(tests, str) else tuple(tests),
        )


# ----- the curated mutants -----

RETURNS = "lightning_rl/returns.py"
REPLAY_N_STEP = "lightning_rl/replays/n_step.py"
ON_POLICY = "lightning_rl/datasets/on_policy.py"
PRIORITIZED = "lightning_rl/replays/prioritized.py"
SUM_TREE = "lightning_rl/replays/sum_tree.py"

T_RETURNS = "tests/test_returns.py"
T_RETURNS_HAND = "tests/test_returns_hand.py"
T_N_STEP = "tests/replays/test_n_step.py"
T_N_STEP_HAND = "tests/replays/test_n_step_hand.py"
T_ON_POLICY_HAND = "tests/datasets/test_on_policy_hand.py"
T_PRIORITIZED = "tests/replays/test_prioritized.py"
T_PRIORITIZED_HAND = "tests/replays/test_prioritized_hand.py"
T_SUM_TREE = "tests/replays/test_sum_tree.py"


def _m(name: str, path: str, original: str, replacement: str, *tests: str) -> Mutant:
    return Mutant(name, path, original, replacement, tests)


CORE_MUTANTS: list[Mutant] = [
    # --- lightning_rl/returns.py: discounted returns ---
    _m("discount_return: (1 - done) mask dropped", RETURNS,
       "bootstrap = not_done[t] * next_return", "bootstrap = next_return",
       T_RETURNS_HAND, T_RETURNS),
    _m("discount_return: bootstrap value dropped", RETURNS,
       "next_return = bootstrap_value", "next_return = 0 * bootstrap_value",
       T_RETURNS_HAND, T_RETURNS),
    _m("discount_return: sign of the discounted future flipped", RETURNS,
       "next_return = reward[t] + discount * bootstrap", "next_return = reward[t] - discount * bootstrap",
       T_RETURNS_HAND, T_RETURNS),
    _m("discount_return: loop skips the last step (off by one)", RETURNS,
       "for t in reversed(range(reward.shape[0])):", "for t in reversed(range(reward.shape[0] - 1)):",
       T_RETURNS_HAND, T_RETURNS),
    _m("discount_return_tl approx: truncation treated as termination", RETURNS,
       "if truncated is not None and extra is None:", "if False:",
       T_RETURNS_HAND, T_RETURNS),
    _m("discount_return_tl exact: V(s') at the truncation dropped", RETURNS,
       "bootstrap = bootstrap + extra[t]\n        next_return",
       "bootstrap = bootstrap\n        next_return",
       T_RETURNS_HAND, T_RETURNS),
    # --- lightning_rl/returns.py: GAE ---
    _m("GAE: discount * lambda -> discount", RETURNS,
       "delta + discount * gae_lambda * not_done[t] * next_advantage",
       "delta + discount * not_done[t] * next_advantage",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: discount * lambda -> lambda", RETURNS,
       "delta + discount * gae_lambda * not_done[t] * next_advantage",
       "delta + gae_lambda * not_done[t] * next_advantage",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: lambda instead of discount in the TD error", RETURNS,
       "delta = reward[t] + discount * bootstrap - value[t]", "delta = reward[t] + gae_lambda * bootstrap - value[t]",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: sign of V(s_t) in the TD error flipped", RETURNS,
       "delta = reward[t] + discount * bootstrap - value[t]", "delta = reward[t] + discount * bootstrap + value[t]",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: (1 - done) mask on V(s_t+1) dropped", RETURNS,
       "bootstrap = not_done[t] * next_value", "bootstrap = next_value",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: (1 - done) mask on the advantage recursion dropped", RETURNS,
       "discount * gae_lambda * not_done[t] * next_advantage", "discount * gae_lambda * next_advantage",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: bootstrap value dropped", RETURNS,
       "next_value = bootstrap_value", "next_value = 0 * bootstrap_value",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: loop skips the first step (off by one)", RETURNS,
       "for t in reversed(range(shape[0])):", "for t in reversed(range(1, shape[0])):",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE: return = advantage (value not added back)", RETURNS,
       "return_[:] = advantage + value", "return_[:] = advantage",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE tl approx: truncation treated as termination", RETURNS,
       "zero_at_truncation = truncated is not None and extra is None", "zero_at_truncation = False",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE tl exact: V(s') at the truncation dropped", RETURNS,
       "bootstrap = bootstrap + extra[t]\n        delta",
       "bootstrap = bootstrap\n        delta",
       T_RETURNS_HAND, T_RETURNS),
    _m("GAE tl: truncation not merged into done", RETURNS,
       'shape, reward, "return_dest")\n    if truncated is not None:\n        done = _maximum(done, truncated)',
       'shape, reward, "return_dest")\n    if truncated is not None:\n        done = done',
       f"{T_RETURNS_HAND}::test_gae_tl_exact_form_timeout_without_done_flag_still_cuts_the_episode"),
    # --- lightning_rl/returns.py: n-step sums ---
    _m("n-step return: discount**k -> discount**(k-1)", RETURNS,
       "return_[:m] += (discount**k) *", "return_[:m] += (discount ** (k - 1)) *",
       T_RETURNS),
    _m("n-step return: rewards after a done not masked", RETURNS,
       "* reward[k : k + m] * (1 - done_n[:m])", "* reward[k : k + m]",
       T_RETURNS),
    _m("n-step return: window one reward short", RETURNS,
       "for k in range(1, n_step):", "for k in range(1, n_step - 1):",
       T_RETURNS),
    _m("n-step return: in-batch bound off by one", RETURNS,
       "m = min(length, T - k)", "m = min(length, T - k - 1)",
       T_RETURNS),
    # --- lightning_rl/replays/n_step.py: replay n-step targets ---
    _m("replay n-step: discount power off by one", REPLAY_N_STEP,
       "(discount ** np.arange(n_step_return))", "(discount ** np.arange(1, n_step_return + 1))",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: window starts one row late", REPLAY_N_STEP,
       "window = (rows[:, None] + np.arange(n_step_return))", "window = (rows[:, None] + 1 + np.arange(n_step_return))",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: episode end ignored (next episode's rewards summed)", REPLAY_N_STEP,
       "live = open_ & ~to", "live = ~to",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: truncated step's reward summed", REPLAY_N_STEP,
       "live = open_ & ~to", "live = open_",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: truncation treated as termination (done_n)", REPLAY_N_STEP,
       "done_n[rows] = (live & d).any(axis=1)", "done_n[rows] = (open_ & d).any(axis=1)",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: truncation after the episode's end cuts the window", REPLAY_N_STEP,
       "cut = open_ & to", "cut = to",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: truncation bootstrap one step late", REPLAY_N_STEP,
       "cut.argmax(axis=1), n_step_return)", "cut.argmax(axis=1) + 1, n_step_return)",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay n-step: full window n_steps off by one", REPLAY_N_STEP,
       "cut.argmax(axis=1), n_step_return)", "cut.argmax(axis=1), n_step_return - 1)",
       T_N_STEP_HAND, T_N_STEP),
    _m("replay 1-step: truncated step gets n_steps 1 (trained)", REPLAY_N_STEP,
       "n_steps[rows] = ~to", "n_steps[rows] = 1",
       T_N_STEP_HAND, T_N_STEP),
    # --- lightning_rl/datasets/on_policy.py ---
    _m("OnPolicyDataset: GAE with gae_lambda = 1.0", ON_POLICY,
       "self.discount, self.gae_lambda, truncated", "self.discount, 1.0, truncated",
       T_ON_POLICY_HAND),
    _m("OnPolicyDataset: truncations treated as terminations in GAE", ON_POLICY,
       "self.discount, self.gae_lambda, truncated", "self.discount, self.gae_lambda, np.zeros_like(truncated)",
       T_ON_POLICY_HAND),
    _m("OnPolicyDataset: truncated steps not masked (valid)", ON_POLICY,
       "valid = (~truncated).astype(np.float32)", "valid = np.ones_like(reward)",
       T_ON_POLICY_HAND),
    _m("OnPolicyDataset: normalize_advantage ignored", ON_POLICY,
       "if self.normalize_advantage:", "if False:",
       T_ON_POLICY_HAND),
    _m("advantage normalisation: divides by var instead of std", ON_POLICY,
       "(adv.std() + 1e-8)", "(adv.var() + 1e-8)",
       T_ON_POLICY_HAND),
    _m("advantage normalisation: mean not subtracted", ON_POLICY,
       "(advantage - adv.mean())", "(advantage)",
       T_ON_POLICY_HAND),
    _m("advantage normalisation: statistics include masked steps", ON_POLICY,
       "adv = advantage[valid > 0]", "adv = advantage",
       T_ON_POLICY_HAND),
    # --- lightning_rl/replays/prioritized.py, sum_tree.py ---
    _m("IS weights: exponent sign flipped", PRIORITIZED,
       "w = (p.min() / p) ** beta", "w = (p.min() / p) ** -beta",
       T_PRIORITIZED_HAND, T_PRIORITIZED),
    _m("IS weights: not normalised by the batch max", PRIORITIZED,
       "w = (p.min() / p) ** beta", "w = (1.0 / p) ** beta",
       T_PRIORITIZED_HAND, T_PRIORITIZED),
    _m("IS weights: beta exponent dropped", PRIORITIZED,
       "w = (p.min() / p) ** beta", "w = p.min() / p",
       T_PRIORITIZED_HAND, T_PRIORITIZED),
    _m("priority update: ** alpha dropped", PRIORITIZED,
       "np.where(self._valid(t, b), p**self.alpha, 0.0)", "np.where(self._valid(t, b), p, 0.0)",
       T_PRIORITIZED_HAND, T_PRIORITIZED),
    _m("new samples: default_priority ** alpha dropped", PRIORITIZED,
       "initial**self.alpha", "initial",
       T_PRIORITIZED_HAND, T_PRIORITIZED),
    _m("beta annealing not clamped at beta_final", PRIORITIZED,
       "frac = min(1.0, self.sample_calls / self.beta_anneal_steps)",
       "frac = self.sample_calls / self.beta_anneal_steps",
       T_PRIORITIZED),
    _m("sequence priority: eta weights the mean, not the max", PRIORITIZED,
       "p = self.eta * p.max(axis=0) + (1 - self.eta) * p.mean(axis=0)",
       "p = self.eta * p.mean(axis=0) + (1 - self.eta) * p.max(axis=0)",
       T_PRIORITIZED),
    _m("sum tree: prefix-sum boundary searched left", SUM_TREE,
       'np.searchsorted(before[1:], v, side="right")', 'np.searchsorted(before[1:], v, side="left")',
       T_SUM_TREE),
    _m("sum tree: descent picks a child whose interval ends at v", SUM_TREE,
       "j = (ends > v[:, None]).argmax(axis=1)", "j = (ends >= v[:, None]).argmax(axis=1)",
       T_SUM_TREE),
    _m("sum tree: draws not scaled by the total", SUM_TREE,
       "return self.find(u * total)", "return self.find(u)",
       T_SUM_TREE, T_PRIORITIZED_HAND),
]


def _algo_mutants() -> list[Mutant]:
    """``ALGO_MUTANTS`` of ``.ci/mutants_algos.py`` (loaded by path: ``.ci`` is no package)."""
    path = Path(__file__).resolve().parent / "mutants_algos.py"
    spec = importlib.util.spec_from_file_location("_mutants_algos", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [m if isinstance(m, Mutant) else Mutant.from_dict(m) for m in module.ALGO_MUTANTS]


MUTANTS: list[Mutant] = CORE_MUTANTS + _algo_mutants()


# ----- checks of the list -----


def occurrences(text: str, sub: str) -> int:
    """Occurrences of ``sub`` in ``text``, overlapping ones included."""
    count, start = 0, text.find(sub)
    while start >= 0:
        count += 1
        start = text.find(sub, start + 1)
    return count


def list_problems(mutants: list[Mutant], root: Path) -> list[str]:
    """Every reason the list does not apply to the tree at ``root`` (empty: all good)."""
    problems = []
    names = [m.name for m in mutants]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"mutant name {name!r} is used {names.count(name)} times")
    for m in mutants:
        file = root / m.path
        if not file.is_file():
            problems.append(f"mutant {m.name!r}: file {m.path} does not exist")
            continue
        n = occurrences(file.read_text(), m.original)
        if n != 1:
            problems.append(
                f"mutant {m.name!r}: original occurs {n} times in {m.path} (must be exactly once):\n"
                + textwrap.indent(m.original, "    ")
            )
        if m.original == m.replacement:
            problems.append(f"mutant {m.name!r}: replacement equals original")
        if not m.tests:
            problems.append(f"mutant {m.name!r}: no tests")
        for test in m.tests:
            if not (root / test.split("::")[0]).is_file():
                problems.append(f"mutant {m.name!r}: test file of {test!r} does not exist")
    return problems


# ----- running pytest in a copy -----


@dataclasses.dataclass
class Run:
    returncode: int | None  # None: timed out
    output: str
    seconds: float


def make_copy(dst: Path, src: Path = REPO) -> Path:
    """Copy the parts of the repository the tests need into ``dst`` (created)."""
    dst.mkdir(parents=True)
    for item in COPIED:
        if (src / item).is_dir():
            shutil.copytree(src / item, dst / item, ignore=IGNORED)
        else:
            shutil.copy2(src / item, dst / item)
    return dst


def run_pytest(copy: Path, tests: list[str] | tuple[str, ...], timeout_s: float) -> Run:
    """``python -m pytest`` on ``tests`` with ``cwd`` and ``PYTHONPATH`` = ``copy``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["MUTATION_CHECK_COPY"] = str(copy)
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]
    t0 = time.perf_counter()
    # A session of its own, so a timeout kills pytest and anything it started.
    proc = subprocess.Popen(
        cmd, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    return Run(code, out, time.perf_counter() - t0)


def write_source(path: Path, text: str) -> None:
    """Write ``text`` so that no stale bytecode of the previous contents can be imported.

    The ``.pyc`` of ``path`` is deleted and the mtime moved forward by whole seconds: pyc files
    are validated by (mtime in seconds, size), which a same-size mutant written within the same
    second would otherwise match.
    """
    old_mtime = int(path.stat().st_mtime)
    path.write_text(text)
    new_mtime = max(old_mtime, int(time.time())) + 2
    os.utime(path, (new_mtime, new_mtime))
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)


PROBE = '''\
"""Written by .ci/mutation_check.py: the copy's packages are imported, not the editable install."""
import os

import lightning_rl
import tests


def test_packages_come_from_the_copy():
    root = os.path.realpath(os.environ["MUTATION_CHECK_COPY"]) + os.sep
    for module in (lightning_rl, tests):
        assert os.path.realpath(module.__file__).startswith(root), module.__file__
'''


def probe_imports(copy: Path, timeout_s: float) -> Run:
    """Run a one-test pytest session in ``copy`` asserting where ``lightning_rl`` comes from."""
    probe = copy / PROBE_NAME
    probe.write_text(PROBE)
    try:
        return run_pytest(copy, [PROBE_NAME], timeout_s)
    finally:
        probe.unlink()


def first_failure(output: str) -> str:
    """The node id of the first ``FAILED`` (else ``ERROR``) line of pytest's short summary."""
    for prefix in ("FAILED ", "ERROR "):
        for line in output.splitlines():
            if line.startswith(prefix):
                return line[len(prefix):].split(" - ")[0].strip()
    return "?"


@dataclasses.dataclass
class Result:
    index: int
    mutant: Mutant
    status: str  # "killed", "survived" or "error"
    killed_by: str
    run: Run


def run_mutant(index: int, mutant: Mutant, copies: queue.Queue[Path], timeout_s: float) -> Result:
    copy = copies.get()
    try:
        path = copy / mutant.path
        source = path.read_text()
        if occurrences(source, mutant.original) != 1:  # checked before; the copy cannot have changed
            raise RuntimeError(f"mutant {mutant.name!r}: original not found exactly once in the copy")
        write_source(path, source.replace(mutant.original, mutant.replacement))
        try:
            run = run_pytest(copy, mutant.tests, timeout_s)
        finally:
            write_source(path, source)
    finally:
        copies.put(copy)
    if run.returncode == 1:
        return Result(index, mutant, "killed", first_failure(run.output), run)
    if run.returncode == 0:
        return Result(index, mutant, "survived", "", run)
    why = f"timeout after {timeout_s:.0f} s" if run.returncode is None else f"pytest exit {run.returncode}"
    return Result(index, mutant, "error", why, run)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(results: list[Result]) -> str:
    lines = ["| # | mutation | file | result | killed by |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.index} | {_cell(r.mutant.name)} | {r.mutant.path} | {r.status} | {_cell(r.killed_by)} |")
    return "\n".join(lines)


def _tail(text: str, n: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("-k", dest="substr", help="only mutants whose name or file contains SUBSTR (any case)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy (default 1)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per pytest run (default 300)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies (their path is printed)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")

    selected = [(i, m) for i, m in enumerate(MUTANTS, 1)
                if not args.substr or args.substr.lower() in (m.name + " " + m.path).lower()]

    if args.list:
        for i, m in selected:
            n = occurrences((REPO / m.path).read_text(), m.original) if (REPO / m.path).is_file() else 0
            state = "" if n == 1 else f"   <-- original occurs {n} times"
            print(f"{i:3d}. {m.name}  [{m.path}]{state}")
            for test in m.tests:
                print(f"       {test}")
        print(f"{len(selected)} of {len(MUTANTS)} mutants ({len(MUTANTS) - len(CORE_MUTANTS)} from mutants_algos.py)")
        return 0
    if not selected:
        print(f"mutation_check: no mutant matches -k {args.substr!r}", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="mutation_check-"))
    try:
        # One snapshot of the working tree; further copies come from it, so all are identical.
        first = make_copy(tmp / "copy0")
        problems = list_problems(MUTANTS, first)
        if problems:
            print("mutation_check: the mutant list is out of sync with the code:", file=sys.stderr)
            for p in problems:
                print("  - " + p, file=sys.stderr)
            return 2
        jobs = min(args.jobs, len(selected))
        copies_list = [first] + [make_copy(tmp / f"copy{j}", first) for j in range(1, jobs)]

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            probes = list(pool.map(lambda c: probe_imports(c, args.timeout), copies_list))
        for copy, probe in zip(copies_list, probes, strict=True):
            if probe.returncode != 0:
                print(f"mutation_check: in {copy}, lightning_rl is not imported from the copy:", file=sys.stderr)
                print(_tail(probe.output), file=sys.stderr)
                return 2
        print(f"mutation_check: {len(copies_list)} cop{'y' if jobs == 1 else 'ies'} under {tmp}; "
              "lightning_rl imported from the copy", flush=True)

        union = list(dict.fromkeys(t for _, m in selected for t in m.tests))
        baseline = run_pytest(first, union, args.timeout)
        if baseline.returncode != 0:
            print(f"mutation_check: the unmutated tests do not pass (exit {baseline.returncode}); "
                  f"tests: {' '.join(union)}", file=sys.stderr)
            print(_tail(baseline.output), file=sys.stderr)
            return 2
        print(f"mutation_check: baseline passes ({len(union)} test sets, {baseline.seconds:.1f} s); "
              f"{len(selected)} mutants, {jobs} at a time", flush=True)

        copies: queue.Queue[Path] = queue.Queue()
        for c in copies_list:
            copies.put(c)
        results: list[Result] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run_mutant, i, m, copies, args.timeout) for i, m in selected]
            for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                r = future.result()
                results.append(r)
                print(f"[{done}/{len(selected)}] {r.status:8s} {r.mutant.name} ({r.run.seconds:.1f} s)"
                      + (f"  <- {r.killed_by}" if r.killed_by else ""), flush=True)
        results.sort(key=lambda r: r.index)
    finally:
        if args.keep:
            print(f"mutation_check: copies kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(table(results))
    bad = [r for r in results if r.status != "killed"]
    for r in bad:
        print(f"\n--- {r.status}: #{r.index} {r.mutant.name} ({r.mutant.path}); tests: {' '.join(r.mutant.tests)}")
        print(f"    {r.mutant.original!r} -> {r.mutant.replacement!r}")
        print(textwrap.indent(_tail(r.run.output, 25), "    "))
    n_killed = len(results) - len(bad)
    print(f"\nmutation_check: {n_killed}/{len(results)} killed, "
          f"{sum(r.status == 'survived' for r in bad)} survived, {sum(r.status == 'error' for r in bad)} errors; "
          f"{time.perf_counter() - t_start:.0f} s")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
