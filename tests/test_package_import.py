"""`import hf_slm` is lazy (PEP 562) and still registers the Auto classes, whatever the import order.

Each case runs in a fresh interpreter: the test session has long imported torch and transformers.
"""

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import save_tiny_checkpoint

import hf_slm

TREES = ["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (NP (DT a) (NN dog)) (VP (VBZ barks)))"]

# After the case's own imports: load the checkpoint through the Auto classes, without trust_remote_code.
LOAD = """
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
report["config"] = type(AutoConfig.from_pretrained(checkpoint)).__module__
report["model"] = type(AutoModelForCausalLM.from_pretrained(checkpoint)).__module__
report["tokenizer"] = type(AutoTokenizer.from_pretrained(checkpoint)).__module__
"""


def _run(checkpoint, code, load=False):
    """Run `code` (then LOAD if `load`) in a fresh interpreter; returns the `report` dict it filled."""
    script = "import json, sys\ncheckpoint = sys.argv[1]\nreport = {}\n" + textwrap.dedent(code)
    script += (LOAD if load else "") + "\nprint(json.dumps(report))\n"
    result = subprocess.run([sys.executable, "-c", script, str(checkpoint)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory, _, _ = save_tiny_checkpoint(tmp_path_factory.mktemp("import") / "tg", TREES)
    return directory


def _loaded_from_hf_slm(report):
    return all(report[key].startswith("hf_slm.") for key in ("config", "model", "tokenizer"))


def test_import_hf_slm_alone_imports_nothing_heavy_and_registers_once_transformers_comes(checkpoint):
    report = _run(checkpoint, """
        import hf_slm
        report["heavy_after_import"] = [m for m in ("torch", "transformers", "datasets") if m in sys.modules]
    """, load=True)
    assert report["heavy_after_import"] == []
    assert _loaded_from_hf_slm(report), report


@pytest.mark.parametrize("imports", [
    "import transformers\nimport hf_slm",  # transformers first
    "from hf_slm.modeling.grammars import ActionLayout\nimport transformers",  # numpy-only submodule, then transformers
    "from hf_slm.search.beam import score",  # a submodule that brings torch
    "from hf_slm import SyntacticTokenizer",  # a name that needs transformers
])
def test_auto_classes_are_registered_whatever_the_import_order(checkpoint, imports):
    report = _run(checkpoint, imports + "\n", load=True)
    assert _loaded_from_hf_slm(report), report


def test_numpy_only_names_leave_torch_and_transformers_unimported(checkpoint):
    report = _run(checkpoint, """
        from hf_slm import get_grammar, parse_tree, top_down_actions
        actions = top_down_actions(parse_tree("(S (NP the bird) (VP sings))"))
        report["actions"] = actions
        report["heavy"] = [m for m in ("torch", "transformers") if m in sys.modules]
    """)
    assert report["actions"] == ["(S", "(NP", "the", "bird", "NP)", "(VP", "sings", "VP)", "S)"]
    assert report["heavy"] == []


def test_every_public_name_resolves():
    for name in hf_slm.__all__:
        assert getattr(hf_slm, name) is not None, name
    assert set(hf_slm.__all__) <= set(dir(hf_slm))
    assert hf_slm.search.beam.score is hf_slm.score  # submodules are attributes too, as with the eager package
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        hf_slm.no_such_name  # noqa: B018
