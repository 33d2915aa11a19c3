"""What a syntactic model's `generate` reads from its caller: the GenerationConfig fields it honours, the others refused.

transformers' users steer `generate` with a GenerationConfig and keyword arguments, layered as transformers layers
them (`GenerationMixin._prepare_generation_config`): the keywords over the `generation_config` given, over the
model's own `model.generation_config` (the checkpoint's generation_config.json). A tree model decodes with
word-synchronous search, not token by token, so it honours the fields that mean something there
(`HONOURED_FIELDS`) and refuses every other field that is set to something other than transformers' default, all in
one error that says, for each, why and what to use instead (`REFUSED_FIELDS`). transformers' global defaults are not
applied: a field nobody set takes the search's own default (top_k = 2 when sampling, paper 003's).

Hub code: imports only transformers and the standard library.
"""

import copy

from transformers import GenerationConfig

# The fields a tree model's generate honours, and what each means there.
HONOURED_FIELDS = {
    "do_sample": "draw each action among the legal ones instead of beam search",
    "temperature": "sampling: divide the log-probabilities by it",
    "top_k": "sampling: draw among the k most probable legal actions (0: all; default 2, paper 003's)",
    "top_p": "sampling: draw among the most probable legal actions whose probabilities add up to top_p",
    "num_beams": "beam search: the word beam (the action beam is ten times larger unless beam_options set it)",
    "num_return_sequences": "trees returned per prompt",
    "max_new_tokens": "the most new words (words, not pieces or actions: a tree closes after its last word)",
    "min_new_tokens": "at most 1: every tree has at least one new word",
    "use_cache": "beam search keeps a key/value cache (False: re-encode every prefix)",
    "return_dict_in_generate": "return a SyntacticGenerateOutput (a GenerateBeamDecoderOnlyOutput with Nb-Up's starts) "
                               "instead of the sequences",
    "output_scores": "with return_dict_in_generate: sequences_scores, each tree's joint log p(x, y)",
    "pad_token_id": "pads the returned rows",
    "bos_token_id": "must be the model's: every sequence starts with it",
    "eos_token_id": "must be the model's, if it has one (a tree ends when its root closes)",
}

# Fields a saved generation config carries that are no choice.
_BOOKKEEPING = {"transformers_version", "_from_model_config"}
# Fields whose default transformers leaves out of its defaults table (a model's generation config writes them False).
_FALSE_BY_DEFAULT = {"output_attentions": False, "output_hidden_states": False}

# Why each refused field cannot be honoured, and what to use instead (fields not named here get _OTHER_REASON).
_NO_TOKEN_STEPS = ("the search picks actions under the grammar's legality and ranks trees by their joint "
                   "log-probability; it has no per-token logit processing")
REFUSED_FIELDS = {
    "max_length": "it counts tokens of prompt and output; a tree model counts new words: use max_new_tokens",
    "min_length": "it counts tokens; every tree has at least one new word (min_new_tokens=1)",
    "output_attentions": "the search's model calls cover a few positions each: run model(sequences) for them",
    "output_hidden_states": "the search's model calls cover a few positions each: run model(sequences) for them",
    "output_logits": "the search keeps each tree's joint score, not per-step logits: use return_dict_in_generate "
                     "with output_scores for sequences_scores, or model(sequences) for every action's logits",
    "num_beam_groups": "word-synchronous beam search has one group: use num_beams",
    "diversity_penalty": "word-synchronous beam search has one group: use num_beams",
    "constraints": "the grammar and the search constraints rule what is generated: pass prompt words",
    "force_words_ids": "the grammar and the search constraints rule what is generated: pass prompt words",
    "length_penalty": "trees are ranked by their joint log-probability: use beam_options",
    "early_stopping": "a word beam ends when its trees close: use num_beams and beam_options",
    "max_time": "the search runs to complete trees: lower max_new_tokens or num_beams",
    "stop_strings": "a tree ends when its root closes: lower max_new_tokens",
    "assistant_model": "speculative decoding proposes tokens without the grammar's structure",
    "prompt_lookup_num_tokens": "speculative decoding proposes tokens without the grammar's structure",
    "cache_implementation": "the search keeps its own key/value cache over the positions actions expand to: "
                            "use use_cache",
}
_OTHER_REASON = f"{_NO_TOKEN_STEPS}: leave it unset"
# Arguments of transformers' generate that are not GenerationConfig fields, and why each is refused.
REFUSED_ARGUMENTS = {
    "logits_processor": _NO_TOKEN_STEPS,
    "stopping_criteria": "a tree ends when its root closes: lower max_new_tokens",
    "prefix_allowed_tokens_fn": "the grammar says which actions are legal: pass prompt words",
    "streamer": "the search returns whole trees, not tokens as they come",
    "assistant_model": REFUSED_FIELDS["assistant_model"],
    "negative_prompt_ids": "classifier-free guidance is not part of the search",
    "synced_gpus": "the search runs on one device",
    "custom_generate": "a tree model generates with its own search",
}
# Inputs that describe the prompt and are read elsewhere (the prompt's words come from input_ids).
PROMPT_INPUTS = ("input_ids", "attention_mask")
# generate's own arguments beside transformers': the sampler's seed, and a callback per word step (progress bars:
# generation_slm.WordSynchronousBeamSearch's on_word)
PROJECT_ARGUMENTS = ("seed", "on_word")


