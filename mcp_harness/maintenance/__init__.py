"""Backup and retention: export, import with its checks, prune, and their store."""
