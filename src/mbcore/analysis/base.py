"""Analysis base class and the settings validation shared by ``mbcore.run``,
``mbcore validate`` and ``mbcore check`` (:func:`resolve_settings`)."""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping

from ..elements import schema as S
from ..plugins.contract import CONTRACT_VERSION
from ..errors import ModelError
from ..results.reporting import Channel
from ..elements.schema import Param


#: the settings every analysis accepts, checked for their type before the analysis is
#: looked up (``reporters``: :func:`mbcore.results.reporting.reporters_from_settings`)
COMMON_SETTINGS: Mapping[str, Param] = {
    "analysis": Param("string", "analysis type name", default="kinematic"),
    "output": Param("string", "result file (not read by a run: the caller gives it)",
                    required=False),
    "kernels": Param("choice", "evaluation path", required=False,
                     choices=("compiled", "numpy")),
}


class Analysis:
    """Base class of analyses (plugins through hook ``mbcore_analyses``).

    Rules for implementers:

    1. ``name``: the value of ``settings.analysis``; ``settings_schema``: the
       settings it understands (validated with key paths ``settings.<key>``).
    2. ``channels()`` lists the series recorded per output time.
    3. ``run(record, event, progress)`` performs the analysis, calling
       ``record(t, data)`` once per output time (``data[name]`` a 1-D array per
       channel) and ``event(t, kind, message)`` for notable events.  It raises an
       :class:`mbcore.errors.MbcoreError` subclass naming the time on failure;
       the caller marks the results failed and keeps every recorded row.
    4. ``stats`` (dict) is written with the results when the run ends.
    5. ``dense_limit``: largest number of coordinates compiled with a dense Jacobian
       by :func:`mbcore.run` when ``jacobian="auto"`` (None: the System default,
       ``mbcore.system.DENSE_LIMIT``).
    6. ``check_settings`` (cross-field checks) and ``check_plugins`` (the plugin types
       the settings name, e.g. an integrator) are classmethods that need no System:
       ``mbcore validate`` runs them without compiling the model.
    """

    name: ClassVar[str] = ""
    #: plugin contract version this type was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION
    description: ClassVar[str] = ""
    dense_limit: ClassVar[int | None] = None
    settings_schema: ClassVar[Mapping[str, Param]] = {}
    #: settings every analysis accepts: ``reporters`` (extra reporters by type name,
    #: :func:`mbcore.results.reporting.reporters_from_settings`) is read by :func:`mbcore.run`
    common_keys: ClassVar[tuple[str, ...]] = ("analysis", "output", "kernels", "reporters")
    #: the analysis follows a model's switching constraint sets
    #: (:mod:`mbcore.solve.switching`); others refuse such a model
    handles_switching: ClassVar[bool] = False

    def __init__(self, system, settings: Mapping[str, Any] | None = None):
        self.system = system
        model = getattr(system, "model", None)
        if getattr(model, "switching", None) and not self.handles_switching:
            raise ModelError("switching", f"the {self.name} analysis does not follow "
                                          f"switching constraint sets: use the kinematic, "
                                          f"kinetostatic or dynamic analysis")
        self.settings = self.validate_settings(dict(settings or {}),
                                               units=getattr(model, "unit_system", None))
        registry = getattr(system, "registry", None)
        if registry is not None:
            self.check_plugins(self.settings, registry, "settings")
        self.stats: dict[str, Any] = {}

    @classmethod
    def validate_settings(cls, settings: Mapping[str, Any], path: str = "settings",
                          units: Any = None) -> dict:
        """The settings of this analysis validated (the type of every key, then the
        cross-field checks and the output grid's size); errors name the key path
        (``settings.t_end``) and the close matches of a misspelt key.  Returns the
        analysis' own settings with their defaults (not the common keys).  ``units``:
        the model's :class:`~mbcore.elements.units.UnitSystem`, to which settings
        given with a unit (``t_end: "20 ms"``) convert (default SI)."""
        S.check_keys(S.mapping(settings, path), (*cls.common_keys, *cls.settings_schema),
                     path, of=f"the {cls.name} analysis")
        for key, p in COMMON_SETTINGS.items():
            if settings.get(key) is not None:
                p.validate(settings[key], f"{path}.{key}", None)
        out: dict[str, Any] = {}
        for key, p in cls.settings_schema.items():
            if key in settings and settings[key] is not None:
                value = S.quantities(settings[key], f"{path}.{key}", p.unit, units) \
                    if p.unit else settings[key]
                out[key] = p.validate(value, f"{path}.{key}", None)
            elif p.is_required():
                raise ModelError(f"{path}.{key}", f"required by the {cls.name} analysis")
            else:
                out[key] = p.default_value()
        cls.check_settings(out, path)
        _check_output_grid(out, path)
        return out

    @classmethod
    def check_settings(cls, settings: dict[str, Any], path: str) -> None:
        """Cross-field checks (override)."""

    @classmethod
    def check_plugins(cls, settings: dict[str, Any], registry: Any, path: str) -> None:
        """Checks of the plugin types the validated settings name against the
        registry of the run (override; no System needed).  Called after
        :meth:`validate_settings` by ``__init__`` and :func:`resolve_settings`."""

    def channels(self) -> list[Channel]:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, record: Callable, event: Callable, progress: bool = False) -> None:
        raise NotImplementedError  # pragma: no cover - abstract

    def expected_rows(self) -> int:
        """How many rows the run plans to record (0: not known beforehand): a hint
        for reporters that allocate (``RunInfo.expected_rows``), never a limit."""
        return 0


