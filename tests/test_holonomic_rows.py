"""One constraint element may mix position-level (holonomic) and velocity-level
(nonholonomic) rows: ``holonomic`` as a tuple of one boolean per equation
(Nikravesh (1988), Prob. 4.24(b) for the velocity-level rows).  Checked on a disc
rolling on the line y = 0: its contact height ``y - R = 0`` a position equation, its
no-slip condition ``xd + R thetad = 0`` a velocity equation — against the same
rolling written as two position equations (``x + R theta = c`` integrates it) and
against the closed form of a disc rolling down a slope (gravity with a component
along the line: ``xdd = g_x m / (m + J / R^2)``)."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model, PluginError, hookimpl
from mbcore.elements import ConstraintType
from mbcore.plugins.contract import all_rows_holonomic, holonomic_rows
from mbcore.elements.schema import Param
from mbcore.plugins import PluginManager

R, MASS, J, GX, V0 = 0.3, 2.0, 0.09, 1.5, 0.7


class _Rolling(ConstraintType):
    description = "disc of radius R on the line y = 0 (tests)"
    equations = 2
    bodies = ("body",)
    params = {"body": Param("body", "the disc"),
              "radius": Param("number", "R", positive=True),
              "c": Param("number", "x + R theta at rest", default=0.0)}
    n_par = 2
    labels = ("height", "roll")

    def pack(self, spec, ctx):
        return [spec["radius"], spec["c"]], []

    def jacobian(self, par, qb, t, f):
        J_ = np.zeros((par.shape[0], 2, 1, 3))
        J_[:, 0, 0, 1] = 1.0
        J_[:, 1, 0, 0] = 1.0
        J_[:, 1, 0, 2] = par[:, 0]
        return J_

    def nu(self, par, qb, t, f):
        return np.zeros((par.shape[0], 2))

    def gamma(self, par, qb, qdb, t, f):
        return np.zeros((par.shape[0], 2))


class MixedRolling(_Rolling):
    """Height at position level, no slip at velocity level."""
    name = "test_mixed_rolling"
    holonomic = (True, False)

    def phi(self, par, qb, t, f):
        out = np.zeros((par.shape[0], 2))
        out[:, 0] = qb[:, 0, 1] - par[:, 0]
        return out


class HolonomicRolling(_Rolling):
    """Both at position level: ``x + R theta = c``."""
    name = "test_holonomic_rolling"

    def phi(self, par, qb, t, f):
        return np.stack([qb[:, 0, 1] - par[:, 0],
                         qb[:, 0, 0] + par[:, 0] * qb[:, 0, 2] - par[:, 1]], axis=1)


class Plugin:
    __version__ = "0.1"

    @hookimpl
    def mbcore_constraint_types(self):
        return [MixedRolling, HolonomicRolling]


def _plugins():
    pm = PluginManager()
    pm.register(Plugin(), name="rolling_tests")
    return pm


def _model(pm, ctype):
    m = Model("rolling disc")
    m.set_gravity(GX, -9.81)
    m.add_body("disc", mass=MASS, inertia=J, position=(0.0, R), velocity=(V0, 0.0),
               angular_velocity=-V0 / R)
    m.add_joint(ctype, "contact", body="disc", radius=R)
    return m


def test_the_rows_carry_their_own_kind():
    assert holonomic_rows(MixedRolling) == (True, False)
    assert not all_rows_holonomic(MixedRolling)
    assert holonomic_rows(HolonomicRolling) == (True, True)
    pm = _plugins()
    s = _model(pm, "test_mixed_rolling").compile(plugins=pm)
    assert s.holonomic.tolist() == [True, False] and not s.all_holonomic
    assert s.constraint_names == ["contact.height", "contact.roll"]


def test_a_bad_declaration_is_named():
    class Wrong(MixedRolling):
        name = "test_wrong_rows"
        holonomic = (True,)
    with pytest.raises(PluginError, match="test_wrong_rows.*tuple of 2 booleans"):
        holonomic_rows(Wrong)


@pytest.mark.parametrize("formulation", ["di", "cs", "projection"])
def test_rolling_down_a_slope(formulation):
    """The mixed element, the all-holonomic one and the closed form agree: x within
    1e-8 m over 2 s at rtol 1e-10 (observed 1.6e-15), the height held (the position
    row) and the no-slip row at velocity level (observed residual 4e-14); the
    multipliers are the weight and the friction force (observed 3e-13 relative)."""
    pm = _plugins()
    st = {"t_end": 2.0, "output_step": 0.05, "rtol": 1e-10, "atol": 1e-12,
          "formulation": formulation}
    mixed = mbcore.run(_model(pm, "test_mixed_rolling"), analysis="dynamic",
                       settings=st, plugins=pm)
    holo = mbcore.run(_model(pm, "test_holonomic_rolling"), analysis="dynamic",
                      settings=st, plugins=pm)
    t = np.asarray(mixed.t)
    a = GX * MASS / (MASS + J / R ** 2)
    x = np.asarray(mixed["q/disc.x"])
    np.testing.assert_allclose(x, V0 * t + 0.5 * a * t * t, rtol=0, atol=1e-8)
    np.testing.assert_allclose(x, np.asarray(holo["q/disc.x"]), rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.asarray(mixed["q/disc.y"]), R, rtol=0, atol=1e-8)
    xd, thd = np.asarray(mixed["qd/disc.x"]), np.asarray(mixed["qd/disc.phi"])
    assert np.max(np.abs(xd + R * thd)) < 1e-8
    # the normal force carries the weight; the rolling row the friction force
    lam = np.asarray(mixed["lam"])
    np.testing.assert_allclose(np.abs(lam[:, 0]), MASS * 9.81, rtol=1e-8)
    np.testing.assert_allclose(np.abs(lam[:, 1]), MASS * GX - MASS * a, rtol=1e-8)


def test_the_kinematic_analysis_names_the_velocity_row():
    pm = _plugins()
    with pytest.raises(mbcore.ModelError, match="contact.roll"):
        mbcore.run(_model(pm, "test_mixed_rolling"), analysis="kinematic",
                   settings={"t_end": 0.1, "output_step": 0.1}, plugins=pm)
