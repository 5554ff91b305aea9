"""Keras BERT pretraining on the shards: keras-hub's ``BertBackbone`` with masked-LM and NSP heads,
tf.data input, TPU/GPU/CPU strategies, checkpoints with resume, evaluation and encoder export.

Needs the training extras (TensorFlow, Keras, keras-hub); see ``trainer/README.md``. Entry point:
``bertprep train`` (``pipeline/commands/train.py``) or ``trainer.training.train``.
"""
