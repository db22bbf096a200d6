"""Every code example in README.md and docs/*.md runs as written.

Each fenced block is one test, in the order of its file, and the blocks of one file
share a working directory (``examples/`` and ``benchmarks/`` of the checkout are
linked into it) and, for Python, one namespace — a page reads top to bottom:

- ``python``: executed.
- ``bash``: each command line runs in a shell; ``mbcore …`` is the command line
  tool (``python -m mbcore.cli``), ``python benchmarks/X.py --flags`` is checked
  by ``--help`` listing every flag shown (the runs take minutes), ``python -m pytest
  FILES`` by its files existing, and installing (``pip install``) or building
  the docs (``python -m sphinx``) is what CI itself does, so not repeated here.
- ``yaml``: parsed by the model reader (duplicate keys refused); a fragment's
  top-level keys are model keys.

A block that cannot run as written (an excerpt of a longer source, a signature)
is preceded by ``<!-- not run: REASON -->``: it is reported as skipped with that
reason, so each exception stays visible.  Pages whose examples read a result made
elsewhere get it made first (:data:`SETUP`).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = ("python", "bash", "yaml")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->\s*$", re.S)

#: result files a page reads, made (command lines, as in bash blocks) before its blocks
SETUP = {
    "docs/results.md": ["mbcore run examples/slider_crank_dynamic.yaml -o run.h5",
                        "mbcore modes examples/fourbar_spring_modes.yaml -o modes.h5"],
}
#: command prefixes that are CI's own steps (installing, the test run, the docs
#: build), not repeated inside the test run
CI_STEPS = ("pip install", "python -m sphinx")


def _blocks():
    out = []
    for page in PAGES:
        text = page.read_text()
        rel = page.relative_to(ROOT).as_posix()
        for m in FENCE.finditer(text):
            lang = m.group(1)
            if lang not in RUN_LANGS:
                continue
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            skip = NOT_RUN.search(before)
            out.append(pytest.param(rel, line, lang, m.group(2),
                                    skip.group(1) if skip else None,
                                    id=f"{rel}:{line}"))
    return out


BLOCKS = _blocks()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Per page: its working directory and its Python namespace."""
    state: dict[str, tuple[Path, dict]] = {}

    def get(rel: str) -> tuple[Path, dict]:
        if rel not in state:
            wd = tmp_path_factory.mktemp(rel.replace("/", "_").replace(".", "_"))
            for d in ("examples", "benchmarks"):
                (wd / d).symlink_to(ROOT / d)
            for cmd in SETUP.get(rel, []):
                _shell(cmd, wd, f"{rel} (set-up)")
            state[rel] = (wd, {"__name__": "__docs_example__"})
        return state[rel]
    return get


def _shell(line: str, wd: Path, where: str) -> None:
    cmd = line
    if cmd.startswith("mbcore ") or " | " in cmd and cmd.split(" | ")[0].startswith("mbcore "):
        cmd = f"{shlex.quote(sys.executable)} -m mbcore.cli " + cmd[len("mbcore "):]
    env = dict(os.environ, MBCORE_PROGRESS="0", MPLBACKEND="Agg")
    r = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], cwd=wd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (f"{where}: `{line}` exited {r.returncode}\n"
                               f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def _command_lines(block: str) -> list[str]:
    """The commands of a bash block: comments dropped, ``\\`` continuations joined."""
    lines, cur = [], ""
    for raw in block.splitlines():
        s = raw.rstrip()
        if not cur and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        lines.append(_strip_comment(cur).strip())
        cur = ""
    return [c for c in lines if c]


def _strip_comment(line: str) -> str:
    """``cmd args   # comment`` -> ``cmd args`` (a ``#`` inside quotes stays)."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k]
    return line


def _check_script_flags(cmd: str, wd: Path, where: str) -> None:
    """``python benchmarks/X.py [sub] --flag ...``: the script exists and its
    ``--help`` (of the sub-command, if one is given) lists every flag shown."""
    words = shlex.split(cmd)
    script = words[1]
    assert (wd / script).is_file(), f"{where}: {script} does not exist"
    flags = [w.split("=", 1)[0] for w in words[2:] if w.startswith("--")]
    if not flags:
        return
    sub = [w for w in words[2:3] if re.fullmatch(r"[a-z_]+", w)]
    r = subprocess.run([sys.executable, script, *sub, "--help"], cwd=wd, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")
                                                        + os.pathsep
                                                        + os.environ.get("PYTHONPATH", "")))
    assert r.returncode == 0, f"{where}: {script} --help failed\n{r.stderr[-2000:]}"
    for flag in flags:
        assert flag in r.stdout, f"{where}: {script} has no option {flag}"


def _run_bash(block: str, wd: Path, where: str) -> int:
    ran = 0
    for cmd in _command_lines(block):
        env_free = re.sub(r"^(\w+=\S*\s+)+", "", cmd)       # VAR=... prefixes
        if env_free.startswith(CI_STEPS):
            continue
        if env_free.startswith("python -m pytest"):
            files = [w.split("::")[0] for w in shlex.split(env_free) if w.startswith("tests/")]
            assert files, f"{where}: `{cmd}` names no test file"
            for f in files:
                assert (ROOT / f).is_file(), f"{where}: {f} does not exist"
            ran += 1
        elif re.match(r"python (benchmarks|tests)/\w+\.py", env_free):
            _check_script_flags(env_free, ROOT, where)
            ran += 1
        elif env_free.startswith("mbcore "):
            _shell(env_free, wd, where)
            ran += 1
        else:
            raise AssertionError(f"{where}: the test does not know how to run `{cmd}`")
    return ran


def _check_yaml(block: str, where: str) -> None:
    from mbcore.model.model import TOP_KEYS, parse_text
    data = parse_text(block, "yaml", where)
    if isinstance(data, dict):
        unknown = [k for k in data if k not in TOP_KEYS]
        # a fragment of one element's keys (function: ...) is also a fragment
        assert not unknown or len(data) == 1, f"{where}: unknown model keys {unknown}"


@pytest.mark.parametrize("page, line, lang, code, not_run", BLOCKS)
def test_docs_example_runs(page, line, lang, code, not_run, pages, monkeypatch):
    where = f"{page}:{line}"
    if not_run is not None:
        assert not_run, f"{where}: a `not run` marker must give its reason"
        pytest.skip(f"not run: {not_run}")
    if lang == "yaml":
        _check_yaml(code, where)
        return
    wd, ns = pages(page)
    monkeypatch.chdir(wd)
    if lang == "bash":
        assert _run_bash(code, wd, where) >= 0
        return
    monkeypatch.setenv("MBCORE_PROGRESS", "0")
    import matplotlib
    matplotlib.use("Agg")
    exec(compile(code, where, "exec"), ns)          # noqa: S102 - the docs' own code
    import matplotlib.pyplot as plt
    plt.close("all")


def test_every_page_has_its_examples_found():
    """The block finder sees the pages' examples (a changed fence style would make
    the test above run nothing)."""
    counts = {}
    for p in BLOCKS:
        counts[p.values[2]] = counts.get(p.values[2], 0) + 1
    assert counts.get("python", 0) >= 20 and counts.get("bash", 0) >= 10, counts
