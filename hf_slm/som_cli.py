"""`hf-slm eval ppl | sg | blimp | parse` for Syntactic Ordered Memory checkpoints (hf_slm.som_evaluation).

SOM scores words straight from its logits, so the beam options of these commands do not apply and results
are printed (not journaled). `hf-slm eval parse --gold FILE.conllu` reads gold dependency trees and reports UF1
against Gamma, p and p' accuracy (Table 2's setting).
"""

import json
from pathlib import Path

SOM_MODEL_TYPE = "syntactic_ordered_memory"


def is_som(model):
    return getattr(model.config, "model_type", None) == SOM_MODEL_TYPE


def check_som_tokenizer(config, tokenizer):
    """Raise ValueError naming every way `tokenizer` disagrees with a SOM `config` (ids and vocabulary)."""
    problems = []
    if len(tokenizer) > config.vocab_size:
        problems.append(f"the tokenizer has {len(tokenizer)} ids but the model's vocab_size is {config.vocab_size}")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, name, None) != getattr(config, name, None):
            problems.append(f"{name} is {getattr(tokenizer, name, None)} in the tokenizer but "
                            f"{getattr(config, name, None)} in the model config")
    trained_with = getattr(config, "vocabulary_fingerprint", None)
    fingerprint = getattr(tokenizer, "vocabulary_fingerprint", None)
    if trained_with and fingerprint and fingerprint != trained_with:
        problems.append(f"the tokenizer's vocabulary (fingerprint {fingerprint}) is not the one the model was trained "
                        f"with ({trained_with})")
    if problems:
        raise ValueError("tokenizer and model do not match: " + "; ".join(problems))


def _limited(items, limit):
    return items[:limit] if limit is not None else items


def eval_ppl(model, tokenizer, args):
    from .evaluation.perplexity import read_sentences
    from .som_evaluation import som_perplexity

    metrics = som_perplexity(model, tokenizer, _limited(read_sentences(args.data), args.limit),
                             batch_size=args.batch_size)
    print(metrics["summary"])
    return 0


def eval_sg(model, tokenizer, args):
    from .evaluation.syntaxgym import format_summary
    from .som_evaluation import som_syntaxgym

    metrics = som_syntaxgym(model, tokenizer, args.suites, limit=args.limit, rule=args.rule,
                            batch_size=args.batch_size)
    print(format_summary(metrics))
    return 0


def eval_blimp(model, tokenizer, args):
    from .som_evaluation import som_blimp

    metrics = som_blimp(model, tokenizer, args.data, limit=args.limit, batch_size=args.batch_size)
    print(json.dumps({key: metrics[key] for key in ("accuracy", "pairs", "paradigms", "by_field", "units",
                                                     "log_prob")}))
    return 0


def eval_parse(model, tokenizer, args):
    from .data.conllu_loader import read_conllu_file
    from .som_evaluation import som_parse_eval

    gold = Path(args.gold)
    if gold.suffix != ".conllu":
        raise ValueError(f"--gold {gold}: a SOM model is evaluated against gold dependency trees; expected a "
                         ".conllu file (Gamma is built from its heads)")
    examples = [{"words": e["words"], "heads": e["heads"]} for e in read_conllu_file(gold, gold.name)]
    metrics = som_parse_eval(model, tokenizer, _limited(examples, args.limit), batch_size=args.batch_size)
    print(json.dumps(metrics))
    return 0
