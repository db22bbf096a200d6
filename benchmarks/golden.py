"""Golden results: record every example and benchmark model, compare two recordings.

    python benchmarks/golden.py record OUT.npz [--only PATTERN ...] [--list]
    python benchmarks/golden.py compare OLD.npz NEW.npz [--rtol 1e-14] [--all]

``record`` runs every shipped example (``examples/*.yaml``, the analysis and settings
the file declares) and the benchmark models of ``benchmarks/run.py`` (the models and
settings its groups run, with the ``--quick`` simulated times; compiled kernels, and
the NumPy path, the Python loop and the HDF5 output where run.py measures them), and
stores in one ``.npz``, keyed ``<case>/<item>``:

* ``<case>/t`` and ``<case>/series/<channel>``: every time series of the result
  (``q``, ``qd``, ``qdd``, ``lam``, ``reactions``, ``energy``, ``violation``,
  ``integrator`` ...), ``<case>/labels/<channel>``: their column labels;
* ``<case>/stats/<key>``: the run statistics (step, evaluation, Newton and LU
  counts ...; times such as ``wall_time`` left out); a text statistic is stored as
  its text with the numbers replaced by ``#`` (``/text``) plus those numbers
  (``/numbers``), so a message such as ``|Phi| = 3.55e-15`` compares numerically;
* ``<case>/status``, ``<case>/events/...``, ``<case>/group/<name>/...`` (e.g. the
  ``modes`` result group).

Only the public API is used (``mbcore.run``, ``mbcore.Model``, ``mbcore.Simulation``,
the ``Result`` reader and ``benchmarks/models.py``), so the script records any
checkout: ``PYTHONPATH=<checkout>/src python benchmarks/golden.py record old.npz``.
A run that fails is recorded as far as it got (``raise_errors=False``) with its
status and reason; an exception that escapes is stored as ``<case>/error``.

Time cap: an example is run as its file says unless it appears in ``T_END_CAP``
(example stem -> t_end), for examples whose run takes more than about 5 s; none
does today (the slowest, spatial_slider_crank_dynamic, takes < 1 s).  The whole
record (206 cases) takes about 30 s on a 2-core machine.

``compare`` prints one line per key: the largest absolute difference, the largest
relative one (per column: ``max |a - b| / max(|a|, |b|)`` over the column's rows,
so values crossing zero do not inflate it) and the class: ``bitwise`` (same shape,
dtype and bytes), ``<=1e-14 relative`` (within ``--rtol``; NaN and infinities in
the same places, the same text) or ``DIFFERS``; keys of OLD missing from NEW are
``MISSING``, keys only in NEW ``added`` (reported, not an error).  By default only
keys that are not bitwise are listed, then a JSON summary.  Exit code 1 when any
key DIFFERS or is MISSING, else 0.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
T_END_CAP: dict[str, float] = {}        # example stem -> t_end (runs over ~5 s)
META = "__meta__"
_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\b(?:nan|inf)\b")
_TIMING_STAT = re.compile(r"wall|seconds|elapsed|_time$|^time")


# --------------------------------------------------------------------------- cases

def _models():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import models                          # benchmarks/models.py (public API only)
    return models


def _pendulum():
    """The 1 m, 1 kg slender-bar pendulum of run.py (``_pendulum``)."""
    import mbcore
    pend = mbcore.Model("pendulum")
    pend.set_gravity(0, -9.81)
    pend.add_body("rod", mass=1.0, inertia=1.0 / 12, position=(0.5, 0.0))
    pend.add_joint("revolute", "pivot", body_i="ground", body_j="rod", point_i=(0, 0),
                   point_j=(-0.5, 0))
    pend.settings = {"analysis": "dynamic"}
    return pend


def _file(name: str):
    import mbcore
    return mbcore.Model.from_file(EXAMPLES / name)


_TMP: list[Path] = []


def _tmp(name: str) -> Path:
    """A path for an HDF5 output in this record's temporary directory."""
    if not _TMP:
        _TMP.append(Path(tempfile.mkdtemp(prefix="mbcore-golden-")))
    return _TMP[0] / name


def _run(model, settings=None, *, output: str | None = None, **kw) -> Callable[[], Any]:
    """A case: ``mbcore.run`` of ``model`` (a Model or a function building one);
    ``output``: the name of an HDF5 file in the temporary directory."""
    def go():
        import mbcore
        if output:
            kw["output"] = _tmp(output)
        return mbcore.run(model() if callable(model) else model, settings=settings,
                          raise_errors=False, **kw)
    return go


