"""Full-text search: the query language, one for both backends (the index itself is the database's: every
concept's writes keep it in step, `store/search.py`)."""
