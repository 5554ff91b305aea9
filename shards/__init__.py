"""Reading, checking and measuring pretraining shards (ours or google-research/bert's).

Uses TensorFlow's parser for speed and fidelity (the trainer reads records the same way); never
imported by Beam workers.
"""
