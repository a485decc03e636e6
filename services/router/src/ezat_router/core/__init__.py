"""Pure decisions of the router: no await, no logging, no clock, no environment.

Everything here takes what it needs as arguments (time included), so it is tested without a
socket and stays ``mypy --strict`` clean.
"""
