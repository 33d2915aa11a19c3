"""Publishing: model/tokenizer push_to_hub, `hf-slm push`, Trainer(push_to_hub=True), and loading a pinned
revision in an interpreter without hf_slm; the pickle-weights rules. All against tests/hub_server.py."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers.utils.hub
from datasets import Dataset
from huggingface_hub import HfApi, constants, hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForCausalLM, Trainer, TrainingArguments

from hf_slm import SyntacticDataCollator, TransformerGrammarForCausalLM
from hf_slm.cli import main
from hf_slm.families import registered_families
from hf_slm.modeling.transformer_grammar_model import TransformerGrammarModel
from hf_slm.modeling.safe_loading import PickleWeightsRefusedError
from hf_slm.publishing.hub import check_checkpoint, push_checkpoint, tokenizer_files

from conftest import ISOLATION_PREAMBLE, save_tiny_checkpoint
from hub_server import LocalHub

TOKEN = "hf_local_test_token"
TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (NP (NP (DT the) (NN end)) (PP (IN of) (NP (PRP it)))))",
]
HUB_CODE = {"modeling_slm.py", "configuration_slm.py", "backbone.py", "grammars.py", "generation_slm.py", "search_constraints.py", "safe_loading.py", "tokenization_slm.py",
            "trees.py", "linearizers.py", "tree_type.py",
            # the TG family's own files (the published model is a TG)
            "transformer_grammar_model.py", "transformer_grammar_config.py", "transformer_grammars.py"}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")

# Runs in a fresh interpreter without hf_slm (see conftest.ISOLATION_PREAMBLE), HF_ENDPOINT = the local hub.
CHILD = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer

repo, pinned, inputs_path, output_path = sys.argv[1:5]
inputs = torch.load(inputs_path)
out = {}
for name, revision in (("pinned", pinned), ("main", "main")):
    model = AutoModelForCausalLM.from_pretrained(repo, revision=revision, trust_remote_code=True).eval()
    with torch.no_grad():
        out[name] = model(**inputs["batch"]).logits
tokenizer = AutoTokenizer.from_pretrained(repo, revision=pinned, trust_remote_code=True)
out["encoded"] = tokenizer(inputs["trees"])["input_ids"]
out["classes"] = [type(model).__module__, type(tokenizer).__module__]
torch.save(out, output_path)
'''


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The local hub, with huggingface_hub and transformers (imported already, by conftest) pointed at it."""
    folder = tmp_path_factory.mktemp("hub")
    with LocalHub(folder / "repos", token=TOKEN) as server, pytest.MonkeyPatch.context() as patch:
        cache = folder / "hf_home" / "hub"
        for name, value in (("HF_ENDPOINT", server.url), ("HF_TOKEN", TOKEN), ("HF_HOME", str(folder / "hf_home")),
                            ("HF_HUB_CACHE", str(cache)), ("HF_HUB_DISABLE_TELEMETRY", "1")):
            patch.setenv(name, value)
        # huggingface_hub read the environment when it was imported: its constants need setting as well, and
        # transformers' shared HfApi (made on first use) must be made again with the new endpoint.
        patch.setattr(constants, "ENDPOINT", server.url)
        patch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
        patch.setattr(constants, "HF_HUB_CACHE", str(cache))
        patch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
        patch.setattr(transformers.utils.hub, "_hf_api", None)
        yield server
        assert server.unhandled == [], f"the client asked for routes the test hub does not serve: {server.unhandled}"


@pytest.fixture(scope="module")
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


@pytest.fixture(scope="module")
def published(hub, api, tmp_path_factory):
    """A tiny TG pushed with model.push_to_hub and tokenizer.push_to_hub, then replaced on main by other weights."""
    directory, model, tokenizer = save_tiny_checkpoint(tmp_path_factory.mktemp("tiny"), TREES, vocab_size=40)
    model.push_to_hub("org/tg-ptb", commit_message="Upload model")
    pinned = tokenizer.push_to_hub("org/tg-ptb").oid
    _, newer, _ = save_tiny_checkpoint(tmp_path_factory.mktemp("newer"), TREES, vocab_size=40, seed=1)
    newer.push_to_hub("org/tg-ptb", commit_message="Other weights")
    return {"directory": directory, "model": model, "newer": newer, "tokenizer": tokenizer, "pinned": pinned}


