"""The `hf-slm` error boundary (hf_slm/cli/errors.py) and the text-file reader (hf_slm/data/text_files.py): which
exceptions are a user's mistake, --debug, Ctrl-C on a running command, an unreachable hub. The mistakes
themselves are issue 12's table (tests/mistake_cases_cli.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from conftest import save_tiny_checkpoint

from hf_slm.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, run_command, user_error_message
from hf_slm.data.text_files import read_text
from helpers.cli import run_cli_in_process
from helpers.processes import read_stderr_until
from helpers.ptb_trees import TREES

pytestmark = pytest.mark.slow  # conftest.py: scheduled first


def _raise(error):
    raise error


def _bad_utf8():
    try:
        b"ok \xff".decode("utf-8")
    except UnicodeDecodeError as error:
        return error


def _bad_json():
    try:
        json.loads('{"a": ')
    except json.JSONDecodeError as error:
        return error


@pytest.mark.parametrize("error, message", [
    (ValueError("data file x.txt is empty"), "data file x.txt is empty"),
    (ValueError("first line\n  second line"), "first line second line"),  # always one line
    (RuntimeError("CUDA out of memory"), "CUDA out of memory"),
    (FileNotFoundError(2, "No such file or directory", "x/suite.json"), "x/suite.json: No such file or directory"),
    (PermissionError(13, "Permission denied", "/root/x"), "/root/x: Permission denied"),
    (OSError("We couldn't connect to 'https://huggingface.co'.\nCheck your connection."),
     "We couldn't connect to 'https://huggingface.co'. Check your connection."),
    (_bad_utf8(), r"a file is not UTF-8 text (byte 0xff at offset 3); is it compressed or binary?"),
    (_bad_json(), "not valid JSON: Expecting value: line 1 column 7 (char 6)"),
    (ValueError(), "ValueError"),
])
def test_user_errors_are_one_line(error, message):
    assert user_error_message(error) == message


@pytest.mark.parametrize("error", [AttributeError("x"), KeyError("regions"), TypeError("x"), IndexError(0),
                                   NameError("x"), AssertionError()])
def test_bugs_are_not_user_errors(error):
    assert user_error_message(error) is None


def test_a_bug_keeps_its_traceback(capsys):
    with pytest.raises(AttributeError):
        run_command(lambda args: _raise(AttributeError("'NoneType' object has no attribute 'x'")),
                    SimpleNamespace(debug=False), "parse")
    assert capsys.readouterr().err == ""


def test_a_user_error_is_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("HF_SLM_DEBUG", raising=False)
    status = run_command(lambda args: _raise(ValueError("data file x is empty")), SimpleNamespace(debug=False), "eval ppl")
    assert status == EXIT_ERROR
    assert capsys.readouterr().err == "hf-slm eval ppl: error: data file x is empty\n"


def test_keyboard_interrupt_is_one_line_and_exit_130(capsys, monkeypatch):
    monkeypatch.delenv("HF_SLM_DEBUG", raising=False)
    assert run_command(lambda args: _raise(KeyboardInterrupt()), SimpleNamespace(debug=False), "train") == EXIT_INTERRUPTED
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("hf-slm train: interrupted")


@pytest.mark.parametrize("debug, environment", [(True, ""), (False, "1")])
def test_debug_lets_errors_through(debug, environment, monkeypatch):
    monkeypatch.setenv("HF_SLM_DEBUG", environment)
    with pytest.raises(ValueError, match="data file x is empty"):
        run_command(lambda args: _raise(ValueError("data file x is empty")), SimpleNamespace(debug=debug), "eval ppl")


def test_debug_flag_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_SLM_DEBUG", raising=False)
    arguments = ["parse", "--model", str(tmp_path / "missing"), "the bird"]
    quiet = run_cli_in_process(*arguments)
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    shown = run_cli_in_process("--debug", *arguments)
    assert shown.returncode == 1
    assert "Traceback (most recent call last)" in shown.stderr
    assert f"ValueError: model folder {tmp_path / 'missing'} does not exist" in shown.stderr


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory, _, _ = save_tiny_checkpoint(tmp_path_factory.mktemp("cli-errors") / "tg", TREES)
    return directory


def test_ctrl_c_on_a_running_evaluation_is_one_line_and_exit_130(checkpoint, tmp_path):
    data = tmp_path / "sentences.txt"
    data.write_text("the blue bird sings .\na dog barks at the moon .\n" * 2000)
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("HF_SLM_DEBUG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "hf_slm.cli", "eval", "ppl", "--model", str(checkpoint), "--data", str(data),
         "--output", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        # As from a terminal: a runner that starts the suite in the background (`cmd &` in a script) passes
        # SIGINT on ignored, and Python then leaves it ignored, so Ctrl-C would never reach the command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Wait until the evaluation runs (its progress bar counts sentences), then press Ctrl-C.
    seen = read_stderr_until(process, lambda seen: b"sentence/s" in seen, timeout=300)
    assert process.poll() is None, seen.decode(errors="replace")
    process.send_signal(signal.SIGINT)
    try:
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()  # no evaluation left running when the assertion fails
    stderr = (seen + rest).decode(errors="replace")
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.startswith("hf-slm")]
    assert lines == ["hf-slm eval ppl: interrupted (hf-slm --debug eval ppl ... shows where)"], stderr


def test_ctrl_c_that_python_drops_once_still_stops_the_command(monkeypatch, capsys):
    """Python drops a KeyboardInterrupt raised while a finalizer runs; the command must stop all the same."""
    monkeypatch.delenv("HF_SLM_DEBUG", raising=False)
    went_on = []

    def command(args):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # what happens to an interrupt that arrives inside a __del__
        went_on.append(True)
        time.sleep(30)  # the timer's second Ctrl-C ends this sleep (a signal handler's exception interrupts it)
        return 0

    assert run_command(command, SimpleNamespace(debug=False), "eval ppl") == EXIT_INTERRUPTED
    assert went_on == [True]
    assert "hf-slm eval ppl: interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the caller's handlers are back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_an_unreachable_hub_is_one_line(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants
    import huggingface_hub.utils._http as http

    # Nothing listens on port 9 (discard). huggingface_hub retries the connection 5 times, waiting 1 + 2 + 4 + 8 + 8 s
    # in all; the waits are recorded here, not slept, and the message is what the user sees after them.
    waits = []
    monkeypatch.setattr(http, "time", SimpleNamespace(**{**vars(time), "sleep": waits.append}))
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    result = run_cli_in_process("parse", "--model", "someone/some-model", "the bird", offline=False)
    assert waits, "huggingface_hub did not retry: the connection was not attempted"
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("hf-slm")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hf-slm parse: error: cannot reach the hub at http://127.0.0.1:9 for "
                               "'someone/some-model' (") and lines[0].endswith("(offline?)"), lines[0]


def test_reading_text_names_the_first_bad_byte_past_a_chunk(tmp_path):
    # 1 MiB - 1 ASCII bytes, then "é" across the reader's chunk boundary, then a byte that is not UTF-8.
    path = tmp_path / "long.txt"
    path.write_bytes(b"a" * ((1 << 20) - 1) + "\u00e9".encode() + b" \xff\n")
    with pytest.raises(ValueError, match=rf"corpus {path} is not UTF-8 text \(byte 0xff at offset {(1 << 20) + 2}\)"):
        read_text(path, "corpus")
    path.write_bytes(b"ends inside a character \xc3")
    with pytest.raises(ValueError, match=r"is not UTF-8 text \(byte 0xc3 at offset 24\)"):
        read_text(path, "corpus")
    path.write_bytes("caf\u00e9\r\n".encode())
    assert read_text(path, "corpus") == "caf\u00e9\n"  # otherwise as open(path, encoding="utf-8") reads it


def test_hf_slms_own_warnings_are_one_line_each_and_said_once(tmp_path):
    """Issue 39: unknown words were a raw UserWarning with a line of source code, and `eval ppl` printed it twice (two
    steps check the same sentences); a library's warning keeps Python's form."""
    directory = save_tiny_checkpoint(tmp_path / "m", TREES, vocab_size=40)[0]
    data = tmp_path / "data.txt"
    data.write_text("the bird sings\nthe \u00e7\u00e9 sings\n", encoding="utf-8")
    result = run_cli_in_process("eval", "ppl", "--model", str(directory), "--data", str(data), "--output",
                                str(tmp_path / "out"), "--beam-size", "4", "--word-beam-size", "2")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "go through <unk>" in line]
    assert len(lines) == 1 and lines[0].startswith("hf-slm eval ppl: note: 1 word(s) go through <unk>"), lines
    assert "UserWarning" not in result.stderr and "check_sentences" not in result.stderr


def test_a_librarys_warning_goes_to_pythons_display(monkeypatch, capsys):
    import warnings

    import hf_slm.search.beam
    from hf_slm.cli.errors import own_warnings_as_lines

    passed_on = []
    monkeypatch.setattr(warnings, "showwarning", lambda *arguments, **_: passed_on.append(arguments[:4]))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with own_warnings_as_lines("x"):
            warnings.warn_explicit("from elsewhere", UserWarning, "/some/library.py", 3)
            warnings.warn_explicit("from hf-slm", UserWarning, hf_slm.search.beam.__file__, 3)
    assert [(str(message), filename) for message, _, filename, _ in passed_on] == [("from elsewhere",
                                                                                   "/some/library.py")]
    assert capsys.readouterr().err == "hf-slm x: warning: from hf-slm\n"


def test_a_word_read_as_its_unknown_word_class_is_said_too():
    """Issue 39: a word vocabulary (SOM's, paper 000's PTB presets) read `students` as `<UNK-LC-s>` silently."""
    from hf_slm.search.beam import words_to_pieces
    from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer

    trees = ["(S (NP the birds) (VP sing))", "(S (NP the bird) (VP sings))", "(S (NP a bird) (VP sings))"]
    tokenizer = SyntacticWordTokenizer.train(trees, min_count=2, linearization="terminals")  # "birds": <UNK-LC-s>
    _, unknown = words_to_pieces(tokenizer, ["bird", "students"])
    assert tokenizer.convert_ids_to_tokens(tokenizer("students", is_split_into_words=True,
                                                     add_special_tokens=False)["input_ids"]) == ["<UNK-LC-s>"]
    assert unknown == ["students"]
