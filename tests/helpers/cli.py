"""`hf-slm ARGS` run in this interpreter, with what a fresh one would give: exit status, stdout and stderr.

A fresh interpreter pays the imports of torch and transformers (5-10 s on a busy 2-core machine) before the
command starts; most CLI tests are about the command, not the process, and run it here through `main`, the
function the entry point and `python -m hf_slm.cli` call. What the process gives beyond `main` is kept: an
uncaught exception prints its traceback to stderr and exits 1, SystemExit's code is the status, warnings print
to stderr as with Python's default filters, stdin is the text given, the working directory and environment
variables are the ones given, and torch computes on one thread (the subprocesses ran with OMP_NUM_THREADS=1).
Tests of the process itself (Ctrl-C, the entry point, an interpreter without hf_slm) still start one.
"""

import contextlib
import io
import os
import subprocess
import sys
import traceback
import warnings

import torch

# Python's filters when no -W option or PYTHONWARNINGS is given (the `warnings` module documentation).
DEFAULT_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)


@contextlib.contextmanager
def _environment(changes):
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _hub_offline(offline):
    """huggingface_hub reads HF_HUB_OFFLINE when it is imported: an environment variable set later is not seen."""
    import huggingface_hub.constants as constants

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = offline
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


@contextlib.contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _print_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_cli_in_process(*argv, cwd=None, stdin=None, env=None, offline=True):
    """`hf-slm *argv` in this interpreter, in folder `cwd`, with `stdin` as its standard input and the variables
    of `env` added to the environment; the hub is offline unless `offline` is False. Returns a
    subprocess.CompletedProcess (text stdout and stderr), as `subprocess.run(..., capture_output=True,
    text=True)` of the command would."""
    from hf_slm.cli import main

    argv = [str(argument) for argument in argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    previous_folder = os.getcwd()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(dict(env or {})))
        stack.enter_context(_hub_offline(offline))
        stack.enter_context(_one_thread())
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        stack.enter_context(warnings.catch_warnings())
        warnings.resetwarnings()
        for action, category, module in reversed(DEFAULT_WARNING_FILTERS):
            warnings.filterwarnings(action, category=category, module=module or "")
        # to this command's stderr, not to pytest's record of the test's warnings (catch_warnings restores it)
        warnings.showwarning = _print_warning
        saved_stdin, sys.stdin = sys.stdin, io.StringIO(stdin or "")
        stack.callback(setattr, sys, "stdin", saved_stdin)
        if cwd is not None:
            os.chdir(cwd)
            stack.callback(os.chdir, previous_folder)
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
        except Exception:  # what the interpreter does with an exception that nothing caught
            traceback.print_exc(file=sys.stderr)
            status = 1
    if status is None:
        status = 0
    elif not isinstance(status, int):  # sys.exit("message"): printed, status 1
        stderr.write(f"{status}\n")
        status = 1
    return subprocess.CompletedProcess(["hf-slm", *argv], status, stdout.getvalue(), stderr.getvalue())
