"""Velocity-level (nonholonomic) constraints: speed along a body-fixed direction
(spec/planar.md D6; 004 Prob 4.24(b))."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model


def sled(v0=2.0, omega=0.5, phi0=0.3):
    m = Model("knife edge")
    m.add_body("sled", mass=1.5, inertia=0.2, position=(1.0, -0.5), angle=phi0,
               velocity=(v0 * np.cos(phi0), v0 * np.sin(phi0)), angular_velocity=omega)
    m.add_driver("body_speed_driver", "no_side_slip", body="sled", direction=(0, 1),
                 point=(0.3, 0.0))
    m.add_driver("body_speed_driver", "forward", body="sled", direction=(1, 0),
                 function=v0)
    m.add_driver("absolute_driver", "steer", body="sled", coordinate="phi",
                 function=f"{phi0} + {omega}*t")
    return m


@pytest.mark.parametrize("formulation", ["di", "cs", "projection"])
def test_knife_edge_drives_a_circle(formulation, backend):
    """With no side slip at P (a point on the body x axis), forward speed v0 and
    a constant turning rate omega, the body origin moves on a circle of radius
    v0/omega... P moves with speed along the body axis only."""
    v0, om, phi0 = 2.0, 0.5, 0.3
    res = mbcore.run(sled(v0, om, phi0), kernels=backend,
                     settings={"analysis": "dynamic", "t_end": 4.0, "rtol": 1e-10,
                               "atol": 1e-12, "formulation": formulation})
    t = res.t
    phi = phi0 + om * t
    # origin velocity: v0 along the axis plus the side speed that keeps P from slipping
    # (P at s = 0.3 on the axis: its side velocity = side_origin + 0.3 omega = 0)
    R = v0 / om
    side = -0.3 * om
    xc = 1.0 - R * np.sin(phi0) - side / om * np.cos(phi0)
    yc = -0.5 + R * np.cos(phi0) - side / om * np.sin(phi0)
    r = np.hypot(res["q/sled.x"] - xc, res["q/sled.y"] - yc)
    np.testing.assert_allclose(r, np.hypot(R, side / om), atol=1e-7)
    np.testing.assert_allclose(res["q/sled.phi"], phi, atol=1e-9)
    # the side-slip condition holds at P at every output
    c, s = np.cos(phi), np.sin(phi)
    vP_side = (-s * res["qd/sled.x"] + c * res["qd/sled.y"]) + 0.3 * res["qd/sled.phi"]
    np.testing.assert_allclose(vP_side, 0.0, atol=1e-8)


def test_nonholonomic_gamma_is_the_derivative_of_the_velocity_equation():
    s = sled().compile()
    rng = np.random.default_rng(0)
    h = 1e-6
    for _ in range(5):
        q, qd, qdd, t = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3), 0.7
        J = s.jacobian_dense(q, t)
        r = lambda tau: s.jacobian_dense(q + tau * qd + 0.5 * tau * tau * qdd, t + tau) @ \
            (qd + tau * qdd) - s.nu(q + tau * qd, t + tau)
        d = (r(h) - r(-h)) / (2 * h)
        np.testing.assert_allclose(J @ qdd - s.gamma(q, qd, t), d, atol=1e-6)


def test_kinematic_analysis_and_cp_refuse_nonholonomic():
    with pytest.raises(mbcore.ModelError, match="velocity-level.*no_side_slip.*dynamic"):
        mbcore.run(sled(), analysis="kinematic")
    with pytest.raises(mbcore.ModelError, match="coordinate partitioning needs position-level"):
        mbcore.run(sled(), settings={"analysis": "dynamic", "formulation": "cp"})
