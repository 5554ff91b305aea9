"""Beam adapters (PTransforms, DoFns, IO) and the ``bertprep`` command line."""
