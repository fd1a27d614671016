"""The cold paths' SQL, through SQLAlchemy: rows out and in for export and import, prune's reads and deletes."""
