"""Model cards: a checkpoint's README.md for a hub, from what the checkpoint folder records about itself.

`write_model_card(checkpoint_dir)` reads
- `config.json` (required): its model_type and grammar pick the family's record (hf_slm/families), whose Variant
  names the template (model_cards/*.md) and whose card hooks give "Model details" (Family.card_details) and the
  template's own values (Family.card_values);
- `model.safetensors` (or the shards its index names): the parameter count, from the tensor shapes in the
  file headers (no weights are loaded; pickled weights are never opened);
- `training_setup.json` (optional; hf_slm.training.train.write_training_record): data and schedule;
- `eval_results/*.json` (optional; hf_slm.evaluation.results.save_results): the evaluation table and the
  model-index metadata. Results are named by their data (`ppl-dev.json`, `ppl-test.json`, `sg-syntaxgym.json`),
  so a card quotes every one of them, each row naming its data and its file (`source`),
and writes `<checkpoint_dir>/README.md`.

The YAML metadata is huggingface_hub's: a ModelCardData with EvalResult objects, dumped by the library and
parsed back by ModelCard, which checks it. The templates are rendered the way ModelCard.from_template renders
them (the YAML block as `card_data`, plus keyword values), but with a Jinja2 loader over the template folder:
from_template builds a bare jinja2.Template, with which a family template could not extend the shared base.
"""

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError, safe_open

from ..families import family_for_config, grammar_class, preset, variant_for_config
from ..families.paper_settings import differences_text
from ..families.tree_formats import tree_format
from ..model_cards import DEFAULT_LICENSE, TEMPLATE_DIRECTORY
from ..parsers.kinds import is_parser_config, kind_of_config
from ..runs.user_files import check_replaceable, write_user_file

REPO_PLACEHOLDER = "ORG/NAME"
REVISION_PLACEHOLDER = "COMMIT_SHA"
COMMIT_SHA = re.compile(r"[0-9a-f]{7,40}")
NOT_RECORDED = "not recorded"


# ---- reading the checkpoint folder ----------------------------------------------------------------------


def _read_json(path, expected):
    """The JSON value of `path`; a ValueError naming the file (and the line) says what was expected."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read ({error}); expected {expected}") from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}, line {error.lineno}: not valid JSON ({error.msg}); expected {expected}") from error


def read_config(checkpoint_dir):
    """The checkpoint's config.json as a dict (read as JSON: no model code runs)."""
    directory = Path(checkpoint_dir)
    if not directory.is_dir():
        raise ValueError(f"checkpoint directory {str(directory)!r} does not exist or is not a directory")
    path = directory / "config.json"
    if not path.is_file():
        raise ValueError(f"{directory}: no config.json; expected a checkpoint folder written by save_pretrained "
                         "(hf-slm train, hf-slm quickstart)")
    config = _read_json(path, "the model's configuration, a JSON object")
    if not isinstance(config, dict):
        raise ValueError(f"{path}: holds a {type(config).__name__}; expected a JSON object")
    return config


def model_family(config, source="config.json"):
    """The registered Variant (hf_slm/families) a config (dict) describes: the name, hub tag and template of its
    card."""
    return variant_for_config(config, source)


def count_parameters(checkpoint_dir):
    """Parameters stored in the checkpoint's safetensors weights, or None when it has none.

    Sums the products of the tensor shapes in model.safetensors, or in every shard that
    model.safetensors.index.json names, read from the file headers. Tied weights are stored once, so they
    count once, as `model.num_parameters()` counts them.
    """
    directory = Path(checkpoint_dir)
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        index_record = _read_json(index, "a safetensors index (a JSON object with a \"weight_map\")")
        weight_map = index_record.get("weight_map") if isinstance(index_record, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index}: expected a non-empty \"weight_map\" object naming the shard of every tensor")
        files = [directory / name for name in sorted(set(weight_map.values()))]
        for path in files:
            if not path.is_file():
                raise ValueError(f"{index}: names the shard {path.name!r}, which is not in {directory}")
    elif (directory / "model.safetensors").is_file():
        files = [directory / "model.safetensors"]
    else:
        return None
    total = 0
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as weights:
                for key in weights.keys():
                    total += math.prod(weights.get_slice(key).get_shape())
        except (OSError, SafetensorError) as error:
            raise ValueError(f"{path}: not a readable safetensors file ({error})") from error
    return total


def read_training_record(checkpoint_dir):
    """`training_setup.json` as a dict, or None when the checkpoint has none."""
    path = Path(checkpoint_dir) / "training_setup.json"
    if not path.exists():
        return None
    record = _read_json(path, "the training record written by hf-slm train (a JSON object)")
    if not isinstance(record, dict):
        raise ValueError(f"{path}: holds a {type(record).__name__}; expected a JSON object")
    return record


RESULT_KEYS = ("evaluation", "grammar", "data", "options", "date", "metrics")


