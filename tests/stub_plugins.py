"""A minimal plugin set for testing the core without ``mbplugins`` (issue 16 item 4).

Every type is plain vectorised Python written against the public contracts only
(:mod:`mbcore.elements`, :mod:`mbcore.analysis`, :mod:`mbcore.results.reporting`):

* ``stub_pin`` — a planar revolute joint: point_i on body_i coincides with point_j
  on body_j (spec/planar.md C3);
* ``stub_angle_driver`` — ``phi - c(t) = 0`` for one body (a time function);
* ``stub_spring`` — a linear spring between two body points (conservative);
* ``stub_kinematic`` — position analysis: Newton on ``Phi(q, t) = 0`` at each output
  time, velocities from ``Phi_q qd = nu``; records ``q`` and ``qd``;
* ``memory`` — a reporter keeping the rows in lists, returning a
  :class:`mbcore.results.result.MemoryResult` (the runner asks for a reporter of that name).

``MBCORE_TEST_STUB_PLUGINS=1`` makes tests/conftest.py block ``mbplugins`` and load
this module instead (``MBCORE_PLUGINS=stub_plugins:PLUGIN``, ``MBCORE_DISABLE_PLUGINS=
mbplugins``); tests marked ``core`` must pass that way (tests/test_core_independence.py).
"""
from __future__ import annotations

import numpy as np

from mbcore import hookimpl
from mbcore.analysis import Analysis
from mbcore.elements import ConstraintType, ForceType, perp, rot
from mbcore.errors import ConvergenceError
from mbcore.results.reporting import Channel, Reporter
from mbcore.results.result import MemoryResult
from mbcore.elements.schema import Param

__version__ = "0.0.1"
mbcore_contract = "1.0"


class StubPin(ConstraintType):
    name = "stub_pin"
    description = "stub revolute joint (tests)"
    equations = 2
    params = {"body_i": Param("body"), "body_j": Param("body"),
              "point_i": Param("vec2", on="body_i"), "point_j": Param("vec2", on="body_j")}
    n_par = 4
    labels = ("x", "y")

    def pack(self, spec, ctx):
        return [*spec["point_i"], *spec["point_j"]], []

    def phi(self, par, qb, t, f):
        return (qb[:, 0, :2] + rot(qb[:, 0, 2], par[:, :2])
                - qb[:, 1, :2] - rot(qb[:, 1, 2], par[:, 2:]))

    def jacobian(self, par, qb, t, f):
        J = np.zeros((par.shape[0], 2, 2, 3))
        J[:, :, 0, :2] = np.eye(2)
        J[:, :, 1, :2] = -np.eye(2)
        J[:, :, 0, 2] = perp(rot(qb[:, 0, 2], par[:, :2]))
        J[:, :, 1, 2] = -perp(rot(qb[:, 1, 2], par[:, 2:]))
        return J

    def gamma(self, par, qb, qdb, t, f):
        return (qdb[:, 0, 2:3] ** 2 * rot(qb[:, 0, 2], par[:, :2])
                - qdb[:, 1, 2:3] ** 2 * rot(qb[:, 1, 2], par[:, 2:]))


class StubAngleDriver(ConstraintType):
    name = "stub_angle_driver"
    description = "stub angle driver phi = c(t) (tests)"
    category = "driver"
    equations = 1
    bodies = ("body",)
    params = {"body": Param("body"), "function": Param("function")}
    n_fun = 1
    labels = ("phi",)

    def pack(self, spec, ctx):
        return [], [spec["function"]]

    def phi(self, par, qb, t, f):
        return qb[:, 0, 2:3] - f[:, 0, 0:1]

    def jacobian(self, par, qb, t, f):
        J = np.zeros((par.shape[0], 1, 1, 3))
        J[:, 0, 0, 2] = 1.0
        return J

    def nu(self, par, qb, t, f):
        return f[:, 0, 1:2].copy()

    def gamma(self, par, qb, qdb, t, f):
        return f[:, 0, 2:3].copy()


