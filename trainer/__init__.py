"""Keras BERT pretraining on the shards (see the trainer issue); empty for now."""