def example_cases() -> dict[str, Callable[[], Any]]:
    """Every examples/*.yaml as declared (compiled kernels, the default); the
    examples whose analysis is not dynamic also on the NumPy path (``/numpy``)."""
    import yaml
    cases = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        st = {"t_end": T_END_CAP[path.stem]} if path.stem in T_END_CAP else None
        cases[f"example/{path.stem}"] = _run(lambda p=path: _file(p.name), st)
        analysis = ((yaml.safe_load(path.read_text()) or {}).get("settings") or {}).get(
            "analysis", "kinematic")
        if analysis != "dynamic":
            cases[f"example/{path.stem}/numpy"] = _run(lambda p=path: _file(p.name), st,
                                                       kernels="numpy")
    return cases


def benchmark_cases() -> dict[str, Callable[[], Any]]:
    """The models and settings of benchmarks/run.py's groups (``--quick`` times)."""
    m = _models()
    c: dict[str, Callable[[], Any]] = {}
    fourbar = lambda: _file("fourbar_dap.yaml")                 # noqa: E731
    slider = lambda: _file("slider_crank_dynamic.yaml")         # noqa: E731
    # dynamics: DI, dopri5, rtol 1e-3, lean record and every channel; chains; stiff chain
    common = {"formulation": "di", "integrator": "dopri5", "output_step": 0.1,
              "rtol": 1e-3, "atol": 1e-5, "t_end": 2.0}
    lean = {"record": "q, qd, energy"}
    for name, mdl in (("pendulum", _pendulum), ("fourbar", fourbar),
                      ("slider_crank", slider)):
        for kern in ("compiled", "numpy"):
            c[f"dynamics/{name}/{kern}"] = _run(mdl, {**common, **lean}, kernels=kern)
            c[f"dynamics/{name}_all_channels/{kern}"] = _run(mdl, common, kernels=kern)
    for n in (10, 100):
        c[f"dynamics/chain_{n}"] = _run(lambda n=n: m.chain(n), {
            **common, **lean, "t_end": 1.0, "output_step": 0.1})
    c["dynamics/chain_10/numpy"] = _run(lambda: m.chain(10), {
        **common, **lean, "t_end": 1.0, "output_step": 0.1}, kernels="numpy")
    for kern in ("compiled", "numpy"):
        c[f"dynamics/stiff_chain_10/{kern}"] = _run(lambda: m.stiff_chain(10), {
            **common, **lean, "t_end": 0.2, "integrator": "bdf", "output_step": 0.01},
            kernels=kern)
    # integrators: every method on the four-bar and the stiff chain (compiled, NumPy)
    for name, mdl, t_end, step, methods in (
            ("fourbar", fourbar, 0.5, 1e-3,
             ("rk4", "heun", "bs23", "dopri5", "abm", "bdf", "implicit_euler", "trapezoid")),
            ("stiff_chain_5", lambda: m.stiff_chain(5), 0.05, 2e-5,
             ("rk4", "dopri5", "bs23", "abm", "bdf", "implicit_euler"))):
        for meth in methods:
            st = {"t_end": t_end, "output_step": t_end / 10, "integrator": meth,
                  "formulation": "di", "rtol": 1e-6, "atol": 1e-8, "step": step}
            for kern in ("compiled", "numpy"):
                c[f"integrators/{name}_{meth}/{kern}"] = _run(mdl, st, kernels=kern)
    # multistep: compiled loop, Python driver (loop: python); GGL and stiff DAE forms
    t_end = 2.0
    ms = [(f"{integ}_rtol{rtol:g}", {"integrator": integ, "rtol": rtol, "atol": 1e-2 * rtol})
          for integ in ("abm", "bdf") for rtol in (1e-6, 1e-8)]
    ms += [(f"{integ}_step{step:g}", {"integrator": integ, "step": step})
           for integ in ("implicit_euler", "trapezoid") for step in (1e-3, 2.5e-4)]
    ms += [(f"{form}_rtol{rtol:g}", {"integrator": "bdf", "formulation": form, "rtol": rtol,
                                      "atol": 1e-2 * rtol})
           for form in ("ggl", "stiff") for rtol in (1e-6, 1e-8)]
    for name, extra in ms:
        st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
              "formulation": "di", **extra}
        c[f"multistep/fourbar_{name}/compiled"] = _run(fourbar, st)
        c[f"multistep/fourbar_{name}/python_loop"] = _run(fourbar, {**st, "loop": "python"})
    for form in ("stiff", "ggl"):
        st = {"analysis": "dynamic", "t_end": 0.2, "integrator": "bdf", "formulation": form,
              "output_step": 0.01, "rtol": 1e-3, "atol": 1e-5, "record": "q, qd, energy"}
        c[f"multistep/stiff_chain10_{form}/compiled"] = _run(lambda: m.stiff_chain(10), st)
        c[f"multistep/stiff_chain10_{form}/python_loop"] = _run(
            lambda: m.stiff_chain(10), {**st, "loop": "python"})
    # cp: coordinate partitioning vs DI, compiled and NumPy
    for key, fname, te, rtol in (("andrews", "andrews_squeezer.yaml", 0.03, 1e-10),
                                 ("fourbar", "fourbar_dap.yaml", 0.5, 1e-8)):
        for label, form, kern in (("di", "di", "compiled"), ("cp", "cp", "compiled"),
                                  ("cp_numpy", "cp", "numpy")):
            c[f"cp/{key}_{label}"] = _run(lambda f=fname: _file(f), {
                "t_end": te, "output_step": te / 10, "formulation": form, "rtol": rtol,
                "atol": rtol, "integrator": "dopri5", "kernels": kern})
    # penalty: IFToMM A02, 40 four-bars, 20 s (fast and default settings)
    c["penalty/a02_penalty_fast"] = _run(lambda: m.a02(40, t_end=20.0, rtol=2e-2), {
        "output_step": 0.1, "record": "q, energy, violation",
        "formulation_options": {"projection": False}})
    c["penalty/a02_penalty_defaults"] = _run(lambda: m.a02(40, t_end=20.0, rtol=1e-4), {
        "output_step": 0.1, "record": "q, energy, violation"})
    # formulations: every formulation on the four-bar and the free slider-crank
    for name, mdl in (("fourbar", fourbar), ("slider_crank", slider)):
        for form in ("di", "cs", "cp", "projection", "penalty", "ggl", "stiff"):
            c[f"formulations/{name}_{form}"] = _run(mdl, {
                "t_end": 1.0, "output_step": 0.1, "formulation": form, "rtol": 1e-8,
                "atol": 1e-10, "integrator": "bdf" if form in ("ggl", "stiff") else "dopri5"})
    # spatial_dynamics: the heavy top; spatial chains on spherical joints
    for integ, rtol, record, ostep in (
            ("dop853", 1e-6, "q, qd", 0.05), ("dop853", 1e-7, "q, qd", 0.05),
            ("dop853", 1e-8, "q, qd", 0.05), ("dopri5", 1e-7, "q, qd", 0.05),
            ("dopri5", 1e-8, "q, qd", 0.05), ("dop853", 1e-7, "q, qd", 0.01),
            ("dop853", 1e-7, None, 0.01)):
        st = {"integrator": integ, "rtol": rtol, "atol": rtol, "output_step": ostep}
        if record:
            st["record"] = record
        tag = "" if ostep == 0.05 else ("_rows500" if record else "_all_channels")
        c[f"spatial_dynamics/heavy_top_{integ}_rtol{rtol:g}{tag}"] = _run(
            lambda: _file("spatial_heavy_top.yaml"), st)
    for n in (10, 100, 1000):
        c[f"spatial_dynamics/spatial_chain_{n}"] = _run(
            lambda n=n: m.spatial_chain(n), {"t_end": 0.2, "output_step": 0.02})
    # joint_coordinates: planar chains of 0.1 m links, joint coordinates vs Cartesian
    base = {"t_end": 1.0, "output_step": 0.1, "integrator": "dop853", "record": "q"}
    for n in (10, 100, 1000):
        for form in ("joint_coordinates", "di"):
            c[f"joint_coordinates/chain_{n}_{form}"] = _run(
                lambda n=n: m.chain(n, length=0.1),
                {**base, "formulation": form, "rtol": 1e-3, "atol": 1e-3})
    c["joint_coordinates/chain_10_reference"] = _run(
        lambda: m.chain(10, length=0.1),
        {**base, "formulation": "joint_coordinates", "rtol": 1e-12, "atol": 1e-12})
    for n in (10, 100):
        c[f"joint_coordinates/spatial_chain_{n}"] = _run(
            lambda n=n: m.spatial_chain(n),
            {"t_end": 0.2, "output_step": 0.02, "formulation": "joint_coordinates"})
    # overheads: the same runs in memory and streamed to HDF5 (the file read back)
    kin = {"t_end": 5.3, "output_step": 0.01}
    c["overheads/hdf5_kinematic/memory"] = _run(lambda: _file("slider_crank.yaml"), kin)
    c["overheads/hdf5_kinematic/hdf5"] = _run(lambda: _file("slider_crank.yaml"), kin,
                                              output="k.h5")
    for label, step in (("every_step", 0.001), ("sparse", 0.1)):
        st = {"t_end": 2.0, "output_step": step, "rtol": 1e-4, "atol": 1e-6,
              "formulation": "di"}
        c[f"overheads/hdf5_dynamic_{label}/memory"] = _run(fourbar, st)
        c[f"overheads/hdf5_dynamic_{label}/hdf5"] = _run(fourbar, st,
                                                         output=f"d_{label}.h5")
    # startup_rows: the pendulum, 10 s, 1001 rows, dopri5 (batched rows; HDF5)
    for record in ("q, qd", None):
        for rtol in (1e-3, 1e-6):
            st = {"t_end": 10.0, "output_step": 0.01, "integrator": "dopri5",
                  "formulation": "di", "rtol": rtol, "atol": rtol / 100}
            if record:
                st["record"] = record
            key = (record or "all").replace(", ", "_") + f"_rtol{rtol:g}"
            c[f"startup_rows/pendulum_rows_{key}"] = _run(_pendulum, st)
    c["startup_rows/pendulum_rows_q_qd_rtol1e-06_hdf5"] = _run(_pendulum, {
        "t_end": 10.0, "output_step": 0.01, "integrator": "dopri5", "formulation": "di",
        "rtol": 1e-6, "atol": 1e-8, "record": "q, qd"}, output="p.h5")
    # kinematics and spatial: kinematic analyses, compiled and NumPy
    for name, fname, st in (
            ("fourbar", "fourbar_kap.yaml", {"t_end": 1.0, "output_step": 1.0 / 200}),
            ("slider_crank", "slider_crank.yaml", {"t_end": 5.3, "output_step": 0.1}),
            ("peaucellier", "peaucellier_002.yaml", {"t_end": 10.0, "output_step": 0.1}),
            ("link_gear_multiplier", "link_gear_multiplier.yaml",
             {"t_end": 10.0, "output_step": 0.1}),
            ("spatial_slider_crank", "spatial_slider_crank.yaml",
             {"t_end": 3.0, "output_step": 0.01})):
        for kern in ("compiled", "numpy"):
            c[f"kinematics/{name}/{kern}"] = _run(lambda f=fname: _file(f), st, kernels=kern)
    # simulation: Simulation.advance_to in a 1 kHz loop, inputs unchanged and changed
    for integ, extra in (("rk4", {"step": 1e-3}), ("dopri5", {})):
        for change in (False, True):
            c[f"simulation/fourbar_{integ}{'_input_jump' if change else ''}"] = (
                lambda integ=integ, extra=extra, change=change:
                _simulation(fourbar(), {"integrator": integ, "t_end": 0.2,
                                        "output_step": 1e-3, "record": "q,qd", **extra},
                            change))
    return c


