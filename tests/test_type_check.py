"""The declared API is type-checked (issue 40): the family record and registry, the grammar protocol, the hooks of a
family's LM class, the search decoders' interface and the config base carry type hints, and mypy (pyproject.toml's [tool.mypy])
finds them consistent. CI installs mypy with the test extra."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The public API's modules and the declared hooks
TYPED_MODULES = ["hf_slm/__init__.py", "hf_slm/families/registry.py", "modeling/grammar_protocol.py",
                 "modeling/generation_mixin.py", "modeling/search_decoders.py", "modeling/configuration_base.py"]


def _mypy(*paths, cwd=ROOT):
    """mypy's run over `paths` with the project's configuration (the test extra installs mypy)."""
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed: pip install -e .[test]")
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file", str(ROOT / "pyproject.toml"),
                           *map(str, paths)], cwd=cwd, capture_output=True, text=True)


def test_the_declared_api_type_checks():
    checked = _mypy(*TYPED_MODULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_check_finds_a_wrong_type(tmp_path):
    """mypy, run as above, reports a call against the declared hints (the check is not blind)."""
    sample = tmp_path / "uses_the_registry.py"
    sample.write_text("from hf_slm.families.registry import family_for_grammar\n\nfamily_for_grammar(3)\n"
                      "name: int = family_for_grammar('tg').name\n")
    checked = _mypy(sample)
    assert checked.returncode == 1
    assert 'incompatible type "int"; expected "str"' in checked.stdout
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in checked.stdout