def repo_files(api, repo, revision):
    return {entry.path for entry in api.list_repo_tree(repo, revision=revision, recursive=True)}


def copy_checkpoint(source, target, drop=()):
    shutil.copytree(source, target)
    for name in drop:
        (target / name).unlink()
    return target


def make_pickle_only(directory, model):
    """The checkpoint with its weights as pytorch_model.bin instead of model.safetensors."""
    torch.save(model.state_dict(), directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()
    return directory


# ---- 1. push_to_hub of model and tokenizer ------------------------------------------------------------
def test_model_and_tokenizer_push_to_hub(published, api, hub):
    files = repo_files(api, "org/tg-ptb", published["pinned"])
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer_config.json", "spiece.model",
            "README.md"} | HUB_CODE <= files
    assert not [name for name in files if name.endswith(PICKLE_SUFFIXES)]
    titles = [commit.title for commit in api.list_repo_commits("org/tg-ptb")]
    assert titles == ["Other weights", "Upload tokenizer", "Upload model", "initial commit"]
    # Pinned and current revisions hold different weights; model_info reports the branch head.
    assert api.model_info("org/tg-ptb").sha != published["pinned"]
    assert api.model_info("org/tg-ptb", revision=published["pinned"]).sha == published["pinned"]
    # Every request carried the token (the hub answers 401 otherwise), and no commit held an LFS pointer (400).
    assert not [request for request in hub.requests if request[2] in (400, 401)]


def test_tree_listing_recursive_and_expanded(published, api):
    top = list(api.list_repo_tree("org/tg-ptb", revision=published["pinned"], expand=True))
    weights = next(entry for entry in top if entry.path == "model.safetensors")
    assert weights.last_commit.title == "Upload model"
    tokenizer_config = next(entry for entry in top if entry.path == "tokenizer_config.json")
    assert tokenizer_config.last_commit.oid == published["pinned"]
    local = (published["directory"] / "model.safetensors").read_bytes()
    assert weights.size == len(local)


# ---- 4. loading a pinned revision through the hub, without hf_slm ----------------------------------------
def test_pinned_revision_loads_without_hf_slm(published, hub, tmp_path):
    model, newer, tokenizer = published["model"], published["newer"], published["tokenizer"]
    batch = SyntacticDataCollator.from_tokenizer(tokenizer)(tokenizer(TREES)["input_ids"])
    torch.save({"batch": batch, "trees": TREES}, tmp_path / "inputs.pt")
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE"))}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "fresh_hf_home"), HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONPATH="", PYTHONNOUSERSITE="1")  # no token: the repo is public
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), "org/tg-ptb", published["pinned"], str(tmp_path / "inputs.pt"),
         str(tmp_path / "out.pt")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = torch.load(tmp_path / "out.pt")
    assert all(module.startswith("transformers_modules") for module in out["classes"]), out["classes"]
    with torch.no_grad():
        expected, current = model(**batch).logits, newer(**batch).logits
    assert torch.allclose(out["pinned"], expected, atol=1e-6)
    assert torch.allclose(out["main"], current, atol=1e-6)
    assert not torch.allclose(expected, current, atol=1e-3)  # the pin is what made the difference
    assert out["encoded"] == tokenizer(TREES)["input_ids"]


