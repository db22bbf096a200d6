"""Linearisation about a steady motion (``modes`` with ``about: motion``;
mbplugins.analyses.linearize_motion): nonholonomic systems, independent speeds,
cyclic coordinates.

Checked against the rolling coin's closed-form lean frequency (Neimark & Fufaev
(1972), Ch. II: ``lambda^2 = -(C (C + m a^2) Omega^2 / A - m g a) / (A + m a^2)``), against
the equilibrium linearisation at rest (the same eigenvalues and the same frequency
response, in other coordinates), and by its refusals (a motion that is not steady,
a coordinate declared cyclic that is not, velocity rows about an equilibrium).
"""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.analysis.linear import LinearModel
from mbcore.errors import AnalysisError, ModelError
from test_rolling_contact import A_DIAM, C_AXIAL, G0, M_DISC, R_DISC, _rolling_coin

CYCLIC = ["disc.x", "disc.y", "disc.rz", "disc.ry"]


def _coin_lambda(spin):
    f2 = ((C_AXIAL + M_DISC * R_DISC ** 2) * C_AXIAL * spin ** 2 / A_DIAM
          - M_DISC * G0 * R_DISC) / (A_DIAM + M_DISC * R_DISC ** 2)
    return np.sqrt(complex(-f2))          # the root with Im >= 0 / Re >= 0


@pytest.mark.parametrize("spin", [8.0, 2.0])
def test_rolling_coin_eigenvalues_match_the_closed_form(spin):
    """Above the critical spin the lean oscillates (a pair on the imaginary axis),
    below it the coin falls (a real pair): within 1e-8 relative of the closed form
    (observed 9e-14); the declared cyclic coordinates give rigid modes."""
    lm = mbcore.linearize(_rolling_coin(spin, lean=0.0),
                          settings={"about": "motion", "cyclic": CYCLIC})
    assert lm.k == 5 and lm.A.shape == (8, 8)           # 5 increments, 3 speeds
    assert lm.states[:5] == ["disc.x", "disc.y", "disc.rx", "disc.ry", "disc.rz"]
    modes = lm.modes()
    moving = [z for z, kd in zip(modes.eigenvalue, modes.kind) if kd != "rigid"]
    ref = _coin_lambda(spin)
    assert len(moving) == (1 if spin > 3 else 2)
    for z in moving:
        target = ref if (z.imag > 0 or z.real > 0) else -ref
        assert abs(z - target) < 1e-8 * abs(ref), (z, ref)
    assert modes.n_rigid >= 1
    assert bool(np.any(modes.unstable)) == (spin < 3)


def _pendulum(dims):
    """A body hanging from a pin (planar) or a ball joint (spatial), at rest at the
    bottom: an equilibrium, and a steady motion with zero velocities."""
    m = Model("pendulum")
    if dims == 3:
        m.set_dimensions(3)
        m.set_gravity(0.0, 0.0, -G0)
        m.add_body("bob", mass=2.0, inertia=[0.1, 0.2, 0.15], position=[0.0, 0.0, -0.8])
        m.add_joint("spherical", "pivot", body_i="ground", body_j="bob",
                    point_i=[0, 0, 0], point_j=[0, 0, 0.8])
    else:
        m.set_gravity(0.0, -G0)
        m.add_body("bob", mass=2.0, inertia=0.1, position=[0.0, -0.8])
        m.add_joint("revolute", "pivot", body_i="ground", body_j="bob", point_i=[0, 0],
                    point_j=[0, 0.8])
    return m


