"""The `ezat` command: run the stack, manage keys, read usage, migrate the database."""