# ---- 2. hf-slm push -------------------------------------------------------------------------------------
def test_cli_push_writes_the_card_and_leaves_out_pickles(published, api, tmp_path, capsys):
    directory = copy_checkpoint(published["directory"], tmp_path / "run")
    torch.save({"lr": 0.1}, directory / "training_args.bin")
    torch.save({"state": {}}, directory / "optimizer.pt")
    torch.save({"seed": 0}, directory / "rng_state.pth")
    (directory / "checkpoint-2").mkdir()
    (directory / "checkpoint-2" / "config.json").write_text("{}")
    (directory / "notes").mkdir()
    (directory / "notes" / "data.txt").write_text("trained on three trees")

    assert main(["push", str(directory), "--repo", "org/tg-ptb2", "--message", "First release"]) == 0
    out, err = capsys.readouterr()
    sha = out.split("commit ", 1)[1].split()[0]
    assert f'from_pretrained("org/tg-ptb2", revision="{sha}", trust_remote_code=True)' in out
    assert f"/org/tg-ptb2/commit/{sha}" in out
    assert "not publishing 4 file(s)" in err and "checkpoint-2/" in err and "training_args.bin" in err

    files = repo_files(api, "org/tg-ptb2", sha)
    assert {"model.safetensors", "config.json", "tokenizer_config.json", "spiece.model",
            "notes/data.txt"} | HUB_CODE <= files
    assert not [name for name in files if name.endswith(PICKLE_SUFFIXES) or name.startswith("checkpoint-")]
    # The card comes in a commit of its own on top, pinning the commit that holds the weights and code.
    commits = api.list_repo_commits("org/tg-ptb2")
    assert [commit.title for commit in commits] == ["Add the model card (hf-slm card)", "First release", "initial commit"]
    head = commits[0].commit_id
    card = open(hf_hub_download("org/tg-ptb2", "README.md", revision=head), encoding="utf-8").read()
    assert card == (directory / "README.md").read_text(encoding="utf-8")
    assert f'REVISION = "{sha}"' in card and "README.md" not in files

    # Nothing changed: no new commit, the head to pin.
    assert push_checkpoint(directory, "org/tg-ptb2").oid == head
    sha = head
    # A branch and a private repo.
    on_dev = push_checkpoint(directory, "org/tg-ptb2", revision="dev", commit_message="Dev copy")
    refs = {ref.name: ref.target_commit for ref in api.list_repo_refs("org/tg-ptb2").branches}
    assert refs == {"main": sha, "dev": on_dev.oid}
    push_checkpoint(directory, "org/secret", private=True, create_card=False)
    assert api.model_info("org/secret").private is True
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=api.endpoint, token=False).model_info("org/secret")


def test_push_without_card_and_bare_name_goes_to_the_users_namespace(published, api, tmp_path, capsys):
    directory = copy_checkpoint(published["directory"], tmp_path / "bare")
    commit = push_checkpoint(directory, "tiny-tg", create_card=False)
    assert commit.repo_url.repo_id == "test-user/tiny-tg"
    assert "README.md" not in repo_files(api, "test-user/tiny-tg", commit.oid)
    assert not (directory / "README.md").exists()
    assert "publishing without a model card" in capsys.readouterr().err


# ---- 3. Trainer with push_to_hub=True ---------------------------------------------------------------------
def test_trainer_push_to_hub(hub, api, tmp_path):
    _, model, tokenizer = save_tiny_checkpoint(tmp_path / "start", TREES, vocab_size=40)
    dataset = Dataset.from_dict({"input_ids": tokenizer(TREES * 4)["input_ids"]})
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"), push_to_hub=True, hub_model_id="org/trained", max_steps=4,
        per_device_train_batch_size=4, learning_rate=1e-2, save_strategy="steps", save_steps=4, report_to=[],
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, logging_steps=1,
    )
    before = {key: value.clone() for key, value in model.state_dict().items()}
    trainer = Trainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                      data_collator=SyntacticDataCollator.from_tokenizer(tokenizer))
    trainer.train()
    commit = trainer.push_to_hub()
    titles = [entry.title for entry in api.list_repo_commits("org/trained")]
    assert titles[0] == "End of training" and "Training in progress, step 4" in titles
    files = repo_files(api, "org/trained", commit.oid)
    assert {"model.safetensors", "config.json", "tokenizer_config.json", "spiece.model"} | HUB_CODE <= files
    pushed = load_file(hf_hub_download("org/trained", "model.safetensors", revision=commit.oid))
    trained = trainer.model.state_dict()
    assert all(torch.equal(pushed[key], trained[key]) for key in pushed)
    assert not all(torch.equal(before[key], trained[key]) for key in before)  # it did train