class _SimResult:
    """What one Simulation loop produced, in the shape ``_record`` reads."""

    def __init__(self, t, rows, columns, stats):
        self.t, self._rows, self._columns, self.stats = t, rows, columns, stats
        self.channels, self.events, self.groups = ["outputs"], [], []
        self.status, self.reason = "finished", ""

    def series(self, name):
        return self._rows

    def labels(self, name):
        return self._columns


def _simulation(model, settings, change: bool) -> _SimResult:
    import mbcore
    sim = mbcore.Simulation(model, settings)
    cols = list(sim.columns)
    n = int(round(settings["t_end"] / 1e-3))
    rows, ts = [], []
    for k in range(1, n + 1):
        if change:
            sim["crank.torque"] = 0.1 * (k % 7)
        sim.advance_to(k * 1e-3)
        rows.append(np.asarray(sim.outputs(cols), dtype=float))
        ts.append(k * 1e-3)
    return _SimResult(np.array(ts), np.array(rows), cols, dict(sim.stats))


def all_cases() -> dict[str, Callable[[], Any]]:
    return {**example_cases(), **benchmark_cases()}


# ------------------------------------------------------------------------ recording

def _text(s: Any) -> tuple[np.ndarray, np.ndarray]:
    """A text as (template with the numbers as '#', the numbers)."""
    s = str(s)
    nums = [float(x) for x in _NUM.findall(s)]
    return np.array(_NUM.sub("#", s)), np.array(nums, dtype=float)