class StubSpring(ForceType):
    name = "stub_spring"
    description = "stub linear spring between two body points (tests)"
    bodies = ("body_i", "body_j")
    params = {"body_i": Param("body"), "body_j": Param("body"),
              "point_i": Param("vec2", on="body_i"), "point_j": Param("vec2", on="body_j"),
              "stiffness": Param("number"), "free_length": Param("number", default=0.0)}
    n_par = 6
    conservative = True

    def pack(self, spec, ctx):
        return [*spec["point_i"], *spec["point_j"], spec["stiffness"],
                spec["free_length"]], []

    def _geometry(self, par, qb):
        si, sj = rot(qb[:, 0, 2], par[:, 0:2]), rot(qb[:, 1, 2], par[:, 2:4])
        d = qb[:, 1, :2] + sj - qb[:, 0, :2] - si
        return si, sj, d, np.linalg.norm(d, axis=1)

    def force(self, par, qb, qdb, t, f):
        si, sj, d, length = self._geometry(par, qb)
        fi = (par[:, 4] * (length - par[:, 5]) / length)[:, None] * d   # on body i
        out = np.empty(qb.shape)
        out[:, 0, :2], out[:, 1, :2] = fi, -fi
        out[:, 0, 2] = si[:, 0] * fi[:, 1] - si[:, 1] * fi[:, 0]
        out[:, 1, 2] = -(sj[:, 0] * fi[:, 1] - sj[:, 1] * fi[:, 0])
        return out

    def energy(self, par, qb, t, f):
        return 0.5 * par[:, 4] * (self._geometry(par, qb)[3] - par[:, 5]) ** 2


class StubKinematic(Analysis):
    name = "stub_kinematic"
    description = "stub position/velocity analysis (tests)"
    settings_schema = {"t_end": Param("number"), "step": Param("number")}

    def channels(self):
        s = self.system
        return [Channel("q", list(s.coordinate_names)), Channel("qd", list(s.coordinate_names))]

    def run(self, record, event, progress=None):
        s = self.system
        q = s.initial_state().q
        n_out = int(round(self.settings["t_end"] / self.settings["step"])) + 1
        for t in np.linspace(0.0, self.settings["t_end"], n_out):
            for _ in range(50):
                phi = s.phi(q, t)
                if np.max(np.abs(phi), initial=0.0) < 1e-12:
                    break
                q -= np.linalg.lstsq(s.jacobian_dense(q, t), phi, rcond=None)[0]
            else:
                raise ConvergenceError("stub_kinematic: Newton did not converge", t)
            qd = np.linalg.lstsq(s.jacobian_dense(q, t), s.nu(q, t), rcond=None)[0]
            record(float(t), {"q": q.copy(), "qd": qd})
        self.stats["outputs"] = n_out


class StubMemory(Reporter):
    name = "memory"
    description = "stub in-memory reporter (tests)"

    def start(self, info):
        self._info, self._t, self._rows = info, [], {c.name: [] for c in info.channels}
        self._status, self._reason, self._stats, self._events = "running", "", {}, []

    def record(self, t, data):
        self._t.append(float(t))
        for name, rows in self._rows.items():
            rows.append(np.array(data[name], dtype=float))

    def event(self, t, kind, message):
        self._events.append((float(t), str(kind), str(message)))

    def finish(self, status, reason="", stats=None):
        self._status, self._reason, self._stats = status, reason, dict(stats or {})

    def result(self):
        widths = {c.name: c.width for c in self._info.channels}
        series = {k: np.array(v).reshape(len(self._t), widths[k])
                  for k, v in self._rows.items()}
        return MemoryResult(info=self._info, t=np.array(self._t), series=series,
                            status=self._status, reason=self._reason, stats=self._stats,
                            events=self._events)


class StubSet:
    """The stub set as a plugin object, leaving out the types named in ``skip``
    (e.g. ``{"memory"}`` next to the built-in plugins, which have that reporter)."""

    __version__ = __version__
    mbcore_contract = mbcore_contract

    def __init__(self, skip=()):
        self.skip = set(skip)

    def _keep(self, classes):
        return [c for c in classes if c.name not in self.skip]

    @hookimpl
    def mbcore_constraint_types(self):
        return self._keep([StubPin, StubAngleDriver])

    @hookimpl
    def mbcore_force_types(self):
        return self._keep([StubSpring])

    @hookimpl
    def mbcore_analyses(self):
        return self._keep([StubKinematic])

    @hookimpl
    def mbcore_reporters(self):
        return self._keep([StubMemory])


#: the plugin object ``MBCORE_PLUGINS=stub_plugins:PLUGIN`` registers
PLUGIN = StubSet()



def fourbar(examples_dir, t_end: float = 0.5, step: float = 0.1) -> dict:
    """The KAP four-bar (examples/fourbar_kap.yaml) on the stub types, analysed by
    ``stub_kinematic``."""
    import yaml
    d = yaml.safe_load((examples_dir / "fourbar_kap.yaml").read_text())
    for j in d["joints"]:
        j["type"] = "stub_pin"
    d["drivers"] = [{"name": "crank_drive", "type": "stub_angle_driver", "body": "crank",
                     "function": d["drivers"][0]["function"]}]
    d["settings"] = {"analysis": "stub_kinematic", "t_end": t_end, "step": step}
    return d