# ---- 5. pickle weights ------------------------------------------------------------------------------------
def test_pickle_only_checkpoint_is_refused_unless_allowed(tmp_path):
    directory, model, _ = save_tiny_checkpoint(tmp_path / "pickled", TREES, vocab_size=40)
    make_pickle_only(directory, model)
    for cls in (AutoModelForCausalLM, AutoModel, TransformerGrammarForCausalLM, TransformerGrammarModel):
        with pytest.raises(PickleWeightsRefusedError, match=r"pytorch_model\.bin.*allow_pickle=True") as caught:
            cls.from_pretrained(directory)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, OSError)
    with pytest.raises(PickleWeightsRefusedError, match="use_safetensors=False"):
        TransformerGrammarForCausalLM.from_pretrained(directory, use_safetensors=False)

    loaded = AutoModelForCausalLM.from_pretrained(directory, allow_pickle=True)
    assert not hasattr(loaded.config, "allow_pickle")  # consumed by from_pretrained, not stored in the config
    state = model.state_dict()
    assert all(torch.equal(loaded.state_dict()[key], state[key]) for key in state)
    # Re-saving converts: safetensors only, which loads without the flag.
    loaded.save_pretrained(tmp_path / "converted")
    saved = set(os.listdir(tmp_path / "converted"))
    assert "model.safetensors" in saved and not [name for name in saved if name.endswith(PICKLE_SUFFIXES)]
    TransformerGrammarForCausalLM.from_pretrained(tmp_path / "converted")


def test_pickle_only_repo_on_the_hub_is_refused_unless_allowed(hub, api, tmp_path):
    directory, model, _ = save_tiny_checkpoint(tmp_path / "pickled", TREES, vocab_size=40)
    make_pickle_only(directory, model)
    api.create_repo("org/pickled")
    api.upload_folder(repo_id="org/pickled", folder_path=directory)  # bypasses hf-slm push, which would refuse
    with pytest.raises(PickleWeightsRefusedError, match="org/pickled: no safetensors weights"):
        AutoModelForCausalLM.from_pretrained("org/pickled")
    loaded = AutoModelForCausalLM.from_pretrained("org/pickled", allow_pickle=True)
    assert torch.equal(loaded.output_bias, model.output_bias)


def test_push_refuses_pickle_only_weights(hub, api, tmp_path):
    directory, model, _ = save_tiny_checkpoint(tmp_path / "pickled", TREES, vocab_size=40)
    make_pickle_only(directory, model)
    torch.save({}, directory / "training_args.bin")
    with pytest.raises(ValueError, match=r"weights are pickle files only \(pytorch_model\.bin\); refusing"):
        push_checkpoint(directory, "org/never")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/never")  # refused before anything reached the hub


# ---- 6. errors --------------------------------------------------------------------------------------------
def test_cli_push_errors(published, hub, tmp_path, capsys, monkeypatch):
    directory = str(published["directory"])
    with pytest.raises(SystemExit) as exited:
        main(["push", directory])
    assert exited.value.code != 0
    assert "the following arguments are required: --repo" in capsys.readouterr().err

    for bad in ("a/b/c", "org/-name", "bad name", "/name", "org/na..me"):
        assert main(["push", directory, "--repo", bad]) == 2
        assert f"hf-slm push: error: repository name {bad!r} is not ORG/NAME or NAME" in capsys.readouterr().err
    assert main(["push", str(tmp_path / "missing"), "--repo", "org/x"]) == 2
    assert "missing: no such directory" in capsys.readouterr().err

    monkeypatch.setenv("HF_TOKEN", "hf_wrong_token")
    assert main(["push", directory, "--repo", "org/tg-ptb3", "--no-card"]) == 2
    err = capsys.readouterr().err
    assert "hf-slm push: error: pushing to org/tg-ptb3 failed: " in err and "401 Unauthorized" in err
    assert "Invalid credentials in Authorization header" in err and "HF_TOKEN" in err