def read_eval_results(checkpoint_dir):
    """The records in `<checkpoint_dir>/eval_results/*.json`, as (path, record) pairs in evaluation order.

    Every record must be one that save_results writes, of an evaluation the card knows.
    """
    directory = Path(checkpoint_dir) / "eval_results"
    if not directory.is_dir():
        return []
    records = []
    for path in sorted(directory.glob("*.json")):
        record = _read_json(path, "an evaluation record written by hf-slm eval (a JSON object)")
        if not isinstance(record, dict):
            raise ValueError(f"{path}: holds a {type(record).__name__}; expected a JSON object")
        missing = [key for key in RESULT_KEYS if key not in record]
        if missing:
            raise ValueError(f"{path}: lacks {', '.join(missing)}; expected an evaluation record with the keys "
                             f"{', '.join(RESULT_KEYS)} (hf_slm.evaluation.results.save_results)")
        if record["evaluation"] not in EVALUATIONS:
            raise ValueError(f"{path}: evaluation {record['evaluation']!r} is not one a model card can report; "
                             f"expected one of {', '.join(EVALUATIONS)}")
        if not isinstance(record["metrics"], dict):
            raise ValueError(f"{path}: \"metrics\" is a {type(record['metrics']).__name__}; expected a JSON object")
        records.append((path, record))
    order = list(EVALUATIONS)
    return sorted(records, key=lambda item: (order.index(item[1]["evaluation"]), item[0].name))


# ---- evaluation rows ------------------------------------------------------------------------------------


@dataclass
class EvaluationRow:
    """One line of the card's evaluation table."""

    evaluation: str
    result: str
    data: str
    options: str
    date: str
    source: str = ""  # the results file, relative to the checkpoint


@dataclass
class ReportedEvaluation:
    """What one results file contributes: table rows, a model-index entry and a metric id."""

    rows: list
    eval_result: EvalResult
    metric: str


def _metric_values(record, path, keys):
    metrics = record["metrics"]
    missing = [key for key in keys if key not in metrics]
    if missing:
        raise ValueError(f"{path}: the {record['evaluation']} metrics lack {', '.join(missing)}; expected what "
                         f"`hf-slm eval {record['evaluation']}` writes")
    for key in keys:
        if isinstance(metrics[key], float) and not math.isfinite(metrics[key]):
            raise ValueError(f"{path}: metric {key!r} is {metrics[key]}; expected a finite number")
    return metrics


def _name_of(path):
    """The last part of a recorded path: a card on a hub shows where data came from, not the author's folders.

    Descriptions such as "<trees in memory>" lose their brackets, which Markdown would take for HTML.
    """
    text = str(path)
    if text.startswith("<") and text.endswith(">"):
        return text[1:-1]
    return Path(text).name or text


def _data_name(record, path):
    """The data an evaluation ran on, by name: from the results file's name (`<kind>-<data>[-limit<N>].json`,
    hf_slm.evaluation.results.result_stem), else (older results, `<kind>.json`) from the recorded path."""
    stem, prefix = Path(path).stem, f"{record['evaluation']}-"
    if stem.startswith(prefix):
        return re.sub(r"-limit\d+$", "", stem[len(prefix):])
    data = record["data"] if isinstance(record["data"], dict) else {}
    recorded = data.get("suites_dir") or data.get("path")
    return _name_of(recorded) if recorded else None


def _percent(fraction):
    return f"{100 * fraction:.1f}%"


def _date(record):
    return str(record["date"])[:10]


BEAM_WORDS = {"beam_size": "beam {}", "word_beam_size": "word beam {}", "fast_track": "fast track {}",
              "max_nonterminals": "n_c {}", "max_consecutive_open": "p_c {}",
              "max_structural_per_word": "{} structural actions per word at most", "marginal": "marginal {}"}
# Options that change speed, not results.
BEAM_SPEED_ONLY = ("use_cache", "batch_size", "progress")


def _beam_text(options):
    """Beam options in a few words (the defaults of hf_slm.BeamSearchOptions when none were given)."""
    options = {k: v for k, v in (options or {}).items() if k not in BEAM_SPEED_ONLY and v is not None}
    if not options:
        return "default beam options"
    return ", ".join(BEAM_WORDS[k].format(v) if k in BEAM_WORDS else f"{k} {v}" for k, v in options.items())


def _limit_text(options, unit):
    limit = options.get("limit")
    return f"; first {limit} {unit}" if limit else ""


def _perplexity_estimate(metrics):
    """What the perplexity is: "exact", "upper bound" or "approximation".

    Decided by the method, not by a saved label: results saved before the greedy-prefix methods were called
    approximations say `is_upper_bound: true` for them.
    """
    if metrics["method"].endswith("_greedy_prefix"):
        return "approximation"
    return "upper bound" if metrics["is_upper_bound"] else "exact"


