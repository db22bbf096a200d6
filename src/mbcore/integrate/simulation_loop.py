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
* :class:`CompiledLoop`: the compiled multistep and implicit loops of
  :mod:`mbcore.integrate.multistep_loop` (every loop kind of ``STEPLOOP_KINDS``:
  abm, bdf, the θ-methods, generalized-α/HHT fixed and variable step, the fixed-grid
  methods, rkmk4, sdirk, radau; also the DAE forms with the analysis' Jacobian
  call-back), kept running across calls: one ``run_multistep`` call on a worker
  thread whose output call-back hands each target's dense output to the caller and
  waits for the next target (written into the loop's output times before the
  call-back returns, so the loop reads it as if it had been given from the start).
  The loop never stops between calls, so N calls are one run: the same steps,
  orders, Jacobians and dense outputs bit for bit.  Only one of the two threads
  runs at a time (a strict hand-over); the thread is the loop's C stack kept alive,
  not parallel work.  When its output times run out (:attr:`CompiledLoop.CAPACITY`
  calls) the loop stops and a new one resumes exactly from the start of the step
  that held the last output (the checkpoint history of the multistep loops, as a
  resumed run); :meth:`CompiledLoop.get` / :meth:`CompiledLoop.set` (a
  simulation's state, its copies) resume the same way.  A restart ends the paused
  call and starts a new one from (t, y) with the next target: the integrator object
  the first call built (and checked) is kept and restarted there
  (``integ.restart``, as the driver's ``restart``: the same start-up formulas), and
  that call runs on the caller's thread, stopping at its target's output (no
  hand-over between the threads: a control loop that sets an input before every
  call restarts every call).  A next call without a restart resumes exactly from
  the history at the start of the step that held that output (as an exhausted
  call), on the worker again; a formulation with its own state
  (``resume_state``: cp, the joint-coordinate loops), whose resume would not be
  exact, keeps its restarts' calls on the worker.  Past the horizon (``t_end``)
  the new call starts there with no end time.
* :class:`PythonStepper`: every other integrator (third party, and any method with
  ``loop: python``) and formulation without a compiled right-hand side: one
  integrator object kept across calls (``step()``, its dense output, history and
  step size), the projections of the projection formulations after each step as
  the Python driver does.  The same steps as the compiled loops, its values equal
  to theirs bit for bit or to the last bits where the compiled arithmetic differs.

A restart (an input jump, a new state) starts the method again from (t, y):
f is evaluated there, embedded pairs keep the controller's last step proposal,
fixed steps start a new grid at t, multistep methods start at order 1.
"""
from __future__ import annotations

import functools
import math
import queue
import threading
import weakref

import numpy as np

from .base import step_budget_error
from .loop_result import LoopFallback, LoopResult, LoopStatus, step_too_small

__all__ = ["CompiledRK", "CompiledLoop", "PythonStepper"]


class _StepEnds:
    """What the compiled steppers share: ``ts``, ``ys`` the end of the last step
    taken, ``advance(target)`` (y, or ``(t, y)`` before a failing evaluation)."""

    ts: float
    ys: np.ndarray

    def step_end(self) -> tuple[float, np.ndarray, bool]:
        """One step from the step end (the loop's next output just after it, then
        that step's end): (t, y, True), or the last accepted (t, y, False) before a
        failing evaluation."""
        out = self.advance(np.nextafter(self.ts, math.inf))
        if isinstance(out, tuple):
            return out[0], out[1], False
        return self.ts, np.array(self.ys), True

    def accepted(self) -> tuple[float, np.ndarray]:
        """The step end the loop continues from (t, y)."""
        return self.ts, np.array(self.ys)


class CompiledRK(_StepEnds):
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


def _loop_worker(jobs: "queue.SimpleQueue", out: "queue.SimpleQueue",
                 done: "queue.SimpleQueue") -> None:
    """The thread of a :class:`CompiledLoop`: runs loop calls one after the other
    (``jobs``: a callable, or None to end), each reporting through ``out``; a call
    the caller stopped (a restart) reports its end through ``done``, which the
    caller reads without waiting (so that a restart costs no extra hand-over); a job
    that returns None reports nothing (:meth:`CompiledLoop._idle`)."""
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            res = job()
        except BaseException as exc:      # handed to the caller's thread, raised there
            out.put(("error", exc))
            continue
        if res is not None:
            (done if res[3] else out).put(("end", res))


#: the end time of a loop call past the simulation's horizon
_NO_END = float(np.finfo(float).max)


def _weak(f):
    """``f`` called through a weak reference (None stays None): the loop's thread must
    not keep the simulation alive."""
    if f is None:
        return None
    ref = weakref.ref(f)

    def call(*args):
        g = ref()
        if g is None:                    # pragma: no cover - the loop stops first
            raise LoopFallback(float(args[0]))
        return g(*args)
    return call


def _loop_call(kind, icls, form, options, t0, t1, y0, target, history, capacity,
               budget, inner, jac, stats, hist, ystep, cmd, out, keep: dict,
               held=None):
    """One loop call of a :class:`CompiledLoop` on its thread (module docstring):
    ``run_multistep`` from (t0, y0), the output times written as the caller hands
    them over (``cmd``: the next target, or None to stop); returns (result, the
    failed state or None, whether the output times ran out, whether it was
    stopped).  ``held`` (a list): the call runs on the caller's thread and stops at
    its first output, (t, y) appended to ``held`` (a restart's first call)."""
    from .multistep_loop import run_multistep
    from .base import Statistics
    t_out = np.full(capacity, math.inf)
    t_out[0] = target
    pos, since, t_prev = [1], [0], [t0]
    failed: list = []
    stopped = [False]

    def on_output(t, y):
        since[0], t_prev[0] = -1, t        # (on_commit of this step follows)
        if held is not None:
            held.append((t, np.array(y)))
            keep["discard"] = True         # (the caller reads the counts in stats)
            return True
        out.put(("out", t, y))
        nxt = cmd.get()
        if nxt is None:
            stopped[0] = True              # a restart: the caller goes on meanwhile
            keep["discard"] = True
            return True
        if pos[0] >= t_out.size:
            return True
        t_out[pos[0]] = nxt
        pos[0] += 1
        return False

    def python_fallback(t, y, outs, why=None):
        failed.append((float(t), np.array(y, dtype=float)))
        return LoopResult(int(LoopStatus.EVALUATION_FAILED), Statistics(), t, y)

    on_commit = inner
    if budget:
        def on_commit(t, y):
            # the step budget per call (the loop's own, counted here so that the
            # error carries the state where it ran out, as CompiledRK's)
            since[0] += 1
            if since[0] >= budget:
                err = step_budget_error(budget, t, t_prev[0], t_out[pos[0] - 1],
                                        float(stats[0]))
                err.state = (float(t), np.array(y))
                raise err
            return None if inner is None else inner(t, y)

    stats[:] = 0.0
    hist.clear()
    keep["discard"] = False
    res = run_multistep(kind, icls, form, t0, t1, y0, t_out, options, on_output, stats,
                        python_fallback, jac=jac, ystep=ystep, hist=hist,
                        history=history, on_commit=on_commit, keep=keep)
    return (res, (failed[0] if failed else None),
            held is None and pos[0] >= t_out.size, stopped[0] or bool(held))


class CompiledLoop(_StepEnds):
    """A compiled multistep / implicit loop kept running across calls (module
    docstring).  ``advance(target)`` returns y at ``target`` (the loop's dense
    output, or its step end), or ``(t, y)``: the last accepted state before an
    evaluation failed (the caller continues on the Python driver and restarts this
    loop with :meth:`restart`).  :attr:`unsupported` after the first call: the loop
    could not start (options it does not implement, or the first evaluation failed:
    the caller takes the Python driver for good, as a run does)."""

    #: output times one loop call holds; then an exact resume (a new call)
    CAPACITY = 4096

    def __init__(self, kind: str, icls: type, form, t0: float, y0: np.ndarray,
                 horizon: float, options: dict, jac=None, max_steps: int = 0,
                 on_commit=None):
        self.kind, self.icls, self.form = kind, icls, form
        self.options, self.jac = options, jac
        self.max_steps = int(max_steps or 0)     # the step budget per call
        self.on_commit = on_commit
        self.horizon = float(horizon)
        self.N = N = np.asarray(y0).size
        self.ts, self.ys = float(t0), np.array(y0, dtype=float)   # the last step end
        self.unsupported = False
        self.base = np.zeros(3)          # steps, rejected, evaluations of ended calls
        self.stats = np.zeros(5)         # the live call's (run_multistep's stats)
        self.step_size, self.order = 0.0, 0.0
        self.calls = 0                   # loop calls started (restarts, resumes)
        self.ystep = np.full(N + 2, np.nan)
        self.hist: dict = {}             # the state at the start of the last output step
        #: the integrator object of the loop calls, restarted at each fresh start
        #: (``run_multistep``'s ``keep``)
        self._keep: dict = {}
        self._start: tuple | None = (float(t0), np.array(y0, dtype=float), None)
        self._call_start = self._start   # the last call's start (t, y, history)
        self._live = False               # a loop call paused in its output call-back
        #: a restart's call, run on the caller's thread, stopped at its output: the
        #: next call resumes from its history (:meth:`_continue_held`) unless restarted
        self._held = False
        self._fresh = False              # the next call starts a restart (synchronous)
        self._sync_msg: tuple | None = None     # the synchronous call's message
        self._stopping = False           # a restart stopped the paused call (:meth:`_idle`)
        #: whether a call resumed from a history takes the uninterrupted steps: not
        #: for a formulation with its own state (``resume_state``: cp's partitions,
        #: the joint-coordinate loops), whose restarts' calls stay on the worker
        self._exact_resume = not (form.resume_state() if hasattr(form, "resume_state")
                                  else {})
        self.pending: BaseException | None = None    # a signal held (:meth:`_receive`)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._cmd: queue.SimpleQueue = queue.SimpleQueue()
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=_loop_worker,
                                        args=(self._jobs, self._out, self._done),
                                        daemon=True, name=f"mbcore-{kind}-loop")
        self._thread.start()
        # the thread holds no reference to self: when the stepper goes, its loop ends
        weakref.finalize(self, CompiledLoop._shutdown, self._jobs, self._cmd)

    @staticmethod
    def _shutdown(jobs, cmd) -> None:
        cmd.put(None)                    # a paused loop call stops (on_output -> True)
        jobs.put(None)                   # the thread ends

    # -- the loop call (on the worker thread) ---------------------------------------------
    def _call(self, t0: float, y0: np.ndarray, target: float, history,
              sync: bool = False) -> None:
        """Queue a loop call from (t0, y0) (``history``: an exact resume there) whose
        first output time is ``target``.  The call holds no reference to this object
        (a paused call would keep it alive): its call-backs are weak references to
        the ones this object holds.  ``sync`` (a restart): the call runs here, on the
        caller's thread, and stops at its output (no hand-over; :meth:`_receive`
        returns its message, ``"held"`` for the output)."""
        self.calls += 1
        self.ystep[:] = np.nan
        t0 = float(t0)
        self._call_start = (t0, y0, history)
        # past the horizon: no end (the largest finite time: the integrator objects
        # take finite bounds only)
        t1 = self.horizon if t0 < self.horizon else _NO_END
        if sync:
            self._idle()
            held: list = []
            try:
                res = _loop_call(self.kind, self.icls, self.form, self.options, t0, t1,
                                 y0, target, history, 1, self.max_steps,
                                 _weak(self.on_commit), _weak(self.jac), self.stats,
                                 self.hist, self.ystep, None, None, self._keep, held)
            except BaseException as exc:
                self._sync_msg = ("error", exc)
                return
            self._sync_msg = ("held", *held[0]) if held else ("end", res)
            return
        self._jobs.put(functools.partial(
            _loop_call, self.kind, self.icls, self.form, self.options, t0, t1, y0, target,
            history, self.CAPACITY, self.max_steps, _weak(self.on_commit), _weak(self.jac),
            self.stats, self.hist, self.ystep, self._cmd, self._out, self._keep))

    def _idle(self) -> None:
        """Wait until a loop call that a restart stopped has ended on the worker (it
        shares the buffers and the integrator object with the call that follows
        here); at once when none is ending."""
        if not self._stopping:
            return
        self._stopping = False
        ended = threading.Event()
        self._jobs.put(ended.set)
        ended.wait()

    def _receive(self):
        """The loop's next message: an output (the call pauses), or its end.  A signal
        while the loop works (KeyboardInterrupt) is held in :attr:`pending` until the
        call is done (the caller raises it then, its state consistent): the loop
        itself sees signals only at its outputs, as in a run."""
        msg, self._sync_msg = self._sync_msg, None
        while msg is None:
            try:
                msg = self._out.get()
            except BaseException as exc:    # (SimpleQueue.get raises only signals)
                self.pending = exc
        self._drain()
        if msg[0] == "error":            # the call ended (its counts to its last output)
            self.base += self.stats[2:5]
            self._live = False
            raise msg[1]
        return msg

    def _resume_point(self) -> bool:
        """The next call resumes exactly at the start of the step that held the last
        output of the call that ended (its history, the counts before it); False when
        it kept none."""
        h = dict(self.hist)
        if h.get("t") is None:
            return False
        self.base += np.asarray(h["counts"], dtype=float)[:3]
        self._start = (float(h["t"]), np.array(h["y"], dtype=float), h)
        return True

    def _drain(self) -> None:
        """Forget the ends of the calls a restart stopped (their counts were taken
        at the restart: the loop counts nothing after its last output)."""
        while True:
            try:
                self._done.get_nowait()
            except queue.Empty:
                return

    def _ended(self, res) -> None:
        st = res.stats
        self.base += (st.nsteps, st.nrejected, st.nfev)
        self._live = False

    # -- the caller's side -----------------------------------------------------------------
    def advance(self, target: float) -> np.ndarray | tuple[float, np.ndarray]:
        """y at ``target`` (class docstring), or the last accepted ``(t, y)`` before a
        failing evaluation."""
        target = float(target)
        if self._live:
            self._cmd.put(target)
        else:
            if self._held:
                self._continue_held()
            elif self._start is None:
                # a call that ended in an error the caller caught, no restart since:
                # that call again from its start (the same steps: the same error)
                self._start = self._call_start
            t0, y0, history = self._start
            self._start = None
            sync = self._fresh and history is None and self._exact_resume
            self._fresh = False
            self._call(t0, y0, target, history, sync)
        first = self.calls == 1 and not self._live
        while True:
            msg = self._receive()
            if msg[0] == "out" or msg[0] == "held":
                if msg[0] == "held":
                    self._held = True
                else:
                    self._live = True
                if msg[1] != target:     # an earlier call's, left by an interrupt
                    continue
                N = self.N
                self.ts, self.ys = float(self.ystep[N]), np.array(self.ystep[:N])
                self.step_size, self.order = float(self.stats[0]), float(self.stats[1])
                return np.array(msg[2])
            res, failed, full, _ = msg[1]
            self._live = False
            if full and failed is None:
                # the output times ran out: resume exactly at the start of the step
                # that held the last output, the target again (a history without a
                # start, none kept: a restart at the last step end)
                if not self._resume_point():
                    self._ended(res)
                    self._start = (self.ts, self.ys, None)
                (t0, y0, history), self._start = self._start, None
                self._call(t0, y0, target, history)
                continue
            self._ended(res)
            if failed is not None:
                if first and self.base[0] == 0:
                    self.unsupported = True      # the loop did not start
                self._start = None
                return failed
            # the horizon reached before target: on past it, the method restarted there
            self.ts, self.ys = float(res.t_final), np.array(res.y_final, dtype=float)
            self._call(self.ts, self.ys, target, None)
            first = False

    def _continue_held(self) -> None:
        """The next call after a restart's synchronous one, with no restart since:
        it resumes exactly at the start of the step that held that call's output
        (its history, as an exhausted call: the same steps, counts and outputs as a
        call kept running; a kind that kept no history restarts at the step end)."""
        self._held = False
        if not self._resume_point():
            self.base += self.stats[2:5]
            self._start = (self.ts, self.ys, None)

    def restart(self, t: float, y: np.ndarray, f=None) -> None:
        """The method starts again at (t, y) with the next call: the kept integrator
        object restarted there (the driver's ``restart``), that call run on the
        caller's thread up to its target (a control loop that sets an input before
        every call restarts every call: no thread hand-over)."""
        if self._live:                   # the paused call ends, its counts kept
            self.base += self.stats[2:5]
            self._cmd.put(None)
            self._live = False
            self._stopping = True
        elif self._held:                 # the stopped call's counts kept
            self.base += self.stats[2:5]
            self._held = False
        self.ts, self.ys = float(t), np.array(y, dtype=float)
        self._start = (self.ts, self.ys.copy(), None)
        self._fresh = True

    # -- state -------------------------------------------------------------------------
    def get(self) -> dict | None:
        """The continuation (a copy): a paused call's history at the start of the step
        holding the last output, from which :meth:`set` redoes that step (exactly, as a
        resumed run or an exhausted call), with the counts before it; or the pending
        start.  None when the loop kept no history there (the caller restarts)."""
        if self._live or self._held:
            h = self.hist
            if h.get("t") is None:
                return None
            start = (float(h["t"]), np.array(h["y"], dtype=float), dict(h))
            base = self.base + np.asarray(h["counts"], dtype=float)[:3]
        elif self._start is not None:
            start, base = self._start, self.base.copy()
        else:
            return None
        return {"loop": self.kind, "start": start, "base": base, "ts": self.ts,
                "ys": self.ys.copy(), "step_size": self.step_size, "order": self.order}

    def set(self, d: dict) -> bool:
        """Continue from :meth:`get`'s ``d`` (of a loop of the same kind) with the next
        call; False (nothing changed) for another kind's."""
        if d.get("loop") != self.kind:
            return False
        if self._live:                   # the paused call ends, its counts dropped
            self._cmd.put(None)
            self._live = False
            self._stopping = True
        self._held = self._fresh = False
        t, y, h = d["start"]
        self._start = (float(t), np.array(y, dtype=float), None if h is None else dict(h))
        self.base = np.array(d["base"], dtype=float)
        self.ts, self.ys = float(d["ts"]), np.array(d["ys"], dtype=float)
        self.step_size, self.order = d["step_size"], d["order"]
        return True

    def statistics(self) -> tuple[float, float, float, float, float]:
        c = self.base + self.stats[2:5] if self._live or self._held else self.base.copy()
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