def element_channels(system, *, local: bool = True, forces: bool = True,
                     points: bool = True) -> list[Channel]:
    """The optional per-element channels every analysis with multipliers records:
    joint-local reactions, force-element outputs and named points (when the model
    has them)."""
    ch = []
    if local and system.local_reaction_labels:
        ch.append(Channel("reactions_local", list(system.local_reaction_labels),
                          "joint-local reaction components (docs/constraints.md)"))
    if forces and system.force_labels:
        ch.append(Channel("forces", list(system.force_labels), "force element outputs"))
    if points and system.point_names:
        ch.append(Channel("points", list(system.point_labels),
                          "named points: position, velocity, acceleration"))
    if points and getattr(system, "angular_labels", None):
        ch.append(Channel("angular", list(system.angular_labels),
                          "angular velocity and acceleration of each spatial body, "
                          "global axes"))
    return ch


def _check_output_grid(settings: Mapping[str, Any], path: str) -> None:
    """An output grid (``t_start``, ``t_end``, ``output_step``) of more rows than
    ``mbcore.elements.limits`` ``max_output_rows`` is refused before anything is allocated."""
    t0, t1, h = (settings.get(k) for k in ("t_start", "t_end", "output_step"))
    if not all(isinstance(x, (int, float)) for x in (t0, t1, h)) or not h or h <= 0:
        return
    from ..elements.limits import check_count
    rows = (t1 - t0) / h + 1.0
    if rows > 1e18:
        rows = 1e18
    check_count(int(rows), "max_output_rows", f"{path}.output_step",
                f"output rows ((t_end - t_start) / output_step = ({t1:g} - {t0:g}) / {h:g})")


def resolve_settings(model_settings: Any, registry: Any, *, analysis: Any = None,
                     overrides: Any = None) -> tuple[type, str, dict[str, Any]]:
    """The analysis class, its name and the merged settings of a run, validated: the
    one settings validation of :func:`mbcore.run`, ``mbcore validate`` and ``mbcore
    check`` (nothing is compiled or run).

    ``analysis`` overrides ``settings.analysis`` (default ``kinematic``); the
    ``overrides`` are merged over ``model_settings``.  When the analysis differs from
    the model's, only the model settings the analysis knows are kept (explicit
    overrides are always validated).  Every value is checked for its type before it
    is used (a list as ``settings.analysis`` is a ModelError naming the key, not a
    failed registry lookup); a misspelt key or type name lists the close matches.
    """
    from ..results.reporting import reporters_from_settings
    own = dict(S.mapping({} if model_settings is None else model_settings, "settings"))
    override = dict(S.mapping({} if overrides is None else overrides, "settings"))
    for where, given in (("settings.analysis", own.get("analysis")),
                         ("settings.analysis", override.get("analysis")),
                         ("analysis", analysis)):
        if given is not None:
            COMMON_SETTINGS["analysis"].validate(given, where, None)
    aname = analysis or override.get("analysis") or own.get("analysis") or "kinematic"
    if not registry.has("analysis", aname):
        raise ModelError("settings.analysis", registry.unknown_message("analysis", aname))
    acls = registry.get("analysis", aname)
    if aname != (own.get("analysis") or "kinematic"):
        # the model file's settings were written for another analysis: keep the ones
        # this analysis knows (explicit overrides are always validated)
        known = set(getattr(acls, "settings_schema", {})) | {"analysis", "kernels",
                                                              "reporters"}
        own = {k: v for k, v in own.items() if k in known}
    merged = {**own, **override, "analysis": aname}
    acls.check_plugins(acls.validate_settings(merged), registry, "settings")
    reporters_from_settings(registry, merged.get("reporters"), create=False)
    return acls, aname, merged
