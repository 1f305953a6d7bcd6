"""Loading what a SPEC names: 'package.module:attr' or 'path/to/file.py:attr'."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Callable, Tuple


def split_spec(spec: str) -> Tuple[str, str]:
    """(module or file, attribute): the attribute is "" when SPEC names only the module."""
    target, sep, attr = spec.rpartition(":")
    if not sep or "/" in attr:
        return spec, ""
    return target, attr


def import_target(spec: str, target: str) -> ModuleType:
    """The module of a file path (imported under its file name, its folder on sys.path so that it
    imports its siblings) or of a module name (found from the working directory too)."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise SystemExit(f"kvconform: no such file: {target} (from {spec!r})")
        sys.path.insert(0, os.path.dirname(path))
        name = os.path.splitext(os.path.basename(path))[0]
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"kvconform: {path}: not a Python file (from {spec!r})")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules.setdefault(name, module)
        module_spec.loader.exec_module(module)
        return module
    sys.path.insert(0, os.getcwd())
    return importlib.import_module(target)


def load_object(spec: str, what: str, accept: Callable[[object], bool]) -> object:
    """The object SPEC names, which `accept` must take; without an attribute, the one accepted object
    the module defines (an exit naming SPEC when it has none or several)."""
    target, attr = split_spec(spec)
    module = import_target(spec, target)
    if attr:
        obj: object = module
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if not accept(obj):
            raise SystemExit(f"kvconform: {spec}: {attr} is not {what}")
        return obj
    found = [v for v in vars(module).values() if accept(v) and getattr(v, "__module__", module.__name__) == module.__name__]
    if len(found) != 1:
        raise SystemExit(f"kvconform: {spec}: {len(found)} objects that are {what}; name one as {target}:NAME")
    return found[0]