def _put_value(out: dict, key: str, v: Any) -> None:
    if isinstance(v, (bool, np.bool_)):
        out[key] = np.array(bool(v))
    elif isinstance(v, (int, float, complex, np.number)):
        out[key] = np.array(v)
    elif isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
        out[key] = np.array(v)
    elif isinstance(v, (list, tuple, np.ndarray)) and all(
            isinstance(x, (int, float, np.number)) and not isinstance(x, bool) for x in v):
        out[key] = np.array(v, dtype=float)
    elif v is None:
        out[key + "/none"] = np.array(True)
    else:
        tpl, nums = _text(v if not isinstance(v, (list, tuple, np.ndarray))
                          else json.dumps([str(x) for x in v]))
        out[key + "/text"] = tpl
        out[key + "/numbers"] = nums


def _record(case: str, res: Any, out: dict) -> None:
    p = f"{case}/"
    out[p + "t"] = np.asarray(res.t, dtype=float)
    for ch in res.channels:
        out[p + f"series/{ch}"] = np.array(res.series(ch))
        out[p + f"labels/{ch}"] = np.array([str(x) for x in res.labels(ch)])
    for k, v in sorted(dict(res.stats).items()):
        if not _TIMING_STAT.search(k):
            _put_value(out, p + f"stats/{k}", v)
    _put_value(out, p + "status", getattr(res, "status", ""))
    _put_value(out, p + "reason", getattr(res, "reason", ""))
    ev = list(res.events)
    out[p + "events/t"] = np.array([float(e[0]) for e in ev], dtype=float)
    _put_value(out, p + "events/kind_message",
               json.dumps([[str(e[1]), str(e[2])] for e in ev]))
    for g in res.groups:
        grp = res.group(g)
        for k, v in grp.items():
            _put_value(out, p + f"group/{g}/{k}", np.asarray(v) if isinstance(
                v, np.ndarray) else v)
        for k, v in getattr(grp, "attrs", {}).items():
            _put_value(out, p + f"group/{g}/@{k}", v)


