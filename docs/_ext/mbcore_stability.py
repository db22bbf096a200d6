"""Sphinx extension: the absolute-stability regions of the built-in integrators.

When the build starts, the regions ``{z = hλ : the method applied to y' = λy does
not grow}`` are drawn (matplotlib, Agg) into ``docs/_generated/stability/*.png``,
which docs/integrators.md ("Stability regions") shows:

* one-step methods (euler, heun = every rk2, rk3, rk4, dopri5, implicit_euler,
  trapezoid): the stability function ``R(z)`` is measured on the real
  implementation — one step of size 1 of the registered integrator on the real
  form ``[x; y]' = [[a, −b], [b, a]] [x; y]`` of ``y' = λy``, λ = a + ib, gives
  ``R(λ)`` as ``x + iy`` (Hairer & Wanner (1996), §IV.2) — at points on a circle, a
  rational function of known degrees is fitted to them and checked at other points,
  and the region is the set ``|R(z)| ≤ 1`` on a grid;
* linear multistep methods (ab 1–4, am 3–4, bdf 1–6): the boundary locus
  ``z(θ) = ρ(e^{iθ})/σ(e^{iθ})`` from the coefficient tables of the implementation
  (Hairer & Wanner (1996), §V.1; bdf: ``Σ_j (1/j)(1 − ζ⁻¹)^j = z``, its
  backward-difference form).

Run as a script to write the figures without Sphinx::

    python docs/_ext/mbcore_stability.py [OUTDIR]
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np

DOCS = Path(__file__).resolve().parents[1]
OUTDIR = DOCS / "_generated" / "stability"

#: one-step methods: name -> (options, numerator degree, denominator degree of R)
ONE_STEP = {
    "euler": ({}, 1, 0),
    "heun": ({}, 2, 0),
    "rk3": ({}, 3, 0),
    "rk4": ({}, 4, 0),
    "dopri5": ({"rtol": 1e10, "atol": 1e10, "first_step": 1.0, "calibrate": False}, 7, 0),
    "implicit_euler": ({}, 1, 1),
    "trapezoid": ({}, 1, 1),
}


def one_step_factor(name: str, z: complex, **options) -> complex:
    """R(z): one step h = 1 of the registered integrator ``name`` on the real form of
    y' = z y from y = 1 (a linear method commutes with the complex structure)."""
    from mbcore.integrate import IntegrationError
    from mbcore.plugins import registry
    a, b = float(np.real(z)), float(np.imag(z))
    J = np.array([[a, -b], [b, a]])
    cls = registry().get("integrator", name)
    opts = dict(options)
    if not cls.adaptive:
        opts.setdefault("step", 1.0)
    integ = cls(lambda t, y: J @ y, 0.0, [1.0, 0.0], 1.0,
                jac=J if cls.implicit else None, **opts)
    integ.step()
    if integ.status == "failed" or integ.t != 1.0:
        raise IntegrationError(f"{name}: no single step of size 1 at z = {z}", integ.t)
    return complex(integ.y[0], integ.y[1])


def fit_stability_function(name: str, num_deg: int, den_deg: int, radius: float = 1.0,
                           **options) -> Callable[[np.ndarray], np.ndarray]:
    """R(z) = P(z)/Q(z) (degrees ``num_deg``, ``den_deg``; Q(0) = 1) by linear least
    squares through one-step factors at 4(num_deg + den_deg) + 8 points of a circle;
    checked at 8 other points (ValueError when the relative misfit exceeds 1e-8: the
    method is not what the degrees say)."""
    m = 4 * (num_deg + den_deg) + 8
    zs = radius * np.exp(2j * np.pi * (np.arange(m) + 0.25) / m)
    rs = np.array([one_step_factor(name, z, **options) for z in zs])
    # R Q − P = 0:  Σ q_k z^k R − Σ p_k z^k = −R  (q_0 = 1)
    cols = [-(zs ** k) for k in range(num_deg + 1)] + [zs ** k * rs
                                                       for k in range(1, den_deg + 1)]
    coef = np.linalg.lstsq(np.stack(cols, axis=1), -rs, rcond=None)[0]
    p = coef[:num_deg + 1]
    q = np.concatenate(([1.0], coef[num_deg + 1:]))

    def R(z):
        z = np.asarray(z, dtype=complex)
        return np.polyval(p[::-1], z) / np.polyval(q[::-1], z)

    check = 0.7 * radius * np.exp(2j * np.pi * (np.arange(8) + 0.1) / 8) - 0.3 * radius
    got = np.array([one_step_factor(name, z, **options) for z in check])
    misfit = np.abs(R(check) - got).max() / max(1.0, np.abs(got).max())
    if misfit > 1e-8:
        raise ValueError(f"{name}: the stability function is not a rational function of "
                         f"degrees ({num_deg}, {den_deg}) (misfit {misfit:.1e})")
    R.coefficients = (p.real.copy(), q.real.copy())
    return R


def _locus(rho: Callable, sigma: Callable, n: int = 2001) -> np.ndarray:
    zeta = np.exp(1j * np.linspace(0.0, 2.0 * np.pi, n))
    return rho(zeta) / sigma(zeta)


