"""Publishing a checkpoint to the Hugging Face Hub (or any server speaking its API, via HF_ENDPOINT).

`push_checkpoint` checks that a folder is a loadable hf-slm checkpoint (config, safetensors weights, the hub
code its auto_map names and everything that code imports, the tokenizer), refuses to publish weights that
exist only as pickles, leaves out the files a Trainer run also writes (checkpoint-* folders, optimizer and
RNG states, training_args.bin: pickles all), writes the model card when there is none, and uploads the rest
as one commit with huggingface_hub. The commit id it returns is what users pin with `revision=`, which
matters because loading this checkpoint with trust_remote_code runs its Python files.
"""

import json
import sys
from fnmatch import fnmatchcase
from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, HFValidationError, filter_repo_objects, validate_repo_id
from transformers.dynamic_module_utils import get_relative_imports

from ..families import registered_families
from ..parsers.kinds import parser_kinds

# Files never published: Python pickles (loading them can run code) and Trainer's resumable checkpoints.
# fnmatch patterns over paths relative to the checkpoint, as huggingface_hub's upload_folder applies them.
PICKLE_PATTERNS = ["*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt"]
SKIPPED_PATTERNS = PICKLE_PATTERNS + ["checkpoint-*"]
# Pickles a Trainer writes next to the weights: training state, not weights.
TRAINER_STATE_PATTERNS = ["training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state*.pth"]


def tokenizer_files():
    """{tokenizer class name: the vocabulary files a saved tokenizer of that class has one of} over the tokenizer
    classes of every registered family (Family.tokenizer_classes): its piece model's (spiece.model, or
    byte_bpe.json for byte-level BPE pieces; a word vocabulary's), in the order an error names them; and a proposal
    parser's (hf_slm/parsers/kinds.py: its vocabularies, parser_vocab.json)."""
    files = {cls.__name__: list(cls.vocab_files_names.values())
             for family in registered_families() for cls in family.tokenizer_classes}
    for kind in parser_kinds():
        tokenizer_class = kind.resolved("tokenizer_class")
        files[tokenizer_class.__name__] = [tokenizer_class.vocab_files_names["vocab_file"]]
    return files


def check_repo_name(repo_id):
    """`repo_id` if it is a Hub repo name, ORG/NAME or NAME; a ValueError saying what is wrong otherwise."""
    if not repo_id:
        raise ValueError("a repository name is required: ORG/NAME (or NAME for your own namespace)")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ValueError(f"repository name {repo_id!r} is not ORG/NAME or NAME: {error}") from None
    if "/" in repo_id and not repo_id.split("/")[0]:
        raise ValueError(f"repository name {repo_id!r} is not ORG/NAME or NAME: the organization is empty")
    return repo_id


def read_json(path):
    """A JSON file's content; a ValueError naming the file and line when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None


def _auto_map_modules(auto_map):
    """Module names (file stems) that an auto_map's "module.Class" entries point to, in this repository."""
    modules = set()
    for value in auto_map.values():
        for reference in value if isinstance(value, list) else [value]:
            # "other/repo--module.Class" names code in another repository: nothing to check here.
            if reference and "--" not in reference:
                modules.add(reference.rsplit(".", 1)[0])
    return modules


def _check_hub_code(directory, files, json_name, auto_map):
    """Every module an auto_map names is a file of the checkpoint, and so is every module those import."""
    pending = [(module, None) for module in sorted(_auto_map_modules(auto_map))]
    seen = set()
    while pending:
        module, importer = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        if f"{module}.py" not in files:
            why = f"imported by {importer}.py" if importer else "named by its auto_map"
            raise ValueError(
                f"{directory}: {json_name} needs {module}.py ({why}), but the checkpoint has no {module}.py; "
                "save the model and tokenizer with save_pretrained, which copies the hub code"
            )
        pending.extend((name, module) for name in get_relative_imports(directory / f"{module}.py"))


def checkpoint_files(directory):
    """(files to publish, files left out), as sorted paths relative to `directory`; checks nothing."""
    every = sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*") if path.is_file())
    every = list(filter_repo_objects(every, ignore_patterns=DEFAULT_IGNORE_PATTERNS))
    kept = list(filter_repo_objects(every, ignore_patterns=SKIPPED_PATTERNS))
    return kept, sorted(set(every) - set(kept))


