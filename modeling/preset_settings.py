"""The model and training settings that the families' presets share, and `preset`, which builds one.

A preset is {"description", "model": config fields (the grammar among them), "training": hf-slm train's settings}.
Paper 000's settings serve its own families and paper 002's (whose models "train with TG's hyper-parameters"), and
the CPU-sized one serves every family that has a tiny preset; each family's presets are in its own config file.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

# Paper 000, Appendix B (Figure 9). In the PTB column the figure gives two settings: one for TXL (terminals)
# and one shared by TXL (CC) and TG (vocabulary 23,835 vs 23,888, for instance). Training settings (batch size in
# sequences, steps, warm-up, learning rates; the segment length L and memory length M that training on documents
# reads, hf_slm/training/train.py) go with each preset for `hf-slm train`; gradients are clipped to norm 3 and Adam
# uses betas (0.9, 0.999), as the reference. BLLIP-LG has two batch sizes: 176 sentences, "picked to equalize the
# number of tokens per batch" with the 64 documents of document-level training (document_batch_size).
# hf_slm/families/transformer_grammar_paper.py holds Figure 9 beside these presets (`hf-slm presets --paper 000`).
PTB_SYNTACTIC = dict(
    model=dict(vocab_size=23888, hidden_size=192, intermediate_size=768, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.34, core_dropout=0.19, final_dropout=0.45),
    training=dict(batch_size=64, segment_length=192, memory_length=192, max_steps=50_000, warmup_steps=6_000,
                  initial_learning_rate=1e-7, learning_rate=7.1e-4, final_learning_rate=3e-7),
)
PTB_TERMINALS = dict(
    model=dict(vocab_size=23835, hidden_size=192, intermediate_size=768, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.25, core_dropout=0.24, final_dropout=0.49),
    training=dict(batch_size=64, segment_length=80, memory_length=80, max_steps=50_000, warmup_steps=6_000,
                  initial_learning_rate=1e-7, learning_rate=6.4e-4, final_learning_rate=3e-7),
)
BLLIP = dict(
    model=dict(vocab_size=32768, hidden_size=1024, intermediate_size=4096, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.1),
    training=dict(batch_size=176, document_batch_size=64, segment_length=256, memory_length=256, max_steps=100_000,
                  warmup_steps=8_000, initial_learning_rate=1e-7, learning_rate=1.5e-4, final_learning_rate=3e-7),
)


# A CPU-sized setting for trying a pipeline end to end (TG on the GUM sample, DTG on UD English EWT): the sizes of the
# quickstart's model (hf_slm/cli/quickstart.py), with attention-weight dropout off because on CPUs it forces
# PyTorch's unfused attention kernel. 1024 positions: EWT's longest training tree expands to 608 under DTG.
TINY = dict(
    model=dict(vocab_size=2000, hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
               embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.1, attention_dropout=0.0,
               max_sequence_length=1024),
    training=dict(batch_size=16, max_steps=2_000, warmup_steps=200,
                  initial_learning_rate=1e-7, learning_rate=1e-3, final_learning_rate=3e-7),
)


def preset(base, grammar, description, model=None, **training):
    """The preset of `grammar` with the model and training settings of `base` (one of the settings above, or a
    family's own), its model settings updated with `model` (what the family's paper fixes whatever the size, such as
    its released code's feed-forward activation) and its training settings with `training`."""
    return {"description": description, "model": dict(base["model"], grammar=grammar, **(model or {})),
            "training": dict(base["training"], **training)}
