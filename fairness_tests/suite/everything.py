"""The whole fairness suite as one namespace to import into a project's test module.

``fairness-tests init`` writes ``tests/test_fairness.py`` holding::

    from fairness_tests.suite.everything import *  # noqa: F401,F403

so the suite is collected from the project's own file: its drift snapshots live
beside it (``tests/__snapshots__/test_fairness/``), not in site-packages, and no
second copy of the suite's modules is collected ("import file mismatch").

Each ``test_*`` function of the suite's modules is exported as a copy carrying its
module's ``pytestmark`` on the function, so ``-m bbq`` and the other markers select
the same tests as in the suite's own modules (a star import of several modules would
leave only the last module's ``pytestmark``). Not a test module itself.
"""
from __future__ import annotations

import importlib
import pkgutil
import types

import fairness_tests.suite as _suite

__all__: list[str] = []


def _copy(func: types.FunctionType, marks: list) -> types.FunctionType:
    new = types.FunctionType(func.__code__, func.__globals__, func.__name__,
                             func.__defaults__, func.__closure__)
    new.__dict__.update(func.__dict__)
    new.__doc__, new.__module__, new.__qualname__ = func.__doc__, func.__module__, func.__qualname__
    new.__kwdefaults__ = func.__kwdefaults__
    new.__dict__["pytestmark"] = list(getattr(func, "pytestmark", [])) + list(marks)
    return new


for _info in sorted(pkgutil.iter_modules(_suite.__path__), key=lambda m: m.name):
    if not _info.name.startswith("test_"):
        continue
    _mod = importlib.import_module(f"{_suite.__name__}.{_info.name}")
    _marks = getattr(_mod, "pytestmark", [])
    _marks = [m.mark if hasattr(m, "mark") else m for m in
              (_marks if isinstance(_marks, list) else [_marks])]
    for _name, _obj in vars(_mod).items():
        if _name.startswith("test_") and isinstance(_obj, types.FunctionType):
            if _name in globals():
                raise ImportError(f"two suite modules define {_name}")
            globals()[_name] = _copy(_obj, _marks)
            __all__.append(_name)
