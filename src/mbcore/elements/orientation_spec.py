"""Orientation of a spatial body in a model file (Nikravesh (1988), §6.1.4, App. A,
App. B): the forms a model may write under ``orientation``, checked and turned into
unit Euler parameters, and back (docs/model-format.md, "Spatial bodies")."""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from . import schema as S
from .angle_sequences import SEQUENCES, angles_to_p, parse_sequence
from .rotations import (A_from_points, PointsError, axis_angle_to_p, bryant123_to_p,
                        euler313_to_p, normalize, p_from_A)
from ..errors import ModelError
from .units import looks_like_quantity, unit_system

__all__ = ["orientation_from_spec", "orientation_to_spec"]

# form key -> the other keys allowed with it
_FORMS: dict[str, tuple[str, ...]] = {
    "euler_parameters": (),
    "axis": ("angle", "unit"),
    "euler_313": ("unit",),
    "bryant_123": ("unit",),
    "angles": ("sequence", "unit"),
    "matrix": (),
    "points": (),
}
_ALL_KEYS = tuple(_FORMS) + ("angle", "unit", "sequence")
_UNIT_TOL = 1e-6          # |‖p‖ − 1| accepted (then normalised) / |AᵀA − I| accepted
_NOTE_TOL = 1e-12         # normalisation worth a note


def _unit_factor(spec: Any, path: str) -> float:
    """Radians per unit of the required ``unit`` key ("deg" or "rad")."""
    upath = f"{path}.unit"
    if "unit" not in spec:
        raise ModelError(upath, "required: deg or rad")
    u = spec["unit"]
    if u == "deg":
        return math.pi / 180.0
    if u == "rad":
        return 1.0
    raise ModelError(upath, f"expected deg or rad, got {S.describe(u)}")


def _radians(value: Any, path: str, spec: Any, n: int = 0) -> np.ndarray | float:
    """Angles in radians: numbers in the spec's ``unit`` (deg or rad), or quantities
    with their own unit (``"30 deg"``, ``"0.25 rev"``; then ``unit`` may be left out).
    ``n`` = 0: one angle at ``path``; else a list of ``n`` at ``path[k]``."""
    def one(v: Any, where: str) -> float:
        if looks_like_quantity(v) and not S.is_number_text(v):
            return unit_system(None).convert(v, "angle", where)
        return S.number(v, where) * _unit_factor(spec, path.rsplit(".", 1)[0])
    if n == 0:
        return one(value, path)
    if isinstance(value, (list, tuple)) and any(map(looks_like_quantity, value)):
        if len(value) != n:
            raise ModelError(path, f"expected {n} angles, got {len(value)}")
        return np.array([one(v, f"{path}[{k}]") for k, v in enumerate(value)])
    return np.array(S.vector(value, path, n)) * _unit_factor(spec, path.rsplit(".", 1)[0])


def _euler_parameters(value: Any, path: str, notes: list[str] | None) -> np.ndarray:
    p = np.array(S.vector(value, path, 4), dtype=float)
    nrm = float(np.linalg.norm(p))
    if not abs(nrm - 1.0) <= _UNIT_TOL:
        raise ModelError(path, f"Euler parameters are far from unit length (norm {nrm:.6g}): "
                               f"accepted within {_UNIT_TOL:g} of 1, then normalised")
    if abs(nrm - 1.0) > _NOTE_TOL and notes is not None:
        notes.append(f"{path}: Euler parameters normalised (norm was {nrm:.12g})")
    return p / nrm


def _matrix(value: Any, path: str) -> np.ndarray:
    rows = S.sequence(value, path)
    if len(rows) != 3:
        raise ModelError(path, f"expected 3 rows of 3 numbers, got {len(rows)} rows")
    M = np.array([S.vector(r, f"{path}[{k}]", 3) for k, r in enumerate(rows)], dtype=float)
    err = float(np.abs(M.T @ M - np.eye(3)).max())
    det = float(np.linalg.det(M))
    if det < 0.0:
        also = f"; also not orthonormal (max |AᵀA − I| = {err:.3g})" if err > _UNIT_TOL else ""
        raise ModelError(path, f"a reflection (det = {det:.6g}), not a rotation: the columns "
                               f"must form a right-handed frame{also}")
    if err > _UNIT_TOL or abs(det - 1.0) > _UNIT_TOL:
        raise ModelError(path, f"not orthonormal with det +1 (max |AᵀA − I| = {err:.3g}, "
                               f"det = {det:.9g}; tolerance {_UNIT_TOL:g})")
    return p_from_A(M)


