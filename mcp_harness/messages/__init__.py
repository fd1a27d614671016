"""Messages between agents and people: the rules and their store."""
