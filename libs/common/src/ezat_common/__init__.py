"""Shared contract of EZAT Router: wire schemas, NATS subjects, config, logging and metrics helpers.

Nothing in here performs I/O at import time; services import the pieces they need.
"""
