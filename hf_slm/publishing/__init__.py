"""Publishing a checkpoint: its model card (model_card.py) and pushing it to a hub (hub.py)."""
