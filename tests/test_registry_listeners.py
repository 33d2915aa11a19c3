"""The family registry tells its listeners of each family registered (on_family_registered), so that
hf_slm/auto_registration.py registers a late family with the Auto classes without the registry importing it
(no import circle: tests/test_import_layers.py)."""

import hf_slm
from hf_slm.auto_registration import register_family_if_ready
from hf_slm.families import registry


def _family(name):
    return registry.Family(
        name=name, model_type=name, paper="test", config_class="example_package.config:Config",
        model_class="example_package.model:Model", causal_lm_class="example_package.model:ForCausalLM",
        tokenizer_classes=("example_package.tokenizer:Tokenizer",),
        variants=(registry.Variant(f"{name}-grammar", "Listener test", f"{name}-grammar", "base.md",
                                   tree_format="words", is_grammar=False),))


def test_a_listener_hears_each_family_registered_after_it_listens(monkeypatch):
    registry.registered_families()  # the builtin records are registered first (they load on first use)
    monkeypatch.setattr(registry, "_registration_listeners", [])
    heard = []
    listener = heard.append
    registry.on_family_registered(listener)
    registry.on_family_registered(listener)  # listening twice is listening once
    family = _family("listener-test-family")
    try:
        registry.register_family(family)
    finally:
        registry.unregister_family(family.name)
    assert [heard_family.name for heard_family in heard] == [family.name]


def test_importing_hf_slm_makes_auto_registration_listen():
    assert hf_slm.__name__ == "hf_slm"
    assert register_family_if_ready in registry._registration_listeners
