"""``python -m ezat_router``: run the router service until SIGTERM/SIGINT."""

from ezat_common.runtime import run_service

from .app import main

if __name__ == "__main__":
    run_service(main)
