"""Model card templates (one per model family), filled by `hf-slm card` (see README.md here).

The templates are Jinja2 files installed as package data beside this module. `hf_slm.publishing.model_card` picks one
by the checkpoint's grammar and renders it with a loader rooted at `TEMPLATE_DIRECTORY`, so that the
family templates can extend `base.md`.
"""

from pathlib import Path

TEMPLATE_DIRECTORY = Path(__file__).resolve().parent

# The license id a card states for the weights unless told otherwise. Here rather than in hf_slm.publishing.model_card
# so that `hf-slm card --help` can show it without importing jinja2 and huggingface_hub.
DEFAULT_LICENSE = "apache-2.0"

__all__ = ["DEFAULT_LICENSE", "TEMPLATE_DIRECTORY"]
