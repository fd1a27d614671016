"""The tasks' SQL: the statements in `.sql` files beside this package's modules, and the few built at run time."""
