"""The integrators behind :class:`mbcore.Simulation` (docs/embedding.md).

A simulation advances in calls (``advance_to(t)``), the integrator's own steps
crossing the call boundaries as in one run: the outputs at ``t`` come from the
dense output of the step that contains ``t``, and the next call continues from
that step's end with its next step size (or multistep history), so that N calls
reproduce one :func:`mbcore.run` with the call ends as output times.

* :class:`CompiledRK`: explicit Runge-Kutta methods on the compiled right-hand
  side, the run's compiled loop (``_steploop.run_rk``) called once per target with
  the step-end state, f there (FSAL: no extra evaluation), the next step size and
  the fixed-step grid position; the loop's ``ystep`` buffer (4 N + 5 floats) hands
  back the whole last step, so a later target inside that step redoes it from its
  start (same step size and grid point: bit-identical dense output; counted as
  *replay* evaluations, not integration work).  Bit-identical to the run.
* :class:`PythonStepper`: every other integrator (multistep, implicit, third
  party) and formulation without a compiled right-hand side: one integrator object
  kept across calls (``step()``, its dense output, history and step size), the
  projections of the projection formulations after each step as the Python driver
  does.  Equal to the run to the integration tolerance (the run uses the compiled
  multistep loops where they apply).

A restart (an input jump, a new state) starts the method again from (t, y):
f is evaluated there, embedded pairs keep the controller's last step proposal,
fixed steps start a new grid at t, multistep methods start at order 1.
"""
from __future__ import annotations

import math

import numpy as np

from .base import step_budget_error
from .loop_result import LoopFallback, LoopStatus, step_too_small

__all__ = ["CompiledRK", "PythonStepper"]


