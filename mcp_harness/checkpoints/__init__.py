"""Checkpoints: versioned JSON states of threads, merge patches, array chains, manifests, schemas, and their
store."""