def record(path: str, only: list[str] | None = None) -> dict:
    import mbcore
    cases = all_cases()
    if only:
        cases = {k: v for k, v in cases.items() if any(fnmatch.fnmatch(k, pat)
                                                       for pat in only)}
    out: dict[str, np.ndarray] = {}
    times, errors = {}, {}
    t_all = time.perf_counter()
    for case, go in cases.items():
        t0 = time.perf_counter()
        try:
            _record(case, go(), out)
        except Exception as exc:           # recorded, so compare shows it
            errors[case] = f"{type(exc).__name__}: {exc}"[:500]
            _put_value(out, f"{case}/error", errors[case])
        times[case] = round(time.perf_counter() - t0, 3)
    meta = {"mbcore": getattr(mbcore, "__version__", "?"),
            "mbcore_path": str(Path(mbcore.__file__).resolve().parent),
            "numpy": np.__version__, "cases": len(cases), "keys": len(out),
            "seconds": round(time.perf_counter() - t_all, 1),
            "t_end_cap": T_END_CAP, "errors": errors, "case_names": list(cases),
            "slowest": dict(sorted(times.items(), key=lambda kv: -kv[1])[:5])}
    out[META] = np.array(json.dumps(meta))
    np.savez_compressed(path, **out)
    if _TMP:
        shutil.rmtree(_TMP.pop(), ignore_errors=True)
    return meta


# ------------------------------------------------------------------------ comparing

def _load(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """(the recorded arrays, the metadata)."""
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f[META])) if META in f.files else {}
        return {k: f[k] for k in f.files if k != META}, meta


def _case_of(key: str, names: list[str]) -> str:
    """The case a key belongs to: the longest case name that prefixes it."""
    best = max((n for n in names if key.startswith(n + "/")), key=len, default=None)
    return best or key.rsplit("/", 1)[0]