class CompiledRK:
    """The compiled Runge-Kutta loop driven target by target (module docstring)."""

    def __init__(self, kind: str, icls, form, t0: float, y0: np.ndarray, horizon: float,
                 options: dict, max_steps: int = 0, on_commit=None):
        from .._ext._steploop import run_rk
        #: ``on_commit(t, y) -> y_new | None`` at every step's end after its outputs
        #: (the run's; a change of coordinates): inside the loop, and for the step
        #: that ended a call when the next call goes past it
        self.on_commit = on_commit
        self._committed = float(t0)
        from .rk import compiled_twin
        self.run_rk = run_rk
        self.max_steps = int(max_steps or 0)       # the step budget per call
        self.crhs = crhs = form.compiled
        self.N = N = y0.size
        buf = np.zeros(N)

        def fun(t, y):                  # the Python object's start-up only
            if crhs.eval(t, y, buf):
                raise LoopFallback(t)
            return buf
        integ = icls(fun, t0, np.array(y0, dtype=float), horizon, **options)
        self.twin = tw = compiled_twin(icls, kind)
        self.adaptive = adaptive = kind == "embedded"
        s0 = integ.loop_start()         # the start state, passed explicitly
        if adaptive:
            self.h = s0["h_abs"]
            self.tol = (float(s0["rtol"]), float(s0["atol"]), s0["max_step"],
                        *tw.controller, s0["exponent"], tw.order)
        else:
            self.h = s0["h"]
            self.tol = (0.0, 0.0, math.inf, *tw.controller, 0.0, tw.order)
        self.nfev_start = int(integ.stats.nfev)      # the start-up's evaluations
        self.horizon = float(horizon)
        self.ts, self.ys = float(t0), np.array(y0, dtype=float)
        self.fs = np.array(s0["f0"], dtype=float)
        self.g0, self.istep = float(t0), 0
        self.last: np.ndarray | None = None         # the last step (ystep layout)
        self.last_t1 = self.horizon
        self.ystep = np.zeros(4 * N + 5)
        self.scratch = np.zeros(4 * N + 5)
        self.stats = np.zeros(5)
        self.t_out = np.zeros(1)
        self.counts = np.zeros(5)      # steps, rejected, nfev, replay steps, replay nfev
        self.counts[2] = self.nfev_start
        self.step_size, self.order = 0.0, float(tw.order)
        self._out: np.ndarray | None = None

        def on_output(t, y):
            self._out = y
            return True
        self.on_output = on_output

    # -- the loop call -------------------------------------------------------------
    def _call(self, t0, t1, y0, f0, target, h, istep0, ystep):
        self.t_out[0] = target
        tw = self.twin
        code, t, y, _, _ = self.run_rk(
            self.crhs, tw.A, tw.B, tw.C, tw.E, tw.P, self.adaptive, t0, t1, y0, f0,
            self.t_out, 0, h, *self.tol, self.on_output, self.stats, 0,
            grid0=self.g0, istep0=istep0, ystep=ystep, **tw.hairer,
            max_steps=self.max_steps, on_commit=self.on_commit)
        code = LoopStatus(code)
        if code is LoopStatus.STOPPED:
            return None
        if code is LoopStatus.BUDGET:     # the state reached travels with the error
            err = step_budget_error(self.max_steps, t, t0, target, float(self.stats[0]))
            err.state = (float(t), np.array(y))
            raise err
        if code is LoopStatus.STEP_TOO_SMALL:
            raise step_too_small(float(self.stats[0]), t)
        return t, np.array(y)             # EVALUATION_FAILED after (t, y)

    def advance(self, target: float):
        """y at ``target`` (>= the step start); None, or ``(t, y)`` the last accepted
        state before an evaluation failed (the caller takes the Python path)."""
        N, last = self.N, self.last
        if last is not None and target <= last[N]:
            if target == last[N]:
                return np.array(last[:N])
            return self._replay(target)
        t1 = self.horizon if target <= self.horizon else math.inf
        failed = self._commit()
        if failed is not None:
            return failed
        failed = self._call(self.ts, t1, self.ys, self.fs, target, self.h, self.istep,
                            self.ystep)
        st = self.stats
        self.counts[:3] += st[2:5]
        if failed is not None:
            return failed
        ys = self.ystep
        self.last, self.last_t1 = ys.copy(), t1
        self.ts, self.ys = float(ys[N]), np.array(ys[:N])
        self.fs = np.array(ys[3 * N + 5:4 * N + 5])
        self.h, self.istep = float(ys[N + 1]), int(ys[N + 4])
        self.step_size, self.order = float(st[0]), float(st[1])
        return self._out

    def _commit(self):
        """The step-end hook of the step that ended the last call (the loop stopped at
        its output before it): once, when the integration goes past that step; a
        new state is continued from as the loop does (f there, the same step size,
        a new grid of fixed steps).  None, or ``(t, y)`` when f fails there (as
        :meth:`advance`: the caller takes the Python path)."""
        if self.on_commit is None or self._committed == self.ts:
            return None
        self._committed = self.ts
        y_c = self.on_commit(self.ts, np.array(self.ys))
        if y_c is None:
            return None
        y_c = np.array(y_c, dtype=float)
        f = np.zeros(self.N)
        if self.crhs.eval(self.ts, y_c, f):
            return self.ts, y_c
        self.restart(self.ts, y_c, f)
        return None

    def _replay(self, target: float) -> np.ndarray:
        """The dense output at ``target`` inside the last step: the step again from
        its start with the accepted attempt's step size (and grid point)."""
        L, N = self.last, self.N
        failed = self._call(float(L[N + 2]), self.last_t1, np.array(L[N + 5:2 * N + 5]),
                            np.array(L[2 * N + 5:3 * N + 5]), target, float(L[N + 3]),
                            int(L[N + 4]) - 1, self.scratch)
        if failed is not None:         # pragma: no cover - the same step succeeded before
            raise RuntimeError("a replayed step failed")
        self.counts[3:] += (self.stats[2], self.stats[4])
        return self._out

    def step_end(self) -> tuple[float, np.ndarray, bool]:
        """One step from the step end (the loop stops right after it): (t, y, True),
        or the last accepted (t, y, False) before a failing evaluation."""
        out = self.advance(np.nextafter(self.ts, math.inf))
        if isinstance(out, tuple):
            return out[0], out[1], False
        return self.ts, np.array(self.ys), True

    def accepted(self) -> tuple[float, np.ndarray]:
        """The step end the loop continues from (t, y)."""
        return self.ts, np.array(self.ys)

    def restart(self, t: float, y: np.ndarray, f: np.ndarray) -> None:
        self.ts, self.ys, self.fs = float(t), np.array(y, dtype=float), np.array(f)
        self.g0, self.istep, self.last = float(t), 0, None
        self._committed = float(t)

    # -- state -------------------------------------------------------------------------
    def get(self) -> dict:
        return {"ts": self.ts, "ys": self.ys.copy(), "fs": self.fs.copy(), "h": self.h,
                "g0": self.g0, "istep": self.istep,
                "last": None if self.last is None else self.last.copy(),
                "last_t1": self.last_t1, "counts": self.counts.copy(),
                "step_size": self.step_size, "order": self.order}

    def set(self, d: dict) -> None:
        self.ts, self.ys, self.fs = float(d["ts"]), d["ys"].copy(), d["fs"].copy()
        self.h, self.g0, self.istep = float(d["h"]), float(d["g0"]), int(d["istep"])
        self.last = None if d["last"] is None else d["last"].copy()
        self.last_t1 = float(d["last_t1"])
        self.counts[:] = d["counts"]
        self.step_size, self.order = d["step_size"], d["order"]

    def statistics(self) -> tuple[float, float, float, float, float]:
        c = self.counts
        return self.step_size, self.order, c[0], c[1], c[2]


