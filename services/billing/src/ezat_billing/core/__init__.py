"""Pure billing decisions: prices, row shapes, cursors and the public usage page (no I/O)."""