def diff(a: np.ndarray, b: np.ndarray, rtol: float) -> tuple[str, float, float]:
    """(class, max abs difference, max relative difference per column)."""
    if a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes():
        return "bitwise", 0.0, 0.0
    if a.shape != b.shape:
        return "DIFFERS", math.inf, math.inf
    if a.dtype.kind in "USO" or b.dtype.kind in "USO" or a.dtype.kind == "b":
        return "DIFFERS", math.inf, math.inf
    if a.size == 0:
        return "bitwise", 0.0, 0.0
    fa = a.astype(complex if "c" in (a.dtype.kind + b.dtype.kind) else float)
    fb = b.astype(fa.dtype)
    fin_a, fin_b = np.isfinite(fa), np.isfinite(fb)
    # NaN and infinities must be in the same places (and infinities of one sign)
    same_nonfinite = np.array_equal(fin_a, fin_b) and np.array_equal(
        np.isnan(fa), np.isnan(fb)) and np.array_equal(fa[np.isinf(fa)], fb[np.isinf(fb)])
    d = np.where(fin_a & fin_b, np.abs(fa - fb), 0.0)
    scale = np.where(fin_a & fin_b, np.maximum(np.abs(fa), np.abs(fb)), 0.0)
    if fa.ndim >= 2:                       # per column: the largest over the rows
        d2 = d.reshape(d.shape[0], -1)
        s2 = scale.reshape(scale.shape[0], -1)
        dmax, smax = d2.max(axis=0), s2.max(axis=0)
    else:
        dmax, smax = d.reshape(-1), scale.reshape(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(dmax == 0, 0.0, dmax / np.where(smax == 0, 1.0, smax))
    mabs, mrel = float(d.max()), float(rel.max())
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return "DIFFERS", mabs, mrel       # counts: equal or not
    if not same_nonfinite:
        return "DIFFERS", mabs if mabs else math.inf, math.inf
    return ("<=1e-14 relative" if mrel <= rtol else "DIFFERS"), mabs, mrel


def compare(old_path: str, new_path: str, rtol: float = 1e-14,
            show_all: bool = False, stream=sys.stdout) -> tuple[int, dict]:
    (old, mo), (new, mn) = _load(old_path), _load(new_path)
    names = sorted(set(mo.get("case_names", [])) | set(mn.get("case_names", [])))
    rows = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            rows.append((key, "MISSING", math.nan, math.nan))
        elif key not in old:
            rows.append((key, "added", math.nan, math.nan))
        else:
            rows.append((key, *diff(old[key], new[key], rtol)))
    counts: dict[str, int] = {}
    for key, cls, mabs, mrel in rows:
        counts[cls] = counts.get(cls, 0) + 1
        if show_all or cls != "bitwise":
            print(f"{key}  {cls}  max_abs={mabs:.3g}  max_rel={mrel:.3g}", file=stream)
    bad = [r for r in rows if r[1] in ("DIFFERS", "MISSING")]
    cases_bad = sorted({_case_of(r[0], names) for r in bad})
    summary = {"old": old_path, "new": new_path, "rtol": rtol, "keys": len(rows),
               "classes": counts, "cases_with_differences": cases_bad,
               "max_rel_within_rtol": max((r[3] for r in rows if r[1] == "<=1e-14 relative"),
                                          default=0.0),
               "errors_old": mo.get("errors", {}), "errors_new": mn.get("errors", {}),
               "differs": [r[0] for r in bad][:50], "ok": not bad}
    print(json.dumps(summary, indent=2), file=stream)
    return (1 if bad else 0), summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run every case and store the results")
    r.add_argument("out", nargs="?", help="the .npz to write")
    r.add_argument("--only", nargs="*", help="case name patterns (fnmatch), e.g. 'example/*'")
    r.add_argument("--list", action="store_true", help="list the cases and exit")
    c = sub.add_parser("compare", help="compare two recordings")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--rtol", type=float, default=1e-14,
                   help="relative tolerance of the second class (default 1e-14)")
    c.add_argument("--all", action="store_true", help="list bitwise keys too")
    args = p.parse_args(argv)
    if args.cmd == "record":
        if args.list:
            print("\n".join(all_cases()))
            return 0
        if not args.out:
            p.error("record: the output .npz is required")
        meta = record(args.out, args.only)
        print(json.dumps(meta, indent=2))
        return 1 if meta["errors"] else 0
    code, _ = compare(args.old, args.new, args.rtol, args.all)
    return code


if __name__ == "__main__":
    sys.exit(main())
