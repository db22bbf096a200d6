"""Linear models and modes: the results of the ``modes`` analysis.

:class:`LinearModel` is the state-space model ``x' = A x + B w``, ``y = C x + D w``
of a multibody system linearised about a static equilibrium in k independent
coordinates xi (``x = [xi; xi']``, 2k states), with the names of its states, inputs
and outputs, the equilibrium (q, lam), the map ``T = dq/dxi`` to all coordinates and
the reduced mass, stiffness and damping matrices (``M xi'' + Cd xi' + K xi = ...``).
:class:`Modes` is its eigen-analysis: eigenvalues, natural frequencies, damping
ratios and mode shapes (in the independent coordinates and in all coordinates).

The linearisation itself is done by the analysis plugin registered as ``modes``
(the built-in one: :mod:`mbplugins.analyses.modes`); :func:`linearize` looks it up
in the plugin registry, so this module never imports a plugin.  Method and
conventions: docs/analyses.md, "Linearisation and modes"; the HDF5 layout of the
``/modes`` group: docs/results.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["LinearModel", "Modes", "linearize", "modal_analysis"]

#: eigenvalues with ``abs(lambda)`` below this fraction of the largest are rigid-body modes
ZERO_TOLERANCE = 1e-6
#: real parts (and damping ratios) below this fraction of the largest ``abs(lambda)`` are
#: the rounding of the eigen-solve (a few eps times ||A||), not growth or damping
ROUNDING_TOLERANCE = 1e-9


@dataclass
class Modes:
    """Eigen-analysis of a :class:`LinearModel`, sorted by natural frequency
    (rigid-body modes first).

    A complex pair of eigenvalues ``-zeta w +- i w sqrt(1 - zeta^2)`` is one
    oscillatory mode (the member with positive imaginary part is listed); each
    real eigenvalue is a mode of its own (kind ``real``: ``zeta = 1`` when it
    decays, ``-1`` when it grows, as MATLAB's ``damp``); eigenvalues with
    ``|lambda| <= zero_tolerance * max|lambda|`` are rigid-body motions (kind
    ``rigid``, frequency 0, damping NaN), one mode per independent direction of
    their eigenvectors' positions.  Shapes are normalised so that their largest
    component is 1.
    """

    eigenvalue: np.ndarray          #: (p,) complex, one per mode
    omega: np.ndarray               #: (p,) natural frequency ``abs(lambda)`` [rad/s]
    damping: np.ndarray             #: (p,) damping ratio ``-Re(lambda) / abs(lambda)``
    kind: list[str]                 #: (p,) "rigid", "oscillatory" or "real"
    shapes: np.ndarray              #: (k, p) complex: mode shapes in the independent coordinates
    shapes_q: np.ndarray            #: (n, p) complex: the same in all coordinates, T @ shapes
    eigenvalues: np.ndarray         #: (2k,) complex: every eigenvalue of A
    independent: list[str] = field(default_factory=list)
    coordinates: list[str] = field(default_factory=list)

    @property
    def frequency(self) -> np.ndarray:
        """Natural frequencies [Hz] (``omega / 2 pi``)."""
        return self.omega / (2 * np.pi)

    @property
    def damped_frequency(self) -> np.ndarray:
        """Damped frequencies [Hz] (``|Im lambda| / 2 pi``; 0 for real modes)."""
        return np.abs(self.eigenvalue.imag) / (2 * np.pi)

    @property
    def unstable(self) -> np.ndarray:
        """Modes that grow: Re lambda > 0 beyond the rounding of the eigen-solve
        (:data:`ROUNDING_TOLERANCE` of the largest ``abs(lambda)``); rigid-body modes
        are not counted."""
        scale = float(np.abs(self.eigenvalues).max()) if self.eigenvalues.size else 0.0
        return ((self.eigenvalue.real > ROUNDING_TOLERANCE * scale)
                & (np.array(self.kind) != "rigid"))

    @property
    def n_rigid(self) -> int:
        return int(sum(k == "rigid" for k in self.kind))

    def __len__(self) -> int:
        return len(self.kind)

    def table(self) -> str:
        """One line per mode: kind, frequencies, damping ratio, eigenvalue and the
        largest components of its shape (what ``mbcore modes`` prints)."""
        scale = float(np.abs(self.eigenvalues).max()) if self.eigenvalues.size else 0.0
        lines = [f"{'mode':>4}  {'kind':<11}  {'f [Hz]':>14}  {'omega [rad/s]':>14}  "
                 f"{'damping':>10}  {'eigenvalue':<30}  shape (largest components)"]
        for j in range(len(self)):
            lam = self.eigenvalue[j]
            re = lam.real if abs(lam.real) > ROUNDING_TOLERANCE * scale else 0.0
            ev = f"{re + 0.0:.9g}" + (f" +- {abs(lam.imag):.9g}j" if lam.imag else "")
            z = self.damping[j]
            zeta = ("-" if np.isnan(z) else
                    f"{(z if abs(z) > ROUNDING_TOLERANCE else 0.0) + 0.0:.6g}")
            lines.append(f"{j + 1:>4}  {self.kind[j]:<11}  {self.frequency[j]:>14.9g}  "
                         f"{self.omega[j]:>14.9g}  {zeta:>10}  {ev:<30}  "
                         f"{self._shape_text(j)}")
        return "\n".join(lines)

    def _shape_text(self, j: int, n: int = 3) -> str:
        names, v = ((self.coordinates, self.shapes_q[:, j]) if self.coordinates
                    else (self.independent, self.shapes[:, j]))
        order = np.argsort(-np.abs(v))[:n]
        parts = []
        for i in order:
            if abs(v[i]) < 1e-12 * max(np.abs(v).max(), 1e-300):
                break
            c = v[i]
            val = f"{c.real:.3g}" if abs(c.imag) <= 1e-9 * abs(c) else f"{c:.3g}"
            parts.append(f"{names[i]} {val}")
        return ", ".join(parts)


def modal_analysis(A: np.ndarray, T: np.ndarray | None = None,
                   zero_tolerance: float = ZERO_TOLERANCE,
                   independent: Sequence[str] = (),
                   coordinates: Sequence[str] = (), positions: int | None = None,
                   rigid: int = 0) -> Modes:
    """The :class:`Modes` of ``x' = A x`` with ``x = [xi; xi']`` (A of size 2k), or
    with ``positions`` given, ``x = [xi; u]`` of ``positions`` coordinates and the
    remaining independent speeds (a nonholonomic system: fewer speeds than
    coordinates); ``T`` (n, k) maps shapes to all coordinates (``delta q = T delta
    xi``).  Shapes are the position parts of the eigenvectors.  ``rigid``: at least
    this many eigenvalues, the smallest in modulus, are rigid (declared cyclic
    coordinates, whose Jordan blocks differences split by more than the tolerance)."""
    import scipy.linalg as sla
    A = np.asarray(A, dtype=float)
    k = A.shape[0] // 2 if positions is None else int(positions)
    if positions is None and A.shape != (2 * k, 2 * k):
        raise ValueError(f"A must be square of even size, got shape {A.shape}")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or not 0 <= k <= A.shape[0]:
        raise ValueError(f"A must be square with at least {k} rows, got shape {A.shape}")
    T = np.eye(k) if T is None else np.asarray(T, dtype=float)
    w, V = sla.eig(A) if A.size else (np.zeros(0, complex), np.zeros((0, 0), complex))
    scale = float(np.abs(w).max()) if w.size else 0.0
    zero = np.abs(w) <= zero_tolerance * scale
    if rigid:
        zero[np.argsort(np.abs(w))[:rigid]] = True
    lam, kinds, shapes = [], [], []
    # a speed that nothing restores (a bicycle's forward speed) has no position part:
    # with independent speeds, the rigid directions are counted on the whole vector
    rigid = V[:k, zero] if positions is None else V[:, zero]
    if rigid.size:           # one rigid mode per independent direction of the shapes
        U, s, _ = np.linalg.svd(rigid.real if np.allclose(rigid.imag, 0)
                                else np.hstack([rigid.real, rigid.imag]),
                                full_matrices=False)
        r = int(np.sum(s > 1e-6 * s[0])) if s.size and s[0] > 0 else 0
        for j in range(r):
            lam.append(0j)
            kinds.append("rigid")
            shapes.append(U[:k, j].astype(complex))
    for j in np.nonzero(~zero)[0]:
        if w[j].imag < 0:            # the conjugate of a listed pair
            continue
        lam.append(complex(w[j]))
        kinds.append("oscillatory" if w[j].imag > 0 else "real")
        shapes.append(V[:k, j])
    lam_a = np.array(lam, dtype=complex)
    omega = np.abs(lam_a)
    with np.errstate(invalid="ignore", divide="ignore"):
        damping = np.where(omega > 0, -lam_a.real / np.where(omega > 0, omega, 1.0), np.nan)
    order = np.lexsort((np.abs(lam_a.imag), omega))
    S = np.array(shapes, dtype=complex).T.reshape(k, len(lam))
    for j in range(S.shape[1]):          # largest component = 1
        i = int(np.argmax(np.abs(S[:, j])))
        if abs(S[i, j]) > 0:
            S[:, j] /= S[i, j]
    S = S[:, order]
    return Modes(eigenvalue=lam_a[order], omega=omega[order], damping=damping[order],
                 kind=[kinds[i] for i in order], shapes=S, shapes_q=T @ S,
                 eigenvalues=w, independent=list(independent),
                 coordinates=list(coordinates))


@dataclass
class LinearModel:
    """``x' = A x + B w``, ``y = C x + D w`` about an equilibrium (module docstring).

    ``states``: ``[xi_1..xi_k, xi_1'..xi_k']`` named after the independent
    coordinates (velocities with the suffix ``d``, e.g. ``crank.phid``);
    ``inputs``/``outputs``: the names given (docs/analyses.md).  ``T`` (n, k) is
    ``dq/dxi`` at the equilibrium ``q``; ``M``, ``K``, ``Cd`` are the reduced mass,
    stiffness and damping matrices: ``M xi'' + Cd xi' + K xi = T^T b w`` (for
    ``linearization: numeric`` ``K`` and ``Cd`` are recovered from A).
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    states: list[str]
    inputs: list[str]
    outputs: list[str]
    independent: list[str]
    coordinates: list[str]
    q: np.ndarray
    lam: np.ndarray
    T: np.ndarray
    M: np.ndarray
    K: np.ndarray
    Cd: np.ndarray
    t: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    #: position states (``x = [xi; u]``; about a steady motion); None: half of A
    positions: int | None = None
    #: eigenvalues that are rigid whatever their size (declared cyclic coordinates)
    rigid: int = 0

    @property
    def k(self) -> int:
        """Number of independent coordinates (degrees of freedom)."""
        return self.A.shape[0] // 2 if self.positions is None else int(self.positions)

    def modes(self, zero_tolerance: float | None = None) -> Modes:
        """Eigen-analysis of A (:func:`modal_analysis`); ``zero_tolerance`` defaults
        to the analysis setting (``info["zero_tolerance"]``) or 1e-6."""
        tol = self.info.get("zero_tolerance", ZERO_TOLERANCE) if zero_tolerance is None \
            else zero_tolerance
        return modal_analysis(self.A, self.T, float(tol), self.independent, self.coordinates,
                              self.positions, self.rigid)

    def response(self, omega: float | Sequence[float]) -> np.ndarray:
        """Frequency response ``C (i omega I - A)^-1 B + D``: (len(omega), outputs,
        inputs) complex (omega in rad/s)."""
        om = np.atleast_1d(np.asarray(omega, dtype=float))
        I = np.eye(self.A.shape[0])
        return np.array([self.C @ np.linalg.solve(1j * w * I - self.A, self.B) + self.D
                         for w in om])

    def index(self, kind: str, name: str) -> int:
        """Position of ``name`` among the ``states``, ``inputs`` or ``outputs``."""
        names = {"states": self.states, "inputs": self.inputs, "outputs": self.outputs}[kind]
        try:
            return names.index(name)
        except ValueError:
            raise KeyError(f"no {kind[:-1]} {name!r} (known: {', '.join(names)})") from None

    # -- storage (the /modes group, docs/results.md) --------------------------------
    _ARRAYS = ("A", "B", "C", "D", "q", "lam", "T", "M", "K", "Cd")
    _NAMES = ("states", "inputs", "outputs", "independent", "coordinates")

    def to_group(self, modes: Modes | None = None) -> tuple[dict, dict]:
        """``(datasets, attributes)`` of the ``/modes`` group: the model and its
        modes (computed if not given)."""
        m = self.modes() if modes is None else modes
        data: dict[str, Any] = {a: np.asarray(getattr(self, a), dtype=float)
                                for a in self._ARRAYS}
        data.update({n: list(getattr(self, n)) for n in self._NAMES})
        data.update(eigenvalues=m.eigenvalues, eigenvalue=m.eigenvalue, omega=m.omega,
                    frequency=m.frequency, damped_frequency=m.damped_frequency,
                    damping=m.damping, kind=list(m.kind), shapes=m.shapes,
                    shapes_q=m.shapes_q)
        attrs = {"t": float(self.t), "k": self.k, "n_modes": len(m), "n_rigid": m.n_rigid,
                 **({} if self.positions is None else {"positions": int(self.positions)}),
                 "rigid": int(self.rigid),
                 **{key: v for key, v in self.info.items()
                    if isinstance(v, (str, int, float, bool))}}
        return data, attrs

    @classmethod
    def from_group(cls, data: Mapping[str, Any], attrs: Mapping[str, Any]) -> "LinearModel":
        """The model stored in a ``/modes`` group (``Result.group("modes")``)."""
        kw = {a: np.asarray(data[a], dtype=float) for a in cls._ARRAYS}
        kw.update({n: [str(x) for x in data[n]] for n in cls._NAMES})
        info = {k: v for k, v in attrs.items()
                if k not in ("t", "k", "n_modes", "n_rigid", "positions", "rigid")}
        pos = attrs.get("positions")
        return cls(t=float(attrs.get("t", 0.0)), info=info,
                   positions=None if pos is None else int(pos),
                   rigid=int(attrs.get("rigid", 0)), **kw)

    @classmethod
    def from_result(cls, result) -> "LinearModel":
        """The model of a ``modes`` result (HDF5 :class:`mbcore.Result` or in memory)."""
        g = result.group("modes")
        return cls.from_group(g, g.attrs)


