"""The manual in docs/: its command-line reference is what `hf-slm ... --help` prints, and it builds offline.

docs/cli.md is written by docs/gen_cli_reference.py; these tests fail when an option changes and the reference
is not regenerated, when a command is missing from it, or when `mkdocs build --strict` finds a broken page,
link or API reference (skipped only where mkdocs is not installed: `pip install -e ".[docs]"`).
"""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", DOCS / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_cli_reference = _generator()


def _reference_sections():
    """{command words: the help text} read back from docs/cli.md."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## `hf-slm((?: [a-z-]+)*)`\n\n```text\n(.*?)\n```$", text, flags=re.MULTILINE | re.DOTALL)
    return {tuple(words.split()): help_text for words, help_text in sections}


def _help_processes(commands):
    """`hf-slm WORDS --help` of each command, as a user's terminal HELP_COLUMNS wide shows it (run together)."""
    environment = {**os.environ, "COLUMNS": str(gen_cli_reference.HELP_COLUMNS)}
    processes = {words: subprocess.Popen([sys.executable, "-m", "hf_slm.cli", *words, "--help"], cwd=ROOT,
                                         env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for words in commands}
    helps = {}
    for words, process in processes.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, (words, err)
        helps[words] = out.rstrip()
    return helps


def _subcommands(help_text):
    """The subcommand names a help text lists under "positional arguments:" as a line {a,b,c} of its own (an
    option's choices are written after the option, never alone on a line)."""
    choices = re.search(r"^  \{([a-z,-]+)\}$", help_text, flags=re.MULTILINE)
    return choices.group(1).split(",") if choices else []


def test_cli_reference_is_up_to_date():
    current = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert current == gen_cli_reference.render(), "docs/cli.md is out of date: run python docs/gen_cli_reference.py"


def test_cli_reference_equals_the_help_of_every_command():
    reference = _reference_sections()
    # Walk the commands as a user would, from the names each --help lists, not from the generator's walk.
    seen, level = {}, [()]
    while level:
        helps = _help_processes(level)
        seen.update(helps)
        level = [(*words, name) for words, text in helps.items() for name in _subcommands(text)]
    assert len(seen) > 20  # every command and eval / data subcommand
    assert set(reference) == set(seen)
    for words, text in seen.items():
        assert reference[words] == text, f"docs/cli.md differs from `hf-slm {' '.join(words)} --help`"


def test_cli_reference_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "cli.md"
    stale.write_text(gen_cli_reference.render().replace("--max-steps", "--max-stepz", 1), encoding="utf-8")
    monkeypatch.setattr(gen_cli_reference, "REFERENCE", stale)
    assert gen_cli_reference.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert gen_cli_reference.main([]) == 0 and gen_cli_reference.main(["--check"]) == 0


@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason='mkdocs is not installed (pip install -e ".[docs]")')
def test_manual_builds_strict_and_offline(tmp_path):
    # --strict turns every warning (a broken link, a page outside the nav, an API name mkdocstrings cannot
    # find) into a failure; the configuration fetches nothing (no remote fonts, no plugins that download).
    # Any download during the build goes to a closed local port and fails.
    offline = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
               "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "NO_PROXY": "", "no_proxy": ""}
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, env=offline, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (site / "index.html").is_file() and (site / "cli" / "index.html").is_file()
    # mkdocstrings rendered the API pages from the docstrings
    assert "register_family" in (site / "api" / "families" / "index.html").read_text(encoding="utf-8")
    # and a reader's browser fetches no fonts either (the theme's font: false)
    assert not any("fonts.googleapis" in page.read_text(encoding="utf-8") for page in site.rglob("*.html"))


