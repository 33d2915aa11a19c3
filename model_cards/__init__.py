"""Model card templates (one per model family), filled by `hf-slm card`."""
