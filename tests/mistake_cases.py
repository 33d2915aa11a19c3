"""The case types of issue 12's table (`test_user_mistakes.py`): a user's mistake or edge input, run as the
user would, with what must come back.

Case modules are the files `tests/mistake_cases_<area>.py`; each defines `CASES`, a list of `CliCase` and
`ApiCase`. The table collects every module, so areas are added without touching the runner.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class CliCase:
    """`hf-slm *argv` in a folder of its own, with the exit status, stdout and stderr a fresh interpreter gives
    (run in the test's own: tests/helpers/cli.py).

    argv: the arguments; `{model}` is a tiny trained checkpoint (read-only: copy it under `{tmp}` to change
        it), `{tmp}` the case's own empty folder, `{shared}` ../shared/data (the case is skipped when absent).
    prepare: writes the case's inputs, called as prepare(tmp: Path, model: Path) before the run.
    exit_code: the exit status expected (0 for behaviour that must now succeed).
    message: a regular expression stderr must match (searched), e.g. the file and line it names; for exit 0,
        matched against stdout + stderr.
    check: for a silent case, asserts the corrected result: check(result: CompletedProcess, tmp: Path).
    stdin: text given on standard input.
    """

    name: str
    argv: list[str]
    message: str
    exit_code: int = 2
    prepare: Callable[[Path, Path], None] | None = None
    check: Callable[[Any, Path], None] | None = None
    stdin: str | None = None
    needs_shared_data: bool = False


@dataclass
class ApiCase:
    """A Python API call that must raise `error` with a message matching `message`, or (error None) return
    normally and pass `check`.

    call: call(model, tokenizer, tmp: Path, model_dir: Path) with the tiny checkpoint loaded.
    """

    name: str
    call: Callable[..., Any]
    error: type | None
    message: str = ""
    check: Callable[[Any], None] | None = None
    extra: dict = field(default_factory=dict)
