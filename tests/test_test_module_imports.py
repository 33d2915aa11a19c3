"""No test module imports another (issue 31): what several modules share lives in tests/helpers/ or conftest.py.

Importing a test module runs its module-level code and collects nothing, ties one module's helpers to another's
tests, and under pytest-xdist pays a second module's imports on a worker that runs none of its tests."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def names_of_test_modules():
    """The module names a test may not import: every tests/test_*.py, as a top-level or a `tests.` module."""
    stems = {path.stem for path in TESTS.glob("test_*.py")}
    return stems | {f"tests.{stem}" for stem in stems}


def imported_test_modules(source, test_modules):
    """(line, module) of each import in `source` of a module in `test_modules`, at any depth of the code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in test_modules]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module in test_modules:
                found.append((node.lineno, node.module))
            elif node.module in ("tests", None):  # `from tests import test_x`
                found += [(node.lineno, alias.name) for alias in node.names if alias.name in test_modules]
    return found


def test_the_scan_finds_every_form_of_import():
    test_modules = {"test_x", "tests.test_x"}
    source = ("import test_x\nfrom test_x import tiny\nfrom tests.test_x import tiny\nfrom tests import test_x\n"
              "def f():\n    from test_x import TREES as T\n"
              "import test_y\nfrom helpers.test_x import a\nfrom conftest import save_tiny_checkpoint\n")
    assert [line for line, _ in imported_test_modules(source, test_modules)] == [1, 2, 3, 4, 6]


def test_no_file_under_tests_imports_a_test_module():
    test_modules = names_of_test_modules()
    offending = [f"{path.relative_to(TESTS)}:{line} imports {module}"
                 for path in sorted(TESTS.rglob("*.py"))
                 for line, module in imported_test_modules(path.read_text(encoding="utf-8"), test_modules)]
    assert not offending, "move what is shared into tests/helpers/ or conftest.py:\n" + "\n".join(offending)
