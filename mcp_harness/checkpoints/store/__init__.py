"""The checkpoints' SQL: threads, versions, content-addressed values, array segments and schemas."""
