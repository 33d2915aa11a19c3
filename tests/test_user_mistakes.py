"""Issue 12's table: a user's mistakes and edge inputs, through the CLI (each in a fresh interpreter) and the
Python API. Every error is one line naming the input, with no traceback; every silent case now gives the
corrected result. The cases live in `mistake_cases_<area>.py`; this file only runs them.

CLI cases run in parallel subprocesses (one thread each), since each pays the interpreter's import time.
"""

import importlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import save_tiny_checkpoint
from mistake_cases import ApiCase, CliCase
from helpers.ptb_trees import TREES

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
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HOME=str(tmp / ".hf"), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "hf_slm.cli", *argv], capture_output=True, text=True, env=env,
                          input=case.stdin, cwd=tmp, timeout=600)


@pytest.fixture(scope="module")
def cli_results(request, model_dir, tmp_path_factory):
    """Starts every selected CLI case at once (a few at a time); each test waits for its own."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "callspec", None) and isinstance(item.callspec.params.get("case"), CliCase)]
    runnable = [case for case in selected if not (case.needs_shared_data and not SHARED_DATA.is_dir())]
    root = tmp_path_factory.mktemp("mistakes")
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    futures = {case.name: pool.submit(_run, case, model_dir, root / re.sub(r"\W", "_", case.name)) for case in runnable}
    yield {name: (future, root / re.sub(r"\W", "_", name)) for name, future in futures.items()}
    pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("case", CLI_CASES, ids=[case.name for case in CLI_CASES])
def test_cli(case, cli_results):
    if case.needs_shared_data and not SHARED_DATA.is_dir():
        pytest.skip("needs ../shared/data")
    future, tmp = cli_results[case.name]
    result = future.result()
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == case.exit_code, shown
    assert "Traceback" not in result.stderr, shown
    if case.exit_code != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("hf-slm")]
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
