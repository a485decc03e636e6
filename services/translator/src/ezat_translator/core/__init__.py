"""Pure translation decisions: no I/O, no clock, no logging; msgspec values in, values out."""
