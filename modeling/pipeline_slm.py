"""transformers' text-generation pipeline for the models that generate trees.

transformers' TextGenerationPipeline takes a model's output for text that continues its prompt: it decodes the ids
after the prompt's and appends them to the prompt string. A tree model answers "the bird" with a tree whose words
begin with the prompt's, `(S (NP the bird) (VP sings))`, which that reading garbles; and the pipeline's own
defaults (sampling, 256 new tokens) make a runaway tree of 256 sampled words, and an error beside `num_beams`, a
search the model cannot sample in. `SyntacticTextGenerationPipeline` returns each tree as the tokenizer writes it
(so it reads back through the tokenizer), and leaves every default to the model's `generate` (word-synchronous beam
search, at most 20 new words: modeling_slm.py). A tree model's config names it under `custom_pipelines`
(`TEXT_GENERATION`), so that `pipeline("text-generation", model=DIR, trust_remote_code=True)` builds it; for a
model object, pass `pipeline_class=model.text_generation_pipeline`.

Hub code: imports only transformers and the standard library.
"""

from transformers.pipelines.text_generation import ReturnType, TextGenerationPipeline

# What a config's custom_pipelines holds for this pipeline (transformers reads "impl" as file.Class in the checkpoint)
TEXT_GENERATION = {"text-generation": {"impl": "pipeline_slm.SyntacticTextGenerationPipeline",
                                       "pt": ["AutoModelForCausalLM"], "tf": [], "type": "text"}}


class SyntacticTextGenerationPipeline(TextGenerationPipeline):
    """The text-generation pipeline whose answer is a tree: `generated_text` is the whole tree (its words are the
    prompt's, then the new ones), with or without return_full_text, since a tree does not split into a prompt and
    a continuation. return_tensors=True gives the tree's ids, as transformers' pipeline does."""

    # no defaults of the pipeline's own: the model's generate has its own (its generation_config, then the search's)
    _default_generation_config = None

    def _forward(self, model_inputs, **generate_kwargs):
        # generate's output class carries the starts a Nb-Up tree is read with; the pipeline passes them through
        return super()._forward(model_inputs, **{**generate_kwargs, "return_dict_in_generate": True})

    def postprocess(self, model_outputs, return_type=ReturnType.FULL_TEXT, clean_up_tokenization_spaces=None,
                    skip_special_tokens=None, **kwargs):
        if return_type == ReturnType.TENSORS:
            return super().postprocess(model_outputs, return_type=return_type, **kwargs)
        sequences = model_outputs["generated_sequence"][0].tolist()
        starts = model_outputs["starts"][0].tolist() if "starts" in model_outputs else [None] * len(sequences)
        return [{"generated_text": self._tree_text(sequence, row_starts)}
                for sequence, row_starts in zip(sequences, starts)]

    def _tree_text(self, sequence, starts):
        """The tree of a row of generate's output (right-padded), as the tokenizer writes it."""
        pad = self.tokenizer.pad_token_id
        length = len(sequence)
        while length and sequence[length - 1] == pad:
            length -= 1
        options = {} if starts is None else {"starts": starts[:length]}
        return self.tokenizer.decode(sequence[:length], skip_special_tokens=True, **options)
