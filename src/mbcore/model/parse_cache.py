"""The parsed-document cache of YAML model files (what ``__pycache__`` is to modules).

Parsing a YAML model file needs PyYAML, whose import compiles the regular
expressions of its reader and resolver: ~10 ms, a quarter of the extra cost of the
first run of a process, while libyaml parses a model of a few bodies in well under a
millisecond.  :func:`load` keeps the plain data a file parsed to (mappings, lists,
strings, numbers, booleans, None: :func:`mbcore.model.model.parse_text` refuses
anything else) in one JSON file per model path and hands it back while the file's
text, PyYAML and the parser (the module that calls it) are unchanged, without
importing PyYAML.  Only documents that JSON gives back exactly are kept: string keys
only, and no list or mapping reached twice (a YAML alias of a collection is one
shared object, which JSON would copy).  JSON writes a float as its shortest exact
repr and reads NaN and the infinities back.

An entry is used only if it holds exactly the text just read (compared in full, not
by a hash) and the same parser stamp (:func:`parser_stamp`: the size and
modification time of the parser's module and of PyYAML's package, the parser's
settings, the Python version); it is rewritten otherwise.  Entries are written to a
temporary file and renamed, so concurrent processes see a whole entry or none.  Any
failure to read or write the cache (no home directory, a read-only disk, a damaged
entry) falls back to parsing.

Location: ``$MBCORE_CACHE_DIR/models``, else ``$XDG_CACHE_HOME/mbcore/models``, else
``~/.cache/mbcore/models``; ``MBCORE_MODEL_CACHE=0`` switches the cache off.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

#: the layout of an entry; a different one is a miss
FORMAT = 1


def enabled() -> bool:
    """False when ``MBCORE_MODEL_CACHE`` is ``0``, ``off``, ``no`` or ``false``."""
    value = os.environ.get("MBCORE_MODEL_CACHE", "1").strip().lower()
    return value not in ("0", "off", "no", "false")


def directory() -> str | None:
    """The cache directory (see the module docstring); None without a home."""
    root = os.environ.get("MBCORE_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        if xdg:
            root = os.path.join(xdg, "mbcore")
        else:
            home = os.path.expanduser("~")
            if home == "~":
                return None
            root = os.path.join(home, ".cache", "mbcore")
    return os.path.join(root, "models")


def _file_stamp(path: str | None) -> tuple:
    if not path:
        return ()
    st = os.stat(path)
    return (path, st.st_size, st.st_mtime_ns)


def parser_stamp(parser_file: str, settings: tuple = ()) -> Any:
    """What the parse depends on besides the text: the parser's module and its
    ``settings`` (limits, allowed tags), PyYAML's package (found without importing
    it) and the Python version; as it reads back from an entry (JSON lists)."""
    import importlib.util
    spec = importlib.util.find_spec("yaml")
    origin = getattr(spec, "origin", None) if spec is not None else None
    stamp = (FORMAT, tuple(sys.version_info[:2]), _file_stamp(parser_file), settings,
             _file_stamp(origin), _file_stamp(os.path.dirname(origin) if origin else None))
    return json.loads(json.dumps(stamp))


def _entry(folder: str, path: str) -> str:
    import zlib
    key = os.path.abspath(path)
    crc = zlib.crc32(key.encode("utf-8", "surrogatepass"))
    return os.path.join(folder, f"{os.path.basename(key)[:64]}-{crc:08x}.json")


def load(path: str, text: str, parser_file: str, parse: Callable[[str], Any],
         settings: tuple = ()) -> Any:
    """``parse(text)`` of the model file ``path``, from the cache when it holds
    this text for the same parser stamp (:func:`parser_stamp`); a parse result is
    stored for next time."""
    folder = directory() if enabled() else None
    if folder is None:
        return parse(text)
    try:
        stamp = parser_stamp(parser_file, settings)
        entry = _entry(folder, path)
    except (OSError, ValueError):
        return parse(text)
    try:
        with open(entry, encoding="utf-8") as fh:
            stored = json.load(fh)
        if (isinstance(stored, list) and len(stored) == 3 and stored[0] == stamp
                and stored[1] == text):
            return stored[2]
    except (OSError, ValueError, RecursionError):
        pass
    data = parse(text)
    if exact_in_json(data):
        _store(folder, entry, [stamp, text, data])
    return data


def exact_in_json(data: Any) -> bool:
    """JSON gives ``data`` back as it is: plain values, string keys, and no list or
    mapping reached twice (iterative: a deep document cannot overflow the stack)."""
    seen: set[int] = set()
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (dict, list)):
            if id(x) in seen:
                return False
            seen.add(id(x))
            if isinstance(x, dict):
                if not all(type(k) is str for k in x):
                    return False
                stack.extend(x.values())
            else:
                stack.extend(x)
        elif x is not None and type(x) not in (str, int, float, bool):
            return False
    return True


def _store(folder: str, entry: str, value: list) -> None:
    try:
        blob = json.dumps(value)
    except (ValueError, RecursionError):   # e.g. an integer of more than 4300 digits
        return
    import threading
    tmp = f"{entry}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(blob)
        os.replace(tmp, entry)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
