"""The RNNG family's presets: Noji and Oseki's batched RNNG as its released code trains it (rnng-pytorch's README:
Adam, learning rate 0.001, 512 sentences a batch, dropout 0.3, gradients clipped to norm 5; 2-layer stack LSTM,
256-dimensional embeddings and states), on PTB's words, and a CPU-sized one."""

# rnng-pytorch trains 18 epochs; PTB's 39,832 training sentences in batches of 512 are 78 steps an epoch.
_PTB_STEPS = 18 * 78
_CONSTANT = dict(warmup_steps=0, initial_learning_rate=1e-3, learning_rate=1e-3, final_learning_rate=1e-3)

RNNG_PRESETS = {
    "rnng-ptb": {
        "description": "generative RNNG as Noji and Oseki (2021) train it on PTB (rnng-pytorch's settings): 2-layer "
                       "stack LSTM, d 256, dropout 0.3, Adam 1e-3, 512 sentences a batch, 18 epochs",
        # vocab_size: the pieces `--pieces sentencepiece` would train, as many as paper 000's PTB word vocabulary
        "model": dict(grammar="rnng", embedding_size=256, hidden_size=256, num_hidden_layers=2, dropout=0.3,
                      vocab_size=23888),
        "training": dict(batch_size=512, max_steps=_PTB_STEPS, max_grad_norm=5.0, pieces="words", **_CONSTANT),
    },
    "rnng-tiny": {
        "description": "generative RNNG for CPUs: 2-layer stack LSTM, d 64, the tiny presets' 2,000 steps",
        "model": dict(grammar="rnng", embedding_size=64, hidden_size=64, num_hidden_layers=2, dropout=0.1,
                      vocab_size=2000),
        "training": dict(batch_size=16, max_steps=2_000, max_grad_norm=5.0, **_CONSTANT),
    },
}


def preset_columns(preset):
    """What `hf-slm presets` shows of an RNNG preset: its sizes."""
    model = preset["model"]
    return {"layers": model["num_hidden_layers"], "d": model["embedding_size"], "hidden": model["hidden_size"]}
