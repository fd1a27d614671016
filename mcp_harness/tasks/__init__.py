"""Tasks: the state machine's rules, the service (add, claim, act, end), path reservations, events, and their
store."""
