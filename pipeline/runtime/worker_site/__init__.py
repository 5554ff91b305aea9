"""Put on the PYTHONPATH of the processes bertprep starts (Beam's multi-process SDK workers, the
shard scanners) so that its ``sitecustomize`` runs first in them; see ``pipeline.runtime.quiet``."""
