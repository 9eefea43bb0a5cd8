"""The package's surface: the type stub names what the native module has, and the public API is documented."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import cosched
import cosched.dask
import cosched.workload
from cosched import _native

STUB = Path(cosched.__file__).with_name("_native.pyi")


def test_the_stub_names_exactly_what_the_native_module_has() -> None:
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    native = {name for name in dir(_native) if not name.startswith("_")}
    assert stubbed == native


def test_every_public_function_has_a_docstring_and_type_hints() -> None:
    for module in (cosched, cosched.workload, cosched.dask):
        for name in module.__all__:
            item = getattr(module, name)
            if inspect.isfunction(item):
                assert item.__doc__ and len(item.__doc__) > 40, f"{module.__name__}.{name} has no docstring"
                assert "return" in item.__annotations__, f"{module.__name__}.{name} has no return type"


def test_the_package_says_its_version() -> None:
    assert cosched.__version__ == _native.__version__ and cosched.__version__.count(".") == 2
