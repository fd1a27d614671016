"""The access SQL: token hashes and console session hashes."""
