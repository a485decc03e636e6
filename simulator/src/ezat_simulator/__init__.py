"""EZAT simulator: a deterministic Anthropic-Messages deployment for local runs and tests.

See ``engine`` for the reply and its directives, ``tokens`` for the token model, ``cache`` for
prompt-cache accounting and ``app`` for the HTTP and admin API.
"""
