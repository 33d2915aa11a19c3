"""Tiny Syntactic Ordered Memory models, greedy decoding by hand, and SOM's exact perplexity of a few sentences."""

import torch

from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM

from conftest import DEPENDENCY_TREEBANK

SENTENCES = DEPENDENCY_TREEBANK["train"]


def tiny_model(tokenizer, seed=0, **options):
    fields = dict(vocab_size=len(tokenizer), hidden_size=8, num_slots=6, intermediate_size=12, parser_size=6,
                  dropout=0.0, embedding_dropout=0.0, output_dropout=0.0)
    fields.update(options)
    torch.manual_seed(seed)
    return SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(**fields))


def manual_greedy(model, prompt, steps):
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(steps):
            next_id = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], 1)
    return ids


def model_for(tokenizer, num_slots=8, seed=0):
    torch.manual_seed(seed)
    config = SyntacticOrderedMemoryConfig(vocab_size=len(tokenizer), hidden_size=8, num_slots=num_slots,
                                          intermediate_size=12, parser_size=6, dropout=0.0, embedding_dropout=0.0,
                                          output_dropout=0.0)
    return SyntacticOrderedMemoryForCausalLM(config).eval()


def som_perplexity(model, tokenizer, sentences, directory):
    """`word_perplexity` (the shared driver, SOM's exact scorer) of `sentences` written one per line."""
    data = directory / "sentences.txt"
    data.write_text("\n".join(" ".join(words) for words in sentences) + "\n")
    return word_perplexity(model, tokenizer, data, progress=False)