def _points(value: Any, path: str) -> np.ndarray:
    keys = ("origin", "x_axis_point", "xy_plane_point")
    S.mapping(value, path)
    S.check_keys(value, keys, path, required=keys)
    r, rA, rB = (np.array(S.vector(value[k], f"{path}.{k}", 3)) for k in keys)
    try:
        return p_from_A(A_from_points(r, rA, rB))
    except PointsError as exc:
        raise ModelError(f"{path}.{exc.which}", str(exc)) from None


def orientation_from_spec(value: Any, path: str, notes: list[str] | None = None) -> np.ndarray:
    """Unit Euler parameters (shape (4,), e0 ≥ 0 except as given) from a model-file
    ``orientation`` entry (Nikravesh (1988), §6.1.4, App. A-B).  Forms: 4 numbers or ``{euler_parameters:
    [...]}`` (normalised if within 1e-6 of unit length, with a note); ``{axis, angle,
    unit}``; ``{euler_313: [ψ, θ, σ], unit}``; ``{bryant_123: [φ1, φ2, φ3], unit}``;
    ``{angles: [θ1, θ2, θ3], sequence, unit}`` (any of the twelve sequences,
    :mod:`mbcore.elements.angle_sequences`, e.g. ``sequence: 3-2-1``);
    ``{matrix: 3×3}`` (columns = body axes, orthonormal to 1e-6, det +1); ``{points:
    {origin, x_axis_point, xy_plane_point}}``.  ``unit`` is "deg" or "rad" and required
    for angle forms.  Errors are :class:`ModelError` naming the key path."""
    if not isinstance(value, Mapping):
        if isinstance(value, (list, tuple, np.ndarray)):
            return _euler_parameters(value, path, notes)
        raise ModelError(path, f"expected 4 Euler parameters or a mapping with one of "
                               f"{', '.join(_FORMS)}, got {S.describe(value)}")
    S.mapping(value, path)
    S.check_keys(value, _ALL_KEYS, path)
    forms = [k for k in value if k in _FORMS]
    if not forms:
        raise ModelError(path, f"expected one of the keys {', '.join(_FORMS)}")
    if len(forms) > 1:
        raise ModelError(f"{path}.{forms[1]}", f"give only one orientation form, got both "
                                               f"'{forms[0]}' and '{forms[1]}'")
    form = forms[0]
    for k in value:
        if k != form and k not in _FORMS[form]:
            allowed = ", ".join(_FORMS[form]) or "nothing else"
            raise ModelError(f"{path}.{k}", f"not used with '{form}' (allowed with it: "
                                            f"{allowed})")
    fpath = f"{path}.{form}"
    if form == "euler_parameters":
        p = _euler_parameters(value[form], fpath, notes)
    elif form == "axis":
        axis = np.array(S.vector(value["axis"], fpath, 3))
        if "angle" not in value:
            raise ModelError(f"{path}.angle", "required with 'axis' (and unit: deg or rad)")
        angle = _radians(value["angle"], f"{path}.angle", value)
        big = float(np.abs(axis).max())
        if big > 0.0:                 # [1e308, 1e308, 0]: a norm that overflows
            axis = axis / big
        n = float(np.linalg.norm(axis))
        if not n > 1e-12 * max(1.0, float(np.abs(axis).max())):
            raise ModelError(fpath, f"the rotation axis must have non-zero length, got "
                                    f"{S.format_vector(axis)}")
        p = axis_angle_to_p(axis / n, angle)
    elif form == "euler_313":
        p = euler313_to_p(_radians(value[form], fpath, value, 3))
    elif form == "bryant_123":
        p = bryant123_to_p(_radians(value[form], fpath, value, 3))
    elif form == "angles":
        spath = f"{path}.sequence"
        if "sequence" not in value:
            raise ModelError(spath, f"required with 'angles': one of "
                                    f"{', '.join('-'.join(x) for x in SEQUENCES)}")
        try:
            seq = S.string(value["sequence"], spath)
            parse_sequence(seq)
        except ValueError as exc:
            raise ModelError(spath, str(exc)) from None
        p = angles_to_p(_radians(value[form], fpath, value, 3), seq)
    elif form == "matrix":
        p = _matrix(value[form], fpath)
    else:
        p = _points(value[form], fpath)
    return normalize(np.asarray(p, dtype=float))


def orientation_to_spec(p: ArrayLike) -> dict[str, list[float]]:
    """The model-file form ``{"euler_parameters": [e0, e1, e2, e3]}`` (plain floats)."""
    p = np.asarray(p, dtype=float)
    if p.shape != (4,):
        raise ValueError(f"expected 4 Euler parameters, got shape {p.shape}")
    return {"euler_parameters": [float(x) for x in p]}