def _perplexity(record, path):
    metrics = _metric_values(record, path, ("perplexity", "is_upper_bound", "method", "sentences", "words"))
    estimate = _perplexity_estimate(metrics)
    documents = metrics.get("documents")
    level = " (document level)" if documents is not None else ""
    label = f"Word perplexity{level}, {estimate}"
    method = metrics["method"]
    options = record["options"] or {}
    how = {
        "exact": f"exact log p(x); N_w counts one `</s>` per {'document' if documents is not None else 'sentence'}",
        "proposals": "p(x) summed over proposal trees",
        "proposals_greedy_prefix": "p(x) summed over proposal trees, after the greedy best trees of the "
                                   "document's earlier sentences",
        "beam": "p(x) from the final beam",
        "beam_greedy_prefix": "p(x) from the final beam, after the greedy best trees of the document's earlier "
                              "sentences",
    }.get(method, f"method {method}")
    if method.startswith("proposals") and options.get("max_proposals"):
        how += f" (at most {options['max_proposals']} per sentence)"
    if method.startswith("beam"):
        how += f": {_beam_text(options.get('beam_options'))}"
    data = record["data"] if isinstance(record["data"], dict) else {}
    name = _name_of(data.get("path", "data"))
    counts = f"{metrics['sentences']} sentences, {metrics['words']} words"
    if documents is not None:
        counts = f"{documents} documents, {counts}"
    row = EvaluationRow(label, f"{metrics['perplexity']:.2f}", f"{name} ({counts})", how, _date(record))
    result = EvalResult(task_type="text-generation", task_name=f"Language modeling{level}", dataset_type=name,
                        dataset_name=name, metric_type="perplexity", metric_value=metrics["perplexity"],
                        metric_name=f"word perplexity{level} ({estimate})")
    return ReportedEvaluation([row], result, "perplexity")


def _syntaxgym(record, path):
    metrics = _metric_values(record, path, ("sg_score", "sg_score_suites", "sg_score_is_paper_31", "circuits",
                                            "rule"))
    if metrics["sg_score"] is None:
        raise ValueError(f"{path}: the SG score is null (no suite of the score was evaluated); expected a number")
    options = record["options"] or {}
    suites = "the papers' 31 suites" if metrics["sg_score_is_paper_31"] else f"{metrics['sg_score_suites']} suites"
    name = _data_name(record, path)
    named = f" (`{name}`)" if name and name.lower() != "syntaxgym" else ""
    data = f"SyntaxGym{named}, {suites}{_limit_text(options, 'items per suite')}"
    beam = {k: v for k, v in options.items() if k not in ("limit", "batch_size", "rule", "units")}
    how = f"rule {metrics['rule']}; {_beam_text(beam)}"
    date = _date(record)
    rows = [EvaluationRow("SyntaxGym SG score", _percent(metrics["sg_score"]), data, how, date)]
    for circuit, values in metrics["circuits"].items():
        if values.get("accuracy") is None:  # no evaluated suite belongs to this circuit
            continue
        count = len(values.get("suites") or [])
        rows.append(EvaluationRow(f"SyntaxGym circuit: {circuit}", _percent(values["accuracy"]),
                                  f"SyntaxGym, {count} suite{'s' if count != 1 else ''}", how, date))
    result = EvalResult(task_type="text-generation", task_name="Syntactic generalization", dataset_type="syntaxgym",
                        dataset_name=f"SyntaxGym ({suites})", metric_type="sg_score",
                        metric_value=metrics["sg_score"], metric_name="SG score (fraction of items)")
    return ReportedEvaluation(rows, result, "sg_score")


def _blimp(record, path):
    metrics = _metric_values(record, path, ("accuracy", "pairs", "paradigms", "by_field"))
    options = record["options"] or {}
    name = _data_name(record, path)
    named = f" (`{name}`)" if name and name.lower() != "blimp" else ""
    data = f"BLiMP{named}, {metrics['paradigms']} paradigms, {metrics['pairs']} pairs"
    how = f"p(x): {metrics.get('log_prob') or options.get('log_prob') or NOT_RECORDED}"
    if options.get("beam_options"):
        how += f"; {_beam_text(options['beam_options'])}"
    date = _date(record)
    rows = [EvaluationRow("BLiMP accuracy (mean over paradigms)", _percent(metrics["accuracy"]), data, how, date)]
    for field, accuracy in metrics["by_field"].items():
        rows.append(EvaluationRow(f"BLiMP field: {field}", _percent(accuracy), "BLiMP", how, date))
    result = EvalResult(task_type="text-generation", task_name="Grammatical acceptability", dataset_type="blimp",
                        dataset_name="BLiMP", metric_type="blimp_accuracy", metric_value=metrics["accuracy"],
                        metric_name="accuracy (mean over paradigms)")
    return ReportedEvaluation(rows, result, "blimp_accuracy")


