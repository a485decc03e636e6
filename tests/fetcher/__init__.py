"""Tests of the fetcher service (package so test module names do not clash across services)."""
