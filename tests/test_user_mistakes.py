"""Issue 12's table: a user's mistakes and edge inputs, through the CLI and the Python API. Every error is one
line naming the input, with no traceback; every silent case now gives the corrected result. The cases live in
`mistake_cases_<area>.py`; this file only runs them.

CLI cases run `hf-slm` in this interpreter (helpers/cli.py: exit status, stdout and stderr as a fresh one gives
them), each in a folder of its own: a fresh interpreter per case paid torch's imports 100 times.
"""

import importlib
import re
from pathlib import Path

import pytest

from conftest import save_tiny_checkpoint
from mistake_cases import ApiCase, CliCase
from helpers.cli import run_cli_in_process
from helpers.ptb_trees import TREES

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CASE_MODULES = sorted(path.stem for path in Path(__file__).parent.glob("mistake_cases_*.py"))
CASES = [case for module in CASE_MODULES for case in importlib.import_module(module).CASES]
CLI_CASES = [case for case in CASES if isinstance(case, CliCase)]
API_CASES = [case for case in CASES if isinstance(case, ApiCase)]


def test_the_table_is_large_and_names_are_unique():
    assert len(CASES) >= 60, len(CASES)
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), [name for name in names if names.count(name) > 1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("mistakes-model"), TREES)


@pytest.fixture(scope="module")
def model_dir(checkpoint):
    return checkpoint[0]


def _run(case, model, tmp):
    tmp.mkdir(parents=True, exist_ok=True)
    if case.prepare is not None:
        case.prepare(tmp, model)
    values = {"model": str(model), "tmp": str(tmp), "shared": str(SHARED_DATA)}
    argv = [argument.format(**values) for argument in case.argv]
    return run_cli_in_process(*argv, cwd=tmp, stdin=case.stdin)


@pytest.mark.parametrize("case", CLI_CASES, ids=[case.name for case in CLI_CASES])
def test_cli(case, model_dir, tmp_path):
    if case.needs_shared_data and not SHARED_DATA.is_dir():
        pytest.skip("needs ../shared/data")
    tmp = tmp_path / "case"
    result = _run(case, model_dir, tmp)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == case.exit_code, shown
    assert "Traceback" not in result.stderr, shown
    if case.exit_code != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("hf-slm")
                  and not line.split(": ", 2)[1:2] == ["note"]]  # a note on the input (<unk> words) is no failure
        assert len(errors) == 1, shown  # one line says what went wrong
        assert re.search(case.message, errors[0]), shown
    else:
        assert re.search(case.message, result.stdout + result.stderr), shown
    if case.check is not None:
        case.check(result, tmp)


@pytest.mark.parametrize("case", API_CASES, ids=[case.name for case in API_CASES])
def test_api(case, checkpoint, tmp_path):
    model_dir, model, tokenizer = checkpoint
    if case.error is None:
        returned = case.call(model, tokenizer, tmp_path, model_dir)
        if case.check is not None:
            case.check(returned)
        return
    with pytest.raises(case.error, match=case.message):
        case.call(model, tokenizer, tmp_path, model_dir)
