"""The error boundary of the `hf-slm` command line.

A user's mistake (a missing or unreadable file, a file of the wrong kind, a bad option value, an unreachable
hub) ends a command with one line on stderr, `hf-slm COMMAND: error: MESSAGE`, and exit status 2; Ctrl-C ends
it with `hf-slm COMMAND: interrupted ...` and status 130. Which exceptions count as a user's mistake is
decided by USER_ERRORS and nowhere else: any other exception is a bug in hf-slm and keeps its traceback.
`hf-slm --debug COMMAND` (or HF_SLM_DEBUG=1) lets every exception through, with its traceback.

The readers raise ValueErrors that name the file, line or sentence; the rows below the ValueError row are
for errors that reach the boundary from libraries, which can only say what their own message says.
"""

import os
import re
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

EXIT_ERROR = 2  # what argparse returns for a bad command line, which these errors are akin to
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C


def _os_error(error):
    # FileNotFoundError and its kin keep the file apart from the message: "[Errno 2] No such file ...: 'x'".
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def _not_utf8(error):
    return (f"a file is not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
            "is it compressed or binary?")


# (module, exception class, message): the first row whose class the error is an instance of gives its message.
# A module is looked up only when it is already imported (no error of its classes can exist before), so that
# the boundary imports nothing. huggingface_hub's and transformers' loading errors, requests' and the hub's
# HTTP errors are OSErrors.
USER_ERRORS = (
    ("builtins", "UnicodeDecodeError", _not_utf8),
    ("json", "JSONDecodeError", lambda error: f"not valid JSON: {error}"),
    ("builtins", "ValueError", str),
    ("builtins", "RuntimeError", str),  # torch's errors on a bad input or device, out of memory included
    ("safetensors", "SafetensorError", lambda error: f"a safetensors file cannot be read ({error}); is it truncated?"),
    ("builtins", "OSError", _os_error),
)


def user_error_message(error):
    """The one-line message for `error` when it is a user's mistake (a row of USER_ERRORS), else None."""
    for module, name, message in USER_ERRORS:
        kind = getattr(sys.modules.get(module), name, None)
        if kind is not None and isinstance(error, kind):
            text = message(error).strip() or type(error).__name__
            return re.sub(r"\s*\n\s*", " ", text)
    return None


def debugging(args):
    """Whether errors keep their tracebacks: --debug, or HF_SLM_DEBUG set to anything but "" or "0"."""
    return getattr(args, "debug", False) or os.environ.get("HF_SLM_DEBUG", "") not in ("", "0")


@contextmanager
def insistent_interrupts():
    """Within this block, Ctrl-C is raised again every second until it leaves the block.

    Python drops a KeyboardInterrupt that arrives while it runs a finalizer (a `__del__`, a weakref callback:
    "Exception ignored in ..."), and the command would then go on as if nothing had been pressed. Where signals
    cannot be set (not the main thread, no SIGALRM), Ctrl-C works as Python's default.
    """
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # again in a second, unless the block has been left by then
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield  # SIGINT ignored (`nohup`, a background job) or handled by the caller: theirs to decide
        return
    previous = signal.signal(signal.SIGINT, interrupt), signal.signal(signal.SIGALRM, interrupt)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


def _is_ours(filename):
    """Whether a warning was raised from one of hf-slm's modules (its hub code included)."""
    try:
        path = Path(filename).resolve()
    except (OSError, TypeError):
        return False
    return any(Path(module.__file__).resolve() == path for name, module in list(sys.modules.items())
               if name.split(".")[0] == "hf_slm" and getattr(module, "__file__", None))


@contextmanager
def own_warnings_as_lines(command):
    """Within this block, a warning hf-slm raises is one line, `hf-slm COMMAND: warning: MESSAGE` (`note:` for a
    category whose `label` says so: something to know of the input, not a failure), and the same message is said once
    (two steps that check the same sentences warned twice); a library's warnings show as Python shows them."""
    shown, original = set(), warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if not _is_ours(filename):
            return original(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())
        if text not in shown:
            shown.add(text)
            print(f"hf-slm {command}: {getattr(category, 'label', 'warning')}: {text}", file=sys.stderr)
        return None

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = original


def run_command(function, args, command):
    """`function(args)`'s exit status, with the user's mistakes and Ctrl-C as one line on stderr (module
    docstring), and hf-slm's own warnings as one line each (`own_warnings_as_lines`). `command` names the command in
    that line, e.g. "eval ppl"."""
    if debugging(args):
        return function(args)
    try:
        with insistent_interrupts(), own_warnings_as_lines(command):
            return function(args)
    except KeyboardInterrupt:
        print(f"\nhf-slm {command}: interrupted (hf-slm --debug {command} ... shows where)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        message = user_error_message(error)
        if message is None:
            raise  # a bug in hf-slm: its traceback is what a bug report needs
        print(f"hf-slm {command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
