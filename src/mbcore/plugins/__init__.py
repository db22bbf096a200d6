"""The plugin machinery: hook specifications, the plugin manager and type registry, the
plugin contract version and the compiled plugin tier's loader."""
from __future__ import annotations

from .manager import (  # noqa: F401  (the former mbcore.plugins)
    KINDS, Provider, LazyType, Registry, provider_of, PluginManager, entry_points,
    distribution_version, disabled_plugins, load_entrypoints_into,
    load_environment_plugins, get_plugin_manager, registry, register)

__all__ = ["KINDS", "Provider", "LazyType", "Registry", "provider_of", "PluginManager",
           "entry_points", "distribution_version", "disabled_plugins",
           "load_entrypoints_into", "load_environment_plugins",
           "get_plugin_manager", "registry", "register"]
