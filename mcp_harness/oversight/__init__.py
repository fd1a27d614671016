"""What people supervising agents read: the console's board, task pages, graph, timeline and threads, the status
overview."""
