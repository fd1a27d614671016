"""Who may use the shared HTTP server: bearer tokens and the console's sign-in sessions, and their store."""