def _bracketing(record, path):
    metrics = _metric_values(record, path, ("f1", "sentences"))
    options = record["options"] or {}
    data = record["data"] if isinstance(record["data"], dict) else {}
    gold = _name_of(data.get("gold", "gold trees"))
    length = f", sentences of at most {options['max_length']} words" if options.get("max_length") else ""
    if record["evaluation"] == "rerank":
        label, task, task_type = "Bracketing F1, reranking proposals", "Parse reranking", "parse-reranking"
        how = f"{data.get('proposal_trees', NOT_RECORDED)} proposal trees"
        if options.get("max_proposals"):
            how += f", at most {options['max_proposals']} per sentence"
    else:
        label, task, task_type = "Bracketing F1, beam-search parses", "Constituency parsing", "constituency-parsing"
        how = _beam_text(options.get("beam"))
    how += "; EVALB (COLLINS.prm)"
    row = EvaluationRow(label, f"{metrics['f1']:.2f}", f"{gold} ({metrics['sentences']} sentences{length})", how,
                        _date(record))
    result = EvalResult(task_type=task_type, task_name=task, dataset_type=gold, dataset_name=gold,
                        metric_type="bracketing_f1", metric_value=metrics["f1"], metric_name="bracketing F1 (EVALB)")
    return ReportedEvaluation([row], result, "bracketing_f1")


def _attachment(record, path):
    """UAS of a dependency model (hf_slm.evaluation.attachment): beam parses or reranked proposals."""
    metrics = _metric_values(record, path, ("uas", "sentences", "scored_tokens", "punctuation"))
    if metrics["uas"] is None:
        raise ValueError(f"{path}: the UAS is null (no word was scored); expected a number")
    options = record["options"] or {}
    data = record["data"] if isinstance(record["data"], dict) else {}
    gold = _name_of(data.get("gold", "gold trees"))
    if record["evaluation"] == "uas-rerank":
        label, how = "UAS, reranking proposals", f"{data.get('proposal_trees', NOT_RECORDED)} proposal trees"
    else:
        label, how = "UAS, beam-search parses", _beam_text(options.get("beam"))
    punctuation = metrics["punctuation"] if isinstance(metrics["punctuation"], dict) else {}
    scored = "punctuation included" if punctuation.get("rule") == "none" else (
        f"punctuation excluded ({punctuation.get('rule', NOT_RECORDED)} rule)")
    row = EvaluationRow(label, f"{metrics['uas']:.2f}",
                        f"{gold} ({metrics['sentences']} sentences, {metrics['scored_tokens']} scored words)",
                        f"{how}; {scored}", _date(record))
    result = EvalResult(task_type="dependency-parsing", task_name="Dependency parsing", dataset_type=gold,
                        dataset_name=gold, metric_type="uas", metric_value=metrics["uas"],
                        metric_name=f"UAS ({scored})")
    return ReportedEvaluation([row], result, "uas")


def _rouge(record, path):
    """ROUGE F-measures of generated summaries, with lead-1 (hf_slm.evaluation.rouge)."""
    metrics = _metric_values(record, path, ("rouge1", "rouge2", "rougeL", "lead1", "documents"))
    name = _data_name(record, path) or "summaries"
    bootstrap = metrics.get("bootstrap") if isinstance(metrics.get("bootstrap"), dict) else {}
    confidence = bootstrap.get("confidence")
    how = (f"F-measure x 100, stemmed, on words; in brackets the "
           f"{f'{confidence:.0%}' if isinstance(confidence, float) else NOT_RECORDED} bootstrap interval "
           f"({bootstrap.get('samples', NOT_RECORDED)} resamples)")
    rows = []
    for key, label in (("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L")):
        value, lead = metrics[key], metrics["lead1"].get(key, {})
        low, high = value["confidence_interval"]
        lead_text = f"; lead-1 {100 * lead['f_measure']:.2f}" if "f_measure" in lead else ""
        rows.append(EvaluationRow(f"{label} (summaries)", f"{100 * value['f_measure']:.2f} [{100 * low:.2f}, "
                                  f"{100 * high:.2f}]", f"{name} ({metrics['documents']} documents)",
                                  how + lead_text, _date(record)))
    result = EvalResult(task_type="summarization", task_name="Summarization", dataset_type=name, dataset_name=name,
                        metric_type="rougeL", metric_value=metrics["rougeL"]["f_measure"],
                        metric_name="ROUGE-L F-measure (fraction)")
    return ReportedEvaluation(rows, result, "rougeL")


