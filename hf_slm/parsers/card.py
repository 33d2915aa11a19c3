"""A proposal parser's model card (model_cards/parser.md): what it is, how to load it with a pinned revision and
use it, its size, its training record and how good its trees are (the held-out F1 / UAS of training_setup.json and
the `hf-slm eval parse|uas --parser` results in eval_results/), beside the right-branching baseline.

`hf-slm card DIR` and `hf-slm push` write it for a parser checkpoint as they write a language model's
(hf_slm/publishing/model_card.py hands a parser's folder here, by its kind's record).
"""

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData
from huggingface_hub.utils import validate_repo_id

from ..model_cards import DEFAULT_LICENSE
from ..publishing.model_card import (
    NOT_RECORDED, REPO_PLACEHOLDER, REVISION_PLACEHOLDER, _check_revision, _environment, _library_version, _name_of,
    count_parameters, read_config, read_training_record,
)
from .kinds import kind_of_config

TEMPLATE = "parser.md"


def _percent(value):
    return NOT_RECORDED if value is None else f"{value:.2f}"


def quality_rows(held_out, data):
    """(evaluation, result, data) rows of a parser's scores (hf_slm/parsers/evaluation.py's metrics)."""
    if not held_out:
        return []
    if "uas" in held_out:
        return [("UAS", f"{_percent(held_out['uas'])} (right-branching baseline "
                        f"{_percent(held_out.get('right_branching_uas'))})", data),
                ("LAS", _percent(held_out.get("las")), data)]
    rows = [("labelled bracketing F1", f"{_percent(held_out['f1'])} (P {_percent(held_out.get('precision'))}, "
                                       f"R {_percent(held_out.get('recall'))})", data)] if "f1" in held_out else []
    return rows + [("unlabelled bracketing F1", f"{_percent(held_out.get('unlabelled_f1'))} (right-branching "
                                                f"baseline {_percent(held_out.get('right_branching_f1'))})", data)]


def _results(directory):
    """(evaluation, result, data) rows of the parser's saved evaluations (eval_results/parse-*.json, uas-*.json)."""
    import json

    rows = []
    for path in sorted((Path(directory) / "eval_results").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("evaluation") in ("parse", "uas"):
            rows += quality_rows(record.get("metrics"), f"`{_name_of(record.get('data', {}).get('gold', path))}` "
                                                        f"({path.name})")
    return rows


def _details(config, kind, parameters):
    encoder = (f"{config.get('pretrained_encoder_name') or 'a pretrained encoder'} (fine-tuned; words pooled from "
               f"their pieces by {config.get('encoder_pooling')})" if config.get("encoder") == "pretrained" else
               f"BiLSTM, {config.get('lstm_layers')} layers of {config.get('lstm_hidden_size')} per direction, over "
               f"{config.get('word_embedding_size')}-d words and a {config.get('char_hidden_size')}-d character "
               "BiLSTM")
    rows = [("trees", kind.tree_format + (" (labelled)" if kind.labelled and kind.tree_kind == "constituency" else "")),
            ("encoder", encoder), ("words", f"{config.get('vocab_size')} ids (words, unknown-word classes, specials)")]
    if kind.model_rows is not None:  # a kind of its own (the discriminative RNNG's stack)
        rows += kind.resolved("model_rows")(config)
    elif kind.tree_kind == "dependency":
        rows += [("scorers", f"biaffine arcs (MLP {config.get('arc_mlp_size')}), relations (MLP "
                             f"{config.get('relation_mlp_size')}, {config.get('num_relations')} relations)"),
                 ("tree CRF", "first-order projective, single root (Eisner)")]
    else:
        rows += [("scorers", f"biaffine spans (MLP {config.get('span_mlp_size')}) and labels (MLP "
                             f"{config.get('label_mlp_size')}, {config.get('num_span_labels')} bracketing labels)"
                             + (f", a tagger ({config.get('num_tags')} POS tags)" if config.get("num_tags") else "")),
                 ("tree CRF", "labelled binary bracketings, unary chains collapsed, left binarization's nodes on "
                              "left children only (inside / CKY)")]
    rows.append(("parameters", f"{parameters:,}" if parameters is not None else "not counted"))
    return rows


def _training(record):
    return [("data", ", ".join(f"`{_name_of(p)}`" for p in record.get("train_data") or []) or NOT_RECORDED),
            ("held-out data", ", ".join(f"`{_name_of(p)}`" for p in record.get("eval_data") or []) or "none"),
            ("size", record.get("size")), ("encoder", record.get("encoder") or "BiLSTM, from scratch"),
            ("steps", f"{record.get('steps_done')} of {record.get('max_steps')}, batch {record.get('batch_size')}"),
            ("learning rate", record.get("learning_rate")), ("seed", record.get("seed")),
            ("final losses", f"train {record.get('final_train_loss')}, held-out {record.get('final_eval_loss')} "
                             "(mean -log q of a tree, nats)")]


def build_parser_card(checkpoint_dir, repo_id=None, revision=None, license=DEFAULT_LICENSE, datasets=None):
    """The huggingface_hub ModelCard of a parser checkpoint (arguments as hf_slm.publishing.model_card's)."""
    directory = Path(checkpoint_dir)
    config = read_config(directory)
    kind = kind_of_config(config, str(directory / "config.json"))
    if repo_id is not None:
        validate_repo_id(repo_id)
        if "/" not in repo_id:
            raise ValueError(f"repo_id {repo_id!r}: expected ORG/NAME")
    _check_revision(revision)
    training = read_training_record(directory)
    held_out = (training or {}).get("held_out")
    quality = quality_rows(held_out, ", ".join(f"`{_name_of(p)}`" for p in (training or {}).get("eval_data") or [])
                           + " (held out in training)") + _results(directory)
    if datasets is None and training is not None:
        datasets = [_name_of(path) for path in training.get("train_data") or []]
    task = "dependency-parsing" if kind.tree_kind == "dependency" else "constituency-parsing"
    card_data = ModelCardData(library_name="transformers", license=license, datasets=list(datasets) if datasets else None,
                              tags=["hf-slm", "proposal-parser", task, "custom_code"])
    code_files = sorted(path.name for path in directory.glob("*.py"))
    values = dict(model_name=repo_id.split("/")[-1] if repo_id else directory.resolve().name, kind=kind,
                  repo_id=repo_id or REPO_PLACEHOLDER, repo_given=repo_id is not None,
                  revision=revision or REVISION_PLACEHOLDER, revision_given=revision is not None,
                  code_files=code_files or ["(none found)"],
                  details=_details(config, kind, count_parameters(directory)),
                  training=_training(training) if training is not None else None,
                  training_data=", ".join(f"`{_name_of(p)}`" for p in (training or {}).get("train_data") or []),
                  quality=quality, license=license, library_version=_library_version())
    text = _environment().get_template(TEMPLATE).render(card_data=card_data.to_yaml(), **values)
    return ModelCard(text)
