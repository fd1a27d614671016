"""The progress log: the rules and their store."""
