"""The one error hierarchy: every public error lives in coordinator.kernel.errors and is
importable, whole, from the ordered package."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import coordinator
import coordinator.kernel.errors
import ordered
import spark_source

# Modules whose import needs optional extras (pyspark) are skipped if the extra is absent.
_PACKAGES = (coordinator, ordered, spark_source)


def _modules() -> list[str]:
    names = []
    for package in _PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):  # importing it runs the CLI
                names.append(info.name)
    return names


def _public_errors() -> dict[str, type[BaseException]]:
    return {
        name: obj
        for name, obj in vars(coordinator.kernel.errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and not name.startswith("_")
    }


def test_every_public_error_is_in_all() -> None:
    assert set(_public_errors()) == set(coordinator.kernel.errors.__all__)


def test_ordered_reexports_the_whole_hierarchy() -> None:
    missing = [
        name
        for name, cls in _public_errors().items()
        if getattr(ordered, name, None) is not cls or name not in ordered.__all__
    ]
    assert missing == [], f"ordered lacks {missing}"


@pytest.mark.parametrize("module_name", _modules())
def test_public_errors_are_defined_in_the_leaf_module(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # an optional extra (pyspark) is not installed
        pytest.skip(f"{module_name}: {exc}")
    strays = [
        f"{module_name}.{name}"
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and not name.startswith("_")
        and obj.__module__ == module_name
        and module_name != "coordinator.kernel.errors"
    ]
    assert strays == [], f"define these in coordinator.kernel.errors: {strays}"


def test_old_import_paths_still_work() -> None:
    from coordinator.control.controller import BarrierTimeoutError as from_controller
    from coordinator.kernel.kafka_admin import UnknownTopicError as from_admin

    assert from_controller is coordinator.kernel.errors.BarrierTimeoutError
    assert from_admin is coordinator.kernel.errors.UnknownTopicError
