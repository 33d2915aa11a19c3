"""The reference implementation's side of benchmarks/reference_comparison.py: run in the reference's environment
(jax, dm-haiku, its C++ masking extension built), never in hf-slm's; it imports neither torch nor hf_slm.

    python benchmarks/reference_comparison_jax.py --reference PATH --cases WORK

For each case folder that hf-slm's side wrote into WORK (case.json: the reference's model config and token type
ranges; weights.npz: hf-slm's parameters by name; sequences.npz: the action ids), build the model with the
reference's own code, as its score.py does: common.build_maskrules and common.build_forward, the sequences cut into
chunks by preprocessing.get_chunks_from_dataset (its masking rules in C++), each chunk through the forward function
with the Haiku state (the memory) carried from chunk to chunk. hf-slm's parameters are written into the Haiku
parameter tree by name (`parameter_sources`); every Haiku parameter must receive one, and every hf-slm parameter must
be used. Writes reference.npz into the folder: per sequence, the log-softmax of the logits at every chunk position
[chunks x L, V] and the chunks' input ids, so that hf-slm's side can check that both read the same expanded ids.
Prints one line naming the versions used.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def parameter_sources(config, num_attention_functions):
    """{(Haiku module, parameter): (hf-slm parameter, how to lay it out)} of the reference's model for `config`.

    Layouts: "matrix", a torch Linear's [out, in] as Haiku's [in, out]; "flat", u and v [heads, d_head] as the
    reference's r_w_bias and r_r_bias [heads * d_head] (both orders are head-major); "same" otherwise. The reference
    names a layer's attention h{i}_attn, or h{i}_attn0 / h{i}_attn1 with distinct COMPOSE attention (indicator 1 is
    COMPOSE, hf-slm's attentions.1); with hybrid heads its restricted heads have no output projection of their own:
    h{i}_attn*_linear takes the restricted heads' values then the unrestricted ones', as hf-slm's o_projs do.
    Unrestricted layers (the top num_unrestricted_layers) are plain Transformer-XL layers (h{i}_attn, one function).
    """
    sources = {("lm/~/embedding_layer", "input_embedding"): ("model.decoder.embed_tokens.weight", "same"),
               ("lm/~/embedding_layer", "bias"): ("output_bias", "same")}
    layers = config["num_layers"]
    hybrid_heads = config.get("num_unrestricted_heads") is not None
    for i in range(layers):
        ours, theirs = f"model.decoder.layers.{i}.", f"lm/~/core/h{i}_"
        if i >= layers - config.get("num_unrestricted_layers", 0):
            attentions = [("attn", ours + "unrestricted_attention.")]
            projections = [("attn/linear", ours + "o_projs.0.")]
        else:
            suffixes = [""] if num_attention_functions == 1 else [str(k) for k in range(num_attention_functions)]
            attentions = [(f"attn{suffix}", f"{ours}attentions.{k}.") for k, suffix in enumerate(suffixes)]
            projections = [(f"attn{suffix}_linear" if hybrid_heads else f"attn{suffix}/linear", f"{ours}o_projs.{k}.")
                           for k, suffix in enumerate(suffixes)]
            if hybrid_heads:
                attentions.append(("unrestricted_attn", ours + "unrestricted_attention."))
        for module, source in attentions:
            for linear, projection in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"),
                                       ("relative_keys", "r_proj")):
                sources[(theirs + module + "/" + linear, "w")] = (source + projection + ".weight", "matrix")
            sources[(theirs + module, "r_w_bias")] = (source + "u", "flat")
            sources[(theirs + module, "r_r_bias")] = (source + "v", "flat")
        dense = projections + [("mlp/linear", ours + "ffn_in."), ("mlp/linear_1", ours + "ffn_out.")]
        for module, source in dense:
            sources[(theirs + module, "w")] = (source + "weight", "matrix")
            sources[(theirs + module, "b")] = (source + "bias", "same")
        for norm, source in (("ln1", ours + "ln_attention."), ("ln2", ours + "ln_ffn.")):
            sources[(theirs + norm, "scale")] = (source + "weight", "same")
            sources[(theirs + norm, "offset")] = (source + "bias", "same")
    return sources


def haiku_parameters(initialized, weights, sources):
    """The Haiku parameter tree `initialized` (from the forward function's init) with every value taken from
    hf-slm's `weights` through `sources`; ValueError naming a parameter left without a value or one left unused."""
    layouts = {"matrix": lambda a: a.T, "flat": lambda a: a.reshape(-1), "same": lambda a: a}
    filled, used = {}, set()
    for module, parameters in initialized.items():
        filled[module] = {}
        for name, value in parameters.items():
            if (module, name) not in sources:
                raise ValueError(f"no hf-slm parameter for the reference's {module}/{name} {tuple(value.shape)}")
            source, layout = sources[(module, name)]
            array = layouts[layout](weights[source])
            if array.shape != value.shape:
                raise ValueError(f"{source} {array.shape} does not fit the reference's {module}/{name} {value.shape}")
            filled[module][name] = np.asarray(array, dtype=value.dtype)
            used.add(source)
    unused = sorted(set(weights) - used)
    if unused:
        raise ValueError(f"hf-slm parameters the reference's model has no place for: {unused}")
    return filled


def read_case(folder):
    spec = json.loads((folder / "case.json").read_text())
    with np.load(folder / "weights.npz") as weights, np.load(folder / "sequences.npz") as sequences:
        weights = dict(weights)
        sequences = [sequences[f"ids_{k}"] for k in range(len(sequences.files))]
    return spec, weights, sequences


def run_case(folder):
    """The reference's log-probabilities of one case (module docstring), written to folder/reference.npz."""
    import jax  # here and not above: hf-slm's tests read parameter_sources without jax
    from transformer_grammars import common
    from transformer_grammars.data import preprocessing
    from transformer_grammars.models.masking import utils as masking_utils

    spec, weights, sequences = read_case(folder)
    config = spec["reference_config"]
    ranges = masking_utils.TokenTypeRanges(**spec["token_type_ranges"])
    rules = common.build_maskrules(config)
    forward = common.build_forward(config, rules, ranges, is_training=False)
    apply = jax.jit(forward.apply)
    params, state, results = None, None, {}
    for k, ids in enumerate(sequences):
        chunks = preprocessing.get_chunks_from_dataset(iter([ids]), rules, ranges, shape_prefix=(1,), multithread=False)
        log_probs, inputs = [], []
        for chunk in chunks:
            model_inputs = common.model_input_from_chunk(chunk, rules)
            if params is None:
                initialized, state = forward.init(jax.random.PRNGKey(0), **model_inputs)
                sources = parameter_sources(config, rules.num_attention_functions)
                params = haiku_parameters(initialized, weights, sources)
            # The state (memory) runs on from chunk to chunk; a sequence's first chunk empties it (beginning_of_seq).
            logits, state = apply(params, state, None, **model_inputs)
            log_probs.append(np.asarray(jax.nn.log_softmax(logits, axis=-1))[0])
            inputs.append(chunk.inputs[0])
        results[f"log_probs_{k}"] = np.concatenate(log_probs)
        results[f"inputs_{k}"] = np.concatenate(inputs)
    np.savez(folder / "reference.npz", **results)


def versions(reference):
    """One line: the reference's revision (when it is a git checkout), jax's and dm-haiku's versions."""
    import haiku
    import jax

    try:
        revision = subprocess.run(["git", "-C", str(reference), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        revision = "revision unknown"
    return f"transformer_grammars {revision}, jax {jax.__version__}, dm-haiku {haiku.__version__}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, required=True, help="checkout of the reference, extension built")
    parser.add_argument("--cases", type=Path, required=True, help="the folder hf-slm's side wrote")
    args = parser.parse_args()
    sys.path.insert(0, str(args.reference))
    for folder in sorted(path for path in args.cases.iterdir() if (path / "case.json").exists()):
        run_case(folder)
    print(versions(args.reference))


if __name__ == "__main__":
    main()
