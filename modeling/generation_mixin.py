"""Generation for every family's causal-LM class over a grammar: one mixin, whatever computes the predictions.

`SyntacticGenerationMixin` is transformers' GenerationMixin with what a tree model adds: `generate` completes
prompts into trees by word-synchronous beam search or sampling (generation_slm.py), `word_synchronous_beam_search`
searches given sentences, and the text-generation pipeline returns trees (pipeline_slm.py). A words-only grammar
(TXL (terminals)) keeps transformers' own generate.

It is also where the hooks of a family's LM class are declared, each with its default (docs/architecture.md,
"Adding a family"):
- `generates_words`: whether the model writes words (transformers' own generate and pipeline) rather than trees;
  by default its grammar's `words_only` (a family without a grammar, SOM, says True);
- `grammar`: the model's grammar (a GrammarProtocol); by default its base model's (`self.model.grammar`, the
  AutoModel class builds it from the config); and `config`, a SyntacticGrammarConfig: a tree model's;
- `search_decoder(use_cache)`: the search_decoders.SearchDecoder the beam search runs the model with. Required:
  a Transformer family's base class gives the key/value-cache decoder (modeling_slm.py), a recurrent family its own;
- `name_tree_pipeline(config)`: given here; the class calls it in its __init__, so that a checkpoint names its
  pipeline.

Hub code: imports only torch, transformers and its sibling files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from transformers import GenerationMixin
from transformers.generation.utils import GenerateBeamDecoderOnlyOutput

from .configuration_slm import recorded_word_boundaries
from .generation_options import PROMPT_INPUTS, generation_settings
from .generation_slm import BeamSearchOptions, WordSynchronousBeamSearch, syntactic_generate

if TYPE_CHECKING:
    from .search_decoders import SearchDecoder


@dataclass
class SyntacticGenerateOutput(GenerateBeamDecoderOnlyOutput):
    """generate's output with return_dict_in_generate: transformers' beam output, and for a grammar whose `)` each
    come with a start (paper 003's Nb-Up) `starts` [N, L], each action's start (-1 elsewhere), without which its
    trees cannot be read: `tokenizer.decode(sequences[i], starts=starts[i].tolist())`."""

    starts: torch.LongTensor | None = None


class SyntacticGenerationMixin(GenerationMixin):
    """generate, word-synchronous beam search and the text-generation pipeline of a model over a grammar's actions
    (module docstring)."""

    def search_decoder(self, use_cache: bool = True) -> SearchDecoder:
        """The decoder the word-synchronous beam search runs this model with (search_decoders.py's interface);
        use_cache=False: one that computes every hypothesis's prefix again (for tests and benchmarks)."""
        raise NotImplementedError(f"{type(self).__name__} gives the beam search no decoder: a family's LM class "
                                  "implements search_decoder(use_cache) (modeling/generation_mixin.py)")

    @property
    def grammar(self) -> Any:
        """The model's grammar (a GrammarProtocol): its base model's, which the base model builds from the config."""
        return self.base_model.grammar

    @property
    def generates_words(self) -> bool:
        """Whether generate writes words (transformers' own generate) rather than trees: the grammar's words_only."""
        return bool(self.grammar.words_only)

    def name_tree_pipeline(self, config: Any) -> None:
        """Name the tree pipeline in `config` (custom_pipelines) unless the model writes words."""
        if not self.generates_words:  # its pipeline reads trees: pipeline_slm.py
            from .pipeline_slm import TEXT_GENERATION

            config.custom_pipelines = TEXT_GENERATION

    @property
    def text_generation_pipeline(self) -> type:
        """The class of transformers' text-generation pipeline for this model: `pipeline("text-generation",
        model=model, tokenizer=tokenizer, pipeline_class=model.text_generation_pipeline)` (pipeline_slm.py)."""
        if self.generates_words:
            from transformers import TextGenerationPipeline

            return TextGenerationPipeline
        from .pipeline_slm import SyntacticTextGenerationPipeline

        return SyntacticTextGenerationPipeline

    def generate(self, inputs: torch.Tensor | None = None, generation_config: Any = None, tokenizer: Any = None,
                 word_start_mask: list[bool] | None = None, beam_options: dict | None = None, **kwargs: Any) -> Any:
        """HF-style generation. Words-only models (TXL (terminals)) use transformers' own generate. Tree models complete each
        prompt (`<s>` + word pieces, as tokenizer(words, is_split_into_words=True) gives, padded on either side;
        None for no prompt) into a tree with word-synchronous beam search, or by sampling (`do_sample=True`), and
        return action ids that `tokenizer.decode` turns into trees.

        The GenerationConfig fields a tree search can honour are read from kwargs, `generation_config` and
        `model.generation_config`, as transformers reads them; the others, when set, are refused in one error that
        says why and what to use instead (generation_options.py: HONOURED_FIELDS, REFUSED_FIELDS). max_new_tokens
        counts words. `seed` seeds the sampler; `on_word` is called after each word step with the number of
        sequences that took a word in it (a progress bar's update). `return_dict_in_generate=True` returns a
        SyntacticGenerateOutput (with `output_scores`, its sequences_scores are each tree's joint
        log p(x, y)). Where words begin comes from the config (word_start_ranges, recorded when the model was
        built for its tokenizer); a checkpoint saved before that needs `tokenizer=` (or `word_start_mask=`).
        `beam_options` (a dict) sets any BeamSearchOptions field.
        """
        if self.generates_words:  # TXL (terminals), SOM: transformers' own generate
            return super().generate(inputs, generation_config=generation_config, **kwargs)
        # a prompt is words: the tokenizer's other fields for them (Nb-Up's constituent_starts, all -1) add nothing
        settings, model_inputs = generation_settings(self, generation_config, kwargs,
                                                     (*PROMPT_INPUTS, *self.grammar.action_inputs))
        input_ids = model_inputs.get("input_ids", inputs)
        # the attention mask adds nothing: the prompt's words are its ids that are not padding, on either side
        word_start_mask, incomplete = self._word_boundaries(tokenizer, word_start_mask)
        beam_options = dict(beam_options or {})
        if "use_cache" in settings:
            beam_options.setdefault("use_cache", bool(settings["use_cache"]))
        output, scores = syntactic_generate(
            self, input_ids, num_beams=settings.get("num_beams", 1), do_sample=bool(settings.get("do_sample", False)),
            top_k=settings.get("top_k"), temperature=settings.get("temperature", 1.0), top_p=settings.get("top_p"),
            max_new_words=20 if settings.get("max_new_tokens") is None else settings["max_new_tokens"],
            num_return_sequences=settings.get("num_return_sequences", 1), word_start_mask=word_start_mask,
            incomplete_word_ids=incomplete, seed=model_inputs.get("seed"), pad_token_id=settings.get("pad_token_id"),
            with_scores=True, on_word=model_inputs.get("on_word"), **beam_options,
        )
        if not settings.get("return_dict_in_generate"):
            return output
        starts = getattr(output, self.grammar.start_input) if self.grammar.start_input else None
        return SyntacticGenerateOutput(sequences=output, starts=starts,
                                       sequences_scores=scores if settings.get("output_scores") else None)

    def _word_boundaries(self, tokenizer: Any, word_start_mask: list[bool] | None) -> tuple[Any, Any]:
        """(word_start_mask, incomplete_word_ids) for generate: the tokenizer's if given, else `word_start_mask` if
        given, else the config's record (word_start_ranges); ValueError naming `tokenizer=` when there is none."""
        if tokenizer is not None:
            return tokenizer.word_start_mask, getattr(tokenizer, "incomplete_word_ids", ())
        if word_start_mask is not None:
            return word_start_mask, ()
        recorded = recorded_word_boundaries(self.config)
        if recorded is None:
            raise ValueError(
                f"this {self.config.grammar} model's config does not record where words begin (word_start_ranges: it "
                "was saved before generate could read them from the checkpoint), so generate cannot tell a new word "
                "from the next piece of one; pass tokenizer=<the checkpoint's tokenizer> (or word_start_mask=)")
        return recorded

    def word_synchronous_beam_search(self, words: list[list[list[int]]], options: BeamSearchOptions | None = None,
                                     word_start_mask: list[bool] | None = None, **option_fields: Any) -> Any:
        """Forced-word beam search: `words[s]` = sentence s as words of piece ids. Returns SentenceResults
        (surprisals in nats, log p(x) lower bound, best trees). See generation_slm.BeamSearchOptions."""
        if getattr(self, "grammar", None) is None:
            raise ValueError(f"{type(self).__name__} has no grammar whose trees a beam search could build: it scores words "
                             "exactly (its scorer, hf_slm.score)")
        options = options or BeamSearchOptions(**option_fields)
        return WordSynchronousBeamSearch(self, options, word_start_mask=word_start_mask).search(words)
