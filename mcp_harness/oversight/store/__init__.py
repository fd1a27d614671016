"""The oversight SQL: board columns, waits, the graph, the timeline, threads and their links to the work."""