def generation_settings(model, generation_config, kwargs, prompt_inputs=PROMPT_INPUTS):
    """The settings of one `generate` call of a tree model: ({honoured field: value}, {other input: value}).

    `kwargs` are generate's keyword arguments (they are consumed). Fields come from them, then `generation_config`,
    then `model.generation_config`, as in transformers; the inputs returned are the prompt's (`prompt_inputs`: what
    the tokenizer gives for words) and the project's own `seed`. Raises ValueError naming every field or argument set that the search cannot honour, with
    why and what to use instead, and every argument that is neither.
    """
    # Layered by hand, not with GenerationConfig.update: its validation is token-level generation's (it refuses
    # num_return_sequences > 1 without num_beams, which a tree search serves from its word beam).
    config = copy.deepcopy(generation_config) if generation_config is not None else GenerationConfig()
    own = getattr(model, "generation_config", None)
    for name, value in (own.to_dict() if own is not None else {}).items():
        if getattr(config, name, None) is None:
            setattr(config, name, value)
    refused_arguments = {name: kwargs.pop(name) for name in list(kwargs) if name in REFUSED_ARGUMENTS}
    inputs = {}  # what is not a GenerationConfig field: the model's inputs
    for name, value in kwargs.items():
        if hasattr(config, name):
            setattr(config, name, value)
        else:
            inputs[name] = value
    kwargs.clear()
    defaults = {**GenerationConfig()._get_default_generation_params(), **_FALSE_BY_DEFAULT}
    settings, refused = {}, {}
    for name, value in config.to_dict().items():
        if value is None or name in _BOOKKEEPING:
            continue
        if name in HONOURED_FIELDS:
            settings[name] = value
        elif name not in defaults or defaults[name] != value:
            refused[name] = value
    problems = [f"{name}={value!r} ({REFUSED_FIELDS.get(name, _OTHER_REASON)})" for name, value in refused.items()]
    problems += [f"{name} ({REFUSED_ARGUMENTS[name]})" for name, value in refused_arguments.items() if value is not None]
    unknown = sorted(name for name in inputs if name not in (*prompt_inputs, *PROJECT_ARGUMENTS))
    if unknown:
        problems.append(f"{unknown}: neither GenerationConfig fields nor inputs of the model (it reads "
                        f"{list(prompt_inputs)} and the project's {list(PROJECT_ARGUMENTS)})")
    _check_settings(model, settings, problems)
    if problems:
        raise ValueError(f"generate() of a {model.config.grammar} model cannot honour " + "; ".join(problems)
                         + f". It honours {sorted(HONOURED_FIELDS)}")
    return settings, inputs


def _check_settings(model, settings, problems):
    """Add to `problems` the honoured fields whose values the search cannot take."""
    config = model.config
    for name in ("bos_token_id", "eos_token_id"):
        value = settings.get(name)
        expected = getattr(config, name, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        if value is not None and expected is not None and expected not in values:
            problems.append(f"{name}={value!r} (the model's is {expected}: its sequences start and end as it was "
                            "trained; leave it unset)")
    if settings.get("min_new_tokens", 0) > 1:
        problems.append(f"min_new_tokens={settings['min_new_tokens']} (a tree may close after its first new word; "
                        "the search sets no longer minimum: leave it unset or 1)")
    if settings.get("do_sample") and settings.get("num_beams", 1) > 1:
        problems.append(f"num_beams={settings['num_beams']} with do_sample (each tree is sampled on its own, without a "
                        "beam: use num_return_sequences for several samples)")
    top_p = settings.get("top_p")
    if top_p is not None and not 0 < top_p <= 1:
        problems.append(f"top_p={top_p!r} (expected 0 < top_p <= 1)")
    if settings.get("output_scores") and not settings.get("return_dict_in_generate"):
        settings.pop("output_scores")  # as in transformers: scores come back only in the output dict