def check_checkpoint(directory):
    """Validate a checkpoint folder for publishing; return (files to publish, files left out).

    Required: config.json; safetensors weights (model.safetensors, or an index and all its shards); the
    Python files config.json's and tokenizer_config.json's auto_map name, and their sibling imports;
    tokenizer_config.json and the vocabulary file of hf-slm tokenizers. Weights only as pickles are refused.
    """
    directory = Path(directory)
    if not directory.exists():
        raise ValueError(f"{directory}: no such directory (expected a checkpoint saved with save_pretrained)")
    if not directory.is_dir():
        raise ValueError(f"{directory} is a file; expected a checkpoint directory saved with save_pretrained")
    kept, skipped = checkpoint_files(directory)
    files = set(kept)
    if "config.json" not in files:
        raise ValueError(f"{directory} is not a checkpoint: it has no config.json (save one with save_pretrained)")
    config = read_json(directory / "config.json")
    weights = sorted(name for name in files if name.endswith(".safetensors") and "/" not in name)
    if "model.safetensors.index.json" in files:
        shards = set(read_json(directory / "model.safetensors.index.json").get("weight_map", {}).values())
        missing = sorted(shards - files)
        if missing:
            raise ValueError(f"{directory}: model.safetensors.index.json names missing shards: {', '.join(missing)}")
    elif not weights:
        pickles = [name for name in skipped if "/" not in name and not name.startswith("checkpoint-")
                   and not any(fnmatchcase(name, pattern) for pattern in TRAINER_STATE_PATTERNS)]
        if pickles:
            raise ValueError(
                f"{directory}: the weights are pickle files only ({', '.join(pickles)}); refusing to publish "
                "them, since loading a pickle can run code. Convert first: from_pretrained(DIR, allow_pickle=True)"
                ".save_pretrained(NEW_DIR) writes model.safetensors"
            )
        raise ValueError(f"{directory} is not a checkpoint: it has no weights (model.safetensors)")
    _check_hub_code(directory, files, "config.json", config.get("auto_map", {}))
    if "tokenizer_config.json" not in files:
        raise ValueError(
            f"{directory}: no tokenizer (tokenizer_config.json); save it into the checkpoint with "
            "tokenizer.save_pretrained(DIR) so that AutoTokenizer can load it"
        )
    tokenizer_config = read_json(directory / "tokenizer_config.json")
    _check_hub_code(directory, files, "tokenizer_config.json", tokenizer_config.get("auto_map", {}))
    names = tokenizer_files().get(tokenizer_config.get("tokenizer_class"), [])
    if names and not any(name in files for name in names):
        raise ValueError(f"{directory}: the {tokenizer_config['tokenizer_class']} tokenizer needs {' or '.join(names)}, "
                         "which is missing; save the tokenizer again with save_pretrained")
    return kept, skipped


def _describe_skipped(skipped):
    """Left-out files for a note: each Trainer checkpoint folder once, other files by name."""
    shown = []
    for name in skipped:
        top = name.split("/")[0]
        label = f"{top}/" if "/" in name and fnmatchcase(top, "checkpoint-*") else name
        if label not in shown:
            shown.append(label)
    return ", ".join(shown)


def push_checkpoint(directory, repo_id, token=None, private=False, revision=None, commit_message=None,
                    endpoint=None, create_card=True):
    """Publish the checkpoint in `directory` to the Hub repository `repo_id`; return the commit.

    directory: a folder written by save_pretrained (model and tokenizer), checked by `check_checkpoint`.
    repo_id: "ORG/NAME", or "NAME" in the namespace of the token's user; created if absent.
    token: a Hub token with write access (default: HF_TOKEN, or the one `hf auth login` saved).
    private: create the repository private (otherwise the namespace's default); an existing one is unchanged.
    revision: the branch to commit to (created from main if absent; default main).
    commit_message: default "Upload <folder name> with hf-slm".
    endpoint: the Hub's URL (default: HF_ENDPOINT, else https://huggingface.co).
    create_card: when the checkpoint has no README.md, write one with hf_slm.publishing.model_card.write_model_card
        after the upload, pinning the upload's commit in its loading example, and commit it on top.

    Pickle files and Trainer's checkpoint-* folders are left out, with a note on stderr. The returned
    huggingface_hub.CommitInfo has `oid` (the commit id to pin: revision=commit.oid), `commit_url` and
    `repo_url`. Unchanged files are not uploaded again; if nothing changed, the branch's head is returned.
    """
    repo_id = check_repo_name(repo_id)
    directory = Path(directory)
    kept, skipped = check_checkpoint(directory)
    if skipped:
        print(f"note: not publishing {len(skipped)} file(s) (pickles and Trainer checkpoints): "
              f"{_describe_skipped(skipped)}", file=sys.stderr)
    api = HfApi(endpoint=endpoint, token=token, library_name="hf-slm")
    if "/" not in repo_id:  # a bare NAME goes to the token's user, whom the card's loading example must name
        repo_id = f"{api.whoami()['name']}/{repo_id}"
    write_card = "README.md" not in kept and create_card
    if "README.md" not in kept and not create_card:
        print(f"note: {directory} has no README.md; publishing without a model card", file=sys.stderr)
    if write_card:
        from .model_card import build_model_card

        build_model_card(directory, repo_id=repo_id)  # any problem with the card shows before the hub changes
    # Only now, with everything local checked, does anything change on the hub.
    repo_id = api.create_repo(repo_id, private=True if private else None, exist_ok=True).repo_id
    if revision is not None and revision != "main":
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    message = commit_message or f"Upload {directory.resolve().name} with hf-slm"
    commit = api.upload_folder(repo_id=repo_id, folder_path=directory, commit_message=message, revision=revision,
                               ignore_patterns=list(SKIPPED_PATTERNS))
    if write_card:
        # The card pins the commit that holds the weights and code, so it is written after that commit.
        from .model_card import write_model_card

        card = write_model_card(directory, repo_id=repo_id, revision=commit.oid)
        print(f"wrote the model card {card} (pinning revision {commit.oid})", file=sys.stderr)
        api.upload_file(path_or_fileobj=str(card), path_in_repo="README.md", repo_id=repo_id, revision=revision,
                        commit_message="Add the model card (hf-slm card)")
    return commit
