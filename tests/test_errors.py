"""Every error ubipy raises on purpose is a UbipyError and is drawn in ubipy.errors'
tree, so a caller can catch ubipy's errors by kind without reading every module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ubipy
from ubipy import errors

# Control flow inside one module, never raised past it.
INTERNAL = {"ubipy.wire.codec.Drop"}


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(ubipy.__path__, "ubipy."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_public_error_is_a_ubipy_error_drawn_in_the_tree() -> None:
    tree = errors.__doc__ or ""
    classes = exception_classes()
    assert "ubipy.peer.handoff.NotOurs" in classes  # the walk reaches every package
    for qualified, cls in classes.items():
        if qualified in INTERNAL or cls is errors.UbipyError:
            continue
        assert issubclass(cls, errors.UbipyError), qualified
        assert f"── {cls.__name__} " in tree, f"{qualified} is not drawn in ubipy.errors"