class PythonStepper:
    """One integrator object kept across calls (module docstring)."""

    def __init__(self, icls, rhs, t0: float, y0: np.ndarray, horizon: float, options: dict,
                 jac=None, post_step=None, max_steps: int = 0, on_commit=None):
        self.integ = icls(rhs, t0, np.array(y0, dtype=float), horizon, jac=jac, **options)
        self.post_step = post_step
        self.on_commit = on_commit      # as CompiledRK's: before the next step
        self._committed = float(t0)
        self.max_steps = int(max_steps or 0)       # the step budget per call
        self.sol = None                # dense output of the last step (when needed)

    def _commit(self) -> None:
        I = self.integ
        if self.on_commit is None or self._committed == I.t:
            return
        self._committed = float(I.t)
        y_c = self.on_commit(float(I.t), np.array(I.y))
        if y_c is not None:
            if I.status == "finished" and I.t < math.inf:
                I.t_bound, I.status = math.inf, "running"
            resume = getattr(I, "resume", None)
            (resume or I.restart)(I.t, np.array(y_c, dtype=float))
            self.sol = None

    def accepted(self) -> tuple[float, np.ndarray]:
        """The last accepted step (t, y) (a failed step leaves it)."""
        return float(self.integ.t), np.array(self.integ.y)

    def _step(self) -> None:
        self._commit()
        I = self.integ
        if I.status == "finished" and I.t < math.inf:
            I.t_bound, I.status = math.inf, "running"   # past settings.t_end
        msg = I.step()
        if msg is not None:
            raise I.error
        self.sol = None

    def _post(self) -> None:
        I = self.integ
        if self.post_step is None:
            return
        y_post = self.post_step(I.t, I.y)
        if y_post is not None and I.status == "running":
            resume = getattr(I, "resume", None)
            (resume or I.restart)(I.t, np.array(y_post, dtype=float))
        elif y_post is not None:
            I.y = np.array(y_post, dtype=float)

    def advance(self, target: float) -> np.ndarray:
        I = self.integ
        t_start, steps = float(I.t), 0
        while I.t < target:
            if self.max_steps and steps >= self.max_steps:
                err = step_budget_error(self.max_steps, float(I.t), t_start, target,
                                        float(I.t - I.t_old))
                err.state = (float(I.t), np.array(I.y))
                raise err
            self._step()
            steps += 1
            if I.t >= target and I.t != target:
                self.sol = I.dense_output()   # before a projection replaces y
            self._post()
        if I.t == target:
            return np.array(I.y)
        if self.sol is None:
            self.sol = I.dense_output()
        return np.array(self.sol(target), dtype=float).reshape(-1)

    def step_end(self) -> tuple[float, np.ndarray, bool]:
        self._step()
        self._post()
        return float(self.integ.t), np.array(self.integ.y), True

    @property
    def ts(self) -> float:
        return float(self.integ.t)

    def restart(self, t: float, y: np.ndarray, f=None) -> None:
        I = self.integ
        if I.status == "finished" or I.t_bound <= t:
            I.t_bound = math.inf
        I.restart(t, y)
        self.sol = None
        self._committed = float(t)

    def statistics(self) -> tuple[float, float, float, float, float]:
        I = self.integ
        st = I.stats
        return (float(I.step_size or 0.0), float(getattr(I, "order", 0)), st.nsteps,
                st.nrejected, st.nfev)
