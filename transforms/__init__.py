"""Pure logic: documents, instances, masking, the feature contract. No Beam, no TensorFlow."""
