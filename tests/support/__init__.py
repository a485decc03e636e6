"""Test support shared by every test directory (as nats.py keeps its own): build an ezat
configuration, run a stack for a session, compare against golden files.

- ``support.config``: an ezat TOML configuration (README.md, "Configuration") written from Python
  values: ``write_config(path, edge={...}, models=[model(...)], deployments=[...])``; ``parsed``
  and ``catalogue`` give the parsed ``Config``/``Catalogue`` for unit tests; ``one_simulator``
  the sections the single-simulator stacks (billing, faults) share. A test whose point is
  how a given TOML text is read (tests/common/test_config.py) keeps its literal text instead.
- ``support.stack``: ``running(config, infra, prefix)`` starts the processes of ``ezat up``
  under a subject prefix of their own, supervised, and stops them after; ``key`` makes an API
  key; ``free_ports`` picks ports (``support.config.listen`` and ``base_url`` name them). Each
  suite's conftest keeps only what its stack has of its own (config, extra replicas, the handle
  its tests use).
- ``support.sims``: the simulator's admin API (``/_sim/...``) as stack tests drive it.
- ``support.golden``: ``assert_golden`` (text) and ``assert_golden_json`` (JSON values);
  ``UPDATE_GOLDEN=1`` rewrites the expected file instead, to be reviewed in the diff.

It is the top-level package ``support``: pytest puts ``tests/`` (the first folder above a test
without an ``__init__.py``) on ``sys.path``, for ``make test`` and ``make test-faults`` alike.
"""
