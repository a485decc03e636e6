"""The edge's pure decisions: no I/O, no clock, no logging, no environment (passed in)."""