def test_push_checkpoint_argument_errors(published):
    for missing in (None, ""):
        with pytest.raises(ValueError, match="a repository name is required"):
            push_checkpoint(published["directory"], missing)


def test_check_checkpoint_names_what_is_missing(published, tmp_path):
    source = published["directory"]
    kept, skipped = check_checkpoint(source)
    assert {"config.json", "model.safetensors", "spiece.model"} | HUB_CODE <= set(kept) and skipped == []

    not_checkpoint = tmp_path / "notes"
    not_checkpoint.mkdir()
    (not_checkpoint / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="is not a checkpoint: it has no config.json"):
        check_checkpoint(not_checkpoint)
    with pytest.raises(ValueError, match="is a file; expected a checkpoint directory"):
        check_checkpoint(not_checkpoint / "notes.txt")

    broken = copy_checkpoint(source, tmp_path / "broken")
    (broken / "config.json").write_text('{\n  "grammar": "tg",\n  oops\n}')
    with pytest.raises(ValueError, match=r"config.json: line 3: not valid JSON"):
        check_checkpoint(broken)

    cases = {
        "model.safetensors": "it has no weights",
        # a TG checkpoint: its auto_map names its family's files, which import the shared ones
        "transformer_grammar_model.py": r"config.json needs transformer_grammar_model.py \(named by its auto_map\)",
        "modeling_slm.py": r"config.json needs modeling_slm.py \(imported by transformer_grammar_model\.py\)",
        "grammars.py": r"config.json needs grammars.py \(imported by \w+\.py\)",
        "tokenization_slm.py": r"tokenizer_config.json needs tokenization_slm.py \(named by its auto_map\)",
        "tokenizer_config.json": r"no tokenizer \(tokenizer_config.json\)",
        "spiece.model": "the SyntacticTokenizer tokenizer needs spiece.model",
    }
    for name, message in cases.items():
        target = copy_checkpoint(source, tmp_path / f"without-{name}", drop=[name])
        with pytest.raises(ValueError, match=message):
            check_checkpoint(target)

    sharded = copy_checkpoint(source, tmp_path / "sharded")
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="names missing shards: model-00001-of-00002.safetensors"):
        check_checkpoint(sharded)


# ---- 6. every other family's checkpoint keeps its hub code (tests/test_families.py pushes them all) -------
def _family_checkpoint(grammar, directory):
    """(model, tokenizer, the trees its tokenizer reads) of a tiny model of `grammar`, saved to `directory`."""
    from hf_slm.modeling.compositional_grammars import BASELINE_GRAMMARS, COMPOSITIONAL_GRAMMARS

    if grammar in COMPOSITIONAL_GRAMMARS or grammar in BASELINE_GRAMMARS:  # paper 003: unlabeled trees
        _, model, tokenizer = save_tiny_checkpoint(directory, TREES, grammar=grammar)
        return model, tokenizer, [tokenizer.unlabel(tree) for tree in TREES]
    if grammar == "syntactic_ordered_memory":  # paper 001: no grammar; a word vocabulary, sentences of words
        from helpers.som_models import SENTENCES, tiny_model

        from hf_slm.families.ordered_memory.data import gold_tree
        from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer

        tokenizer = SyntacticWordTokenizer.train([gold_tree(w, h) for w, h in SENTENCES], linearization="terminals",
                                                 min_count=1)
        model = tiny_model(tokenizer).eval()
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        return model, tokenizer, [" ".join(words) for words, _ in SENTENCES]
    from helpers.dependency_models import TREES as DEPENDENCY_TREES
    from helpers.dependency_models import tiny

    model, tokenizer = tiny(grammar)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model, tokenizer, DEPENDENCY_TREES