def _incremental_parse(record, path):
    """UF1 of SOM's incremental parses (hf_slm.families.ordered_memory.evaluation.som_parse_eval), with p and p'
    accuracy; or, for a model whose memory follows the gold trees (Table 2's oracle: no UF1), the perplexity given
    them."""
    data = record["data"] if isinstance(record["data"], dict) else {}
    gold = _name_of(data.get("gold", "gold trees"))
    accuracies = [f"{name} accuracy {_percent(record['metrics'][key])}" for name, key in
                  (("p", "p_accuracy"), ("p'", "next_p_accuracy"))
                  if isinstance(record["metrics"].get(key), (int, float))]
    if "uf1" not in record["metrics"]:
        metrics = _metric_values(record, path, ("perplexity", "sentences", "decisions"))
        how = f"memory decisions: {metrics['decisions']}" + (f"; {', '.join(accuracies)}" if accuracies else "")
        row = EvaluationRow("Perplexity given the gold trees (oracle)", f"{metrics['perplexity']:.2f}",
                            f"{gold} ({metrics['sentences']} sentences)", how, _date(record))
        result = EvalResult(task_type="text-generation", task_name="Language modeling given gold trees",
                            dataset_type=gold, dataset_name=gold, metric_type="perplexity",
                            metric_value=metrics["perplexity"], metric_name="word perplexity given the gold trees "
                                                                            "(paper 001, Table 2's oracle)")
        return ReportedEvaluation([row], result, "perplexity")
    metrics = _metric_values(record, path, ("uf1", "sentences", "brackets"))
    constituency = (record["options"] or {}).get("tree") == "constituency"
    against = ("PTB constituency trees (paper 001, Table 8)" if constituency
               else "binary trees from the dependency trees (paper 001, Figure 4)")
    how = (f"argmax decisions of p_t; gold: {against}; brackets: "
           f"{metrics['brackets']}" + (f"; {', '.join(accuracies)}" if accuracies else ""))
    row = EvaluationRow("Unlabeled F1, incremental parses", f"{metrics['uf1']:.2f}",
                        f"{gold} ({metrics['sentences']} sentences{_limit_text(record['options'] or {}, 'sentences')})",
                        how, _date(record))
    result = EvalResult(task_type="constituency-parsing", task_name="Incremental parsing",
                        dataset_type=gold, dataset_name=gold, metric_type="uf1", metric_value=metrics["uf1"],
                        metric_name=f"unlabeled F1 (paper 001, Table {8 if constituency else 2})")
    return ReportedEvaluation([row], result, "uf1")


# save_results names -> what reads them, in the order the card lists them.
EVALUATIONS = {"ppl": _perplexity, "sg": _syntaxgym, "blimp": _blimp, "rerank": _bracketing, "parse": _bracketing,
               "uf1": _incremental_parse, "uas": _attachment, "uas-rerank": _attachment, "rouge": _rouge}


def report_evaluations(records, identity, checkpoint_dir):
    """ReportedEvaluation of each (path, record); records of another model (their "grammar" names another than
    `identity`, the checkpoint's hf_slm.families.model_identity) are an error."""
    reported = []
    for path, record in records:
        if record.get("grammar") not in (None, identity):
            raise ValueError(f"{path}: evaluates a model with grammar {record['grammar']!r}, but this checkpoint's "
                             f"grammar is {identity!r}; expected results of this model only")
        entry = EVALUATIONS[record["evaluation"]](record, path)
        for row in entry.rows:
            row.source = str(Path(path).relative_to(checkpoint_dir))
        reported.append(entry)
    return reported


# ---- model details and training -------------------------------------------------------------------------


def config_value(config, key):
    value = config.get(key)
    return NOT_RECORDED if value is None else value