@pytest.mark.parametrize("dims", [2, 3])
def test_at_rest_it_is_the_equilibrium_linearisation(dims):
    """With zero velocities the steady-motion linearisation (global increments) and
    the equilibrium one (partitioned coordinates) are the same linear system in
    other coordinates: equal eigenvalues and frequency responses (observed 3e-15
    relative; bound 1e-8)."""
    inputs = ["bob.fx"]
    outputs = ["bob.x", "bob.xd"]
    eq = mbcore.linearize(_pendulum(dims), inputs=inputs, outputs=outputs,
                          settings={"equilibrium": "given"})
    mo = mbcore.linearize(_pendulum(dims), inputs=inputs, outputs=outputs,
                          settings={"about": "motion"})
    e1 = np.sort_complex(np.linalg.eigvals(eq.A))
    e2 = np.sort_complex(np.linalg.eigvals(mo.A))
    scale = np.abs(e1).max()
    big1 = e1[np.abs(e1) > 1e-6 * scale]
    big2 = e2[np.abs(e2) > 1e-6 * scale]
    np.testing.assert_allclose(np.sort_complex(big2), np.sort_complex(big1),
                               rtol=0, atol=1e-8 * scale)
    for w in (0.7, 3.1):
        np.testing.assert_allclose(mo.response(w), eq.response(w), rtol=1e-8, atol=1e-12)


def test_a_motion_that_is_not_steady_is_refused():
    with pytest.raises(AnalysisError, match="not a steady motion"):
        mbcore.linearize(_rolling_coin(8.0, lean=0.2), settings={"about": "motion"})


def test_a_coordinate_that_is_not_cyclic_is_refused():
    """The ball-joint pendulum at rest turns freely about the vertical (bob.rz is
    cyclic), but its swing angle is not: it is not a direction of the
    zero-eigenvalue subspace of A.  (Of a rolling coin, the lean is: leaned steady
    turns are a family of steady motions.)"""
    lm = mbcore.linearize(_pendulum(3), settings={"about": "motion", "cyclic": ["bob.rz"]})
    assert lm.rigid == 1
    with pytest.raises(ModelError, match="settings.cyclic.*'bob.rx' is not cyclic"):
        mbcore.linearize(_pendulum(3), settings={"about": "motion",
                                                 "cyclic": ["bob.rz", "bob.rx"]})


def test_unknown_names_are_named():
    with pytest.raises(ModelError, match=r"settings.cyclic\[0\].*did you mean 'disc.rz'"):
        mbcore.linearize(_rolling_coin(8.0, lean=0.0),
                         settings={"about": "motion", "cyclic": ["disc.rzz"]})


def test_velocity_rows_about_an_equilibrium_are_refused_by_name():
    with pytest.raises(ModelError, match=r"wheel\.longitudinal.*about: motion"):
        mbcore.linearize(_rolling_coin(8.0, lean=0.0))
    with pytest.raises(ModelError, match="need about: motion"):
        mbcore.linearize(_pendulum(2), settings={"cyclic": ["bob.x"]})


def test_result_file_round_trip(tmp_path):
    """The /modes group keeps the position count and the rigid count."""
    out = tmp_path / "coin.h5"
    mbcore.run(_rolling_coin(8.0, lean=0.0), analysis="modes", output=out,
               settings={"about": "motion", "cyclic": CYCLIC})
    with mbcore.Result(out) as res:
        lm = LinearModel.from_result(res)
    assert lm.positions == 5 and lm.rigid == 4 and lm.info["about"] == "motion"
    z = [e for e, kd in zip(lm.modes().eigenvalue, lm.modes().kind) if kd != "rigid"]
    assert abs(z[0] - _coin_lambda(8.0)) < 1e-8 * abs(_coin_lambda(8.0))


def test_cli_modes_about_motion(tmp_path):
    model = tmp_path / "coin.yaml"
    _rolling_coin(8.0, lean=0.0).save(model)
    cp = subprocess.run([sys.executable, "-m", "mbcore.cli", "modes", str(model), "--about",
                         "motion", "--cyclic", ",".join(CYCLIC)], capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "steady motion" in cp.stdout and "independent speeds" in cp.stdout
    lam = _coin_lambda(8.0)
    assert f"{abs(lam.imag):.6f}"[:8] in cp.stdout