# The hub code files each family needs beyond TG's.
FAMILY_HUB_CODE = {"dtg_swift": {"dependency_grammars.py", "tokenization_dependency.py", "transitions.py"},
                   "txl_trans": {"dependency_grammars.py", "tokenization_dependency.py", "transitions.py"},
                   "nb-dn-in-m": {"compositional_grammars.py", "tokenization_compositional.py"},
                   "gpt2-token": {"compositional_grammars.py", "tokenization_compositional.py"},
                   # SOM is chosen by its model_type (it has no grammar)
                   "syntactic_ordered_memory": {"modeling_som.py", "configuration_som.py", "safe_loading.py"}}


def test_the_checks_know_the_vocabulary_files_of_every_familys_tokenizers():
    for family in registered_families():
        for tokenizer_class in family.tokenizer_classes:
            assert tokenizer_files()[tokenizer_class.__name__], (family.name, tokenizer_class.__name__)


@pytest.mark.parametrize("grammar", list(FAMILY_HUB_CODE))
def test_a_family_checkpoint_keeps_its_hub_code_and_needs_its_vocabulary(tmp_path, grammar):
    """What `hf-slm push` uploads of each family's checkpoint (its pushing and loading without hf-slm, for every
    registered family: tests/test_families.py)."""
    directory = tmp_path / "run"
    model, tokenizer, trees = _family_checkpoint(grammar, directory)
    kept, _ = check_checkpoint(directory)
    assert FAMILY_HUB_CODE[grammar] <= set(kept)
    # Without its vocabulary file, the checkpoint of every family's tokenizer is refused.
    vocabulary = [name for name in tokenizer_files()[type(tokenizer).__name__] if name in kept]
    assert vocabulary
    with pytest.raises(ValueError, match=f"the {type(tokenizer).__name__} tokenizer needs"):
        check_checkpoint(copy_checkpoint(directory, tmp_path / "no-vocabulary", drop=vocabulary))

def test_a_proposal_parser_pushes_with_its_card_and_loads_back_pinned(hub, api, tmp_path, capsys):
    """`hf-slm push` on a proposal parser (issue 38): its hub code, vocabularies and card go up; the pinned revision
    loads with AutoModel and gives the parser's trees; without parser_vocab.json the checkpoint is refused."""
    from helpers.parser_models import encode, gum_trees, tiny_parser

    model, tokenizer = tiny_parser("crf", gum_trees(("dev",)))
    directory = tmp_path / "crf"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    assert main(["push", str(directory), "--repo", "org/crf-parser"]) == 0
    sha = capsys.readouterr().out.split("commit ", 1)[1].split()[0]
    files = repo_files(api, "org/crf-parser", sha)
    assert {"model.safetensors", "config.json", "parser_vocab.json", "modeling_crf_parser.py", "span_crf.py",
            "tokenization_parser.py", "parser_trees.py"} <= files
    card = open(hf_hub_download("org/crf-parser", "README.md"), encoding="utf-8").read()
    assert "| kind | `crf` |" in card and f'REVISION = "{sha}"' in card
    loaded = AutoModel.from_pretrained("org/crf-parser", revision=sha, trust_remote_code=True).eval()
    sentences = [["The", "bird", "sings", "."], ["It", "rained", "."]]
    assert loaded.best_structures(**encode(tokenizer, sentences)) == model.best_structures(**encode(tokenizer,
                                                                                                       sentences))
    with pytest.raises(ValueError, match="ProposalParserTokenizer tokenizer needs parser_vocab.json"):
        check_checkpoint(copy_checkpoint(directory, tmp_path / "no-vocabulary", drop=["parser_vocab.json"]))