def model_details(config, parameters, architecture_rows=()):
    """(label, value) rows describing the architecture of a model with a grammar, from config.json (Family.card_details'
    default); `architecture_rows`: a family's own rows (its card_details), after the shared ones."""
    grammar = config["grammar"]
    heads = config.get("num_attention_heads")
    hidden = config.get("hidden_size")
    head_size = ""
    if isinstance(heads, int) and isinstance(hidden, int) and heads:
        head_size = f" (head size {hidden // heads})"
    open_nts = None
    if isinstance(config.get("open_nt_start"), int) and isinstance(config.get("open_nt_stop"), int):
        open_nts = config["open_nt_stop"] - config["open_nt_start"]
    vocabulary = f"{config_value(config, 'vocab_size')} action ids"
    if open_nts == 1:  # unlabelled trees
        vocabulary += " (one unlabeled bracket: a `(` and a `)` action)"
    elif open_nts:
        vocabulary += f" ({open_nts} nonterminal labels, each with an opening and a closing action)"
    low, high = config.get("min_relative_position"), config.get("max_relative_position")
    rules = grammar_class(grammar)
    what = rules.relative_position_meaning
    attention_dropout = config.get("attention_dropout")
    rows = [
        ("grammar", f"`{grammar}`"),
        ("layers", config_value(config, "num_hidden_layers")),
        ("hidden size", config_value(config, "hidden_size")),
        ("attention heads", f"{config_value(config, 'num_attention_heads')}{head_size}"),
        ("feed-forward size", config_value(config, "intermediate_size")),
        ("vocabulary", vocabulary),
        ("parameters", f"{parameters:,}" if parameters is not None else "not counted (no safetensors weights)"),
        ("max sequence length", f"{config_value(config, 'max_sequence_length')} positions"
                                + (f" ({rules.duplicated_actions} count twice)" if rules.duplicates_closing else "")),
        ("absolute positions", "learned embeddings of each position's index in the expanded sequence (GPT-2)")
        if config.get("position_encoding") == "absolute"
        else ("relative positions", f"{what}, clipped to [{low}, {high}]"),
        ("feed-forward activation", _ACTIVATIONS.get(config.get("hidden_act", "gelu"), config.get("hidden_act"))),
        ("dropout", f"embeddings {config_value(config, 'embedding_dropout')}"
                    + (" then the layers' rate too (paper 000's reference)" if config.get("core_dropout_on_embeddings")
                       else "") + f", layers {config_value(config, 'core_dropout')}, attention weights "
                    f"{'as layers' if attention_dropout is None else attention_dropout} (one dropout mask of the "
                    "relative-position encodings for the whole batch, where paper 000's reference draws one per "
                    f"sequence), before the output {config_value(config, 'final_dropout')}"),
        ("initialization", "linear layers as paper 000's reference (variance scaling); embeddings "
                           f"N(0, {config.get('initializer_range', 0.02)}), where the reference draws U(+-sqrt(3 / d)); "
                           "u and v at the linear layers' scale over a head's size, where the reference's is 1 over "
                           "the hidden size"),
        ("sequences", "documents: the sentences of a document one after another after a single `<s>`"
                      if config.get("document_level") else "single sentences"),
        *_segment_rows(config),
        ("layer norm", "pre-LN" if config.get("pre_layer_norm") else "post-LN"),
        ("tied input and output embeddings", "yes" if config.get("tie_word_embeddings", True) else "no"),
        *architecture_rows,
    ]
    if not rules.causal:
        # Hybrids (paper 000, section 2.4): some heads or top layers attend without the grammar's mask.
        unrestricted = [f"{config[key]} {unit}" for key, unit in (("num_unrestricted_heads", "heads per layer"),
                                                                   ("num_unrestricted_layers", "top layers"))
                        if config.get(key)]
        reading = " (relative position i - j)"
        if unrestricted and config.get("segment_length"):
            reading = (" (relative position i - j; a memory slot read as paper 000's reference reads it, the memory's "
                       "slots as the positions just before the segment)"
                       if config.get("unrestricted_memory_reading") == "shift" else
                       " (relative position i - j; a memory slot at its true distance, where paper 000's reference "
                       "reads the memory's slots as the positions just before the segment)")
        rows.append(("unrestricted (causal) attention", ", ".join(unrestricted) + reading if unrestricted else "none"))
        rows.append(("separate COMPOSE attention parameters",
                     "yes" if config.get("distinct_compose_attention") else "no"))
    return rows


# config.hidden_act, as a card says it (configuration_slm.FEED_FORWARD_ACTIVATIONS)
_ACTIVATIONS = {"gelu": "GELU, exact (erf)", "gelu_pytorch_tanh": "GELU, tanh approximation", "relu": "ReLU"}


def no_card_values(config):
    """Family.card_values of a family whose template reads only the shared values."""
    return {}


def _loss(value):
    return NOT_RECORDED if value is None else f"{value:.4f}"


def _files(paths):
    if not paths:
        return "none"
    return ", ".join(f"`{_name_of(p)}`" for p in paths)


def _segment_rows(config):
    """The row of a model trained with segment recurrence (config.segment_length), else none."""
    if not config.get("segment_length"):
        return []
    rule = {"structure": "the positions still on the grammar's stack (paper 000's structure-aware update)",
            "shift": "the last positions (Transformer-XL's shift)"}.get(config.get("memory_update"), config.get("memory_update"))
    return [("segment recurrence", f"read {config['segment_length']} positions at a time with a memory of "
             f"{config.get('memory_length')} positions per layer holding {rule}; sequences of any length are scored "
             "this way, as the model was trained (paper 000, section 2.2)")]


