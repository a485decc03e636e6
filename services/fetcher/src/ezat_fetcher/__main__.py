"""Run the fetcher: ``python -m ezat_fetcher`` (what ``ezat serve fetcher`` starts)."""

from ezat_common.runtime import run_service

from .app import main

run_service(main)