def linearize(model, *, inputs: Sequence[str] = (), outputs: Sequence[str] = (),
              settings: Mapping[str, Any] | None = None, kernels: str | None = None,
              plugins=None) -> LinearModel:
    """Linearise ``model`` (a :class:`mbcore.Model` or a compiled
    :class:`mbcore.System`) about its static equilibrium with the analysis plugin
    ``modes`` (settings: docs/analyses.md, "Linearisation and modes"; the model's
    own settings that analysis knows are used unless ``settings`` overrides
    them).  ``inputs``/``outputs``: names, e.g. ``["crank.torque"]``,
    ``["crank.phi", "spring.force"]``.  Returns the :class:`LinearModel`; call
    ``.modes()`` for the eigen-analysis."""
    from ..errors import ModelError
    from ..plugins.manager import get_plugin_manager
    pm = plugins or get_plugin_manager()
    reg = pm.registry
    if not reg.has("analysis", "modes"):
        raise ModelError("settings.analysis", reg.unknown_message("analysis", "modes"))
    acls = reg.get("analysis", "modes")
    if hasattr(model, "jacobian_dense"):          # already compiled
        system, own = model, dict(getattr(model.model, "settings", {}) or {})
    else:
        own = dict(model.settings)
        system = None
    known = set(getattr(acls, "settings_schema", {})) | {"kernels"}
    merged = {k: v for k, v in own.items() if k in known}
    merged.update(settings or {})
    if inputs:
        merged["inputs"] = list(inputs)
    if outputs:
        merged["outputs"] = list(outputs)
    if system is None:
        system = model.compile(kernels=kernels or merged.get("kernels"), plugins=pm)
    job = acls(system, merged)
    job.run(lambda t, data: None, lambda t, kind, message: None)
    return job.linear_model