def training_details(record):
    """(label, value) rows from a training record (training_setup.json)."""
    def get(key):
        value = record.get(key)
        return NOT_RECORDED if value is None else value

    normalization = record.get("normalization")
    if isinstance(normalization, dict):
        chosen = [key.replace("_", " ") for key, value in normalization.items() if value]
        normalization = ", ".join(chosen) if chosen else "none beyond the defaults"

    def examples(key):
        count = record.get(key)
        return f" ({count:,} examples)" if isinstance(count, int) else ""

    rows = [
        ("preset", f"`{get('preset')}`"),
        ("training data", _files(record.get("train_data")) + examples("train_examples")),
        ("validation data", _files(record.get("eval_data")) + examples("eval_examples")),
    ]
    fine_tuning = record.get("fine_tuning")
    if isinstance(fine_tuning, dict):  # hf_slm/summarization/finetuning.py: what this model was fine-tuned from and on
        task = {"xsum": "XSum summarization (document trees, prompt, summary trees; paper 003 section 3.3)"}.get(
            fine_tuning.get("task"), fine_tuning.get("task"))
        rows.append(("fine-tuned", f"from `{_name_of(fine_tuning.get('base_model', NOT_RECORDED))}` on {task}, "
                     f"loss on {'the summary only' if fine_tuning.get('labels') == 'summary' else 'every action'}"))
    prepared = record.get("prepared_dataset")
    if isinstance(prepared, dict):
        source = prepared.get("source")
        rows.append(("prepared dataset", f"`{_name_of(prepared.get('path', NOT_RECORDED))}`, made by "
                     f"`hf-slm data prepare` with the {prepared.get('loader', NOT_RECORDED)} loader"
                     + (f" from `{_name_of(source)}`" if source else "")
                     + ("; documents" if prepared.get("document_level") else "")))
    return rows + [
        ("tree normalization", normalization if normalization is not None else NOT_RECORDED),
        ("steps", f"{get('steps_done')} of {get('max_steps')}"),
        ("batch size", f"{get('batch_size')} sequences"),
        ("learning rate", _learning_rate(record, get)
                          + _embedding_multiplier(record.get("embedding_learning_rate_multiplier"))),
        ("gradient clipping", f"norm {record['max_grad_norm']}" if "max_grad_norm" in record
         else "norm 3 (not recorded: what `hf-slm train` clipped at before it recorded it)"),
        ("seed", get("seed")),
        ("final training loss", _loss(record.get("final_train_loss"))),
        ("final validation loss", _loss(record.get("final_eval_loss"))),
        ("finished", get("date")),
    ]


def _learning_rate(record, get):
    """The learning-rate row: constant when the schedule has no warm-up and one rate (RNNG's presets), else the
    warm-up and cosine decay."""
    rates = {record.get(name) for name in ("initial_learning_rate", "learning_rate", "final_learning_rate")}
    if record.get("warmup_steps") == 0 and len(rates) == 1:
        return f"constant {get('learning_rate')}"
    return (f"linear warm-up from {get('initial_learning_rate')} to {get('learning_rate')} over "
            f"{get('warmup_steps')} steps, then cosine decay to {get('final_learning_rate')}")


def _embedding_multiplier(multiplier):
    """The learning-rate row's note on a separate token-embedding rate (none when 1.0 or not recorded)."""
    if not isinstance(multiplier, (int, float)) or multiplier == 1:
        return ""
    return f"; the token embedding (tied with the output layer) at {multiplier} times that rate"


# ---- the card -------------------------------------------------------------------------------------------


