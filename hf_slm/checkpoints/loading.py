"""Loading a checkpoint for the command line, from a local folder or a hub repository id, with one-line errors.

transformers reports a missing folder as a malformed repository id, a config.json cut short as an OSError at
the end of a long traceback, a truncated model.safetensors as a SafetensorError that names no file, and an
unreachable hub as a chain of connection errors. `check_checkpoint_folder` looks at a local folder before
transformers does, and `load_checkpoint` rephrases what transformers raises for a hub id, so that each of
these is one ValueError naming the folder, file or id and what was expected.
"""

import json
import re
from pathlib import Path

# NAME or ORG/NAME: what may be a hub repository id (huggingface_hub's rule is stricter; this tells ids from
# paths such as ./model, /runs/tg or runs/tg/checkpoint-500).
HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# The JSON files of a checkpoint folder that loading reads, when present.
CHECKPOINT_JSON_FILES = ("config.json", "generation_config.json", "tokenizer_config.json",
                         "special_tokens_map.json", "model.safetensors.index.json")


def _read_json_object(path):
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte at offset {error.start}); expected JSON") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON (line {error.lineno} col {error.colno}: {error.msg}): the file "
                         "may be cut short") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds a JSON {type(value).__name__}; expected an object")
    return value


def _missing_config_hint(folder):
    """What a folder without config.json holds instead, when that says what the user meant."""
    checkpoints = sorted((p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                         key=lambda p: int(p.name.split("-")[-1]))
    if checkpoints:
        return f"; it holds the Trainer checkpoints of a run: did you mean {checkpoints[-1]}?"
    if (folder / "tokenizer_config.json").is_file() and not any(folder.glob("*.safetensors")):
        return "; it holds only a tokenizer"
    return ""


def check_checkpoint_folder(path, model_types=None, what="an hf-slm model"):
    """Raise ValueError naming `path` and what was expected, unless it looks like a loadable hf-slm checkpoint:
    a folder with valid JSON files, a model_type in config.json among `model_types` (default: the registered
    families'; `what` says what they are), readable safetensors weights and a tokenizer."""
    from safetensors import SafetensorError, safe_open

    from ..families import registered_families

    folder = Path(path)
    if not folder.exists():
        raise ValueError(f"model folder {path} does not exist")
    if not folder.is_dir():
        raise ValueError(f"model path {path} is a file; expected a checkpoint folder (config.json, model.safetensors, "
                         "tokenizer files)")
    if not (folder / "config.json").is_file():
        raise ValueError(f"model folder {path} has no config.json; expected a checkpoint saved with save_pretrained"
                         f"{_missing_config_hint(folder)}")
    contents = {name: _read_json_object(folder / name) for name in CHECKPOINT_JSON_FILES if (folder / name).is_file()}
    if model_types is None:
        model_types = sorted(family.model_type for family in registered_families())
    model_type = contents["config.json"].get("model_type")
    if model_type not in model_types:
        from ..parsers.kinds import parser_model_types

        hint = ("; it is a proposal parser (hf-slm parser train): give it as --parser or --proposal-parser"
                if model_type in parser_model_types() and what == "an hf-slm model" else "")
        raise ValueError(f"{folder / 'config.json'} describes a model of type {model_type!r}; expected {what} "
                         f"({' or '.join(model_types)}){hint}")
    for weights in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(weights), framework="pt"):
                pass
        except SafetensorError as error:
            raise ValueError(f"{weights} cannot be read: {error} (truncated, or not a safetensors file?)") from None
    if "tokenizer_config.json" not in contents:
        raise ValueError(f"model folder {path} has no tokenizer (tokenizer_config.json); expected the tokenizer saved "
                         "next to the model")


def _hub_error(name, error):
    """A one-line ValueError for a hub id that failed to load because of the hub, or None for other errors."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    chain = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    kinds = tuple(type(error) for error in chain)
    no_folder = f"there is no local folder {name!r} either"
    if any(issubclass(kind, GatedRepoError) for kind in kinds):
        return ValueError(f"hub repository {name!r} is gated: accept its terms on the hub, then log in (hf auth login)")
    if any(issubclass(kind, RepositoryNotFoundError) for kind in kinds):
        return ValueError(f"no hub repository {name!r} at {constants.ENDPOINT} (or it is private: hf auth login); "
                          f"{no_folder}")
    if any(issubclass(kind, (LocalEntryNotFoundError, OfflineModeIsEnabled)) for kind in kinds):
        if constants.HF_HUB_OFFLINE:
            return ValueError(f"cannot reach the hub for {name!r}: HF_HUB_OFFLINE is set and the hub cache holds no "
                              f"copy of it; {no_folder}")
        reason = " ".join(str(chain[-1]).split())
        return ValueError(f"cannot reach the hub at {constants.ENDPOINT} for {name!r} ({reason}) and the hub cache "
                          f"holds no copy of it; {no_folder} (offline?)")
    return None


def load_checkpoint(name):
    """(model, tokenizer) of a checkpoint folder or hub repository id, checked to belong together.

    A local folder is checked first (`check_checkpoint_folder`); a hub id that cannot be fetched is a ValueError
    saying why (offline, unreachable, no such repository)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .checks import check_tokenizer_matches

    name = str(name)
    if Path(name).exists() or not HUB_ID.match(name):
        check_checkpoint_folder(name)
    model, tokenizer = load_hub_checkpoint(name, AutoModelForCausalLM, AutoTokenizer)
    check_tokenizer_matches(model.config, tokenizer)
    return model, tokenizer


def load_hub_checkpoint(name, model_class, tokenizer_class):
    """(model, tokenizer) of a checked folder or a hub id, loaded with the Auto classes given and
    trust_remote_code; a hub id that cannot be fetched is a ValueError saying why."""
    local = Path(name).exists() or not HUB_ID.match(name)
    try:
        model = model_class.from_pretrained(name, trust_remote_code=True)
        tokenizer = tokenizer_class.from_pretrained(name, trust_remote_code=True)
    except OSError as error:
        rephrased = None if local else _hub_error(name, error)
        if rephrased is None:
            raise
        raise rephrased from error
    return model, tokenizer