def adams_bashforth_locus(k: int) -> np.ndarray:
    """z(θ) of AB_k: ρ = ζ^k − ζ^(k−1), σ = Σ_j β_j ζ^(k−1−j) (``AB_COEFFICIENTS``)."""
    from mbplugins.integrators.classical import AB_COEFFICIENTS
    beta = AB_COEFFICIENTS[k]
    return _locus(lambda w: w ** k - w ** (k - 1),
                  lambda w: sum(b * w ** (k - 1 - j) for j, b in enumerate(beta)))


def adams_moulton_locus(k: int) -> np.ndarray:
    """z(θ) of AM_k (k ≥ 2): ρ = ζ^(k−1) − ζ^(k−2), σ = Σ_j β_j ζ^(k−1−j)
    (``AM_COEFFICIENTS``)."""
    from mbplugins.integrators.adams_moulton import AM_COEFFICIENTS
    beta = AM_COEFFICIENTS[k]
    m = k - 1
    return _locus(lambda w: w ** m - w ** (m - 1),
                  lambda w: sum(b * w ** (m - j) for j, b in enumerate(beta)))


def bdf_locus(k: int) -> np.ndarray:
    """z(θ) of BDF_k in bdf's backward-difference form: Σ_{j≤k} (1/j)(1 − ζ⁻¹)^j."""
    from mbplugins.integrators.bdf import MAX_ORDER
    if not 1 <= k <= MAX_ORDER:
        raise ValueError(f"bdf has orders 1..{MAX_ORDER}, not {k}")
    zeta = np.exp(1j * np.linspace(0.0, 2.0 * np.pi, 2001))
    return sum((1.0 - 1.0 / zeta) ** j / j for j in range(1, k + 1))


# ----------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------
def _axes(ax, title: str) -> None:
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.axvline(0.0, color="0.5", lw=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("Re z")
    ax.set_ylabel("Im z")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)


def _region_plot(path: Path, methods: list[tuple[str, Callable]], box, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = np.linspace(box[0], box[1], 601)
    y = np.linspace(box[2], box[3], 601)
    Z = x[None, :] + 1j * y[:, None]
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, (label, R) in enumerate(methods):
        A = np.abs(R(Z))
        c = colours[i % len(colours)]
        ax.contourf(x, y, A, levels=[0.0, 1.0], colors=[c], alpha=0.12)
        ax.contour(x, y, A, levels=[1.0], colors=[c], linewidths=1.4)
        handles.append(plt.Line2D([], [], color=c, label=label))
    _axes(ax, title)
    ax.legend(handles=handles, fontsize="small", loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _locus_plot(path: Path, curves: list[tuple[str, np.ndarray]], box, title: str,
                note: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    for label, z in curves:
        ax.plot(z.real, z.imag, lw=1.3, label=label)
    ax.set_xlim(box[0], box[1])
    ax.set_ylim(box[2], box[3])
    _axes(ax, title)
    ax.legend(fontsize="small", loc="upper left")
    ax.text(0.02, 0.02, note, transform=ax.transAxes, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


FIGURES = ("explicit_rk.png", "implicit_one_step.png", "adams.png", "bdf.png")


def generate(outdir: Path = OUTDIR, log=print) -> list[Path]:
    """Write the four figures (:data:`FIGURES`) into ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    R = {name: fit_stability_function(name, p, q, **opts)
         for name, (opts, p, q) in ONE_STEP.items()}
    _region_plot(outdir / FIGURES[0],
                 [("euler", R["euler"]), ("heun / rk2 (any a)", R["heun"]),
                  ("rk3", R["rk3"]), ("rk4", R["rk4"]), ("dopri5", R["dopri5"])],
                 (-5.0, 1.5, -4.0, 4.0), "explicit Runge–Kutta: |R(z)| ≤ 1 (shaded)")
    _region_plot(outdir / FIGURES[1],
                 [("implicit_euler", R["implicit_euler"]), ("trapezoid", R["trapezoid"])],
                 (-4.0, 4.0, -4.0, 4.0),
                 "implicit one-step: |R(z)| ≤ 1 (shaded; trapezoid: Re z ≤ 0)")
    curves = [(f"ab{k}", adams_bashforth_locus(k)) for k in (1, 2, 3, 4)]
    curves += [(f"am{k}", adams_moulton_locus(k)) for k in (3, 4)]
    _locus_plot(outdir / FIGURES[2], curves, (-6.5, 1.0, -4.0, 4.0),
                "Adams: boundary loci", "stable: inside each closed curve (left of 0)")
    curves = [(f"bdf{k}", bdf_locus(k)) for k in range(1, 7)]
    _locus_plot(outdir / FIGURES[3], curves, (-10.0, 35.0, -22.0, 22.0),
                "BDF 1–6: boundary loci", "stable: outside each curve")
    keep = set(FIGURES)
    for old in outdir.iterdir():
        if old.name not in keep:
            old.unlink()
    log(f"stability: {len(FIGURES)} figures in {outdir}")
    return [outdir / f for f in FIGURES]


def setup(app):
    from mbcore_generated import connect
    return connect(app, "stability", generate)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTDIR)
