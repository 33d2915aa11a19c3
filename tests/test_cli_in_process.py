"""tests/helpers/cli.py runs `hf-slm` in the test's interpreter for the CLI tests: it must give what a fresh
interpreter gives. `masks` imports no torch, so the fresh interpreters here start in well under a second."""

import subprocess
import sys
import warnings

import pytest

from helpers.cli import run_cli_in_process

FIGURE_2 = "(S (NP the blue bird NP) (VP sings VP) S)"


@pytest.mark.parametrize("argv", [
    ["masks", FIGURE_2, "--json"],  # success: the same stdout
    ["masks", "(S (NP the"],  # a refused input: exit 2 and the same one line
    ["masks", FIGURE_2, "--no-such-option"],  # argparse's SystemExit(2) and its usage
    ["no-such-command"],
], ids=["success", "refused", "bad option", "bad command"])
def test_in_process_gives_what_a_fresh_interpreter_gives(argv, tmp_path):
    fresh = subprocess.run([sys.executable, "-m", "hf_slm.cli", *argv], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120)
    here = run_cli_in_process(*argv, cwd=tmp_path)
    assert (here.returncode, here.stdout, here.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path, monkeypatch):
    import hf_slm.cli

    def broken(argv):
        raise KeyError("a bug")

    monkeypatch.setattr(hf_slm.cli, "main", broken)
    result = run_cli_in_process("masks", FIGURE_2)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.endswith("KeyError: 'a bug'\n")


def test_warnings_print_to_the_commands_stderr_and_the_state_comes_back(tmp_path, monkeypatch):
    import os

    import hf_slm.cli

    def warns(argv):
        print(os.getcwd(), os.environ["HF_SLM_TEST_VARIABLE"], sys.stdin.read())
        warnings.warn("something odd", UserWarning, stacklevel=1)
        warnings.warn("deprecated", DeprecationWarning, stacklevel=1)  # ignored by default outside __main__
        return 0

    monkeypatch.setattr(hf_slm.cli, "main", warns)
    folder, stdin = os.getcwd(), sys.stdin
    with warnings.catch_warnings(record=True) as caught:
        result = run_cli_in_process("x", cwd=tmp_path, stdin="typed", env={"HF_SLM_TEST_VARIABLE": "set"})
    assert result.returncode == 0 and result.stdout == f"{tmp_path} set typed\n"
    assert "UserWarning: something odd" in result.stderr and "deprecated" not in result.stderr
    assert caught == []  # the command's warnings are its output, not the test's
    assert os.getcwd() == folder and "HF_SLM_TEST_VARIABLE" not in os.environ and sys.stdin is stdin