def _fenced_blocks(text, language):
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_readme_python_loads_scores_parses_and_generates(tmp_path, monkeypatch):
    from conftest import save_tiny_checkpoint
    from hf_slm.tokenization.trees import read_trees

    trees = read_trees(ROOT / "hf_slm" / "sample_data" / "gum" / "train.txt")[:10]
    save_tiny_checkpoint(tmp_path / "hf-slm-quickstart", trees, vocab_size=60)
    (code,) = [block for block in _fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"), "python")
               if "from_pretrained" in block]
    monkeypatch.chdir(tmp_path)  # the README's checkpoint folder, where the quickstart writes it
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 (the README's own code)
    joint, best = namespace["joint"], namespace["best"]
    assert joint.shape == (1,) and float(joint.detach()[0]) < 0
    assert len(best) == 1 and best[0].startswith("(")


def _commands_in(text):
    """(line, words) of every `hf-slm ...` command (or `-m hf_slm.cli ...`) in the text's bash blocks."""
    for block in _fenced_blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].split(" # ")[0]
            for part in re.split(r"&&|;|\|\|", line):
                match = re.search(r"(?:^|\s)(?:hf-slm|-m hf_slm\.cli)\s(.*)", part)
                if match:
                    yield line.strip(), match.group(1).replace("[", " ").replace("]", " ").split()


def _known_options(parser):
    return {option for action in parser._actions for option in action.option_strings}


@pytest.mark.parametrize("page", ["README.md", *sorted(str(path.relative_to(ROOT)) for path in DOCS.rglob("*.md"))])
def test_every_command_shown_exists(page):
    """A command in the README or the manual names a real command, and only options that command has."""
    from hf_slm.cli.commands import build_parser

    parsers = dict(gen_cli_reference.command_parsers(build_parser()))
    for line, words in _commands_in((ROOT / page).read_text(encoding="utf-8")):
        command = ()
        while words and (*command, words[0]) in parsers:
            command, words = (*command, words[0]), words[1:]
        assert command or words[:1] in ([], ["--help"]), f"{page}: `{line}` names no hf-slm command"
        has_subcommands = any(isinstance(action, argparse._SubParsersAction) for action in parsers[command]._actions)
        assert not (has_subcommands and words and not words[0].startswith("-")), \
            f"{page}: `{line}`: hf-slm {' '.join(command)} has no subcommand {words[0]!r}"
        unknown = {word.split("=")[0] for word in words if word.startswith("--")} - _known_options(parsers[command])
        assert not unknown, f"{page}: `{line}`: hf-slm {' '.join(command)} has no {sorted(unknown)}"


def test_architecture_file_map_lists_every_hub_module():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    for folder in ("modeling", "tokenization"):
        for module in sorted((ROOT / folder).glob("*.py")):
            if module.name != "__init__.py":
                assert f"  {module.name} " in text, f"docs/architecture.md's file map lacks {folder}/{module.name}"


def test_readme_links_reach_files_of_the_repository():
    """The README is read on a forge, outside the mkdocs build: its relative links must name files that exist."""
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


@pytest.mark.parametrize("page", ["README.md", *sorted(str(path.relative_to(ROOT)) for path in DOCS.rglob("*.md"))])
def test_code_fences_are_closed(page):
    # Markdown renders an unclosed fence as code to the end of the page, and mkdocs does not warn about it.
    fences = [line for line in (ROOT / page).read_text(encoding="utf-8").splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0, f"{page}: an unclosed ``` block"


def test_benchmark_figures_are_the_scripts_own_pages():
    """The benchmarks page holds no table of its own: every table is a page a benchmark wrote (`--markdown`), headed
    by what was measured where, when and by which command, and every such page is shown."""
    page = (DOCS / "benchmarks.md").read_text()
    assert not [line for line in page.splitlines() if line.lstrip().startswith("|")], "a table typed into the page"
    included = set(re.findall(r'^--8<-- "(benchmarks/results/[^"]+)"$', page, flags=re.MULTILINE))
    written = {str(path.relative_to(ROOT)) for path in (ROOT / "benchmarks" / "results").glob("*.md")}
    assert included == written, (included, written)
    for name in written:
        lines = (ROOT / name).read_text().splitlines()
        assert lines[0].startswith("### "), name
        assert re.match(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC on .+, hf-slm \S+, by `python benchmarks/\w+\.py", lines[2]), \
            (name, lines[2])


def test_the_lm_eval_snippet_names_the_device_the_readme_installs():
    """Issue 39: the README installs the CPU build of torch; lm-eval's default device is cuda, on which the snippet
    of docs/using-a-checkpoint.md stopped with "Torch not compiled with CUDA enabled"."""
    text = (DOCS / "using-a-checkpoint.md").read_text(encoding="utf-8")
    start = text.index('get_model("hf").create_from_arg_string(')
    snippet = text[start : text.index("\n", text.index("\n", start) + 1)]  # the call's two lines
    assert "device=cpu" in snippet
