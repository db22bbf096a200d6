"""Sphinx extension: the example gallery.

When the build starts, every model file of ``examples/`` is run (the analysis the
file declares) and gets a page in ``docs/_generated/gallery/``: its description,
the run's summary, one figure and the model file itself.  Nothing is skipped: an
example that raises, or whose run emits a Python warning, fails the build (all
examples are run first, then every failure is reported).  Every example runs its
whole span (all of them take ~15 s together).  An example whose purpose
is to fail (a lock-up) is listed in :data:`EXPECTED_FAILURES` with the error it
must raise: if it raises nothing or another error, the build fails too.

Run as a script to write the gallery without Sphinx::

    python docs/_ext/mbcore_gallery.py [OUTDIR]
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
EXAMPLES = ROOT / "examples"
OUTDIR = DOCS / "_generated" / "gallery"

#: example file -> (name of the error class it must raise, why)
EXPECTED_FAILURES = {
    "fourbar_lockup.yaml": ("LockupError",
                            "the run must end with a `LockupError` at the limit "
                            "position; the rows computed before it are kept and plotted"),
}


def example_files() -> list[Path]:
    """Every example of ``examples/`` (the gallery's list: nothing else)."""
    return sorted(EXAMPLES.glob("*.yaml")) + sorted(EXAMPLES.glob("*.json"))


@dataclass
class Entry:
    path: Path
    name: str = ""
    description: str = ""
    analysis: str = ""
    notes: list[str] = field(default_factory=list)
    summary: str = ""
    seconds: float = 0.0
    error: str = ""          # unexpected failure or warnings: fails the build

    @property
    def stem(self) -> str:
        return self.path.stem


# ----------------------------------------------------------------------------------
# the figure (one small function: later ``mbcore.results.plotting.plot`` can draw it)
# ----------------------------------------------------------------------------------
def _main_series(res) -> list[tuple[str, Any]]:
    """(label, values) of at most six coordinates worth plotting: the angles of
    planar bodies, then their positions; for spatial bodies, their Bryant angles."""
    labels = res.labels("q") if "q" in res.channels else []
    spatial = [lab[:-3] for lab in labels if lab.endswith(".p0")]
    if spatial:
        out = []
        for body in spatial[:2]:
            ang = res.orientation(body, "bryant_123")
            out += [(f"{body}.bryant{k + 1}", ang[:, k]) for k in range(3)]
        return out
    picks = [lab for lab in labels if lab.endswith(".phi")]
    picks += [lab for lab in labels if lab.rsplit(".", 1)[-1] in ("x", "y", "z")]
    return [(lab, res[f"q/{lab}"]) for lab in (picks or labels)[:6]]


def figure(res, path: Path, title: str) -> None:
    """Main coordinates over time and, for a dynamic run, the energy balance
    (one configuration as bars for a static analysis)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = res.t
    series = _main_series(res)
    energy = res.labels("energy") if "energy" in res.channels and len(t) > 1 else []
    panels = 2 if energy else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7.0, 2.8 * panels + 0.6), squeeze=False)
    ax = axes[0][0]
    if len(t) > 1:
        for lab, y in series:
            ax.plot(t, y, label=lab)
        ax.set_xlabel("t [s]")
        ax.set_ylabel("coordinates")
        ax.legend(fontsize="small", ncols=3)
    else:                                         # static: one configuration
        ax.bar(range(len(series)), [y[0] for _, y in series],
               tick_label=[lab for lab, _ in series])
        ax.set_ylabel("coordinates at equilibrium")
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    if energy:
        ax = axes[1][0]
        e = res.series("energy")
        for k, lab in enumerate(energy):
            ax.plot(t, e[:, k], label=lab)
        ax.set_xlabel("t [s]")
        ax.set_ylabel("energy")
        ax.legend(fontsize="small", ncols=3)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def mechanism(res, path: Path) -> None:
    """The mechanism at the middle output time (``mbcore.results.plotting.snapshot``)."""
    import matplotlib.pyplot as plt

    from mbcore.results.plotting import snapshot
    t = res.t[len(res.t) // 2] if len(res.t) else None
    fig = snapshot(res, t, path, dpi=80)
    plt.close(fig)


# ----------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------
def run_example(path: Path, outdir: Path) -> Entry:
    import mbcore
    entry = Entry(path)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = mbcore.Model.from_file(str(path))
            entry.name = model.name or path.stem
            entry.description = " ".join((getattr(model, "description", "") or "").split()) \
                or _leading_comment(path)
            entry.analysis = model.settings.get("analysis") or "kinematic"
            expected = EXPECTED_FAILURES.get(path.name)
            res = mbcore.run(model, raise_errors=expected is None)
            if expected is not None:
                if res.status != "failed" or not (res.reason or "").startswith(expected[0] + ":"):
                    raise RuntimeError(f"expected a {expected[0]}, got status "
                                       f"{res.status!r} ({res.reason!r})")
                entry.notes.append(f"This example fails on purpose ({expected[1]}); the "
                                   f"build checks that it does.")
            entry.summary = res.summary()
            figure(res, outdir / f"{path.stem}.png", entry.name)
            mechanism(res, outdir / f"{path.stem}_mechanism.png")
        except Exception as exc:  # reported after every example has run
            entry.error = f"{type(exc).__name__}: {exc}"
    if caught and not entry.error:
        entry.error = "warnings: " + "; ".join(
            f"{w.category.__name__}: {w.message} ({Path(w.filename).name}:{w.lineno})"
            for w in caught)
    entry.seconds = time.perf_counter() - start
    return entry


def _leading_comment(path: Path) -> str:
    """The comment block opening a model file (for files without ``description``)."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        out.append(line.lstrip("#").strip())
    return " ".join(" ".join(out).split())


# ----------------------------------------------------------------------------------
# pages
# ----------------------------------------------------------------------------------
def example_page(e: Entry, outdir: Path = OUTDIR) -> str:
    rel = os.path.relpath(e.path, outdir).replace(os.sep, "/")
    lines = [f"(gallery-{e.stem})=", f"# {e.name}", ""]
    if e.description:
        lines += [e.description, ""]
    lines += [f"File `examples/{e.path.name}`, analysis `{e.analysis}` "
              f"(run with `mbcore run examples/{e.path.name}`).", ""]
    lines += [n for note in e.notes for n in (note, "")]
    lines += [f"```{{figure}} {e.stem}_mechanism.png", f":alt: {e.name}, the mechanism", "",
              "The mechanism at the middle output time (`mbcore animate "
              f"{e.stem}.h5 --at T -o frame.png`; `mbcore animate {e.stem}.h5 -o "
              f"{e.stem}.gif` animates it).", "```", ""]
    lines += [f"```{{figure}} {e.stem}.png", f":alt: {e.name}", "",
              "Main coordinates over time"
              + (" and the energy balance." if e.analysis == "dynamic" else "."),
              "```", ""]
    lines += ["## Run summary", "", "```text", e.summary, "```", ""]
    lines += ["## Model file", "", f"```{{literalinclude}} {rel}",
              ":language: yaml" if e.path.suffix == ".yaml" else ":language: json",
              "```", ""]
    return "\n".join(lines)


def index_page(entries: list[Entry]) -> str:
    lines = ["# Gallery", "",
             "Every model file of `examples/`, run by the documentation build with "
             "the analysis it declares and its whole time span (an example that "
             "fails or warns fails the build). The commentary on the "
             "examples and their reference values is in [examples.md](../../examples.md).",
             "", "| example | analysis | description |", "|---|---|---|"]
    for e in entries:
        desc = (e.description or "").replace("|", "\\|")
        lines.append(f"| [{e.name}]({e.stem}.md) | `{e.analysis}` | {desc} |")
    lines += ["", "```{toctree}", ":hidden:", ""]
    lines += [e.stem for e in entries]
    lines += ["```", ""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(outdir: Path = OUTDIR, log=print) -> list[Entry]:
    """Run every example and write the gallery; raise RuntimeError naming every
    example that failed or warned."""
    outdir.mkdir(parents=True, exist_ok=True)
    entries = []
    total = time.perf_counter()
    for path in example_files():
        e = run_example(path, outdir)
        log(f"gallery: {path.name}: {e.seconds:.2f} s" + (f"  FAILED {e.error}" if e.error else ""))
        entries.append(e)
    log(f"gallery: {len(entries)} examples in {time.perf_counter() - total:.1f} s")
    bad = [e for e in entries if e.error]
    if bad:
        raise RuntimeError("gallery: examples failed:\n" + "\n".join(
            f"  {e.path.name}: {e.error}" for e in bad))
    keep = ({f"{e.stem}.md" for e in entries} | {f"{e.stem}.png" for e in entries}
            | {f"{e.stem}_mechanism.png" for e in entries} | {"index.md"})
    for old in outdir.iterdir():          # a removed example leaves no page behind
        if old.name not in keep:
            old.unlink()
    for e in entries:
        _write(outdir / f"{e.stem}.md", example_page(e, outdir))
    _write(outdir / "index.md", index_page(entries))
    return entries


def _on_builder_inited(app) -> None:
    from sphinx.errors import ExtensionError
    from sphinx.util import logging
    logger = logging.getLogger(__name__)
    try:
        generate(Path(app.srcdir) / "_generated" / "gallery", log=logger.info)
    except RuntimeError as exc:
        raise ExtensionError(str(exc)) from None


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTDIR)
