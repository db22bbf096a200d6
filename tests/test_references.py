"""Citations users can follow: everything shipped (code, compiled-kernel sources,
docs, examples, benchmarks, README and the plugin descriptions printed by
``mbcore plugins``) cites published sources by name (docs/references.md), never
internal notes (``spec/…``, ``spec §…``), the internal codes of the source
documents ("004 §…", "002", "DAP §…"), line numbers of a scanned copy, or issue
numbers."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("src", "ext", "docs", "examples", "benchmarks", "README.md")
TEXT_SUFFIXES = {".py", ".pyx", ".pxi", ".pxd", ".h", ".c", ".md", ".rst", ".txt",
                 ".yaml", ".yml", ".toml", ".cfg", ".json"}

#: (name, pattern) of what a user cannot follow
FORBIDDEN = [
    ("internal spec note", re.compile(r"(?i)\bspecs?\s*(?:/|§)")),
    ("source-document code (000-004)",
     re.compile(r"(?<![\w.,/\-])(?<!\d[ \u00a0\u202f])00[0-4](?![\w.,/%\-])")),
    ("DAP used as a document code", re.compile(r"\bDAP\s*(?:§|l\.\s?\d|Eqs?\b|p\.\s?\d)")),
    ("line number of a scanned copy", re.compile(r"\bl{1,2}\.\s?\d{2,}|\blines\s\d{3,}")),
    ("issue number", re.compile(r"(?i)\bissues?\s*#?\s*\d+")),
    ("issue number", re.compile(r"(?<![\w&/])#\d{1,5}\b")),
]

#: a citation key as written in docs: ``[Nikravesh 1988]``, ``[Hairer & Wanner 1996]``
KEY = re.compile(r"\[([A-Z][^\[\]`|]{0,60}? \d{4}[a-z]?)\](?!\()")
#: a citation in running text: ``Nikravesh (1988)``, ``Hairer, Nørsett & Wanner (1993)``
CITATION = re.compile(r"\b([A-Z][\w\-]+)(?:(?:, [A-Z][\w\-]+| García de Jalón)*,? (?:&|and) "
                      r"(?:Van Loan|[A-Z][\w\-]+))?(?: et al\.)? \((1[6-9]\d\d|20[0-2]\d)\)")


def _generated(f: Path) -> bool:
    """Cython's output next to its source (ext/x.c of ext/x.pyx): built, not shipped
    (MANIFEST.in excludes it), and it copies the source's text."""
    return f.suffix == ".c" and f.with_suffix(".pyx").exists()


def _shipped_files() -> list[Path]:
    out = []
    for top in SHIPPED:
        p = ROOT / top
        files = [p] if p.is_file() else sorted(p.rglob("*"))
        out += [f for f in files if f.is_file() and f.suffix in TEXT_SUFFIXES
                and "__pycache__" not in f.parts and ".egg-info" not in str(f)
                and not _generated(f)]
    return out


def violations(text: str, where: str) -> list[str]:
    """``where:line: what — the line`` for every forbidden citation in ``text``."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, pat in FORBIDDEN:
            m = pat.search(line)
            if m:
                out.append(f"{where}:{n}: {what} {m.group(0)!r}: {line.strip()[:120]}")
    return out


def test_patterns_catch_what_they_should():
    bad = ["see spec/planar.md C3", "(spec §2.6)", "004 §13.3.3", "the 002 report",
           "(002 Eq. 2.4.1)", "DAP §10.2.4", "001 l.129", "issue 17", "issue #7",
           "fixed in #12", "lines 12481-12506"]
    good = ["Nikravesh (1988), §13.3.3, Eq. 13.41", "0.002 s", "fourbar_002_equilibrium.yaml",
            "the book's DAP program", "colour #1f77b4", "tol = 1e-004",
            "https://github.com/h5py/h5py/issues/914", "spec = model['bodies']",
            "10 000 cases", "1 000 000 values", "translational_002"]
    for s in bad:
        assert violations(s, "x"), s
    for s in good:
        assert not violations(s, "x"), s


def test_shipped_files_cite_published_sources():
    found = []
    for f in _shipped_files():
        found += violations(f.read_text(encoding="utf-8", errors="replace"),
                            str(f.relative_to(ROOT)))
    assert not found, f"{len(found)} unfollowable citations:\n" + "\n".join(found)


def _reference_keys() -> set[str]:
    text = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#+\s*\[([^\]]+)\]", text, flags=re.M))


def test_cited_keys_are_listed_in_references():
    keys = _reference_keys()
    assert "Nikravesh 1988" in keys
    missing = []
    for f in sorted((ROOT / "docs").rglob("*.md")):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            missing += [f"{f.relative_to(ROOT)}:{n}: [{k}]" for k in KEY.findall(line)
                        if k not in keys]
    assert not missing, "keys not in docs/references.md:\n" + "\n".join(missing)


def test_author_year_citations_are_listed_in_references():
    """``Author (Year)`` anywhere shipped names a source of docs/references.md (by its
    first author and year)."""
    listed = {(k.split()[0].rstrip(","), k.split()[-1]) for k in _reference_keys()}
    assert ("Nikravesh", "1988") in listed and ("Hairer", "1996") in listed
    missing = []
    for f in _shipped_files():
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace")
                                 .splitlines(), 1):
            missing += [f"{f.relative_to(ROOT)}:{n}: {m.group(0)}"
                        for m in CITATION.finditer(line)
                        if (m.group(1), m.group(2)) not in listed]
    assert not missing, "sources not in docs/references.md:\n" + "\n".join(missing)


def test_plugin_descriptions_cite_published_sources():
    # in a fresh interpreter, so that no test's run-time registration is listed
    code = ("from mbcore.plugins import get_plugin_manager\n"
            "reg = get_plugin_manager().registry\n"
            "rows = reg.rows()\n"
            "assert len(rows) > 50, len(rows)\n"
            "for kind, name, prov, cls in rows:\n"
            "    d = (getattr(cls, 'description', '') or '') + ' ' + (cls.__doc__ or '')\n"
            "    print(kind + '/' + name + '\\t' + ' '.join(d.split()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for row in out.splitlines():
        where, _, text = row.partition("\t")
        found += violations(text, f"plugin {where}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("line", ["(Nikravesh (1988), §7.3, Eq. 7.21)"])
def test_key_pattern(line):
    assert not KEY.findall(line)
    assert KEY.findall("see [Nikravesh 1988]") == ["Nikravesh 1988"]
    assert KEY.findall("[Hairer & Wanner 1996]") == ["Hairer & Wanner 1996"]
    assert KEY.findall("[Bayo, García de Jalón & Serna 1988]") == [
        "Bayo, García de Jalón & Serna 1988"]
    assert [m.groups() for m in CITATION.finditer(line)] == [("Nikravesh", "1988")]
    assert [m.groups() for m in CITATION.finditer("Hairer, Nørsett & Wanner (1993)")] == [
        ("Hairer", "1993")]
