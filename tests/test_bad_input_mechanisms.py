"""Issue 30's mechanisms, checked over the whole code base rather than case by case (the cases are in
mistake_cases_round_two.py): every numeric option of every command has a type that says its range, and no string
holds a `{name}` placeholder without its f (ruff's RUF027)."""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from hf_slm import option_types
from hf_slm.cli.commands import build_parser

ROOT = Path(__file__).resolve().parents[1]
RANGED_TYPES = {option_types.positive_int, option_types.non_negative_int, option_types.positive_float}


def _parsers(parser, name="hf-slm"):
    """(name, parser) of `parser` and every subcommand below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_numeric_option_says_its_range():
    """argparse's own int / float accept 0 and negatives, which then fail deep inside (`range() arg 3 must not be
    zero`) or are taken for "not given"; hf_slm/option_types.py's types refuse them naming the option."""
    unranged, numeric = [], 0
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.type in (int, float):
                unranged.append(f"{name} {'/'.join(action.option_strings)}")
            numeric += action.type in RANGED_TYPES
    assert not unranged, unranged
    assert numeric > 40  # the walk reached the subcommands


def test_the_types_name_the_value_and_the_range():
    for function, text, message in ((option_types.positive_int, "0", "expected a positive integer, got 0"),
                                    (option_types.positive_int, "2.5", "expected a positive integer, got '2.5'"),
                                    (option_types.non_negative_int, "-1", "expected a non-negative integer, got -1"),
                                    (option_types.positive_float, "nan", "expected a positive number, got nan"),
                                    (option_types.positive_float, "-0.5", "expected a positive number, got -0.5")):
        try:
            function(text)
        except argparse.ArgumentTypeError as error:
            assert str(error) == message
        else:
            raise AssertionError(f"{function.__name__}({text!r}) accepted")
    assert option_types.non_negative_int("0") == 0 and option_types.positive_float("1e-4") == 1e-4
    assert option_types.or_default(0, 20) == 0 and option_types.or_default(None, 20) == 20


def _ruff():
    """The command that runs ruff (the test extra installs it)."""
    try:
        import ruff  # noqa: F401
    except ImportError:
        found = shutil.which("ruff")
        assert found, "ruff is not installed: pip install -e .[test]"
        return [found]
    return [sys.executable, "-m", "ruff"]


def test_no_string_lacks_its_f():
    """A string with `{name}` where `name` is a variable in scope, without its f, prints the braces literally
    (`data prepare --splits train` printed "the part {part!r} is not"): ruff's RUF027 finds them."""
    result = subprocess.run([*_ruff(), "check", "--isolated", "--preview", "--select", "RUF027", "--output-format",
                             "concise", "hf_slm", "modeling", "tokenization"], cwd=ROOT, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
