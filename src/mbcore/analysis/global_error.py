"""The global error of a dynamic run, estimated from a second run (``mbcore error``).

* A fixed-step method of order p (Richardson; TAM 674 (2003), lecture of 3 March;
  Hairer, Nørsett & Wanner (1993), §II.4): runs at the step h of the settings and at
  h/2; the error of the run at h is ``e(h) ≈ (y_h/2 − y_h) 2^p / (2^p − 1)``.
* An adaptive method: runs at the tolerances of the settings and at a tenth of them;
  with a global error proportional to the tolerance (mbcore calibrates its methods
  for that, docs/integrators.md "Tolerance calibration") the error of the run at
  rtol is ``e ≈ (y_rtol/10 − y_rtol) 10 / 9``.

Both are estimates: good where the runs are in the asymptotic range (the error
falls as the order, or the tolerance, says). The estimate is per coordinate and
output time; :class:`GlobalErrorEstimate` also gives the largest over time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import ModelError

__all__ = ["GlobalErrorEstimate", "estimate_global_error"]


@dataclass(frozen=True)
class GlobalErrorEstimate:
    """``t`` (output times), ``names`` (coordinates), ``error`` (len(t), n): the
    estimated error ``y_exact − y`` of the run at the given settings; ``q`` that
    run's coordinates; ``method`` ('richardson' or 'tolerance'), ``integrator``,
    ``order`` (fixed step) and the two settings compared (``coarse``, ``fine``)."""

    t: np.ndarray
    names: list[str]
    q: np.ndarray
    error: np.ndarray
    method: str
    integrator: str
    order: int | None
    coarse: dict
    fine: dict

    @property
    def max_error(self) -> np.ndarray:
        """The largest estimated error of each coordinate over the output times."""
        return np.max(np.abs(self.error), axis=0)

    def table(self) -> str:
        """A text table: coordinate, largest estimated error, its time, value at the end."""
        k = np.argmax(np.abs(self.error), axis=0)
        w = max(len("coordinate"), *(len(n) for n in self.names))
        lines = [f"{'coordinate':<{w}}  {'max |error|':>12}  {'at t':>10}  {'error at end':>13}"]
        for j, name in enumerate(self.names):
            lines.append(f"{name:<{w}}  {self.max_error[j]:12.3e}  {self.t[k[j]]:10.4g}  "
                         f"{self.error[-1, j]:13.3e}")
        return "\n".join(lines)


def estimate_global_error(model, settings: Mapping[str, Any] | None = None, *,
                          kernels: str | None = None) -> GlobalErrorEstimate:
    """Estimate the global error of the dynamic run of ``model`` (with ``settings``
    over the model's) from a second run (module docstring)."""
    from ..model.model import Model
    from ..plugins.manager import registry as _registry
    from .base import resolve_settings
    from .runner import run
    if not isinstance(model, Model):
        model = Model.from_file(model) if isinstance(model, str) else model
    reg = _registry()
    acls, aname, merged = resolve_settings(model.settings, reg, analysis="dynamic",
                                           overrides=dict(settings or {}))
    full = acls.validate_settings(merged)
    icls = reg.get("integrator", full["integrator"])
    base = {k: v for k, v in dict(settings or {}).items()}
    base["record"] = "q"
    if getattr(icls, "adaptive", True):
        rtol, atol = full.get("rtol"), full.get("atol")
        if rtol is None:
            raise ModelError("settings.rtol", f"integrator '{icls.name}' is adaptive: give "
                                              f"rtol (and atol) to estimate its error")
        coarse = {**base, "rtol": rtol, **({"atol": atol} if atol is not None else {})}
        fine = {**base, "rtol": rtol / 10.0,
                **({"atol": atol / 10.0} if atol is not None else {})}
        factor, method, order = 10.0 / 9.0, "tolerance", None
    else:
        h = full.get("step") or full["output_step"]
        order = int(getattr(icls, "order", 0) or 0)
        if order < 1:
            raise ModelError("settings.integrator", f"integrator '{icls.name}' declares no "
                                                    f"order: the step-halving estimate needs it")
        coarse, fine = {**base, "step": h}, {**base, "step": h / 2.0}
        factor, method = 2.0 ** order / (2.0 ** order - 1.0), "richardson"
    a = run(model, analysis="dynamic", settings=coarse, kernels=kernels)
    b = run(model, analysis="dynamic", settings=fine, kernels=kernels)
    for r, what in ((a, coarse), (b, fine)):
        if r.status != "finished":
            raise ModelError("settings", f"the run with {what} did not finish: {r.reason}")
    if a["q"].shape != b["q"].shape or not np.array_equal(a.t, b.t):
        raise ModelError("settings", "the two runs have different output times (a stop "
                                     "condition or an impact sequence that differs?)")
    err = (b["q"] - a["q"]) * factor
    names = [c.split("/", 1)[-1] for c in a.columns("q")]
    return GlobalErrorEstimate(np.array(a.t), names, np.array(a["q"]),
                               err, method, icls.name, order, coarse, fine)