def _environment(*folders):
    """The templates' environment: hf-slm's template folder, after `folders` (a family outside hf-slm keeps its
    template in its own folder, and may extend hf-slm's templates)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(folder) for folder in folders] + [str(TEMPLATE_DIRECTORY)]),
        undefined=jinja2.StrictUndefined,  # a misspelt value in a template is an error, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML
    )
    # A Markdown table cell cannot hold "|" or a line break.
    environment.filters["cell"] = lambda value: str(value).replace("|", "\\|").replace("\n", " ")
    return environment


def _check_revision(revision):
    if revision is not None and not COMMIT_SHA.fullmatch(str(revision)):
        raise ValueError(f"revision {revision!r} is not a commit sha; expected 7 to 40 lowercase hex digits (a branch "
                         "or tag can move, so it does not pin the code that trust_remote_code runs)")


def _library_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hf-slm")
    except PackageNotFoundError:
        return NOT_RECORDED


def paper_differences(family, training):
    """The card's "Differences from the paper" lines: from the family's paper table (Family.paper_table), the fields
    of the preset the model was trained from (training_setup.json) that differ from the paper's, each with its
    reason, then what differs beyond the presets; [] for a family without a table."""
    table = family.paper_table
    if table is None:
        return []
    name = (training or {}).get("preset")
    try:
        _, chosen = preset(name) if name else (None, None)
    except ValueError:  # a preset this version no longer has
        chosen = None
    lines = []
    if name and name not in table.presets:
        lines.append(f"it was trained from preset `{name}`, which is none of paper {table.paper}'s settings "
                     f"(`hf-slm presets --paper {table.paper}` lists them)")
    return lines + differences_text(table, name if chosen is not None else None, chosen or {})


def build_model_card(checkpoint_dir, repo_id=None, revision=None, license=DEFAULT_LICENSE, datasets=None):
    """The huggingface_hub ModelCard of a checkpoint folder (see the module docstring for what is read).

    Args:
        repo_id: "ORG/NAME" of the hub repository, used in the loading example and as the model-index name
            (default: a placeholder in the example, the folder name in the metadata).
        revision: the commit sha users should pin (default: a placeholder they must fill).
        license: the license id of the weights for the metadata (the training data's own terms are stated in
            the text).
        datasets: dataset ids for the metadata; default: the names of the training record's data files.
    """
    directory = Path(checkpoint_dir)
    config = read_config(directory)
    if is_parser_config(config):  # a proposal parser's card (its kind's record names the builder)
        return kind_of_config(config).resolved("card_builder")(directory, repo_id=repo_id, revision=revision,
                                                               license=license, datasets=datasets)
    source = str(directory / "config.json")
    family, variant = family_for_config(config, source), model_family(config, source)
    grammar = variant.name if variant.is_grammar else None  # None for a family without grammars
    if repo_id is not None:
        validate_repo_id(repo_id)
        if "/" not in repo_id:
            raise ValueError(f"repo_id {repo_id!r}: expected ORG/NAME")
    _check_revision(revision)
    if not license:
        raise ValueError("license must be a license id such as 'apache-2.0'")

    training = read_training_record(directory)
    if training is not None and training.get("grammar") not in (None, variant.name):
        raise ValueError(f"{directory / 'training_setup.json'}: records grammar {training['grammar']!r}, but "
                         f"config.json says {variant.name!r}; expected the record of this model's training")
    reported = report_evaluations(read_eval_results(directory), variant.name, directory)

    model_name = repo_id.split("/")[-1] if repo_id else directory.resolve().name
    if datasets is None and training is not None:
        datasets = [_name_of(path) for path in training.get("train_data") or []]
    metrics = list(dict.fromkeys(entry.metric for entry in reported))
    tags = ["hf-slm"] + (["syntactic-language-model"] if variant.syntactic else []) + [variant.hub_tag, "custom_code"]
    card_data = ModelCardData(
        library_name="transformers",
        pipeline_tag="text-generation",
        license=license,
        tags=tags,
        datasets=list(datasets) if datasets else None,
        metrics=metrics or None,
        model_name=model_name if reported else None,
        eval_results=[entry.eval_result for entry in reported] or None,
    )
    values = dict(
        model_name=model_name,
        family=variant,
        grammar=grammar,
        repo_id=repo_id or REPO_PLACEHOLDER,
        repo_given=repo_id is not None,
        revision=revision or REVISION_PLACEHOLDER,
        revision_given=revision is not None,
        # the Python files the checkpoint holds: what trust_remote_code runs (the pin-revision warning names them)
        code_files=sorted(path.name for path in directory.glob("*.py")) or ["(none found)"],
        details=family.card_details(config, count_parameters(directory)),
        training=training_details(training) if training is not None else None,
        training_data=_files(training.get("train_data")) if training and training.get("train_data") else None,
        max_sequence_length=config.get("max_sequence_length", NOT_RECORDED),
        document_level=bool(config.get("document_level")),
        # segment recurrence (hf-slm train --segment-length): the limitations say how long sequences are read
        segment_length=config.get("segment_length"), memory_length=config.get("memory_length"),
        memory_update=config.get("memory_update"),
        vocab_size=config.get("vocab_size", NOT_RECORDED),
        # the tokenizer's piece model (tokenization_slm.SyntacticTokenizer): a saved byte-level BPE says itself
        pieces="byte_bpe" if (directory / "byte_bpe.json").is_file() else "sentencepiece",
        # what `eval ppl --proposals` reads for this model (the sum over them bounds p(x) from below)
        proposal_format=tree_format(variant.tree_format).proposal_description,
        paper=family.paper,
        paper_differences=paper_differences(family, training),
        evaluation_rows=[row for entry in reported for row in entry.rows],
        license=license,
        library_version=_library_version(),
        **family.card_values(config),  # what the family's own template reads (Family.card_values)
    )
    template = Path(variant.card_template)  # a name in model_cards/, or a family's own file
    folders = [template.parent] if template.is_absolute() else []
    text = _environment(*folders).get_template(template.name if folders else variant.card_template).render(
        card_data=card_data.to_yaml(), **values)
    return ModelCard(text)


# The line every card this module writes holds (model_cards/base.md): a README.md with it is a card written here,
# which running `hf-slm card` again replaces; one without it is the user's, replaced only with overwrite.
CARD_MARKER = "Written by `hf-slm card`"


def write_model_card(checkpoint_dir, output=None, repo_id=None, revision=None, *, license=DEFAULT_LICENSE,
                     datasets=None, overwrite=False):
    """Write the model card of a checkpoint folder to `output` (default `<checkpoint_dir>/README.md`) and return
    its path. A file there is replaced when it is a card written here (CARD_MARKER) or with `overwrite`; any other
    is a ValueError naming it (hf_slm/runs/user_files.py). Other arguments as `build_model_card`."""
    path = Path(output) if output is not None else Path(checkpoint_dir) / "README.md"
    check_replaceable(path, CARD_MARKER, overwrite)  # before the card is built: a refusal costs nothing
    card = build_model_card(checkpoint_dir, repo_id=repo_id, revision=revision, license=license, datasets=datasets)
    return write_user_file(path, card.save, CARD_MARKER, overwrite)


__all__ = [
    "CARD_MARKER",
    "EvaluationRow",
    "build_model_card",
    "count_parameters",
    "model_details",
    "model_family",
    "read_config",
    "read_eval_results",
    "read_training_record",
    "report_evaluations",
    "training_details",
    "write_model_card",
]
