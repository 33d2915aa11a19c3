"""Loading policy: safetensors weights only, unless the user says they trust a pickle; tied weights tied again.

Unpickling a weight file (pytorch_model.bin) can run any code it carries, and these checkpoints are often
someone else's. transformers falls back to pickles when a checkpoint has no safetensors; our models do not,
unless `allow_pickle=True` is passed to `from_pretrained`.

Hub code: imports only transformers / huggingface_hub and the standard library.
"""

import os

SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


class PickleWeightsRefusedError(ValueError, OSError):
    """A checkpoint offers no safetensors weights and `allow_pickle=True` was not passed to from_pretrained.

    Both a ValueError (bad input) and an OSError (what from_pretrained raises for unusable checkpoints)."""


def pickle_refusal_message(checkpoint, pickles=()):
    """Why a checkpoint without safetensors weights is refused, and what to do about it."""
    found = f"; it holds pickle files: {', '.join(sorted(pickles))}" if pickles else ""
    return (
        f"{checkpoint}: no safetensors weights ({' or '.join(SAFETENSORS_FILES)}){found}. "
        "Pickle weights (pytorch_model.bin) are not loaded by default, because unpickling a file can run any code "
        "it carries. If you trust this checkpoint, pass allow_pickle=True to from_pretrained (AutoModel... "
        "classes pass it through), then save_pretrained it to a new folder, which writes safetensors."
    )


def _local_weights(checkpoint, subfolder):
    """(has safetensors, pickle file names) of a local checkpoint folder; None for a hub repository id."""
    folder = os.path.join(str(checkpoint), subfolder or "")
    if not os.path.isdir(folder):
        return None
    names = os.listdir(folder)
    return any(name in SAFETENSORS_FILES for name in names), [n for n in names if n.endswith(PICKLE_WEIGHT_SUFFIXES)]


def _hub_has_safetensors(repo_id, kwargs):
    """Whether a hub repository has safetensors weights at the requested revision (None: cannot tell).

    Asks through transformers' own `has_file`, so that the same endpoint, revision and token are used as for
    the load that just failed."""
    from transformers.utils.hub import has_file

    options = {name: kwargs[name] for name in ("revision", "token") if kwargs.get(name) is not None}
    subfolder = kwargs.get("subfolder")
    try:
        return any(has_file(repo_id, f"{subfolder}/{name}" if subfolder else name, **options) for name in SAFETENSORS_FILES)
    except Exception:  # offline, unknown repository...: let transformers' own error stand
        return None


class SafetensorsOnlyLoading:
    """Mixin for PreTrainedModel classes: `from_pretrained(..., allow_pickle=False)` refuses pickle weights; and a
    tied output layer reloads tied."""

    def post_init(self):
        super().post_init()
        if getattr(self.config, "tie_word_embeddings", False) and self._tied_weights_keys:
            # A tied output layer is the input embedding, saved once. Declared as left out of the save, Trainer's
            # reload of a checkpoint (the best one at the end, --resume) ties it again instead of reporting it as a
            # missing key, which reads as a broken save.
            self._keys_to_ignore_on_save = list(self._tied_weights_keys)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, allow_pickle=False, **kwargs):
        """PreTrainedModel.from_pretrained, reading safetensors weights only unless `allow_pickle=True`.

        allow_pickle: also accept pickle weights (pytorch_model.bin) when a checkpoint has no safetensors, as
            transformers does by default. A checkpoint without safetensors weights raises
            PickleWeightsRefusedError. Every other argument is transformers'.
        """
        if allow_pickle:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if kwargs.get("use_safetensors") is False:
            raise PickleWeightsRefusedError(
                "use_safetensors=False asks for pickle weights; pass allow_pickle=True as well if you trust them"
            )
        local = _local_weights(pretrained_model_name_or_path, kwargs.get("subfolder"))
        if local is not None and not local[0]:
            raise PickleWeightsRefusedError(pickle_refusal_message(pretrained_model_name_or_path, local[1]))
        kwargs["use_safetensors"] = True  # transformers then never falls back to pytorch_model.bin
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except OSError as error:
            if local is None and _hub_has_safetensors(pretrained_model_name_or_path, kwargs) is False:
                raise PickleWeightsRefusedError(pickle_refusal_message(pretrained_model_name_or_path)) from error
            raise
